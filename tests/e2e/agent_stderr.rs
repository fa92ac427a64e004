//! What agents write to stderr: kept in `DATA_DIR/agent-logs/<session>.log` whatever runtime
//! runs them, named in the errors it explains, and plain text (no terminal colour codes) in
//! both. Real batond, real mock agents (standalone and hosted; docker in docker_runtime.rs, ssh
//! in ssh_runtime.rs).

use crate::common;

use baton_protocol::*;
use common::*;

/// A line as codex's tracing logger colours it: a dimmed timestamp, a red level.
const COLOURED: &str = r"\e[2m2026-01-01T00:00:00.000Z\e[0m \e[31mERROR\e[0m codex_core: stream disconnected";
/// The same line as plain text.
const PLAIN: &str = "2026-01-01T00:00:00.000Z ERROR codex_core: stream disconnected";

pub fn log_path(env: &TestEnv, session_id: &str) -> std::path::PathBuf {
    env.data_dir.join("agent-logs").join(format!("{session_id}.log"))
}

/// Waits (bounded) until the session's agent log holds `needle`, and returns the log.
pub async fn wait_agent_log(env: &TestEnv, session_id: &str, needle: &str) -> String {
    let path = log_path(env, session_id);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} never held {needle:?}: {text:?}", path.display());
        // The log is appended by batond as the lines arrive; there is no event to wait on.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn agents_run_with_no_color_unless_their_entry_sets_it() {
    let env = TestEnv::new();
    env.agents_config(&mock_agent_in("painted", "standalone", "env = { NO_COLOR = \"kept\" }"));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let plain = started_session(&env, &client, &mut notes, "mock", "hello").await;
    assert_eq!(prompt(&client, &mut notes, &plain, "/env NO_COLOR").await, "NO_COLOR=1");
    let painted = started_session(&env, &client, &mut notes, "painted", "hello").await;
    assert_eq!(prompt(&client, &mut notes, &painted, "/env NO_COLOR").await, "NO_COLOR=kept");
    server.stop().await;
}

/// Coloured stderr, then a crash: the session's error, its `last_error` and the log file hold
/// the line as plain text, and the error names the log file. `agent` is configured in `env`
/// with the runtime under test.
pub async fn crash_after_coloured_stderr(env: &TestEnv, agent: &str) {
    let server = env.start_with(&["--agentctl-grace-ms", "1500"]).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, agent, "hello").await;
    assert_eq!(prompt(&client, &mut notes, &session_id, &format!("/stderr {COLOURED}")).await, "Wrote to stderr.");
    wait_agent_log(env, &session_id, "codex_core: stream disconnected").await;
    client.request(MessageAddParams::new(session_id.clone(), "/crash")).await.unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    let error = events
        .iter()
        .find_map(|e| match &e.event {
            SessionEvent::Error { message } if message.contains("exited with code 3") => Some(message.clone()),
            _ => None,
        })
        .expect("the crash is reported");
    let log = log_path(env, &session_id);
    assert!(error.contains(PLAIN), "the cause is shown, plain: {error:?}");
    assert!(!error.contains('\x1b'), "no escape reaches the error: {error:?}");
    assert!(error.contains(&log.display().to_string()), "the error names the log file: {error:?}");
    let status = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    let last_error = status.last_error.unwrap_or_default();
    assert!(last_error.contains(PLAIN) && !last_error.contains('\x1b'), "{last_error:?}");
    let kept = std::fs::read_to_string(&log).expect("the agent log");
    assert!(kept.contains(PLAIN) && !kept.contains('\x1b'), "{kept:?}");
    server.stop().await;
}

#[tokio::test]
async fn colour_codes_of_a_standalone_agents_stderr_reach_neither_errors_nor_the_log() {
    let env = TestEnv::new();
    crash_after_coloured_stderr(&env, "mock").await;
}

#[tokio::test]
async fn a_hosted_agents_stderr_is_kept_in_its_session_log_and_named_when_it_crashes() {
    let env = TestEnv::new();
    env.agents_config("[agents.mock]\nruntime = \"hosted\"\n");
    crash_after_coloured_stderr(&env, "mock").await;
}

#[tokio::test]
async fn a_reattached_hosted_agents_stderr_goes_on_into_the_same_log() {
    let env = TestEnv::new();
    env.agents_config("[agents.mock]\nruntime = \"hosted\"\n");
    let server = env.start_with(&["--agentctl-grace-ms", "1500"]).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    prompt(&client, &mut notes, &session_id, "/stderr before the restart").await;
    wait_agent_log(&env, &session_id, "before the restart").await;
    server.kill9().await;

    let server = env.start_with(&["--agentctl-grace-ms", "1500"]).await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    prompt(&client, &mut notes, &session_id, "/stderr after the restart").await;
    let log = wait_agent_log(&env, &session_id, "after the restart").await;
    assert_eq!(log.matches("before the restart").count(), 1, "a line is logged once: {log}");
    assert!(log.contains("reattached to the agent in the agent host"), "{log}");
    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    server.stop().await;
}

/// A turn the agent fails with a bare "Internal error" (-32603) names the agent's log and quotes
/// its last lines, which say what happened; the colour codes are gone from both.
#[tokio::test]
async fn a_failed_turn_names_the_agent_log_and_quotes_its_last_lines() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    prompt(&client, &mut notes, &session_id, &format!("/stderr {COLOURED}")).await;
    let log = log_path(&env, &session_id);
    wait_agent_log(&env, &session_id, PLAIN).await;
    let events = run_turn(&client, &mut notes, &session_id, "/error").await;
    let error = first_error(&events);
    assert!(error.contains("Scripted prompt failure"), "{error}");
    assert!(error.contains(&log.display().to_string()), "the log is named: {error}");
    assert!(error.contains(PLAIN), "its last line is quoted, plain: {error}");
}

/// An agent that opens sessions but refuses the first prompt for authentication (as
/// claude-agent-acp without its key) gets the same hint as at start: what it offers, what to set.
#[tokio::test]
async fn a_turn_refused_for_authentication_says_what_to_set() {
    let env = TestEnv::new();
    env.agents_config(
        r#"
        [agents.keyless]
        command = "{batond}"
        args = ["mock-agent", "--state-dir", "{data_dir}/mock-agent", "--prompt-needs-auth"]
        "#,
    );
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "", "keyless", true)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    subscribe(&client, &session_id, None).await;
    let events = run_turn(&client, &mut notes, &session_id, "hello").await;
    let error = first_error(&events);
    assert!(error.contains("Authentication required"), "{error}");
    assert!(error.contains("MOCK_API_KEY") && error.contains("[agents.keyless]"), "what to set: {error}");
    let row = status(&client, &session_id).await;
    assert!(row.last_error.as_deref().is_some_and(|e| e.contains("MOCK_API_KEY")), "{row:?}");
}
