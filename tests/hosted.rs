//! Issue 8: agents that outlive the server. A real `batond`, a real agent host
//! (`batond agentctl`) and real mock agent processes; the server is killed with -9 mid-turn.

mod common;

use baton_protocol::*;
use common::*;

/// Short, so that the tests see the host exit; long enough to outlive a server restart.
const GRACE_MS: &str = "1500";

fn hosted_env() -> TestEnv {
    let env = TestEnv::new();
    env.agents_config("[agents.mock]\nruntime = \"hosted\"\n");
    env
}

async fn start(env: &TestEnv) -> Server {
    env.start_with(&["--agentctl-grace-ms", GRACE_MS]).await
}

async fn status(client: &Client, session_id: &str) -> SessionStatus {
    client.request(SessionStatusParams { session_id: session_id.into() }).await.expect("status")
}

fn host_info(env: &TestEnv) -> serde_json::Value {
    let text = std::fs::read_to_string(env.data_dir.join("agentctl.json")).expect("agentctl.json");
    serde_json::from_str(&text).expect("agentctl.json is JSON")
}

fn host_pid(env: &TestEnv) -> u32 {
    host_info(env)["pid"].as_u64().expect("pid") as u32
}

fn chunk_texts(events: &[EventRecord]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::MessageChunk { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// `/slow N` streams "s1 ", "s2 ", ... one chunk per word.
fn slow_chunks(n: u64) -> Vec<String> {
    (1..=n).map(|i| format!("s{i} ")).collect()
}

fn kill9(pid: u32) {
    // SAFETY: signalling a process this test started (through batond).
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

#[tokio::test]
async fn hosted_agent_keeps_its_turn_across_a_kill_9_of_batond() {
    let env = hosted_env();
    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let before = status(&client, &session_id).await;
    let agent_pid = before.agent_pid.expect("agent pid");
    let host = host_pid(&env);
    assert!(host_info(&env)["token"].as_str().is_some_and(|t| t.len() >= 32));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.data_dir.join("agentctl.json")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the host's token is readable by its owner only");

    client
        .request(MessageAddParams { session_id: session_id.clone(), content: "/slow 60".into() })
        .await
        .expect("message.add");
    let mut chunks = 0;
    let first = collect_events(&mut notes, &session_id, |e| {
        if matches!(e.event, SessionEvent::MessageChunk { .. }) {
            chunks += 1;
        }
        chunks == 10
    })
    .await;
    server.kill9().await;
    assert!(process_alive(agent_pid), "the agent outlives batond");
    assert!(process_alive(host), "the agent host outlives batond");

    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    let after = status(&client, &session_id).await;
    assert_eq!(
        (after.is_agent_running, after.needs_resume, after.resume_reason),
        (true, false, ResumeReason::AgentRunning),
        "status case 1 right after the restart"
    );
    assert_eq!(after.agent_pid, Some(agent_pid), "the same agent process");
    let last_seen = first.last().expect("events").seq;
    subscribe(&client, &session_id, Some(last_seen)).await;
    let mut resumable_seen = false;
    let mut rest = Vec::new();
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(c)) if c.session_id == session_id => {
                resumable_seen |= c.needs_resume;
                None
            }
            ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => {
                rest.push(record.clone());
                is_turn_end(record).then_some(())
            }
            _ => None,
        })
        .await
        .expect("the rest of the turn");
    assert!(!resumable_seen, "the session never became resumable");

    let all: Vec<EventRecord> = first.iter().chain(rest.iter()).cloned().collect();
    for pair in all.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "no gap and no duplicate: {:?}", pair);
    }
    let turn: Vec<EventRecord> =
        all.iter().skip_while(|e| !matches!(e.event, SessionEvent::TurnStarted {})).cloned().collect();
    assert_eq!(chunk_texts(&turn), slow_chunks(60), "every chunk once, in order");
    assert!(
        matches!(&rest.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason } if stop_reason == "end_turn"),
        "{:?}",
        rest.last()
    );
    assert!(
        !rest.iter().any(|e| matches!(e.event, SessionEvent::Error { .. } | SessionEvent::Status { .. })),
        "no interruption was reported: {:?}",
        rest.iter().map(|e| e.event.kind()).collect::<Vec<_>>()
    );
    let s = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert!(!s.needs_resume && s.is_agent_running);
    let agent_messages: Vec<String> = messages(&client, &session_id)
        .await
        .into_iter()
        .filter(|m| m.kind == MessageKind::Agent)
        .map(|m| m.text)
        .collect();
    assert_eq!(agent_messages.last().map(String::as_str), Some(slow_chunks(60).concat().as_str()));

    // The same agent takes the next prompt, without a resume.
    let reply = prompt(&client, &mut notes, &session_id, "still there?").await;
    assert_eq!(reply, "Echo: still there?");
    assert_eq!(status(&client, &session_id).await.agent_pid, Some(agent_pid));

    // Stopping the session stops the agent in the host; the idle host then exits.
    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    assert!(wait_process_gone(agent_pid).await, "the agent is stopped");
    assert!(wait_process_gone(host).await, "the idle host exits after its grace period");
    assert!(!env.data_dir.join("agentctl.json").exists());
    server.stop().await;
}

#[tokio::test]
async fn a_killed_host_makes_sessions_resumable_and_resume_works() {
    let env = hosted_env();
    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let agent_pid = status(&client, &session_id).await.agent_pid.expect("agent pid");
    let host = host_pid(&env);
    kill9(host);
    assert!(wait_process_gone(agent_pid).await, "the agent dies with its host");
    let _ = notes
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
    let s = status(&client, &session_id).await;
    assert_eq!((s.is_agent_running, s.needs_resume, s.is_resumable), (false, true, true));

    let resumed = client.request(SessionResumeParams { session_id: session_id.clone(), fresh: false }).await;
    assert!(resumed.expect("resume").launched);
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert!(reply.contains("pineapple"), "{reply}");
    let new_host = host_pid(&env);
    assert_ne!(new_host, host, "a new host was started");

    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    assert!(wait_process_gone(new_host).await, "the idle host exits after its grace period");
    server.stop().await;
}
