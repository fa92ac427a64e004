//! The store's own tests, on a temporary database file.

use baton_protocol::{EventRecord, MessageFold, SessionEvent, SessionState, StopReason, Task, TaskState};

use super::{ExecutorStatus, NewTask, Store, StoreError, Transition};
use crate::hub::Hub;
use crate::session_status::Live;

/// The event script the protocol's fold, the TUI's and this one are checked with.
const FOLD_SCRIPT: &str = include_str!("../../../shared/tests/fixtures/fold_script.json");

async fn store_with_session(dir: &tempfile::TempDir) -> Store {
    let store = Store::open(&dir.path().join("baton.db"), Hub::new()).expect("open the store");
    create_session_in(&store, dir).await;
    store
}

/// Task `task1` with session `s1`.
async fn create_session_in(store: &Store, dir: &tempfile::TempDir) {
    let now = baton_protocol::now_timestamp();
    let task = Task {
        id: "task1".into(),
        title: "t".into(),
        description: String::new(),
        state: TaskState::Todo,
        agent: "mock".into(),
        workdir: dir.path().display().to_string(),
        repository: None,
        worktree_branch: None,
        base_commit: None,
        base_branch: None,
        pull_request_url: None,
        created_at: now.clone(),
        updated_at: now,
        archived: false,
        mcp_servers: Vec::new(),
    };
    store
        .create_task(NewTask { task, session_id: "s1".into(), worktree_path: None, mcp_servers: Vec::new() })
        .await
        .expect("create_task");
}

#[tokio::test]
async fn the_sql_fold_is_the_protocols_fold() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let events: Vec<SessionEvent> = serde_json::from_str(FOLD_SCRIPT).expect("the script parses");
    let mut records: Vec<EventRecord> = Vec::new();
    // In several writes, as a live session appends them.
    for chunk in events.chunks(5) {
        records.extend(store.append_events("s1", chunk.to_vec()).await.expect("append"));
    }
    let mut fold = MessageFold::default();
    for record in &records {
        assert!(fold.apply(record));
    }
    let (stored, has_more, _) = store.list_messages("s1", None, None, 1000).await.expect("list_messages");
    assert!(!has_more);
    assert_eq!(stored, fold.messages(), "message.list and the protocol's fold of the same events");
    // The script exercises every rule: a sanity check that it folded into many entries.
    assert_eq!(stored.len(), 15, "{stored:#?}");
}

#[tokio::test]
async fn message_list_mid_turn_shows_the_partial_answer_with_its_newest_chunk_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let chunk = |text: &str| SessionEvent::MessageChunk { message_id: Some("m1".into()), text: text.into() };
    let mut fold = MessageFold::default();
    let check = async |events: Vec<SessionEvent>, fold: &mut MessageFold| {
        for record in store.append_events("s1", events).await.expect("append") {
            assert!(fold.apply(&record));
        }
        let (stored, _, _) = store.list_messages("s1", None, None, 1000).await.expect("list_messages");
        assert_eq!(stored, fold.messages(), "message.list and the protocol's fold of the same events");
        stored
    };
    check(vec![SessionEvent::TurnStarted { turn_id: None }, chunk("Hel")], &mut fold).await;
    let partial = check(vec![chunk("lo, ")], &mut fold).await;
    assert_eq!(partial.last().map(|m| m.text.as_str()), Some("Hello, "), "the partial answer, mid-turn");
    check(vec![chunk("world")], &mut fold).await;
    let done =
        check(vec![SessionEvent::TurnCompleted { stop_reason: StopReason::EndTurn, turn_id: None }], &mut fold).await;
    let answer = done.iter().find(|m| m.message_id.as_deref() == Some("m1")).expect("the answer");
    assert_eq!(answer.text, "Hello, world");
}

fn to_waiting(from: SessionState) -> Transition {
    Transition {
        session_id: "s1".into(),
        from: vec![from],
        to: SessionState::WaitingForInput,
        task_state: Some(TaskState::Review),
        agent: Live::None,
        last_error: Some(Some("the agent exited".into())),
    }
}

#[tokio::test]
async fn events_and_a_transition_are_recorded_in_one_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let events = vec![
        SessionEvent::TurnStarted { turn_id: None },
        SessionEvent::TurnCompleted { stop_reason: StopReason::EndTurn, turn_id: None },
    ];
    let changed = store.append_with_transition("s1", events, to_waiting(SessionState::Created)).await.expect("write");
    assert_eq!(changed.map(|c| c.state), Some(SessionState::WaitingForInput));
    let (session, _) = store.get_session("s1").await.expect("get_session");
    assert_eq!((session.state, session.last_seq, session.turn_open), (SessionState::WaitingForInput, 2, false));
    assert_eq!(session.last_error.as_deref(), Some("the agent exited"));
    assert_eq!(session.task_state, TaskState::Review, "the task moved with it");
}

/// The notification of each transition says `needs_resume` as a status read of the stored
/// state after it would (`session_status::evaluate`): no writer sets it by hand.
#[tokio::test]
async fn each_state_change_derives_needs_resume_from_the_stored_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hub = Hub::new();
    let mut published = hub.subscribe();
    let store = Store::open(&dir.path().join("baton.db"), hub).expect("open the store");
    create_session_in(&store, &dir).await;
    let step = |from: SessionState, to: SessionState, agent: Live| Transition {
        session_id: "s1".into(),
        from: vec![from],
        to,
        task_state: None,
        agent,
        last_error: None,
    };
    use SessionState::*;
    // (transition, the token stored before it, expected needs_resume)
    let script = [
        (step(Created, Starting, Live::Starting), None, false),
        (step(Starting, WaitingForInput, Live::Running), Some("tok"), false),
        (step(WaitingForInput, Running, Live::Running), None, false),
        // The agent exited mid-turn: active, no agent, a token.
        (step(Running, WaitingForInput, Live::None), None, true),
        (step(WaitingForInput, Starting, Live::Starting), None, false),
        // The launch failed back to the captured state, and the token is gone: case 4.
        (step(Starting, WaitingForInput, Live::None), Some(""), true),
        (step(WaitingForInput, Completed, Live::None), None, false),
    ];
    store.record_launch("s1", "exec-1", None, None).await.expect("record_launch");
    for (i, (transition, token, expected)) in script.into_iter().enumerate() {
        if let Some(token) = token {
            store.store_resume_token("s1", "exec-1", Some(token.into())).await.expect("token");
        }
        let agent = transition.agent;
        let changed = store.transition(transition).await.expect("transition").expect("the CAS matches");
        assert_eq!(changed.needs_resume, expected, "step {i}");
        let (session, executor) = store.get_session("s1").await.expect("get_session");
        let facts = crate::session_status::SessionFacts {
            state: session.state,
            has_resume_token: executor.as_ref().is_some_and(|e| e.has_resume_token()),
            agent,
        };
        assert_eq!(changed.needs_resume, crate::session_status::needs_resume(facts), "step {i}: same as a read");
        let announced = loop {
            match &published.try_recv().expect("the change was published").notification {
                baton_protocol::Notification::StateChanged(announced) => break announced.clone(),
                _ => continue,
            }
        };
        assert_eq!(announced, changed, "step {i}: the notification is the change");
    }
}

#[tokio::test]
async fn a_transition_from_another_state_changes_no_state_but_keeps_the_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let events = vec![SessionEvent::status("hello")];
    let changed = store.append_with_transition("s1", events, to_waiting(SessionState::Running)).await.expect("write");
    assert!(changed.is_none(), "the session was CREATED, not RUNNING");
    let (session, _) = store.get_session("s1").await.expect("get_session");
    assert_eq!((session.state, session.last_seq), (SessionState::Created, 1));
}

#[tokio::test]
async fn an_unknown_session_is_not_found_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let result = store.append_events("nope", vec![SessionEvent::status("x")]).await;
    assert!(matches!(result, Err(StoreError::NotFound(_))), "{result:?}");
    assert!(matches!(store.get_session("nope").await, Err(StoreError::NotFound(_))));
    assert_eq!(store.current_seq("s1").await.expect("current_seq"), 0);
}

#[tokio::test]
async fn reconciliation_closes_open_turns_with_the_given_events_and_cancels_pending_permissions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let request = SessionEvent::PermissionRequest {
        request_id: "p1".into(),
        tool_call: serde_json::json!({"title": "Write"}),
        options: Vec::new(),
    };
    store.append_events("s1", vec![SessionEvent::TurnStarted { turn_id: None }, request]).await.expect("append");
    assert!(store.get_session("s1").await.expect("get_session").0.turn_open);

    let said = SessionEvent::status("interrupted by the test");
    let interrupted =
        vec![SessionEvent::TurnCompleted { stop_reason: StopReason::Interrupted, turn_id: None }, said.clone()];
    store.reconcile_after_restart(interrupted).await.expect("reconcile");
    let (session, _) = store.get_session("s1").await.expect("get_session");
    assert!(!session.turn_open, "the turn is closed");
    let page = store.events_after("s1", 2, 10).await.expect("events_after");
    let kinds: Vec<&str> = page.events.iter().map(|r| r.event.kind()).collect();
    assert_eq!(kinds, ["turn_completed", "status", "permission_resolved"]);
    assert_eq!(page.events[1].event, said, "the orchestrator's words, as given");
    // Nothing is open any more: a second reconciliation appends nothing.
    store.reconcile_after_restart(vec![SessionEvent::status("again")]).await.expect("reconcile");
    assert_eq!(store.current_seq("s1").await.expect("current_seq"), 5);
}

#[tokio::test]
async fn an_executor_status_without_a_process_forgets_the_pid_and_only_the_owner_sets_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    store.record_launch("s1", "exec-1", Some(4242), Some(7)).await.expect("record_launch");
    assert!(store.set_executor_status("s1", "exec-1", ExecutorStatus::Ready).await.expect("ready"));
    let executor = store.get_session("s1").await.expect("get_session").1.expect("an executor");
    assert_eq!((executor.status, executor.pid), (ExecutorStatus::Ready, Some(4242)));
    assert!(!store.set_executor_status("s1", "exec-other", ExecutorStatus::Stopped).await.expect("not the owner"));
    assert!(store.set_executor_status("s1", "exec-1", ExecutorStatus::Exited).await.expect("exited"));
    let executor = store.get_session("s1").await.expect("get_session").1.expect("an executor");
    assert_eq!((executor.status, executor.pid), (ExecutorStatus::Exited, None));
}

/// Runtime names and executor statuses are written and read as the enums' own spellings; a
/// stored value the server does not know is a read error, not a guess.
#[tokio::test]
async fn executor_runtime_and_status_are_stored_as_their_enums() {
    use crate::agent_runtime::AgentRuntime;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    store.record_launch("s1", "exec-1", Some(4242), Some(7)).await.expect("record_launch");
    let executor = store.get_session("s1").await.expect("get_session").1.expect("an executor");
    assert_eq!((executor.runtime, executor.status), (AgentRuntime::Standalone, ExecutorStatus::Starting));
    store
        .record_hosted_launch("s1", "exec-2", 4243, Some(8), "http://127.0.0.1:1", 1, 99, "agent-1")
        .await
        .expect("hosted");
    let executor = store.get_session("s1").await.expect("get_session").1.expect("an executor");
    assert_eq!((executor.runtime, executor.status), (AgentRuntime::Hosted, ExecutorStatus::Starting));
    for status in [
        ExecutorStatus::Created,
        ExecutorStatus::Starting,
        ExecutorStatus::Ready,
        ExecutorStatus::Exited,
        ExecutorStatus::Failed,
        ExecutorStatus::Stopped,
    ] {
        assert_eq!(ExecutorStatus::parse(status.as_str()), Some(status));
    }
    for runtime in [AgentRuntime::Standalone, AgentRuntime::Hosted] {
        assert_eq!(AgentRuntime::parse(runtime.as_str()), Some(runtime));
    }
    let conn = rusqlite::Connection::open(dir.path().join("baton.db")).expect("open");
    conn.execute("UPDATE executors_running SET runtime = 'teleport' WHERE session_id = 's1'", []).expect("damage");
    drop(conn);
    let error = store.get_session("s1").await.expect_err("an unknown runtime is an error");
    assert!(error.to_string().contains("teleport"), "{error}");
}

/// A streamed event's frame is written around its stored JSON text (serialised once): it is
/// the frame `Notification::to_json` writes for the same record, up to the envelope's time.
#[tokio::test]
async fn a_submitted_event_is_published_with_the_frame_of_its_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hub = Hub::new();
    let mut published = hub.subscribe();
    let store = Store::open(&dir.path().join("baton.db"), hub).expect("open the store");
    create_session_in(&store, &dir).await;
    // Text that needs escaping, in a chunk as the agent streams it.
    let text = "a \"quoted\" line\nwith \\ and é and \u{1}";
    let event = SessionEvent::MessageChunk { message_id: Some("m1".into()), text: text.into() };
    let seq = store.submit_append("s1", event.clone()).expect("submit").wait().await.expect("committed");
    let sent = loop {
        let next = published.recv().await.expect("published");
        if matches!(&next.notification, baton_protocol::Notification::Event(_)) {
            break next;
        }
    };
    let baton_protocol::Notification::Event(record) = &sent.notification else { unreachable!() };
    assert_eq!((record.seq, &record.event), (seq, &event));
    let frame: serde_json::Value = serde_json::from_str(&sent.frame()).expect("the frame is JSON");
    let mut expected: serde_json::Value =
        serde_json::from_str(&baton_protocol::Notification::Event(record.clone()).to_json()).expect("JSON");
    assert_eq!(frame["timestamp"], serde_json::json!(record.created_at));
    expected["timestamp"] = frame["timestamp"].clone();
    assert_eq!(frame, expected);
    let stored = store.events_after("s1", seq - 1, 10).await.expect("events_after");
    assert_eq!(stored.events, vec![record.clone()], "the journal holds what was sent");
}

/// A queue change of a request of `session_id` (what the attention writes carry along).
fn queue_change(session_id: &str) -> baton_protocol::PermissionQueueChanged {
    baton_protocol::PermissionQueueChanged {
        session_id: session_id.into(),
        request_id: "perm-1".into(),
        change: baton_protocol::PermissionChange::Requested,
        option_id: None,
        rule_id: None,
    }
}

/// The kept count of sessions that need the user equals the count over the sessions after
/// every kind of change that moves it: attention set and cleared, a second session, archive
/// and unarchive, deletion; and a database migrated with sessions already needing the user
/// starts with their count.
#[tokio::test]
async fn the_kept_attention_count_follows_every_change() {
    use super::attention::{attention_count_counted_in, attention_count_in};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let both = |store: &Store| {
        let store = store.clone();
        async move {
            store.read(|conn| Ok((attention_count_in(conn)?, attention_count_counted_in(conn)?))).await.expect("counts")
        }
    };
    assert_eq!(both(&store).await, (0, 0));
    store.permission_attention("s1", false, true, queue_change("s1")).await.expect("asked");
    assert_eq!(both(&store).await, (1, 1));
    store.create_session("task1".into(), "s2".into(), "mock".into()).await.expect("second session");
    store.permission_attention("s2", false, true, queue_change("s2")).await.expect("asked");
    assert_eq!(both(&store).await, (2, 2));
    store.permission_attention("s1", false, false, queue_change("s1")).await.expect("answered");
    assert_eq!(both(&store).await, (1, 1));
    store.set_archived("task1", true).await.expect("archive");
    assert_eq!(both(&store).await, (0, 0));
    store.permission_attention("s1", false, true, queue_change("s1")).await.expect("asked while archived");
    assert_eq!(both(&store).await, (0, 0));
    store.set_archived("task1", false).await.expect("unarchive");
    assert_eq!(both(&store).await, (2, 2));
    store.delete_task("task1").await.expect("delete");
    assert_eq!(both(&store).await, (0, 0));
    store.close();

    // A database at the version before the kept count, with two sessions that need the user
    // (one of an archived task): migrating it counts the other one.
    let path = dir.path().join("old.db");
    let conn = rusqlite::Connection::open(&path).expect("open");
    let before: Vec<_> = super::MIGRATIONS.iter().filter(|m| m.version < 140).collect();
    assert!(before.len() < super::MIGRATIONS.len(), "migration 140 exists");
    for migration in &before {
        conn.execute_batch(migration.sql).expect("old migration");
    }
    conn.execute_batch(
        "INSERT INTO tasks (id, title, description, state, agent, workdir, created_at, updated_at, archived)
         VALUES ('a', 't', '', 'TODO', 'mock', '/', 'x', 'x', 0), ('b', 't', '', 'TODO', 'mock', '/', 'x', 'x', 1);
         INSERT INTO task_sessions (id, task_id, agent, state, created_at, updated_at, attention)
         VALUES ('sa', 'a', 'mock', 'FAILED', 'x', 'x', 'failed'), ('sb', 'b', 'mock', 'FAILED', 'x', 'x', 'failed'),
                ('sc', 'a', 'mock', 'CREATED', 'x', 'x', NULL);",
    )
    .expect("old rows");
    for migration in super::MIGRATIONS.iter().filter(|m| m.version >= 140) {
        conn.execute_batch(migration.sql).expect("new migration");
    }
    assert_eq!(attention_count_in(&conn).expect("kept"), 1);
    assert_eq!(attention_count_counted_in(&conn).expect("counted"), 1);
}

/// Agent updates queued without waiting (one batch holds many) for two sessions in turn, with
/// other writes and an update of an unknown session among them: each session's journal holds
/// its updates in order with consecutive sequence numbers, its cursor and open turn are those
/// of its last update, its folded messages are the protocol's fold, and only the update of the
/// unknown session fails.
#[tokio::test]
async fn queued_updates_of_two_sessions_among_other_writes_are_journaled_in_order() {
    use super::journal::append_event;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    store.create_session("task1".into(), "s2".into(), "mock".into()).await.expect("second session");
    let script: Vec<SessionEvent> = serde_json::from_str(FOLD_SCRIPT).expect("the script parses");
    let mut pending = Vec::new();
    let mut others = Vec::new();
    let mut unknown = None;
    let mut sent: std::collections::HashMap<&str, Vec<SessionEvent>> = Default::default();
    for (i, event) in script.iter().chain(script.iter()).enumerate() {
        let session = if (i / 3) % 2 == 0 { "s1" } else { "s2" };
        sent.entry(session).or_default().push(event.clone());
        pending.push(store.submit_append(session, event.clone()).expect("submit"));
        if i % 7 == 3 {
            // Another write in the same batch: it reads the cursor the updates moved.
            let status = SessionEvent::Status { message: format!("between {i}") };
            sent.entry("s1").or_default().push(status.clone());
            others.push(store.submit(move |conn, outbox| append_event(conn, outbox, "s1", status)).expect("submit"));
        }
        if i == 10 {
            unknown = Some(store.submit_append("nope", event.clone()).expect("submit"));
        }
    }
    for write in pending {
        write.wait().await.expect("committed");
    }
    for write in others {
        write.wait().await.expect("committed");
    }
    let failed = unknown.expect("submitted").wait().await;
    assert!(matches!(failed, Err(StoreError::NotFound(_))), "{failed:?}");
    for session in ["s1", "s2"] {
        let page = store.events_after(session, 0, 10_000).await.expect("events_after");
        let seqs: Vec<u64> = page.events.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "{session}: consecutive");
        let events: Vec<SessionEvent> = page.events.iter().map(|r| r.event.clone()).collect();
        assert_eq!(&events, &sent[session], "{session}: in the order queued");
        let (record, _) = store.get_session(session).await.expect("session");
        assert_eq!(record.last_seq, seqs.len() as u64, "{session}: cursor");
        let open = events.iter().rev().find_map(|e| match e {
            SessionEvent::TurnStarted { .. } => Some(true),
            SessionEvent::TurnCompleted { .. } => Some(false),
            _ => None,
        });
        assert_eq!(record.turn_open, open.unwrap_or(false), "{session}: open turn");
        let mut fold = MessageFold::default();
        for event in &page.events {
            assert!(fold.apply(event));
        }
        let (stored, _, _) = store.list_messages(session, None, None, 1000).await.expect("list_messages");
        assert_eq!(stored, fold.messages(), "{session}: message.list and the protocol's fold");
    }
}

/// An agent reached through a command (a container's agent host) has a pid of another pid
/// namespace or machine: a restart must not kill whatever has that pid here. A local agent's
/// leftover is still reported.
#[tokio::test]
async fn leftovers_of_agents_behind_a_command_are_not_local_processes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let url = "stdio:docker exec -i baton-x-exec-2 /b agentctl --stdio";
    store.record_hosted_launch("s1", "exec-2", 18, Some(8), url, 0, 1, "exec-2").await.expect("docker launch");
    let leftovers = store.reconcile_after_restart_keeping(Vec::new(), Vec::new()).await.expect("reconcile");
    assert!(leftovers.is_empty(), "{leftovers:?}");
    store
        .record_hosted_launch("s1", "exec-3", 4243, Some(8), "tcp://127.0.0.1:1", 1, 99, "exec-3")
        .await
        .expect("hosted");
    let leftovers = store.reconcile_after_restart_keeping(Vec::new(), Vec::new()).await.expect("reconcile");
    assert_eq!(leftovers.iter().map(|l| l.pid).collect::<Vec<_>>(), [4243]);
}

/// Standing answers: a rule per tool and session, a later choice for the same tool replaces
/// it, uses are counted, a revoked rule is gone and a second revoke is `NotFound`; the journal
/// says how a request ended (answered, abandoned, or not at all).
#[tokio::test]
async fn standing_answers_are_kept_replaced_counted_and_revoked() {
    use baton_protocol::RuleDecision;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let tool = |kind: &str, input: &str| crate::store::ToolMatch {
        kind: kind.into(),
        title: "Write file".into(),
        input: input.into(),
    };
    let allow = store.put_rule("s1", tool("edit", "{}"), RuleDecision::Allow).await.expect("rule");
    assert_eq!((allow.option_kind.as_str(), allow.applied, allow.tool_input.as_str()), ("allow_always", 0, "{}"));
    let found = store.rule_for("s1", tool("edit", "{}")).await.expect("read");
    assert_eq!(found.as_ref().map(|r| &r.rule_id), Some(&allow.rule_id));
    assert_eq!(store.rule_for("s1", tool("execute", "{}")).await.expect("read"), None, "kind and title both");
    assert_eq!(store.rule_for("s1", tool("edit", "{\"x\":1}")).await.expect("read"), None, "and the input");
    store.rule_applied(&allow.rule_id).await.expect("count");
    assert_eq!(store.rules("s1").await.expect("rules")[0].applied, 1);
    let reject = store.put_rule("s1", tool("edit", "{}"), RuleDecision::Reject).await.expect("again");
    let rules = store.rules("s1").await.expect("rules");
    assert_eq!(rules, vec![reject.clone()], "one rule per tool: the later choice replaces it");
    assert_eq!((reject.decision, reject.applied), (RuleDecision::Reject, 0));
    assert_eq!(store.revoke_rule("s1", &reject.rule_id).await.expect("revoke"), reject);
    assert!(matches!(store.revoke_rule("s1", &reject.rule_id).await, Err(StoreError::NotFound(_))));
    assert!(store.rules("s1").await.expect("rules").is_empty());

    assert_eq!(store.permission_resolution("s1", "perm-1").await.expect("read"), None);
    let resolved = |option: Option<&str>| SessionEvent::PermissionResolved {
        request_id: if option.is_some() { "perm-1".into() } else { "perm-2".into() },
        option_id: option.map(str::to_string),
    };
    store.append_events("s1", vec![resolved(Some("allow")), resolved(None)]).await.expect("journal");
    assert_eq!(store.permission_resolution("s1", "perm-1").await.expect("read"), Some(Some("allow".into())));
    assert_eq!(store.permission_resolution("s1", "perm-2").await.expect("read"), Some(None));
}

/// Holds the writer on a job until the sender is used, so that what is submitted meanwhile
/// is committed as one batch. Returns once the writer runs the job: its own batch is taken
/// by then, and nothing submitted afterwards can join it.
fn hold_writer(store: &Store) -> (std::sync::mpsc::Sender<()>, super::PendingWrite<()>) {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (running, started) = std::sync::mpsc::channel::<()>();
    let blocker = store
        .submit(move |_, _| {
            let _ = running.send(());
            let _ = held.recv();
            Ok(())
        })
        .expect("submit");
    started.recv_timeout(std::time::Duration::from_secs(30)).expect("the writer runs the held job");
    (release, blocker)
}

/// `s1`'s turn starts.
async fn start_turn(store: &Store) {
    store.append_events("s1", vec![SessionEvent::TurnStarted { turn_id: None }]).await.expect("turn");
}

/// `s1`'s turn ends, as an agent's turn ends: it finished.
async fn end_turn(store: &Store) {
    let end = SessionEvent::TurnCompleted { stop_reason: StopReason::EndTurn, turn_id: None };
    store.append_events("s1", vec![end]).await.expect("turn end");
}

/// The chunks of one message that reach the writer together are one row of `message_parts`
/// (not one per chunk), written with the batch: the partial answer, its newest chunk's time and
/// the journal are as if each chunk had its own row, and another session's chunks in the same
/// batch keep theirs apart.
#[tokio::test]
async fn chunks_committed_together_are_one_part_of_their_message() {
    const CHUNKS: usize = 50;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    start_turn(&store).await;
    let chunk = |n: usize| SessionEvent::MessageChunk { message_id: Some("m1".into()), text: format!("{n},") };
    // The writer is held while the chunks queue up, so that they are one batch.
    let (release, blocker) = hold_writer(&store);
    let pending: Vec<_> = (0..CHUNKS).map(|n| store.submit_append("s1", chunk(n)).expect("submit")).collect();
    release.send(()).expect("release the writer");
    blocker.wait().await.expect("the held write");
    let mut seqs = Vec::new();
    for write in pending {
        seqs.push(write.wait().await.expect("committed"));
    }
    let newest = *seqs.last().expect("seqs");
    let parts: i64 = store
        .read(move |conn| Ok(conn.query_row("SELECT count(*) FROM message_parts", [], |r| r.get(0))?))
        .await
        .expect("count");
    assert_eq!(parts, 1, "{CHUNKS} chunks committed together are one part");
    let (messages, _, _) = store.list_messages("s1", None, None, 100).await.expect("list_messages");
    let answer = messages.iter().find(|m| m.message_id.as_deref() == Some("m1")).expect("the partial answer");
    let expected: String = (0..CHUNKS).map(|n| format!("{n},")).collect();
    assert_eq!(answer.text, expected, "mid-turn, the whole partial answer");
    let journal = store.events_after("s1", 0, 1000).await.expect("journal");
    let newest_event = journal.events.iter().find(|e| e.seq == newest).expect("the newest chunk is journaled");
    assert_eq!(answer.updated_at, newest_event.created_at, "the time of the newest chunk");
    assert_eq!(journal.events.iter().filter(|e| matches!(e.event, SessionEvent::MessageChunk { .. })).count(), CHUNKS);

    end_turn(&store).await;
    let (messages, _, _) = store.list_messages("s1", None, None, 100).await.expect("list_messages");
    let answer = messages.iter().find(|m| m.message_id.as_deref() == Some("m1")).expect("the answer");
    assert_eq!(answer.text, expected, "folded into the message at the turn's end");
}

/// Rows of `message_parts` and of `message_folds_due`, and the stored text of `m1`.
async fn fold_state(store: &Store) -> (i64, i64, String) {
    store
        .read(|conn| {
            let parts = conn.query_row("SELECT count(*) FROM message_parts", [], |r| r.get(0))?;
            let due = conn.query_row("SELECT count(*) FROM message_folds_due", [], |r| r.get(0))?;
            let text = conn.query_row("SELECT text FROM messages WHERE message_id = 'm1'", [], |r| r.get(0))?;
            Ok((parts, due, text))
        })
        .await
        .expect("read the fold state")
}

/// A turn's end closes its messages; the writer joins their parts into their text right after
/// publishing it, before the next write: once any later write has committed, the stored text is
/// the answer, no part is left and nothing is due. Search finds the answer as soon as the turn's
/// end is journaled (it waits for the join).
#[tokio::test]
async fn a_turns_answer_is_joined_after_its_end_and_found_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let chunk = |text: &str| SessionEvent::MessageChunk { message_id: Some("m1".into()), text: text.into() };
    start_turn(&store).await;
    for word in ["the ", "numbat ", "sleeps"] {
        store.append_events("s1", vec![chunk(word)]).await.expect("chunk");
    }
    let (parts, due, text) = fold_state(&store).await;
    assert_eq!((parts, due, text.as_str()), (2, 0, "the "), "mid-turn the answer is its first chunk and its parts");
    end_turn(&store).await;
    let hits = store.search("numbat".into(), None, 10, None).await.expect("search");
    assert_eq!(hits.hits.len(), 1, "found as soon as the turn's end is journaled: {:?}", hits.hits);
    store.write(|_, _| Ok(())).await.expect("a later write");
    let (parts, due, text) = fold_state(&store).await;
    assert_eq!((parts, due, text.as_str()), (0, 0, "the numbat sleeps"), "joined after the turn's end");
    let (messages, _, _) = store.list_messages("s1", None, None, 100).await.expect("list_messages");
    let answer = messages.iter().find(|m| m.message_id.as_deref() == Some("m1")).expect("the answer");
    assert_eq!(answer.text, "the numbat sleeps");
}

/// A message whose parts cannot be joined (here a trigger refuses its update) stays due and
/// readable from its parts; the other messages of the turn are joined and found all the same.
#[tokio::test]
async fn a_message_that_cannot_be_joined_holds_back_no_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    {
        let conn = rusqlite::Connection::open(dir.path().join("baton.db")).expect("open");
        conn.execute_batch(
            "CREATE TRIGGER refuse_m2 BEFORE UPDATE OF text ON messages WHEN OLD.message_id = 'm2'
             BEGIN SELECT RAISE(ABORT, 'refused'); END;",
        )
        .expect("trigger");
    }
    let chunk = |id: &str, text: &str| SessionEvent::MessageChunk { message_id: Some(id.into()), text: text.into() };
    start_turn(&store).await;
    for (id, word) in [("m1", "wombat "), ("m1", "burrows"), ("m2", "echidna "), ("m2", "waddles")] {
        store.append_events("s1", vec![chunk(id, word)]).await.expect("chunk");
    }
    end_turn(&store).await;
    // Its second word only ever came as a part.
    let hits = store.search("burrows".into(), None, 10, None).await.expect("search");
    assert_eq!(hits.hits.len(), 1, "the joinable message is found: {:?}", hits.hits);
    let due: Vec<String> = store
        .read(|conn| {
            let mut statement =
                conn.prepare("SELECT m.message_id FROM message_folds_due d JOIN messages m ON m.id = d.message_row")?;
            let rows = statement.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
        .expect("due");
    assert_eq!(due, vec!["m2".to_string()], "only the refused one is left due");
    let (messages, _, _) = store.list_messages("s1", None, None, 100).await.expect("list_messages");
    let text = |id: &str| messages.iter().find(|m| m.message_id.as_deref() == Some(id)).map(|m| m.text.clone());
    assert_eq!(text("m1").as_deref(), Some("wombat burrows"));
    assert_eq!(text("m2").as_deref(), Some("echidna waddles"), "readable from its parts");
}

/// A server that stopped after journaling a turn's end and before joining its answer leaves the
/// answer as parts, listed as due: the answer reads whole meanwhile, and the store joins it
/// (and so indexes it for search) when it next opens.
#[tokio::test]
async fn an_answer_left_unjoined_is_joined_when_the_store_next_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("baton.db");
    let store = store_with_session(&dir).await;
    start_turn(&store).await;
    let chunk = |text: &str| SessionEvent::MessageChunk { message_id: Some("m1".into()), text: text.into() };
    store.append_events("s1", vec![chunk("a bilby "), chunk("digs")]).await.expect("chunks");
    end_turn(&store).await;
    store.write(|_, _| Ok(())).await.expect("a later write");
    store.close();
    // What the stop in between leaves: the closed answer's text not yet joined from its parts.
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        let (row, seq): (i64, i64) = conn
            .query_row("SELECT id, seq FROM messages WHERE message_id = 'm1'", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("the answer");
        conn.execute("UPDATE messages SET text = '' WHERE id = ?1", [row]).expect("unjoin");
        conn.execute("INSERT INTO message_parts (message_row, seq, text) VALUES (?1, ?2, 'a bilby digs')", [row, seq])
            .expect("part");
        conn.execute("INSERT INTO message_folds_due (message_row) VALUES (?1)", [row]).expect("due");
    }
    let store = Store::open(&path, Hub::new()).expect("reopen the store");
    let (messages, _, _) = store.list_messages("s1", None, None, 100).await.expect("list_messages");
    let answer = messages.iter().find(|m| m.message_id.as_deref() == Some("m1")).expect("the answer");
    assert_eq!(answer.text, "a bilby digs", "whole");
    let hits = store.search("bilby".into(), None, 10, None).await.expect("search");
    assert_eq!(hits.hits.len(), 1, "indexed as the store opened: {:?}", hits.hits);
    let (parts, due, text) = fold_state(&store).await;
    assert_eq!((parts, due, text.as_str()), (0, 0, "a bilby digs"), "joined when the store opened");
}

/// An agent update of a session that is gone (deleted while its agent streamed) fails alone:
/// the updates committed with it are kept.
#[tokio::test]
async fn an_update_of_a_session_that_is_gone_fails_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with_session(&dir).await;
    let chunk = |text: &str| SessionEvent::MessageChunk { message_id: Some("m1".into()), text: text.into() };
    let (release, blocker) = hold_writer(&store);
    let before = store.submit_append("s1", chunk("kept ")).expect("submit");
    let gone = store.submit_append("no-such-session", chunk("lost")).expect("submit");
    let after = store.submit_append("s1", chunk("too")).expect("submit");
    release.send(()).expect("release the writer");
    blocker.wait().await.expect("the held write");
    assert!(before.wait().await.is_ok(), "the update before it commits");
    assert!(matches!(gone.wait().await, Err(StoreError::NotFound(_))), "the update of no session fails alone");
    assert!(after.wait().await.is_ok(), "the update after it commits");
    let (messages, _, _) = store.list_messages("s1", None, None, 100).await.expect("list_messages");
    assert_eq!(messages.last().map(|m| m.text.as_str()), Some("kept too"));
}

/// The lookups of the newest event of a kind (a turn's start and usage, how the last turn
/// ended, whether a permission request was answered) read the partial indexes of their kinds,
/// so that they do not walk back over every chunk of a long session.
#[tokio::test]
async fn a_turns_end_finds_its_start_and_usage_through_their_indexes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("baton.db"), Hub::new()).expect("open the store");
    create_session_in(&store, &dir).await;
    let plans = store
        .read(|conn| {
            let plan = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> super::StoreResult<String> {
                let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                let details = statement.query_map(params, |r| r.get::<_, String>(3))?;
                Ok(details.collect::<Result<Vec<_>, _>>()?.join("; "))
            };
            Ok((
                plan(super::usage::TURN_STARTED, &[&"s1" as &dyn rusqlite::ToSql])?,
                plan(super::usage::LAST_USAGE_UPDATE, &[&"s1" as &dyn rusqlite::ToSql, &0])?,
                plan(super::queue::LAST_TURN_COMPLETED, &[&"s1" as &dyn rusqlite::ToSql])?,
                plan(super::rules::PERMISSION_RESOLVED, &[&"s1" as &dyn rusqlite::ToSql, &"perm-1"])?,
            ))
        })
        .await
        .expect("plans");
    assert!(plans.0.contains("session_events_turn_started"), "{}", plans.0);
    assert!(plans.1.contains("session_events_agent_update"), "{}", plans.1);
    assert!(plans.2.contains("session_events_turn_completed"), "{}", plans.2);
    assert!(plans.3.contains("session_events_permission_resolved"), "{}", plans.3);
}

/// The descriptors this process holds on `path` and the files SQLite keeps beside it.
fn descriptors_on(path: &std::path::Path) -> usize {
    let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| {
            target.parent() == path.parent()
                && target.file_name().is_some_and(|n| n.to_string_lossy().starts_with(name.as_str()))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_reads_opens_a_bounded_number_of_readers_and_idle_ones_are_closed() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("baton.db");
    let idle = std::time::Duration::from_millis(200);
    let store = Store::open_with_reader_idle(&path, Hub::new(), idle).expect("open the store");
    create_session_in(&store, &dir).await;
    let writer_only = descriptors_on(&path);

    // 300 reads at once, each holding its connection a moment.
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut reads = Vec::new();
    for _ in 0..300 {
        let (store, running, most) = (store.clone(), running.clone(), most.clone());
        reads.push(tokio::spawn(async move {
            store
                .read(move |conn| {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let count: i64 = conn.query_row("SELECT count(*) FROM tasks", [], |row| row.get(0))?;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok(count)
                })
                .await
        }));
    }
    for read in reads {
        assert_eq!(read.await.expect("read task").expect("read"), 1);
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= super::MAX_READERS, "{most} readers at once");
    let after_burst = descriptors_on(&path);
    assert!(after_burst <= writer_only + 3 * super::MAX_READERS, "{after_burst} descriptors after the burst");
    assert!(store.readers_open() <= super::MAX_READERS);

    // Unused, the readers are closed (waited for with a bound).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.readers_open() > 0 {
        assert!(std::time::Instant::now() < deadline, "{} readers still open", store.readers_open());
        tokio::time::sleep(idle / 4).await;
    }
    // SQLite keeps the database descriptor of a connection closed while another of the process
    // holds a lock (closing it would drop that lock) and reuses it for the next connection
    // opened: at most one per reader.
    // A reader is counted out just before its connection is dropped: its descriptors go a
    // moment later (waited for with the same bound).
    let after_idle = loop {
        let open = descriptors_on(&path);
        if open <= writer_only + super::MAX_READERS || std::time::Instant::now() >= deadline {
            break open;
        }
        tokio::time::sleep(idle / 4).await;
    };
    assert!(after_idle <= writer_only + super::MAX_READERS, "{after_idle} descriptors once the readers are closed");
    // And a read after that opens one again.
    assert_eq!(store.read(|conn| Ok(conn.query_row("SELECT 1", [], |row| row.get::<_, i64>(0))?)).await.unwrap(), 1);
    println!(
        "store: 300 concurrent reads, at most {most} readers at once; database descriptors {writer_only} (writer) -> \
         {after_burst} after the burst, {after_idle} once idle readers are closed"
    );
}

/// A database from before the journal was kept in the order it is written (migration 260),
/// with two sessions' events interleaved and one event larger than a page: the migration keeps
/// every event of each session, in order, under its seq, and leaves no copy of the journal in
/// the write-ahead log; the store appends after them; a second event under a seq already taken
/// is refused, as the former key refused it.
#[tokio::test]
async fn the_journal_moved_into_write_order_keeps_every_event_and_its_seq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("baton.db");
    let large = "x".repeat(10_000);
    {
        let mut conn = rusqlite::Connection::open(&path).expect("open");
        let older: Vec<super::migrate::Migration> = super::MIGRATIONS
            .iter()
            .filter(|m| m.version < 260)
            .map(|m| super::migrate::Migration { version: m.version, name: m.name, sql: m.sql })
            .collect();
        assert!(older.len() < super::MIGRATIONS.len(), "migration 260 exists");
        super::apply_migrations(&mut conn, &older).expect("older migrations");
        conn.execute_batch(
            "INSERT INTO tasks (id, title, description, state, agent, workdir, created_at, updated_at)
                 VALUES ('task1', 't', '', 'TODO', 'mock', '/tmp', 't', 't');
             INSERT INTO task_sessions (id, task_id, agent, state, created_at, updated_at, last_seq)
                 VALUES ('s1', 'task1', 'mock', 'WAITING_FOR_INPUT', 't', 't', 3),
                        ('s2', 'task1', 'mock', 'WAITING_FOR_INPUT', 't', 't', 2);",
        )
        .expect("sessions of the old schema");
        let rows = [
            ("s1", 1, SessionEvent::status("one")),
            ("s2", 1, SessionEvent::status("two")),
            ("s1", 2, SessionEvent::status(large.clone())),
            ("s2", 2, SessionEvent::status("four")),
            ("s1", 3, SessionEvent::status("five")),
        ];
        for (session, seq, event) in rows {
            conn.execute(
                "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4, 't')",
                rusqlite::params![session, seq, event.kind(), serde_json::to_string(&event).expect("payload")],
            )
            .expect("an event of the old schema");
        }
        // A third session's journal of about 2 MB, for the rewrite to weigh.
        let weight = serde_json::to_string(&SessionEvent::status("w".repeat(1_000))).expect("payload");
        for seq in 1..=2_000 {
            conn.execute(
                "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES ('s3', ?1, 'status', ?2, 't')",
                rusqlite::params![seq, weight],
            )
            .expect("an event of the old schema");
        }
    }
    let store = Store::open(&path, Hub::new()).expect("open and migrate");
    // The rewritten journal was copied into the database and the log cut back, not left in it.
    let log = std::fs::metadata(dir.path().join("baton.db-wal")).map(|m| m.len()).unwrap_or(0);
    assert!(log < 100_000, "the write-ahead log kept {log} bytes after the upgrade");
    let texts = |page: super::journal::EventsPage| -> Vec<(u64, String)> {
        page.events
            .into_iter()
            .map(|r| match r.event {
                SessionEvent::Status { message } => (r.seq, message),
                other => panic!("not a status: {other:?}"),
            })
            .collect()
    };
    let s1 = texts(store.events_after("s1", 0, 100).await.expect("s1's journal"));
    assert_eq!(s1, vec![(1, "one".to_string()), (2, large.clone()), (3, "five".to_string())]);
    let s2 = texts(store.events_after("s2", 1, 100).await.expect("s2's journal after 1"));
    assert_eq!(s2, vec![(2, "four".to_string())]);

    let next = store.append("s2", SessionEvent::status("six")).await.expect("an append after the moved ones");
    assert_eq!(next.seq, 3);
    let taken = store
        .write(|conn, _| {
            conn.execute(
                "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES ('s1', 2, 'status', '{}', 't')",
                [],
            )?;
            Ok(())
        })
        .await;
    assert!(taken.is_err(), "a seq already taken is refused");
    let s1 = texts(store.events_after("s1", 0, 100).await.expect("s1's journal again"));
    assert_eq!(s1.len(), 3, "nothing was added or lost: {s1:?}");
    store.close();
}
