//! The JSON Schema of the protocol, generated from the types of this crate (`batond schema`).
//!
//! One document: `$defs` holds every type by name; the root accepts any frame, which is one of
//! `Request`, `Response`, `Notification` or `Error`, each of them a `oneOf` per action (or per
//! notification) that pins `action` and the payload type. `x-actions` and `x-notifications` map
//! each action to its params and result, and each notification to its payload, for generators.
//!
//! What the server reads (params, the envelope) is described as it is accepted: a field with a
//! default may be omitted. What it sends (results, notifications, errors) is described as it is
//! written: a field is required unless the server may leave it out.

use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use crate::{
    AttentionChanged, ClientRequest, Envelope, ErrorPayload, EventRecord, Hello, Notification, PermissionQueueChanged,
    Shutdown, StateChanged, StorageChanged, Task, TaskDeleted,
};

/// Every notification the server sends with its payload schema, in a stable order.
fn notification_schemas(generator: &mut SchemaGenerator) -> Vec<(&'static str, Schema)> {
    vec![
        (Notification::HELLO, generator.subschema_for::<Hello>()),
        (Notification::STATE_CHANGED, generator.subschema_for::<StateChanged>()),
        (Notification::EVENT, generator.subschema_for::<EventRecord>()),
        (Notification::TASK_UPDATED, generator.subschema_for::<Task>()),
        (Notification::TASK_DELETED, generator.subschema_for::<TaskDeleted>()),
        (Notification::SHUTDOWN, generator.subschema_for::<Shutdown>()),
        (Notification::ATTENTION_CHANGED, generator.subschema_for::<AttentionChanged>()),
        (Notification::PERMISSION_QUEUE_CHANGED, generator.subschema_for::<PermissionQueueChanged>()),
        (Notification::STORAGE_CHANGED, generator.subschema_for::<StorageChanged>()),
    ]
}

/// A frame of type `kind` for `action` whose payload has `payload` as its schema.
fn frame(kind: &str, action: &str, payload: Value, required: &[&str]) -> Value {
    json!({
        "title": format!("{action} {kind}"),
        "type": "object",
        "properties": {
            "type": {"const": kind},
            "action": {"const": action},
            "payload": payload,
        },
        "required": required,
    })
}

fn definition_ref(name: &str) -> Value {
    json!({"$ref": format!("#/$defs/{name}")})
}

/// In what the server writes, an optional field that has no value is left out, never `null`
/// (`skip_serializing_if`): its schema says so (the generator allows `null` too). Fields that
/// are always present may be `null` and stay as they are (they are required).
fn absent_not_null(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else { return };
    let required: Vec<String> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if required.contains(name) {
                continue;
            }
            let Some(property) = property.as_object_mut() else { continue };
            if let Some(Value::Array(types)) = property.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let single = types.remove(0);
                    property.insert("type".into(), single);
                }
            }
            if let Some(Value::Array(variants)) = property.get("anyOf") {
                let kept: Vec<Value> =
                    variants.iter().filter(|v| v.get("type") != Some(&json!("null"))).cloned().collect();
                if kept.len() == 1 && variants.len() == 2 {
                    property.remove("anyOf");
                    if let Some(Value::Object(only)) = kept.into_iter().next() {
                        property.extend(only);
                    }
                }
            }
        }
    }
    for keyword in ["oneOf", "anyOf", "allOf"] {
        if let Some(Value::Array(variants)) = object.get_mut(keyword) {
            variants.iter_mut().for_each(absent_not_null);
        }
    }
}

/// The whole protocol as one JSON Schema (draft 2020-12) document.
pub fn protocol_schema() -> Value {
    let mut read = SchemaSettings::draft2020_12().for_deserialize().into_generator();
    let mut written = SchemaSettings::draft2020_12().for_serialize().into_generator();
    read.subschema_for::<Envelope>();
    let error = written.subschema_for::<ErrorPayload>().to_value();
    let actions = ClientRequest::schemas(&mut read, &mut written);
    let notifications = notification_schemas(&mut written);
    let mut definitions = read.take_definitions(true);
    for (name, mut schema) in written.take_definitions(true) {
        if !definitions.contains_key(&name) {
            absent_not_null(&mut schema);
        }
        match definitions.get(&name) {
            // A type both read and written (an enum) is the same either way.
            Some(existing) => assert_eq!(existing, &schema, "{name} differs between what is read and written"),
            None => {
                definitions.insert(name, schema);
            }
        }
    }

    // The event kinds exclude each other (the catch-all takes only kinds no variant names), so
    // they are `oneOf`, as for the other tagged enums; the generator writes `anyOf` because of
    // the untagged catch-all.
    if let Some(Value::Object(event)) = definitions.get_mut("SessionEvent") {
        if let Some(variants) = event.remove("anyOf") {
            event.insert("oneOf".into(), variants);
        }
    }

    let requests: Vec<Value> = actions
        .iter()
        .map(|(action, params, _)| frame("request", action, params.clone().to_value(), &["id", "type", "action"]))
        .collect();
    let responses: Vec<Value> = actions
        .iter()
        .map(|(action, _, result)| {
            frame("response", action, result.clone().to_value(), &["id", "type", "action", "payload", "timestamp"])
        })
        .collect();
    let mut notification_frames: Vec<Value> = notifications
        .iter()
        .map(|(action, payload)| {
            frame("notification", action, payload.clone().to_value(), &["type", "action", "payload", "timestamp"])
        })
        .collect();
    // Newer servers may add notifications: a client skips the ones it does not know.
    let known: Vec<&str> = notifications.iter().map(|(action, _)| *action).collect();
    notification_frames.push(json!({
        "title": "a notification a newer server added",
        "type": "object",
        "properties": {
            "type": {"const": "notification"},
            "action": {"type": "string", "not": {"enum": known}},
        },
        "required": ["type", "action", "timestamp"],
    }));
    let frames = [
        (
            "Request",
            "A client request. `id` is chosen by the client and echoed in the answer. The payload may be \
             omitted (or null) when the action has no required parameter.",
            requests,
        ),
        ("Response", "The successful answer to a request: the action's result.", responses),
        ("Notification", "A frame the server sends on its own.", notification_frames),
    ];
    for (name, description, one_of) in frames {
        definitions.insert(
            name.to_string(),
            json!({"description": description, "allOf": [definition_ref("Envelope")], "oneOf": one_of}),
        );
    }
    definitions.insert(
        "Error".to_string(),
        json!({
            "description": "The failed answer to a request (`id` and `action` echoed when they could be read).",
            "allOf": [definition_ref("Envelope")],
            "type": "object",
            "properties": {"type": {"const": "error"}, "payload": error},
            "required": ["type", "action", "payload", "timestamp"],
        }),
    );

    let x_actions: Map<String, Value> = actions
        .into_iter()
        .map(|(action, params, result)| {
            (action.to_string(), json!({"params": params.to_value(), "result": result.to_value()}))
        })
        .collect();
    let x_notifications: Map<String, Value> =
        notifications.into_iter().map(|(action, payload)| (action.to_string(), payload.to_value())).collect();

    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Baton wire protocol v1",
        "description": "Every frame on ws://HOST:PORT/ws is one JSON envelope: a request, a response, a \
                        notification or an error. Generated from the Rust types by `batond schema`.",
        "x-protocol-version": crate::PROTOCOL_VERSION,
        "oneOf": [
            definition_ref("Request"),
            definition_ref("Response"),
            definition_ref("Notification"),
            definition_ref("Error"),
        ],
        "x-actions": x_actions,
        "x-notifications": x_notifications,
        "$defs": definitions,
    })
}

/// The schema as `batond schema` prints it: pretty JSON and a final newline.
pub fn protocol_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&protocol_schema()).unwrap_or_default();
    text.push('\n');
    text
}
