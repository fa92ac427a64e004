//! Connecting at startup, and starting a local server when none answers; starting it again
//! when it goes away later (see [`restart_server`]).
//!
//! The server is started detached (its own session, no terminal, stdio to /dev/null) so that it
//! and its agents keep running after `baton` exits or the SSH connection that ran it drops.

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

#[derive(Clone)]
pub struct LaunchOptions {
    pub url: String,
    pub client: ClientOptions,
    /// Passed on to a server we start.
    pub data_dir: Option<PathBuf>,
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

/// Connects to the server, starting a local one if nobody listens at a loopback address.
/// `Ok(Err(_))` is a server we may not start (remote, `--no-spawn`, or something else holds
/// the port): the TUI opens anyway and keeps retrying. `Err` is a server we started that never
/// answered.
pub async fn connect_or_launch(options: &LaunchOptions) -> Result<Result<(Client, Notifications), ClientError>> {
    let first = Client::connect_with(&options.url, attempt_options(&options.client)).await;
    let error = match first {
        Ok(connected) => return Ok(Ok(connected)),
        Err(error) => error,
    };
    let addr = ServerAddr::from_url(&options.url).map_err(anyhow::Error::msg)?;
    if options.no_spawn || !addr.is_loopback() || someone_listens(&addr).await {
        return Ok(Err(error));
    }
    start_local(options, &addr).await.map(Ok)
}

/// Starts a local server again after the one we were connected to went away (kill -9, out of
/// memory): the same batond, data dir and address as at startup. Gives up with the reason when
/// starting is not allowed, something else holds the port, or the server does not answer.
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
    let exited = spawn_detached(&batond, addr, options.data_dir.as_deref())?;
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
fn spawn_detached(batond: &Path, addr: &ServerAddr, data_dir: Option<&Path>) -> Result<mpsc::Receiver<ExitStatus>> {
    let mut command = Command::new(batond);
    command.arg("--listen").arg(addr.listen_arg());
    if let Some(dir) = data_dir {
        command.arg("--data-dir").arg(dir);
    }
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
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
            bail!(
                "{} exited ({status}) before answering on {}; see its log in its data directory",
                batond.display(),
                options.url
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
