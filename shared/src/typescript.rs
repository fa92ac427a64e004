//! TypeScript declarations of the protocol, generated from its JSON Schema
//! (`batond schema --typescript`, checked in as `server/web/protocol.d.ts`).
//!
//! Written by hand rather than with a JSON-Schema-to-TypeScript tool: those are JavaScript
//! programs (a Node toolchain in the build), and the schema uses a small, fixed set of keywords
//! (`type`, `properties`, `required`, `enum`, `const`, `oneOf`, `anyOf`, `allOf`, `items`,
//! `$ref`), which map one to one onto TypeScript.

use std::fmt::Write;

use serde_json::{Map, Value};

use crate::schema::protocol_schema;

/// The frame definitions, written by hand below instead of from their `$defs`.
const FRAMES: [&str; 4] = ["Request", "Response", "Notification", "Error"];

/// Open unions and their catch-all (what a newer server may add): the union is declared with its
/// known members only, since a member with `kind: string` would stop `switch (event.kind)` from
/// narrowing to the known kinds; where the union is used, the catch-all is part of the type
/// (`SessionEvent | UnknownEvent`), so that a kind added later is representable. A type guard
/// (`isKnownEvent` of baton-client.js) narrows such a value to the known members.
const CATCH_ALLS: [(&str, &str); 1] = [("SessionEvent", "UnknownEvent")];

/// The catch-alls, written by hand: the schema's `not` (no known kind) has no TypeScript
/// equivalent; `string & {}` keeps the known kinds as completions of `kind`.
const CATCH_ALL_TYPES: &str = r#"/**
 * An event of a kind a newer server added, with its other fields as sent: skip it (or show it
 * generically); its seq still counts.
 */
export interface UnknownEvent {
  kind: string & {};
  [field: string]: unknown;
}

"#;

/// The whole protocol as a TypeScript declaration file.
pub fn protocol_typescript() -> String {
    let schema = protocol_schema();
    let mut out = String::new();
    out.push_str(
        "// Baton wire protocol: TypeScript declarations generated from its JSON Schema.\n\
         // Do not edit: regenerate with `cargo run -p baton-server -- schema --typescript > server/web/protocol.d.ts`.\n\n",
    );
    let _ = writeln!(out, "/** The protocol version these declarations describe. */");
    let _ = writeln!(out, "export type ProtocolVersion = {};\n", schema["x-protocol-version"]);
    let empty = Map::new();
    let definitions = schema["$defs"].as_object().unwrap_or(&empty);
    for (name, definition) in sorted(definitions) {
        if FRAMES.contains(&name.as_str()) {
            continue;
        }
        if CATCH_ALLS.iter().any(|(_, catch_all)| catch_all == name) {
            out.push_str(CATCH_ALL_TYPES);
            continue;
        }
        doc_comment(&mut out, definition, "");
        if definition["type"] == "object" && definition.get("properties").is_some() {
            let _ = writeln!(out, "export interface {name} {}\n", object_type(definition, ""));
        } else {
            let _ = writeln!(out, "export type {name} = {};\n", type_of(definition, ""));
        }
    }

    out.push_str("/** Every action: its request payload (`params`) and its answer (`result`). */\n");
    out.push_str("export interface Actions {\n");
    for (action, entry) in sorted(schema["x-actions"].as_object().unwrap_or(&empty)) {
        let _ = writeln!(
            out,
            "  {action:?}: {{ params: {}; result: {} }};",
            type_of(&entry["params"], "  "),
            type_of(&entry["result"], "  ")
        );
    }
    out.push_str("}\n\n/** Every notification the server sends, with its payload. */\n");
    out.push_str("export interface Notifications {\n");
    for (action, payload) in sorted(schema["x-notifications"].as_object().unwrap_or(&empty)) {
        let _ = writeln!(out, "  {action:?}: {};", type_of(payload, "  "));
    }
    out.push_str("}\n\n");
    out.push_str(FRAME_TYPES);
    out
}

/// The frame types, written by hand: each is a discriminated union over its actions, so that
/// `frame.type === "response" && frame.action === "task.create"` narrows `payload` to that
/// action's result. A notification this version does not know (a newer server may add some)
/// is an `UnknownNotificationFrame`, part of `ServerFrame`; `isKnownNotification` of
/// baton-client.js tells the two apart.
const FRAME_TYPES: &str = r#"/** An action name. */
export type Action = keyof Actions;
/** A notification name. */
export type NotificationAction = keyof Notifications;

/** A request frame for action `A` (a union over the actions when `A` is). */
export type RequestFrame<A extends Action = Action> = A extends Action
  ? { id: string; type: "request"; action: A; payload?: Actions[A]["params"]; timestamp?: string }
  : never;

/** A response frame: the answer to the request with the same `id`. */
export type ResponseFrame<A extends Action = Action> = A extends Action
  ? { id: string; type: "response"; action: A; payload: Actions[A]["result"]; timestamp: string }
  : never;

/** A notification frame the server sends on its own, of a notification these declarations know. */
export type NotificationFrame<N extends NotificationAction = NotificationAction> = N extends NotificationAction
  ? { type: "notification"; action: N; payload: Notifications[N]; timestamp: string }
  : never;

/**
 * A notification of a name these declarations do not know: a newer server may send new ones.
 * Ignore it (or show it generically).
 */
export interface UnknownNotificationFrame {
  type: "notification";
  action: string & {};
  payload: unknown;
  timestamp: string;
}

/** An error frame: the failed answer to a request (`id` absent when it could not be read). */
export interface ErrorFrame {
  id?: string;
  type: "error";
  action: string;
  payload: ErrorPayload;
  timestamp: string;
}

/** Any frame the server sends. */
export type ServerFrame = ResponseFrame | NotificationFrame | UnknownNotificationFrame | ErrorFrame;
"#;

/// A map's entries by name: the same output whether or not serde_json keeps insertion order
/// (its `preserve_order` feature depends on what else is in the build).
fn sorted(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

fn doc_comment(out: &mut String, schema: &Value, indent: &str) {
    if let Some(text) = schema["description"].as_str() {
        let text = text.replace("*/", "*\\/");
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() == 1 {
            let _ = writeln!(out, "{indent}/** {} */", lines[0]);
        } else {
            let _ = writeln!(out, "{indent}/**");
            for line in lines {
                let _ = writeln!(out, "{indent} *{}{line}", if line.is_empty() { "" } else { " " });
            }
            let _ = writeln!(out, "{indent} */");
        }
    }
}

/// `{ field: T; optional?: T; }` for an object schema with properties.
fn object_type(schema: &Value, indent: &str) -> String {
    let required: Vec<&str> =
        schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let inner = format!("{indent}  ");
    let mut out = String::from("{\n");
    if let Some(properties) = schema["properties"].as_object() {
        for (field, property) in sorted(properties) {
            doc_comment(&mut out, property, &inner);
            let optional = if required.contains(&field.as_str()) { "" } else { "?" };
            let _ = writeln!(out, "{inner}{field}{optional}: {};", type_of(property, &inner));
        }
    }
    out.push_str(indent);
    out.push('}');
    out
}

fn union(members: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for member in members {
        if !unique.contains(&member) {
            unique.push(member);
        }
    }
    match unique.len() {
        0 => "never".into(),
        1 => unique.remove(0),
        _ => unique.join(" | "),
    }
}

/// Known string values plus "any other string" (an open string enum such as `StopReason`):
/// `string & {}` keeps the known values as editor completions, where a bare `string` would
/// swallow them.
fn open_string_union(mut members: Vec<String>) -> Vec<String> {
    let has_literals = members.iter().any(|m| m.starts_with('"'));
    for member in members.iter_mut().filter(|m| has_literals && m.as_str() == "string") {
        *member = "(string & {})".into();
    }
    members
}

/// The TypeScript type of a schema.
fn type_of(schema: &Value, indent: &str) -> String {
    let Some(object) = schema.as_object() else {
        // `true` accepts anything, `false` nothing.
        return if schema == &Value::Bool(false) { "never".into() } else { "unknown".into() };
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or("unknown");
        return match CATCH_ALLS.iter().find(|(union, _)| *union == name) {
            Some((union, catch_all)) => format!("{union} | {catch_all}"),
            None => name.to_string(),
        };
    }
    if let Some(constant) = object.get("const") {
        return constant.to_string();
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        return union(values.iter().map(Value::to_string).collect());
    }
    for keyword in ["oneOf", "anyOf"] {
        if let Some(variants) = object.get(keyword).and_then(Value::as_array) {
            let members = variants
                .iter()
                .filter(|v| {
                    let name = v["$ref"].as_str().and_then(|r| r.rsplit('/').next()).unwrap_or("");
                    !CATCH_ALLS.iter().any(|(_, catch_all)| *catch_all == name)
                })
                .map(|v| parenthesised(v, indent))
                .collect();
            return union(open_string_union(members));
        }
    }
    match &object.get("type") {
        Some(Value::Array(types)) => {
            let members = types
                .iter()
                .map(|t| {
                    let mut single = object.clone();
                    single.insert("type".into(), t.clone());
                    parenthesised(&Value::Object(single), indent)
                })
                .collect();
            union(members)
        }
        Some(Value::String(name)) => match name.as_str() {
            "string" => "string".into(),
            "integer" | "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => format!("{}[]", parenthesised(object.get("items").unwrap_or(&Value::Bool(true)), indent)),
            "object" if object.contains_key("properties") => object_type(schema, indent),
            "object" => match object.get("additionalProperties") {
                Some(values) if values.is_object() => format!("Record<string, {}>", type_of(values, indent)),
                _ => "Record<string, unknown>".into(),
            },
            _ => "unknown".into(),
        },
        _ => "unknown".into(),
    }
}

/// A union member or array item: a union inside is put in parentheses.
fn parenthesised(schema: &Value, indent: &str) -> String {
    let text = type_of(schema, indent);
    // Only a `|` outside every `{ }` makes this type a union.
    let mut depth = 0usize;
    let top_level_union = text.chars().any(|c| {
        match c {
            '{' | '(' | '<' => depth += 1,
            '}' | ')' | '>' => depth = depth.saturating_sub(1),
            '|' if depth == 0 => return true,
            _ => {}
        }
        false
    });
    if top_level_union {
        format!("({text})")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_keywords_map_onto_typescript() {
        assert_eq!(type_of(&json!({"type": ["string", "null"]}), ""), "string | null");
        assert_eq!(type_of(&json!({"type": "integer", "format": "uint64", "minimum": 0}), ""), "number");
        assert_eq!(type_of(&json!({"type": "array", "items": {"$ref": "#/$defs/PlanEntry"}}), ""), "PlanEntry[]");
        assert_eq!(type_of(&json!({"enum": ["A", "B"]}), ""), "\"A\" | \"B\"");
        assert_eq!(type_of(&json!({"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]}), ""), "X | null");
        assert_eq!(
            type_of(&json!({"anyOf": [{"type": "string", "const": "a"}, {"type": "string"}]}), ""),
            "\"a\" | (string & {})",
            "an open string enum keeps its known values"
        );
        assert_eq!(type_of(&json!({"anyOf": [{"type": "string"}, {"type": "null"}]}), ""), "string | null");
        assert_eq!(type_of(&json!(true), ""), "unknown");
        assert_eq!(
            type_of(
                &json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {}}, "required": ["a"]}),
                ""
            ),
            "{\n  a: string;\n  b?: unknown;\n}"
        );
    }

    #[test]
    fn every_definition_and_action_is_declared() {
        let text = protocol_typescript();
        for name in ["SessionEvent", "EventRecord", "SessionStatus", "ErrorCode", "Actions", "Notifications"] {
            assert!(
                text.contains(&format!("export interface {name} ")) || text.contains(&format!("export type {name} =")),
                "{name}"
            );
        }
        assert!(text.contains("\"task.session.resume\": { params: SessionResumeParams; result: SessionResumeResult };"));
        assert!(text.contains("\"session.event\": EventRecord;"));
    }
}
