//! The checked-in JSON Schema (`docs/protocol.schema.json`) is the one the types generate, and it
//! covers every action, notification and event kind.

use baton_protocol::*;
use serde_json::Value;

const REGENERATE: &str = "cargo run -p baton-server -- schema > docs/protocol.schema.json";

fn checked_in() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.schema.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}; run `{REGENERATE}`"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON ({e}); run `{REGENERATE}`"))
}

#[test]
fn checked_in_schema_matches_the_types() {
    let generated = protocol_schema();
    let file = checked_in();
    if generated != file {
        let defs = |v: &Value| v["$defs"].as_object().cloned().unwrap_or_default();
        let (now, then) = (defs(&generated), defs(&file));
        let mut changed: Vec<&String> =
            now.keys().chain(then.keys()).filter(|name| now.get(*name) != then.get(*name)).collect();
        changed.dedup();
        panic!(
            "docs/protocol.schema.json is out of date with the protocol types (changed definitions: {changed:?}).\n\
             Regenerate it with:\n    {REGENERATE}"
        );
    }
}

#[test]
fn schema_covers_every_action_notification_and_event_kind() {
    let schema = protocol_schema();
    let actions = schema["x-actions"].as_object().expect("x-actions");
    let mut named: Vec<&str> = actions.keys().map(String::as_str).collect();
    let mut expected = ClientRequest::ACTIONS.to_vec();
    named.sort_unstable();
    expected.sort_unstable();
    assert_eq!(named, expected);
    let requests = schema["$defs"]["Request"]["oneOf"].as_array().expect("Request.oneOf");
    assert_eq!(requests.len(), ClientRequest::ACTIONS.len());
    for (action, entry) in actions {
        for side in ["params", "result"] {
            let reference = entry[side]["$ref"].as_str().unwrap_or_else(|| panic!("{action} {side} has no $ref"));
            let name = reference.strip_prefix("#/$defs/").expect("local reference");
            assert!(schema["$defs"][name].is_object(), "{action} {side} refers to missing {name}");
        }
    }
    let notifications = schema["x-notifications"].as_object().expect("x-notifications");
    for action in [
        Notification::HELLO,
        Notification::STATE_CHANGED,
        Notification::EVENT,
        Notification::TASK_UPDATED,
        Notification::TASK_DELETED,
        Notification::SHUTDOWN,
        Notification::ATTENTION_CHANGED,
    ] {
        assert!(notifications.contains_key(action), "{action} missing");
    }
    let kinds: Vec<&str> = schema["$defs"]["SessionEvent"]["oneOf"]
        .as_array()
        .expect("SessionEvent.oneOf")
        .iter()
        .filter_map(|variant| variant["properties"]["kind"]["const"].as_str())
        .collect();
    let every_kind = [
        SessionEvent::UserMessage { text: String::new(), turn_id: None },
        SessionEvent::MessageChunk { message_id: None, text: String::new() },
        SessionEvent::ThoughtChunk { message_id: None, text: String::new() },
        SessionEvent::ToolCall {
            tool_call_id: String::new(),
            title: String::new(),
            tool_kind: None,
            status: None,
            content: None,
            raw_input: None,
        },
        SessionEvent::ToolCallUpdate {
            tool_call_id: String::new(),
            title: None,
            status: None,
            content: None,
            raw_output: None,
        },
        SessionEvent::Plan { entries: vec![] },
        SessionEvent::status(""),
        SessionEvent::Error { message: String::new() },
        SessionEvent::TurnStarted { turn_id: None },
        SessionEvent::TurnCompleted { stop_reason: StopReason::EndTurn, turn_id: None },
        SessionEvent::PermissionRequest { request_id: String::new(), tool_call: Value::Null, options: vec![] },
        SessionEvent::PermissionResolved { request_id: String::new(), option_id: None },
        SessionEvent::AvailableCommands { commands: vec![] },
        SessionEvent::Mode { mode_id: String::new() },
        SessionEvent::Options { change: OptionsChange::default() },
        SessionEvent::Queue { queue: MessageQueue::default() },
        SessionEvent::TerminalOutput {
            terminal_id: String::new(),
            command: None,
            output: String::new(),
            offset: 0,
            exit: None,
        },
        SessionEvent::AgentUpdate { update_kind: String::new(), raw: Value::Null },
    ];
    assert_eq!(kinds, every_kind.iter().map(SessionEvent::kind).collect::<Vec<_>>());
    // Every code is a `const`, and any other string is accepted too: a newer server may add codes.
    let mut codes: Vec<&str> = Vec::new();
    let variants = schema["$defs"]["ErrorCode"]["anyOf"].as_array().expect("ErrorCode.anyOf");
    for variant in variants {
        codes.extend(variant["const"].as_str());
    }
    assert!(variants.iter().any(|v| v["type"] == "string" && v.get("const").is_none()), "other codes are accepted");
    codes.sort_unstable();
    let every_code = [
        ErrorCode::BadRequest,
        ErrorCode::ValidationError,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::UnknownAction,
        ErrorCode::Unavailable,
        ErrorCode::InternalError,
    ];
    assert_eq!(every_code.as_slice(), ErrorCode::KNOWN, "every code is listed here");
    let mut every_code = every_code.each_ref().map(ErrorCode::as_str);
    every_code.sort_unstable();
    assert_eq!(codes, every_code);
}

/// A validator for the keywords the generated schema uses, enough to check that real frames
/// match it (the schema describes the JSON the types really produce and accept).
fn validate(root: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let schema = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(format!("{at}: nothing is allowed here")),
        Value::Object(schema) => schema,
        other => return Err(format!("{at}: not a schema: {other}")),
    };
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.strip_prefix("#/$defs/").ok_or_else(|| format!("{at}: non-local {reference}"))?;
        let target = root["$defs"].get(name).ok_or_else(|| format!("{at}: no definition {name}"))?;
        validate(root, target, value, at)?;
    }
    if let Some(kinds) = schema.get("type") {
        let kinds: Vec<&str> = match kinds {
            Value::String(kind) => vec![kind.as_str()],
            Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let fits = |kind: &str| match kind {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => false,
        };
        if !kinds.iter().any(|kind| fits(kind)) {
            return Err(format!("{at}: {value} is not of type {kinds:?}"));
        }
    }
    if let Some(constant) = schema.get("const") {
        if constant != value {
            return Err(format!("{at}: {value} is not {constant}"));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(value) {
            return Err(format!("{at}: {value} is not one of {options:?}"));
        }
    }
    if let (Some(minimum), Some(number)) = (schema.get("minimum").and_then(Value::as_f64), value.as_f64()) {
        if number < minimum {
            return Err(format!("{at}: {number} < {minimum}"));
        }
    }
    if let Value::Object(object) = value {
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !object.contains_key(name) {
                return Err(format!("{at}: missing {name}"));
            }
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                if let Some(field) = object.get(name) {
                    validate(root, property, field, &format!("{at}.{name}"))?;
                }
            }
        }
    }
    if let (Some(items), Value::Array(array)) = (schema.get("items"), value) {
        for (i, item) in array.iter().enumerate() {
            validate(root, items, item, &format!("{at}[{i}]"))?;
        }
    }
    if let (Some("date-time"), Some(text)) = (schema.get("format").and_then(Value::as_str), value.as_str()) {
        if chrono::DateTime::parse_from_rfc3339(text).is_err() {
            return Err(format!("{at}: {text:?} is not an RFC 3339 date-time"));
        }
    }
    if let Some(not) = schema.get("not") {
        if validate(root, not, value, at).is_ok() {
            return Err(format!("{at}: {value} matches what `not` excludes"));
        }
    }
    for sub in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        validate(root, sub, value, at)?;
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        if !any.iter().any(|sub| validate(root, sub, value, at).is_ok()) {
            return Err(format!("{at}: {value} matches none of anyOf"));
        }
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let results: Vec<Result<(), String>> = one.iter().map(|sub| validate(root, sub, value, at)).collect();
        let matching = results.iter().filter(|r| r.is_ok()).count();
        if matching != 1 {
            let reasons: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
            return Err(format!("{at}: matches {matching} of oneOf (exactly one needed); {reasons:?}"));
        }
    }
    Ok(())
}

fn validate_frame(schema: &Value, frame: &Value) -> Result<(), String> {
    validate(schema, schema, frame, "frame")
}

/// Every line of every ```json block of docs/PROTOCOL.md.
fn documented_frames() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/PROTOCOL.md");
    let doc = std::fs::read_to_string(path).expect("read PROTOCOL.md");
    let mut frames = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        match line.trim() {
            "```json" => inside = true,
            "```" => inside = false,
            text if inside && !text.is_empty() => frames.push(serde_json::from_str(text).expect("JSON example")),
            _ => {}
        }
    }
    frames
}

#[test]
fn documented_frames_validate_against_the_schema() {
    let schema = protocol_schema();
    let frames = documented_frames();
    assert!(frames.len() > 30, "the reference has its examples");
    for frame in &frames {
        validate_frame(&schema, frame).unwrap_or_else(|e| panic!("{e}\n{frame}"));
    }
    // The schema constrains: a wrong type, a missing field or an unknown action is refused.
    let mut wrong =
        frames.iter().find(|f| f["action"] == "task.session.status" && f["type"] == "response").unwrap().clone();
    wrong["payload"]["needs_resume"] = Value::String("yes".into());
    assert!(validate_frame(&schema, &wrong).is_err());
    let mut missing = frames.iter().find(|f| f["action"] == "message.add" && f["type"] == "request").unwrap().clone();
    missing["payload"].as_object_mut().unwrap().remove("content");
    assert!(validate_frame(&schema, &missing).is_err());
    let unknown = serde_json::json!({"id": "c1", "type": "request", "action": "task.explode", "payload": {}});
    assert!(validate_frame(&schema, &unknown).is_err());
}

#[test]
fn frames_the_types_write_validate_against_the_schema() {
    let schema = protocol_schema();
    let events = [
        SessionEvent::UserMessage { text: "hi".into(), turn_id: None },
        SessionEvent::MessageChunk { message_id: Some("m1".into()), text: "a".into() },
        SessionEvent::ThoughtChunk { message_id: None, text: "b".into() },
        SessionEvent::ToolCall {
            tool_call_id: "t1".into(),
            title: "Run".into(),
            tool_kind: Some("execute".into()),
            status: None,
            content: Some(serde_json::json!([])),
            raw_input: None,
        },
        SessionEvent::ToolCallUpdate {
            tool_call_id: "t1".into(),
            title: None,
            status: Some("completed".into()),
            content: None,
            raw_output: Some(serde_json::json!({"exit": 0})),
        },
        SessionEvent::Plan {
            entries: vec![PlanEntry { content: "x".into(), priority: "high".into(), status: "".into() }],
        },
        SessionEvent::status("Session resumed"),
        SessionEvent::Error { message: "boom".into() },
        SessionEvent::TurnStarted { turn_id: None },
        SessionEvent::TurnCompleted { stop_reason: "end_turn".into(), turn_id: None },
        SessionEvent::PermissionRequest {
            request_id: "perm-1".into(),
            tool_call: Value::Null,
            options: vec![PermissionOption { option_id: "a".into(), name: "Allow".into(), kind: "allow_once".into() }],
        },
        SessionEvent::PermissionResolved { request_id: "perm-1".into(), option_id: None },
        SessionEvent::AvailableCommands { commands: vec![] },
        SessionEvent::Mode { mode_id: "code".into() },
        SessionEvent::AgentUpdate { update_kind: "usage_update".into(), raw: serde_json::json!({"used": 1}) },
    ];
    for (seq, event) in events.into_iter().enumerate() {
        let record = EventRecord { session_id: "s1".into(), seq: seq as u64 + 1, event, created_at: now_timestamp() };
        let frame = serde_json::to_value(Notification::Event(record).to_envelope()).unwrap();
        validate_frame(&schema, &frame).unwrap_or_else(|e| panic!("{e}\n{frame}"));
    }
    let hello = Hello { protocol_version: PROTOCOL_VERSION, server_version: "0.1.0".into(), capabilities: vec![] };
    let frame = serde_json::to_value(Notification::Hello(hello).to_envelope()).unwrap();
    validate_frame(&schema, &frame).unwrap_or_else(|e| panic!("{e}\n{frame}"));
    let error = Envelope::error(Some("c9".into()), "message.add", &ErrorPayload::conflict("a turn is running"));
    let frame = serde_json::to_value(error).unwrap();
    validate_frame(&schema, &frame).unwrap_or_else(|e| panic!("{e}\n{frame}"));
}

#[test]
fn checked_in_typescript_declarations_match_the_schema() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../server/web/protocol.d.ts");
    let file = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        file == protocol_typescript(),
        "{path} is out of date with the protocol's schema. Regenerate it with:\n    \
         cargo run -p baton-server -- schema --typescript > server/web/protocol.d.ts"
    );
}

#[test]
fn the_schema_accepts_what_a_newer_server_may_add_and_still_checks_what_it_knows() {
    let schema = protocol_schema();
    let event = serde_json::json!({
        "type": "notification", "action": "session.event", "timestamp": "2025-06-02T14:03:12.004Z",
        "payload": {"session_id": "s1", "seq": 7, "created_at": "2025-06-02T14:03:12.004Z",
                    "event": {"kind": "usage", "tokens": 1200}},
    });
    validate_frame(&schema, &event).unwrap_or_else(|e| panic!("an unknown event kind is accepted: {e}"));
    let notification = serde_json::json!({
        "type": "notification", "action": "server.shutdown", "timestamp": "2025-06-02T14:03:12.004Z",
        "payload": {"reason": "restart"},
    });
    validate_frame(&schema, &notification).unwrap_or_else(|e| panic!("an unknown notification is accepted: {e}"));
    // A known kind or action with a broken payload is still refused.
    let mut broken = event.clone();
    broken["payload"]["event"] = serde_json::json!({"kind": "message_chunk"});
    assert!(validate_frame(&schema, &broken).is_err(), "a message_chunk without text is refused");
    let mut broken = notification;
    broken["action"] = "session.state_changed".into();
    assert!(validate_frame(&schema, &broken).is_err(), "a state change without its fields is refused");
}

#[test]
fn timestamps_are_date_times_and_fields_the_server_leaves_out_are_never_null() {
    let schema = protocol_schema();
    let frame = |payload: Value| {
        serde_json::json!({"type": "notification", "action": "session.event", "timestamp": "2025-06-02T14:03:12.004Z",
                           "payload": payload})
    };
    let good = serde_json::json!({"session_id": "s1", "seq": 1, "created_at": "2025-06-02T14:03:12.004Z",
                                  "event": {"kind": "message_chunk", "text": "hi", "message_id": "m1"}});
    validate_frame(&schema, &frame(good.clone())).unwrap_or_else(|e| panic!("{e}"));
    let mut not_a_time = good.clone();
    not_a_time["created_at"] = "yesterday".into();
    assert!(validate_frame(&schema, &frame(not_a_time)).is_err(), "a timestamp is a date-time");
    let mut null_id = good;
    null_id["event"]["message_id"] = Value::Null;
    assert!(validate_frame(&schema, &frame(null_id)).is_err(), "message_id may be absent, not null");
}
