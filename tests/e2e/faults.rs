//! Faults: batond killed with -9 while it streams (repeatedly), SIGTERM with agents running, an
//! agent killed from outside, and a disk that fills up. After each, what a client was told is
//! in the journal and every session resumes. Each test prints one summary line (`--nocapture`).

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use baton_protocol::*;
use common::*;

async fn status(client: &Client, session_id: &str) -> SessionStatus {
    client.request(SessionStatusParams { session_id: session_id.into() }).await.expect("status")
}

/// Records what the client received, keyed by seq; the same seq must always carry the same record.
fn record_all(received: &mut BTreeMap<u64, EventRecord>, events: &[EventRecord]) {
    for record in events {
        if let Some(earlier) = received.insert(record.seq, record.clone()) {
            assert_eq!(&earlier, record, "seq {} was delivered twice with different content", record.seq);
        }
    }
}

/// Every event of the session's journal, read back through a subscription from seq 0.
async fn journal(client: &Client, notes: &mut Notifications, session_id: &str) -> BTreeMap<u64, EventRecord> {
    let current = subscribe(client, session_id, Some(0)).await.current_seq;
    let events = collect_events(notes, session_id, |e| e.seq >= current).await;
    events.into_iter().map(|e| (e.seq, e)).collect()
}

/// `PRAGMA integrity_check` of the data dir's database, with no server running.
fn integrity(env: &TestEnv) -> String {
    let db = rusqlite::Connection::open(env.data_dir.join("baton.db")).expect("the database opens");
    db.query_row("PRAGMA integrity_check", [], |row| row.get::<_, String>(0)).expect("integrity_check")
}

#[tokio::test]
async fn kill_9_during_heavy_streaming_loses_nothing_a_client_saw() {
    const ROUNDS: usize = 5;
    let env = TestEnv::new();
    let mut received = BTreeMap::new();
    let mut server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "remember pineapple", "mock", true)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    record_all(&mut received, &collect_events(&mut notes, &session_id, is_turn_end).await);
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    drop((client, notes));

    let started = Instant::now();
    let mut streamed = Vec::new();
    for round in 0..ROUNDS {
        let (client, mut notes) = server.client().await;
        let since = received.keys().next_back().copied().unwrap_or(0);
        subscribe(&client, &session_id, Some(since)).await;
        // A lazy resume after each restart, then a long stream; batond dies in the middle of it.
        client
            .request(MessageAddParams::new(session_id.clone(), "/chunks 100000"))
            .await
            .unwrap_or_else(|e| panic!("round {round}: message.add: {e}"));
        let kill_after = 500 + round * 700;
        let mut chunks = 0;
        let events = collect_events(&mut notes, &session_id, |e| {
            chunks += matches!(e.event, SessionEvent::MessageChunk { .. }) as usize;
            chunks >= kill_after
        })
        .await;
        server.kill9().await;
        record_all(&mut received, &events);
        streamed.push(chunks);
        assert_eq!(integrity(&env), "ok", "round {round}: the database is intact after kill -9");
        server = env.start().await;
    }
    let elapsed = started.elapsed();

    let (client, mut notes) = server.client().await;
    let stored = journal(&client, &mut notes, &session_id).await;
    let mut missing = Vec::new();
    for (seq, record) in &received {
        match stored.get(seq) {
            Some(kept) => assert_eq!(kept, record, "seq {seq} in the journal is what the client received"),
            None => missing.push(*seq),
        }
    }
    assert!(missing.is_empty(), "events a client received are missing from the journal: {missing:?}");
    let interrupted = stored
        .values()
        .filter(|e| matches!(&e.event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Interrupted))
        .count();
    assert_eq!(interrupted, ROUNDS, "each killed turn is closed as interrupted at the next start");
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "You asked me to remember pineapple.");
    println!(
        "[faults] kill -9 x{ROUNDS} mid-stream: chunks seen before each kill {streamed:?}, {} events received \
         (all in the journal, identical), journal {} events, integrity ok each time, resumed with context; {:?}",
        received.len(),
        stored.len(),
        elapsed
    );
}

#[tokio::test]
async fn sigterm_stops_agents_and_every_session_resumes() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let idle = started_session(&env, &client, &mut notes, "mock", "remember apple").await;
    let busy = started_session(&env, &client, &mut notes, "mock", "remember banana").await;
    let unstarted = client.request(env.task("t", "", "mock", false)).await.unwrap().session.status.session_id;
    client.request(MessageAddParams::new(busy.clone(), "/hang")).await.unwrap();
    collect_events(&mut notes, &busy, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    let pids = [status(&client, &idle).await.agent_pid.unwrap(), status(&client, &busy).await.agent_pid.unwrap()];

    assert!(server.stop().await.success(), "SIGTERM is a clean exit");
    for pid in pids {
        assert!(wait_process_gone(pid).await, "agent {pid} was stopped with the server");
    }
    assert_eq!(integrity(&env), "ok");

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    for session_id in [&idle, &busy] {
        let status = status(&client, session_id).await;
        assert!(status.is_resumable && status.needs_resume, "{status:?}");
        assert!(!status.is_agent_running);
    }
    subscribe(&client, &idle, None).await;
    assert_eq!(
        prompt(&client, &mut notes, &idle, "what did I ask you to remember?").await,
        "You asked me to remember apple."
    );
    subscribe(&client, &busy, None).await;
    assert_eq!(
        prompt(&client, &mut notes, &busy, "what did I ask you to remember?").await,
        "You asked me to remember banana."
    );
    subscribe(&client, &unstarted, None).await;
    assert_eq!(prompt(&client, &mut notes, &unstarted, "hello").await, "Echo: hello");
    println!("[faults] SIGTERM with an idle, a busy and an unstarted session: clean exit, agents {pids:?} gone, all three answer after the restart");
}

#[tokio::test]
async fn an_agent_killed_from_outside_leaves_a_resumable_session() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember cherry").await;
    client.request(MessageAddParams::new(session_id.clone(), "/hang")).await.unwrap();
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;
    let pid = status(&client, &session_id).await.agent_pid.unwrap();
    // SAFETY: signalling the agent process this test's server started.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    let error = first_error(&events);
    assert!(error.contains("killed by signal 9"), "{error}");
    assert!(
        matches!(&events.last().unwrap().event, SessionEvent::TurnCompleted { stop_reason, .. } if *stop_reason == StopReason::Interrupted),
        "{:?}",
        events.last()
    );
    assert!(wait_process_gone(pid).await);
    let status = wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert!(status.is_resumable && status.needs_resume, "{status:?}");
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "You asked me to remember cherry.");
    println!(
        "[faults] agent killed with SIGKILL mid-turn: error {error:?}, turn interrupted, session resumed with context"
    );
}

#[tokio::test]
async fn a_full_disk_gives_clear_errors_and_loses_nothing_acknowledged() {
    const LIMIT: u64 = 2 * 1024 * 1024;
    let env = TestEnv::new();
    // The agent may write as much as it likes: only batond's files are limited.
    env.agents_config(
        r#"
        [agents.mock]
        command = "sh"
        args = ["-c", "ulimit -f unlimited; exec '{batond}' mock-agent --state-dir '{data_dir}/mock-agent'"]
        "#,
    );
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember plum").await;
    assert!(server.stop().await.success());
    let largest = std::fs::read_dir(&env.data_dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0);
    let limit = largest + LIMIT;

    // No file batond writes may grow past `limit` (RLIMIT_FSIZE); writes past it fail with
    // EFBIG (SIGXFSZ ignored), as they would with ENOSPC on a full disk.
    let server = Server::start_configured(&env.data_dir, &[], |command| {
        // SAFETY: only async-signal-safe calls (setrlimit, signal) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let rlimit = libc::rlimit { rlim_cur: limit as libc::rlim_t, rlim_max: libc::RLIM_INFINITY };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    })
    .await;
    let (client, mut notes) = server.client().await;
    let current = subscribe(&client, &session_id, None).await.current_seq;
    let mut received = BTreeMap::new();
    let mut acknowledged = Vec::new();
    let mut refusal = None;
    for i in 0..200 {
        let content = format!("note {i} {}", "y".repeat(100_000));
        match client.request(MessageAddParams::new(session_id.clone(), content.clone())).await {
            Ok(added) => {
                acknowledged.push((added.message.as_ref().expect("the turn started").seq, content));
                // The turn's end may be the write that no longer fits: wait for it, bounded.
                let mut events = Vec::new();
                let ended = notes
                    .wait_for(Duration::from_secs(10), |event| match event {
                        ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => {
                            events.push(record.clone());
                            is_turn_end(record).then_some(())
                        }
                        _ => None,
                    })
                    .await;
                record_all(&mut received, &events);
                if ended.is_err() {
                    continue;
                }
            }
            Err(ClientError::Server(error)) => {
                refusal = Some(error);
                break;
            }
            Err(other) => panic!("message.add {i}: {other}"),
        }
    }
    let refusal = refusal.expect("the disk filled up within 200 messages of 100 kB");
    // The write that no longer fits is the message's own (INTERNAL_ERROR), or the end of the
    // turn before it, committed with the agent's last updates (UNAVAILABLE until it is saved).
    let turn_end_unsaved = refusal.code == ErrorCode::Unavailable
        && refusal.retryable
        && refusal.message.contains("the turn is over but its end could not be saved yet");
    assert!(refusal.code == ErrorCode::InternalError || turn_end_unsaved, "{refusal:?}");
    let words = ["disk", "full", "commit", "database"];
    assert!(words.iter().any(|w| refusal.message.contains(w)), "the error says what failed: {refusal:?}");
    still_answers_reads(&client).await;
    server.kill9().await;

    // With room again: everything acknowledged and everything a client saw is there.
    assert_eq!(integrity(&env), "ok");
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let stored = journal(&client, &mut notes, &session_id).await;
    for (seq, record) in &received {
        assert_eq!(stored.get(seq), Some(record), "seq {seq} a client received is in the journal");
    }
    for (seq, content) in &acknowledged {
        assert!(
            matches!(&stored.get(seq).map(|r| &r.event), Some(SessionEvent::UserMessage { text, .. }) if text == content),
            "acknowledged message at seq {seq} is kept"
        );
    }
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "You asked me to remember plum.");
    println!(
        "[faults] disk full (RLIMIT_FSIZE {} MiB over the largest file): {} messages of 100 kB acknowledged, then \
         {}: {:?}; after a restart with room: all {} acknowledged messages and {} received events kept (journal from seq \
         {current}), session resumed",
        LIMIT / (1024 * 1024),
        acknowledged.len(),
        refusal.code,
        refusal.message,
        acknowledged.len(),
        received.len()
    );
}

/// Reads still work on a server whose disk is full.
async fn still_answers_reads(client: &Client) {
    client.request(TaskListParams::default()).await.expect("task.list still answers");
}

#[tokio::test]
async fn an_empty_database_file_is_said_in_the_log() {
    let env = TestEnv::new();
    // A 0-byte baton.db (truncated by a tool, a failed copy): batond starts with no tasks, and
    // says so instead of starting empty without a word.
    std::fs::write(env.data_dir.join("baton.db"), "").unwrap();
    let server = env.start().await;
    wait_log(&env.data_dir, "the database file is empty (0 bytes)").await;
    let (client, _) = server.client().await;
    assert!(client.request(TaskListParams::default()).await.unwrap().tasks.is_empty());
    println!("[faults] 0-byte baton.db: started empty, with a warning in the log");
}

#[tokio::test]
async fn a_replay_read_error_reaches_the_client_and_the_log() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    server.stop().await;
    // A damaged row in the middle of the journal (a real SQLite file, changed under batond).
    let db = rusqlite::Connection::open(env.data_dir.join("baton.db")).expect("the database opens");
    let damaged = db
        .execute("UPDATE session_events SET payload = '{\"type\":' WHERE session_id = ?1 AND seq = 2", [&session_id])
        .unwrap();
    assert_eq!(damaged, 1);
    drop(db);

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, Some(0)).await;
    // The replay stops at the damage, and says so: an error notification, not silence.
    let mut replayed = 0;
    let error = notes
        .wait_for(Duration::from_secs(60), |event| match event {
            ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => {
                replayed += 1;
                None
            }
            ClientEvent::Error(error) => Some(error.clone()),
            _ => None,
        })
        .await
        .expect("an error reaches the client");
    assert_eq!(error.code, ErrorCode::InternalError, "{error:?}");
    assert!(error.message.contains(&session_id) && error.message.contains("event 2"), "{}", error.message);
    wait_log(&env.data_dir, "cannot replay events").await;
    println!("[faults] damaged journal row: replay sent {replayed} events, then the error ({})", error.message);
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|dir| dir.count()).unwrap_or(0)
}

/// Each running agent costs batond three descriptors, its three pipes: its end is waited for
/// without a pidfd, and its log file is closed while it writes nothing.
#[tokio::test]
async fn each_running_agent_takes_three_of_batonds_descriptors() {
    const MORE: usize = 4;
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    // The first agent also starts what serves them all (the thread that waits for their ends).
    let first = started_session(&env, &client, &mut notes, "mock", "one").await;
    let quiet = |pid| {
        let (_, pidfds, logs) = descriptor_kinds(pid);
        pidfds == 0 && logs == 0
    };
    until("the first agent's log to be closed", || quiet(server.pid)).await;
    let (pipes_before, _, _) = descriptor_kinds(server.pid);
    let mut sessions = vec![first];
    for n in 0..MORE {
        sessions.push(started_session(&env, &client, &mut notes, "mock", &format!("agent {n}")).await);
    }
    until("the agents' logs to be closed", || quiet(server.pid)).await;
    let (pipes, pidfds, logs) = descriptor_kinds(server.pid);
    assert_eq!((pidfds, logs), (0, 0), "no pidfd and no open log per idle agent");
    assert_eq!(pipes - pipes_before, 3 * MORE, "three pipes per agent: {pipes_before} → {pipes}");
    // And they all still answer.
    for session_id in &sessions {
        let reply = prompt(&client, &mut notes, session_id, "hello").await;
        assert!(!reply.is_empty(), "{session_id} answers");
    }
    println!(
        "[faults] {} agents: batond holds {pipes} pipes ({} per agent past the first), {pidfds} pidfds, {logs} open logs",
        MORE + 1,
        (pipes - pipes_before) / MORE
    );
}

/// An agent that cannot be started for want of file descriptors (EMFILE) leaves its
/// session resumable — the pressure goes away, the conversation must not. batond runs under a
/// low descriptor limit, and authenticated connections take what is left before a lazy resume.
#[tokio::test]
async fn a_resume_that_fails_for_lack_of_descriptors_leaves_the_session_resumable() {
    const LIMIT: u64 = 96;
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "remember plum").await;
    assert!(server.stop().await.success());

    let server = Server::start_configured(&env.data_dir, &[], |command| {
        // SAFETY: only an async-signal-safe call (setrlimit) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let rlimit = libc::rlimit { rlim_cur: LIMIT as libc::rlim_t, rlim_max: LIMIT as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    // Connections that showed their token, until two descriptors are left: too few for the
    // agent's pipes.
    let mut held = Vec::new();
    while open_descriptors(server.pid) < LIMIT as usize - 2 {
        let (ws, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(server.url_with_token()))
            .await
            .expect("a connection is accepted while descriptors are left")
            .expect("connect");
        held.push(ws);
        assert!(held.len() < LIMIT as usize, "connections do not take descriptors");
    }
    let refused = client.request(MessageAddParams::new(session_id.clone(), "what did I ask you to remember?")).await;
    let error = match refused {
        Err(ClientError::Server(error)) => error,
        other => panic!("the agent could not have been started, yet message.add said {other:?}"),
    };
    assert_eq!(error.code, ErrorCode::Unavailable, "{error:?}");
    // Said as what it is, with what to do, and not as something that passes by itself.
    assert!(error.message.contains("out of file descriptors") && error.message.contains("ulimit -n"), "{error:?}");
    assert!(!error.message.contains("temporary"), "{error:?}");
    let after = status(&client, &session_id).await;
    assert_ne!(after.state, SessionState::Failed, "a passing shortage fails nothing: {after:?}");
    assert!(after.needs_resume, "the session stays resumable: {after:?}");

    // The pressure goes; the same session resumes with its conversation.
    let closed = held.len();
    drop(held);
    let reply = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(reply, "You asked me to remember plum.");
    println!(
        "[faults] descriptors exhausted (RLIMIT_NOFILE {LIMIT}, {closed} connections held): message.add answered \
         {} {:?}; session {:?}, needs_resume; after they closed the session resumed with its context",
        error.code, error.message, after.state
    );
}

/// The lines of batond's log (every file in DATA_DIR/logs) that contain `needle`.
fn log_lines(data_dir: &std::path::Path, needle: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(data_dir.join("logs")).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        lines.extend(text.lines().filter(|line| line.contains(needle)).map(str::to_string));
    }
    lines
}

/// With its descriptors used up, batond cannot accept the connection waiting in its backlog:
/// it retries with a growing wait (at most a second), logs the shortage once and its end once,
/// and accepts again when descriptors are free.
#[tokio::test]
async fn accept_backs_off_while_descriptors_are_used_up() {
    const LIMIT: u64 = 64;
    const SHORTAGE: std::time::Duration = std::time::Duration::from_secs(3);
    let env = TestEnv::new();
    let server = Server::start_configured(&env.data_dir, &[], |command| {
        // SAFETY: only an async-signal-safe call (setrlimit) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let rlimit = libc::rlimit { rlim_cur: LIMIT as libc::rlim_t, rlim_max: LIMIT as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
    .await;
    let address = server.url.trim_start_matches("ws://").trim_end_matches("/ws").to_string();
    // Plain TCP connections take the descriptors left; the last ones wait in the backlog.
    // Each connection is accepted before the next is made (a loaded machine accepts slower than
    // a client connects: connections waiting in the backlog take no descriptor yet).
    let mut held = Vec::new();
    while open_descriptors(server.pid) < LIMIT as usize {
        let before = open_descriptors(server.pid);
        held.push(tokio::net::TcpStream::connect(&address).await.expect("connect"));
        assert!(held.len() < 2 * LIMIT as usize, "connections do not take descriptors");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // Polled: /proc gives no signal when a descriptor is opened.
        while open_descriptors(server.pid) <= before && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    for _ in 0..4 {
        held.push(tokio::net::TcpStream::connect(&address).await.expect("connect (into the backlog)"));
    }
    wait_log(&env.data_dir, "accept failed").await;
    // The shortage lasts a while: the scenario, not a wait for something to happen.
    tokio::time::sleep(SHORTAGE).await;
    let warnings = log_lines(&env.data_dir, "accept failed").len();
    assert_eq!(warnings, 1, "the shortage is logged once, not once per attempt");

    drop(held);
    let (client, _) = tokio::time::timeout(WAIT, server.client()).await.expect("a connection is accepted again");
    client.request(TaskListParams::default()).await.expect("and answered");
    wait_log(&env.data_dir, "gateway: accepting connections again").await;
    let recovered = log_lines(&env.data_dir, "gateway: accepting connections again");
    let line = recovered.last().expect("the end of the shortage is logged");
    let number_before = |word: &str| -> u64 {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == word).unwrap_or_else(|| panic!("{word:?} in {line}"));
        words[at - 1].parse().unwrap_or_else(|_| panic!("a number before {word:?} in {line}"))
    };
    let (attempts, millis) = (number_before("failed"), number_before("ms"));
    // Waits of 10, 20, 40 ... ms up to 1 s: under ten attempts in the first 1.3 s, then one a
    // second (a fixed 50 ms retry makes twenty a second).
    let most = 10 + millis / 1000 + 1;
    assert!(attempts <= most, "{attempts} attempts in {millis} ms: accept retried too often");
    println!(
        "[faults] descriptors used up (RLIMIT_NOFILE {LIMIT}): accept failed {attempts} times over {millis} ms, one \
         warning; accepting again once connections closed"
    );
}

/// A tmpfs of `size` mounted at `path` for the test's life (unmounted when dropped).
struct SmallDisk {
    path: std::path::PathBuf,
}

impl SmallDisk {
    /// None (with the reason) where mounting is not allowed.
    fn mount(path: &std::path::Path, size: &str) -> Result<SmallDisk, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("mounting a tmpfs needs root".into());
        }
        std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(path)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            return Err(format!("mount failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
        }
        Ok(SmallDisk { path: path.to_path_buf() })
    }

    /// Fills what is left of the disk with `name`; returns its size.
    fn fill(&self, name: &str) -> u64 {
        use std::io::Write;
        let mut file = std::fs::File::create(self.path.join(name)).expect("create the filler");
        let block = vec![0u8; 64 * 1024];
        let mut written = 0u64;
        loop {
            match file.write(&block) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        written
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Waits for `storage.changed` saying `writable`.
async fn wait_storage(notes: &mut Notifications, writable: bool) -> StorageChanged {
    notes
        .wait_for(WAIT, |event| match event {
            ClientEvent::Notification(Notification::StorageChanged(c)) if c.writable == writable => Some(c.clone()),
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("no storage.changed with writable {writable}: {e}"))
}

/// The disk fills while an agent streams: its output is held (the agent waits), every client
/// is told, the turn stays running (message.add and cancel agree), and once there is room the
/// output is saved where it stopped, every chunk once and in order, and only then does the
/// turn end.
#[tokio::test]
async fn a_disk_that_fills_mid_turn_holds_the_agent_and_resumes_where_it_stopped() {
    disk_fills_mid_turn("standalone").await;
}

/// The same with a hosted agent, whose agent host keeps its output (more lines than it holds
/// in memory) while batond does not take it.
#[tokio::test]
async fn a_disk_that_fills_mid_turn_holds_a_hosted_agents_output_and_resumes_where_it_stopped() {
    disk_fills_mid_turn("hosted").await;
}

async fn disk_fills_mid_turn(runtime: &str) {
    // A hosted agent writes far more than its host holds in memory while the disk is full.
    let chunks: u64 = if runtime == "hosted" { 12_000 } else { 3_000 };
    let env = TestEnv::new();
    let disk = match SmallDisk::mount(&env.workdir.with_file_name("small-disk"), "16m") {
        Ok(disk) => disk,
        Err(reason) => {
            println!("[faults] disk full mid-turn ({runtime}): SKIPPED ({reason})");
            return;
        }
    };
    let data_dir = disk.path.join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    // The log stays off the small disk, where it can be written (and waited on) when it is full.
    let logs = env.workdir.with_file_name("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::os::unix::fs::symlink(&logs, data_dir.join("logs")).unwrap();
    // The agent keeps its own state off the small disk, and streams a chunk a millisecond.
    let state = env.workdir.with_file_name("mock-state");
    std::fs::write(
        data_dir.join("agents.toml"),
        format!(
            "[agents.mock]\ncommand = \"{{batond}}\"\nargs = [\"mock-agent\", \"--state-dir\", \"{}\", \
             \"--chunk-delay-ms\", \"1\"]\n",
            state.display()
        ),
    )
    .unwrap();
    let server = Server::start_configured(&data_dir, &["--agent-runtime", runtime], |_| {}).await;
    let (client, mut notes) = server.client().await;
    let (observer, mut observed) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    subscribe(&client, &session_id, None).await;

    let added = client
        .request(MessageAddParams::new(session_id.clone(), format!("/chunks {chunks}")))
        .await
        .expect("message.add");
    let turn_id = added.turn_id.expect("a turn id");
    let turn_start = added.message.as_ref().expect("the turn started").seq;
    let filled = disk.fill("filler");
    // Every client hears that the disk is full (not only the subscribed one).
    let full = wait_storage(&mut observed, false).await;
    assert!(full.reason.contains("full"), "{full:?}");
    // A client that connects meanwhile hears it too, right after server.hello.
    let (late, mut late_notes) = server.client().await;
    assert!(!wait_storage(&mut late_notes, false).await.writable);
    drop(late);

    // Meanwhile the turn is running, and both answers say so.
    let running = status(&client, &session_id).await;
    assert_eq!(running.state, SessionState::Running, "{running:?}");
    let again = client.request(MessageAddParams::new(session_id.clone(), "more")).await;
    let Err(ClientError::Server(busy)) = again else { panic!("a second message was taken: {again:?}") };
    assert_eq!(busy.code, ErrorCode::Unavailable, "{busy:?}");
    assert!(busy.message.contains("turn is running") && busy.message.contains("disk is full"), "{busy:?}");

    if runtime == "hosted" {
        // The agent host cannot write its spool on the full disk either. The disk stays full
        // while the agent streams thousands more chunks (about one a millisecond): the
        // scenario, not a wait for something to happen.
        wait_log(&data_dir, "cannot write the spool").await;
        tokio::time::sleep(Duration::from_secs(6)).await;
    }

    // Room again: the output resumes where it stopped and the turn ends.
    std::fs::remove_file(disk.path.join("filler")).unwrap();
    wait_storage(&mut observed, true).await;
    // Thousands of updates still to stream: a bound for the whole turn, not for one event.
    let mut events = Vec::new();
    notes
        .wait_for(Duration::from_secs(180), |event| match event {
            ClientEvent::Notification(Notification::Event(record)) if record.session_id == session_id => {
                events.push(record.clone());
                is_turn_end(record).then_some(())
            }
            _ => None,
        })
        .await
        .unwrap_or_else(|e| panic!("the turn did not end ({e}) after {} events", events.len()));
    drop(observer);
    let end = events.last().map(|e| e.event.clone());
    assert!(
        matches!(&end, Some(SessionEvent::TurnCompleted { stop_reason: StopReason::EndTurn, turn_id: Some(id) }) if *id == turn_id),
        "{end:?}"
    );
    // Every chunk once, in order, from what was journaled (a fresh read of the whole turn).
    let stored = journal(&client, &mut notes, &session_id).await;
    let text: String = stored
        .range(turn_start..)
        .filter_map(|(_, r)| match &r.event {
            SessionEvent::MessageChunk { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let expected: String = (1..=chunks).map(|i| format!("c{i} ")).collect();
    assert!(text == expected, "the turn's text differs: {} of {} bytes", text.len(), expected.len());
    let ends = stored.values().filter(|r| matches!(r.event, SessionEvent::TurnCompleted { .. })).count();
    assert_eq!(ends, 2, "one end per turn");
    assert_eq!(status(&client, &session_id).await.state, SessionState::WaitingForInput);
    println!(
        "[faults] disk full mid-turn ({runtime}; tmpfs 16 MiB, {} MiB filler): clients told ({:?}), turn held \
         RUNNING, a second message refused as CONFLICT; room again: all {chunks} chunks journaled once and in order, \
         then the turn ended",
        filled / (1024 * 1024),
        full.reason
    );
}

/// The end of a turn meets a full disk: no client is told the turn ended, a message and a
/// cancel are both answered that its end waits to be saved, and it is saved (and told) as soon
/// as there is room.
#[tokio::test]
async fn a_turn_end_the_disk_has_no_room_for_is_saved_once_there_is_room() {
    let env = TestEnv::new();
    let disk = match SmallDisk::mount(&env.workdir.with_file_name("small-disk"), "16m") {
        Ok(disk) => disk,
        Err(reason) => {
            println!("[faults] turn end on a full disk: SKIPPED ({reason})");
            return;
        }
    };
    let data_dir = disk.path.join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    // The log stays off the small disk, where it can be written (and waited on) when it is full.
    let logs = env.workdir.with_file_name("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::os::unix::fs::symlink(&logs, data_dir.join("logs")).unwrap();
    let state = env.workdir.with_file_name("mock-state");
    std::fs::write(
        data_dir.join("agents.toml"),
        format!(
            "[agents.mock]\ncommand = \"{{batond}}\"\nargs = [\"mock-agent\", \"--state-dir\", \"{}\"]\n",
            state.display()
        ),
    )
    .unwrap();
    let server = Server::start_configured(&data_dir, &[], |_| {}).await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "mock", "hi").await;
    subscribe(&client, &session_id, None).await;
    let added = client.request(MessageAddParams::new(session_id.clone(), "/hang")).await.expect("message.add");
    collect_events(&mut notes, &session_id, |e| matches!(e.event, SessionEvent::MessageChunk { .. })).await;

    disk.fill("filler");
    client.request(SessionCancelParams { session_id: session_id.clone() }).await.expect("the turn is running");
    wait_storage(&mut notes, false).await;
    wait_log(&data_dir, "cannot close the turn").await;
    // The turn is over but its end is not saved: the session still shows RUNNING, and a
    // message and a cancel get the same answer.
    assert_eq!(status(&client, &session_id).await.state, SessionState::Running);
    let message = client.request(MessageAddParams::new(session_id.clone(), "next")).await;
    let cancel = client.request(SessionCancelParams { session_id: session_id.clone() }).await;
    let (Err(ClientError::Server(message)), Err(ClientError::Server(cancel))) = (message, cancel) else {
        panic!("a message or a cancel was taken while the turn's end was not saved")
    };
    for answer in [&message, &cancel] {
        assert_eq!(answer.code, ErrorCode::Unavailable, "{answer:?}");
        assert!(answer.message.starts_with("the turn is over but its end could not be saved yet"), "{answer:?}");
        assert!(answer.message.contains("disk is full"), "{answer:?}");
    }

    // Room again: the end is saved and told, once.
    std::fs::remove_file(disk.path.join("filler")).unwrap();
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    let end = events.last().map(|e| e.event.clone());
    assert!(
        matches!(&end, Some(SessionEvent::TurnCompleted { stop_reason: StopReason::Cancelled, turn_id }) if *turn_id == added.turn_id),
        "{end:?}"
    );
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    let stored = journal(&client, &mut notes, &session_id).await;
    let ends =
        stored.range(added.message.as_ref().expect("the turn started").seq..).filter(|(_, r)| is_turn_end(r)).count();
    assert_eq!(ends, 1, "the turn ended once");
    println!(
        "[faults] turn end on a full disk: RUNNING until saved; message.add and cancel both {:?}; saved and told once \
         there was room",
        message.message
    );
}
