//! `batond agentctl`: the agent host process (its connections, its agents, the `--stdio`
//! relay); each agent's unacknowledged output is kept on disk by [`super::spool`].

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use baton_protocol::{Envelope, ErrorPayload, MessageType};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Notify};

use super::memory::MemoryCgroup;
use super::protocol::{encode, Event, FromHost, Notice, Reply, Request, SpawnAgent, ToHost};
use super::spool::Spool;
use super::{spool_dir, valid_agent_id, write_info, HostAgent, HostInfo, MAX_FRAME_BYTES};
use crate::agent::runtime::{self, ExitInfo, LaunchSpec, ProcessHandle, StderrSink};
use crate::agent::transport::{read_line_bounded, AgentStdin, AgentStdout, MAX_LINE_BYTES};

#[derive(clap::Args, Debug, Clone)]
pub struct AgentctlArgs {
    /// The server's data dir: agentctl.json and the spools live there.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// How long the host stays up with no agent running and no server connected, in ms.
    #[arg(long, default_value_t = 60_000)]
    pub grace_ms: u64,
    /// Serve the protocol over stdin/stdout instead of running the host: starts the data dir's
    /// host if none runs (detached, so its agents outlive this connection) and relays to it.
    /// Whoever can run this command can read agentctl.json too: the `hello` token it is sent
    /// is replaced by the host's own.
    #[arg(long)]
    pub stdio: bool,
}

/// Lines kept in memory per agent beyond what the server acknowledged (older ones are read
/// back from the spool file).
const RING_LINES: usize = 4096;
const RING_BYTES: usize = 32 * 1024 * 1024;
/// Lines sent to a server per wake-up.
pub(super) const SEND_BATCH: usize = 256;
/// Bytes written for an agent that it has not read yet (beyond its pipe's buffer); an agent
/// that lets more than this wait is not reading its input and is killed.
pub const MAX_QUEUED_INPUT: usize = 64 * 1024 * 1024;
/// How often the host checks that agentctl.json still names it.
const ORPHAN_CHECK: Duration = Duration::from_secs(1);
/// A connection must say hello within this.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

struct Output {
    ring: VecDeque<(u64, Arc<str>)>,
    ring_bytes: usize,
    last_seq: u64,
    acked: u64,
    spool: Option<Spool>,
    exit: Option<ExitInfo>,
}

struct Agent {
    id: String,
    pid: u32,
    start_time: Option<u64>,
    handle: ProcessHandle,
    output: Mutex<Output>,
    /// Bumped whenever a line (of stdout or stderr) or the exit is recorded.
    changed: Arc<watch::Sender<u64>>,
    /// The latest stderr lines, relayed to the attached server.
    stderr: Arc<Mutex<StderrRing>>,
    /// The number of the last stderr line sent to a server: where the next attachment starts.
    stderr_sent: AtomicU64,
    /// The agent's stdin; None once it is closed.
    input: Mutex<Option<Input>>,
    /// Why the host killed the agent itself, for its exit report.
    killed_because: Mutex<Option<String>>,
    /// The host's memory cgroup and how many processes its limit had killed when the agent
    /// started: a SIGKILL while that count grew is a kill for memory.
    oom_kills: Option<(MemoryCgroup, Option<u64>)>,
    /// The connection attached now; an older attachment stops streaming.
    generation: AtomicU64,
    /// The number of the last numbered input line written (see [`Notice::Write`]).
    written: AtomicU64,
}

/// Stderr lines kept per agent for the server: the latest ones only, so an agent that floods
/// its stderr while no server is attached costs bounded memory (the older lines are lost, and
/// the numbers' gap tells the server how many).
const STDERR_RING_LINES: usize = 2048;
const STDERR_RING_BYTES: usize = 1024 * 1024;

/// An agent's latest stderr lines, numbered from 1.
#[derive(Default)]
struct StderrRing {
    lines: VecDeque<(u64, Arc<str>)>,
    bytes: usize,
    last_seq: u64,
}

impl StderrRing {
    fn push(&mut self, line: &str) {
        self.last_seq += 1;
        self.bytes += line.len();
        self.lines.push_back((self.last_seq, Arc::from(line)));
        while self.lines.len() > STDERR_RING_LINES || self.bytes > STDERR_RING_BYTES {
            match self.lines.pop_front() {
                Some((_, old)) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    /// The lines after `after`, at most [`SEND_BATCH`].
    fn after(&self, after: u64) -> Vec<(u64, Arc<str>)> {
        let first = self.lines.front().map(|(seq, _)| *seq).unwrap_or(self.last_seq + 1);
        let skip = (after + 1).saturating_sub(first).min(self.lines.len() as u64) as usize;
        self.lines.range(skip..).take(SEND_BATCH).cloned().collect()
    }
}

/// An agent's stdin, written by a task of its own: an agent that stops reading blocks that
/// task only, never the connection that carries its kill or other agents' requests.
struct Input {
    queue: mpsc::UnboundedSender<Vec<u8>>,
    /// Bytes in `queue` and in the write under way (the queue's bound; see `Agent::write`).
    queued: Arc<AtomicUsize>,
    writer: tokio::task::AbortHandle,
}

impl Input {
    fn start(pipe: AgentStdin) -> Input {
        let (queue, mut lines) = mpsc::unbounded_channel::<Vec<u8>>();
        let queued = Arc::new(AtomicUsize::new(0));
        let pending = queued.clone();
        let writer = tokio::spawn(async move {
            let mut pipe = pipe;
            while let Some(bytes) = lines.recv().await {
                let written = pipe.write_all(&bytes).await.is_ok() && pipe.flush().await.is_ok();
                pending.fetch_sub(bytes.len(), Ordering::SeqCst);
                if !written {
                    break;
                }
            }
        });
        Input { queue, queued, writer: writer.abort_handle() }
    }
}

impl Drop for Input {
    fn drop(&mut self) {
        // Whatever was not written is dropped with the pipe (the agent ended or was killed).
        self.writer.abort();
    }
}

impl Agent {
    /// Queues a line for the agent's stdin without waiting for the agent to read it. Counted
    /// in bytes because one line can be 16 MiB; an agent that leaves more than
    /// [`MAX_QUEUED_INPUT`] unread is killed rather than let the host grow.
    fn write(&self, text: &str) {
        let mut input = self.input.lock().unwrap_or_else(|p| p.into_inner());
        let Some(pipe) = input.as_ref() else { return };
        let waiting = pipe.queued.load(Ordering::SeqCst);
        if waiting + text.len() + 1 > MAX_QUEUED_INPUT {
            let reason = format!(
                "killed by the agent host: the agent did not read its input ({waiting} bytes waiting, at most \
                 {MAX_QUEUED_INPUT})"
            );
            tracing::warn!(agent_id = %self.id, "{reason}");
            input.take();
            drop(input);
            *self.killed_because.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
            let handle = self.handle.clone();
            tokio::spawn(async move {
                handle.kill().await;
            });
            return;
        }
        let mut bytes = Vec::with_capacity(text.len() + 1);
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(b'\n');
        pipe.queued.fetch_add(bytes.len(), Ordering::SeqCst);
        if pipe.queue.send(bytes).is_err() {
            // The pipe broke: the agent is ending.
            input.take();
        }
    }

    fn info(&self) -> HostAgent {
        let output = self.output.lock().unwrap_or_else(|p| p.into_inner());
        HostAgent {
            agent_id: self.id.clone(),
            pid: self.pid,
            start_time: self.start_time,
            running: !self.handle.has_exited(),
            last_seq: output.last_seq,
            acked: output.acked,
            written: Some(self.written.load(Ordering::SeqCst)),
        }
    }

    fn ack(&self, seq: u64) {
        let mut output = self.output.lock().unwrap_or_else(|p| p.into_inner());
        let seq = seq.min(output.last_seq);
        if seq <= output.acked {
            return;
        }
        output.acked = seq;
        while output.ring.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((_, line)) = output.ring.pop_front() {
                output.ring_bytes -= line.len();
            }
        }
        if let Some(spool) = output.spool.as_mut() {
            spool.acknowledged(seq);
        }
    }

    /// Lines after `after` (from the ring, or the spool when the ring no longer has them), and
    /// the exit once every line was taken.
    fn lines_after(&self, after: u64) -> (Vec<(u64, Arc<str>)>, Option<ExitInfo>) {
        let mut output = self.output.lock().unwrap_or_else(|p| p.into_inner());
        let ring_first = output.ring.front().map(|(s, _)| *s).unwrap_or(output.last_seq + 1);
        if after + 1 < ring_first && after < output.last_seq {
            let start = output.spool.as_mut().map(|s| (s.path.clone(), s.start_after(after)));
            drop(output);
            // Read without holding the lock: the agent's output keeps being recorded.
            let lines = start.map(|(path, offset)| Spool::read_after(&path, offset, after, SEND_BATCH).0);
            return (lines.unwrap_or_default(), None);
        }
        // The ring holds consecutive lines: the first one wanted is found by its position.
        let skip = (after + 1).saturating_sub(ring_first).min(output.ring.len() as u64) as usize;
        let lines: Vec<_> = output.ring.range(skip..).take(SEND_BATCH).cloned().collect();
        let done = lines.is_empty() && after >= output.last_seq;
        (lines, if done { output.exit.clone() } else { None })
    }
}

struct Host {
    data_dir: PathBuf,
    token: String,
    agents: Mutex<HashMap<String, Arc<Agent>>>,
    connections: AtomicUsize,
    activity: Notify,
}

impl Host {
    fn agent(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents.lock().ok().and_then(|a| a.get(id).cloned())
    }

    fn is_idle(&self) -> bool {
        self.connections.load(Ordering::SeqCst) == 0
            && self.agents.lock().map(|a| a.values().all(|agent| agent.handle.has_exited())).unwrap_or(true)
    }
}

fn lock_host(data_dir: &Path) -> anyhow::Result<std::fs::File> {
    let path = data_dir.join("agentctl.lock");
    // A host that is exiting holds the lock a moment longer: wait for it, bounded.
    for _ in 0..100 {
        if let Some(file) = crate::lockfile::try_lock(&path)? {
            return Ok(file);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    anyhow::bail!("another agent host is already running for {}", data_dir.display())
}

/// Runs the host until it has been idle (no agent running, no server connected) for the grace
/// period. The first line on stdout says where it listens; stdout is closed after it.
pub async fn run(args: AgentctlArgs) -> anyhow::Result<()> {
    if args.stdio {
        return relay_stdio(args).await;
    }
    let _lock = lock_host(&args.data_dir)?;
    let spools = spool_dir(&args.data_dir);
    // Spools of a previous host belong to agents that died with it.
    let _ = std::fs::remove_dir_all(&spools);
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&spools)
            .with_context(|| format!("cannot create {}", spools.display()))?;
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.context("cannot listen on loopback")?;
    let address = listener.local_addr()?;
    let pid = std::process::id();
    let token = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    let info = HostInfo {
        url: format!("tcp://{address}"),
        port: address.port(),
        pid,
        start_time: runtime::process_start_time(pid),
        token: token.clone(),
    };
    write_info(&args.data_dir, &info).context("cannot write agentctl.json")?;
    println!("agentctl listening on {}", info.url);
    std::io::stdout().flush().ok();
    // Nothing else goes to stdout: the server that started us stops reading it.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::unix::io::AsRawFd;
        // SAFETY: replaces our own stdout descriptor.
        unsafe {
            libc::dup2(null.as_raw_fd(), 1);
        }
    }
    tracing::info!(url = %info.url, pid, "agent host listening");

    let host = Arc::new(Host {
        data_dir: args.data_dir.clone(),
        token,
        agents: Mutex::new(HashMap::new()),
        connections: AtomicUsize::new(0),
        activity: Notify::new(),
    });
    let grace = Duration::from_millis(args.grace_ms);
    let accept = {
        let host = host.clone();
        async move {
            let mut backoff = crate::accept::AcceptBackoff::default();
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        backoff.succeeded("agent host");
                        let _ = stream.set_nodelay(true);
                        host.connections.fetch_add(1, Ordering::SeqCst);
                        host.activity.notify_one();
                        let host = host.clone();
                        tokio::spawn(async move {
                            let (read, write) = stream.into_split();
                            if let Err(e) = serve(host.clone(), read, write).await {
                                tracing::debug!("connection ended: {e}");
                            }
                            host.connections.fetch_sub(1, Ordering::SeqCst);
                            host.activity.notify_one();
                        });
                    }
                    Err(e) => tokio::time::sleep(backoff.failed("agent host", &e)).await,
                }
            }
        }
    };
    let idle = async {
        loop {
            if host.is_idle() {
                tokio::select! {
                    () = tokio::time::sleep(grace) => {
                        if host.is_idle() {
                            break;
                        }
                    }
                    () = host.activity.notified() => {}
                }
            } else {
                host.activity.notified().await;
            }
        }
    };
    // A host whose agentctl.json is gone (the data dir was deleted) or names another host can
    // never be found again: it stops its agents and exits instead of running them forever.
    let orphaned = async {
        loop {
            tokio::time::sleep(ORPHAN_CHECK).await;
            if super::read_info(&args.data_dir).map(|current| current.pid) != Some(pid) {
                break;
            }
        }
    };
    tokio::select! {
        () = accept => {}
        () = idle => tracing::info!("agent host idle for {grace:?}: exiting"),
        () = orphaned => {
            tracing::warn!("agentctl.json is gone or names another host: stopping the agents and exiting");
            let agents: Vec<Arc<Agent>> =
                host.agents.lock().map(|a| a.values().cloned().collect()).unwrap_or_default();
            let kills = agents.iter().map(|agent| agent.handle.kill());
            let _ = tokio::time::timeout(Duration::from_secs(5), futures_util::future::join_all(kills)).await;
        }
    }
    if super::read_info(&args.data_dir).is_some_and(|current| current.pid == pid) {
        let _ = std::fs::remove_file(super::info_path(&args.data_dir));
    }
    let _ = std::fs::remove_dir_all(&spools);
    Ok(())
}

/// `agentctl --stdio`: one connection to the data dir's host over the standard streams, so that
/// any command that gives a byte stream (a local spawn, `docker exec -i`, `ssh`) reaches it. The
/// host runs detached as usual: when this connection drops, its agents keep running and keep
/// their spools, and the next connection attaches again.
async fn relay_stdio(args: AgentctlArgs) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let batond = std::env::current_exe().context("cannot find the batond binary")?;
    // Reached over ssh, the data dir may be new (and relative to the remote home): it is
    // made private to its user, and named absolutely for the host that is started.
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&args.data_dir)
            .with_context(|| format!("cannot create {}", args.data_dir.display()))?;
    }
    let data_dir =
        std::fs::canonicalize(&args.data_dir).with_context(|| format!("cannot find {}", args.data_dir.display()))?;
    let host = super::client::AgentHost::new(data_dir, batond, Duration::from_millis(args.grace_ms));
    let info = host.ensure().await.map_err(anyhow::Error::msg)?;
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", info.port))
        .await
        .with_context(|| format!("cannot reach the agent host on port {}", info.port))?;
    let _ = tcp.set_nodelay(true);
    let (tcp_read, mut tcp_write) = tcp.into_split();
    let mut stdin = BufReader::new(tokio::io::stdin());
    // The first frame is the hello: sent on with the host's token.
    let first = match tokio::time::timeout(HELLO_TIMEOUT, read_line_bounded(&mut stdin, 64 * 1024)).await {
        Ok(Ok(Some(Ok(line)))) => line,
        _ => anyhow::bail!("no hello on stdin"),
    };
    let first = match serde_json::from_slice::<ToHost>(&first) {
        Ok(ToHost::Request { id, request: Request::Hello { .. } }) => {
            encode(&ToHost::Request { id, request: Request::Hello { token: info.token.clone() } }).into_bytes()
        }
        // Anything else is the host's to refuse.
        _ => first,
    };
    tcp_write.write_all(&first).await?;
    tcp_write.write_all(b"\n").await?;
    // What was read past the hello is in the buffer: it goes first.
    let buffered = stdin.buffer().to_vec();
    stdin.consume(buffered.len());
    tcp_write.write_all(&buffered).await?;
    let upstream = async move {
        let _ = tokio::io::copy(&mut stdin, &mut tcp_write).await;
        // The client is gone: the host ends this connection, not its agents.
        let _ = tcp_write.shutdown().await;
    };
    let downstream = async move {
        let mut stdout = tokio::io::stdout();
        let mut tcp_read = tcp_read;
        let _ = tokio::io::copy(&mut tcp_read, &mut stdout).await;
        let _ = stdout.flush().await;
    };
    tokio::pin!(downstream);
    tokio::select! {
        () = &mut downstream => {}
        () = upstream => {
            // The host closes its side once it saw the end; bounded, it may be gone.
            let _ = tokio::time::timeout(HELLO_TIMEOUT, downstream).await;
        }
    }
    // Tokio reads stdin on a blocking thread that a runtime's shutdown would wait for (until
    // the client writes again or closes): the connection is over, the process ends here.
    std::process::exit(0)
}

fn reply(id: Option<String>, action: &str, result: Result<Reply, ErrorPayload>) -> String {
    match result {
        Ok(reply) => encode(&FromHost::Response { id, reply }),
        Err(payload) => encode(&FromHost::Error { id, action: action.to_string(), payload }),
    }
}

/// Why a frame from the server could not be read, answered with the id and action it seems to
/// carry: an action this host does not know, or one whose payload does not fit.
fn unreadable(line: &[u8], error: &serde_json::Error) -> String {
    let Ok(envelope) = serde_json::from_slice::<Envelope>(line) else {
        return reply(None, "", Err(ErrorPayload::bad_request("not an envelope")));
    };
    let known = ["hello", "agent.spawn", "agent.attach", "agent.kill", "agent.release", "agent.list"];
    let error = if envelope.kind == MessageType::Request && !known.contains(&envelope.action.as_str()) {
        ErrorPayload::new(baton_protocol::ErrorCode::UnknownAction, format!("unknown action {:?}", envelope.action))
    } else {
        ErrorPayload::validation(format!("{}: {error}", envelope.action))
    };
    reply(envelope.id, &envelope.action, Err(error))
}

/// One server connection (TCP, or the standard streams of `agentctl --stdio`): hello, then
/// requests; an attached agent's output is streamed on it.
async fn serve<R, W>(host: Arc<Host>, read: R, mut write: W) -> anyhow::Result<()>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut reader = BufReader::new(read);
    // Bounded: a server that does not read makes the streaming task wait, not grow memory.
    let (out_tx, mut out_rx) = mpsc::channel::<String>(SEND_BATCH * 2);
    let writer = tokio::spawn(async move {
        // Frames queued together go out in one write.
        let mut batch = String::new();
        while let Some(frame) = out_rx.recv().await {
            batch.clear();
            batch.push_str(&frame);
            batch.push('\n');
            while batch.len() < 256 * 1024 {
                match out_rx.try_recv() {
                    Ok(frame) => {
                        batch.push_str(&frame);
                        batch.push('\n');
                    }
                    Err(_) => break,
                }
            }
            if write.write_all(batch.as_bytes()).await.is_err() || write.flush().await.is_err() {
                break;
            }
        }
    });
    let first = tokio::time::timeout(HELLO_TIMEOUT, read_line_bounded(&mut reader, 64 * 1024)).await;
    let hello = match first {
        Ok(Ok(Some(Ok(line)))) => serde_json::from_slice::<ToHost>(&line).ok(),
        _ => None,
    };
    let (hello_id, authorised) = match hello {
        Some(ToHost::Request { id, request: Request::Hello { token } }) => {
            (Some(id), crate::secret::constant_time_eq(token.as_bytes(), host.token.as_bytes()))
        }
        Some(ToHost::Request { id, .. }) => (Some(id), false),
        _ => (None, false),
    };
    if !authorised {
        let refusal = ErrorPayload::new(baton_protocol::ErrorCode::Unauthorized, "bad or missing token");
        let _ = out_tx.send(reply(hello_id, "hello", Err(refusal))).await;
        drop(out_tx);
        let _ = writer.await;
        anyhow::bail!("a connection without the token was refused");
    }
    let _ = out_tx.send(reply(hello_id, "hello", Ok(Reply::Hello { pid: std::process::id() }))).await;
    let mut connection = Connection { host, out: out_tx, attached: BTreeMap::new(), streams: Vec::new() };
    loop {
        let line = match read_line_bounded(&mut reader, MAX_FRAME_BYTES).await {
            Ok(Some(Ok(line))) => line,
            Ok(Some(Err(length))) => {
                tracing::warn!(length, "dropped an over-long frame");
                continue;
            }
            Ok(None) | Err(_) => break,
        };
        match serde_json::from_slice::<ToHost>(&line) {
            Ok(ToHost::Notification(Notice::Write { agent_id, line, n })) => connection.write(&agent_id, &line, n),
            Ok(ToHost::Notification(Notice::Ack { agent_id, seq })) => connection.ack(&agent_id, seq),
            Ok(ToHost::Request { id, request }) => {
                let action = request.action();
                let answer = match request {
                    Request::Hello { .. } => Some(Ok(Reply::Hello { pid: std::process::id() })),
                    Request::Spawn(spawn) => Some(spawn_agent(&connection.host, spawn)),
                    Request::Attach { agent_id } => connection.attach(&id, &agent_id).await,
                    Request::Kill { agent_id } => connection.kill(&id, &agent_id),
                    Request::Release { agent_id } => Some(connection.release(&agent_id).await),
                    Request::List {} => Some(Ok(connection.list())),
                };
                // None: answered already, or in the background.
                if let Some(answer) = answer {
                    let _ = connection.out.send(reply(Some(id), action, answer)).await;
                }
            }
            Err(error) => {
                let _ = connection.out.send(unreadable(&line, &error)).await;
            }
        }
    }
    for stream in connection.streams {
        stream.abort();
    }
    drop(connection.out);
    let _ = writer.await;
    Ok(())
}

/// One authenticated server connection: its handlers, one per action.
struct Connection {
    host: Arc<Host>,
    /// Frames to the server.
    out: mpsc::Sender<String>,
    /// Agents this connection is attached to, with the generation it attached as.
    attached: BTreeMap<String, u64>,
    streams: Vec<tokio::task::JoinHandle<()>>,
}

impl Connection {
    /// `agent.write`: only the connection the agent is attached to now writes to it, and a
    /// numbered line only once (a server sends again what a lost connection may have eaten).
    fn write(&self, agent_id: &str, line: &str, n: Option<u64>) {
        let Some(agent) = self.host.agent(agent_id) else { return };
        if self.attached.get(agent_id) != Some(&agent.generation.load(Ordering::SeqCst)) {
            return;
        }
        if let Some(n) = n {
            // One connection at a time writes (the generation check above): no race here.
            if n <= agent.written.load(Ordering::SeqCst) {
                return;
            }
            agent.written.store(n, Ordering::SeqCst);
        }
        agent.write(line);
    }

    /// `agent.ack`.
    fn ack(&self, agent_id: &str, seq: u64) {
        if let Some(agent) = self.host.agent(agent_id) {
            agent.ack(seq);
        }
    }

    /// `agent.attach`: answers, then streams the agent's output on this connection (the answer
    /// goes out first: same channel).
    async fn attach(&mut self, id: &str, agent_id: &str) -> Option<Result<Reply, ErrorPayload>> {
        let Some(agent) = self.host.agent(agent_id) else {
            return Some(Err(ErrorPayload::not_found("no such agent")));
        };
        let generation = agent.generation.fetch_add(1, Ordering::SeqCst) + 1;
        self.attached.insert(agent.id.clone(), generation);
        let info = agent.info();
        let from = info.acked;
        let _ = self.out.send(reply(Some(id.to_string()), "agent.attach", Ok(Reply::Attached(info)))).await;
        self.streams.push(tokio::spawn(stream_output(agent, generation, from, self.out.clone())));
        None
    }

    /// `agent.kill`: answered in the background once the process group is gone (the exit is
    /// also reported on the agent's stream).
    fn kill(&self, id: &str, agent_id: &str) -> Option<Result<Reply, ErrorPayload>> {
        let Some(agent) = self.host.agent(agent_id) else {
            return Some(Err(ErrorPayload::not_found("no such agent")));
        };
        let out = self.out.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            let exit = agent.handle.kill().await;
            let killed = Reply::Killed { code: exit.code, signal: exit.signal };
            let _ = out.send(reply(Some(id), "agent.kill", Ok(killed))).await;
        });
        None
    }

    /// `agent.release`: kills the agent if it still runs and forgets it and its spool.
    async fn release(&self, agent_id: &str) -> Result<Reply, ErrorPayload> {
        let agent = self.host.agents.lock().ok().and_then(|mut a| a.remove(agent_id));
        if let Some(agent) = agent {
            agent.handle.kill().await;
            let path = agent.output.lock().ok().and_then(|o| o.spool.as_ref().map(|s| s.path.clone()));
            if let Some(path) = path {
                let _ = std::fs::remove_file(path);
            }
            self.host.activity.notify_one();
        }
        Ok(Reply::Released {})
    }

    /// `agent.list`.
    fn list(&self) -> Reply {
        let agents =
            self.host.agents.lock().map(|a| a.values().map(|agent| agent.info()).collect()).unwrap_or_default();
        Reply::Agents { agents }
    }
}

/// `agent.spawn`.
fn spawn_agent(host: &Arc<Host>, request: SpawnAgent) -> Result<Reply, ErrorPayload> {
    let SpawnAgent { agent_id, command, args, env, cwd } = request;
    if !valid_agent_id(&agent_id) {
        return Err(ErrorPayload::validation("agent_id: use letters, digits, '-' and '_'"));
    }
    if host.agent(&agent_id).is_some() {
        return Err(ErrorPayload::conflict(format!("agent {agent_id} exists")));
    }
    // Commands are not run through a shell: a leading `~/` (a remote batond configured as
    // `~/bin/batond`) is this host's user's home.
    let command = match (command.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::Path::new(&home).join(rest).to_string_lossy().into_owned(),
        _ => command,
    };
    let spec = LaunchSpec { command, args, env, cwd };
    let spool_path = spool_dir(&host.data_dir).join(format!("{agent_id}.spool"));
    let spool = Spool::create(spool_path.clone())
        .map_err(|e| ErrorPayload::internal(format!("cannot create {}: {e}", spool_path.display())))?;
    let (changed, _) = watch::channel(0);
    let changed = Arc::new(changed);
    let stderr = Arc::new(Mutex::new(StderrRing::default()));
    let sink: StderrSink = {
        let (stderr, changed) = (stderr.clone(), changed.clone());
        Arc::new(move |line: &str| {
            stderr.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            changed.send_modify(|v| *v += 1);
        })
    };
    let mut process = runtime::spawn_relaying(&spec, sink)
        .map_err(|e| ErrorPayload::unavailable_until_changed(format!("could not start {}: {e}", spec.command)))?;
    let agent = Arc::new(Agent {
        id: agent_id.clone(),
        pid: process.pid,
        start_time: process.start_time,
        handle: process.handle.clone(),
        output: Mutex::new(Output {
            ring: VecDeque::new(),
            ring_bytes: 0,
            last_seq: 0,
            acked: 0,
            spool: Some(spool),
            exit: None,
        }),
        changed,
        stderr,
        stderr_sent: AtomicU64::new(0),
        input: Mutex::new(process.stdin.take().map(Input::start)),
        killed_because: Mutex::new(None),
        oom_kills: MemoryCgroup::own().map(|cgroup| {
            let before = cgroup.oom_kills();
            (cgroup, before)
        }),
        generation: AtomicU64::new(0),
        written: AtomicU64::new(0),
    });
    if let Ok(mut agents) = host.agents.lock() {
        agents.insert(agent_id.clone(), agent.clone());
    }
    tracing::info!(agent_id, pid = process.pid, command = %spec.command, "agent started");
    if let Some(stdout) = process.stdout.take() {
        tokio::spawn(read_output(host.clone(), agent.clone(), stdout));
    }
    Ok(Reply::Spawned { pid: process.pid, start_time: process.start_time })
}

/// Numbers and records the agent's stdout lines; records the exit after the last line.
async fn read_output(host: Arc<Host>, agent: Arc<Agent>, stdout: AgentStdout) {
    let mut reader = BufReader::new(stdout);
    let read_all = async {
        loop {
            let line = match read_line_bounded(&mut reader, MAX_LINE_BYTES).await {
                Ok(Some(Ok(line))) => line,
                Ok(Some(Err(length))) => {
                    tracing::warn!(agent_id = %agent.id, length, "dropped an over-long line from the agent");
                    continue;
                }
                Ok(None) | Err(_) => break,
            };
            let line: Arc<str> = Arc::from(String::from_utf8_lossy(&line).trim_end_matches('\r'));
            let seq = {
                let mut output = agent.output.lock().unwrap_or_else(|p| p.into_inner());
                output.last_seq += 1;
                let seq = output.last_seq;
                if let Some(spool) = output.spool.as_mut() {
                    spool.append(seq, &line);
                }
                output.ring_bytes += line.len();
                output.ring.push_back((seq, line));
                // Only what the spool also holds leaves the ring.
                let full = output.ring.len() > RING_LINES || output.ring_bytes > RING_BYTES;
                if full || reader.buffer().is_empty() {
                    if let Some(spool) = output.spool.as_mut() {
                        spool.flush();
                    }
                }
                while output.ring.len() > RING_LINES || output.ring_bytes > RING_BYTES {
                    match output.ring.pop_front() {
                        Some((_, old)) => output.ring_bytes -= old.len(),
                        None => break,
                    }
                }
                seq
            };
            agent.changed.send_replace(seq);
        }
    };
    // A grandchild holding the pipe open must not hide the agent's exit forever.
    tokio::select! {
        () = read_all => {}
        _ = async {
            agent.handle.wait().await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        } => {}
    }
    let mut exit = agent.handle.wait().await;
    if let Some(reason) = agent.killed_because.lock().unwrap_or_else(|p| p.into_inner()).take() {
        exit.stderr_tail = if exit.stderr_tail.is_empty() { reason } else { format!("{}\n{reason}", exit.stderr_tail) };
    } else if exit.signal == Some(libc::SIGKILL) {
        if let Some((cgroup, before)) = &agent.oom_kills {
            exit.cause = cgroup.killed_for_memory(*before);
        }
    }
    tracing::info!(agent_id = %agent.id, %exit, "agent ended");
    agent.input.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Ok(mut output) = agent.output.lock() {
        output.exit = Some(exit);
    }
    agent.changed.send_modify(|v| *v += 1);
    host.activity.notify_one();
}

/// Sends the agent's lines after `from`, then live ones, then its exit, while this connection
/// is the agent's current attachment; its stderr lines too, from the first one no attachment
/// was sent.
async fn stream_output(agent: Arc<Agent>, generation: u64, from: u64, out: mpsc::Sender<String>) {
    let mut changed = agent.changed.subscribe();
    let mut sent = from;
    let mut stderr_sent = agent.stderr_sent.load(Ordering::SeqCst);
    loop {
        if agent.generation.load(Ordering::SeqCst) != generation {
            return;
        }
        changed.borrow_and_update();
        // Before the exit: the exit comes last on the stream.
        let errors = agent.stderr.lock().unwrap_or_else(|p| p.into_inner()).after(stderr_sent);
        for (seq, line) in &errors {
            let event = Event::Stderr { agent_id: Cow::Borrowed(&agent.id), seq: *seq, line: Cow::Borrowed(line) };
            if out.send(encode(&FromHost::Notification(event))).await.is_err() {
                return;
            }
            stderr_sent = *seq;
            agent.stderr_sent.fetch_max(*seq, Ordering::SeqCst);
        }
        let (lines, exit) = agent.lines_after(sent);
        if let (Some(exit), true) = (exit, errors.is_empty()) {
            let exited = Event::Exited {
                agent_id: Cow::Borrowed(&agent.id),
                code: exit.code,
                signal: exit.signal,
                stderr_tail: exit.stderr_tail,
                cause: exit.cause,
            };
            let _ = out.send(encode(&FromHost::Notification(exited))).await;
            return;
        }
        if lines.is_empty() {
            if errors.is_empty() && changed.changed().await.is_err() {
                return;
            }
            continue;
        }
        for (seq, line) in lines {
            let output = Event::Output { agent_id: Cow::Borrowed(&agent.id), seq, line: Cow::Borrowed(&line) };
            if out.send(encode(&FromHost::Notification(output))).await.is_err() {
                return;
            }
            sent = seq;
        }
    }
}
