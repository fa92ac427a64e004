//! The runtime interface ([`Runtime`]: where and how an agent runs, behind one seam), and the
//! `standalone` runtime ([`Standalone`]): each agent is a child process in its own session (and so its own
//! process group), marked by an environment variable its descendants inherit.
//!
//! The agent's whole tree is killed on stop, on server shutdown and when the agent exits: every
//! process of its session or group, and every process carrying its marker (a descendant that
//! started a session of its own keeps it). The child also gets SIGKILL from the kernel if the
//! server dies (PR_SET_PDEATHSIG), and its stdin reaches EOF, which ACP agents take as the end;
//! what is still alive from a crashed server (a wrapper's children) is found at the next startup
//! by the pid, start time and execution id recorded in `executors_running`, also when the agent
//! itself is gone.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::os::unix::process::CommandExt;
use std::process::Command;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{oneshot, watch};

use futures_util::future::BoxFuture;

use super::reaper;
use super::transport::{read_line_bounded, AgentStdin, AgentStdout, Transport};

/// How many stderr lines are kept for error messages.
const STDERR_TAIL_LINES: usize = 40;
/// Longest stderr line read; a longer one is dropped (an agent cannot grow our memory).
const STDERR_LINE_BYTES: usize = 8 * 1024;
/// The stderr reader's buffer: stderr is a trickle of short lines, and a thousand idle agents
/// would each keep tokio's default 8 KiB.
const STDERR_BUFFER_BYTES: usize = 1024;
/// How long an agent's stderr stays quiet before its log file is closed (reopened at the next
/// line): a thousand idle agents do not each hold a descriptor for their log.
const LOG_IDLE: Duration = Duration::from_secs(1);

/// Where and how agents run. The orchestrator launches every agent through this one interface
/// (a launch spec in, a handle with a line transport out) and recovers through it after a
/// restart; the ACP connection only ever sees the [`Transport`].
pub trait Runtime: Send + Sync {
    /// Its name in agents.toml (`runtime = "…"`).
    fn name(&self) -> &'static str;

    /// Starts an agent, named `agent_id` (unique among the runtime's agents), as `spec` says.
    /// `log` is where its whole stderr is kept (an [`AgentLog`]), by every runtime.
    fn spawn<'a>(
        &'a self,
        agent_id: &'a str,
        spec: &'a LaunchSpec,
        log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, SpawnError>>;

    /// The agents it still runs (or keeps unacknowledged output of), for recovery after a
    /// restart. Empty for a runtime whose agents die with the server.
    fn list(&self) -> BoxFuture<'_, Result<Vec<RunningAgent>, RuntimeError>>;

    /// Connects again to an agent [`Runtime::list`] named; its output resumes after the last
    /// acknowledged line, and its stderr goes on into `log`.
    fn reattach<'a>(&'a self, agent_id: &'a str, log: Option<PathBuf>)
        -> BoxFuture<'a, Result<Launched, RuntimeError>>;

    /// Stops an agent nobody will reattach to, and forgets what is kept of it.
    fn release<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), RuntimeError>>;

    /// Told when a listing found none of this data dir's agents left there (all released or
    /// none running): a runtime that remembers where it started agents may forget this place.
    fn no_agents_left(&self) {}

    /// Where the agent finds a local working directory (another machine may mount it
    /// elsewhere): the path it is told over ACP, and under which its file requests name files.
    fn agent_path(&self, local: &Path) -> PathBuf {
        local.to_path_buf()
    }

    /// The local command line (program and arguments) that runs `batond GUARD_ARGS` where the
    /// agent `agent_id` runs, with stdin carried there (see `batond agent-guard --lifeline`):
    /// how a command the agent asks for (an ACP terminal) runs beside it. None: the agent runs
    /// on this machine, and such a command is started here as it is.
    fn guarded_command(
        &self,
        _agent_id: &str,
        _guard_args: &[String],
    ) -> Option<Result<(String, Vec<String>), String>> {
        None
    }
}

/// An agent a runtime started (or reattached to).
pub struct Launched {
    pub pid: u32,
    pub start_time: Option<u64>,
    /// Its exit, and stop/kill.
    pub handle: ProcessHandle,
    /// Its lines, both ways; acknowledgements too when the transport is durable.
    pub transport: Transport,
    /// What the store records to find it again.
    pub placement: Placement,
}

/// Where a launched agent runs, as recorded for recovery.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// A child of this server: it dies with it.
    Child,
    /// Kept by an agent host, which outlives the server.
    Host { url: String, port: u16, pid: u32, agent_id: String },
}

/// An agent a runtime still has.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningAgent {
    pub agent_id: String,
    pub pid: u32,
    pub running: bool,
}

/// Why an agent could not be started.
#[derive(Debug, Clone, PartialEq)]
pub enum SpawnError {
    /// The agent itself cannot be started (its command is missing...): the session fails.
    Refused(String),
    /// The runtime is out of memory or processes for now: try again later.
    Transient(String),
    /// batond has no file descriptor left for the agent's pipes: it lasts until agents stop or
    /// the limit is raised (the text says how), so it is not said to be temporary.
    NoDescriptors(String),
    /// The runtime could not be reached (its host, its daemon...) or failed on its side: not
    /// the session's fault.
    Unavailable(String),
    /// The runtime's settings do not work (an image missing on the daemon, a mount whose source
    /// does not exist, a network that is gone): the session waits, resumable, until they are
    /// fixed.
    Config(String),
}

/// Why a runtime could not list, reattach or release an agent, as the orchestrator decides on
/// it: an agent whose host cannot be reached now is still there (its session waits, and it is
/// not released); one that is gone resumes; a configuration error waits for the user.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeError {
    /// The host or daemon the agents run on cannot be reached now; they may still run there.
    Unreachable(String),
    /// The runtime's settings do not work (agents.toml).
    Config(String),
    /// The agent (its container, its host) is gone for good.
    Gone(String),
    /// Anything else.
    Other(String),
}

impl RuntimeError {
    /// What happened, for a message.
    pub fn message(&self) -> &str {
        match self {
            RuntimeError::Unreachable(m) | RuntimeError::Config(m) | RuntimeError::Gone(m) | RuntimeError::Other(m) => {
                m
            }
        }
    }

    /// The same kind of error, its message rewritten.
    pub fn map(self, f: impl FnOnce(String) -> String) -> RuntimeError {
        match self {
            RuntimeError::Unreachable(m) => RuntimeError::Unreachable(f(m)),
            RuntimeError::Config(m) => RuntimeError::Config(f(m)),
            RuntimeError::Gone(m) => RuntimeError::Gone(f(m)),
            RuntimeError::Other(m) => RuntimeError::Other(f(m)),
        }
    }
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// The `standalone` runtime: agents are children of this server (see the module's text), each
/// started through a guard (`batond agent-guard`, see [`super::guard`]) when one is given, so
/// that nothing of its tree outlives this server.
#[derive(Debug, Default, Clone)]
pub struct Standalone {
    guard: Option<PathBuf>,
}

impl Standalone {
    /// Agents started through the guard of the batond binary `batond`.
    pub fn guarded(batond: &Path) -> Standalone {
        Standalone { guard: Some(batond.to_path_buf()) }
    }
}

impl Runtime for Standalone {
    fn name(&self) -> &'static str {
        "standalone"
    }

    fn spawn<'a>(
        &'a self,
        _agent_id: &'a str,
        spec: &'a LaunchSpec,
        log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, SpawnError>> {
        Box::pin(async move {
            let mut process = spawn_guarded(spec, log, self.guard.as_deref()).map_err(|e| {
                if e.raw_os_error() == Some(libc::EMFILE) {
                    SpawnError::NoDescriptors(crate::limits::out_of_descriptors())
                } else if is_transient_spawn_error(&e) {
                    SpawnError::Transient(e.to_string())
                } else {
                    SpawnError::Refused(e.to_string())
                }
            })?;
            let (Some(stdout), Some(stdin)) = (process.stdout.take(), process.stdin.take()) else {
                return Err(SpawnError::Refused("the agent process has no pipes".into()));
            };
            Ok(Launched {
                pid: process.pid,
                start_time: process.start_time,
                handle: process.handle,
                transport: Transport::Pipes { stdout, stdin },
                placement: Placement::Child,
            })
        })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunningAgent>, RuntimeError>> {
        // Children die with the server; what a crash left is killed at startup (reconcile).
        Box::pin(async { Ok(Vec::new()) })
    }

    fn reattach<'a>(
        &'a self,
        agent_id: &'a str,
        _log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, RuntimeError>> {
        Box::pin(async move {
            Err(RuntimeError::Gone(format!("{agent_id}: a standalone agent does not outlive its server")))
        })
    }

    fn release<'a>(&'a self, _agent_id: &'a str) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async { Ok(()) })
    }
}

#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
}

/// How an agent process ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// The last stderr lines, preceded by earlier lines that look like the cause.
    pub stderr_tail: String,
    /// Where the agent's whole stderr is kept.
    pub log_file: Option<PathBuf>,
    /// Why it ended, when the runtime knows better than an exit code: what became of the host
    /// or container it ran in ("was lost: its container … was killed for memory"). Read after
    /// "The agent ".
    pub cause: Option<String>,
}

/// `text` without terminal escape sequences (colours, cursor moves, titles) or other control
/// characters: agents' loggers colour their stderr (codex's tracing writes
/// `\x1b[2m…\x1b[0m\x1b[31mERROR`), which has no place in an error message or a log file.
/// Tabs and line ends are kept.
pub fn plain_text(text: &str) -> String {
    if !text.bytes().any(|b| b.is_ascii_control() && !matches!(b, b'\t' | b'\n' | b'\r')) {
        return text.to_string();
    }
    anstream::adapter::strip_str(text).to_string()
}

/// Whether a stderr line looks like it carries the cause of a failure (not a stack frame).
fn is_cause_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    let frame = trimmed.starts_with("at ")
        || trimmed.split_once(':').is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    let lower = trimmed.to_lowercase();
    !frame
        && ["error", "panic", "fatal", "exception", "failed", "does not exist", "not found", "denied", "unable"]
            .iter()
            .any(|word| lower.contains(word))
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            _ if self.cause.is_some() => write!(f, "{}", self.cause.as_deref().unwrap_or_default())?,
            (Some(code), _) => write!(f, "exited with code {code}")?,
            (None, Some(signal)) => write!(f, "was killed by signal {signal}")?,
            (None, None) => write!(f, "exited")?,
        }
        // A host of an earlier version relays its tail as the agent wrote it.
        let tail = plain_text(&self.stderr_tail);
        let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
        // The lines that say why come first (a cause is often above a backtrace), then the end.
        let causes: Vec<&str> = lines.iter().copied().filter(|l| is_cause_line(l)).take(3).collect();
        let last: Vec<&str> = lines.iter().rev().copied().filter(|l| !causes.contains(l)).take(5).collect();
        let shown: Vec<&str> = causes.iter().copied().chain(last.into_iter().rev()).collect();
        if !shown.is_empty() {
            write!(f, "; stderr: {}", shown.join(" | "))?;
        }
        if let Some(log) = &self.log_file {
            write!(f, "; its whole stderr is in {}", log.display())?;
        }
        Ok(())
    }
}

/// A running agent process: its pipes (taken once by the ACP connection) and its fate.
pub struct AgentProcess {
    pub pid: u32,
    pub start_time: Option<u64>,
    pub stdin: Option<AgentStdin>,
    pub stdout: Option<AgentStdout>,
    pub handle: ProcessHandle,
}

/// Watches and stops one agent process; cheap to clone.
#[derive(Clone)]
pub struct ProcessHandle {
    pid: u32,
    exit: watch::Receiver<Option<ExitInfo>>,
    kill: Arc<Mutex<Option<oneshot::Sender<()>>>>,
    /// Why batond killed the process, when it did so for a reason of its own
    /// ([`Self::kill_because`]): the last line of its exit's `stderr_tail`.
    reason: Arc<Mutex<Option<String>>>,
}

impl ProcessHandle {
    /// A handle for a process run elsewhere (the agent host): `exit` reports its end, `kill`
    /// asks for it.
    pub fn from_parts(pid: u32, exit: watch::Receiver<Option<ExitInfo>>, kill: oneshot::Sender<()>) -> ProcessHandle {
        ProcessHandle { pid, exit, kill: Arc::new(Mutex::new(Some(kill))), reason: Arc::default() }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn has_exited(&self) -> bool {
        self.exit.borrow().is_some()
    }

    pub fn exit_info(&self) -> Option<ExitInfo> {
        self.exit.borrow().clone().map(|info| self.with_reason(info))
    }

    /// Waits for the process to end.
    pub async fn wait(&self) -> ExitInfo {
        let mut exit = self.exit.clone();
        loop {
            if let Some(info) = exit.borrow_and_update().clone() {
                return self.with_reason(info);
            }
            if exit.changed().await.is_err() {
                return self.with_reason(exit.borrow().clone().unwrap_or_default());
            }
        }
    }

    /// `info` with the reason batond killed the process for, if any, as its last stderr line
    /// (what the session's message about the exit shows).
    fn with_reason(&self, mut info: ExitInfo) -> ExitInfo {
        if let Some(reason) = self.reason.lock().ok().and_then(|r| r.clone()) {
            if !info.stderr_tail.is_empty() {
                info.stderr_tail.push('\n');
            }
            info.stderr_tail.push_str(&reason);
        }
        info
    }

    /// [`Self::kill`], saying why: the reason ends the exit's `stderr_tail`.
    pub async fn kill_because(&self, reason: String) -> ExitInfo {
        if let Ok(mut slot) = self.reason.lock() {
            slot.get_or_insert(reason);
        }
        self.kill().await
    }

    /// Waits at most `bound` for the exit.
    pub async fn wait_for(&self, bound: Duration) -> Option<ExitInfo> {
        tokio::time::timeout(bound, self.wait()).await.ok()
    }

    /// Terminates the whole process group (SIGTERM, then SIGKILL after a grace period) and
    /// waits for the exit.
    pub async fn kill(&self) -> ExitInfo {
        let sender = self.kill.lock().ok().and_then(|mut k| k.take());
        if let Some(sender) = sender {
            let _ = sender.send(());
        }
        self.wait().await
    }
}

/// Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat), which tells
/// a process apart from a later one that reuses its pid.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after it follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

pub fn signal_group(pgid: u32, signal: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
        unsafe {
            libc::kill(-(pgid as i32), signal);
        }
    }
}

/// The environment variable that marks every process of one agent's tree with the id of its
/// execution (descendants inherit it, whatever session or group they move to).
pub const TREE_MARKER_ENV: &str = "BATON_AGENT_EXECUTION";

/// What /proc says about one process.
struct ProcStat {
    ppid: u32,
    pgrp: u32,
    session: u32,
    start_time: u64,
}

fn proc_stat(pid: u32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after it follow the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some(ProcStat {
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The parent of a process, as /proc says.
pub(crate) fn proc_ppid(pid: u32) -> Option<u32> {
    proc_stat(pid).map(|stat| stat.ppid)
}

fn carries_marker(pid: u32, needle: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|environ| environ.split(|b| *b == 0).any(|entry| entry == needle))
        .unwrap_or(false)
}

/// The processes of one agent's tree: those in the session or process group the agent led
/// (started no earlier than it: the ids may have been reused since), and those carrying its
/// marker. `leader_start` None: nothing is known about the leader's start, so its session and
/// group count only while the leader itself is alive.
fn tree_members(leader: u32, leader_start: Option<u64>, marker: Option<&str>) -> Vec<u32> {
    let own = std::process::id();
    let needle = marker.map(|m| format!("{TREE_MARKER_ENV}={m}").into_bytes());
    // A live process with the leader's pid but another start time is not our agent: its
    // session and group are somebody else's.
    let leader_now = proc_stat(leader).map(|s| s.start_time);
    let ids_are_ours = match (leader_start, leader_now) {
        (Some(recorded), Some(now)) => recorded == now,
        (Some(_), None) => true,
        (None, now) => now.is_some(),
    };
    let mut members = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return members;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == own || pid <= 1 {
            continue;
        }
        let Some(stat) = proc_stat(pid) else { continue };
        // A descendant started after the agent; older processes are not read further.
        let young_enough = leader_start.is_none_or(|start| stat.start_time >= start);
        let in_leaders_ids = ids_are_ours && young_enough && (stat.session == leader || stat.pgrp == leader);
        if in_leaders_ids || (young_enough && needle.as_deref().is_some_and(|n| carries_marker(pid, n))) {
            members.push(pid);
        }
    }
    members
}

/// Kills every process of an agent's tree (see [`tree_members`]); returns how many were
/// signalled. Repeats while it finds any, so that a process forked meanwhile goes too.
pub fn kill_tree(leader: u32, leader_start: Option<u64>, marker: Option<&str>) -> usize {
    let mut killed = 0;
    for _ in 0..10 {
        let members = tree_members(leader, leader_start, marker);
        if members.is_empty() {
            break;
        }
        for pid in &members {
            // SAFETY: kill(2) on a pid; no memory is involved.
            unsafe {
                libc::kill(*pid as i32, libc::SIGKILL);
            }
        }
        killed += members.len();
        // Killed processes vanish (or turn zombie) only after the signal is delivered.
        std::thread::sleep(Duration::from_millis(20));
        let alive: Vec<u32> = tree_members(leader, leader_start, marker)
            .into_iter()
            .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !is_zombie(&s)))
            .collect();
        if alive.is_empty() {
            break;
        }
    }
    killed
}

fn is_zombie(stat: &str) -> bool {
    stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

/// Kills whatever is left of an agent of a previous run: its tree, found by the pid and start
/// time of the agent and its execution id, also when the agent itself is gone.
pub fn kill_leftover(pid: u32, start_time: Option<u64>, execution_id: Option<&str>) -> usize {
    kill_tree(pid, start_time, execution_id)
}

/// Starts the agent in `spec.cwd`, in a new session (and process group), with piped stdio.
/// `spec.env` may carry [`TREE_MARKER_ENV`]; the agent's tree is then found by it too.
pub fn spawn(spec: &LaunchSpec) -> std::io::Result<AgentProcess> {
    spawn_logged(spec, None)
}

/// What an agent wrote to stderr: the last lines, the last lines that look like a cause, and
/// the file that keeps all of it.
struct Stderr {
    tail: VecDeque<String>,
    causes: VecDeque<String>,
    log_file: Option<PathBuf>,
}

/// Most bytes an agent log file grows to before it is rotated: the file then becomes
/// `<name>.1` (replacing the previous one) and a new file is started, so a session's agents
/// never take more than twice this of the disk.
pub const STDERR_LOG_BYTES: u64 = 16 * 1024 * 1024;

/// A session's agent log (`DATA_DIR/agent-logs/<session>.log`): what its agents wrote to
/// stderr, launch after launch, whatever runtime ran them. Bounded by rotation (see
/// [`STDERR_LOG_BYTES`]). Writes are small appends to a local file; one that fails (a full disk)
/// ends the logging, never the agent.
pub struct AgentLog {
    path: PathBuf,
    /// None while it rests ([`Self::rest`]) or once writing failed (`failed`).
    file: Option<std::fs::File>,
    failed: bool,
    /// The file's length.
    bytes: u64,
    bound: u64,
}

impl AgentLog {
    /// Opens `path` for appending, headed by `header` (which launch the lines that follow
    /// belong to). None when the file cannot be opened.
    pub fn open(path: &Path, header: &str) -> Option<AgentLog> {
        AgentLog::open_bounded(path, header, STDERR_LOG_BYTES)
    }

    fn open_bounded(path: &Path, header: &str, bound: u64) -> Option<AgentLog> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).ok()?;
        }
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).ok()?;
        let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut log = AgentLog { path: path.to_path_buf(), file: Some(file), failed: false, bytes, bound };
        let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ");
        log.append(&format!("=== {now} {header} ==="));
        log.file.is_some().then_some(log)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The previous file, kept by the last rotation.
    pub fn previous(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".1");
        PathBuf::from(name)
    }

    /// Closes the file until the next line: an agent that writes nothing for a while holds
    /// no descriptor for its log.
    pub fn rest(&mut self) {
        self.file = None;
    }

    /// Appends one line (rotating first when it would pass the bound).
    pub fn append(&mut self, line: &str) {
        use std::io::Write;
        if self.failed {
            return;
        }
        let length = line.len() as u64 + 1;
        if self.bytes > 0 && self.bytes + length > self.bound {
            self.rotate();
        }
        if self.file.is_none() {
            match std::fs::OpenOptions::new().create(true).append(true).open(&self.path) {
                Ok(file) => {
                    // Whoever else appended meanwhile (another launch of the session) counts too.
                    self.bytes = file.metadata().map(|m| m.len()).unwrap_or(self.bytes);
                    self.file = Some(file);
                }
                Err(e) => return self.fail("cannot reopen", e),
            }
        }
        let Some(file) = self.file.as_mut() else { return };
        match writeln!(file, "{line}") {
            Ok(()) => self.bytes += length,
            Err(e) => self.fail("cannot write", e),
        }
    }

    fn fail(&mut self, what: &str, e: std::io::Error) {
        tracing::warn!(path = %self.path.display(), "{what} the agent log: {e}");
        self.file = None;
        self.failed = true;
    }

    fn rotate(&mut self) {
        self.file = None;
        let reopened = std::fs::rename(&self.path, AgentLog::previous(&self.path))
            .and_then(|()| std::fs::OpenOptions::new().create(true).append(true).open(&self.path));
        match reopened {
            Ok(file) => {
                self.file = Some(file);
                self.bytes = 0;
            }
            Err(e) => self.fail("cannot rotate", e),
        }
    }
}

/// Called with each stderr line of an agent (plain text, see [`plain_text`]): how the agent
/// host relays its agents' stderr to the server.
pub type StderrSink = Arc<dyn Fn(&str) + Send + Sync>;

/// [`spawn`], keeping the agent's whole stderr in `log` (appended, one launch after another).
/// A spawn failure that goes away by itself: the process, the machine or the user is out of
/// file descriptors, memory or processes for now. A missing binary or a refused permission
/// stays.
pub fn is_transient_spawn_error(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::EAGAIN))
}

pub fn spawn_logged(spec: &LaunchSpec, log: Option<PathBuf>) -> std::io::Result<AgentProcess> {
    spawn_guarded(spec, log, None)
}

/// [`spawn`], handing each stderr line to `sink` as it comes (the agent host's agents).
pub fn spawn_relaying(spec: &LaunchSpec, sink: StderrSink) -> std::io::Result<AgentProcess> {
    spawn_with(spec, None, None, Some(sink))
}

/// Whether `command` names a program that exec would find: with a `/`, relative to `cwd`;
/// else in the directories of `path`. The error is the one exec would give.
fn resolve_program(command: &str, path: Option<&std::ffi::OsStr>, cwd: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |candidate: &Path| {
        std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let candidate = cwd.join(command);
        return match std::fs::metadata(&candidate) {
            Err(e) => Err(e),
            Ok(_) if executable(&candidate) => Ok(()),
            Ok(_) => Err(std::io::Error::from_raw_os_error(libc::EACCES)),
        };
    }
    let found =
        path.is_some_and(|path| std::env::split_paths(path).any(|dir| executable(&cwd.join(dir).join(command))));
    if found {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(libc::ENOENT))
    }
}

/// [`spawn_logged`], through the guard `guard` (the batond binary, run as `batond agent-guard`)
/// when given: the guard leads the session, starts the agent in it and kills the agent's whole
/// tree when batond dies (see [`super::guard`]).
pub fn spawn_guarded(spec: &LaunchSpec, log: Option<PathBuf>, guard: Option<&Path>) -> std::io::Result<AgentProcess> {
    spawn_with(spec, log, guard, None)
}

fn spawn_with(
    spec: &LaunchSpec,
    log: Option<PathBuf>,
    guard: Option<&Path>,
    sink: Option<StderrSink>,
) -> std::io::Result<AgentProcess> {
    let mut command = match guard {
        Some(batond) => {
            // A missing agent is told at once, as without the guard, not as its guard's exit.
            let path = spec.env.get("PATH").map(std::ffi::OsString::from).or_else(|| std::env::var_os("PATH"));
            resolve_program(&spec.command, path.as_deref(), &spec.cwd)?;
            let mut command = Command::new(batond);
            command.arg("agent-guard").arg("--parent").arg(std::process::id().to_string()).arg("--");
            command.arg(&spec.command);
            command
        }
        None => Command::new(&spec.command),
    };
    let death_signal = if guard.is_some() { super::guard::PARENT_DEATH_SIGNAL } else { libc::SIGKILL };
    // Baton's own variables (BATON_TOKEN above all) are not the agent's business, nor of what it
    // runs; the agent config may still set any of them explicitly.
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(|name| name.starts_with("BATON_")) {
            command.env_remove(name);
        }
    }
    command
        .args(&spec.args)
        .envs(&spec.env)
        .current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::umask::for_user(&mut command);
    // SAFETY: setsid and prctl are async-signal-safe; they only change the new process.
    unsafe {
        command.pre_exec(move || {
            // A session of its own: descendants that start a process group of their own stay
            // in it, so the whole tree is found by the session id.
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, death_signal);
            Ok(())
        });
    }
    let marker = spec.env.get(TREE_MARKER_ENV).cloned();
    let mut child = command.spawn()?;
    let pid = child.id();
    let start_time = process_start_time(pid);
    // Three descriptors per agent, its three pipes: its end is waited for by the reaper (no
    // pidfd) and its log is open only while it writes (see `AgentLog::rest`).
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let exit = reaper::watch(child)?;
    let stdin = pipes.0.map(|pipe| AgentStdin::from_owned_fd(pipe.into())).transpose()?;
    let stdout = pipes.1.map(|pipe| AgentStdout::from_owned_fd(pipe.into())).transpose()?;
    let stderr = pipes.2.map(|pipe| AgentStdout::from_owned_fd(pipe.into())).transpose()?;
    let mut log_file =
        log.as_deref().and_then(|path| AgentLog::open(path, &format!("{} started, pid {pid}", spec.command)));
    let tail = Arc::new(Mutex::new(Stderr {
        tail: VecDeque::with_capacity(STDERR_TAIL_LINES),
        causes: VecDeque::new(),
        log_file: log.filter(|_| log_file.is_some()),
    }));
    let stderr_done = stderr.map(|stderr| {
        let tail = tail.clone();
        tokio::spawn(async move {
            // Read to the end whatever comes (bytes that are not UTF-8, endless lines): a reader
            // that stopped would close the pipe and kill the agent with SIGPIPE.
            let mut reader = BufReader::with_capacity(STDERR_BUFFER_BYTES, stderr);
            loop {
                if let Some(log) = log_file.as_mut() {
                    // Quiet for a while: the log's file is closed until the next line.
                    if reader.buffer().is_empty() && tokio::time::timeout(LOG_IDLE, reader.fill_buf()).await.is_err() {
                        log.rest();
                    }
                }
                let Ok(Some(line)) = read_line_bounded(&mut reader, STDERR_LINE_BYTES).await else { break };
                let line = match line {
                    Ok(bytes) => plain_text(String::from_utf8_lossy(&bytes).trim_end_matches('\r')),
                    Err(length) => format!("[a stderr line of {length} bytes was dropped]"),
                };
                tracing::debug!(target: "agent_stderr", pid, "{line}");
                if let Some(log) = log_file.as_mut() {
                    log.append(&line);
                }
                if let Some(sink) = &sink {
                    sink(&line);
                }
                if let Ok(mut stderr) = tail.lock() {
                    if is_cause_line(&line) {
                        if stderr.causes.len() == 5 {
                            stderr.causes.pop_front();
                        }
                        stderr.causes.push_back(line.clone());
                    }
                    if stderr.tail.len() == STDERR_TAIL_LINES {
                        stderr.tail.pop_front();
                    }
                    stderr.tail.push_back(line);
                }
            }
        })
    });
    let (exit_tx, exit_rx) = watch::channel(None);
    let (kill_tx, kill_rx) = oneshot::channel();
    let tree = Tree { leader: pid, start_time, marker };
    tokio::spawn(supervise(exit, tree, kill_rx, exit_tx, tail, stderr_done));
    Ok(AgentProcess { pid, start_time, stdin, stdout, handle: ProcessHandle::from_parts(pid, exit_rx, kill_tx) })
}

/// What identifies one agent's process tree.
struct Tree {
    leader: u32,
    start_time: Option<u64>,
    marker: Option<String>,
}

async fn supervise(
    mut child: reaper::Exit,
    tree: Tree,
    kill: oneshot::Receiver<()>,
    exit: watch::Sender<Option<ExitInfo>>,
    tail: Arc<Mutex<Stderr>>,
    stderr_done: Option<tokio::task::JoinHandle<()>>,
) {
    let pid = tree.leader;
    let status = tokio::select! {
        status = child.wait() => status,
        _ = kill => {
            signal_group(pid, libc::SIGTERM);
            match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    signal_group(pid, libc::SIGKILL);
                    child.wait().await
                }
            }
        }
    };
    // Whatever the agent started goes with it, whichever group or session it moved to.
    signal_group(pid, libc::SIGKILL);
    let killed = tokio::task::spawn_blocking(move || kill_tree(tree.leader, tree.start_time, tree.marker.as_deref()))
        .await
        .unwrap_or(0);
    if killed > 0 {
        tracing::debug!(pid, killed, "killed what the agent left running");
    }
    if let Some(done) = stderr_done {
        let _ = tokio::time::timeout(Duration::from_millis(500), done).await;
    }
    use std::os::unix::process::ExitStatusExt;
    let (code, signal) = match &status {
        Ok(status) => (status.code(), status.signal()),
        Err(_) => (None, None),
    };
    let (stderr_tail, log_file) = tail
        .lock()
        .map(|stderr| {
            // Causes that scrolled out of the tail go first.
            let earlier = stderr.causes.iter().filter(|c| !stderr.tail.contains(c));
            let lines: Vec<&str> = earlier.chain(stderr.tail.iter()).map(String::as_str).collect();
            (lines.join("\n"), stderr.log_file.clone())
        })
        .unwrap_or_default();
    let _ = exit.send(Some(ExitInfo { code, signal, stderr_tail, log_file, cause: None }));
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_exhaustion_is_a_transient_spawn_failure() {
        for code in [libc::EMFILE, libc::ENFILE, libc::ENOMEM, libc::EAGAIN] {
            assert!(is_transient_spawn_error(&std::io::Error::from_raw_os_error(code)), "{code}");
        }
        for code in [libc::ENOENT, libc::EACCES, libc::ENOEXEC] {
            assert!(!is_transient_spawn_error(&std::io::Error::from_raw_os_error(code)), "{code}");
        }
        let missing = LaunchSpec {
            command: "/nonexistent/agent".into(),
            args: vec![],
            env: Default::default(),
            cwd: std::env::temp_dir(),
        };
        let error = spawn_logged(&missing, None).err().expect("no such binary");
        assert!(!is_transient_spawn_error(&error), "a missing binary stays missing: {error}");
    }

    use super::*;

    fn sh(script: &str) -> LaunchSpec {
        LaunchSpec {
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::new(),
            cwd: std::env::temp_dir(),
        }
    }

    #[tokio::test]
    async fn a_crash_report_shows_the_cause_above_a_backtrace_and_names_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent-logs/s.log");
        let script = r#"echo 'Error: CODEX_HOME points to "/nope", but that path does not exist' >&2;
            for i in $(seq 1 60); do echo "  $i: codex::frame_$i" >&2; done; exit 101"#;
        let process = spawn_logged(&sh(script), Some(log.clone())).unwrap();
        let exit = process.handle.wait_for(Duration::from_secs(20)).await.expect("the process ended");
        let text = exit.to_string();
        assert!(text.starts_with("exited with code 101; stderr: Error: CODEX_HOME points to"), "{text}");
        assert!(text.contains("60: codex::frame_60"), "the tail follows: {text}");
        assert!(text.ends_with(&format!("its whole stderr is in {}", log.display())), "{text}");
        let kept = std::fs::read_to_string(&log).unwrap();
        assert!(kept.contains("CODEX_HOME") && kept.contains("frame_1\n") && kept.contains("frame_60"), "{kept}");
    }

    #[tokio::test]
    async fn coloured_stderr_is_kept_and_shown_as_plain_text() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent-logs/s.log");
        let script = r"printf '\033[2m2026-01-01T00:00:00Z\033[0m \033[31mERROR\033[0m codex: boom\007\n' >&2; exit 1";
        let process = spawn_logged(&sh(script), Some(log.clone())).unwrap();
        let exit = process.handle.wait_for(Duration::from_secs(20)).await.expect("the process ended");
        let text = exit.to_string();
        assert!(text.contains("stderr: 2026-01-01T00:00:00Z ERROR codex: boom;"), "{text:?}");
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
        let kept = std::fs::read_to_string(&log).unwrap();
        assert!(kept.contains("2026-01-01T00:00:00Z ERROR codex: boom\n") && !kept.contains('\x1b'), "{kept:?}");
    }

    #[test]
    fn the_agent_log_is_rotated_past_its_bound_keeping_one_previous_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent-logs/s.log");
        let mut log = AgentLog::open_bounded(&path, "first launch", 1000).expect("opened");
        for i in 0..100 {
            log.append(&format!("line {i:03} {}", "x".repeat(40)));
        }
        let current = std::fs::read_to_string(&path).unwrap();
        let previous = std::fs::read_to_string(AgentLog::previous(&path)).unwrap();
        assert!(current.len() <= 1000 && previous.len() <= 1000, "{} and {}", current.len(), previous.len());
        assert!(current.trim_end().ends_with(&format!("line 099 {}", "x".repeat(40))), "{current}");
        // The two files hold the latest lines without a gap: the previous one ends just before.
        let first_now: u32 = current[5..8].parse().unwrap();
        assert!(previous.contains(&format!("line {:03} ", first_now - 1)), "{previous}");
        let files = std::fs::read_dir(dir.path().join("agent-logs")).unwrap().count();
        assert_eq!(files, 2, "one previous file is kept, no more");
        // A later launch appends to the current file, headed by its own line.
        drop(log);
        AgentLog::open_bounded(&path, "second launch", 1000).expect("opened again");
        let current = std::fs::read_to_string(&path).unwrap();
        assert!(current.lines().last().is_some_and(|l| l.starts_with("=== ") && l.ends_with(" second launch ===")));
    }

    #[test]
    fn an_exit_tail_relayed_with_colour_codes_is_shown_plain() {
        // As an agent host of an earlier version relays it: the agent's bytes as they came.
        let exit = ExitInfo {
            code: Some(1),
            stderr_tail: "\x1b[31mERROR\x1b[0m auth failed\r\n\x1b]0;title\x07done".into(),
            ..ExitInfo::default()
        };
        assert_eq!(exit.to_string(), "exited with code 1; stderr: ERROR auth failed | done");
        assert_eq!(plain_text("tab\tkept\n"), "tab\tkept\n");
    }

    #[tokio::test]
    async fn stderr_that_is_not_utf8_or_endless_is_read_to_the_end() {
        let script =
            r"printf 'bad \377\376\n' >&2; head -c 200000 /dev/zero | tr '\0' x >&2; echo >&2; echo after >&2; exit 3";
        let process = spawn(&sh(script)).unwrap();
        let exit = process.handle.wait_for(Duration::from_secs(20)).await.expect("the process ended");
        assert_eq!(exit.code, Some(3), "{exit}");
        assert!(exit.stderr_tail.contains("bad \u{fffd}"), "{:?}", &exit.stderr_tail);
        assert!(exit.stderr_tail.contains("200000 bytes was dropped"), "{:?}", &exit.stderr_tail);
        assert!(exit.stderr_tail.ends_with("after"), "{:?}", &exit.stderr_tail);
    }
}
