//! End to end: the real `baton` in a tmux pane of fixed size, against a real `batond` with the
//! mock agent. Keys go in with `send-keys`; the screen is read with `capture-pane`, polled with
//! a bound until it shows what we wait for. A new user's story: `baton` starts its own server,
//! `n` creates a task with the mock agent, the answer streams in, the server is restarted, and
//! selecting the session resumes it and the agent answers again. Another: open a session, talk
//! to the agent, answer a permission request, then kill the server and start it again: the TUI
//! reconnects, auto-resumes the open session, and the agent still remembers. And: a server on baton's data
//! dir is started again when it crashes but not when it is stopped, one on another data dir is
//! not, and typed keys show at once, not at the next tick.
//!
//! Needs `tmux` (without it the tests say so and do nothing) and `batond` next to `baton`, which
//! the testkit builds when it is not built yet.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::tmux::{baton_command, server_with_tasks, tools, Tmux, WAIT};
use baton_protocol::{Client, ClientOptions, TaskCreateParams};
use baton_testkit::{Server, ServerBuilder};

/// batond on `data_dir` at `listen` (`127.0.0.1:0`, or the address of the server it replaces).
fn start_server(listen: &str, data_dir: &Path) -> Server {
    ServerBuilder::new(data_dir).listen(listen).start_blocking()
}

#[test]
fn baton_drives_a_session_and_resumes_it_after_a_server_restart() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let tui_dir = dir.path().join("tui");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");

    let server = server_with_tasks(&data_dir, &workdir, &["E2E pineapple task"]);
    let url = server.url.clone();
    let tmux = Tmux::start(dir.path(), 100, 30, &baton_command(&server, &tui_dir, ""));

    // The session shows up under its task; Enter opens it.
    tmux.wait_for("the session list", |s| s.contains("E2E pineapple task") && s.contains("connected"));
    tmux.keys(&["Enter"]);
    tmux.wait_text("E2E pineapple task · mock");

    // A prompt through the input reaches the agent, which answers in the transcript.
    tmux.keys(&["i"]);
    tmux.type_text("remember pineapple");
    tmux.keys(&["Enter"]);
    tmux.wait_text("you: remember pineapple");
    tmux.wait_text("agent: OK, I will remember pineapple.");

    // A permission request is shown with its options and answered with y.
    tmux.type_text("/permission");
    tmux.keys(&["Enter"]);
    tmux.wait_text("? permission: Write file");
    tmux.keys(&["Escape"]);
    tmux.keys(&["y"]);
    tmux.wait_text("Permission outcome: selected allow");

    // The server goes away: the TUI says so and keeps retrying.
    let port = url.rsplit(':').next().and_then(|p| p.split('/').next()).expect("port").to_string();
    server.kill9_blocking();
    tmux.wait_for("the reconnecting status", |s| s.contains("reconnecting in") || s.contains("connecting…"));

    // Back on the same port: the TUI reconnects, resubscribes and auto-resumes the open session.
    let _server = start_server(&format!("127.0.0.1:{port}"), &data_dir);
    tmux.wait_for("the reconnection", |s| s.contains("● connected"));
    // No key was pressed and no message sent: this resume is the TUI's auto-resume.
    tmux.wait_text("Session resumed: the agent restored its context.");
    tmux.keys(&["i"]);
    tmux.type_text("what did I ask you to remember?");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_text("You asked me to remember pineapple.");
    // Resubscribing from the last seq held replays nothing we already show.
    assert_eq!(screen.matches("OK, I will remember pineapple.").count(), 1, "{screen}");

    // Logs went to the data dir, not to the screen.
    assert!(tui_dir.join("baton-tui.log").is_file());
    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    tmux.wait_for("baton to exit", |_| tmux.run(&["list-sessions"]).is_empty());
}

/// The pids of live `batond` processes serving `data_dir`, read from /proc (the spawned server
/// is not our child: baton started it).
fn batonds_serving(data_dir: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let wanted = data_dir.as_os_str().as_encoded_bytes();
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let mut args = cmdline.split(|b| *b == 0);
            let is_batond = args.next().is_some_and(|exe| exe.ends_with(b"/batond"));
            is_batond && args.any(|arg| arg == wanted) && is_alive(*pid)
        })
        .collect()
}

/// Exists and is not a zombie waiting for its parent.
fn is_alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesised command name, which may itself hold spaces.
    let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
    state.is_some_and(|state| state != 'Z' && state != 'X')
}

fn signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) on a pid found serving our temporary data dir; no memory is shared.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Polls until `done` holds; panics saying `what` after `WAIT`.
fn wait_until<T>(what: &str, done: impl Fn() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = done() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        // Process start and exit have no event to wait on here; the poll is bounded by WAIT.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Servers baton started in `data_dir`: SIGTERM (so they stop their agents) when dropped,
/// also when the test fails.
struct SpawnedServers {
    data_dir: PathBuf,
}

impl Drop for SpawnedServers {
    fn drop(&mut self) {
        for pid in batonds_serving(&self.data_dir) {
            signal(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + WAIT;
        while !batonds_serving(&self.data_dir).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn baton_starts_its_local_server_again_after_a_crash_but_not_after_a_stop() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("data");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let url = format!("ws://127.0.0.1:{port}/ws");

    // Declared before the tmux server so that baton is gone before its servers are stopped.
    let servers = SpawnedServers { data_dir: data_dir.clone() };
    // No --no-spawn: nobody answers there, so baton starts the batond next to it.
    let baton = env!("CARGO_BIN_EXE_baton");
    let command = format!("'{baton}' --server '{url}' --data-dir '{}'", data_dir.display());
    let tmux = Tmux::start(dir.path(), 100, 30, &command);
    tmux.wait_for("the first connection", |s| s.contains("● connected"));
    let first = wait_until("the batond baton started", || batonds_serving(&data_dir).first().copied());
    let written = std::fs::read_to_string(data_dir.join("batond.url")).expect("batond.url");
    assert!(written.contains(&format!(":{port}")), "batond.url says {written:?}");

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let (client, _notifications) =
            Client::connect_with(&url, ClientOptions::for_data_dir(&data_dir)).await.expect("connect");
        let mut params = TaskCreateParams::new("E2E respawn task", "", "mock");
        params.workdir = Some(dir.path().display().to_string());
        params.start = false;
        client.request(params).await.expect("task.create");
        client.close();
    });
    tmux.wait_text("E2E respawn task");

    // A crash: no clean shutdown, nobody restarts it but baton.
    signal(first, libc::SIGKILL);
    tmux.wait_for("the lost connection", |s| !s.contains("● connected"));
    tmux.wait_text("started the local server again");
    tmux.wait_for("the reconnection", |s| s.contains("● connected") && s.contains("E2E respawn task"));
    let now_serving = batonds_serving(&data_dir);
    assert!(now_serving.len() == 1 && now_serving[0] != first, "batonds serving: {now_serving:?} (killed {first})");

    // kill -TERM: stopped on purpose (batond.url removed), so it stays stopped.
    signal(now_serving[0], libc::SIGTERM);
    let stopped = "the server was stopped (start it with batond or restart baton)";
    tmux.wait_for("the stopped server", |s| s.contains(stopped) && s.contains("reconnecting in 4s"));
    assert!(batonds_serving(&data_dir).is_empty(), "a stopped server was started again");

    tmux.keys(&["q"]);
    tmux.wait_for("baton to exit", |_| tmux.run(&["list-sessions"]).is_empty());
    // The server outlives baton, as a server baton starts should; stop it.
    drop(servers);
    assert!(batonds_serving(&data_dir).is_empty(), "batond did not stop on SIGTERM");
}

/// The repro of the acceptance test: a batond started by hand on another data dir, then `baton`
/// (allowed to start servers) connected to it; the server is stopped. baton must not start one
/// in its place (that one would use baton's data dir and take the port from the real server).
#[test]
fn baton_does_not_start_again_a_server_it_did_not_start() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let server = start_server("127.0.0.1:0", &dir.path().join("by-hand"));
    let url = server.url.clone();
    let addr = url.trim_start_matches("ws://").trim_end_matches("/ws").to_string();

    let baton = env!("CARGO_BIN_EXE_baton");
    let command = format!(
        "BATON_TOKEN='{}' '{baton}' --server '{url}' --data-dir '{}'",
        server.token.as_deref().unwrap_or_default(),
        dir.path().join("tui").display()
    );
    let tmux = Tmux::start(dir.path(), 100, 30, &command);
    tmux.wait_for("the connection", |s| s.contains("● connected"));

    // SIGTERM: a clean shutdown that frees the port. baton's data dir has no batond.url: the
    // server was not on it, and in any case was stopped on purpose.
    drop(server);
    // The third failed attempt waits 4 s; a server started after the first would have
    // answered long before.
    // The status wraps before "reconnecting".
    let stopped = format!("{url} │ ○ the server was stopped (start it with batond or restart baton);");
    tmux.wait_for("the stopped server", |s| s.contains(&stopped) && s.contains("reconnecting in 4s"));
    assert!(std::net::TcpStream::connect(&addr).is_err(), "something listens on {addr} again");

    tmux.keys(&["q"]);
    tmux.wait_for("baton to exit", |_| tmux.run(&["list-sessions"]).is_empty());
}

/// Keys wake the event loop themselves: with a tick far longer than the test, typed text
/// still shows at once.
#[test]
fn typed_keys_show_before_the_next_tick() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let server = start_server("127.0.0.1:0", &dir.path().join("server"));
    let command = baton_command(&server, &dir.path().join("tui"), "--tick-ms 600000");
    let tmux = Tmux::start(dir.path(), 100, 30, &command);
    tmux.wait_for("the empty list", |s| s.contains("● connected") && s.contains("No sessions yet"));

    // Each wait is bounded by WAIT (30 s), far below the 10 minute tick.
    tmux.keys(&["i"]);
    tmux.wait_text("Alt-Enter new line");
    let mut typed = String::new();
    for word in ["zebra", " crossing", " again"] {
        tmux.type_text(word);
        typed.push_str(word);
        tmux.wait_text(&typed);
    }
    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    tmux.wait_for("baton to exit", |_| tmux.run(&["list-sessions"]).is_empty());
}

/// The story of a new user: `baton` with nothing running starts its own server; `n` creates a
/// task with the mock agent, whose answer streams in; the user quits, the server is restarted
/// (stopped, then started again by the next `baton`), which opens the session open at the quit again
/// and so resumes it: the agent answers again and still remembers.
#[test]
fn a_new_user_creates_a_task_and_resumes_it_after_a_server_restart() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("data");
    let workdir = dir.path().join("project");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
    let url = format!("ws://127.0.0.1:{port}/ws");

    // Declared before the tmux server so that baton is gone before its servers are stopped.
    let servers = SpawnedServers { data_dir: data_dir.clone() };
    let tmux = Tmux { socket: dir.path().join("tmux.sock") };
    let baton = env!("CARGO_BIN_EXE_baton");
    // As typed by a user in their project directory; the port and data dir keep the test apart
    // from a real server on this machine.
    let command = format!("'{baton}' --server '{url}' --data-dir '{}'", data_dir.display());
    let start = |tmux: &Tmux| {
        let cwd = workdir.display().to_string();
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "baton",
            "-x",
            "100",
            "-y",
            "30",
            "-c",
            &cwd,
            &command,
        ]);
    };
    start(&tmux);
    tmux.wait_for("the empty list", |s| s.contains("● connected") && s.contains("Press n to create a task."));
    assert_eq!(batonds_serving(&data_dir).len(), 1, "baton started its server");

    // n: a title, the first prompt, the mock agent (the first installed in agent.list) and the
    // project directory (prefilled: the server runs here).
    tmux.keys(&["n"]);
    tmux.wait_text("Mock agent (resume + load) (mock)");
    tmux.type_text("Harvest planning");
    tmux.keys(&["Tab"]);
    tmux.type_text("remember pineapple");
    tmux.keys(&["Enter"]);
    tmux.wait_text("task created: Harvest planning");
    tmux.wait_text("agent: OK, I will remember pineapple.");

    // An answer streamed word by word: seen part-way, then whole.
    tmux.keys(&["i"]);
    tmux.type_text("/slow 60");
    tmux.keys(&["Enter"]);
    tmux.wait_for("part of the answer", |s| s.contains("agent: s1 s2") && !s.contains("s60"));
    tmux.wait_text("s59 s60");

    // The user quits; the server keeps running with its agent.
    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    tmux.wait_for("baton to exit", |_| tmux.run(&["list-sessions"]).is_empty());
    let running = batonds_serving(&data_dir);
    assert_eq!(running.len(), 1, "the server outlives baton");

    // The server is restarted: stopped (its agent with it), then started by the next baton.
    signal(running[0], libc::SIGTERM);
    wait_until("the server to stop", || batonds_serving(&data_dir).is_empty().then_some(()));
    start(&tmux);
    // The session open at the quit is open again, with no key pressed: opening it resumes it;
    // the agent answers again, and remembers.
    tmux.wait_text("Session resumed: the agent restored its context.");
    let restarted = batonds_serving(&data_dir);
    assert!(restarted.len() == 1 && restarted[0] != running[0], "a new server: {restarted:?}");
    tmux.wait_for("the resumed session", |s| s.contains("waiting for you") && !s.contains("NEEDS RESUME"));
    tmux.keys(&["i"]);
    tmux.type_text("what did I ask you to remember?");
    tmux.keys(&["Enter"]);
    tmux.wait_text("agent: You asked me to remember pineapple.");

    tmux.keys(&["Escape"]);
    tmux.keys(&["q"]);
    tmux.wait_for("baton to exit", |_| tmux.run(&["list-sessions"]).is_empty());
    drop(servers);
    assert!(batonds_serving(&data_dir).is_empty(), "batond did not stop on SIGTERM");
}

/// Copy over SSH and tmux: `Y` writes the last answer as OSC 52, which tmux (with
/// `set-clipboard on`) puts in its paste buffer.
#[test]
fn y_copies_the_last_answer_through_tmux_with_osc52() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).expect("workdir");
    let server = server_with_tasks(&dir.path().join("server"), &workdir, &["Copy me"]);
    let tmux = Tmux::start(dir.path(), 100, 30, &baton_command(&server, &dir.path().join("tui"), ""));
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    tmux.wait_for("the session", |s| s.contains("Copy me") && s.contains("● connected"));
    tmux.keys(&["Enter"]);
    tmux.keys(&["i"]);
    // The mock echoes what it is not scripted for: an answer with a fenced block in it.
    tmux.type_text("Here: ```sh echo copied-block``` end");
    tmux.keys(&["Enter"]);
    // The answer comes word by word: `Y` once the turn is over copies all of it (at its first
    // words, it would copy those).
    tmux.wait_for("the whole answer", |s| s.contains("Echo: Here:") && s.contains("waiting for you"));
    tmux.keys(&["Escape"]);
    tmux.keys(&["Y"]);
    tmux.wait_text("copied the last answer");
    let buffer = tmux.run(&["show-buffer"]);
    assert!(buffer.contains("Echo: Here:") && buffer.contains("end"), "tmux's buffer: {buffer:?}");
}

/// What needs you, in tmux: the status bar counts the sessions, and when a session the user is
/// not looking at starts needing them, baton writes the alert (OSC 9 and OSC 777, each also
/// wrapped for tmux's passthrough, then the bell), once. Read from what baton wrote to its pane
/// (`pipe-pane`), byte for byte.
#[test]
fn a_session_in_the_background_that_needs_you_raises_one_alert_through_tmux() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("server");
    let tui_dir = dir.path().join("tui");
    let server = start_server("127.0.0.1:0", &data_dir);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (client, _notifications) = runtime.block_on(async {
        let (client, notifications) = server.client().await;
        let mut params = TaskCreateParams::new("Watched task", "", "mock");
        params.start = false;
        client.request(params).await.expect("task.create");
        (client, notifications)
    });

    let tmux = Tmux::start(dir.path(), 100, 30, &baton_command(&server, &tui_dir, ""));
    let output = dir.path().join("pane-output");
    tmux.run(&["pipe-pane", "-o", "-t", "baton", &format!("cat >> '{}'", output.display())]);
    tmux.wait_for("the session list", |s| s.contains("Watched task") && s.contains("connected"));
    tmux.keys(&["Enter"]);
    tmux.wait_text("Watched task · mock");

    // Another task's first turn ends while the user looks at the first one.
    runtime.block_on(async {
        let params = TaskCreateParams::new("Background task", "hello", "mock");
        client.request(params).await.expect("task.create");
    });
    tmux.wait_text("1 your turn");
    let body = "Background task: waits for your next prompt";
    let osc9 = format!("\x1b]9;Baton: {body}\x07");
    let osc777 = format!("\x1b]777;notify;Baton;{body}\x07");
    let wrapped = |osc: &str| format!("{osc}\x1bPtmux;{}\x1b\\", osc.replace('\x1b', "\x1b\x1b"));
    let alert = format!("{}{}\x07", wrapped(&osc9), wrapped(&osc777));
    let deadline = Instant::now() + WAIT;
    let written = loop {
        let written = String::from_utf8_lossy(&std::fs::read(&output).unwrap_or_default()).into_owned();
        if written.contains(&alert) || Instant::now() > deadline {
            break written;
        }
        // pipe-pane writes to a file: nothing to wait on but the file; bounded by WAIT.
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(written.matches(&alert).count(), 1, "one alert, wrapped for tmux: {written:?}");
    assert_eq!(written.matches("]9;").count(), 2, "no other OSC 9 (plain + wrapped)");
    client.close();
}
