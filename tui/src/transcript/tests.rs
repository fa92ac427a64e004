use baton_protocol::{
    EventRecord, Message, MessageKind, PermissionOption, PlanEntry, SessionEvent, StopReason, ToolCallStatus,
};
use serde_json::json;

use super::*;

fn record(seq: u64, event: SessionEvent) -> EventRecord {
    EventRecord { session_id: "s-1".into(), seq, event, created_at: "2026-11-29T18:00:00.000Z".into() }
}

fn chunk(id: &str, text: &str) -> SessionEvent {
    SessionEvent::MessageChunk { message_id: Some(id.into()), text: text.into() }
}

fn message(seq: u64, kind: MessageKind, text: &str) -> Message {
    Message {
        seq,
        kind,
        text: text.into(),
        message_id: None,
        tool_call_id: None,
        status: None,
        data: None,
        created_at: "2026-11-29T18:00:00.000Z".into(),
        updated_at: "2026-11-29T18:00:00.000Z".into(),
    }
}

fn texts(transcript: &Transcript) -> Vec<String> {
    transcript
        .entries()
        .iter()
        .map(|e| match &e.body {
            EntryBody::User(t) => format!("user:{t}"),
            EntryBody::Agent { text, .. } => format!("agent:{text}"),
            EntryBody::Thought { text, .. } => format!("thought:{text}"),
            EntryBody::ToolCall(c) => {
                format!("tool:{}:{}", c.title, c.status.as_ref().map(ToolCallStatus::as_str).unwrap_or_default())
            }
            EntryBody::Plan(p) => format!("plan:{}", p.len()),
            EntryBody::Status(t) => format!("status:{t}"),
            EntryBody::Error(t) => format!("error:{t}"),
            EntryBody::Permission(p) => format!("permission:{}", p.request_id),
        })
        .collect()
}

#[test]
fn chunks_with_one_message_id_fold_into_one_agent_message() {
    let mut t = Transcript::default();
    t.apply(&record(1, SessionEvent::UserMessage { text: "hi".into(), turn_id: None }));
    t.apply(&record(2, chunk("m1", "Hel")));
    t.apply(&record(3, chunk("m1", "lo ")));
    t.apply(&record(4, chunk("m1", "there")));
    assert_eq!(texts(&t), vec!["user:hi", "agent:Hello there"]);
    assert_eq!(t.last_seq(), 4);
}

#[test]
fn a_replayed_seq_is_ignored() {
    let mut t = Transcript::default();
    assert!(t.apply(&record(1, chunk("m1", "one "))));
    assert!(t.apply(&record(2, chunk("m1", "two"))));
    assert!(!t.apply(&record(2, chunk("m1", "two"))));
    assert!(!t.apply(&record(1, chunk("m1", "one "))));
    assert_eq!(texts(&t), vec!["agent:one two"]);
}

#[test]
fn thoughts_and_messages_fold_separately() {
    let mut t = Transcript::default();
    let thought = |text: &str| SessionEvent::ThoughtChunk { message_id: None, text: text.into() };
    t.apply(&record(1, thought("think")));
    t.apply(&record(2, thought("ing")));
    t.apply(&record(3, chunk("m1", "answer")));
    assert_eq!(texts(&t), vec!["thought:thinking", "agent:answer"]);
}

#[test]
fn tool_call_updates_change_the_call_in_place() {
    let mut t = Transcript::default();
    t.apply(&record(
        1,
        SessionEvent::ToolCall {
            tool_call_id: "t1".into(),
            title: "Read file".into(),
            tool_kind: Some("read".into()),
            status: Some("pending".into()),
            content: None,
            raw_input: None,
        },
    ));
    t.apply(&record(2, chunk("m1", "reading")));
    t.apply(&record(
        3,
        SessionEvent::ToolCallUpdate {
            tool_call_id: "t1".into(),
            title: None,
            status: Some("completed".into()),
            content: None,
            raw_output: None,
        },
    ));
    assert_eq!(texts(&t), vec!["tool:Read file:completed", "agent:reading"]);
}

/// Expanding a tool call shows its input, content and output: the live fold keeps them as the
/// server's `message.list` does, so a reloaded call shows the same.
#[test]
fn a_tool_call_keeps_its_input_content_and_output_live_and_reloaded() {
    let events = [
        SessionEvent::ToolCall {
            tool_call_id: "t1".into(),
            title: "Edit file".into(),
            tool_kind: Some("edit".into()),
            status: Some("pending".into()),
            content: None,
            raw_input: Some(json!({"path": "src/lib.rs"})),
        },
        SessionEvent::ToolCallUpdate {
            tool_call_id: "t1".into(),
            title: None,
            status: Some("completed".into()),
            content: Some(json!([{"type": "content", "content": {"type": "text", "text": "done"}}])),
            raw_output: Some(json!({"ok": true})),
        },
    ];
    let mut live = Transcript::default();
    let mut server = baton_protocol::MessageFold::default();
    for (i, event) in events.into_iter().enumerate() {
        live.apply(&record(i as u64 + 1, event.clone()));
        server.apply(&record(i as u64 + 1, event));
    }
    // One more entry, so the call is not the newest (rebuilt) entry of the backlog.
    live.apply(&record(3, chunk("m1", "edited")));
    server.apply(&record(3, chunk("m1", "edited")));
    let reloaded = Transcript::from_backlog(server.messages().to_vec(), false);
    for transcript in [&live, &reloaded] {
        let EntryBody::ToolCall(call) = &transcript.entries()[0].body else { panic!("not a tool call") };
        assert_eq!(call.raw_input(), Some(&json!({"path": "src/lib.rs"})));
        assert_eq!(call.raw_output(), Some(&json!({"ok": true})));
        assert_eq!(call.content(), &[json!({"type": "content", "content": {"type": "text", "text": "done"}})]);
        assert_eq!(call.status, Some(ToolCallStatus::Completed));
    }
}

#[test]
fn a_new_plan_replaces_the_previous_one() {
    let mut t = Transcript::default();
    let entry =
        |content: &str| PlanEntry { content: content.into(), priority: "medium".into(), status: "pending".into() };
    t.apply(&record(1, SessionEvent::Plan { entries: vec![entry("a")] }));
    t.apply(&record(2, SessionEvent::Plan { entries: vec![entry("a"), entry("b")] }));
    assert_eq!(texts(&t), vec!["plan:2"]);
    // Like the server, a plan after other entries is a new entry.
    t.apply(&record(3, SessionEvent::status("x")));
    t.apply(&record(4, SessionEvent::Plan { entries: vec![entry("c")] }));
    assert_eq!(texts(&t), vec!["plan:2", "status:x", "plan:1"]);
}

#[test]
fn permission_requests_wait_until_resolved() {
    let mut t = Transcript::default();
    t.apply(&record(
        1,
        SessionEvent::PermissionRequest {
            request_id: "p1".into(),
            tool_call: json!({"title": "Run tests"}),
            options: vec![PermissionOption {
                option_id: "allow".into(),
                name: "Allow".into(),
                kind: "allow_once".into(),
            }],
        },
    ));
    let pending = t.pending_permission().map(|p| p.title.clone());
    assert_eq!(pending.as_deref(), Some("Run tests"));
    t.apply(&record(2, SessionEvent::PermissionResolved { request_id: "p1".into(), option_id: Some("allow".into()) }));
    assert!(t.pending_permission().is_none());
}

#[test]
fn status_and_error_are_lines() {
    let mut t = Transcript::default();
    t.apply(&record(1, SessionEvent::status("Session resumed")));
    t.apply(&record(2, SessionEvent::Error { message: "boom".into() }));
    assert_eq!(texts(&t), vec!["status:Session resumed", "error:boom"]);
}

#[test]
fn a_chunk_continues_only_the_newest_open_message() {
    let mut t = Transcript::default();
    t.apply(&record(1, chunk("m1", "before")));
    t.apply(&record(2, SessionEvent::status("note")));
    // Same id, but another entry came in between: the server starts a new message.
    t.apply(&record(3, chunk("m1", "after")));
    t.apply(&record(4, SessionEvent::TurnCompleted { stop_reason: "end_turn".into(), turn_id: None }));
    // The end of the turn closes the message, so the next chunk starts another.
    t.apply(&record(5, chunk("m1", "next turn")));
    assert_eq!(texts(&t), vec!["agent:before", "status:note", "agent:after", "agent:next turn"]);
}

#[test]
fn backlog_rebuilds_its_newest_entry_from_the_replay() {
    let mut agent = message(3, MessageKind::Agent, "Hello wor");
    agent.message_id = Some("m1".into());
    let backlog = vec![message(2, MessageKind::User, "hi"), agent];
    let mut t = Transcript::from_backlog(backlog, false);
    // The folded agent message started at seq 3 and may still grow: it is not held yet.
    assert_eq!(t.last_seq(), 2);
    assert_eq!(texts(&t), vec!["user:hi"]);
    // Subscribing since seq 2 replays its chunks, and the ones streamed after the list.
    for (seq, text) in [(3, "Hello "), (4, "wor"), (5, "ld")] {
        t.apply(&record(seq, chunk("m1", text)));
    }
    assert_eq!(texts(&t), vec!["user:hi", "agent:Hello world"]);
}

#[test]
fn replayed_updates_of_older_backlog_entries_are_harmless() {
    let mut tool = message(2, MessageKind::ToolCall, "Edit file");
    tool.tool_call_id = Some("t1".into());
    tool.status = Some("completed".into());
    let backlog = vec![tool, message(4, MessageKind::Status, "done")];
    let mut t = Transcript::from_backlog(backlog, true);
    assert!(t.older_omitted());
    t.apply(&record(
        3,
        SessionEvent::ToolCallUpdate {
            tool_call_id: "t1".into(),
            title: None,
            status: Some("completed".into()),
            content: None,
            raw_output: None,
        },
    ));
    t.apply(&record(4, SessionEvent::status("done")));
    assert_eq!(texts(&t), vec!["tool:Edit file:completed", "status:done"]);
}

#[test]
fn empty_backlog_replays_from_the_start() {
    let t = Transcript::from_backlog(Vec::new(), false);
    assert_eq!(t.last_seq(), 0);
    assert!(t.entries().is_empty());
}

#[test]
fn backlog_permission_and_plan_read_their_data() {
    let mut permission = message(5, MessageKind::Permission, "Run tests");
    permission.status = Some("pending".into());
    permission.data = Some(json!({
        "request_id": "p1",
        "options": [{"option_id": "allow", "name": "Allow", "kind": "allow_once"}]
    }));
    let mut plan = message(6, MessageKind::Plan, "");
    plan.data = Some(json!({"entries": [{"content": "a", "priority": "high", "status": "pending"}]}));
    let t = Transcript::from_backlog(vec![permission, plan, message(7, MessageKind::Status, "x")], false);
    assert_eq!(texts(&t), vec!["permission:p1", "plan:1"]);
    assert_eq!(t.pending_permission().map(|p| p.options.len()), Some(1));
}

#[test]
fn backlog_reads_answered_permissions() {
    let mut answered = message(1, MessageKind::Permission, "Edit file");
    answered.message_id = Some("p1".into());
    answered.status = Some("selected:allow".into());
    let mut dropped = message(2, MessageKind::Permission, "Run tests");
    dropped.message_id = Some("p2".into());
    dropped.status = Some("cancelled".into());
    let newest = message(3, MessageKind::Status, "x");
    let t = Transcript::from_backlog(vec![answered, dropped, newest], false);
    let answers: Vec<(String, PermissionStatus)> = t
        .entries()
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Permission(p) => Some((p.request_id.clone(), p.answer.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        answers,
        vec![
            ("p1".to_string(), PermissionStatus::Selected("allow".into())),
            ("p2".to_string(), PermissionStatus::Cancelled),
        ]
    );
    assert!(t.pending_permission().is_none());
}

#[test]
fn backlog_entries_are_closed_to_replayed_chunks() {
    let backlog = vec![message(1, MessageKind::Agent, "turn one"), message(3, MessageKind::Agent, "turn two")];
    let mut t = Transcript::from_backlog(backlog, false);
    // Seq 2 ended the first turn; the replay from seq 3 must start a new message.
    let replayed = SessionEvent::MessageChunk { message_id: None, text: "turn two".into() };
    t.apply(&record(3, replayed));
    assert_eq!(texts(&t), vec!["agent:turn one", "agent:turn two"]);
}

#[test]
fn an_older_page_goes_in_front_and_the_newest_entry_stays_open() {
    let mut agent = message(5, MessageKind::Agent, "streaming");
    agent.message_id = Some("m2".into());
    let backlog = vec![message(3, MessageKind::User, "second"), message(4, MessageKind::Status, "x"), agent];
    let mut t = Transcript::from_backlog(backlog, true);
    t.apply(&record(5, chunk("m2", "stream")));
    assert_eq!(t.oldest_seq(), 3);
    // The page overlaps what is held at seq 3: that message is not added twice.
    let page = vec![message(1, MessageKind::User, "first"), message(3, MessageKind::User, "second")];
    assert_eq!(t.prepend_older(page, false), 1);
    assert!(!t.older_omitted());
    // The entry being streamed moved down by one and still takes its chunks.
    t.apply(&record(6, chunk("m2", "ing")));
    assert_eq!(texts(&t), vec!["user:first", "user:second", "status:x", "agent:streaming"]);
}

/// The line is the server's (`StopReason::turn_end_note`), as a status message; interrupted
/// and failed turns have none (the server journals its own status or error line for those).
#[test]
fn a_turn_that_did_not_finish_leaves_the_servers_status_line() {
    let mut t = Transcript::default();
    t.apply(&record(1, chunk("m1", "working")));
    t.apply(&record(2, SessionEvent::TurnCompleted { stop_reason: "cancelled".into(), turn_id: None }));
    t.apply(&record(3, chunk("m1", "again")));
    t.apply(&record(4, SessionEvent::TurnCompleted { stop_reason: "end_turn".into(), turn_id: None }));
    t.apply(&record(5, SessionEvent::TurnCompleted { stop_reason: "interrupted".into(), turn_id: None }));
    t.apply(&record(6, SessionEvent::TurnCompleted { stop_reason: "error".into(), turn_id: None }));
    t.apply(&record(7, SessionEvent::TurnCompleted { stop_reason: "max_tokens".into(), turn_id: None }));
    let note = |reason: &str| format!("status:{}", StopReason::parse(reason).turn_end_note().unwrap_or_default());
    assert_eq!(
        texts(&t),
        vec!["agent:working".to_string(), note("cancelled"), "agent:again".into(), note("max_tokens")]
    );
    assert_eq!(note("cancelled"), "status:Turn cancelled.");
}

/// What the user saw live is what a reload of the same session shows.
#[test]
fn a_cancelled_turn_reads_the_same_live_and_reloaded() {
    let mut live = Transcript::default();
    live.apply(&record(1, chunk("m1", "working")));
    live.apply(&record(2, SessionEvent::TurnCompleted { stop_reason: "cancelled".into(), turn_id: None }));
    live.apply(&record(3, SessionEvent::UserMessage { text: "next".into(), turn_id: None }));
    // The server's folded view of the same journal (store/journal.rs `fold`).
    let folded = vec![
        message(1, MessageKind::Agent, "working"),
        message(2, MessageKind::Status, "Turn cancelled."),
        message(3, MessageKind::User, "next"),
    ];
    let mut reloaded = Transcript::from_backlog(folded, false);
    reloaded.apply(&record(3, SessionEvent::UserMessage { text: "next".into(), turn_id: None }));
    assert_eq!(texts(&reloaded), texts(&live));
}

/// As the server folds them (store/journal.rs `fold_chunk`): chunks of one message, which is
/// what chunks without ids in a row are, concatenate exactly (ACP chunks carry their own
/// spacing); thoughts with different ids are separate entries, drawn on separate lines.
#[test]
fn thought_chunks_fold_like_the_server_folds_them() {
    let thought = |id: Option<&str>, text: &str| SessionEvent::ThoughtChunk {
        message_id: id.map(str::to_string),
        text: text.into(),
    };
    let mut t = Transcript::default();
    t.apply(&record(1, thought(None, "Thinking.")));
    t.apply(&record(2, thought(None, "Thought it through.")));
    assert_eq!(texts(&t), vec!["thought:Thinking.Thought it through."]);
    let mut t = Transcript::default();
    t.apply(&record(1, thought(Some("th1"), "Thinking.")));
    t.apply(&record(2, thought(Some("th2"), "Thought it through.")));
    assert_eq!(texts(&t), vec!["thought:Thinking.", "thought:Thought it through."]);
}

/// The transcript folds the protocol's event script into what the protocol's own fold (and so
/// the server's `message.list`) holds, entry for entry.
#[test]
fn the_transcript_folds_the_script_as_the_protocol_does() {
    let script = include_str!("../../../shared/tests/fixtures/fold_script.json");
    let events: Vec<SessionEvent> = serde_json::from_str(script).expect("the script parses");
    let mut transcript = Transcript::default();
    let mut fold = baton_protocol::MessageFold::default();
    for (index, event) in events.into_iter().enumerate() {
        let record = record(index as u64 + 1, event);
        transcript.apply(&record);
        fold.apply(&record);
    }
    let bodies = |entries: Vec<Entry>| entries.into_iter().map(|e| (e.seq, e.body)).collect::<Vec<_>>();
    let expected = fold.messages().iter().cloned().map(|m| backlog::entry_from_message(m, 0)).collect();
    assert_eq!(bodies(transcript.entries().to_vec()), bodies(expected));
}
