//! The fold rules (PROTOCOL.md §7), checked once on a script of events that exercises each;
//! the server's SQL fold and the TUI's transcript are checked against the same script.

use baton_protocol::*;

fn folded() -> Vec<Message> {
    let script = include_str!("fixtures/fold_script.json");
    let events: Vec<SessionEvent> = serde_json::from_str(script).expect("the script parses");
    let mut fold = MessageFold::default();
    for (index, event) in events.into_iter().enumerate() {
        let record = EventRecord {
            session_id: "s1".into(),
            seq: index as u64 + 1,
            event,
            created_at: format!("2026-01-01T00:00:{:02}Z", index),
        };
        assert!(fold.apply(&record));
        assert!(!fold.apply(&record), "a replayed event changes nothing");
    }
    fold.messages().to_vec()
}

#[test]
fn the_script_folds_by_the_rules() {
    let messages = folded();
    let shown: Vec<(MessageKind, &str, Option<&str>)> =
        messages.iter().map(|m| (m.kind, m.text.as_str(), m.status.as_deref())).collect();
    assert_eq!(
        shown,
        vec![
            (MessageKind::User, "remember pineapple", None),
            // Chunks without an id continue each other; another id starts a new message.
            (MessageKind::Thought, "The user wants me to remember.", None),
            (MessageKind::Agent, "OK, I will.", None),
            (MessageKind::Agent, "Another message.", None),
            // One entry per tool call, updated in place, then replaced by a later tool_call.
            (MessageKind::ToolCall, "Read again", Some("pending")),
            // Consecutive plans share one entry.
            (MessageKind::Plan, "", None),
            (MessageKind::Permission, "Write file", Some("selected:allow")),
            (MessageKind::Permission, "Permission requested", Some("cancelled")),
            // A chunk after another entry starts a new message even with the same id.
            (MessageKind::Agent, "After the tool.", None),
            (MessageKind::Status, "Turn cancelled.", None),
            // The end of a turn closes everything: the next turn starts new messages.
            (MessageKind::Agent, "A new turn starts a new message.", None),
            // An update of a call never seen still gets an entry.
            (MessageKind::ToolCall, "t9", Some("failed")),
            (MessageKind::Status, "Session resumed.", None),
            (MessageKind::Error, "Something failed.", None),
            (MessageKind::Agent, "Still streaming", None),
        ]
    );
    let plan = messages[5].data.as_ref().expect("plan data");
    assert_eq!(plan["entries"][0]["status"], "completed", "the newer plan replaced the older");
    let still = &messages[14];
    assert_eq!(
        (still.seq, still.updated_at.as_str()),
        (27, "2026-01-01T00:00:27Z"),
        "starts at its first chunk, updated by its last"
    );
}

#[test]
fn tool_call_updates_merge_into_the_data() {
    let script = r#"[
        {"kind": "tool_call", "tool_call_id": "t1", "title": "Read", "tool_kind": "read", "status": "pending"},
        {"kind": "tool_call_update", "tool_call_id": "t1", "status": "in_progress", "content": ["42"]},
        {"kind": "tool_call_update", "tool_call_id": "t1", "raw_output": {"bytes": 2}}
    ]"#;
    let events: Vec<SessionEvent> = serde_json::from_str(script).unwrap();
    let mut fold = MessageFold::default();
    for (index, event) in events.into_iter().enumerate() {
        fold.apply(&EventRecord { session_id: "s".into(), seq: index as u64 + 1, event, created_at: "t".into() });
    }
    let [call] = fold.messages() else { panic!("one entry: {:?}", fold.messages()) };
    assert_eq!(call.status.as_deref(), Some("in_progress"), "an update without a status keeps it");
    let data = call.data.as_ref().unwrap();
    assert_eq!(
        (data["tool_kind"].as_str(), &data["content"], &data["raw_output"]["bytes"]),
        (Some("read"), &serde_json::json!(["42"]), &serde_json::json!(2))
    );
}

/// A terminal's events fold into one tool-call entry: its command the title, its output
/// appended and bounded to the end, its exit setting the status.
#[test]
fn a_terminal_folds_into_one_entry_with_the_end_of_its_output() {
    let mut fold = MessageFold::default();
    let piece = "x".repeat(40 * 1024);
    let events = [
        SessionEvent::TerminalOutput {
            terminal_id: "term-1".into(),
            command: Some("make".into()),
            offset: 0,
            output: String::new(),
            exit: None,
        },
        SessionEvent::TerminalOutput {
            terminal_id: "term-1".into(),
            command: None,
            output: format!("{piece}a"),
            offset: 0,
            exit: None,
        },
        SessionEvent::status("between"),
        SessionEvent::TerminalOutput {
            terminal_id: "term-1".into(),
            command: None,
            output: format!("{piece}b"),
            offset: 40 * 1024 + 1,
            exit: None,
        },
        // The same piece again (a client that folded a page and then a replay): not added twice.
        SessionEvent::TerminalOutput {
            terminal_id: "term-1".into(),
            command: None,
            output: format!("{piece}b"),
            offset: 40 * 1024 + 1,
            exit: None,
        },
        SessionEvent::TerminalOutput {
            terminal_id: "term-1".into(),
            command: None,
            output: String::new(),
            offset: 80 * 1024 + 2,
            exit: Some(TerminalExit { exit_code: Some(2), signal: None }),
        },
    ];
    for (index, event) in events.into_iter().enumerate() {
        let record = EventRecord {
            session_id: "s1".into(),
            seq: index as u64 + 1,
            event,
            created_at: "2026-01-01T00:00:00Z".into(),
        };
        assert!(fold.apply(&record));
    }
    let messages = fold.messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    let terminal = &messages[0];
    assert_eq!(
        (terminal.kind, terminal.text.as_str(), terminal.tool_call_id.as_deref(), terminal.status.as_deref()),
        (MessageKind::ToolCall, "$ make", Some("terminal:term-1"), Some("failed"))
    );
    let data = terminal.data.as_ref().expect("data");
    let output = data["terminal"]["output"].as_str().expect("output");
    assert_eq!(output.len(), MAX_FOLDED_TERMINAL_BYTES, "bounded");
    assert!(output.ends_with(&format!("a{piece}b")), "the end is kept");
    assert_eq!(data["terminal"]["exit"]["exit_code"], 2);
    assert_eq!(data["terminal"]["total"], 80 * 1024 + 2, "every byte counted once");
}
