//! Forking a session (`task.session.fork`) with a real batond and real mock agents: an agent
//! that advertises `session/fork` copies its own session; one that does not gets the
//! conversation injected into a fresh session. Either way the fork records and shows its
//! origin and its transcript starts with the copied conversation.

use crate::common;

use baton_protocol::*;
use common::*;

/// The mock agent advertising resume, load and `session/fork`.
const FORKABLE: &str = r#"
[agents.mock-forkable]
command = "{batond}"
args = ["mock-agent", "--state-dir", "{data_dir}/mock-agent", "--advertise", "both", "--advertise-fork"]
native_session_resume = true
history_context_injection = true
"#;

async fn fork(client: &Client, notes: &mut Notifications, source: &str) -> SessionInfo {
    let result = client
        .request(SessionForkParams::new(source))
        .await
        .unwrap_or_else(|e| panic!("task.session.fork {source}: {e}"));
    let fork = result.session;
    wait_state(client, notes, &fork.status.session_id, SessionState::WaitingForInput).await;
    fork
}

fn statuses(journal: &[EventRecord]) -> Vec<String> {
    journal
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::Status { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// The fork's journal starts with the source's conversation (its user messages and replies);
/// returns the journal (and leaves the fork subscribed).
async fn copied_conversation(
    client: &Client,
    notes: &mut Notifications,
    source: &str,
    fork: &SessionInfo,
) -> Vec<EventRecord> {
    let fork_id = &fork.status.session_id;
    assert_eq!(user_messages(client, fork_id).await, user_messages(client, source).await);
    let journal = read_journal(client, notes, fork_id).await;
    assert!(matches!(&journal[0].event, SessionEvent::UserMessage { text, .. } if text == "remember pineapple"));
    assert!(agent_text(&journal).contains("OK, I will remember pineapple."), "{journal:?}");
    let origin = fork.forked_from.as_ref().expect("the fork names its source");
    assert!(
        statuses(&journal).iter().any(|s| s.contains(&format!("Forked from session {source}"))
            && s.contains(&format!("up to event {}", origin.seq))),
        "{:?}",
        statuses(&journal)
    );
    journal
}

#[tokio::test]
async fn fork_with_session_fork_copies_the_agent_session() {
    let env = TestEnv::new();
    env.agents_config(FORKABLE);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let source = started_session(&env, &client, &mut notes, "mock-forkable", "remember pineapple").await;
    let source_seq = status_row(&client, &source).await.last_seq;

    let fork = fork(&client, &mut notes, &source).await;
    let fork_id = fork.status.session_id.clone();
    assert_ne!(fork_id, source);
    assert_eq!(fork.status.task_id, status_row(&client, &source).await.status.task_id, "same task");
    assert_eq!(fork.forked_from, Some(ForkOrigin { session_id: source.clone(), seq: source_seq }));
    assert_eq!(status_row(&client, &fork_id).await.forked_from, fork.forked_from, "the list row shows the origin");
    let journal = copied_conversation(&client, &mut notes, &source, &fork).await;
    assert!(statuses(&journal).iter().any(|s| s.contains("(session/fork)")), "{:?}", statuses(&journal));

    // The agent received session/fork: its session knows its source, and has the context
    // without any injection.
    let origin = prompt(&client, &mut notes, &fork_id, "/origin").await;
    assert!(origin.starts_with("Forked from mock-"), "{origin}");
    let recalled = prompt(&client, &mut notes, &fork_id, "what did I ask you to remember?").await;
    assert_eq!(recalled, "You asked me to remember pineapple.");

    // The source goes on untouched.
    assert_eq!(prompt(&client, &mut notes, &source, "/origin").await, "Not a fork.");
    assert_eq!(status_row(&client, &source).await.forked_from, None);
}

#[tokio::test]
async fn fork_without_session_fork_injects_the_history() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    // `mock` restores its own sessions but does not advertise session/fork.
    let source = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;

    let fork = fork(&client, &mut notes, &source).await;
    let fork_id = fork.status.session_id.clone();
    assert_eq!(fork.forked_from.as_ref().map(|o| o.session_id.as_str()), Some(source.as_str()));
    let journal = copied_conversation(&client, &mut notes, &source, &fork).await;
    assert!(
        statuses(&journal)
            .iter()
            .any(|s| s.contains("cannot fork sessions") && s.contains("included with your next message")),
        "{:?}",
        statuses(&journal)
    );

    // A fresh agent session, with the conversation injected into the first message.
    let recalled = prompt(&client, &mut notes, &fork_id, "what did I ask you to remember?").await;
    assert_eq!(recalled, "[resume context received] You asked me to remember pineapple.");
    assert_eq!(prompt(&client, &mut notes, &fork_id, "/origin").await, "Not a fork.");
}

#[tokio::test]
async fn fork_of_a_session_mid_turn_is_refused_until_the_turn_ends() {
    let env = TestEnv::new();
    env.agents_config(FORKABLE);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let source = started_session(&env, &client, &mut notes, "mock-forkable", "remember pineapple").await;
    client.request(MessageAddParams::new(source.clone(), "/hang")).await.expect("message.add");
    wait_state(&client, &mut notes, &source, SessionState::Running).await;

    let error = server_error(client.request(SessionForkParams::new(source.clone())).await);
    assert_eq!(error.code, ErrorCode::Conflict);
    assert!(error.message.contains("middle of a turn"), "{}", error.message);
    // A conflict that passes by itself (the turn ends): the same fork can be asked again later.
    assert!(error.retryable, "{error:?}");
    let rows = client.request(SessionListParams::default()).await.expect("task.session.list").sessions;
    assert_eq!(rows.len(), 1, "a refused fork leaves no session behind");

    client.request(SessionCancelParams { session_id: source.clone() }).await.expect("task.session.cancel");
    collect_events(&mut notes, &source, is_turn_end).await;
    wait_state(&client, &mut notes, &source, SessionState::WaitingForInput).await;
    let fork = fork(&client, &mut notes, &source).await;
    subscribe(&client, &fork.status.session_id, None).await;
    let recalled = prompt(&client, &mut notes, &fork.status.session_id, "what did I ask you to remember?").await;
    assert_eq!(recalled, "You asked me to remember pineapple.");
}

#[tokio::test]
async fn fork_of_an_unknown_session_is_not_found() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    let error = server_error(client.request(SessionForkParams::new("sess-nope")).await);
    assert_eq!(error.code, ErrorCode::NotFound);
}

/// The session's row in `task.session.list`.
async fn status_row(client: &Client, session_id: &str) -> SessionInfo {
    let rows = client.request(SessionListParams::default()).await.expect("task.session.list").sessions;
    rows.into_iter().find(|r| r.status.session_id == session_id).expect("the session is listed")
}

/// Handing a conversation to another agent (`agent` of `task.session.fork`): the new session
/// runs that agent in the same task, gets the conversation injected even though the agent
/// could copy a session of its own (it cannot copy another agent's), says where it came from,
/// and keeps its agent through a `kill -9` of batond.
#[tokio::test]
async fn handing_a_session_to_another_agent_injects_the_conversation_and_survives_a_restart() {
    let env = TestEnv::new();
    env.agents_config(FORKABLE);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let source = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;

    let mut params = SessionForkParams::new(source.clone());
    params.agent = Some("mock-forkable".into());
    let handed = client.request(params).await.expect("task.session.fork with another agent").session;
    let handed_id = handed.status.session_id.clone();
    wait_state(&client, &mut notes, &handed_id, SessionState::WaitingForInput).await;
    assert_eq!(handed.status.agent, "mock-forkable");
    assert_eq!(handed.status.task_id, status_row(&client, &source).await.status.task_id, "same task");
    assert_eq!(handed.forked_from.as_ref().map(|o| o.session_id.as_str()), Some(source.as_str()));
    let journal = read_journal(&client, &mut notes, &handed_id).await;
    let said = statuses(&journal);
    assert!(
        said.iter().any(|s| s.contains(&format!("Handed over from session {source} (mock) to mock-forkable"))),
        "{said:?}"
    );
    assert!(
        said.iter().any(|s| s.starts_with("Switched from mock") && s.contains("included with your next message")),
        "{said:?}"
    );
    assert_eq!(user_messages(&client, &handed_id).await, user_messages(&client, &source).await);

    // Not session/fork (the source's agent session is another agent's): the history injected.
    let recalled = prompt(&client, &mut notes, &handed_id, "what did I ask you to remember?").await;
    assert_eq!(recalled, "[resume context received] You asked me to remember pineapple.");
    assert_eq!(prompt(&client, &mut notes, &handed_id, "/origin").await, "Not a fork.");

    // Through a kill -9 of batond the new session keeps its agent and its context.
    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &handed_id, None).await;
    let after = prompt(&client, &mut notes, &handed_id, "what did I ask you to remember?").await;
    assert!(after.ends_with("You asked me to remember pineapple."), "{after}");
    assert_eq!(status_row(&client, &handed_id).await.status.agent, "mock-forkable");

    // An agent that is not configured is refused, and nothing is created.
    let before = client.request(SessionListParams::default()).await.expect("task.session.list").sessions.len();
    let mut params = SessionForkParams::new(source.clone());
    params.agent = Some("no-such-agent".into());
    let refused = server_error(client.request(params).await);
    assert_eq!(refused.code, ErrorCode::ValidationError, "{refused:?}");
    assert!(refused.message.contains("no-such-agent"), "{refused:?}");
    let after = client.request(SessionListParams::default()).await.expect("task.session.list").sessions.len();
    assert_eq!(after, before, "a refused handover leaves no session behind");
    server.stop().await;
}
