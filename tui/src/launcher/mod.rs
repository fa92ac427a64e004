//! Connecting at startup, and starting a local server when none answers; starting it again
//! when it crashed later (see [`restart_server`]). A server is started again only when it served
//! our data dir and did not shut down cleanly, which `DATA_DIR/batond.url` tells (see
//! `fate.rs`): a server someone else runs may have another data dir, token or binary, and one
//! stopped on purpose should stay stopped.
//!
//! The server is started detached (its own session, no terminal) so that it and its agents keep
//! running after `baton` exits or the SSH connection that ran it drops. Its stderr goes to
//! `DATA_DIR/batond.stderr` (see `stderr.rs`), so that a server that will not start can say why.
//! Two `baton`s starting a server at once is expected: the one whose batond loses the data dir
//! or the port connects to the other's.

mod fate;
mod stderr;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use baton_protocol::{Client, ClientError, ClientOptions, Notifications};

pub use fate::URL_FILE;
pub use stderr::STDERR_FILE;

use crate::backoff::Backoff;
use crate::command::ServerRestart;
use crate::connect_error::classify;
use crate::server_url::{ws_path_suggestion, ServerAddr};
use fate::{data_dir_in_use, fate, Fate};
use stderr::{someone_else_serves, LaunchStderr};

/// How long a server we started may take to answer.
pub const STARTUP_BOUND: Duration = Duration::from_secs(10);
/// How long a server we started may take to answer once it said it is upgrading its database
/// (a large journal takes seconds to rewrite, once).
const UPGRADE_BOUND: Duration = Duration::from_secs(600);
/// How long a server that closed its port may take to finish shutting down (stopping agents)
/// before we decide whether it crashed.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(15);
/// Connect timeout for one startup attempt: a local server answers fast or not at all.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

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
    /// How long a server we start may take to answer ([`STARTUP_BOUND`]), unless it says it is
    /// upgrading its database.
    pub startup_bound: Duration,
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
    /// The server answering is one this `baton` started (for the log: whether a lost server is
    /// started again is decided by its data dir, see [`restart_server`]).
    pub started_server: bool,
}

/// A server started by [`start_local`] answers.
struct Started {
    connection: (Client, Notifications),
    /// Our batond serves; `false`: it found another batond in its place (another `baton`
    /// started one at the same time), which answered.
    by_us: bool,
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
    let started = start_local(options, &addr).await?;
    Ok(Startup { connection: Ok(started.connection), started_server: started.by_us })
}

/// Called when the connection to the local server was lost and it does not answer: starts it
/// again if it crashed (kill -9, out of memory) while serving our data dir, with the same
/// batond, data dir, token and address as at startup. A server shut down cleanly removed its
/// `batond.url` and stays stopped; one whose data dir is not ours is not ours to start.
/// Gives up with the reason when starting is not allowed, something else holds the port, or
/// the server does not answer.
pub async fn restart_server(options: &LaunchOptions) -> Result<ServerRestart> {
    let addr = ServerAddr::from_url(&options.url).map_err(anyhow::Error::msg)?;
    if !options.may_start_server() {
        bail!("baton does not start servers at {}", options.url);
    }
    let deadline = Instant::now() + SHUTDOWN_BOUND;
    loop {
        if let Ok((client, _)) = Client::connect_with(&options.url, attempt_options(&options.client)).await {
            // Another baton was quicker; this connection only proved it.
            client.close();
            return Ok(ServerRestart::StartedByAnother);
        }
        match fate(&options.data_dir, &options.url) {
            Fate::Stopped => return Ok(ServerRestart::Stopped),
            Fate::Elsewhere(url) => return Ok(ServerRestart::NotOurs(url)),
            // A batond still holds the data dir: it is shutting down (and will remove
            // batond.url when done) or being started by someone else. Wait for either.
            Fate::Ours if data_dir_in_use(&options.data_dir) => {}
            Fate::Ours => break,
        }
        if Instant::now() >= deadline {
            bail!(
                "a batond still runs on {} but does not answer on {} after {}s",
                options.data_dir.display(),
                options.url,
                SHUTDOWN_BOUND.as_secs()
            );
        }
        // Nothing signals a process letting go of its lock; the poll is bounded by the deadline.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if someone_listens(&addr).await {
        bail!("something else holds {} but does not answer as batond", addr.listen_arg());
    }
    let started = start_local(options, &addr).await?;
    // This connection only proves the server answers; the event loop's reconnect makes the
    // one it uses, with its subscriptions.
    started.connection.0.close();
    Ok(if started.by_us { ServerRestart::Started } else { ServerRestart::StartedByAnother })
}

/// Stops the local server with `batond stop --agents` (its hosted, Docker and ssh agents too;
/// its report names what it could not reach): only the one
/// this baton's data dir runs, at the URL baton talks to. Returns what batond stop said.
pub async fn stop_local_server(options: &LaunchOptions) -> Result<String> {
    match fate(&options.data_dir, &options.url) {
        Fate::Ours => {}
        _ => bail!(
            "the server at {} does not run on this baton's data dir ({}): stop it where it runs (batond stop)",
            options.url,
            options.data_dir.display()
        ),
    }
    let batond = find_batond(options.batond.as_deref())?;
    let output = tokio::process::Command::new(&batond)
        .arg("stop")
        .arg("--agents")
        .arg("--data-dir")
        .arg(&options.data_dir)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("could not run {} stop", batond.display()))?;
    let said = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if !output.status.success() {
        bail!("batond stop failed: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(said)
}

/// Starts `batond` at `addr` and waits until it, or the batond it found in its place, answers.
async fn start_local(options: &LaunchOptions, addr: &ServerAddr) -> Result<Started> {
    let batond = find_batond(options.batond.as_deref())?;
    tracing::info!(batond = %batond.display(), listen = %addr.listen_arg(), "starting a local server");
    let data_dir = &options.data_dir;
    std::fs::create_dir_all(data_dir).with_context(|| format!("could not create {}", data_dir.display()))?;
    let (stderr, stderr_file) = LaunchStderr::create(data_dir)?;
    let exited = spawn_detached(&batond, addr, options, stderr_file)?;
    wait_until_answers(options, &batond, exited, stderr).await
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

/// Starts `batond` in a new session, its stderr to `stderr`, and returns a channel that
/// reports its exit status.
fn spawn_detached(
    batond: &Path,
    addr: &ServerAddr,
    options: &LaunchOptions,
    stderr: std::fs::File,
) -> Result<mpsc::Receiver<ExitStatus>> {
    let mut command = Command::new(batond);
    command.arg("--listen").arg(addr.listen_arg()).arg("--data-dir").arg(&options.data_dir);
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
    stderr: LaunchStderr,
) -> Result<Started> {
    let mut deadline = Instant::now() + options.startup_bound;
    let mut upgrading = false;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    let mut last_error = String::new();
    while Instant::now() < deadline {
        if !upgrading && stderr.says_upgrading() {
            // Working, not stuck: said on the terminal (the screen is not taken over yet).
            upgrading = true;
            deadline = Instant::now() + UPGRADE_BOUND;
            eprintln!("baton: batond is upgrading its database before it answers; waiting (Ctrl-C stops waiting, not the upgrade)");
        }
        if let Ok(status) = exited.try_recv() {
            let said = stderr.quote();
            if said.as_deref().is_some_and(someone_else_serves) {
                // Another batond took the data dir or the port first (another baton starting
                // one at the same time): connect to it.
                tracing::info!("batond found another in its place: {}", said.as_deref().unwrap_or_default());
                stderr.discard();
                return connect_to_other(options, deadline, said.unwrap_or_default()).await;
            }
            let output = stderr.final_path().display().to_string();
            stderr.keep();
            let said = said.map(|said| format!(": {said}")).unwrap_or_default();
            bail!(
                "{} exited ({status}) before answering on {}{said}\n(its output: {output}; its log: {})",
                batond.display(),
                options.url,
                options.data_dir.join("logs").display()
            );
        }
        match Client::connect_with(&options.url, attempt_options(&options.client)).await {
            Ok(connection) => {
                stderr.keep();
                return Ok(Started { connection, by_us: true });
            }
            Err(error) => last_error = explain(options, &error),
        }
        if last_error.starts_with("not a Baton server") && ws_path_suggestion(&options.url).is_some() {
            // Our batond answers, but not on this path: waiting will not change that.
            stderr.keep();
            bail!("started {} at {}, but {last_error}", batond.display(), addr_of(options));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(backoff.next_delay().min(left)).await;
    }
    stderr.keep();
    bail!(
        "started {} but it did not answer on {} within {}s (last error: {last_error})",
        batond.display(),
        options.url,
        if upgrading { UPGRADE_BOUND } else { options.startup_bound }.as_secs()
    )
}

/// Connects, with backoff until `deadline`, to the server another batond runs in ours' place.
async fn connect_to_other(options: &LaunchOptions, deadline: Instant, said: String) -> Result<Started> {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        let last_error = match Client::connect_with(&options.url, attempt_options(&options.client)).await {
            Ok(connection) => return Ok(Started { connection, by_us: false }),
            Err(error) => explain(options, &error),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("the batond started found another in its place ({said}), which did not answer: {last_error}");
        }
        tokio::time::sleep(backoff.next_delay().min(left)).await;
    }
}

/// `host:port` of the server URL, for messages.
fn addr_of(options: &LaunchOptions) -> String {
    ServerAddr::from_url(&options.url).map_or_else(|_| options.url.clone(), |addr| addr.listen_arg())
}

/// A failed attempt in words, as the status bar would say it.
fn explain(options: &LaunchOptions, error: &ClientError) -> String {
    let token_given = options.client.token.is_some() || options.client.token_file.as_deref().is_some_and(Path::exists);
    classify(error, &options.url, token_given).text().to_string()
}
