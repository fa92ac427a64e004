//! The examples in docs/PROTOCOL.md are real frames: every request parses as its action's params,
//! every response as its result, every notification, error and event kind as its type, with no
//! field the types do not have; and every action, notification and event kind has an example.

use std::collections::BTreeSet;

use baton_protocol::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/PROTOCOL.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Every line of every ```json block.
fn json_lines(doc: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        match line.trim() {
            "```json" => inside = true,
            "```" => inside = false,
            text if inside && !text.is_empty() => lines.push(text.to_string()),
            _ => {}
        }
    }
    lines
}

/// `example` says nothing the typed value does not: every key it has is a field of the type
/// (no misspelled or invented field slips through serde's leniency), with the same value.
fn assert_covered(example: &Value, typed: &Value, at: &str) {
    match (example, typed) {
        (Value::Object(e), Value::Object(t)) => {
            for (key, value) in e {
                let Some(typed_value) = t.get(key) else { panic!("{at}.{key} is not a field of the type") };
                assert_covered(value, typed_value, &format!("{at}.{key}"));
            }
        }
        (Value::Array(e), Value::Array(t)) => {
            assert_eq!(e.len(), t.len(), "{at}");
            for (i, (e, t)) in e.iter().zip(t).enumerate() {
                assert_covered(e, t, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(example, typed, "{at}"),
    }
}

fn typed<T: Serialize + DeserializeOwned>(payload: &Value, what: &str) -> Result<(), String> {
    let value: T = serde_json::from_value(payload.clone()).map_err(|e| format!("{what}: {e}"))?;
    let back = serde_json::to_value(&value).map_err(|e| e.to_string())?;
    assert_covered(payload, &back, what);
    Ok(())
}

/// Decodes a result payload as the result type of `action`.
fn check_result(action: &str, payload: &Value) -> Result<(), String> {
    macro_rules! by_action {
        ($($params:ty),+) => {
            match action {
                $(a if a == <$params as Request>::ACTION => typed::<<$params as Request>::Response>(payload, action),)+
                other => Err(format!("unknown action {other}")),
            }
        };
    }
    by_action!(
        AgentListParams,
        TaskCreateParams,
        TaskListParams,
        TaskUpdateParams,
        TaskArchiveParams,
        TaskUnarchiveParams,
        TaskDeleteParams,
        SessionListParams,
        SessionStatusParams,
        SessionResumeParams,
        SessionStartParams,
        SessionCancelParams,
        SessionStopParams,
        MessageAddParams,
        MessageListParams,
        SubscribeParams,
        UnsubscribeParams,
        PermissionRespondParams,
        PingParams,
        SessionForkParams,
        UsageGetParams,
        SessionExportParams,
        MessageSearchParams,
        PermissionListParams,
        PermissionRuleListParams,
        PermissionRuleRevokeParams,
        SessionOptionsParams,
        SessionSetModeParams,
        SessionSetOptionParams,
        QueueListParams,
        QueueEditParams,
        QueueRemoveParams,
        QueueReleaseParams
    )
}

#[test]
fn every_json_example_is_a_real_frame_and_every_action_has_one() {
    let doc = doc();
    let mut requests = BTreeSet::new();
    let mut responses = BTreeSet::new();
    let mut notifications = BTreeSet::new();
    let mut errors = 0;
    for line in json_lines(&doc) {
        let envelope: Envelope =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not an envelope ({e}): {line}"));
        let raw: Value = serde_json::from_str(&line).expect("JSON");
        assert_covered(&raw, &serde_json::to_value(&envelope).expect("envelope"), "envelope");
        let action = envelope.action.clone();
        match envelope.kind {
            MessageType::Request => {
                let request = ClientRequest::parse(&action, envelope.payload.clone())
                    .unwrap_or_else(|e| panic!("request example does not parse: {e}\n{line}"));
                let payload = if envelope.payload.is_null() { serde_json::json!({}) } else { envelope.payload };
                assert_covered(&payload, &request.payload(), &action);
                requests.insert(action);
            }
            MessageType::Response => {
                check_result(&action, &envelope.payload).unwrap_or_else(|e| panic!("{e}\n{line}"));
                responses.insert(action);
            }
            MessageType::Notification => {
                Notification::from_envelope(&envelope).unwrap_or_else(|e| panic!("{e}\n{line}"));
                typed::<Envelope>(&raw, "notification").expect("notification");
                notifications.insert(action);
            }
            MessageType::Error => {
                typed::<ErrorPayload>(&envelope.payload, "error payload").unwrap_or_else(|e| panic!("{e}\n{line}"));
                errors += 1;
            }
        }
    }
    let actions: BTreeSet<String> = ClientRequest::ACTIONS.iter().map(|a| a.to_string()).collect();
    assert_eq!(requests, actions, "every action has a request example");
    assert_eq!(responses, actions, "every action has a response example");
    let every_notification: BTreeSet<String> = [
        Notification::HELLO,
        Notification::STATE_CHANGED,
        Notification::EVENT,
        Notification::TASK_UPDATED,
        Notification::TASK_DELETED,
        Notification::SHUTDOWN,
        Notification::ATTENTION_CHANGED,
        Notification::PERMISSION_QUEUE_CHANGED,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    assert_eq!(notifications, every_notification, "every notification has an example");
    assert!(errors > 0, "an error example");
}

#[test]
fn every_event_kind_has_a_real_example() {
    let doc = doc();
    let table = doc.split("### Event kinds").nth(1).expect("an Event kinds section");
    let table = table.split("\n## ").next().unwrap_or(table);
    let mut kinds = BTreeSet::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        // The last cell holds the example `event` object in backquotes.
        let cell = row.trim_end_matches('|').rsplit('|').next().unwrap_or("").trim();
        if !cell.starts_with("`{") {
            continue; // the header row
        }
        let example = cell.trim_matches('`');
        let value: Value = serde_json::from_str(example).unwrap_or_else(|e| panic!("not JSON ({e}): {row}"));
        typed::<SessionEvent>(&value, "event").unwrap_or_else(|e| panic!("{e}\n{row}"));
        let event: SessionEvent = serde_json::from_value(value).expect("event");
        let kind = event.kind().to_string();
        assert!(row.starts_with(&format!("| `{kind}`")), "the example of row {row} is a {kind}");
        kinds.insert(kind);
    }
    let schema = protocol_schema();
    let every_kind: BTreeSet<String> = schema["$defs"]["SessionEvent"]["oneOf"]
        .as_array()
        .expect("SessionEvent variants")
        .iter()
        .filter_map(|variant| variant["properties"]["kind"]["const"].as_str().map(str::to_string))
        .collect();
    assert_eq!(kinds, every_kind, "every event kind has an example");
}

#[test]
fn the_rust_walkthrough_is_the_crate_example() {
    let doc = doc();
    let start = doc.find("```rust\n").expect("a Rust example in PROTOCOL.md") + "```rust\n".len();
    let end = start + doc[start..].find("```\n").expect("its end");
    let walkthrough = &doc[start..end];
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).expect("read lib.rs");
    let example: String = lib
        .lines()
        .skip_while(|l| *l != "//! ```no_run")
        .skip(1)
        .take_while(|l| *l != "//! ```")
        .map(|l| format!("{}\n", l.strip_prefix("//! ").unwrap_or(l.trim_start_matches("//!"))))
        .collect();
    assert_eq!(walkthrough, example, "docs/PROTOCOL.md §8 and the crate example in shared/src/lib.rs differ");
}
