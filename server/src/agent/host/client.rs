//! The server's side of the agent host, and the `hosted` runtime: starting the host, spawning
//! and attaching agents, and the stream of an attached agent as a durable line transport.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

use super::protocol::{encode, Event, FromHost, Notice, Reply, Request, SpawnAgent, ToHost};
use super::{read_info, HostAgent, HostInfo, MAX_FRAME_BYTES};
use crate::agent::runtime::{
    process_start_time, ExitInfo, LaunchSpec, Launched, Placement, ProcessHandle, RunningAgent, Runtime, SpawnError,
};
use crate::agent::transport::{read_line_bounded, Input, LineStream, Transport};

/// Bound on connecting to the host and on its answers to control requests.
const HOST_TIMEOUT: Duration = Duration::from_secs(10);

/// An agent running in the host, attached to this server.
pub struct HostedAgent {
    pub agent_id: String,
    pub pid: u32,
    pub start_time: Option<u64>,
    pub host: HostInfo,
    pub handle: ProcessHandle,
    pub stream: LineStream,
}

/// Starts and talks to the data dir's agent host.
pub struct AgentHost {
    data_dir: PathBuf,
    batond: PathBuf,
    grace: Duration,
    /// Serialises starting the host.
    starting: tokio::sync::Mutex<()>,
    /// How a connection reaches the host.
    access: Access,
}

/// How the server reaches an agent host.
#[derive(Debug, Clone)]
pub enum Access {
    /// The data dir's host on this machine, over loopback TCP (`agentctl.json`).
    Local,
    /// A command that serves the protocol on its stdin/stdout (`batond agentctl --stdio`, run
    /// directly, by `docker exec -i` or by `ssh`): one process per connection.
    Command { program: PathBuf, args: Vec<String> },
}

type Reader = BufReader<Box<dyn tokio::io::AsyncRead + Send + Unpin>>;
type Writer = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

/// One authenticated connection to the host.
struct Connection {
    reader: Reader,
    writer: Writer,
    next_id: AtomicU64,
    /// The host's pid, as its hello said.
    host_pid: u32,
}

/// Why a request to the host did not get its answer.
enum CallError {
    /// The host answered with an error: its message.
    Refused(String),
    /// The host could not be heard.
    Lost(String),
}

impl Connection {
    /// Runs the access command and says hello over its standard streams (the token is the
    /// command's to supply: whoever may run it may read the host's token).
    async fn spawn(program: &std::path::Path, args: &[String]) -> Result<Connection, String> {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .env_remove("BATON_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(format!("{} has no standard streams", program.display()));
        };
        // Its last stderr lines explain a failed hello (no such container, ssh refused...).
        let tail = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::<String>::new()));
        let keep = tail.clone();
        let reading = tokio::spawn(async move {
            let mut lines = BufReader::new(stderr);
            while let Ok(Some(line)) = read_line_bounded(&mut lines, 8 * 1024).await {
                let Ok(line) = line else { continue };
                tracing::debug!(target: "agent_host_access", "{}", String::from_utf8_lossy(&line));
                if let Ok(mut tail) = keep.lock() {
                    if tail.len() == 5 {
                        tail.pop_front();
                    }
                    tail.push_back(String::from_utf8_lossy(&line).into_owned());
                }
            }
        });
        // Not waited for here: it ends when the connection is dropped (its stdin closes), and
        // tokio reaps it.
        drop(child);
        match Connection::over(Box::new(stdout), Box::new(stdin), "").await {
            Ok(connection) => Ok(connection),
            Err(e) => {
                // A process that failed has ended: its stderr is read to the end (bounded, a
                // grandchild may hold it open).
                let _ = tokio::time::timeout(Duration::from_secs(2), reading).await;
                let said = tail.lock().map(|t| t.iter().cloned().collect::<Vec<_>>().join(" | ")).unwrap_or_default();
                Err(if said.is_empty() { e } else { format!("{e}; {} said: {said}", program.display()) })
            }
        }
    }

    async fn open(info: &HostInfo) -> Result<Connection, String> {
        let address = format!("127.0.0.1:{}", info.port);
        let stream = tokio::time::timeout(HOST_TIMEOUT, TcpStream::connect(&address))
            .await
            .map_err(|_| format!("the agent host at {address} did not accept in time"))?
            .map_err(|e| format!("cannot reach the agent host at {address}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        Connection::over(Box::new(read), Box::new(write), &info.token).await
    }

    /// Says hello over a byte stream to the host.
    async fn over(
        read: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
        writer: Writer,
        token: &str,
    ) -> Result<Connection, String> {
        let mut connection =
            Connection { reader: BufReader::new(read), writer, next_id: AtomicU64::new(1), host_pid: 0 };
        if let Reply::Hello { pid } = connection.call(Request::Hello { token: token.to_string() }).await? {
            connection.host_pid = pid;
        }
        Ok(connection)
    }

    async fn send(&mut self, frame: &ToHost) -> Result<(), String> {
        let mut line = encode(frame);
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.map_err(|e| format!("agent host connection: {e}"))?;
        self.writer.flush().await.map_err(|e| format!("agent host connection: {e}"))
    }

    /// A request whose answer is the next frame with its id (no stream is attached yet).
    async fn call(&mut self, request: Request) -> Result<Reply, String> {
        let action = request.action();
        self.ask(request).await.map_err(|e| match e {
            CallError::Refused(refusal) => format!("the agent host refused {action}: {refusal}"),
            CallError::Lost(e) => e,
        })
    }

    async fn ask(&mut self, request: Request) -> Result<Reply, CallError> {
        let action = request.action();
        let id = self.next_id.fetch_add(1, Ordering::SeqCst).to_string();
        self.send(&ToHost::Request { id: id.clone(), request }).await.map_err(CallError::Lost)?;
        let answer = async {
            loop {
                let frame = match read_line_bounded(&mut self.reader, MAX_FRAME_BYTES).await {
                    Ok(Some(Ok(line))) => line,
                    Ok(Some(Err(_))) => continue,
                    Ok(None) | Err(_) => {
                        return Err(CallError::Lost(format!("the agent host closed the connection during {action}")))
                    }
                };
                match serde_json::from_slice::<FromHost<'static>>(&frame) {
                    Ok(FromHost::Response { id: Some(answered), reply }) if answered == id => {
                        return if reply.action() == action {
                            Ok(reply)
                        } else {
                            Err(CallError::Lost(format!("the agent host answered {action} with {}", reply.action())))
                        };
                    }
                    Ok(FromHost::Error { id: Some(answered), payload, .. }) if answered == id => {
                        return Err(CallError::Refused(payload.message))
                    }
                    _ => continue,
                }
            }
        };
        tokio::time::timeout(HOST_TIMEOUT, answer)
            .await
            .map_err(|_| CallError::Lost(format!("the agent host did not answer {action}")))?
    }
}

fn host_alive(info: &HostInfo) -> bool {
    match (process_start_time(info.pid), info.start_time) {
        (Some(now), Some(recorded)) => now == recorded,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

impl AgentHost {
    pub fn new(data_dir: PathBuf, batond: PathBuf, grace: Duration) -> AgentHost {
        AgentHost { data_dir, batond, grace, starting: tokio::sync::Mutex::new(()), access: Access::Local }
    }

    /// A host reached through a command that serves the protocol on its standard streams.
    pub fn via_command(program: PathBuf, args: Vec<String>) -> AgentHost {
        AgentHost {
            data_dir: PathBuf::new(),
            batond: program.clone(),
            grace: Duration::ZERO,
            starting: tokio::sync::Mutex::new(()),
            access: Access::Command { program, args },
        }
    }

    /// A connection to the host (`info` is where a local host listens).
    async fn connect(&self, info: &HostInfo) -> Result<Connection, String> {
        match &self.access {
            Access::Local => Connection::open(info).await,
            Access::Command { program, args } => Connection::spawn(program, args).await,
        }
    }

    /// What the command's host says of itself: its pid (the command starts it when needed).
    async fn command_host(&self) -> Result<HostInfo, String> {
        let Access::Command { program, args } = &self.access else {
            return Err("not a command".into());
        };
        let connection = Connection::spawn(program, args).await?;
        let pid = connection.host_pid;
        let command: Vec<String> = std::iter::once(program.display().to_string()).chain(args.iter().cloned()).collect();
        Ok(HostInfo {
            url: format!("stdio:{}", command.join(" ")),
            port: 0,
            pid,
            start_time: None,
            token: String::new(),
        })
    }

    /// The running host of the data dir, if one answers with its token.
    pub async fn existing(&self) -> Option<HostInfo> {
        if matches!(self.access, Access::Command { .. }) {
            return self.command_host().await.ok();
        }
        let info = read_info(&self.data_dir)?;
        if !host_alive(&info) {
            return None;
        }
        Connection::open(&info).await.ok().map(|_| info)
    }

    /// The running host, or why there is none to be reached.
    pub async fn existing_or_error(&self) -> Result<HostInfo, String> {
        match self.access {
            Access::Command { .. } => self.command_host().await,
            Access::Local => self.existing().await.ok_or_else(|| "no agent host runs".to_string()),
        }
    }

    /// The batond binary the host runs.
    pub fn batond(&self) -> &std::path::Path {
        &self.batond
    }

    /// How long an idle host stays up.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// The running host, started first when there is none.
    pub async fn ensure(&self) -> Result<HostInfo, String> {
        if matches!(self.access, Access::Command { .. }) {
            return self.command_host().await;
        }
        let _starting = self.starting.lock().await;
        if let Some(info) = self.existing().await {
            return Ok(info);
        }
        self.start().await
    }

    async fn start(&self) -> Result<HostInfo, String> {
        let logs = self.data_dir.join("logs");
        let _ = std::fs::create_dir_all(&logs);
        use std::os::unix::fs::OpenOptionsExt;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .mode(0o600)
            .append(true)
            .open(logs.join("agentctl.log"))
            .map_err(|e| format!("cannot open the agent host log: {e}"))?;
        let mut command = tokio::process::Command::new(&self.batond);
        command
            .arg("agentctl")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--grace-ms")
            .arg(self.grace.as_millis().to_string())
            .env_remove("BATON_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        // SAFETY: setsid is async-signal-safe. The host leads its own session and process
        // group: signals to the server's group and the server's death do not reach it.
        unsafe {
            command.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| format!("cannot start the agent host: {e}"))?;
        let stdout = child.stdout.take().ok_or("the agent host has no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(HOST_TIMEOUT, lines.next_line()).await;
        // The child is not waited for here: tokio reaps it when it exits.
        drop(child);
        match first {
            Ok(Ok(Some(line))) if line.starts_with("agentctl listening on") => {}
            Ok(Ok(other)) => {
                return Err(format!(
                    "the agent host did not start ({}); see logs/agentctl.log",
                    other.unwrap_or_else(|| "it exited".into())
                ))
            }
            Ok(Err(e)) => return Err(format!("the agent host did not start: {e}")),
            Err(_) => return Err("the agent host did not start in time".into()),
        }
        let info = read_info(&self.data_dir).ok_or("the agent host wrote no agentctl.json")?;
        tracing::info!(url = %info.url, pid = info.pid, "agent host started");
        Ok(info)
    }

    /// The agents the host has (running or exited with output not yet released).
    pub async fn list(&self, info: &HostInfo) -> Result<Vec<HostAgent>, String> {
        let mut connection = self.connect(info).await?;
        match connection.call(Request::List {}).await? {
            Reply::Agents { agents } => Ok(agents),
            _ => Err("the agent host sent no agent list".into()),
        }
    }

    /// Kills and forgets an agent (one this server will not attach to again).
    pub async fn release(&self, info: &HostInfo, agent_id: &str) -> Result<(), String> {
        let mut connection = self.connect(info).await?;
        connection.call(Request::Release { agent_id: agent_id.to_string() }).await.map(|_| ())
    }

    /// Starts an agent in the host (starting the host if needed) and attaches to it.
    pub async fn spawn(&self, agent_id: &str, spec: &LaunchSpec) -> Result<HostedAgent, SpawnError> {
        let request = Request::Spawn(SpawnAgent {
            agent_id: agent_id.to_string(),
            command: spec.command.clone(),
            args: spec.args.clone(),
            env: spec.env.clone(),
            cwd: spec.cwd.clone(),
        });
        // A host that was just exiting (idle) refuses the connection: start a new one, once.
        let mut attempts = 0;
        let (info, mut connection) = loop {
            attempts += 1;
            let info = self.ensure().await.map_err(SpawnError::Unavailable)?;
            match self.connect(&info).await {
                Ok(connection) => break (info, connection),
                Err(e) if attempts >= 2 => return Err(SpawnError::Unavailable(e)),
                Err(e) => tracing::info!("the agent host went away ({e}); starting a new one"),
            }
        };
        match connection.ask(request).await {
            Ok(_) => {}
            Err(CallError::Refused(refusal)) => return Err(SpawnError::Refused(refusal)),
            Err(CallError::Lost(e)) => return Err(SpawnError::Unavailable(e)),
        }
        attach_on(connection, info, agent_id).await.map_err(SpawnError::Unavailable)
    }

    /// Attaches to an agent the host already runs; its output resumes after the last line
    /// this server acknowledged.
    pub async fn attach(&self, info: &HostInfo, agent_id: &str) -> Result<HostedAgent, String> {
        let connection = self.connect(info).await?;
        attach_on(connection, info.clone(), agent_id).await
    }
}

async fn attach_on(mut connection: Connection, info: HostInfo, agent_id: &str) -> Result<HostedAgent, String> {
    let Reply::Attached(agent) = connection.call(Request::Attach { agent_id: agent_id.to_string() }).await? else {
        return Err("the agent host sent no attach answer".into());
    };
    let (lines_tx, lines) = mpsc::channel(1024);
    let (input, input_rx) = mpsc::unbounded_channel();
    let (exit_tx, exit_rx) = watch::channel(None);
    let (kill_tx, kill_rx) = oneshot::channel();
    let handle = ProcessHandle::from_parts(agent.pid, exit_rx, kill_tx);
    let Connection { reader, writer, next_id, .. } = connection;
    let exit_tx = Arc::new(exit_tx);
    let (exited_tx, exited_rx) = oneshot::channel();
    let reading = tokio::spawn(read_stream(reader, lines_tx, exit_tx.clone(), exited_tx, agent_id.to_string()));
    let queued = Arc::new(AtomicU64::new(0));
    let writing = WriteStream {
        input: input_rx,
        queued: queued.clone(),
        kill: kill_rx,
        exited: exited_rx,
        reading,
        exit: exit_tx,
    };
    tokio::spawn(write_stream(writer, writing, agent_id.to_string(), next_id));
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

/// Host → server: numbered lines into the ACP connection, then the exit.
async fn read_stream(
    mut reader: Reader,
    lines: mpsc::Sender<(u64, Vec<u8>)>,
    exit: Arc<watch::Sender<Option<ExitInfo>>>,
    exited: oneshot::Sender<()>,
    agent_id: String,
) {
    loop {
        let frame = match read_line_bounded(&mut reader, MAX_FRAME_BYTES).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(Some(Err(_))) => continue,
            Ok(None) | Err(_) => break,
        };
        // Typed, without a JSON tree per line: this is the agent's whole output stream.
        let Ok(FromHost::Notification(event)) = serde_json::from_slice::<FromHost<'static>>(&frame) else { continue };
        match event {
            Event::Output { seq, line, .. } => {
                if lines.send((seq, line.into_owned().into_bytes())).await.is_err() {
                    // Nobody reads this agent any more: detached, the agent stays in the host.
                    exit.send_if_modified(|current| {
                        current.is_none().then(|| *current = Some(lost("detached from the agent host"))).is_some()
                    });
                    return;
                }
            }
            Event::Exited { code, signal, stderr_tail, .. } => {
                let info = ExitInfo { code, signal, stderr_tail, log_file: None };
                // The output ends before the exit is known, as with a child's pipes.
                drop(lines);
                exit.send_replace(Some(info));
                let _ = exited.send(());
                return;
            }
        }
    }
    tracing::warn!(%agent_id, "lost the connection to the agent host");
    drop(lines);
    exit.send_if_modified(|current| {
        if current.is_none() {
            *current = Some(lost("the agent host went away"));
            true
        } else {
            false
        }
    });
}

struct WriteStream {
    input: mpsc::UnboundedReceiver<Input>,
    queued: Arc<AtomicU64>,
    kill: oneshot::Receiver<()>,
    /// Fires when the host reported the agent's exit (everything was read).
    exited: oneshot::Receiver<()>,
    reading: tokio::task::JoinHandle<()>,
    exit: Arc<watch::Sender<Option<ExitInfo>>>,
}

/// Server → host: stdin lines, acknowledgements, and the kill; releases the agent once its
/// exit was received.
async fn write_stream(mut writer: Writer, stream: WriteStream, agent_id: String, next_id: AtomicU64) {
    let WriteStream { mut input, queued, mut kill, mut exited, reading, exit } = stream;
    let mut killing = false;
    let mut read_ended = false;
    loop {
        // The size of the agent's line this frame carries, counted in `queued` until sent.
        let mut carried = 0;
        let frame = tokio::select! {
            item = input.recv() => match item {
                Some(Input::Write(line)) => {
                    carried = line.len() as u64 + 1;
                    ToHost::Notification(Notice::Write { agent_id: agent_id.clone(), line })
                }
                Some(Input::Ack(seq)) => ToHost::Notification(Notice::Ack { agent_id: agent_id.clone(), seq }),
                // The connection was dropped (server shutdown): the agent stays in the host.
                None => break,
            },
            asked = &mut kill, if !killing => {
                killing = true;
                // A handle dropped without asking leaves the agent running.
                if asked.is_err() {
                    continue;
                }
                let id = next_id.fetch_add(1, Ordering::SeqCst).to_string();
                ToHost::Request { id, request: Request::Kill { agent_id: agent_id.clone() } }
            }
            ended = &mut exited, if !read_ended => {
                read_ended = true;
                if ended.is_err() {
                    // The connection was lost without an exit: nothing to release.
                    continue;
                }
                // Everything was read: the host may forget the agent.
                let id = next_id.fetch_add(1, Ordering::SeqCst).to_string();
                let mut line = encode(&ToHost::Request { id, request: Request::Release { agent_id: agent_id.clone() } });
                line.push('\n');
                let _ = writer.write_all(line.as_bytes()).await;
                let _ = writer.flush().await;
                break;
            }
        };
        let mut line = encode(&frame);
        drop(frame);
        line.push('\n');
        let sent = writer.write_all(line.as_bytes()).await.is_ok() && writer.flush().await.is_ok();
        queued.fetch_sub(carried, Ordering::SeqCst);
        if !sent {
            break;
        }
    }
    // Closing our half ends the connection; the host keeps an agent that was not released.
    let _ = writer.shutdown().await;
    let still_running = exit.borrow().is_none();
    if still_running && input.is_closed() {
        reading.abort();
        exit.send_replace(Some(lost("detached from the agent host")));
    }
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

/// The `hosted` runtime: agents run in the agent host and outlive the server.
impl Runtime for AgentHost {
    fn name(&self) -> &'static str {
        "hosted"
    }

    fn spawn<'a>(
        &'a self,
        agent_id: &'a str,
        spec: &'a LaunchSpec,
        _log: Option<PathBuf>,
    ) -> BoxFuture<'a, Result<Launched, SpawnError>> {
        // The host keeps the stderr tail itself (it is in the exit report).
        Box::pin(async move { AgentHost::spawn(self, agent_id, spec).await.map(HostedAgent::launched) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<RunningAgent>, String>> {
        Box::pin(async move {
            // No host running: it has no agents.
            let Some(info) = self.existing().await else { return Ok(Vec::new()) };
            let agents = AgentHost::list(self, &info).await?;
            Ok(agents
                .into_iter()
                .map(|a| RunningAgent { agent_id: a.agent_id, pid: a.pid, running: a.running })
                .collect())
        })
    }

    fn reattach<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<Launched, String>> {
        Box::pin(async move {
            let info = self.existing().await.ok_or("the agent host is gone")?;
            self.attach(&info, agent_id).await.map(HostedAgent::launched)
        })
    }

    fn release<'a>(&'a self, agent_id: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let Some(info) = self.existing().await else { return Ok(()) };
            AgentHost::release(self, &info, agent_id).await
        })
    }
}
