//! Agents that outlive the server. A real `batond`, a real agent host
//! (`batond agentctl`) and real mock agent processes; the server is killed with -9 mid-turn.

use crate::common;

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

    let first = slow_turn_until(&client, &mut notes, &session_id, 10).await;
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
        all.iter().skip_while(|e| !matches!(e.event, SessionEvent::TurnStarted { .. })).cloned().collect();
    assert_eq!(chunk_texts(&turn), slow_chunks(60), "every chunk once, in order");
    assert!(
        matches!(&rest.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::EndTurn),
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

/// The agent host has the same arithmetic as batond: three pipes per agent it runs, and no
/// process descriptor to wait for their ends.
#[tokio::test]
async fn each_hosted_agent_takes_three_pipes_of_the_host_and_no_process_descriptor() {
    const MORE: usize = 4;
    let env = hosted_env();
    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    let first = started_session(&env, &client, &mut notes, "mock", "one").await;
    let host = host_pid(&env);
    let (pipes_before, _, _) = descriptor_kinds(host);
    let mut sessions = vec![first];
    for n in 0..MORE {
        sessions.push(started_session(&env, &client, &mut notes, "mock", &format!("agent {n}")).await);
    }
    let (pipes, pidfds, _) = descriptor_kinds(host);
    assert_eq!(pidfds, 0, "no pidfd per hosted agent");
    assert_eq!(pipes - pipes_before, 3 * MORE, "three pipes per hosted agent: {pipes_before} → {pipes}");
    for session_id in &sessions {
        assert!(status(&client, session_id).await.is_agent_running, "{session_id} runs");
    }
    println!("[hosted] {} agents: the host holds {pipes} pipes, {pidfds} pidfds", MORE + 1);
}

#[tokio::test]
async fn a_quiet_hosted_agents_last_lines_are_acknowledged_without_waiting_for_its_next_answer() {
    let env = hosted_env();
    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    // Started idle: the mock agent's last lines are the answer to session/new and then its
    // commands, a notification that no answer follows.
    let created = client.request(env.task("t", "", "mock", true)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    let host = baton_server::agent::host::client::AgentHost::new(
        env.data_dir.clone(),
        batond().into(),
        std::time::Duration::from_millis(300),
    );
    let info = host.existing().await.expect("the host runs");
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let listed = host.list(&info).await.expect("list");
        assert_eq!(listed.len(), 1, "{listed:?}");
        if listed[0].last_seq > 0 && listed[0].acked == listed[0].last_seq {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "every line the quiet agent wrote is acknowledged to its host (which can drop them): {listed:?}"
        );
        // Polled: the host tells no event when an acknowledgement arrives.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
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
    wait_needs_resume(&mut notes, &session_id).await;
    let s = status(&client, &session_id).await;
    assert_eq!((s.is_agent_running, s.needs_resume, s.is_resumable), (false, true, true));
    let error = s.last_error.unwrap_or_default();
    assert!(
        error.contains(&format!("was lost with the agent host (pid {host})")) && error.contains("killed or exited"),
        "says which host and what became of it: {error}"
    );

    let resumed =
        client.request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false }).await;
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

#[tokio::test]
async fn a_permission_request_left_open_by_a_killed_batond_is_asked_again_and_answered() {
    let env = hosted_env();
    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let agent_pid = status(&client, &session_id).await.agent_pid.expect("agent pid");
    client.request(MessageAddParams::new(session_id.clone(), "/permission")).await.expect("message.add");
    let asked =
        collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::PermissionRequest { .. })).await;
    let SessionEvent::PermissionRequest { request_id: old_request, .. } = &asked.last().unwrap().event else {
        unreachable!()
    };
    let old_request = old_request.clone();
    server.kill9().await;

    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    let s = status(&client, &session_id).await;
    assert_eq!((s.is_agent_running, s.needs_resume, s.agent_pid), (true, false, Some(agent_pid)));
    subscribe(&client, &session_id, Some(asked.last().unwrap().seq)).await;
    let events = collect_events(
        &mut notes,
        &session_id,
        |e| matches!(&e.event, SessionEvent::PermissionRequest { request_id, .. } if *request_id != old_request),
    )
    .await;
    assert!(
        events.iter().any(|e| matches!(&e.event,
            SessionEvent::PermissionResolved { request_id, option_id: None } if *request_id == old_request)),
        "the request of the previous server is closed: {events:?}"
    );
    let SessionEvent::PermissionRequest { request_id, .. } = &events.last().unwrap().event else { unreachable!() };
    client
        .request(PermissionRespondParams {
            session_id: session_id.clone(),
            request_id: request_id.clone(),
            option_id: "allow".into(),
        })
        .await
        .expect("permission.respond");
    let rest = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert_eq!(agent_text(&rest), "Permission outcome: selected allow");
    assert!(
        matches!(&rest.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::EndTurn)
    );

    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    assert!(wait_process_gone(agent_pid).await);
    server.stop().await;
}

#[tokio::test]
async fn a_graceful_restart_keeps_hosted_agents_too() {
    // Hosted by the server's default this time, not by the agent's config.
    let env = TestEnv::new();
    let args = ["--agentctl-grace-ms", GRACE_MS, "--agent-runtime", "hosted"];
    let server = env.start_with(&args).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember mango").await;
    let agent_pid = status(&client, &session_id).await.agent_pid.expect("agent pid");
    server.stop().await;
    assert!(process_alive(agent_pid), "SIGTERM stops batond, not its hosted agents");

    let server = env.start_with(&args).await;
    let (client, mut notes) = server.client().await;
    let s = status(&client, &session_id).await;
    assert_eq!((s.is_agent_running, s.needs_resume, s.agent_pid), (true, false, Some(agent_pid)));
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert!(reply.contains("mango"), "{reply}");
    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    assert!(wait_process_gone(agent_pid).await);
    server.stop().await;
}

/// A hosted agent no session owns any more (its record is gone, as after a launch that raced a
/// delete) is ended at the next start, before batond listens; the session resumes with a new one.
#[tokio::test]
async fn a_hosted_agent_that_no_session_owns_is_ended_at_startup() {
    let env = TestEnv::new();
    let args = ["--agentctl-grace-ms", GRACE_MS, "--agent-runtime", "hosted"];
    let server = env.start_with(&args).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember the plum tree").await;
    let stray = status(&client, &session_id).await.agent_pid.expect("agent pid");
    drop((client, notes));
    server.kill9().await;
    forget_running_agent(&env, &session_id);
    assert!(process_alive(stray), "the agent outlived batond in its host");

    let server = env.start_with(&args).await;
    assert!(wait_process_gone(stray).await, "the agent no session owns is ended at startup");
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert!(reply.contains("the plum tree"), "the session goes on with a new agent: {reply}");
    server.stop().await;
}

/// The host's own protocol, driven through the server's client with a shell agent.
mod host_protocol {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use baton_server::agent::host::client::{AgentHost, HostedAgent};
    use baton_server::agent::runtime::LaunchSpec;
    use baton_server::agent::transport::Input as HostInput;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::common::*;

    fn host(env: &TestEnv) -> AgentHost {
        AgentHost::new(env.data_dir.clone(), batond().into(), Duration::from_millis(300))
    }

    /// Prints five lines, then echoes what it reads until stdin ends.
    fn echo_agent(env: &TestEnv) -> LaunchSpec {
        let script = "for i in 1 2 3 4 5; do echo line$i; done; while read x; do echo got:$x; done";
        LaunchSpec {
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::new(),
            cwd: env.workdir.clone(),
        }
    }

    async fn next(agent: &mut HostedAgent) -> (u64, String) {
        let (seq, line) = tokio::time::timeout(WAIT, agent.stream.lines.recv())
            .await
            .expect("a line in time")
            .expect("the stream is open");
        (seq, String::from_utf8(line).unwrap())
    }

    #[tokio::test]
    async fn output_is_numbered_kept_until_acknowledged_and_replayed_to_the_next_attachment() {
        let env = TestEnv::new();
        let host = host(&env);
        let mut agent = host.spawn("agent-1", &echo_agent(&env), None).await.expect("spawn");
        let info = host.existing().await.expect("the host runs");
        for i in 1..=5 {
            assert_eq!(next(&mut agent).await, (i, format!("line{i}")));
        }
        agent.stream.input.send(HostInput::Write("hi".into())).unwrap();
        assert_eq!(next(&mut agent).await, (6, "got:hi".into()));
        agent.stream.input.send(HostInput::Ack(3)).unwrap();
        // Acknowledgements are applied in order with the writes that follow them.
        agent.stream.input.send(HostInput::Write("there".into())).unwrap();
        assert_eq!(next(&mut agent).await, (7, "got:there".into()));
        let pid = agent.pid;
        drop(agent);

        // A new attachment (a restarted server) gets everything after the acknowledged line.
        let mut again = host.attach(&info, "agent-1", None).await.expect("attach");
        assert_eq!(again.pid, pid);
        for (i, line) in [(4, "line4"), (5, "line5"), (6, "got:hi"), (7, "got:there")] {
            assert_eq!(next(&mut again).await, (i, line.to_string()));
        }
        let listed = host.list(&info).await.expect("list");
        assert_eq!(listed.len(), 1);
        assert!(listed[0].running && listed[0].last_seq == 7 && listed[0].acked == 3, "{listed:?}");

        // Killing ends the stream, then reports the exit; the idle host then exits.
        let exit = tokio::time::timeout(WAIT, again.handle.kill()).await.expect("killed in time");
        assert!(exit.signal.is_some() || exit.code.is_some(), "{exit}");
        assert!(wait_process_gone(pid).await);
        drop(again);
        assert!(wait_process_gone(info.pid).await, "the idle host exits after its grace period");
        assert!(!env.data_dir.join("agentctl.json").exists());
    }

    #[tokio::test]
    async fn lines_the_memory_ring_dropped_are_replayed_from_the_spool() {
        let env = TestEnv::new();
        let host = host(&env);
        // More lines than the host keeps in memory (4096), none acknowledged.
        let spec = LaunchSpec {
            command: "sh".into(),
            args: vec!["-c".into(), "seq 1 6000; while read x; do echo got:$x; done".into()],
            env: BTreeMap::new(),
            cwd: env.workdir.clone(),
        };
        let mut agent = host.spawn("agent-1", &spec, None).await.expect("spawn");
        let info = host.existing().await.expect("the host runs");
        for i in 1..=6000u64 {
            assert_eq!(next(&mut agent).await, (i, i.to_string()));
        }
        drop(agent);
        let mut again = host.attach(&info, "agent-1", None).await.expect("attach");
        for i in 1..=6000u64 {
            assert_eq!(next(&mut again).await, (i, i.to_string()), "replayed in order, none lost");
        }
        again.stream.input.send(HostInput::Write("end".into())).unwrap();
        assert_eq!(next(&mut again).await, (6001, "got:end".into()));
        let exit = tokio::time::timeout(WAIT, again.handle.kill()).await.expect("killed in time");
        assert!(exit.signal.is_some() || exit.code.is_some(), "{exit}");
        drop(again);
        assert!(wait_process_gone(info.pid).await);
    }

    /// CPU time (user + system) a process has used, in clock ticks.
    fn cpu_ticks(pid: u32) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    /// Figures, not a check: what the host spends replaying a backlog that piled up while no
    /// server was attached. `BACKLOG_MB=20 cargo test --release -p baton-server --test e2e hosted::
    /// -- --ignored --nocapture catch_up_cost`
    #[tokio::test]
    #[ignore]
    async fn catch_up_cost() {
        let mb: u64 = std::env::var("BACKLOG_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
        // Lines of 200 bytes, the size of a streamed chunk notification.
        let lines = mb * 1024 * 1024 / 200;
        let script = format!(
            "awk 'BEGIN {{ s = sprintf(\"%190s\", \"\"); gsub(/ /, \"x\", s); for (i = 1; i <= {lines}; i++) printf \"%09d%s\\n\", i, s }}'; read x"
        );
        let env = TestEnv::new();
        let spec = LaunchSpec {
            command: "sh".into(),
            args: vec!["-c".into(), script],
            env: BTreeMap::new(),
            cwd: env.workdir.clone(),
        };
        let host = host(&env);
        let agent = host.spawn("agent-1", &spec, None).await.expect("spawn");
        let info = host.existing().await.expect("the host runs");
        drop(agent);
        // The backlog piles up with no server attached.
        let deadline = std::time::Instant::now() + Duration::from_secs(600);
        while host.list(&info).await.expect("list")[0].last_seq < lines {
            assert!(std::time::Instant::now() < deadline, "the agent wrote its backlog");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let before = cpu_ticks(info.pid);
        let started = std::time::Instant::now();
        let mut again = host.attach(&info, "agent-1", None).await.expect("attach");
        for i in 1..=lines {
            let (seq, line) = tokio::time::timeout(Duration::from_secs(600), again.stream.lines.recv())
                .await
                .expect("a line in time")
                .expect("the stream is open");
            assert_eq!(seq, i);
            assert_eq!(line.len(), 199);
            // As the server does: acknowledged as batches take effect.
            if i % 256 == 0 {
                again.stream.input.send(HostInput::Ack(i)).unwrap();
            }
        }
        let ticks = cpu_ticks(info.pid) - before;
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        println!(
            "backlog {mb} MB ({lines} lines): host CPU {:.2} s, catch-up {:.2} s wall",
            ticks as f64 / per_second,
            started.elapsed().as_secs_f64()
        );
        let _ = again.handle.kill().await;
    }

    #[tokio::test]
    async fn an_agent_that_leaves_too_much_input_unread_is_killed_with_the_reason() {
        let env = TestEnv::new();
        let host = host(&env);
        // Never reads its stdin.
        let spec = LaunchSpec {
            command: "sh".into(),
            args: vec!["-c".into(), "echo ready; exec sleep 600".into()],
            env: BTreeMap::new(),
            cwd: env.workdir.clone(),
        };
        let mut agent = host.spawn("agent-1", &spec, None).await.expect("spawn");
        assert_eq!(next(&mut agent).await, (1, "ready".into()));
        let info = host.existing().await.expect("the host runs");
        // Five 15 MB lines: more than the host keeps for an agent that does not read.
        let line = "y".repeat(15 * 1024 * 1024);
        for _ in 0..5 {
            agent.stream.input.send(HostInput::Write(line.clone())).unwrap();
        }
        let exit = tokio::time::timeout(WAIT, agent.handle.wait()).await.expect("the agent is killed in time");
        assert!(exit.stderr_tail.contains("did not read its input"), "{exit:?}");
        assert!(wait_process_gone(agent.pid).await);
        assert!(host.list(&info).await.is_ok(), "the host still serves");
    }

    #[tokio::test]
    async fn a_host_whose_data_dir_is_gone_stops_its_agents_and_exits() {
        let env = TestEnv::new();
        let host = host(&env);
        let agent = host.spawn("agent-1", &echo_agent(&env), None).await.expect("spawn");
        let info = host.existing().await.expect("the host runs");
        std::fs::remove_file(env.data_dir.join("agentctl.json")).unwrap();
        assert!(wait_process_gone(agent.pid).await, "the agent is stopped");
        assert!(wait_process_gone(info.pid).await, "the host exits although an agent was attached");
    }

    #[tokio::test]
    async fn a_connection_without_the_token_is_refused() {
        let env = TestEnv::new();
        let host = host(&env);
        let info = host.ensure().await.expect("host");
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", info.port)).await.expect("connect");
        let (read, mut write) = stream.into_split();
        let spawn = r#"{"id":"1","type":"request","action":"hello","payload":{"token":"guess"}}"#;
        write.write_all(format!("{spawn}\n").as_bytes()).await.unwrap();
        let mut lines = BufReader::new(read).lines();
        let answer = tokio::time::timeout(WAIT, lines.next_line()).await.unwrap().unwrap().expect("an answer");
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["type"], "error");
        assert_eq!(answer["payload"]["code"], "UNAUTHORIZED");
        let closed = tokio::time::timeout(WAIT, lines.next_line()).await.unwrap().unwrap();
        assert_eq!(closed, None, "the connection is closed");
        assert!(wait_process_gone(info.pid).await, "nothing was started; the idle host exits");
    }
}

#[tokio::test]
async fn an_agent_that_died_while_batond_was_down_falls_back_to_resume_with_its_output_kept() {
    let env = hosted_env();
    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember kiwi").await;
    let agent_pid = status(&client, &session_id).await.agent_pid.expect("agent pid");
    let first = slow_turn_until(&client, &mut notes, &session_id, 5).await;
    server.kill9().await;
    kill9(agent_pid);
    assert!(wait_process_gone(agent_pid).await);

    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, Some(first.last().unwrap().seq)).await;
    let rest = collect_events(&mut notes, &session_id, is_turn_end).await;
    let all: Vec<EventRecord> = first.iter().chain(rest.iter()).cloned().collect();
    for pair in all.windows(2) {
        assert_eq!(pair[1].seq, pair[0].seq + 1, "no gap and no duplicate: {:?}", pair);
    }
    let texts = chunk_texts(&all);
    assert!(texts.len() >= 5 && texts.len() < 60, "what the agent wrote before it died: {texts:?}");
    assert_eq!(texts, slow_chunks(texts.len() as u64), "every chunk it wrote, once, in order");
    assert!(
        matches!(&rest.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Interrupted)
    );
    let s = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert_eq!((s.is_agent_running, s.needs_resume), (false, true), "{s:?}");

    // The lazy resume path: a message resumes the session in a new hosted agent.
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert!(reply.contains("kiwi"), "{reply}");
    let new_pid = status(&client, &session_id).await.agent_pid.expect("a new agent");
    assert_ne!(new_pid, agent_pid);
    client.request(SessionStopParams { session_id: session_id.clone() }).await.expect("stop");
    assert!(wait_process_gone(new_pid).await);
    assert!(wait_process_gone(host_pid(&env)).await, "the idle host exits");
    server.stop().await;
}

#[tokio::test]
async fn a_hosted_agent_that_stops_reading_its_input_can_still_be_stopped() {
    let env = hosted_env();
    let server = start(&env).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hello").await;
    let agent_pid = status(&client, &session_id).await.agent_pid.expect("agent pid");
    let host = host_pid(&env);
    // From now on the agent reads nothing: a 1 MB prompt fills its stdin pipe (64 KB) and the
    // rest of the write waits.
    assert_eq!(prompt(&client, &mut notes, &session_id, "/deaf").await, "Not listening.");
    let big = format!("summarise this\n{}", "x".repeat(1024 * 1024));
    client.request(MessageAddParams::new(session_id.clone(), big)).await.expect("message.add");

    let stopped = tokio::time::timeout(WAIT, client.request(SessionStopParams { session_id: session_id.clone() }))
        .await
        .expect("task.session.stop is answered while the write to the agent is pending");
    stopped.expect("stop");
    assert!(wait_process_gone(agent_pid).await, "the deaf agent is killed");
    assert!(process_alive(host), "the host still runs");

    // The same host still serves: a new hosted session gets an agent and answers.
    let (client2, mut notes2) = server.client().await;
    let other = started_session(&env, &client2, &mut notes2, "mock", "remember plum").await;
    assert_eq!(host_pid(&env), host, "served by the same host");
    let reply = prompt(&client2, &mut notes2, &other, "what did I ask you to remember?").await;
    assert!(reply.contains("plum"), "{reply}");
    server.stop().await;
}
