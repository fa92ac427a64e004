//! The steps a script takes with a session: wait for a state, run a turn and collect its
//! events, read the journal. Each wait is bounded by [`WAIT`] and says what it waited for.

use std::path::Path;
use std::time::Duration;

use baton_protocol::*;

use crate::{TestEnv, WAIT};

/// The server's error of a request that should have failed.
pub fn server_error(result: Result<impl std::fmt::Debug, ClientError>) -> ErrorPayload {
    match result {
        Err(ClientError::Server(error)) => error,
        other => panic!("expected a server error, got {other:?}"),
    }
}

pub async fn status(client: &Client, session_id: &str) -> SessionStatus {
    client.request(SessionStatusParams { session_id: session_id.into() }).await.expect("task.session.status")
}

/// Waits for `session.state_changed` to `state` (checking the current status first, except for
/// `starting`, which a session passes through) and returns the status then.
pub async fn wait_state(
    client: &Client,
    notes: &mut Notifications,
    session_id: &str,
    state: SessionState,
) -> SessionStatus {
    let current = status(client, session_id).await;
    if current.state == state && state != SessionState::Starting {
        return current;
    }
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(c))
                if c.session_id == session_id && c.state == state =>
            {
                Some(())
            }
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("session {session_id} did not reach {state}: {e}"));
    status(client, session_id).await
}

/// The session's status once the server is no longer reconnecting to its agent (startup
/// recovery of a Docker or ssh agent happens in the background): when the status says
/// `agent_reconnecting`, the `session.state_changed` that ends it is waited for.
pub async fn status_reconnected(client: &Client, notes: &mut Notifications, session_id: &str) -> SessionStatus {
    let current = status(client, session_id).await;
    if current.resume_reason != ResumeReason::AgentReconnecting {
        return current;
    }
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(c)) if c.session_id == session_id => Some(()),
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("session {session_id} is still reconnecting: {e}"));
    status(client, session_id).await
}

/// `session.subscribe`, from `since_seq` (replaying the journal after it) or from now.
pub async fn subscribe(client: &Client, session_id: &str, since_seq: Option<u64>) -> SubscribeResult {
    client.request(SubscribeParams { session_id: session_id.into(), since_seq }).await.expect("session.subscribe")
}

/// Collects `session.event`s of `session_id` until `done` says stop; returns them in order.
pub async fn collect_events(
    notes: &mut Notifications,
    session_id: &str,
    mut done: impl FnMut(&EventRecord) -> bool,
) -> Vec<EventRecord> {
    let mut events = Vec::new();
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => {
                events.push(record.clone());
                done(record).then_some(())
            }
            _ => None,
        })
        .await
        .unwrap_or_else(|e| {
            panic!(
                "events of {session_id} stopped early ({e}); got {:?}",
                events.iter().map(|e| e.event.kind()).collect::<Vec<_>>()
            )
        });
    events
}

pub fn is_turn_end(record: &EventRecord) -> bool {
    matches!(record.event, SessionEvent::TurnCompleted { .. })
}

/// Sends a message (the session must be subscribed) and collects the events of its turn, up
/// to and including `turn_completed`.
pub async fn run_turn(client: &Client, notes: &mut Notifications, session_id: &str, content: &str) -> Vec<EventRecord> {
    client
        .request_with_timeout(MessageAddParams::new(session_id, content), Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("message.add {content:?}: {e}"));
    collect_events(notes, session_id, is_turn_end).await
}

/// Runs a turn (see [`run_turn`]) and returns the agent's reply text.
pub async fn prompt(client: &Client, notes: &mut Notifications, session_id: &str, content: &str) -> String {
    agent_text(&run_turn(client, notes, session_id, content).await)
}

/// The message of the first `error` event in `events`; panics when there is none.
pub fn first_error(events: &[EventRecord]) -> String {
    events
        .iter()
        .find_map(|e| match &e.event {
            SessionEvent::Error { message } => Some(message.clone()),
            _ => None,
        })
        .expect("an error event")
}

/// The agent's text in `events`, chunks joined.
pub fn agent_text(events: &[EventRecord]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::MessageChunk { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Waits (bounded by [`WAIT`]) until a `session.state_changed` says the session needs resuming.
pub async fn wait_needs_resume(notes: &mut Notifications, session_id: &str) {
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(c))
                if c.session_id == session_id && c.needs_resume =>
            {
                Some(())
            }
            _ => None,
        })
        .await
        .expect("the session becomes resumable");
}

/// Events per second of one `/chunks N` turn of the mock agent, as the subscribed client
/// receives them (the turn's end waited for up to `bound`).
pub async fn chunks_rate(
    client: &Client,
    notes: &mut Notifications,
    session_id: &str,
    chunks: u64,
    bound: Duration,
) -> f64 {
    let started = std::time::Instant::now();
    client.request(MessageAddParams::new(session_id, format!("/chunks {chunks}"))).await.expect("message.add");
    let mut events = 0u64;
    notes
        .wait_for(bound, |e| match e {
            ClientEvent::Notification(Notification::Event(r)) if r.session_id == session_id => {
                events += 1;
                matches!(r.event, SessionEvent::TurnCompleted { .. }).then_some(())
            }
            _ => None,
        })
        .await
        .expect("turn end");
    events as f64 / started.elapsed().as_secs_f64()
}

/// The text of each streamed chunk in `events`, in order (to check that each came once).
pub fn chunk_texts(events: &[EventRecord]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::MessageChunk { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// What the mock agent's `/slow N` streams: "s1 ", "s2 ", ... one chunk per word.
pub fn slow_chunks(n: u64) -> Vec<String> {
    (1..=n).map(|i| format!("s{i} ")).collect()
}

/// Starts a `/slow 60` turn (the mock agent) and returns its events up to the `chunks`-th
/// streamed chunk: a turn caught mid-stream, for a kill or a dropped connection.
pub async fn slow_turn_until(
    client: &Client,
    notes: &mut Notifications,
    session_id: &str,
    chunks: usize,
) -> Vec<EventRecord> {
    client.request(MessageAddParams::new(session_id, "/slow 60")).await.expect("message.add");
    let mut seen = 0;
    collect_events(notes, session_id, |e| {
        if matches!(e.event, SessionEvent::MessageChunk { .. }) {
            seen += 1;
        }
        seen == chunks
    })
    .await
}

/// The folded view (`message.list`), oldest first.
pub async fn messages(client: &Client, session_id: &str) -> Vec<Message> {
    client.request(MessageListParams::all(session_id)).await.expect("message.list").messages
}

/// The user messages of the folded view, oldest first.
pub async fn user_messages(client: &Client, session_id: &str) -> Vec<String> {
    messages(client, session_id).await.into_iter().filter(|m| m.kind == MessageKind::User).map(|m| m.text).collect()
}

/// Creates a task with `agent`, started, subscribes to its session and waits for the first
/// turn to finish and the session to wait for input. Returns the session id.
pub async fn started_session(
    env: &TestEnv,
    client: &Client,
    notes: &mut Notifications,
    agent: &str,
    description: &str,
) -> String {
    let created = client.request(env.task("t", description, agent, true)).await.expect("task.create");
    let session_id = created.session.status.session_id.clone();
    subscribe(client, &session_id, Some(0)).await;
    collect_events(notes, &session_id, is_turn_end).await;
    wait_state(client, notes, &session_id, SessionState::WaitingForInput).await;
    session_id
}

/// Every event of the session's journal, oldest first, read back through a subscription from
/// seq 0 (which also leaves the session subscribed).
pub async fn read_journal(client: &Client, notes: &mut Notifications, session_id: &str) -> Vec<EventRecord> {
    let current = subscribe(client, session_id, Some(0)).await.current_seq;
    if current == 0 {
        return Vec::new();
    }
    collect_events(notes, session_id, |e| e.seq >= current).await
}

/// Reads batond's log files until `needle` shows up (the log is written by a background thread).
pub async fn wait_log(data_dir: &Path, needle: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut text = String::new();
        for entry in std::fs::read_dir(data_dir.join("logs")).into_iter().flatten().flatten() {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
        if text.contains(needle) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "batond never logged {needle:?}");
        // A log line has no event to wait on from here; a short poll bounded by WAIT.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `task.session.resume` (`fresh`: start a new agent conversation instead of restoring the
/// old one) and waits until the session waits for input again.
pub async fn resume(client: &Client, notes: &mut Notifications, session_id: &str, fresh: bool) -> SessionStatus {
    let result = client
        .request(SessionResumeParams { session_id: session_id.into(), fresh, retry_failed: false })
        .await
        .unwrap_or_else(|e| panic!("task.session.resume {session_id}: {e}"));
    assert!(result.launched, "the resume of {session_id} launched no agent: {result:?}");
    wait_state(client, notes, session_id, SessionState::WaitingForInput).await
}
