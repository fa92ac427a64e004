//! An agent attached over a connection to its host, as a durable line transport: its numbered
//! output into the ACP connection, the server's lines and acknowledgements to the host, and —
//! for a host reached through a command (`ssh`, `docker exec -i`) — the same stream carried on
//! over a new connection when the old one is lost, with nothing lost or seen twice.
//!
//! Output lines the host sends again after a reconnection (everything after the last
//! acknowledged line) are dropped up to the last one passed on. Input lines are numbered and
//! the last few MiB of them kept: the host reports the last number it wrote to the agent, and
//! what a lost connection swallowed is sent again.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, watch};

use super::connection::{CallError, Connection, Reader, Writer};
use super::protocol::{encode, Event, FromHost, Notice, Reply, Request, ToHost};
use super::{HostAgent, HostInfo, MAX_FRAME_BYTES};
use crate::agent::runtime::{AgentLog, ExitInfo, Launched, Placement, ProcessHandle};
use crate::agent::transport::{read_line_bounded, Input, LineStream, Transport};

/// Input lines kept for sending again after a reconnection, in bytes. A connection swallows at
/// most what the pipes and the ssh channel buffer (a few MiB at most).
const RESEND_BYTES: usize = 8 * 1024 * 1024;
/// The longest pause between two attempts to connect again.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// An agent running in the host, attached to this server.
pub struct HostedAgent {
    pub agent_id: String,
    pub pid: u32,
    pub start_time: Option<u64>,
    pub host: HostInfo,
    pub handle: ProcessHandle,
    pub stream: LineStream,
}

impl HostedAgent {
    /// As a runtime's launched agent.
    pub fn launched(self) -> Launched {
        let placement =
            Placement::Host { url: self.host.url, port: self.host.port, pid: self.host.pid, agent_id: self.agent_id };
        Launched {
            pid: self.pid,
            start_time: self.start_time,
            handle: self.handle,
            transport: Transport::Stream(self.stream),
            placement,
        }
    }
}

/// How a lost connection is replaced: by running the access command again.
#[derive(Debug, Clone)]
pub struct Redial {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// How long to keep trying before the agent is given up as gone.
    pub patience: Duration,
    /// Whether what the command said means the host is gone for good (a removed container):
    /// no point in trying again.
    pub gone: fn(&str) -> bool,
    /// The host as messages name it ("the agent host on box (over ssh)", "container …").
    pub what: String,
}

/// Where an attached agent's stderr is kept: the session's agent log (`path`), headed by
/// `what` happened (a start, a reattachment).
pub struct LogTo {
    pub path: PathBuf,
    pub what: String,
}

/// The agent's stderr as the host relays it, into the agent log.
struct StderrRelay {
    log: Option<AgentLog>,
    /// The number of the last line logged.
    seen: u64,
}

impl StderrRelay {
    fn line(&mut self, seq: u64, line: &str) {
        if seq <= self.seen {
            return;
        }
        if let Some(log) = self.log.as_mut() {
            // The host keeps only its agent's latest lines (or a connection was lost with some).
            if self.seen > 0 && seq > self.seen + 1 {
                log.append(&format!("[{} stderr lines were lost on the way]", seq - self.seen - 1));
            }
            log.append(line);
        }
        self.seen = seq;
    }

    fn path(&self) -> Option<PathBuf> {
        self.log.as_ref().map(|log| log.path().to_path_buf())
    }
}

type SharedStderr = Arc<std::sync::Mutex<StderrRelay>>;

/// Makes `connection` the agent's attachment and relays its stream from there; its stderr
/// goes to `log`.
pub(super) async fn attach_on(
    mut connection: Connection,
    info: HostInfo,
    agent_id: &str,
    redial: Option<Redial>,
    log: Option<LogTo>,
) -> Result<HostedAgent, String> {
    let Reply::Attached(agent) = connection.call(Request::Attach { agent_id: agent_id.to_string() }).await? else {
        return Err("the agent host sent no attach answer".into());
    };
    let log = log.and_then(|to| AgentLog::open(&to.path, &format!("{}, pid {}", to.what, agent.pid)));
    let stderr = Arc::new(std::sync::Mutex::new(StderrRelay { log, seen: 0 }));
    let (lines_tx, lines) = mpsc::channel(1024);
    let (input, input_rx) = mpsc::unbounded_channel();
    let (exit_tx, exit_rx) = watch::channel(None);
    let (kill_tx, kill_rx) = oneshot::channel();
    let handle = ProcessHandle::from_parts(agent.pid, exit_rx, kill_tx);
    let queued = Arc::new(AtomicU64::new(0));
    let host = match &redial {
        Some(redial) => redial.what.clone(),
        None => format!("the agent host (pid {})", info.pid),
    };
    let relay = Relay {
        host,
        agent_id: agent_id.to_string(),
        lines: lines_tx,
        input: input_rx,
        queued: queued.clone(),
        kill: kill_rx,
        kill_heard: false,
        kill_asked: false,
        exit: exit_tx,
        redial,
        delivered: Arc::new(AtomicU64::new(agent.acked)),
        kept: VecDeque::new(),
        kept_bytes: 0,
        next_write: agent.written.unwrap_or(0) + 1,
        numbered: agent.written.is_some(),
        stderr,
    };
    tokio::spawn(relay.run(connection));
    Ok(HostedAgent {
        agent_id: agent_id.to_string(),
        pid: agent.pid,
        start_time: agent.start_time,
        host: info,
        handle,
        stream: LineStream { lines, input, queued },
    })
}

fn lost(reason: &str) -> ExitInfo {
    ExitInfo { stderr_tail: reason.to_string(), ..ExitInfo::default() }
}

/// The exit of an agent whose host was lost: `cause` says how.
fn host_lost(cause: String) -> ExitInfo {
    ExitInfo { cause: Some(cause), ..ExitInfo::default() }
}

/// How one connection's stream ended.
enum Ended {
    /// The host reported the agent's exit: everything was read.
    Exited(ExitInfo),
    /// Nobody reads the agent any more (server shutdown, the execution let go): it stays in
    /// the host.
    Detached,
    /// The connection broke.
    Lost(String),
}

/// The stream of one attached agent, over one connection after another.
struct Relay {
    /// The host as messages name it.
    host: String,
    agent_id: String,
    lines: mpsc::Sender<(u64, Vec<u8>)>,
    input: mpsc::UnboundedReceiver<Input>,
    queued: Arc<AtomicU64>,
    kill: oneshot::Receiver<()>,
    /// `kill` resolved (asked, or its handle dropped).
    kill_heard: bool,
    /// The server asked for the kill (asked again on a new connection until the exit comes).
    kill_asked: bool,
    exit: watch::Sender<Option<ExitInfo>>,
    redial: Option<Redial>,
    /// The last output line passed on: lines up to it that a new connection replays are dropped.
    delivered: Arc<AtomicU64>,
    /// Numbered input lines lately sent, for sending again what a lost connection swallowed.
    kept: VecDeque<(u64, String)>,
    kept_bytes: usize,
    next_write: u64,
    /// The host numbers input lines (a host of an earlier version does not: nothing is resent).
    numbered: bool,
    stderr: SharedStderr,
}

impl Relay {
    async fn run(mut self, connection: Connection) {
        let mut connection = connection;
        loop {
            let Connection { reader, mut writer, next_id, .. } = connection;
            let mut reading =
                tokio::spawn(read_stream(reader, self.lines.clone(), self.delivered.clone(), self.stderr.clone()));
            let ended = self.serve(&mut writer, &mut reading, &next_id).await;
            match ended {
                Ended::Exited(info) => {
                    // The output ends before the exit is known, as with a child's pipes.
                    drop(self.lines);
                    self.exit.send_replace(Some(info));
                    // Everything was read: the host may forget the agent.
                    let id = next_id.fetch_add(1, Ordering::SeqCst).to_string();
                    let release = ToHost::Request { id, request: Request::Release { agent_id: self.agent_id } };
                    let _ = send(&mut writer, &release).await;
                    let _ = writer.shutdown().await;
                    return;
                }
                Ended::Detached => {
                    // Closing our half ends the connection; the host keeps the agent.
                    let _ = writer.shutdown().await;
                    reading.abort();
                    self.exit.send_if_modified(|current| {
                        current.is_none().then(|| *current = Some(lost("detached from the agent host"))).is_some()
                    });
                    return;
                }
                Ended::Lost(why) => {
                    reading.abort();
                    drop(writer);
                    tracing::warn!(agent_id = %self.agent_id, "lost the connection to the agent host: {why}");
                    match self.reconnect(why).await {
                        Ok(again) => connection = again,
                        Err(cause) => {
                            drop(self.lines);
                            let mut gone = host_lost(cause);
                            gone.log_file = self.stderr.lock().ok().and_then(|relay| relay.path());
                            self.exit
                                .send_if_modified(|current| current.is_none().then(|| *current = Some(gone)).is_some());
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Server → host on one connection (stdin lines, acknowledgements, the kill) until its
    /// stream ends.
    async fn serve(
        &mut self,
        writer: &mut Writer,
        reading: &mut tokio::task::JoinHandle<ReadEnd>,
        next_id: &AtomicU64,
    ) -> Ended {
        loop {
            // The size of the agent's line this frame carries, counted in `queued` until sent.
            let mut carried = 0;
            let frame = tokio::select! {
                ended = &mut *reading => return match ended {
                    Ok(ReadEnd::Exited(info)) => Ended::Exited(info),
                    Ok(ReadEnd::Detached) => Ended::Detached,
                    Ok(ReadEnd::Lost) => Ended::Lost("the connection closed".into()),
                    Err(e) => Ended::Lost(format!("the reader ended: {e}")),
                },
                item = self.input.recv() => match item {
                    Some(Input::Write(line)) => {
                        carried = line.len() as u64 + 1;
                        self.numbered_write(line)
                    }
                    Some(Input::Ack(seq)) => {
                        ToHost::Notification(Notice::Ack { agent_id: self.agent_id.clone(), seq })
                    }
                    // The connection was dropped (server shutdown): the agent stays in the host.
                    None => return Ended::Detached,
                },
                asked = &mut self.kill, if !self.kill_heard => {
                    self.kill_heard = true;
                    // A handle dropped without asking leaves the agent running.
                    if asked.is_err() {
                        continue;
                    }
                    self.kill_asked = true;
                    kill_request(&self.agent_id, next_id)
                }
            };
            let sent = send(writer, &frame).await;
            drop(frame);
            self.queued.fetch_sub(carried, Ordering::SeqCst);
            if let Err(e) = sent {
                return Ended::Lost(e);
            }
        }
    }

    /// A `Write` numbered (when the host numbers them), kept for sending again.
    fn numbered_write(&mut self, line: String) -> ToHost {
        let n = self.numbered.then(|| {
            let n = self.next_write;
            self.next_write += 1;
            if self.redial.is_some() && line.len() <= RESEND_BYTES {
                self.kept_bytes += line.len();
                self.kept.push_back((n, line.clone()));
                while self.kept_bytes > RESEND_BYTES {
                    match self.kept.pop_front() {
                        Some((_, old)) => self.kept_bytes -= old.len(),
                        None => break,
                    }
                }
            }
            n
        });
        ToHost::Notification(Notice::Write { agent_id: self.agent_id.clone(), line, n })
    }

    /// A new connection, attached again, with what the old one swallowed sent again; once the
    /// host is gone or `patience` is over, what became of it (read after "The agent ").
    async fn reconnect(&mut self, why: String) -> Result<Connection, String> {
        let host = self.host.clone();
        let Some(redial) = self.redial.clone() else {
            return Err(format!("was lost with {host}, which was killed or exited ({why})"));
        };
        let deadline = tokio::time::Instant::now() + redial.patience;
        let mut pause = Duration::from_millis(100);
        let mut last: String;
        loop {
            // A server that let go of the agent meanwhile does not need it back.
            if self.lines.is_closed() {
                return Err("was let go by the server".into());
            }
            match Connection::spawn(&redial.program, &redial.args).await {
                Ok(mut connection) => {
                    match connection.ask(Request::Attach { agent_id: self.agent_id.clone() }).await {
                        Ok(Reply::Attached(agent)) => {
                            tracing::info!(agent_id = %self.agent_id, "attached again to the agent host");
                            return self
                                .catch_up(connection, &agent)
                                .await
                                .ok_or_else(|| format!("was lost: {host} broke off again while catching up"));
                        }
                        // The host answers but no longer has the agent (it was restarted).
                        Ok(_) | Err(CallError::Refused(_)) => {
                            return Err(format!(
                                "was lost: {host} answers again but no longer has it (that host was restarted, \
                                 e.g. its machine rebooted)"
                            ))
                        }
                        Err(CallError::Lost(e)) => {
                            tracing::info!(agent_id = %self.agent_id, "reconnecting: {e}");
                            last = e;
                        }
                    }
                }
                Err(e) if (redial.gone)(&e) => {
                    tracing::warn!(agent_id = %self.agent_id, "the agent host is gone: {e}");
                    return Err(format!("was lost: {host} is gone ({e})"));
                }
                Err(e) => {
                    tracing::info!(agent_id = %self.agent_id, "reconnecting: {e}");
                    last = e;
                }
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Err(format!(
                    "was lost: {host} could not be reached for {} s ({last})",
                    redial.patience.as_secs()
                ));
            }
            // A backoff between attempts, not a wait for an event: nothing signals that a
            // network or a remote machine is back.
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// Sends again the input lines the host did not write, and the kill if it was asked.
    async fn catch_up(&mut self, mut connection: Connection, agent: &HostAgent) -> Option<Connection> {
        if let Some(written) = agent.written {
            if self.kept.front().is_some_and(|(n, _)| *n > written + 1) {
                tracing::warn!(agent_id = %self.agent_id, written, "input lines beyond what is kept were lost");
            }
            let again: Vec<ToHost> = self
                .kept
                .iter()
                .filter(|(n, _)| *n > written)
                .map(|(n, line)| {
                    ToHost::Notification(Notice::Write {
                        agent_id: self.agent_id.clone(),
                        line: line.clone(),
                        n: Some(*n),
                    })
                })
                .collect();
            for frame in again {
                if send(&mut connection.writer, &frame).await.is_err() {
                    return None;
                }
            }
        }
        if self.kill_asked {
            let kill = kill_request(&self.agent_id, &connection.next_id);
            send(&mut connection.writer, &kill).await.ok()?;
        }
        Some(connection)
    }
}

fn kill_request(agent_id: &str, next_id: &AtomicU64) -> ToHost {
    let id = next_id.fetch_add(1, Ordering::SeqCst).to_string();
    ToHost::Request { id, request: Request::Kill { agent_id: agent_id.to_string() } }
}

async fn send(writer: &mut Writer, frame: &ToHost) -> Result<(), String> {
    let mut line = encode(frame);
    line.push('\n');
    writer.write_all(line.as_bytes()).await.map_err(|e| format!("agent host connection: {e}"))?;
    writer.flush().await.map_err(|e| format!("agent host connection: {e}"))
}

/// How one connection's reading ended.
enum ReadEnd {
    Exited(ExitInfo),
    Detached,
    Lost,
}

/// Host → server: numbered lines into the ACP connection (those after `delivered` only), stderr
/// lines into the agent log, then the exit.
async fn read_stream(
    mut reader: Reader,
    lines: mpsc::Sender<(u64, Vec<u8>)>,
    delivered: Arc<AtomicU64>,
    stderr: SharedStderr,
) -> ReadEnd {
    loop {
        let frame = match read_line_bounded(&mut reader, MAX_FRAME_BYTES).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(Some(Err(_))) => continue,
            Ok(None) | Err(_) => return ReadEnd::Lost,
        };
        // Typed, without a JSON tree per line: this is the agent's whole output stream.
        let Ok(FromHost::Notification(event)) = serde_json::from_slice::<FromHost<'static>>(&frame) else { continue };
        match event {
            Event::Output { seq, line, .. } => {
                // Sent again by the host after a reconnection: already passed on.
                if seq <= delivered.load(Ordering::SeqCst) {
                    continue;
                }
                if lines.send((seq, line.into_owned().into_bytes())).await.is_err() {
                    return ReadEnd::Detached;
                }
                delivered.store(seq, Ordering::SeqCst);
            }
            Event::Stderr { seq, line, .. } => {
                // Small appends to a local file, as a standalone agent's stderr is written.
                if let Ok(mut relay) = stderr.lock() {
                    relay.line(seq, &line);
                }
            }
            Event::Exited { code, signal, stderr_tail, cause, .. } => {
                let log_file = stderr.lock().ok().and_then(|relay| relay.path());
                return ReadEnd::Exited(ExitInfo { code, signal, stderr_tail, log_file, cause });
            }
        }
    }
}
