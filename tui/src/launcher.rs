//! Connecting at startup, and starting a local server when none answers; starting it again
//! when it goes away later (see [`restart_server`]), but only a server this `baton` started:
//! a server someone else runs may have another data dir, token or binary, and starting ours in
//! its place would hide its sessions and keep it from binding its port again.
//!
//! The server is started detached (its own session, no terminal) so that it and its agents keep
//! running after `baton` exits or the SSH connection that ran it drops. Its stderr goes to
//! `DATA_DIR/batond.stderr`, so that a server that will not start can say why.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use baton_protocol::{Client, ClientError, ClientOptions, Notifications};

use crate::backoff::Backoff;
use crate::server_url::ServerAddr;

/// How long a server we started may take to answer.
const STARTUP_BOUND: Duration = Duration::from_secs(10);
/// Connect timeout for one startup attempt: a local server answers fast or not at all.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

/// What `batond` writes to stderr, in its data dir (rewritten at each start).
pub const STDERR_FILE: &str = "batond.stderr";
/// Lines of batond's stderr quoted when it exits before answering.
const STDERR_QUOTE_LINES: usize = 8;

#[derive(Clone)]
pub struct LaunchOptions {
    pub url: String,
    /// Its token is also given to a server we start (through its environment, not its command
    /// line, which every local user can read).
    pub client: ClientOptions,
    /// Passed on to a server we start, always explicitly: a restart must use the same one.
    pub data_dir: PathBuf,
    /// The `batond` to start instead of the one found next to `baton` or on PATH.
    pub batond: Option<PathBuf>,
    pub no_spawn: bool,
}

impl LaunchOptions {
    /// Only a server on this machine may be started, and only without `--no-spawn`.
    pub fn may_start_server(&self) -> bool {
        !self.no_spawn && ServerAddr::from_url(&self.url).is_ok_and(|addr| addr.is_loopback())
    }
}

/// How startup went.
pub struct Startup {
    /// The connection, or why there is none yet (the TUI opens anyway and keeps retrying).
    pub connection: Result<(Client, Notifications), ClientError>,
    /// This `baton` started the server: only then may it start it again when it goes away.
    pub started_server: bool,
}

/// Connects to the server, starting a local one if nobody listens at a loopback address.
/// A server we may not start (remote, `--no-spawn`, or something else holds the port) is an
/// `Ok` without a connection. `Err` is a server we started that never answered.
pub async fn connect_or_launch(options: &LaunchOptions) -> Result<Startup> {
    let first = Client::connect_with(&options.url, attempt_options(&options.client)).await;
    let error = match first {
        Ok(connected) => return Ok(Startup { connection: Ok(connected), started_server: false }),
        Err(error) => error,
    };
    let addr = ServerAddr::from_url(&options.url).map_err(anyhow::Error::msg)?;
    if options.no_spawn || !addr.is_loopback() || someone_listens(&addr).await {
        return Ok(Startup { connection: Err(error), started_server: false });
    }
    let connected = start_local(options, &addr).await?;
    Ok(Startup { connection: Ok(connected), started_server: true })
}

/// Starts the local server again after the one this `baton` started went away (kill -9, out of
/// memory): the same batond, data dir, token and address as at startup. The caller decides
/// that the server was ours. Gives up with the reason when starting is not allowed, something
/// else holds the port, or the server does not answer.
pub async fn restart_server(options: &LaunchOptions) -> Result<()> {
    let addr = ServerAddr::from_url(&options.url).map_err(anyhow::Error::msg)?;
    if !options.may_start_server() {
        bail!("baton does not start servers at {}", options.url);
    }
    if someone_listens(&addr).await {
        bail!("something else holds {} but does not answer as batond", addr.listen_arg());
    }
    let (client, _notifications) = start_local(options, &addr).await?;
    // This connection only proves the server answers; the event loop's reconnect makes the
    // one it uses, with its subscriptions.
    client.close();
    Ok(())
}

/// Starts `batond` at `addr` and waits until it answers.
async fn start_local(options: &LaunchOptions, addr: &ServerAddr) -> Result<(Client, Notifications)> {
    let batond = find_batond(options.batond.as_deref())?;
    tracing::info!(batond = %batond.display(), listen = %addr.listen_arg(), "starting a local server");
    let exited = spawn_detached(&batond, addr, options)?;
    wait_until_answers(options, &batond, exited).await
}

fn attempt_options(options: &ClientOptions) -> ClientOptions {
    ClientOptions { connect_timeout: ATTEMPT_TIMEOUT, ..options.clone() }
}

/// Whether a TCP connection succeeds: then a process holds the port and starting a server
/// there would only fail to bind.
async fn someone_listens(addr: &ServerAddr) -> bool {
    let target = (addr.host.as_str(), addr.port);
    matches!(tokio::time::timeout(ATTEMPT_TIMEOUT, tokio::net::TcpStream::connect(target)).await, Ok(Ok(_)))
}

/// `--batond`, else `batond` next to this executable, else on PATH.
fn find_batond(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        if path.is_file() {
            return Ok(path.to_path_buf());
        }
        bail!("--batond {} is not a file", path.display());
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("batond")))
        .filter(|path| path.is_file());
    if let Some(path) = sibling {
        return Ok(path);
    }
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join("batond")).find(|path| path.is_file()));
    on_path.context(
        "no server answered and batond was not found next to baton or on PATH \
         (give its path with --batond, or start it yourself)",
    )
}

/// Starts `batond` in a new session and returns a channel that reports its exit status.
fn spawn_detached(batond: &Path, addr: &ServerAddr, options: &LaunchOptions) -> Result<mpsc::Receiver<ExitStatus>> {
    let data_dir = &options.data_dir;
    std::fs::create_dir_all(data_dir).with_context(|| format!("could not create {}", data_dir.display()))?;
    let stderr_path = data_dir.join(STDERR_FILE);
    let stderr = File::create(&stderr_path).with_context(|| format!("could not create {}", stderr_path.display()))?;
    let mut command = Command::new(batond);
    command.arg("--listen").arg(addr.listen_arg()).arg("--data-dir").arg(data_dir);
    if let Some(token) = &options.client.token {
        command.env("BATON_TOKEN", token);
    }
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent, as required
    // between fork and exec. A new session has no controlling terminal, so the hangup sent when
    // the terminal or SSH connection goes away does not reach the server or its agents.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().with_context(|| format!("could not start {}", batond.display()))?;
    let (tx, rx) = mpsc::channel();
    // Reaps the server if it exits while we run (no zombie), and tells the startup wait.
    // Dropping a Child neither kills nor waits, so the server outlives us either way.
    std::thread::spawn(move || {
        if let Ok(status) = child.wait() {
            tracing::info!("batond exited: {status}");
            let _ = tx.send(status);
        }
    });
    Ok(rx)
}

async fn wait_until_answers(
    options: &LaunchOptions,
    batond: &Path,
    exited: mpsc::Receiver<ExitStatus>,
) -> Result<(Client, Notifications)> {
    let deadline = Instant::now() + STARTUP_BOUND;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    let mut last_error = String::new();
    while Instant::now() < deadline {
        if let Ok(status) = exited.try_recv() {
            let stderr_path = options.data_dir.join(STDERR_FILE);
            let said = match stderr_tail(&stderr_path) {
                Some(tail) => format!(": {tail}"),
                None => String::new(),
            };
            bail!(
                "{} exited ({status}) before answering on {}{said}\n(its output: {}; its log: {})",
                batond.display(),
                options.url,
                stderr_path.display(),
                options.data_dir.join("logs").display()
            );
        }
        match Client::connect_with(&options.url, attempt_options(&options.client)).await {
            Ok(connected) => return Ok(connected),
            Err(error) => last_error = error.to_string(),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(backoff.next_delay().min(left)).await;
    }
    bail!(
        "started {} but it did not answer on {} within {}s (last error: {last_error})",
        batond.display(),
        options.url,
        STARTUP_BOUND.as_secs()
    )
}

/// What a server that would not start said last: from its last ERROR line to the end (an error
/// chain may span lines, a TOML parse error does), else its last line; at most a few lines.
/// Only the end of the file is read: a server that ran for days may have written a lot.
fn stderr_tail(path: &Path) -> Option<String> {
    const READ_AT_MOST: u64 = 16 * 1024;
    let mut file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(READ_AT_MOST))).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).collect();
    let start = lines.iter().rposition(|line| line.contains(" ERROR ")).unwrap_or(lines.len().saturating_sub(1));
    let mut quoted: Vec<String> = lines.get(start..)?.iter().take(STDERR_QUOTE_LINES).map(|l| l.to_string()).collect();
    let first = quoted.first_mut()?;
    *first = without_log_prefix(first);
    Some(quoted.join("\n"))
}

/// `2025-06-02T14:03:11.512Z ERROR batond: cannot listen…` → `cannot listen…`: the time, level
/// and target of a tracing line say nothing the user needs.
fn without_log_prefix(line: &str) -> String {
    let Some((_, message)) = line.split_once(" ERROR ") else {
        return line.trim().to_string();
    };
    let message = message.trim();
    match message.split_once(": ") {
        Some((target, rest))
            if !target.is_empty() && target.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ':') =>
        {
            rest.to_string()
        }
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quote_starts_at_the_last_error_and_drops_the_log_prefix() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(STDERR_FILE);
        let lines = "2026-01-01T00:00:00Z  INFO batond: starting\n\
                     2026-01-01T00:00:00Z ERROR batond: old failure\n\
                     2026-01-01T00:00:01Z ERROR batond: invalid agents.toml: TOML parse error at line 1\n  |\n1 | [[agent\n";
        std::fs::write(&path, lines).expect("write");
        assert_eq!(
            stderr_tail(&path).as_deref(),
            Some("invalid agents.toml: TOML parse error at line 1\n  |\n1 | [[agent")
        );
        std::fs::write(&path, "thread 'main' panicked at src/main.rs:1:1\n").expect("write");
        assert_eq!(stderr_tail(&path).as_deref(), Some("thread 'main' panicked at src/main.rs:1:1"));
        std::fs::write(&path, "").expect("write");
        assert_eq!(stderr_tail(&path), None);
    }
}
