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
    for action in [Notification::HELLO, Notification::STATE_CHANGED, Notification::EVENT, Notification::TASK_UPDATED] {
        assert!(notifications.contains_key(action), "{action} missing");
    }
    let kinds: Vec<&str> = schema["$defs"]["SessionEvent"]["oneOf"]
        .as_array()
        .expect("SessionEvent.oneOf")
        .iter()
        .filter_map(|variant| variant["properties"]["kind"]["const"].as_str())
        .collect();
    let every_kind = [
        SessionEvent::UserMessage { text: String::new() },
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
        SessionEvent::TurnStarted {},
        SessionEvent::TurnCompleted { stop_reason: String::new() },
        SessionEvent::PermissionRequest { request_id: String::new(), tool_call: Value::Null, options: vec![] },
        SessionEvent::PermissionResolved { request_id: String::new(), option_id: None },
        SessionEvent::AvailableCommands { commands: vec![] },
        SessionEvent::Mode { mode_id: String::new() },
        SessionEvent::AgentUpdate { update_kind: String::new(), raw: Value::Null },
    ];
    assert_eq!(kinds, every_kind.iter().map(SessionEvent::kind).collect::<Vec<_>>());
    // schemars lists documented codes as `const`s and the others in one `enum`.
    let mut codes: Vec<&str> = Vec::new();
    for variant in schema["$defs"]["ErrorCode"]["oneOf"].as_array().expect("ErrorCode.oneOf") {
        codes.extend(variant["const"].as_str());
        codes.extend(variant["enum"].as_array().into_iter().flatten().filter_map(Value::as_str));
    }
    codes.sort_unstable();
    let mut every_code = [
        ErrorCode::BadRequest,
        ErrorCode::ValidationError,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::UnknownAction,
        ErrorCode::Unavailable,
        ErrorCode::InternalError,
    ]
    .map(ErrorCode::as_str);
    every_code.sort_unstable();
    assert_eq!(codes, every_code);
}
