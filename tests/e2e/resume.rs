//! The resume behaviour of docs/RESUME.md, row by row, across real restarts of a real batond
//! (kill -9) with real mock agent processes.

use crate::common;

use std::time::Duration;

use baton_protocol::*;
use common::*;

async fn status(client: &Client, session_id: &str) -> SessionStatus {
    client.request(SessionStatusParams { session_id: session_id.into() }).await.expect("status")
}

/// A conversation in which the agent was told to remember pineapple.
async fn pineapple(env: &TestEnv, server: &Server, agent: &str) -> String {
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, agent, "remember pineapple").await;
    let reply = messages(&client, &session_id).await.into_iter().find(|m| m.kind == MessageKind::Agent).unwrap().text;
    assert_eq!(reply, "OK, I will remember pineapple.");
    session_id
}

/// A pineapple conversation whose batond was killed with -9 and started again, with the `mock`
/// agent given `mock_flags` (none: unchanged) and the server `server_args`.
struct Restarted {
    env: TestEnv,
    server: Server,
    client: Client,
    notes: Notifications,
    session_id: String,
}

async fn restarted(agent: &str, mock_flags: &[&str], server_args: &[&str]) -> Restarted {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, agent).await;
    server.kill9().await;
    if !mock_flags.is_empty() {
        mock_with(&env, mock_flags);
    }
    let server = env.start_with(server_args).await;
    let (client, notes) = server.client().await;
    Restarted { env, server, client, notes, session_id }
}

/// Subscribes and asks the agent what it was told to remember.
async fn ask(client: &Client, notes: &mut Notifications, session_id: &str) -> String {
    subscribe(client, session_id, None).await;
    prompt(client, notes, session_id, "what did I ask you to remember?").await
}

/// Resumes and checks that the transcript kept what it had and gained exactly one status line
/// (a replay from the agent is not stored again); returns that line.
async fn resume_adding_one_status_line(client: &Client, notes: &mut Notifications, session_id: &str) -> String {
    let before = messages(client, session_id).await;
    resume(client, notes, session_id, false).await;
    let after = messages(client, session_id).await;
    assert_eq!(&after[..before.len()], &before[..], "the transcript is kept as it was");
    assert_eq!(after.len(), before.len() + 1, "only a status line was added: {:?}", &after[before.len()..]);
    assert_eq!(after[before.len()].kind, MessageKind::Status);
    after[before.len()].text.clone()
}

/// Resumes and waits for WAITING_FOR_INPUT; returns the status and the status lines since.
async fn resume(client: &Client, notes: &mut Notifications, session_id: &str, fresh: bool) -> SessionStatus {
    let result = client
        .request(SessionResumeParams { session_id: session_id.into(), fresh, retry_failed: false })
        .await
        .expect("resume");
    assert!(result.launched);
    assert_eq!(result.state, SessionState::Starting);
    wait_state(client, notes, session_id, SessionState::WaitingForInput).await
}

fn status_lines(messages: &[Message]) -> Vec<String> {
    messages.iter().filter(|m| m.kind == MessageKind::Status).map(|m| m.text.clone()).collect()
}

/// Overrides the built-in `mock` agent with extra mock-agent flags.
fn mock_with(env: &TestEnv, flags: &[&str]) {
    let mut args = vec!["mock-agent", "--state-dir", "{data_dir}/mock-agent"];
    args.extend_from_slice(flags);
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    env.agents_config(&format!("[agents.mock]\ncommand = \"{{batond}}\"\nargs = [{}]\n", args.join(", ")));
}

/// The parent of a process, from /proc.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.split_whitespace().nth(1)?.parse().ok()
}

/// Mock agent processes of this test's data dir (not their guards).
fn agent_processes(env: &TestEnv) -> Vec<u32> {
    mock_agent_processes(env, false)
}

// ---- Status cases (GetTaskSessionStatus) --------------------------------------------------

#[tokio::test]
async fn status_case_1_agent_running() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock").await;
    let (client, _) = server.client().await;
    let s = status(&client, &session_id).await;
    assert_eq!((s.needs_resume, s.is_agent_running, s.resume_reason), (false, true, ResumeReason::AgentRunning));
    assert!(s.agent_pid.is_some());
}

#[tokio::test]
async fn status_case_2_agent_starting() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } =
        restarted("mock", &["--restore-hang"], &["--handshake-timeout-secs", "3"]).await;
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    let s = status(&client, &session_id).await;
    assert_eq!(
        (s.state, s.needs_resume, s.resume_reason),
        (SessionState::Starting, false, ResumeReason::AgentStarting)
    );
    // The restore times out: inconclusive, so the token is kept and the session stays resumable.
    let s = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert_eq!((s.needs_resume, s.has_resume_token, s.resume_reason), (true, true, ResumeReason::AgentNotRunning));
    assert!(s.last_error.unwrap().contains("did not answer"));
}

#[tokio::test]
async fn status_case_3_token_and_active_state_after_restart() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock").await;
    server.kill9().await;
    let server = env.start().await;
    let (client, _) = server.client().await;
    let s = status(&client, &session_id).await;
    assert_eq!(s.state, SessionState::WaitingForInput);
    assert_eq!((s.needs_resume, s.is_resumable, s.has_resume_token), (true, true, true));
    assert_eq!(s.resume_reason, ResumeReason::AgentNotRunning);
    let rows = client.request(SessionListParams::default()).await.unwrap().sessions;
    assert_eq!(rows[0].status, s, "the list carries the same status fields");
}

#[tokio::test]
async fn status_case_4_and_prompt_case_c_a_start_that_never_delivered_its_prompt() {
    let env = TestEnv::new();
    gated_agent(&env, "");
    std::fs::write(env.data_dir.join("hang"), "").unwrap();
    let server = env.start().await;
    let (client, _) = server.client().await;
    let created = client.request(env.task("t", "remember mango", "gated", true)).await.unwrap();
    let session_id = created.session.status.session_id;
    assert_eq!(status(&client, &session_id).await.state, SessionState::Starting);
    server.kill9().await;
    std::fs::remove_file(env.data_dir.join("hang")).unwrap();

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let s = status(&client, &session_id).await;
    assert_eq!((s.state, s.has_resume_token), (SessionState::Starting, false));
    assert_eq!((s.needs_resume, s.resume_reason), (true, ResumeReason::AgentNotRunningFreshStart));

    // Case C: no token and not WAITING_FOR_INPUT: the task description is sent, since it
    // never reached an agent.
    subscribe(&client, &session_id, Some(0)).await;
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert_eq!(agent_text(&events), "OK, I will remember mango.");
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
}

// ---- buildResumeRequest prompt decisions -------------------------------------------------

#[tokio::test]
async fn prompt_case_a_a_token_restores_without_prompting() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } = restarted("mock", &[], &[]).await;
    let before = messages(&client, &session_id).await;
    resume(&client, &mut notes, &session_id, false).await;
    let after = messages(&client, &session_id).await;
    let users = |m: &[Message]| m.iter().filter(|m| m.kind == MessageKind::User).count();
    assert_eq!(users(&after), users(&before), "nothing was prompted automatically");
    assert_eq!(status_lines(&after).last().unwrap(), "Session resumed: the agent restored its context.");
}

#[tokio::test]
async fn prompt_case_b_fresh_start_of_a_waiting_session_boots_idle_and_brings_the_conversation() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } = restarted("mock", &[], &[]).await;
    let s = resume(&client, &mut notes, &session_id, true).await;
    assert!(s.has_resume_token, "the fresh session's own token is stored");
    let lines = status_lines(&messages(&client, &session_id).await);
    assert!(lines.last().unwrap().starts_with("Started over"), "{lines:?}");
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(
        reply, "[resume context received] You asked me to remember pineapple.",
        "a fresh agent session gets the conversation so far"
    );
}

#[tokio::test]
async fn a_fresh_start_of_an_agent_that_opted_out_of_history_has_no_context() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } =
        restarted("mock-plain", &[], &[]).await;
    resume(&client, &mut notes, &session_id, true).await;
    assert_eq!(ask(&client, &mut notes, &session_id).await, "You did not ask me to remember anything.");
}

#[tokio::test]
async fn an_interrupted_prompt_is_never_resent() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock").await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    client.request(MessageAddParams::new(session_id.clone(), "/hang")).await.unwrap();
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    server.kill9().await;

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let s = status(&client, &session_id).await;
    assert_eq!((s.state, s.needs_resume), (SessionState::Running, true), "state kept, resumable");
    let journal_end = subscribe(&client, &session_id, None).await.current_seq;
    let lines = status_lines(&messages(&client, &session_id).await);
    assert!(lines.iter().any(|l| l.contains("interrupted")), "{lines:?}");
    resume(&client, &mut notes, &session_id, false).await;
    let page =
        client.request(SubscribeParams { session_id: session_id.clone(), since_seq: Some(journal_end) }).await.unwrap();
    let (probe, mut probe_notes) = server.client().await;
    subscribe(&probe, &session_id, Some(journal_end)).await;
    let since = collect_events(&mut probe_notes, &session_id, |e| e.seq == page.current_seq).await;
    assert!(
        !since.iter().any(|e| matches!(e.event, SessionEvent::UserMessage { .. } | SessionEvent::TurnStarted { .. })),
        "no prompt was sent after the restart: {:?}",
        since.iter().map(|e| e.event.kind()).collect::<Vec<_>>()
    );
    // And the session takes new messages.
    assert_eq!(
        prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await,
        "You asked me to remember pineapple."
    );
}

// ---- The restore ladder --------------------------------------------------------------------

#[tokio::test]
async fn ladder_resume_advertised_uses_session_resume() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } = restarted("mock", &[], &[]).await;
    resume(&client, &mut notes, &session_id, false).await;
    assert!(status_lines(&messages(&client, &session_id).await).last().unwrap().contains("restored its context"));
}

#[tokio::test]
async fn ladder_resume_method_not_found_falls_back_to_load() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } =
        restarted("mock", &["--resume-error", "-32601"], &[]).await;
    let line = resume_adding_one_status_line(&client, &mut notes, &session_id).await;
    assert!(line.contains("reloaded the conversation"), "{line}");
    assert_eq!(ask(&client, &mut notes, &session_id).await, "You asked me to remember pineapple.");
}

#[tokio::test]
async fn ladder_neither_advertised_starts_a_new_session_and_says_so() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } =
        restarted("mock", &["--advertise", "none"], &[]).await;
    let s = resume(&client, &mut notes, &session_id, false).await;
    assert_eq!(s.task_state, TaskState::Review);
    let line = status_lines(&messages(&client, &session_id).await).pop().unwrap();
    // Not a failed restore: the agent said it has none, so nothing was tried.
    assert!(
        line.contains("cannot restore sessions itself") && line.contains("included with your next message"),
        "{line}"
    );
    assert!(!line.contains("could not be restored"), "{line}");
}

#[tokio::test]
async fn ladder_unknown_session_falls_back_and_never_fails_the_session() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock").await;
    server.kill9().await;
    // The agent forgot the session (-32002).
    std::fs::remove_dir_all(env.data_dir.join("mock-agent")).unwrap();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let mut transitions = Vec::new();
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(Notification::StateChanged(c)) if c.session_id == session_id => {
                transitions.push((c.state, c.task_state));
                (c.state == SessionState::WaitingForInput).then_some(())
            }
            _ => None,
        })
        .await
        .unwrap();
    // A resume failure (token invalid): STARTING, then WAITING_FOR_INPUT / REVIEW, not FAILED.
    assert_eq!(
        transitions,
        vec![(SessionState::Starting, TaskState::Review), (SessionState::WaitingForInput, TaskState::Review)]
    );
    let s = status(&client, &session_id).await;
    assert!(s.has_resume_token && s.is_agent_running, "the invalid token was replaced by the new session's");
    let line = status_lines(&messages(&client, &session_id).await).pop().unwrap();
    assert!(line.contains("could not be restored") && line.contains("no longer knows the session"), "{line}");
    assert!(line.contains("included with your next message"), "{line}");
    subscribe(&client, &session_id, None).await;
    assert_eq!(
        prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await,
        "[resume context received] You asked me to remember pineapple.",
        "the conversation is not lost: the new agent session gets it"
    );

    // The new token is the one stored: the next restart restores the new session.
    prompt(&client, &mut notes, &session_id, "remember kiwi").await;
    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    resume(&client, &mut notes, &session_id, false).await;
    subscribe(&client, &session_id, None).await;
    assert_eq!(
        prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await,
        "You asked me to remember kiwi."
    );
}

async fn inconclusive_failure_keeps_the_token(flags: &[&str], expected: &str) {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock").await;
    server.kill9().await;
    mock_with(&env, flags);
    let server = env.start_with(&["--handshake-timeout-secs", "3"]).await;
    let (client, mut notes) = server.client().await;
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    let mut seen = Vec::new();
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(Notification::StateChanged(c)) if c.session_id == session_id => {
                seen.push(c.state);
                (c.state == SessionState::WaitingForInput).then_some(())
            }
            _ => None,
        })
        .await
        .unwrap();
    assert!(!seen.contains(&SessionState::Failed));
    let s = status(&client, &session_id).await;
    assert_eq!((s.has_resume_token, s.needs_resume, s.is_resumable), (true, true, true), "{s:?}");
    assert!(s.last_error.as_deref().unwrap_or("").contains(expected), "{:?}", s.last_error);
    server.kill9().await;

    // Once the agent behaves again, the same token restores the same conversation.
    std::fs::remove_file(env.data_dir.join("agents.toml")).unwrap();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    resume(&client, &mut notes, &session_id, false).await;
    assert_eq!(ask(&client, &mut notes, &session_id).await, "You asked me to remember pineapple.");
}

#[tokio::test]
async fn ladder_bare_internal_error_keeps_the_token() {
    inconclusive_failure_keeps_the_token(&["--restore-error", "-32603"], "Internal error").await;
}

#[tokio::test]
async fn ladder_timeout_keeps_the_token() {
    inconclusive_failure_keeps_the_token(&["--restore-hang"], "did not answer").await;
}

#[tokio::test]
async fn ladder_auth_required_keeps_the_token() {
    inconclusive_failure_keeps_the_token(&["--restore-error", "-32000"], "authentication").await;
}

#[tokio::test]
async fn ladder_load_replay_is_not_shown_twice() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock-load").await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    prompt(&client, &mut notes, &session_id, "/tool").await;
    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let line = resume_adding_one_status_line(&client, &mut notes, &session_id).await;
    assert!(line.contains("reloaded the conversation"), "{line}");
    assert_eq!(ask(&client, &mut notes, &session_id).await, "You asked me to remember pineapple.");
}

#[tokio::test]
async fn ladder_replay_during_resume_is_tolerated() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } =
        restarted("mock", &["--resume-replays"], &[]).await;
    let line = resume_adding_one_status_line(&client, &mut notes, &session_id).await;
    assert!(line.contains("restored its context"), "replayed messages were dropped: {line}");
}

// ---- dispatchInitialPrompt and history injection ------------------------------------------

#[tokio::test]
async fn three_way_switch_history_injection_happens_once() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock-fresh").await;
    let history = std::fs::read_to_string(env.data_dir.join("sessions").join(format!("{session_id}.jsonl"))).unwrap();
    assert!(history.contains("\"type\":\"user_message\"") && history.contains("remember pineapple"));
    assert!(history.contains("\"type\":\"agent_message\"") && history.contains("OK, I will remember pineapple."));
    server.kill9().await;

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    resume(&client, &mut notes, &session_id, false).await;
    let line = status_lines(&messages(&client, &session_id).await).pop().unwrap();
    assert!(line.contains("included with your next message"), "{line}");
    subscribe(&client, &session_id, None).await;
    let first = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(first, "[resume context received] You asked me to remember pineapple.");
    let second = prompt(&client, &mut notes, &session_id, "hello").await;
    assert_eq!(second, "Echo: hello", "the context is injected once");
    let users = user_messages(&client, &session_id).await;
    assert_eq!(
        users,
        vec!["remember pineapple", "what did I ask you to remember?", "hello"],
        "the transcript shows what the user wrote"
    );
}

#[tokio::test]
async fn three_way_switch_plain_agent_boots_idle_and_says_so() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock-plain").await;
    assert!(
        !env.data_dir.join("sessions").join(format!("{session_id}.jsonl")).exists(),
        "no history without injection"
    );
    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    resume(&client, &mut notes, &session_id, false).await;
    let line = status_lines(&messages(&client, &session_id).await).pop().unwrap();
    assert!(line.contains("without the previous conversation"), "{line}");
    subscribe(&client, &session_id, None).await;
    assert_eq!(
        prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await,
        "You did not ask me to remember anything."
    );
}

// ---- Transition tables, token storage ------------------------------------------------------

/// Records (state, task state) of `session.state_changed` until `until` is reached.
async fn record_states(
    notes: &mut Notifications,
    session_id: &str,
    until: SessionState,
    seen: &mut Vec<(SessionState, TaskState)>,
) {
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(Notification::StateChanged(c)) if c.session_id == session_id => {
                seen.push((c.state, c.task_state));
                (c.state == until).then_some(())
            }
            _ => None,
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn transition_table_normal_resume() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } = restarted("mock", &[], &[]).await;
    subscribe(&client, &session_id, None).await;
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    let mut seen = Vec::new();
    record_states(&mut notes, &session_id, SessionState::WaitingForInput, &mut seen).await;
    client.request(MessageAddParams::new(session_id.clone(), "hi")).await.unwrap();
    record_states(&mut notes, &session_id, SessionState::Running, &mut seen).await;
    record_states(&mut notes, &session_id, SessionState::WaitingForInput, &mut seen).await;
    assert_eq!(
        seen,
        vec![
            (SessionState::Starting, TaskState::Review),
            (SessionState::WaitingForInput, TaskState::Review),
            (SessionState::Running, TaskState::InProgress),
            (SessionState::WaitingForInput, TaskState::Review),
        ]
    );
}

#[tokio::test]
async fn token_is_stored_when_the_acp_session_is_created() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "/hang", "mock", true)).await.unwrap();
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    let s = status(&client, &session_id).await;
    assert_eq!(s.state, SessionState::Running);
    assert!(s.has_resume_token, "stored at session creation, before any turn completed");
    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    resume(&client, &mut notes, &session_id, false).await;
    assert!(status_lines(&messages(&client, &session_id).await).last().unwrap().contains("restored its context"));
}

// ---- Lazy recovery, concurrency, prompts after a restart -----------------------------------

#[tokio::test]
async fn restart_launches_nothing_until_asked() {
    let env = TestEnv::new();
    let server = env.start().await;
    pineapple(&env, &server, "mock").await;
    server.kill9().await;
    let server = env.start().await;
    let (client, _) = server.client().await;
    client.request(TaskListParams::default()).await.unwrap();
    assert!(agent_processes(&env).is_empty(), "lazy recovery: no agent is started at boot");
}

#[tokio::test]
async fn twenty_concurrent_resumes_start_exactly_one_agent() {
    let Restarted { env, server: _server, client, mut notes, session_id } = restarted("mock", &[], &[]).await;
    let requests = (0..20).map(|_| {
        client.request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
    });
    // All twenty are on the wire before any answer is read.
    let results = futures_util::future::join_all(requests).await;
    let launched = results.iter().filter(|r| r.as_ref().expect("resume").launched).count();
    assert_eq!(launched, 1, "exactly one request launched an agent");
    let s = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    let processes = agent_processes(&env);
    // agent_pid is the agent's guard; the agent is its child.
    let guard = s.agent_pid.unwrap();
    let parents: Vec<Option<u32>> = processes.iter().map(|pid| parent_of(*pid)).collect();
    assert_eq!(parents, vec![Some(guard)], "one agent process, under the session's guard {guard}: {processes:?}");

    // A resume of a live, busy session returns it and never kills it.
    subscribe(&client, &session_id, None).await;
    client.request(MessageAddParams::new(session_id.clone(), "/slow 20")).await.unwrap();
    let again = client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    assert_eq!((again.launched, again.state), (false, SessionState::Running));
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert!(
        matches!(&events.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::EndTurn)
    );
    assert_eq!(agent_processes(&env), processes);
}

#[tokio::test]
async fn a_message_right_after_a_restart_gets_its_answer() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } = restarted("mock", &[], &[]).await;
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "You asked me to remember pineapple.");
    let agents = messages(&client, &session_id).await.into_iter().filter(|m| m.kind == MessageKind::Agent).count();
    assert_eq!(agents, 2, "no duplicated messages");
}

#[tokio::test]
async fn a_message_right_after_the_agent_exits_gets_its_answer() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock").await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    for _ in 0..3 {
        assert_eq!(prompt(&client, &mut notes, &session_id, "/exit").await, "Bye.");
        // Sent at once, racing the server noticing the exit: either way it must be answered.
        let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
        assert_eq!(reply, "You asked me to remember pineapple.");
    }
}

#[tokio::test]
async fn waiting_for_readiness_is_bounded_with_a_clear_error() {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, "mock").await;
    server.kill9().await;
    mock_with(&env, &["--restore-hang"]);
    let server = env.start_with(&["--ready-timeout-secs", "2", "--handshake-timeout-secs", "30"]).await;
    let (client, _) = server.client().await;
    let error = server_error(
        client.request_with_timeout(MessageAddParams::new(session_id.clone(), "hi"), Duration::from_secs(20)).await,
    );
    assert_eq!(error.code, ErrorCode::Unavailable);
    assert!(error.message.contains("did not become ready within 2 s"), "{}", error.message);
    assert!(status(&client, &session_id).await.is_resumable);
}

// ---- kill -9 in the middle of a conversation, one test per mock variant --------------------

/// Tells the agent to remember pineapple, kills batond with -9 in the middle of the next turn,
/// restarts it, resumes, and asks. Returns the answer and the status lines after the resume.
async fn killed_mid_turn_then_asked(agent: &str) -> (String, Vec<String>) {
    let env = TestEnv::new();
    let server = env.start().await;
    let session_id = pineapple(&env, &server, agent).await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    client.request(MessageAddParams::new(session_id.clone(), "/slow 200")).await.unwrap();
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    server.kill9().await;

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let s = status(&client, &session_id).await;
    assert!(s.needs_resume && s.is_resumable && !s.is_agent_running, "{s:?}");
    let before = messages(&client, &session_id).await;
    resume(&client, &mut notes, &session_id, false).await;
    let after_resume = messages(&client, &session_id).await;
    assert_eq!(&after_resume[..before.len()], &before[..], "nothing is duplicated or rewritten by the resume");
    let lines = status_lines(&after_resume[before.len()..]);
    subscribe(&client, &session_id, None).await;
    let answer = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    let users = user_messages(&client, &session_id).await;
    assert_eq!(users, vec!["remember pineapple", "/slow 200", "what did I ask you to remember?"]);
    (answer, lines)
}

#[tokio::test]
async fn restart_mid_conversation_mock_resume_restores_context() {
    let (answer, lines) = killed_mid_turn_then_asked("mock").await;
    assert_eq!(answer, "You asked me to remember pineapple.");
    assert_eq!(lines, vec!["Session resumed: the agent restored its context."]);
}

#[tokio::test]
async fn restart_mid_conversation_mock_load_restores_context_without_replay() {
    let (answer, lines) = killed_mid_turn_then_asked("mock-load").await;
    assert_eq!(answer, "You asked me to remember pineapple.");
    assert_eq!(lines.len(), 1);
    assert!(lines[0].contains("reloaded the conversation"));
}

#[tokio::test]
async fn restart_mid_conversation_mock_fresh_answers_from_injected_history() {
    let (answer, lines) = killed_mid_turn_then_asked("mock-fresh").await;
    assert_eq!(answer, "[resume context received] You asked me to remember pineapple.");
    assert!(lines[0].contains("included with your next message"), "{lines:?}");
}

#[tokio::test]
async fn restart_mid_conversation_mock_plain_boots_idle_and_says_so() {
    let (answer, lines) = killed_mid_turn_then_asked("mock-plain").await;
    assert_eq!(answer, "You did not ask me to remember anything.");
    assert!(lines[0].contains("without the previous conversation"), "{lines:?}");
}

#[tokio::test]
async fn a_fresh_start_injects_the_recorded_history_once() {
    let Restarted { env: _env, server: _server, client, mut notes, session_id } =
        restarted("mock-fresh", &[], &[]).await;
    let s = resume(&client, &mut notes, &session_id, true).await;
    assert!(s.is_agent_running);
    assert_eq!(
        ask(&client, &mut notes, &session_id).await,
        "[resume context received] You asked me to remember pineapple."
    );
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "hello").await;
    assert!(!reply.contains("resume context"), "injected once: {reply}");
}

#[tokio::test]
async fn the_injected_prompt_does_not_repeat_the_current_request() {
    let Restarted { env, server: _server, client, mut notes, session_id } = restarted("mock-fresh", &[], &[]).await;
    ask(&client, &mut notes, &session_id).await;
    // The mock agent keeps every prompt it received, as received.
    let mut injected = Vec::new();
    for entry in std::fs::read_dir(env.data_dir.join("mock-agent/sessions")).unwrap().flatten() {
        let file: serde_json::Value = serde_json::from_slice(&std::fs::read(entry.path()).unwrap()).unwrap();
        for item in file["history"].as_array().into_iter().flatten() {
            let text = item["text"].as_str().unwrap_or("");
            if text.contains("CURRENT REQUEST") {
                injected.push(text.to_string());
            }
        }
    }
    assert_eq!(injected.len(), 1, "one prompt carried the history");
    assert_eq!(injected[0].matches("what did I ask you to remember?").count(), 1, "{}", injected[0]);
    assert!(injected[0].contains("remember pineapple"), "the history is there: {}", injected[0]);
}

#[tokio::test]
async fn history_records_tool_calls_and_their_results() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock-fresh", "/tool").await;
    let history = std::fs::read_to_string(env.data_dir.join("sessions").join(format!("{session_id}.jsonl"))).unwrap();
    let entries: Vec<serde_json::Value> = history.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = entries.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["user_message", "tool_call", "tool_result", "agent_message"]);
    assert_eq!(entries[1]["tool_name"], "Read file");
    assert_eq!(
        (entries[2]["tool_name"].as_str(), entries[2]["content"].as_str()),
        (Some("Read file"), Some("tool output"))
    );
    assert_eq!(entries[3]["content"], "Tool finished.");
}

/// An agent an agents.toml adds, without `native_session_resume`, is restored the way its
/// `initialize` says: natively when it advertises session/resume or session/load, by injection
/// when it advertises neither; `native_session_resume = false` injects whatever it advertises.
#[tokio::test]
async fn a_new_agent_entry_is_restored_as_its_capabilities_say() {
    let env = TestEnv::new();
    let entry = |name: &str, advertise: &str, extra: &str| {
        format!(
            "[agents.{name}]\ncommand = \"{{batond}}\"\nargs = [\"mock-agent\", \"--state-dir\", \"{{data_dir}}/mock-agent\", \
             \"--advertise\", \"{advertise}\"]\n{extra}\n"
        )
    };
    env.agents_config(&format!(
        "{}{}{}",
        entry("mine-resumes", "both", ""),
        entry("mine-cannot", "none", ""),
        entry("mine-opts-out", "both", "native_session_resume = false")
    ));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let mut sessions = Vec::new();
    for agent in ["mine-resumes", "mine-cannot", "mine-opts-out"] {
        sessions.push((agent, started_session(&env, &client, &mut notes, agent, "remember pineapple").await));
    }
    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let mut answers = Vec::new();
    for (agent, session) in &sessions {
        subscribe(&client, session, None).await;
        answers.push((*agent, prompt(&client, &mut notes, session, "what did I ask you to remember?").await));
    }
    assert_eq!(
        answers,
        [
            ("mine-resumes", "You asked me to remember pineapple.".to_string()),
            ("mine-cannot", "[resume context received] You asked me to remember pineapple.".to_string()),
            ("mine-opts-out", "[resume context received] You asked me to remember pineapple.".to_string()),
        ]
    );
    server.stop().await;
}
