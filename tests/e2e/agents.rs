//! Real agent processes over ACP, through a real batond and the typed client.

use crate::common;

use std::time::Duration;

use baton_protocol::*;
use common::*;

fn kinds(events: &[EventRecord]) -> Vec<&str> {
    events.iter().map(|e| e.event.kind()).collect()
}

async fn status(client: &Client, session_id: &str) -> SessionStatus {
    client.request(SessionStatusParams { session_id: session_id.into() }).await.expect("status")
}

#[tokio::test]
async fn a_full_turn_streams_in_order_and_message_list_folds_it() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "/tool", "mock", true)).await.unwrap();
    assert_eq!(created.session.status.state, SessionState::Starting);
    let session_id = created.session.status.session_id.clone();
    subscribe(&client, &session_id, Some(0)).await;
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;

    assert!(events.windows(2).all(|w| w[1].seq == w[0].seq + 1), "sequence numbers are contiguous");
    let kinds = kinds(&events);
    let turn: Vec<&str> = kinds.iter().copied().filter(|k| !matches!(*k, "available_commands" | "options")).collect();
    assert_eq!(
        turn,
        vec![
            "user_message",
            "turn_started",
            "thought_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "message_chunk",
            "message_chunk",
            "turn_completed"
        ]
    );
    assert_eq!(agent_text(&events), "Tool finished.");

    let status = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert_eq!(status.task_state, TaskState::Review);
    assert!(status.is_agent_running && !status.needs_resume && status.has_resume_token);
    assert_eq!(status.resume_reason, ResumeReason::AgentRunning);

    let view: Vec<(MessageKind, String, Option<String>)> =
        messages(&client, &session_id).await.into_iter().map(|m| (m.kind, m.text, m.status)).collect();
    assert_eq!(
        view,
        vec![
            (MessageKind::User, "/tool".to_string(), None),
            (MessageKind::Thought, "Thinking.".to_string(), None),
            (MessageKind::ToolCall, "Read file".to_string(), Some("completed".to_string())),
            (MessageKind::Agent, "Tool finished.".to_string(), None),
        ],
        "chunks fold into one message, the tool call is one entry with its latest status"
    );

    // A second turn through message.add, with the task moving IN_PROGRESS → REVIEW again.
    let reply = prompt(&client, &mut notes, &session_id, "hello there").await;
    assert_eq!(reply, "Echo: hello there");
    let tasks = client.request(TaskListParams::default()).await.unwrap().tasks;
    assert_eq!(tasks[0].state, TaskState::Review);
}

#[tokio::test]
async fn state_changes_follow_the_resume_rules_for_a_new_task() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "/plan", "mock", true)).await.unwrap();
    let session_id = created.session.status.session_id;
    let mut seen = Vec::new();
    notes
        .wait_for(WAIT, |e| match e {
            ClientEvent::Notification(Notification::StateChanged(c)) if c.session_id == session_id => {
                seen.push((c.previous_state, c.state, c.task_state));
                (c.state == SessionState::WaitingForInput).then_some(())
            }
            _ => None,
        })
        .await
        .unwrap();
    assert_eq!(
        seen,
        vec![
            (Some(SessionState::Created), SessionState::Starting, TaskState::Todo),
            (Some(SessionState::Starting), SessionState::Running, TaskState::InProgress),
            (Some(SessionState::Running), SessionState::WaitingForInput, TaskState::Review),
        ]
    );
    let plan =
        messages(&client, &session_id).await.into_iter().find(|m| m.kind == MessageKind::Plan).expect("plan entry");
    assert_eq!(plan.data.unwrap()["entries"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn cancel_ends_a_running_turn() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let error = server_error(client.request(SessionCancelParams { session_id: session_id.clone() }).await);
    assert_eq!(error.code, ErrorCode::Conflict, "nothing to cancel between turns");

    client.request(MessageAddParams::new(session_id.clone(), "/hang")).await.unwrap();
    collect_events(
        &mut notes,
        &session_id,
        |e| matches!(&e.event, SessionEvent::MessageChunk { text, .. } if text.contains("working")),
    )
    .await;
    let queued = client.request(MessageAddParams::new(session_id.clone(), "more")).await.unwrap();
    assert!(queued.message.is_none() && queued.queued.is_some(), "one turn at a time: {queued:?}");

    client.request(SessionCancelParams { session_id: session_id.clone() }).await.unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert!(
        matches!(&events.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Cancelled)
    );
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "still there?").await, "Echo: still there?");
}

#[tokio::test]
async fn permission_requests_round_trip() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/permission")).await.unwrap();
    let events =
        collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::PermissionRequest { .. })).await;
    let SessionEvent::PermissionRequest { request_id, options, .. } = events.last().unwrap().event.clone() else {
        unreachable!()
    };
    assert_eq!(options.iter().map(|o| o.kind.as_str()).collect::<Vec<_>>(), vec!["allow_once", "reject_once"]);

    let wrong = PermissionRespondParams {
        session_id: session_id.clone(),
        request_id: request_id.clone(),
        option_id: "maybe".into(),
    };
    assert_eq!(server_error(client.request(wrong).await).code, ErrorCode::ValidationError);
    let unknown = PermissionRespondParams {
        session_id: session_id.clone(),
        request_id: "perm-nope".into(),
        option_id: "allow".into(),
    };
    assert_eq!(server_error(client.request(unknown).await).code, ErrorCode::NotFound);

    let answer = PermissionRespondParams {
        session_id: session_id.clone(),
        request_id: request_id.clone(),
        option_id: "allow".into(),
    };
    client.request(answer).await.unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert!(events
        .iter()
        .any(|e| matches!(&e.event, SessionEvent::PermissionResolved { option_id: Some(o), .. } if o == "allow")));
    assert_eq!(agent_text(&events), "Permission outcome: selected allow");
    let entry = messages(&client, &session_id).await.into_iter().find(|m| m.kind == MessageKind::Permission).unwrap();
    assert_eq!(entry.status.as_deref(), Some("selected:allow"));
}

#[tokio::test]
async fn an_agent_crash_mid_turn_leaves_the_session_resumable_and_no_orphan() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let pid = status(&client, &session_id).await.agent_pid.expect("agent pid");

    client.request(MessageAddParams::new(session_id.clone(), "/crash")).await.unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert!(
        matches!(&events.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Interrupted)
    );
    assert!(events
        .iter()
        .any(|e| matches!(&e.event, SessionEvent::Error { message } if message.contains("exited with code 3"))));
    let status = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert!(status.needs_resume && status.is_resumable, "{status:?}");
    assert_eq!(status.resume_reason, ResumeReason::AgentNotRunning);
    assert!(status.last_error.as_deref().unwrap_or("").contains("exited with code 3"));
    assert!(wait_process_gone(pid).await, "the crashed agent is reaped");

    // The conversation is not lost: the next message resumes the agent, which remembers.
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "You asked me to remember pineapple.");
}

#[tokio::test]
async fn a_hostile_agent_cannot_crash_the_server() {
    let env = TestEnv::new();
    env.agents_config(
        r#"
        [agents.flood]
        command = "sh"
        args = ["-c", "head -c 40000000 /dev/zero | tr '\\0' x; echo; echo 'not json'; exec sleep 600"]
        "#,
    );
    let server = env.start_with(&["--handshake-timeout-secs", "5"]).await;
    let (client, mut notes) = server.client().await;

    // An agent that floods a 40 MB line and never answers: the line is dropped, the handshake
    // times out, the session goes back to where it was with the error recorded.
    let created = client.request(env.task("flood", "", "flood", true)).await.unwrap();
    let flood_id = created.session.status.session_id;
    let status = wait_state(&client, &mut notes, &flood_id, SessionState::Created).await;
    assert!(status.last_error.unwrap_or_default().contains("initialize"), "the error says what failed");
    assert!(!status.is_agent_running);

    // The mock agent's garbage: non-JSON lines, a truncated object, a 3 MiB line, unknown
    // methods and update kinds. The turn completes and the server keeps working.
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/garbage")).await.unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert!(agent_text(&events).ends_with("Still here."));
    assert!(events
        .iter()
        .any(|e| matches!(&e.event, SessionEvent::AgentUpdate { update_kind, .. } if update_kind == "future_thing")));
    assert_eq!(prompt(&client, &mut notes, &session_id, "ok?").await, "Echo: ok?");
    assert!(client.request(TaskListParams::default()).await.is_ok());
}

#[tokio::test]
async fn file_access_stays_inside_the_working_directory() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "/write notes.txt hello").await, "Wrote notes.txt.");
    assert_eq!(std::fs::read_to_string(env.workdir.join("notes.txt")).unwrap(), "hello");
    assert_eq!(prompt(&client, &mut notes, &session_id, "/read notes.txt").await, "Read: hello");
    let outside = env.data_dir.join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    let reply = prompt(&client, &mut notes, &session_id, &format!("/read {}", outside.display())).await;
    assert!(reply.starts_with("Read failed:") && reply.contains("outside"), "{reply}");
    let reply = prompt(&client, &mut notes, &session_id, "/write ../escape.txt x").await;
    assert!(reply.starts_with("Write failed:"), "{reply}");
    assert!(!env.workdir.parent().unwrap().join("escape.txt").exists());
}

#[tokio::test]
async fn the_registry_lists_agents_and_reads_the_config_file() {
    let env = TestEnv::new();
    env.agents_config(
        r#"
        [agents.missing]
        display_name = "Not installed"
        command = "/nonexistent/agent-binary"

        [agents.gemini]
        command = "/nonexistent/gemini"
        "#,
    );
    let server = env.start().await;
    let (client, _) = server.client().await;
    let agents = client.request(AgentListParams {}).await.unwrap().agents;
    let find = |name: &str| agents.iter().find(|a| a.name == name).unwrap_or_else(|| panic!("{name} missing")).clone();
    for name in [
        "claude-code",
        "codex",
        "copilot",
        "auggie",
        "gemini",
        "amp",
        "opencode",
        "mock",
        "mock-load",
        "mock-fresh",
        "mock-plain",
    ] {
        find(name);
    }
    assert!(find("mock").installed && find("mock").native_session_resume);
    assert!(find("mock-fresh").history_context_injection);
    assert!(!find("missing").installed);
    assert!(!find("gemini").installed, "the config overrides the built-in command");
    assert_eq!(find("missing").display_name, "Not installed");

    // Starting a task with an agent that is not installed is refused, and nothing is created.
    let error = server_error(client.request(env.task("t", "go", "missing", true)).await);
    assert_eq!(error.code, ErrorCode::ValidationError);
    assert!(error.message.contains("not installed"), "{}", error.message);
    assert!(client.request(TaskListParams::default()).await.unwrap().tasks.is_empty());
}

#[tokio::test]
async fn an_agent_that_can_no_longer_be_started_fails_the_session_and_its_task() {
    let env = TestEnv::new();
    let script = env.data_dir.join("agent.sh");
    std::fs::write(&script, format!("#!/bin/sh\nexec '{}' mock-agent --state-dir \"$0.state\"\n", batond())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.agents_config(&format!("[agents.vanishing]\ncommand = \"{}\"\n", script.display()));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "go", "vanishing", false)).await.unwrap();
    let session_id = created.session.status.session_id;
    std::fs::remove_file(&script).unwrap();

    // ResumeTaskSession (docs/RESUME.md): on failure the session and its task are FAILED.
    let error = server_error(
        client.request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false }).await,
    );
    assert_eq!(error.code, ErrorCode::Unavailable);
    let status = wait_state(&client, &mut notes, &session_id, SessionState::Failed).await;
    assert_eq!(status.task_state, TaskState::Failed);
    assert!(status.last_error.unwrap().contains("agent.sh"));
}

#[tokio::test]
async fn a_cancelled_turn_stays_marked_in_the_transcript() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/hang")).await.unwrap();
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    client.request(SessionCancelParams { session_id: session_id.clone() }).await.unwrap();
    collect_events(&mut notes, &session_id, is_turn_end).await;
    let last = messages(&client, &session_id).await.pop().unwrap();
    assert_eq!((last.kind, last.text.as_str()), (MessageKind::Status, "Turn cancelled."));
}

#[tokio::test]
async fn a_bad_config_file_stops_the_server_with_a_clear_error() {
    let env = TestEnv::new();
    env.agents_config("[agents.broken]\nargs = []\n");
    assert!(batond_refuses(&env.data_dir, "127.0.0.1:0", &[]).await.contains("needs a command"));
}

#[tokio::test]
async fn stop_ends_the_agent_and_the_session() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let pid = status(&client, &session_id).await.agent_pid.unwrap();
    let stopped = client.request(SessionStopParams { session_id: session_id.clone() }).await.unwrap();
    assert_eq!(stopped.state, SessionState::Completed);
    assert!(wait_process_gone(pid).await);
    let status = status(&client, &session_id).await;
    assert_eq!(
        (status.state, status.task_state, status.needs_resume),
        (SessionState::Completed, TaskState::Completed, false)
    );
    let error = server_error(
        client.request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false }).await,
    );
    assert_eq!(error.code, ErrorCode::Conflict, "terminal sessions cannot be resumed");
    let error = server_error(client.request(MessageAddParams::new(session_id, "hi")).await);
    assert_eq!(error.code, ErrorCode::Conflict);
}

#[tokio::test]
async fn no_agent_outlives_a_killed_server() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/hang")).await.unwrap();
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    let pid = status(&client, &session_id).await.agent_pid.unwrap();
    server.kill9().await;
    assert!(wait_process_gone(pid).await, "the agent died with the server");

    // A clean shutdown stops agents too.
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    let pid = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await.agent_pid.unwrap();
    assert!(server.stop().await.success());
    assert!(wait_process_gone(pid).await);
}

#[tokio::test]
async fn a_task_can_get_its_own_git_worktree() {
    let env = TestEnv::new();
    let repo = env.workdir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git").arg("-C").arg(&repo).args(args).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("README"), "hi").unwrap();
    git(&["add", "README"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]);

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let mut params = TaskCreateParams::new("wt", "/write made-here.txt yes", "mock");
    params.repository = Some(repo.to_string_lossy().into_owned());
    params.worktree = true;
    let created = client.request(params).await.unwrap();
    let worktree = std::path::PathBuf::from(created.session.status.worktree_path.clone().expect("worktree path"));
    assert!(worktree.starts_with(&env.data_dir), "worktrees live under the data dir");
    assert!(worktree.join("README").exists());
    assert_eq!(created.task.workdir, worktree.to_string_lossy());
    let branch = created.task.worktree_branch.clone().unwrap();
    git(&["rev-parse", "--verify", &branch]);

    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;
    assert_eq!(
        std::fs::read_to_string(worktree.join("made-here.txt")).unwrap(),
        "yes",
        "the agent works in the worktree"
    );

    // A session whose worktree disappeared is told so on resume, and nothing else changes.
    client.request(SessionStopParams { session_id: session_id.clone() }).await.unwrap();
    let next = client
        .request(SessionStartParams { task_id: created.task.id.clone(), agent: None, prompt: Some("hi".into()) })
        .await
        .unwrap();
    assert_eq!(
        next.session.status.worktree_path.as_deref(),
        Some(worktree.to_string_lossy().as_ref()),
        "sessions of a task share its worktree"
    );
    let next_id = next.session.status.session_id;
    wait_state(&client, &mut notes, &next_id, SessionState::WaitingForInput).await;
    server.kill9().await;
    std::fs::remove_dir_all(&worktree).unwrap();
    let server = env.start().await;
    let (client, _) = server.client().await;
    let error = server_error(
        client.request(SessionResumeParams { session_id: next_id.clone(), fresh: false, retry_failed: false }).await,
    );
    assert_eq!(error.code, ErrorCode::ValidationError);
    assert!(error.message.contains("worktree"), "{}", error.message);
    assert_eq!(status(&client, &next_id).await.state, SessionState::WaitingForInput);
}

#[tokio::test]
async fn a_session_created_without_start_is_launched_by_a_message_or_a_resume() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;

    // message.add launches the agent and sends the user's message, not the description.
    let created = client.request(env.task("t", "remember mango", "mock", false)).await.unwrap();
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "hello").await, "Echo: hello");
    let users = user_messages(&client, &session_id).await;
    assert_eq!(users, vec!["hello"]);

    // task.session.resume starts it like a start: the description is the first prompt.
    let created = client.request(env.task("t2", "remember mango", "mock", false)).await.unwrap();
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert_eq!(agent_text(&events), "OK, I will remember mango.");
}

#[tokio::test]
async fn a_permission_request_left_open_by_a_crash_is_closed_at_restart() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    client.request(MessageAddParams::new(session_id.clone(), "/permission")).await.unwrap();
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::PermissionRequest { .. })).await;
    server.kill9().await;

    let server = env.start().await;
    let (client, _) = server.client().await;
    let entry = messages(&client, &session_id).await.into_iter().find(|m| m.kind == MessageKind::Permission).unwrap();
    assert_eq!(entry.status.as_deref(), Some("cancelled"), "nobody can answer it any more");
}

#[tokio::test]
async fn a_message_sent_as_soon_as_the_turn_completed_is_taken() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    // `turn_completed` means the session takes the next message: no CONFLICT in between.
    for i in 0..40 {
        assert_eq!(prompt(&client, &mut notes, &session_id, &format!("n{i}")).await, format!("Echo: n{i}"));
    }
}

#[tokio::test]
async fn a_message_waiting_for_a_starting_agent_cannot_outlive_a_stop() {
    let env = TestEnv::new();
    // Hangs before `initialize` while `{data_dir}/hang` exists, and takes SIGTERM slowly.
    gated_agent(&env, "trap '' TERM; ");
    std::fs::write(env.data_dir.join("hang"), "").unwrap();
    let server = env.start().await;
    let (client, _) = server.client().await;
    let created = client.request(env.task("t", "", "gated", false)).await.unwrap();
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    let waiting = {
        let client = client.clone();
        let session_id = session_id.clone();
        tokio::spawn(async move {
            client.request_with_timeout(MessageAddParams::new(session_id, "hi"), Duration::from_secs(60)).await
        })
    };
    // Whether the message is already waiting for the starting agent or still on its way, the
    // stop must win: no agent may be attached to the session after it.
    std::fs::remove_file(env.data_dir.join("hang")).unwrap();

    let stopped = client.request(SessionStopParams { session_id: session_id.clone() }).await.unwrap();
    assert_eq!(stopped.state, SessionState::Completed);
    let error = server_error(waiting.await.unwrap());
    assert_eq!(error.code, ErrorCode::Conflict, "{}", error.message);
    let status = status(&client, &session_id).await;
    assert_eq!(status.state, SessionState::Completed);
    assert!(!status.is_agent_running && status.agent_pid.is_none(), "no agent is left attached: {status:?}");
    let texts: Vec<String> = messages(&client, &session_id).await.into_iter().map(|m| m.text).collect();
    assert!(!texts.iter().any(|t| t.contains("can be resumed again")), "a stopped session is not resumable: {texts:?}");
}

/// Peak resident memory of a process, in KiB.
fn peak_memory_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn an_agent_streaming_faster_than_the_disk_does_not_grow_server_memory() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    let before = peak_memory_kib(server.pid);
    let started = std::time::Instant::now();
    client.request(MessageAddParams::new(session_id.clone(), "/chunks 50000")).await.unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await.len();
    let elapsed = started.elapsed();
    let grown = peak_memory_kib(server.pid).saturating_sub(before);
    // Unbounded, the journal writer's queue took ~36 MB here; bounded, ~10 MB (the hub's buffer).
    assert!(grown < 20 * 1024, "the server grew by {grown} KiB while the agent streamed");
    println!(
        "[hostile-agent] flood: {events} events journaled and delivered in {elapsed:?} ({:.0}/s), peak memory +{} MiB",
        events as f64 / elapsed.as_secs_f64(),
        grown / 1024
    );
}

#[tokio::test]
async fn a_turn_answered_right_before_the_agent_exits_is_not_reported_interrupted() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    // `/exit` answers the prompt, then the agent exits: the exit watcher races the answer.
    for _ in 0..15 {
        client.request(MessageAddParams::new(session_id.clone(), "/exit")).await.unwrap();
        let events = collect_events(
            &mut notes,
            &session_id,
            |e| matches!(&e.event, SessionEvent::Status { message } if message.contains("will be resumed")),
        )
        .await;
        let ends: Vec<&str> = events
            .iter()
            .filter_map(|e| match &e.event {
                SessionEvent::TurnCompleted { stop_reason, .. } => Some(stop_reason.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ends, vec!["end_turn"], "{:?}", kinds(&events));
        assert!(!events.iter().any(|e| matches!(e.event, SessionEvent::Error { .. })), "{:?}", kinds(&events));
    }
}

// ---- Hostile agents (each prints one summary line; run with --nocapture) -------------------

#[tokio::test]
async fn an_agent_that_ignores_cancel_is_stopped_after_the_grace_period() {
    let env = TestEnv::new();
    let server = env.start_with(&["--cancel-grace-secs", "1"]).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember pineapple").await;
    let pid = status(&client, &session_id).await.agent_pid.expect("agent pid");
    client.request(MessageAddParams::new(session_id.clone(), "/stubborn")).await.unwrap();
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    client.request(SessionCancelParams { session_id: session_id.clone() }).await.expect("cancel");
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert!(
        matches!(&events.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Cancelled),
        "{:?}",
        events.last()
    );
    assert!(
        events.iter().any(
            |e| matches!(&e.event, SessionEvent::Error { message } if message.contains("did not stop within 1 s"))
        ),
        "{:?}",
        kinds(&events)
    );
    assert!(wait_process_gone(pid).await, "the agent that ignored the cancel is stopped");
    let status = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert!(status.needs_resume && status.is_resumable, "{status:?}");
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "You asked me to remember pineapple.");
    println!("[hostile-agent] ignores session/cancel: turn ended `cancelled` after the 1 s grace, agent {pid} stopped, session resumed with its context");
}

#[tokio::test]
async fn an_agent_that_never_answers_initialize_is_timed_out_and_killed() {
    let env = TestEnv::new();
    env.agents_config(
        r#"
        [agents.mute]
        command = "sh"
        args = ["-c", "echo $$ > '{data_dir}/mute.pid'; exec sleep 600"]
        "#,
    );
    let server = env.start_with(&["--handshake-timeout-secs", "2"]).await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("mute", "hi", "mute", true)).await.unwrap();
    let session_id = created.session.status.session_id;
    let status = wait_state(&client, &mut notes, &session_id, SessionState::Created).await;
    let error = status.last_error.unwrap_or_default();
    assert!(error.contains("initialize") && error.contains("2s"), "the error says what timed out: {error}");
    assert!(!status.is_agent_running);
    let pid: u32 = std::fs::read_to_string(env.data_dir.join("mute.pid")).unwrap().trim().parse().unwrap();
    assert!(wait_process_gone(pid).await, "the silent agent is killed, not left behind");
    println!("[hostile-agent] never answers initialize: 2 s handshake bound, error {error:?}, process {pid} gone");
}

#[tokio::test]
async fn a_100_mb_line_is_dropped_without_buffering_it() {
    let env = TestEnv::new();
    env.agents_config(
        r#"
        [agents.longline]
        command = "sh"
        args = ["-c", "head -c 100000000 /dev/zero | tr '\\0' x; echo; exec '{batond}' mock-agent --state-dir '{data_dir}/mock-agent'"]
        "#,
    );
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let before = peak_memory_kib(server.pid);
    let started = std::time::Instant::now();
    let session_id = started_session(&env, &client, &mut notes, "longline", "hi").await;
    let elapsed = started.elapsed();
    let grown_mib = peak_memory_kib(server.pid).saturating_sub(before) / 1024;
    // The reader keeps at most MAX_LINE_BYTES (16 MiB) of a line before it drops it.
    assert!(grown_mib < 64, "the server grew by {grown_mib} MiB reading a 100 MB line");
    assert_eq!(prompt(&client, &mut notes, &session_id, "still there?").await, "Echo: still there?");
    let pid = status(&client, &session_id).await.agent_pid.expect("agent pid");
    assert!(server.stop().await.success());
    assert!(wait_process_gone(pid).await, "no agent outlives the server");
    println!("[hostile-agent] 100 MB line before the handshake: dropped, session ready in {elapsed:?}, peak memory +{grown_mib} MiB");
}

/// A session FAILED because its agent could not be started is resumed again, knowingly
/// (`retry_failed`), once the agent is installed; without it the resume is refused, and a
/// stopped session stays stopped either way.
#[tokio::test]
async fn a_failed_session_is_resumed_with_retry_failed_once_its_cause_is_fixed() {
    let env = TestEnv::new();
    let command = env.data_dir.parent().unwrap().join("bin/later-agent");
    env.agents_config(&format!(
        r#"
        [agents.later]
        command = "{command}"
        native_session_resume = true
        "#,
        command = command.display()
    ));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "", "later", false)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    let error = server_error(client.request(SessionResumeParams::new(session_id.clone())).await);
    assert_eq!(error.code, ErrorCode::Unavailable, "{}", error.message);
    let failed = status(&client, &session_id).await;
    assert_eq!((failed.state, failed.task_state), (SessionState::Failed, TaskState::Failed), "the agent is missing");

    // Installed now.
    std::fs::create_dir_all(command.parent().unwrap()).unwrap();
    let script = format!(
        "#!/bin/sh\nexec '{}' mock-agent --state-dir '{}'\n",
        batond(),
        env.data_dir.join("mock-agent").display()
    );
    std::fs::write(&command, script).unwrap();
    std::fs::set_permissions(&command, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let error = server_error(client.request(SessionResumeParams::new(session_id.clone())).await);
    assert_eq!(error.code, ErrorCode::Conflict, "{}", error.message);
    assert!(error.message.contains("retry_failed"), "the refusal says how: {}", error.message);

    let resumed = client.request(SessionResumeParams::retry_failed(session_id.clone())).await.expect("retry");
    assert!(resumed.launched);
    subscribe(&client, &session_id, Some(0)).await;
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    let s = status(&client, &session_id).await;
    assert_eq!((s.task_state, s.last_error), (TaskState::Review, None), "the failure is over");
    assert_eq!(prompt(&client, &mut notes, &session_id, "back?").await, "Echo: back?");

    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    let error = server_error(client.request(SessionResumeParams::retry_failed(session_id)).await);
    assert_eq!(error.code, ErrorCode::Conflict, "a stopped session is not a failed one");
    server.stop().await;
}
