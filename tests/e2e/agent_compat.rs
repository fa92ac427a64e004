//! What real agents need from batond, proven with the mock agent's modes that behave like them:
//! authentication, whole process trees, conversations that survive every restore path, and
//! failures that say what to do.

use crate::common;

use baton_protocol::*;
use common::*;

async fn status(client: &Client, session_id: &str) -> SessionStatus {
    client.request(SessionStatusParams { session_id: session_id.into() }).await.expect("status")
}

/// An agent entry running the mock agent with extra flags (and TOML `extra` lines).
fn mock_entry(name: &str, flags: &[&str], extra: &str) -> String {
    let mut args = vec!["mock-agent", "--state-dir", "{data_dir}/mock-agent"];
    args.extend_from_slice(flags);
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[agents.{name}]\ncommand = \"{{batond}}\"\nargs = [{}]\nnative_session_resume = true\n{extra}\n",
        args.join(", ")
    )
}

/// Waits until a launch failed and the session went back to `back_to`; returns its last error.
async fn wait_last_error(
    client: &Client,
    notes: &mut Notifications,
    session_id: &str,
    back_to: SessionState,
) -> String {
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::Event(record))
                if record.session_id == session_id && matches!(record.event, SessionEvent::Error { .. }) =>
            {
                Some(())
            }
            _ => None,
        })
        .await
        .expect("an error event");
    wait_state(client, notes, session_id, back_to).await.last_error.expect("a last error")
}

#[tokio::test]
async fn an_agent_that_requires_authentication_is_authenticated_with_the_method_its_env_allows() {
    let env = TestEnv::new();
    env.agents_config(&mock_entry("keyed", &["--require-auth"], "env = { MOCK_API_KEY = \"k\" }"));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "keyed", "hello").await;
    server.kill9().await;

    // The restore after a restart needs authentication too.
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "again").await;
    assert!(reply.contains("again"), "{reply}");
    let shown = messages(&client, &session_id).await;
    assert!(
        shown.iter().any(|m| m.kind == MessageKind::Status && m.text.contains("restored its context")),
        "the agent restored its session after authenticating: {shown:?}"
    );
}

#[tokio::test]
async fn the_configured_auth_method_wins() {
    let env = TestEnv::new();
    env.agents_config(&mock_entry("login", &["--require-auth"], "auth_method = \"mock-login\""));
    std::fs::create_dir_all(env.data_dir.join("mock-agent")).unwrap();
    std::fs::write(env.data_dir.join("mock-agent/logged-in"), "").unwrap();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    started_session(&env, &client, &mut notes, "login", "hello").await;
}

#[tokio::test]
async fn an_agent_without_usable_authentication_names_the_methods_and_what_to_set() {
    let env = TestEnv::new();
    env.agents_config(&mock_entry("locked", &["--require-auth"], ""));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "hello", "locked", true)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    let error = wait_last_error(&client, &mut notes, &session_id, SessionState::Created).await;
    for needle in ["locked needs authentication", "mock-api-key", "mock-login", "MOCK_API_KEY", "agents.toml"] {
        assert!(error.contains(needle), "{needle:?} missing from {error}");
    }
    let all = messages(&client, &session_id).await;
    let shown = all.iter().find(|m| m.kind == MessageKind::Error).unwrap_or_else(|| panic!("{all:?}")).text.clone();
    assert!(!shown.contains("can be resumed again"), "not the generic advice: {shown}");
}

/// An interactive login named in agents.toml: the start fails at once (no `authenticate` the
/// agent would leave waiting until the handshake timeout) saying what to do, and so does a
/// resume.
async fn an_interactive_method_fails_at_once(method: &str, needles: &[&str]) {
    let env = TestEnv::new();
    let entry =
        mock_entry("codexlike", &["--require-auth", "--interactive-login"], &format!("auth_method = {method:?}"));
    env.agents_config(&entry);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let started = std::time::Instant::now();
    let created = client.request(env.task("t", "hello", "codexlike", true)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    let error = wait_last_error(&client, &mut notes, &session_id, SessionState::Created).await;
    // The handshake timeout is 60 s: a failure well before it was not a timeout.
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}: {error}", started.elapsed());
    for needle in needles.iter().chain(&["interactive login", "remove auth_method", "mock-api-key", "MOCK_API_KEY"]) {
        assert!(error.contains(needle), "{needle:?} missing from {error}");
    }
    assert!(!error.contains("did not answer"), "{error}");
    let started = std::time::Instant::now();
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .expect("resume");
    let again = wait_last_error(&client, &mut notes, &session_id, SessionState::Created).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "the resume fails at once too: {again}");
    assert!(again.contains("interactive login"), "{again}");
    server.stop().await;
}

#[tokio::test]
async fn a_browser_login_named_in_agents_toml_fails_at_once_with_what_to_do() {
    an_interactive_method_fails_at_once("chatgpt", &["Login with ChatGPT", "Opens a browser"]).await;
}

#[tokio::test]
async fn a_terminal_login_is_never_sent_to_authenticate() {
    an_interactive_method_fails_at_once("mock-terminal-login", &["the mock's own login screen", "batond login`"]).await;
}

/// The pids `--spawn-children` wrote for the agent launched last.
async fn children(path: &std::path::Path) -> Vec<u32> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pids: Vec<u32> =
            std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.len() == 3 {
            return pids;
        }
        assert!(tokio::time::Instant::now() < deadline, "the agent never wrote its children's pids");
        // Written by the agent at startup; no event to wait on from here.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn assert_all_gone(pids: &[u32], when: &str) {
    for pid in pids {
        assert!(wait_process_gone(*pid).await, "process {pid} outlived the agent ({when})");
    }
}

#[tokio::test]
async fn every_process_of_an_agent_tree_is_gone_after_stop_shutdown_and_kill9_restart() {
    let env = TestEnv::new();
    let pids_file = env.data_dir.join("children.txt");
    let flag = pids_file.to_string_lossy().into_owned();
    env.agents_config(&mock_entry("wrapper", &["--spawn-children", &flag], ""));

    // A stop.
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "wrapper", "hi").await;
    let pids = children(&pids_file).await;
    client.request(SessionStopParams { session_id }).await.unwrap();
    assert_all_gone(&pids, "stop").await;

    // A shutdown.
    std::fs::remove_file(&pids_file).unwrap();
    started_session(&env, &client, &mut notes, "wrapper", "hi").await;
    let pids = children(&pids_file).await;
    assert!(server.stop().await.success());
    assert_all_gone(&pids, "shutdown").await;

    // kill -9: the agent and its children die with the server, without waiting for a restart.
    std::fs::remove_file(&pids_file).unwrap();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "wrapper", "hi").await;
    let agent = status(&client, &session_id).await.agent_pid.unwrap();
    let pids = children(&pids_file).await;
    server.kill9().await;
    assert!(wait_process_gone(agent).await, "the agent died with the server");
    assert_all_gone(&pids, "kill -9, no restart").await;
}

/// The hardest grandchild: it starts a session of its own (so neither the agent's session nor
/// its group holds it), clears the environment (so it carries no marker), ignores SIGTERM, and
/// keeps working after its parent, the agent, is gone. It must still die promptly with batond.
#[tokio::test]
async fn a_grandchild_in_its_own_session_without_marker_dies_with_a_killed_server() {
    let env = TestEnv::new();
    let pid_file = env.data_dir.join("grandchild.pid");
    let beat = env.data_dir.join("beat");
    env.agents_config(&format!(
        r#"
        [agents.escaper]
        command = "bash"
        args = ["-c", "setsid env -i bash -c 'trap \"\" TERM; echo $$ > {pid}; while true; do date +%s%N > {beat}; sleep 0.05; done' < /dev/null > /dev/null 2>&1 & exec '{{batond}}' mock-agent --state-dir '{{data_dir}}/mock-agent'"]
        native_session_resume = true
        "#,
        pid = pid_file.display(),
        beat = beat.display(),
    ));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    started_session(&env, &client, &mut notes, "escaper", "hi").await;
    let grandchild = wait_pid_file(&pid_file).await;
    assert!(process_alive(grandchild));
    let environ = std::fs::read(format!("/proc/{grandchild}/environ")).unwrap_or_default();
    assert!(!String::from_utf8_lossy(&environ).contains("BATON_AGENT_EXECUTION"), "the grandchild has no marker");
    server.kill9().await;
    assert!(wait_process_gone(grandchild).await, "the grandchild {grandchild} kept working after batond died");
}

/// A pid a process wrote to `path` (written at its start; no event to wait on from here).
async fn wait_pid_file(path: &std::path::Path) -> u32 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(pid) = std::fs::read_to_string(path).ok().and_then(|text| text.trim().parse().ok()) {
            return pid;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} was never written", path.display());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_wrappers_background_child_does_not_survive_a_killed_server() {
    // The reproduction from the field: a shell that starts `sleep` and then the agent.
    let env = TestEnv::new();
    let pid_file = env.data_dir.join("sleep.pid");
    env.agents_config(&format!(
        r#"
        [agents.shell]
        command = "bash"
        args = ["-c", "sleep 1000 & echo $! > '{}'; exec '{{batond}}' mock-agent --state-dir '{{data_dir}}/mock-agent'"]
        native_session_resume = true
        "#,
        pid_file.display()
    ));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    started_session(&env, &client, &mut notes, "shell", "hi").await;
    let sleep: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    server.kill9().await;
    assert!(wait_process_gone(sleep).await, "the wrapper's child died with batond");
}

#[tokio::test]
async fn a_message_the_exiting_agent_never_read_is_delivered_after_a_resume_not_interrupted() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    subscribe(&client, &session_id, None).await;
    // The agent answers, reads nothing more and exits a second later: the next message stays
    // in its pipe, unread, like one written in the instant an agent exits.
    assert_eq!(prompt(&client, &mut notes, &session_id, "/exit-deaf 1000").await, "Bye.");
    let question = "what did I ask you to remember?";
    let reply = prompt(&client, &mut notes, &session_id, question).await;
    assert_eq!(reply, "You asked me to remember pineapple.", "delivered to the resumed agent");
    let all = messages(&client, &session_id).await;
    assert_eq!(all.iter().filter(|m| m.kind == MessageKind::User && m.text == question).count(), 1, "{all:?}");
    assert!(all.iter().any(|m| m.text.contains("had not reached it")), "{all:?}");
    assert!(!all.iter().any(|m| m.text.contains("interrupted")), "{all:?}");
}

#[tokio::test]
async fn a_crashed_agents_error_shows_the_cause_first_and_names_its_stderr_log() {
    let env = TestEnv::new();
    env.agents_config(
        r#"
        [agents.broken]
        command = "sh"
        args = ["-c", "echo 'Error: CODEX_HOME points to /nope, but that path does not exist' >&2; for i in $(seq 1 30); do echo \"  $i: frame_$i\" >&2; done; exit 101"]
        native_session_resume = true
        "#,
    );
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "hello", "broken", true)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    let error = wait_last_error(&client, &mut notes, &session_id, SessionState::Created).await;
    let log = env.data_dir.join("agent-logs").join(format!("{session_id}.log"));
    assert!(error.contains("exited with code 101; stderr: Error: CODEX_HOME points to /nope"), "{error}");
    assert!(error.contains(&format!("its whole stderr is in {}", log.display())), "{error}");
    let kept = std::fs::read_to_string(&log).expect("the stderr log");
    assert!(kept.contains("CODEX_HOME") && kept.contains("1: frame_1\n") && kept.contains("30: frame_30"), "{kept}");
}

/// A cancel the agent answers with `end_turn` (opencode before 1.18) or with an error from the
/// work it abandoned (opencode 1.18: -32603) instead of ACP's `cancelled` shows as cancelled,
/// with no error; the next turn, not cancelled, ends as the agent says.
#[tokio::test]
async fn a_cancel_the_agent_answers_with_end_turn_or_an_error_shows_as_cancelled() {
    for flag in ["--cancel-ends-turn", "--cancel-errors"] {
        let env = TestEnv::new();
        env.agents_config(&mock_entry("odd", &[flag], ""));
        let server = env.start().await;
        let (client, mut notes) = server.client().await;
        let session_id = started_session(&env, &client, &mut notes, "odd", "hi").await;
        client.request(MessageAddParams::new(session_id.clone(), "/hang")).await.unwrap();
        collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
        client.request(SessionCancelParams { session_id: session_id.clone() }).await.expect("cancel");
        let events = collect_events(&mut notes, &session_id, is_turn_end).await;
        assert!(
            matches!(&events.last().expect("the turn's end").event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Cancelled),
            "{flag}: {:?}",
            events.last()
        );
        let errors: Vec<&EventRecord> =
            events.iter().filter(|e| matches!(e.event, SessionEvent::Error { .. })).collect();
        assert!(errors.is_empty(), "{flag}: a cancel is no failure: {errors:?}");
        // The next turn, not cancelled, ends as the agent says.
        let reply = prompt(&client, &mut notes, &session_id, "hello").await;
        assert!(reply.contains("hello"), "{flag}: {reply}");
        // A failure of a turn nobody cancelled is still one.
        client.request(MessageAddParams::new(session_id.clone(), "/error")).await.unwrap();
        let events = collect_events(&mut notes, &session_id, is_turn_end).await;
        assert!(events.iter().any(|e| matches!(e.event, SessionEvent::Error { .. })), "{flag}: {events:?}");
    }
}

#[tokio::test]
async fn tool_calls_of_different_agent_processes_stay_different_entries() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "/tool").await;
    subscribe(&client, &session_id, None).await;
    // The agent exits; the next one numbers its tool calls from 1 again.
    assert_eq!(prompt(&client, &mut notes, &session_id, "/exit").await, "Bye.");
    prompt(&client, &mut notes, &session_id, "/tool").await;
    let tools = |all: &[Message]| all.iter().filter(|m| m.kind == MessageKind::ToolCall).count();
    assert_eq!(tools(&messages(&client, &session_id).await), 2, "one entry per tool call");
    // Also after a reload of the transcript from a restarted server.
    server.kill9().await;
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    assert_eq!(tools(&messages(&client, &session_id).await), 2);
}
