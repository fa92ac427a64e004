//! Test harness: a real `batond` on an ephemeral loopback port with a temporary data dir,
//! driven through the typed client over a real WebSocket.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use baton_protocol::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Default bound for anything a test waits for.
pub const WAIT: Duration = Duration::from_secs(30);

/// A data dir and a working directory that outlive server restarts.
pub struct TestEnv {
    _dir: tempfile::TempDir,
    pub data_dir: PathBuf,
    pub workdir: PathBuf,
}

impl TestEnv {
    pub fn new() -> TestEnv {
        let dir = tempfile::tempdir().expect("tempdir");
        let data_dir = dir.path().join("data");
        let workdir = dir.path().join("work");
        std::fs::create_dir_all(&data_dir).unwrap();
        std::fs::create_dir_all(&workdir).unwrap();
        TestEnv { _dir: dir, data_dir, workdir }
    }

    /// Writes the agent config file (TOML) the server reads at startup.
    pub fn agents_config(&self, toml: &str) {
        std::fs::write(self.data_dir.join("agents.toml"), toml).unwrap();
    }

    pub async fn start(&self) -> Server {
        Server::start(&self.data_dir, &[]).await
    }

    pub async fn start_with(&self, args: &[&str]) -> Server {
        Server::start(&self.data_dir, args).await
    }

    pub fn task(&self, title: &str, description: &str, agent: &str, start: bool) -> TaskCreateParams {
        let mut params = TaskCreateParams::new(title, description, agent);
        params.workdir = Some(self.workdir.to_string_lossy().into_owned());
        params.start = start;
        params
    }
}

pub fn batond() -> &'static str {
    env!("CARGO_BIN_EXE_batond")
}

/// A running `batond` process.
pub struct Server {
    child: Child,
    pub url: String,
    pub pid: u32,
    /// The token it requires: `--token` when given, else the one it keeps in `DATA_DIR/token`
    /// (none with `--no-token`).
    pub token: Option<String>,
}

impl Server {
    /// Starts batond on an ephemeral loopback port, or on the `--listen` address in `args`.
    pub async fn start(data_dir: &Path, args: &[&str]) -> Server {
        Self::start_configured(data_dir, args, |_| {}).await
    }

    /// Like `start`, on `listen` (e.g. `0.0.0.0:0`); the url names the port it got.
    pub async fn start_listening(data_dir: &Path, listen: &str, args: &[&str]) -> Server {
        let mut all = vec!["--listen", listen];
        all.extend_from_slice(args);
        Self::start(data_dir, &all).await
    }

    /// Like `start`, with `configure` applied to the command first (e.g. a `pre_exec` that sets
    /// resource limits).
    pub async fn start_configured(data_dir: &Path, args: &[&str], configure: impl FnOnce(&mut Command)) -> Server {
        let listen: &[&str] = if args.contains(&"--listen") { &[] } else { &["--listen", "127.0.0.1:0"] };
        let mut command = Command::new(batond());
        command
            .args(listen)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .env("BATON_LOG", "info,baton_server=debug")
            .env_remove("BATON_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // BATON_TEST_STDERR=1 shows the servers' logs when a test needs debugging.
            .stderr(if std::env::var_os("BATON_TEST_STDERR").is_some() { Stdio::inherit() } else { Stdio::null() })
            .kill_on_drop(true);
        configure(&mut command);
        let mut child = command.spawn().expect("spawn batond");
        let pid = child.id().expect("pid");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("batond did not say where it listens")
            .expect("read stdout")
            .expect("batond exited before listening");
        let url = line.rsplit(' ').next().expect("url").to_string();
        assert!(url.starts_with("ws://"), "unexpected first line {line:?}");
        let token = match args.iter().position(|a| *a == "--token") {
            Some(i) => args.get(i + 1).map(|t| t.to_string()),
            None => read_token(&token_file(data_dir)).expect("read the token file"),
        };
        Server { child, url, pid, token }
    }

    /// Options carrying the server's token.
    pub fn options(&self) -> ClientOptions {
        ClientOptions { token: self.token.clone(), ..ClientOptions::default() }
    }

    pub async fn client(&self) -> (Client, Notifications) {
        Client::connect_with(&self.url, self.options()).await.expect("connect")
    }

    /// The WebSocket URL with the token in its query, for raw WebSocket clients.
    pub fn url_with_token(&self) -> String {
        match &self.token {
            Some(token) => format!("{}?token={token}", self.url),
            None => self.url.clone(),
        }
    }

    /// kill -9: no shutdown code runs.
    pub async fn kill9(mut self) {
        // SAFETY: signalling our own child process.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
        }
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }

    /// SIGTERM and wait for a clean exit.
    pub async fn stop(mut self) -> std::process::ExitStatus {
        // SAFETY: signalling our own child process.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGTERM);
        }
        tokio::time::timeout(WAIT, self.child.wait()).await.expect("batond did not stop").expect("wait")
    }
}

/// Resident memory of a process (VmRSS, or VmHWM for the peak), in KiB.
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} for {pid}"));
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("a number of KiB")
}

/// Runs batond on `data_dir` (with `args`) expecting it to refuse to start; returns what it
/// said on stderr.
pub async fn batond_refuses(data_dir: &Path, listen: &str, args: &[&str]) -> String {
    let output = Command::new(batond())
        .args(["--listen", listen, "--data-dir"])
        .arg(data_dir)
        .args(args)
        .env_remove("BATON_TOKEN")
        .output()
        .await
        .expect("run batond");
    assert!(!output.status.success(), "batond started when it should have refused");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn process_alive(pid: u32) -> bool {
    // A zombie is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().map(|rest| !rest.trim_start().starts_with('Z')).unwrap_or(false),
        Err(_) => false,
    }
}

/// Waits until `pid` is gone, with the default bound; false if it is still alive.
pub async fn wait_process_gone(pid: u32) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if !process_alive(pid) {
            return true;
        }
        // Process death has no event to wait on from here; a short poll is bounded by WAIT.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

pub fn server_error(result: Result<impl std::fmt::Debug, ClientError>) -> ErrorPayload {
    match result {
        Err(ClientError::Server(error)) => error,
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// Waits for `session.state_changed` to `state` (checking the current status first).
pub async fn wait_state(
    client: &Client,
    notes: &mut Notifications,
    session_id: &str,
    state: SessionState,
) -> SessionStatus {
    let status = client.request(SessionStatusParams { session_id: session_id.into() }).await.expect("status");
    if status.state == state && !(state == SessionState::Starting) {
        return status;
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
    client.request(SessionStatusParams { session_id: session_id.into() }).await.expect("status")
}

/// Subscribes and returns events as they come, with helpers to wait for a kind.
pub async fn subscribe(client: &Client, session_id: &str, since_seq: Option<u64>) -> SubscribeResult {
    client.request(SubscribeParams { session_id: session_id.into(), since_seq }).await.expect("subscribe")
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

/// Sends a message and waits for its turn to complete; returns the agent's reply text.
pub async fn prompt(client: &Client, notes: &mut Notifications, session_id: &str, content: &str) -> String {
    client
        .request_with_timeout(
            MessageAddParams { session_id: session_id.into(), content: content.into() },
            Duration::from_secs(120),
        )
        .await
        .unwrap_or_else(|e| panic!("message.add {content:?}: {e}"));
    let events = collect_events(notes, session_id, is_turn_end).await;
    agent_text(&events)
}

/// The user messages of the folded view, oldest first.
pub async fn user_messages(client: &Client, session_id: &str) -> Vec<String> {
    messages(client, session_id).await.into_iter().filter(|m| m.kind == MessageKind::User).map(|m| m.text).collect()
}

/// Configures `gated`: an agent (the mock, natively resuming) that hangs before it answers
/// `initialize` while `{data_dir}/hang` exists. `prelude` is shell run first (e.g. a trap).
pub fn gated_agent(env: &TestEnv, prelude: &str) {
    env.agents_config(&format!(
        r#"
        [agents.gated]
        command = "sh"
        args = ["-c", "{prelude}if [ -e '{{data_dir}}/hang' ]; then sleep 600; fi; exec '{{batond}}' mock-agent --state-dir '{{data_dir}}/mock-agent'"]
        native_session_resume = true
        "#
    ));
}

pub fn agent_text(events: &[EventRecord]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.event {
            SessionEvent::MessageChunk { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

pub async fn messages(client: &Client, session_id: &str) -> Vec<Message> {
    client.request(MessageListParams::all(session_id)).await.expect("message.list").messages
}

/// Creates a task with the mock agent, started, and waits for its first turn to finish.
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

/// Reads batond's log until `needle` shows up (the log is written by a background thread).
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
