//! The store on a real SQLite file: an old database upgrades in place, state changes are
//! compare-and-set, and the journal folds into messages.

use baton_protocol::{Attention, MessageKind, Notification, SessionEvent, SessionState, StopReason, TaskState};
use baton_server::hub::Hub;
use baton_server::session_status::Live;
use baton_server::store::{apply_migrations, schema_version, Store, Transition, MIGRATIONS};
use rusqlite::{params, Connection};

const NOW: &str = "2026-11-01T10:00:00.000Z";

/// Builds a database exactly as migration 1 left it, with a session that was mid-turn.
fn version_1_database(path: &std::path::Path) {
    let mut conn = Connection::open(path).unwrap();
    apply_migrations(&mut conn, &MIGRATIONS[..1]).unwrap();
    assert_eq!(schema_version(&conn).unwrap(), 1);
    conn.execute(
        "INSERT INTO tasks (id, title, description, state, agent, workdir, created_at, updated_at)
         VALUES ('t1', 'Old task', 'desc', 'IN_PROGRESS', 'mock', '/tmp', ?1, ?1)",
        [NOW],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO task_sessions (id, task_id, agent, state, created_at, updated_at) VALUES ('s1', 't1', 'mock', 'RUNNING', ?1, ?1)",
        [NOW],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO executors_running (session_id, resume_token, agent_execution_id, status, updated_at)
         VALUES ('s1', 'acp-token', 'exec-old', 'ready', ?1)",
        [NOW],
    )
    .unwrap();
    let events = [
        (1, "user_message", r#"{"kind":"user_message","text":"remember pineapple"}"#),
        (2, "turn_started", r#"{"kind":"turn_started"}"#),
    ];
    for (seq, kind, payload) in events {
        conn.execute(
            "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES ('s1', ?1, ?2, ?3, ?4)",
            params![seq, kind, payload, NOW],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO messages (session_id, seq, kind, text, created_at, updated_at) VALUES ('s1', 1, 'user', 'remember pineapple', ?1, ?1)",
        [NOW],
    )
    .unwrap();
}

#[tokio::test]
async fn a_version_1_database_upgrades_in_place_and_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    version_1_database(&path);

    let store = Store::open(&path, Hub::new()).unwrap();
    let version = store.read(schema_version).await.unwrap();
    assert_eq!(Some(version), MIGRATIONS.last().map(|m| m.version));

    let (session, executor) = store.get_session("s1").await.unwrap();
    assert_eq!(session.state, SessionState::Running);
    assert_eq!(session.task_title, "Old task");
    assert_eq!(session.last_seq, 2, "migration 2 computes the journal cursor from the old events");
    assert!(session.turn_open, "migration 2 finds the turn the old server left open");
    assert_eq!(executor.unwrap().resume_token.as_deref(), Some("acp-token"));

    // The reconciliation that runs at startup closes that turn as interrupted.
    store
        .reconcile_after_restart(baton_server::orchestrator::launch::reconcile::interrupted_by_restart())
        .await
        .unwrap();
    let (session, _) = store.get_session("s1").await.unwrap();
    assert!(!session.turn_open);
    let page = store.events_after("s1", 2, 100).await.unwrap();
    assert!(
        matches!(&page.events[0].event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Interrupted)
    );
    assert!(matches!(&page.events[1].event, SessionEvent::Status { message } if message.contains("interrupted")));

    // New events continue the old numbering.
    let record = store
        .append("s1", SessionEvent::UserMessage { text: "what did I ask you to remember?".into(), turn_id: None })
        .await
        .unwrap();
    assert_eq!(record.seq, 5);
    let (messages, _, _) = store.list_messages("s1", None, None, 100).await.unwrap();
    assert_eq!(messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>()[0], "remember pineapple");
    store.close();

    // Opening again applies nothing twice.
    let store = Store::open(&path, Hub::new()).unwrap();
    assert_eq!(store.get_session("s1").await.unwrap().0.last_seq, 5);
}

/// A version-1 journal that ended mid-turn after the agent had started answering (its newest
/// entry a chunk, not `turn_started`), next to one whose last turn was complete: the upgrade
/// finds the open turn, and the startup reconciliation closes it as interrupted, once; the
/// complete one is left alone.
#[tokio::test]
async fn a_version_1_journal_that_ended_mid_answer_has_its_turn_closed_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    version_1_database(&path);
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO task_sessions (id, task_id, agent, state, created_at, updated_at) VALUES ('s2', 't1', 'mock', 'WAITING_FOR_INPUT', ?1, ?1)",
            [NOW],
        )
        .unwrap();
        let events = [
            ("s1", 3, "message_chunk", r#"{"kind":"message_chunk","text":"Pineapple, noted"}"#),
            (
                "s1",
                4,
                "tool_call",
                r#"{"kind":"tool_call","tool_call_id":"tc1","title":"Write notes","status":"in_progress"}"#,
            ),
            ("s2", 1, "user_message", r#"{"kind":"user_message","text":"hi"}"#),
            ("s2", 2, "turn_started", r#"{"kind":"turn_started"}"#),
            ("s2", 3, "message_chunk", r#"{"kind":"message_chunk","text":"hello"}"#),
            ("s2", 4, "turn_completed", r#"{"kind":"turn_completed","stop_reason":"end_turn"}"#),
            ("s2", 5, "status", r#"{"kind":"status","message":"done"}"#),
        ];
        for (session, seq, kind, payload) in events {
            conn.execute(
                "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![session, seq, kind, payload, NOW],
            )
            .unwrap();
        }
    }

    let store = Store::open(&path, Hub::new()).unwrap();
    let (mid_answer, _) = store.get_session("s1").await.unwrap();
    assert!(mid_answer.turn_open, "the upgrade finds the turn the old server left open mid-answer");
    let (complete, _) = store.get_session("s2").await.unwrap();
    assert!(!complete.turn_open, "a completed turn is not reopened");

    store
        .reconcile_after_restart(baton_server::orchestrator::launch::reconcile::interrupted_by_restart())
        .await
        .unwrap();
    let (mid_answer, _) = store.get_session("s1").await.unwrap();
    assert!(!mid_answer.turn_open);
    let page = store.events_after("s1", 4, 100).await.unwrap();
    assert!(
        matches!(&page.events[0].event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Interrupted),
        "{:?}",
        page.events
    );
    assert!(store.events_after("s2", 5, 100).await.unwrap().events.is_empty(), "nothing added to the complete one");
    store.close();
}

#[tokio::test]
async fn state_changes_are_compare_and_set_and_announced_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    version_1_database(&path);
    let hub = Hub::new();
    let mut notifications = hub.subscribe();
    let store = Store::open(&path, hub).unwrap();

    let stale = Transition {
        session_id: "s1".into(),
        from: vec![SessionState::WaitingForInput],
        to: SessionState::Starting,
        task_state: None,
        agent: Live::Starting,
        last_error: None,
    };
    assert!(store.transition(stale).await.unwrap().is_none(), "expected state does not match: nothing changes");
    assert_eq!(store.get_session("s1").await.unwrap().0.state, SessionState::Running);

    let to_waiting = Transition {
        session_id: "s1".into(),
        from: vec![SessionState::Running],
        to: SessionState::WaitingForInput,
        task_state: Some(TaskState::Review),
        agent: Live::None,
        last_error: Some(Some("agent exited".into())),
    };
    let changed = store.transition(to_waiting).await.unwrap().expect("CAS matched");
    assert_eq!(
        (changed.previous_state, changed.state, changed.task_state),
        (Some(SessionState::Running), SessionState::WaitingForInput, TaskState::Review)
    );
    assert!(changed.needs_resume, "an active session whose agent is gone needs resuming");
    assert_eq!(changed.attention, Some(Attention::Resume));
    let (session, _) = store.get_session("s1").await.unwrap();
    assert_eq!(session.last_error.as_deref(), Some("agent exited"));
    assert_eq!(session.task_state, TaskState::Review);

    let mut seen = Vec::new();
    while let Ok(n) = notifications.try_recv() {
        seen.push(n.action().to_string());
    }
    // The session started needing the user: the server-wide count changed.
    assert_eq!(seen, vec![Notification::TASK_UPDATED, Notification::STATE_CHANGED, Notification::ATTENTION_CHANGED]);
}

#[tokio::test]
async fn chunks_fold_into_one_message_and_tool_calls_update_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    version_1_database(&path);
    let store = Store::open(&path, Hub::new()).unwrap();
    let chunk = |text: &str| SessionEvent::MessageChunk { message_id: Some("m1".into()), text: text.into() };
    let events = vec![
        chunk("Hel"),
        chunk("lo"),
        SessionEvent::ToolCall {
            tool_call_id: "tool-1".into(),
            title: "Read".into(),
            tool_kind: Some("read".into()),
            status: Some("pending".into()),
            content: None,
            raw_input: None,
        },
        SessionEvent::ToolCallUpdate {
            tool_call_id: "tool-1".into(),
            title: None,
            status: Some("completed".into()),
            content: Some(serde_json::json!([])),
            raw_output: None,
        },
        SessionEvent::MessageChunk { message_id: Some("m2".into()), text: "Done".into() },
        SessionEvent::TurnCompleted { stop_reason: "end_turn".into(), turn_id: None },
        SessionEvent::MessageChunk { message_id: Some("m2".into()), text: "next turn".into() },
    ];
    let records = store.append_events("s1", events).await.unwrap();
    assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), (3..=9).collect::<Vec<_>>());
    let (messages, has_more, _) = store.list_messages("s1", None, None, 100).await.unwrap();
    assert!(!has_more);
    let view: Vec<(MessageKind, &str, Option<&str>)> =
        messages.iter().map(|m| (m.kind, m.text.as_str(), m.status.as_deref())).collect();
    assert_eq!(
        view,
        vec![
            (MessageKind::User, "remember pineapple", None),
            (MessageKind::Agent, "Hello", None),
            (MessageKind::ToolCall, "Read", Some("completed")),
            (MessageKind::Agent, "Done", None),
            (MessageKind::Agent, "next turn", None),
        ]
    );
    let (page, has_more, _) = store.list_messages("s1", None, None, 2).await.unwrap();
    assert!(has_more);
    assert_eq!(
        page.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(),
        vec!["Done", "next turn"],
        "newest page, oldest first"
    );
    let (older, _, _) = store.list_messages("s1", Some(page[0].seq), None, 10).await.unwrap();
    assert_eq!(older.len(), 3);
    let (newer, _, _) = store.list_messages("s1", None, Some(older[1].seq), 10).await.unwrap();
    assert_eq!(newer.len(), 3);
}

/// Migration numbers are reserved in ranges, so a database can hold a newer migration than one
/// that lands later: the lower one is applied all the same.
#[test]
fn a_migration_numbered_below_the_newest_applied_one_is_still_applied() {
    let mut conn = Connection::open_in_memory().unwrap();
    apply_migrations(&mut conn, &MIGRATIONS[..1]).unwrap();
    let twenty = MIGRATIONS.iter().position(|m| m.version == 20).expect("migration 20");
    apply_migrations(&mut conn, &MIGRATIONS[twenty..=twenty]).unwrap();
    apply_migrations(&mut conn, MIGRATIONS).unwrap();
    let recorded: i64 = conn.query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0)).unwrap();
    assert_eq!(recorded as usize, MIGRATIONS.len());
    // Migration 2's column exists although migration 20 was applied first.
    conn.execute("UPDATE task_sessions SET last_seq = 0", []).unwrap();
}
