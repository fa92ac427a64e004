//! A real `batond` process: started on a loopback port, connected to, killed, restarted.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use baton_protocol::{Client, ClientOptions, Notifications, SubscribeParams};

use crate::process::wait_child;
use crate::{batond_path, WAIT};

/// The file in the data dir that holds the token clients must present (batond generates it on
/// its first start unless given `--token` or `--no-token`).
const TOKEN_FILE: &str = "token";

/// How to start a `batond`: the data dir, `--listen` (an ephemeral loopback port unless the
/// flags name one), extra flags and environment.
pub struct ServerBuilder {
    batond: PathBuf,
    data_dir: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    log: String,
}

impl ServerBuilder {
    pub fn new(data_dir: &Path) -> ServerBuilder {
        ServerBuilder {
            batond: batond_path(),
            data_dir: data_dir.to_path_buf(),
            args: Vec::new(),
            envs: Vec::new(),
            // Debug lines of the server: some tests wait for them in the log.
            log: "info,baton_server=debug".into(),
        }
    }

    /// Another `batond` than [`batond_path`] (e.g. `CARGO_BIN_EXE_batond`).
    pub fn batond(mut self, path: impl Into<PathBuf>) -> Self {
        self.batond = path.into();
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// `--listen ADDRESS` (e.g. `0.0.0.0:0`, or `127.0.0.1:PORT` to come back on a known port).
    pub fn listen(self, address: &str) -> Self {
        self.args(["--listen", address])
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// `BATON_LOG` of the server (default `info,baton_server=debug`).
    pub fn log(mut self, filter: &str) -> Self {
        self.log = filter.to_string();
        self
    }

    /// Starts batond and waits (bounded) until it says where it listens. Blocks: for tests
    /// without an async runtime; async tests use [`ServerBuilder::start`].
    pub fn start_blocking(self) -> Server {
        self.start_configured_blocking(|_| {})
    }

    /// Like [`ServerBuilder::start_blocking`], with `configure` applied to the command before it
    /// is spawned (e.g. a `pre_exec` that sets resource limits).
    pub fn start_configured_blocking(self, configure: impl FnOnce(&mut Command)) -> Server {
        let has_listen = self.args.iter().any(|a| a == "--listen");
        let mut command = Command::new(&self.batond);
        command
            .args(if has_listen { &[][..] } else { &["--listen", "127.0.0.1:0"][..] })
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.args)
            .env("BATON_LOG", &self.log)
            // The token comes from the flags or the data dir, never from the test's environment.
            .env_remove("BATON_TOKEN")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // BATON_TEST_STDERR=1 shows the servers' logs when a test needs debugging.
            .stderr(if std::env::var_os("BATON_TEST_STDERR").is_some() { Stdio::inherit() } else { Stdio::null() });
        let restart = Restart {
            batond: self.batond.clone(),
            args: self.args.clone(),
            envs: self.envs.clone(),
            log: self.log.clone(),
        };
        configure(&mut command);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e} (set BATON_BATOND?)", self.batond.display()));
        let stdout = child.stdout.take().expect("batond's stdout is piped");
        let (line, page, certificate) = first_lines(stdout).unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("batond ({}) did not say where it listens within {WAIT:?}", self.batond.display())
        });
        let url = line.trim().rsplit(' ').next().unwrap_or_default().to_string();
        assert!(url.starts_with("ws://") || url.starts_with("wss://"), "unexpected first line from batond: {line:?}");
        let fingerprint = certificate
            .and_then(|line| line.trim().rsplit(' ').next().map(str::to_string))
            .filter(|fingerprint| fingerprint.contains(':'));
        let pid = child.id();
        // `--token` when given, else the one batond keeps in (or generated into) the data dir.
        let flag = self.args.iter().position(|a| a == "--token").and_then(|i| self.args.get(i + 1));
        let token = match flag {
            Some(token) => Some(token.to_string_lossy().into_owned()),
            None => read_token(&self.data_dir),
        };
        let page = page.and_then(|line| line.trim().strip_prefix("web page: ").map(str::to_string));
        Server { child: Some(child), url, pid, token, page, fingerprint, data_dir: self.data_dir, restart }
    }

    /// Starts batond and waits (bounded) until it says where it listens.
    pub async fn start(self) -> Server {
        // The wait is for one line that comes within milliseconds; blocking the runtime for it
        // is simpler than a second, async implementation.
        self.start_blocking()
    }
}

/// Reads batond's first lines on stdout (`... listening on ws://HOST:PORT/ws`, then
/// `web page: URL`, then with TLS the certificate's fingerprint, written together), bounded by
/// WAIT. The rest of stdout is drained by the
/// same thread so that batond never blocks on it.
fn first_lines(stdout: std::process::ChildStdout) -> Option<(String, Option<String>, Option<String>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let first = reader.read_line(&mut line).ok().filter(|n| *n > 0).map(|_| line);
        let mut next = || {
            let mut line = String::new();
            reader.read_line(&mut line).ok().filter(|n| *n > 0).map(|_| line)
        };
        let second = first.as_ref().and_then(|_| next());
        // With TLS, a third line gives the certificate's fingerprint (written with the others).
        let third = first.as_ref().filter(|line| line.contains("wss://")).and_then(|_| next());
        let _ = tx.send(first.map(|first| (first, second, third)));
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    rx.recv_timeout(WAIT).ok().flatten()
}

fn read_token(data_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(data_dir.join(TOKEN_FILE)).ok()?;
    let token = text.trim();
    (!token.is_empty()).then(|| token.to_string())
}

/// What a restart on the same data dir runs again.
struct Restart {
    batond: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    log: String,
}

/// A running `batond`. Dropped, it gets SIGTERM (so that it stops its agents), then SIGKILL if
/// it has not exited within a bound.
pub struct Server {
    child: Option<Child>,
    /// `ws://127.0.0.1:PORT/ws`.
    pub url: String,
    pub pid: u32,
    /// The token clients present: the one in `DATA_DIR/token` when batond started.
    pub token: Option<String>,
    /// The web page's address as batond printed it (`web page: URL`).
    pub page: Option<String>,
    /// With TLS: the SHA-256 fingerprint of the server's certificate, as batond printed it.
    pub fingerprint: Option<String>,
    pub data_dir: PathBuf,
    restart: Restart,
}

impl Server {
    /// Starts batond on `data_dir` on an ephemeral loopback port (or the `--listen` in `args`).
    pub async fn start(data_dir: &Path, args: &[&str]) -> Server {
        ServerBuilder::new(data_dir).args(args).start().await
    }

    /// Like `start`, on `listen` (e.g. `0.0.0.0:0`); the url names the port it got.
    pub async fn start_listening(data_dir: &Path, listen: &str, args: &[&str]) -> Server {
        ServerBuilder::new(data_dir).listen(listen).args(args).start().await
    }

    /// Like `start`, with `configure` applied to the command first.
    pub async fn start_configured(data_dir: &Path, args: &[&str], configure: impl FnOnce(&mut Command)) -> Server {
        ServerBuilder::new(data_dir).args(args).start_configured_blocking(configure)
    }

    /// `HOST:PORT` it listens on.
    pub fn listen_addr(&self) -> String {
        self.url.trim_start_matches("wss://").trim_start_matches("ws://").trim_end_matches("/ws").to_string()
    }

    /// The WebSocket URL with the token in its query (`?token=`), for raw WebSocket clients.
    pub fn url_with_token(&self) -> String {
        match &self.token {
            Some(token) => format!("{}?token={token}", self.url),
            None => self.url.clone(),
        }
    }

    /// The client options a script connects with: the server's token, if it has one, and with
    /// TLS its certificate's fingerprint, pinned.
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions { token: self.token.clone(), fingerprint: self.fingerprint.clone(), ..ClientOptions::default() }
    }

    /// Connects the typed client (with the token, if the server has one).
    pub async fn client(&self) -> (Client, Notifications) {
        Client::connect_with(&self.url, self.client_options())
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url))
    }

    /// Connects the typed client and subscribes it, from now on, to each of `sessions`: what a
    /// script does after [`Server::restart`] to go on following its sessions, in one call.
    pub async fn reconnect(&self, sessions: &[&str]) -> (Client, Notifications) {
        let (client, notes) = self.client().await;
        for session_id in sessions {
            client
                .request(SubscribeParams::from_now(*session_id))
                .await
                .unwrap_or_else(|e| panic!("session.subscribe {session_id} after reconnecting: {e}"));
        }
        (client, notes)
    }

    /// kill -9: no shutdown code runs, as in a crash.
    pub fn kill9_blocking(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// kill -9: no shutdown code runs, as in a crash.
    pub async fn kill9(self) {
        // SIGKILL then reaping the child: immediate.
        self.kill9_blocking()
    }

    /// SIGTERM and wait (bounded) for a clean exit.
    pub fn stop_blocking(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the server runs");
        terminate(&child);
        wait_child(&mut child, WAIT).expect("batond did not stop within the bound")
    }

    /// SIGTERM and wait (bounded) for a clean exit. The runtime goes on meanwhile: batond's
    /// shutdown closes connections whose clients live in it.
    pub async fn stop(mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the server runs");
        terminate(&child);
        tokio::task::spawn_blocking(move || wait_child(&mut child, WAIT))
            .await
            .expect("the wait does not panic")
            .expect("batond did not stop within the bound")
    }

    /// A builder for another batond on the same data dir, address and flags (and the same
    /// port, so that clients that reconnect find it).
    pub fn again(&self) -> ServerBuilder {
        let mut args = self.restart.args.clone();
        if let Some(at) = args.iter().position(|a| a == "--listen") {
            args.drain(at..(at + 2).min(args.len()));
        }
        let mut builder = ServerBuilder::new(&self.data_dir).batond(&self.restart.batond).log(&self.restart.log);
        builder.envs = self.restart.envs.clone();
        builder.args(args).listen(&self.listen_addr())
    }

    /// kill -9, then the same batond again on the same data dir and port.
    pub async fn restart(self) -> Server {
        let again = self.again();
        self.kill9().await;
        again.start().await
    }
}

fn terminate(child: &Child) {
    // SAFETY: signalling our own child, which has not been reaped yet.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        terminate(&child);
        if wait_child(&mut child, Duration::from_secs(10)).is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs batond on `data_dir` (with `args`) expecting it to refuse to start; returns what it
/// said on stderr.
pub async fn batond_refuses(data_dir: &Path, listen: &str, args: &[&str]) -> String {
    let output = Command::new(batond_path())
        .args(["--listen", listen, "--data-dir"])
        .arg(data_dir)
        .args(args)
        .env_remove("BATON_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("run batond");
    assert!(!output.status.success(), "batond started when it should have refused");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A fingerprint that is not `fingerprint`: its first byte changed (to `00`, or to `11` when it
/// is `00`), for a test that pins the wrong one.
pub fn another_fingerprint(fingerprint: &str) -> String {
    let first = if fingerprint.starts_with("00") { "11" } else { "00" };
    format!("{first}{}", fingerprint.get(2..).unwrap_or_default())
}
