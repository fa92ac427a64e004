//! ACP client side: JSON-RPC 2.0 over the agent's stdin/stdout, one JSON object per line.
//!
//! Everything the agent sends goes through one ordered queue. Notifications are applied one
//! after the other, and a response is delivered to its caller only after every message that
//! arrived before it was applied, so when `session/prompt` returns, all of the turn's
//! `session/update`s are already journaled. Requests from the agent (permission, fs) are
//! handled concurrently, since answering one may wait for a user.
//!
//! This module is the connection: calls and their answers, the reader, dispatch and writer
//! tasks. How one line the agent wrote becomes a message is `decode`.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};

use super::runtime::{plain_text, ProcessHandle};
use super::transport::{AgentStdin, AgentStdout, Input, LineStream, Transport};

pub use super::transport::{read_line_bounded, MAX_LINE_BYTES};

mod decode;
pub mod outgoing;

pub use decode::{parse_incoming, Incoming, Params, RawParams};

/// Requests from the agent handled at once (a permission request may wait hours for a user);
/// more are answered with an error at once instead of piling up.
pub const MAX_AGENT_REQUESTS: usize = 64;

/// Most bytes waiting to be written to one agent's stdin (requests, notifications and answers
/// the agent has not read yet). An agent that leaves more unread is killed, with the reason
/// in the session, instead of growing batond without bound (a runtime that relays the lines
/// applies its own bound where the agent runs).
pub const MAX_QUEUED_TO_AGENT: u64 = 64 * 1024 * 1024;

/// `fs/read_text_file` requests of one agent served at once (each may hold a file of up to
/// `MAX_READ_BYTES` in memory until its answer is queued); more wait their turn.
pub const MAX_CONCURRENT_FILE_READS: usize = 2;

/// JSON-RPC's code for a message that is not valid JSON.
pub const PARSE_ERROR: i64 = -32700;

/// The buffer an agent's output is read through. A streamed chunk's line is a few hundred
/// bytes, and a pipe hands over what it holds up to this: a burst still reads many lines per
/// call, while an idle agent holds 4 KiB instead of tokio's default 8.
const READ_BUFFER_BYTES: usize = 4 * 1024;

/// An agent that sent nothing for this long has gone quiet: the updates it sent last are
/// waited for (they were committed long ago) so that nothing of them is held while it idles.
const QUIET: std::time::Duration = std::time::Duration::from_millis(250);

/// An output line of the agent, decoded, with its number. Boxed: the channel between the
/// reader and the dispatcher keeps a block of slots for its whole life, whose size is the
/// slot's (an unboxed message made it 9 KiB per agent).
type Line = (u64, Box<Incoming>);

/// A JSON-RPC error object as an agent sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    pub fn method_not_found(method: &str) -> Self {
        RpcError { code: -32601, message: "Method not found".into(), data: Some(json!({"method": method})) }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(-32602, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(-32603, message)
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // What the agent wrote ends up in errors shown to the user: without its colour codes.
        write!(f, "{} ({})", plain_text(&self.message), self.code)?;
        if let Some(details) = self.data.as_ref().and_then(|d| d.get("details")).and_then(Value::as_str) {
            write!(f, ": {}", plain_text(details))?;
        }
        Ok(())
    }
}

/// Why a call to the agent did not return a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("agent answered with an error: {0}")]
    Rpc(RpcError),
    /// The agent's process or pipes are gone (before or during the call).
    #[error("agent connection lost: {0}")]
    Transport(String),
    #[error("agent did not answer {method} within {after:?}")]
    Timeout { method: String, after: Duration },
}

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What the server does with messages the agent sends.
pub trait AgentHandler: Send + Sync + 'static {
    /// A notification (`session/update`...). Awaited before the next message is processed.
    /// `seq` numbers the agent's output lines (per process, from 1).
    fn notification(self: Arc<Self>, method: String, params: Params, seq: u64) -> BoxFuture<()>;
    /// A request from the agent. Runs concurrently; its result is sent back as the response.
    fn request(self: Arc<Self>, method: String, params: Value) -> BoxFuture<Result<Value, RpcError>>;
    /// Completes once every notification handled so far has taken full effect. Awaited before
    /// a response is delivered, so a caller never sees an answer before the updates that
    /// preceded it.
    fn flush(self: Arc<Self>) -> BoxFuture<()>;
    /// An answer to a request this connection did not send: one sent before a server restart
    /// (a durable stream). `done` marks the line handled when dropped.
    fn unmatched_response(self: Arc<Self>, result: Result<Value, RpcError>, done: Option<LineDone>) -> BoxFuture<()> {
        let _ = (result, done);
        Box::pin(async {})
    }
    /// A message from the agent that could not be decoded and was answered with an error (or
    /// failed the call it answered): `what` says which, for the user. Awaited in order.
    fn unreadable(self: Arc<Self>, what: String) -> BoxFuture<()> {
        let _ = what;
        Box::pin(async {})
    }
}

type Answer = (Result<Value, CallError>, Option<LineDone>);
type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Answer>>>>;

/// Which output lines of a durable stream have taken full effect, so that its keeper may drop
/// them: notifications once their journal writes committed, requests once answered, responses
/// once their caller is done with them.
struct Cursor {
    in_flight: BTreeSet<u64>,
    /// Highest line dispatched.
    seen: u64,
    /// Every notification up to this line is committed.
    flushed: u64,
    acked: u64,
    /// The connection's output queue: an acknowledgement follows the answers sent before it.
    ack: mpsc::UnboundedSender<Input>,
    /// No more acknowledgements (the server is going away mid-stream).
    frozen: bool,
}

impl Cursor {
    fn low_water(&self) -> u64 {
        match self.in_flight.first() {
            Some(first) => self.flushed.min(first.saturating_sub(1)),
            None => self.flushed,
        }
    }

    fn maybe_ack(&mut self) {
        let low = self.low_water();
        if low > self.acked && !self.frozen {
            self.acked = low;
            let _ = self.ack.send(Input::Ack(low));
        }
    }
}

type SharedCursor = Arc<Mutex<Cursor>>;

/// Marks one line of a durable stream handled when dropped.
pub struct LineDone {
    cursor: SharedCursor,
    seq: u64,
}

impl Drop for LineDone {
    fn drop(&mut self) {
        if let Ok(mut cursor) = self.cursor.lock() {
            cursor.in_flight.remove(&self.seq);
            cursor.maybe_ack();
        }
    }
}

fn begin_line(cursor: &Option<SharedCursor>, seq: u64) -> Option<LineDone> {
    let cursor = cursor.as_ref()?;
    cursor.lock().ok()?.in_flight.insert(seq);
    Some(LineDone { cursor: cursor.clone(), seq })
}

/// How a connection over a durable stream that a previous server already read from differs
/// from a fresh one.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamOptions {
    /// First JSON-RPC id: ids of a previous server's requests must not be reused.
    pub id_base: i64,
    /// Notifications up to this line were applied by a previous server: skipped.
    pub skip_notifications_through: u64,
}

/// What became of the requests written to a child agent's stdin: it tells a request the agent
/// never read (the write failed, or the bytes were still in the pipe when it exited) from one
/// it read and did not answer.
struct Delivery {
    /// Bytes written to the pipe so far.
    written: AtomicU64,
    /// By request id: the offset its line ends at once written, None when it never was.
    requests: Mutex<HashMap<i64, Option<u64>>>,
    settled: tokio::sync::Notify,
    /// Our end of the agent's stdin pipe (shared with the writer), to ask how many bytes are
    /// unread.
    pipe: Arc<AgentStdin>,
}

impl Delivery {
    fn settle(&self, id: i64, end: Option<u64>) {
        if let Ok(mut requests) = self.requests.lock() {
            requests.insert(id, end);
        }
        self.settled.notify_waiters();
    }

    /// Bytes written to the pipe that nobody read (yet).
    fn unread(&self) -> Option<u64> {
        use std::os::fd::AsRawFd;
        let fd = self.pipe.as_raw_fd();
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int; on Linux it works on either end of a pipe.
        let rc = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut unread) };
        (rc == 0).then_some(unread.max(0) as u64)
    }
}

/// The agent's stdin as the writer writes it, while [`Delivery`] asks the same descriptor how
/// much is unread (one descriptor where a duplicate took two). Written through tokio's
/// readiness calls, which take the pipe by reference.
struct SharedPipe(Arc<AgentStdin>);

impl AsyncWrite for SharedPipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        loop {
            std::task::ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(buf) {
                // The readiness was stale: it is cleared, and the next poll waits for it.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                written => return std::task::Poll::Ready(written),
            }
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        // A pipe has no buffer of ours to flush.
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// The id of a request line as `send_request` writes it (None for anything else).
fn request_id_of(line: &str) -> Option<i64> {
    let rest = line.strip_prefix(REQUEST_PREFIX)?;
    let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '-'))?;
    rest[digits..].starts_with(",\"method\":").then(|| rest[..digits].parse().ok()).flatten()
}

const REQUEST_PREFIX: &str = "{\"jsonrpc\":\"2.0\",\"id\":";

/// The way to the agent's stdin: the queue, the bytes in it, and the process to kill when
/// too much waits.
struct Queue {
    out: mpsc::UnboundedSender<Input>,
    queued: Arc<AtomicU64>,
    process: Option<ProcessHandle>,
}

/// A live JSON-RPC connection to one agent process.
#[derive(Clone)]
pub struct AcpConnection {
    out: mpsc::UnboundedSender<Input>,
    /// Bytes in `out` not written yet, bounded by [`MAX_QUEUED_TO_AGENT`].
    queued: Arc<AtomicU64>,
    /// The agent process, killed when it leaves more than the bound unread.
    process: Option<ProcessHandle>,
    /// Serves `fs/read_text_file` [`MAX_CONCURRENT_FILE_READS`] at a time.
    file_reads: Arc<tokio::sync::Semaphore>,
    pending: Pending,
    next_id: Arc<AtomicI64>,
    closed: Arc<AtomicBool>,
    garbage_lines: Arc<AtomicI64>,
    /// Becomes true once the agent's output ended and everything it sent was handled.
    drained: watch::Receiver<bool>,
    cursor: Option<SharedCursor>,
    delivery: Option<Arc<Delivery>>,
}

impl AcpConnection {
    /// Starts the reader, dispatcher and writer tasks over the agent's pipes.
    pub fn start<R, W>(stdout: R, stdin: W, handler: Arc<dyn AgentHandler>) -> AcpConnection
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out_tx, out_rx) = mpsc::unbounded_channel::<Input>();
        let closed = Arc::new(AtomicBool::new(false));
        let garbage_lines = Arc::new(AtomicI64::new(0));
        let queued = Arc::new(AtomicU64::new(0));
        // Bounded: a flood from the agent waits on the pipe instead of growing memory.
        let (in_tx, in_rx) = mpsc::channel::<Line>(1024);
        tokio::spawn(write_loop(stdin, out_rx, closed.clone(), queued.clone(), None));
        tokio::spawn(read_loop(BufReader::with_capacity(READ_BUFFER_BYTES, stdout), in_tx, garbage_lines.clone()));
        let queue = Queue { out: out_tx, queued, process: None };
        Self::assemble(in_rx, queue, closed, garbage_lines, handler, None, StreamOptions::default())
    }

    /// [`Self::start`] over a child's pipes, also knowing which requests reached the agent
    /// ([`Self::reached_agent`]); `process` is killed if it leaves more than
    /// [`MAX_QUEUED_TO_AGENT`] bytes unread.
    pub fn start_child(
        stdout: AgentStdout,
        stdin: AgentStdin,
        handler: Arc<dyn AgentHandler>,
        process: ProcessHandle,
    ) -> AcpConnection {
        let stdin = Arc::new(stdin);
        let delivery = Arc::new(Delivery {
            written: AtomicU64::new(0),
            requests: Mutex::new(HashMap::new()),
            settled: tokio::sync::Notify::new(),
            pipe: stdin.clone(),
        });
        let (out_tx, out_rx) = mpsc::unbounded_channel::<Input>();
        let closed = Arc::new(AtomicBool::new(false));
        let garbage_lines = Arc::new(AtomicI64::new(0));
        let queued = Arc::new(AtomicU64::new(0));
        let (in_tx, in_rx) = mpsc::channel::<Line>(1024);
        tokio::spawn(write_loop(SharedPipe(stdin), out_rx, closed.clone(), queued.clone(), Some(delivery.clone())));
        tokio::spawn(read_loop(BufReader::with_capacity(READ_BUFFER_BYTES, stdout), in_tx, garbage_lines.clone()));
        let queue = Queue { out: out_tx, queued, process: Some(process) };
        let mut connection =
            Self::assemble(in_rx, queue, closed, garbage_lines, handler, None, StreamOptions::default());
        connection.delivery = Some(delivery);
        connection
    }

    /// Whether the request `id` reached the agent: false only when it provably did not (its
    /// write failed, or its bytes were still unread in the pipe when the agent's output ended).
    /// Asked after the connection was lost, to tell a message that can be sent again.
    pub async fn reached_agent(&self, id: i64) -> bool {
        let Some(delivery) = &self.delivery else {
            return true;
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let settled = delivery.settled.notified();
            let state = delivery.requests.lock().ok().and_then(|r| r.get(&id).copied());
            match state {
                Some(None) => return false,
                Some(Some(end)) => {
                    let Some(unread) = delivery.unread() else {
                        return true;
                    };
                    let consumed = delivery.written.load(Ordering::SeqCst).saturating_sub(unread);
                    return consumed >= end;
                }
                // Still in the writer's queue: wait until it was written or given up.
                None => {
                    if tokio::time::timeout_at(deadline, settled).await.is_err() {
                        return true;
                    }
                }
            }
        }
    }

    /// Starts the connection over the transport a runtime gave (the one way the orchestrator
    /// connects to an agent). `process` is the agent, killed if it leaves more than
    /// [`MAX_QUEUED_TO_AGENT`] bytes unread; `options` apply to a durable stream only.
    pub fn connect(
        transport: Transport,
        handler: Arc<dyn AgentHandler>,
        options: StreamOptions,
        process: ProcessHandle,
    ) -> AcpConnection {
        match transport {
            Transport::Pipes { stdout, stdin } => Self::start_child(stdout, stdin, handler, process),
            Transport::Stream(stream) => Self::start_stream(stream, handler, options, Some(process)),
        }
    }

    /// Starts the connection over a durable stream: numbered lines in, stdin lines and
    /// acknowledgements out.
    /// `process` is killed if it leaves more than [`MAX_QUEUED_TO_AGENT`] bytes unsent.
    pub fn start_stream(
        stream: LineStream,
        handler: Arc<dyn AgentHandler>,
        options: StreamOptions,
        process: Option<ProcessHandle>,
    ) -> AcpConnection {
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Input>();
        let closed = Arc::new(AtomicBool::new(false));
        let garbage_lines = Arc::new(AtomicI64::new(0));
        let (in_tx, in_rx) = mpsc::channel::<Line>(1024);
        let input = stream.input;
        let cursor = Arc::new(Mutex::new(Cursor {
            in_flight: BTreeSet::new(),
            seen: 0,
            flushed: 0,
            acked: 0,
            ack: out_tx.clone(),
            frozen: false,
        }));
        let writer_closed = closed.clone();
        // Lines are counted until they were passed on (where the agent runs, what it
        // leaves unread there itself, `MAX_QUEUED_INPUT`).
        let queued = stream.queued;
        tokio::spawn(async move {
            while let Some(item) = out_rx.recv().await {
                if input.send(item).is_err() {
                    writer_closed.store(true, Ordering::SeqCst);
                    break;
                }
            }
        });
        let mut lines = stream.lines;
        let garbage = garbage_lines.clone();
        tokio::spawn(async move {
            while let Some((seq, line)) = lines.recv().await {
                if let Some(message) = parse_line(&line, &garbage) {
                    if in_tx.send((seq, Box::new(message))).await.is_err() {
                        break;
                    }
                }
            }
        });
        let queue = Queue { out: out_tx, queued, process };
        Self::assemble(in_rx, queue, closed, garbage_lines, handler, Some(cursor), options)
    }

    fn assemble(
        in_rx: mpsc::Receiver<Line>,
        queue: Queue,
        closed: Arc<AtomicBool>,
        garbage_lines: Arc<AtomicI64>,
        handler: Arc<dyn AgentHandler>,
        cursor: Option<SharedCursor>,
        options: StreamOptions,
    ) -> AcpConnection {
        let (drained_tx, drained) = watch::channel(false);
        let connection = AcpConnection {
            out: queue.out,
            queued: queue.queued,
            process: queue.process,
            file_reads: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_FILE_READS)),
            pending: Arc::default(),
            next_id: Arc::new(AtomicI64::new(options.id_base)),
            closed,
            garbage_lines,
            drained,
            cursor,
            delivery: None,
        };
        tokio::spawn(dispatch_loop(in_rx, handler, connection.clone(), drained_tx, options.skip_notifications_through));
        connection
    }

    /// Waits until the agent's output ended and every message it sent was applied, at most
    /// `bound` (a grandchild may hold the pipe open after the agent died).
    pub async fn wait_drained(&self, bound: Duration) -> bool {
        let mut drained = self.drained.clone();
        tokio::time::timeout(bound, drained.wait_for(|d| *d)).await.is_ok_and(|r| r.is_ok())
    }

    /// Stops acknowledging a durable stream: the server is going away, and lines whose
    /// updates may not be committed must stay where the agent runs, for the next server.
    pub fn freeze_acks(&self) {
        if let Some(Ok(mut cursor)) = self.cursor.as_ref().map(|c| c.lock()) {
            cursor.frozen = true;
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Lines from the agent that were not JSON-RPC (or too long) and were skipped.
    pub fn garbage_lines(&self) -> i64 {
        self.garbage_lines.load(Ordering::Relaxed)
    }

    /// Sends a request and waits for its result, at most `timeout` (None: no bound, for
    /// prompts that may run for hours; they end by answer, cancel or process exit).
    pub async fn request(&self, method: &str, params: Value, timeout: Option<Duration>) -> Result<Value, CallError> {
        let pending = self.send_request(method, params)?;
        match timeout {
            Some(after) => match tokio::time::timeout(after, pending.response).await {
                Ok(answer) => answer
                    .map(|(result, _)| result)
                    .unwrap_or_else(|_| Err(CallError::Transport("agent connection closed".into()))),
                Err(_) => {
                    if let Ok(mut map) = self.pending.lock() {
                        map.remove(&pending.id);
                    }
                    Err(CallError::Timeout { method: method.to_string(), after })
                }
            },
            None => pending.wait().await,
        }
    }

    /// Writes a request now and returns a handle to its answer. Fails at once with
    /// `Transport` when the connection is already gone, before anything reached the agent.
    pub fn send_request(&self, method: &str, params: Value) -> Result<PendingCall, CallError> {
        if self.is_closed() {
            return Err(CallError::Transport("agent connection closed".into()));
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().map_err(|_| CallError::Transport("poisoned".into()))?.insert(id, tx);
        // Written by hand so that the writer can tell a request line by its start.
        let line = format!("{REQUEST_PREFIX}{id},\"method\":{},\"params\":{params}}}", Value::from(method));
        if let Err(e) = self.enqueue(line) {
            if let Ok(mut map) = self.pending.lock() {
                map.remove(&id);
            }
            return Err(e);
        }
        Ok(PendingCall { id, response: rx })
    }

    pub fn notify(&self, method: &str, params: Value) -> Result<(), CallError> {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        self.enqueue(line)
    }

    fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        let line = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}),
        };
        let _ = self.enqueue(line.to_string());
    }

    /// Queues a line for the agent's stdin, within [`MAX_QUEUED_TO_AGENT`]: a line that would
    /// go over it is dropped and the agent, which is not reading, is killed with the reason.
    fn enqueue(&self, line: String) -> Result<(), CallError> {
        let size = line.len() as u64 + 1;
        let waiting = self.queued.fetch_add(size, Ordering::SeqCst);
        if waiting + size > MAX_QUEUED_TO_AGENT && waiting > 0 {
            self.queued.fetch_sub(size, Ordering::SeqCst);
            let reason = format!(
                "killed by batond: the agent did not read its input ({} bytes waiting, at most {MAX_QUEUED_TO_AGENT})",
                waiting + size
            );
            self.overflow(&reason);
            return Err(CallError::Transport(reason));
        }
        self.out.send(Input::Write(line)).map_err(|_| {
            self.queued.fetch_sub(size, Ordering::SeqCst);
            CallError::Transport("agent stdin closed".into())
        })
    }

    /// The agent left too much unread: nothing more is sent, every call fails, and the
    /// process is killed with `reason` (once).
    fn overflow(&self, reason: &str) {
        let first = !self.closed.load(Ordering::SeqCst);
        self.fail_all(reason);
        let Some(process) = self.process.clone().filter(|_| first) else {
            return;
        };
        tracing::warn!(pid = process.pid(), "{reason}");
        let reason = reason.to_string();
        tokio::spawn(async move {
            process.kill_because(reason).await;
        });
    }

    fn fail_all(&self, reason: &str) {
        self.closed.store(true, Ordering::SeqCst);
        let drained: Vec<_> = match self.pending.lock() {
            Ok(mut map) => map.drain().collect(),
            Err(_) => Vec::new(),
        };
        for (_, waiter) in drained {
            let _ = waiter.send((Err(CallError::Transport(reason.to_string())), None));
        }
    }
}

/// A request written to the agent, whose answer has not been read yet.
pub struct PendingCall {
    id: i64,
    response: oneshot::Receiver<Answer>,
}

impl PendingCall {
    /// The JSON-RPC id the request was sent with.
    pub fn id(&self) -> i64 {
        self.id
    }

    pub async fn wait(self) -> Result<Value, CallError> {
        self.wait_held().await.0
    }

    /// The answer, and (durable streams) a guard to drop once the answer has taken full effect.
    pub async fn wait_held(self) -> (Result<Value, CallError>, Option<LineDone>) {
        self.response.await.unwrap_or_else(|_| (Err(CallError::Transport("agent connection closed".into())), None))
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut stdin: W,
    mut lines: mpsc::UnboundedReceiver<Input>,
    closed: Arc<AtomicBool>,
    queued: Arc<AtomicU64>,
    delivery: Option<Arc<Delivery>>,
) {
    let done_with = |line: &str| {
        queued.fetch_sub(line.len() as u64 + 1, Ordering::SeqCst);
    };
    let never_written = |line: &str| {
        if let (Some(delivery), Some(id)) = (&delivery, request_id_of(line)) {
            delivery.settle(id, None);
        }
    };
    while let Some(item) = lines.recv().await {
        // Nothing keeps a pipe's lines: acknowledgements mean nothing here.
        let Input::Write(mut line) = item else { continue };
        if closed.load(Ordering::SeqCst) {
            // The agent's output ended: nothing written now would be read.
            done_with(&line);
            never_written(&line);
            continue;
        }
        line.push('\n');
        // Written piece by piece, each counted once the pipe took it: part of a long line may
        // sit unread in the pipe, and `reached_agent` weighs the unread bytes against these.
        let mut sent = 0;
        while sent < line.len() {
            match stdin.write(&line.as_bytes()[sent..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    sent += n;
                    if let Some(delivery) = &delivery {
                        delivery.written.fetch_add(n as u64, Ordering::SeqCst);
                    }
                }
            }
        }
        let written = sent == line.len() && stdin.flush().await.is_ok();
        queued.fetch_sub(line.len() as u64, Ordering::SeqCst);
        if !written {
            closed.store(true, Ordering::SeqCst);
            never_written(&line);
            break;
        }
        if let Some(delivery) = &delivery {
            if let Some(id) = request_id_of(&line) {
                delivery.settle(id, Some(delivery.written.load(Ordering::SeqCst)));
            }
        }
    }
    // Whatever was still queued never reached the agent.
    lines.close();
    while let Ok(item) = lines.try_recv() {
        if let Input::Write(line) = item {
            done_with(&line);
            never_written(&line);
        }
    }
}

fn parse_line(line: &[u8], garbage: &AtomicI64) -> Option<Incoming> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let message = parse_incoming(line);
    let preview = || String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
    match &message {
        None => {
            garbage.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(preview = %preview(), "skipped a line from the agent that is not JSON-RPC");
        }
        Some(Incoming::Unreadable { id, method, reason, .. }) => {
            garbage.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%id, ?method, %reason, preview = %preview(), "an unreadable message from the agent");
        }
        Some(_) => {}
    }
    message
}

async fn read_loop<R: AsyncBufRead + Unpin>(mut reader: R, incoming: mpsc::Sender<Line>, garbage: Arc<AtomicI64>) {
    let mut seq = 0u64;
    loop {
        let line = match read_line_bounded(&mut reader, MAX_LINE_BYTES).await {
            Ok(Some(Ok(line))) => line,
            Ok(Some(Err(length))) => {
                garbage.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(length, "dropped an over-long line from the agent");
                continue;
            }
            Ok(None) | Err(_) => break,
        };
        seq += 1;
        if let Some(message) = parse_line(&line, &garbage) {
            if incoming.send((seq, Box::new(message))).await.is_err() {
                break;
            }
        }
    }
}

async fn dispatch_loop(
    mut incoming: mpsc::Receiver<Line>,
    handler: Arc<dyn AgentHandler>,
    connection: AcpConnection,
    drained: watch::Sender<bool>,
    skip_notifications_through: u64,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_AGENT_REQUESTS));
    let cursor = connection.cursor.clone();
    let seen = |seq: u64| {
        if let Some(Ok(mut cursor)) = cursor.as_ref().map(|c| c.lock()) {
            cursor.seen = cursor.seen.max(seq);
        }
    };
    // After a flush every notification dispatched so far is committed.
    let flushed = |upto: u64| {
        if let Some(Ok(mut cursor)) = cursor.as_ref().map(|c| c.lock()) {
            cursor.flushed = cursor.flushed.max(upto);
            cursor.maybe_ack();
        }
    };
    // One timer for the loop's life, set once a quiet spell can begin and moved on only when
    // it fires: a timer made for each message cost the streaming path several microseconds.
    let quiet = tokio::time::sleep(QUIET);
    tokio::pin!(quiet);
    let mut last_message = tokio::time::Instant::now();
    let mut last_seq = 0;
    // Something was dispatched since the last quiet flush.
    let mut unflushed = false;
    loop {
        let next = match incoming.try_recv() {
            Ok(next) => Some(next),
            Err(mpsc::error::TryRecvError::Disconnected) => None,
            Err(mpsc::error::TryRecvError::Empty) if !unflushed => incoming.recv().await,
            Err(mpsc::error::TryRecvError::Empty) => loop {
                tokio::select! {
                    next = incoming.recv() => break next,
                    () = &mut quiet => {
                        let due = last_message + QUIET;
                        if tokio::time::Instant::now() < due {
                            quiet.as_mut().reset(due);
                            continue;
                        }
                        // Quiet: what the handler still holds of the updates (kept until
                        // their commit is seen, to write them again if the disk was full) goes.
                        handler.clone().flush().await;
                        // A durable stream's keeper may drop those lines now, not only at
                        // the next answer.
                        flushed(last_seq);
                        unflushed = false;
                        break incoming.recv().await;
                    }
                }
            },
        };
        let Some((seq, message)) = next else { break };
        last_message = tokio::time::Instant::now();
        last_seq = seq;
        if !unflushed {
            unflushed = true;
            quiet.as_mut().reset(last_message + QUIET);
        }
        match *message {
            Incoming::Notification { method, params } => {
                seen(seq);
                if seq <= skip_notifications_through {
                    tracing::debug!(seq, "skipped a notification a previous server already applied");
                    continue;
                }
                handler.clone().notification(method, params, seq).await
            }
            Incoming::Request { id, method, params } => {
                let done = begin_line(&cursor, seq);
                seen(seq);
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    let message =
                        format!("too many requests in flight (at most {MAX_AGENT_REQUESTS}); {method} refused");
                    connection.respond(id, Err(RpcError::internal(message)));
                    continue;
                };
                let handler = handler.clone();
                let connection = connection.clone();
                tokio::spawn(async move {
                    // A file's text is held until its answer is queued: a few at a time.
                    let reading = match method.as_str() {
                        "fs/read_text_file" => connection.file_reads.clone().acquire_owned().await.ok(),
                        _ => None,
                    };
                    if reading.is_some() && connection.is_closed() {
                        // Nothing more reaches the agent (gone, or killed for not reading):
                        // a read would only hold memory.
                        return;
                    }
                    let result = handler.request(method, params).await;
                    connection.respond(id, result);
                    drop(reading);
                    drop(permit);
                    drop(done);
                });
            }
            Incoming::Response { id, result } => {
                let done = begin_line(&cursor, seq);
                seen(seq);
                handler.clone().flush().await;
                flushed(seq);
                if let Some(Ok(mut requests)) = connection.delivery.as_ref().map(|d| d.requests.lock()) {
                    requests.remove(&id);
                }
                let waiter = connection.pending.lock().ok().and_then(|mut map| map.remove(&id));
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send((result.map_err(CallError::Rpc), done));
                    }
                    None => handler.clone().unmatched_response(result, done).await,
                }
            }
            Incoming::Unreadable { id, method, answer, reason } => {
                let done = begin_line(&cursor, seq);
                seen(seq);
                let ours = method.is_none().then(|| id.as_i64()).flatten().and_then(|n| {
                    connection.pending.lock().ok().and_then(|mut map| map.remove(&n)).map(|waiter| (n, waiter))
                });
                let error = RpcError {
                    code: PARSE_ERROR,
                    message: "Parse error".into(),
                    data: Some(json!({"details": reason})),
                };
                if let Some((n, waiter)) = ours {
                    // The answer to one of our calls: the call fails with the reason.
                    handler.clone().flush().await;
                    flushed(seq);
                    if let Some(Ok(mut requests)) = connection.delivery.as_ref().map(|d| d.requests.lock()) {
                        requests.remove(&n);
                    }
                    let what = format!("The agent's answer to a request could not be read ({reason}).");
                    handler.clone().unreadable(what).await;
                    let _ = waiter.send((Err(CallError::Rpc(error)), done));
                    continue;
                }
                if answer && method.is_none() {
                    // An answer nobody here waits for: a previous server's call (durable stream).
                    handler.clone().flush().await;
                    flushed(seq);
                    handler.clone().unmatched_response(Err(error), done).await;
                    continue;
                }
                let what = match &method {
                    Some(method) => format!(
                        "The agent sent a {method} request that could not be read ({reason}); it was answered with \
                         an error."
                    ),
                    None => format!(
                        "The agent sent a message that could not be read ({reason}); it was answered \
                         with an error."
                    ),
                };
                connection.respond(id, Err(error));
                drop(done);
                handler.clone().unreadable(what).await;
            }
        }
    }
    connection.fail_all("the agent closed its output");
    handler.flush().await;
    let last = cursor.as_ref().and_then(|c| c.lock().ok().map(|c| c.seen)).unwrap_or(0);
    flushed(last);
    drained.send_replace(true);
}

#[cfg(test)]
pub(crate) mod tests {

    #[test]
    fn an_agents_error_is_shown_without_its_colour_codes() {
        let mut error = super::RpcError::new(-32603, "\x1b[31mInternal error\x1b[0m");
        error.data = Some(serde_json::json!({"details": "\x1b[2mquota\x1b[0m exceeded"}));
        assert_eq!(error.to_string(), "Internal error (-32603): quota exceeded");
    }

    use super::*;
    use tokio::io::AsyncBufReadExt;

    #[tokio::test]
    async fn bounded_reader_drops_long_lines_and_keeps_the_rest() {
        let input = format!("{}\nshort\n{}\nlast", "x".repeat(100), "y".repeat(50));
        let mut reader = BufReader::with_capacity(16, input.as_bytes());
        assert_eq!(read_line_bounded(&mut reader, 64).await.unwrap(), Some(Err(100)));
        assert_eq!(read_line_bounded(&mut reader, 64).await.unwrap(), Some(Ok(b"short".to_vec())));
        assert_eq!(read_line_bounded(&mut reader, 64).await.unwrap(), Some(Ok(vec![b'y'; 50])));
        assert_eq!(read_line_bounded(&mut reader, 64).await.unwrap(), Some(Ok(b"last".to_vec())));
        assert_eq!(read_line_bounded(&mut reader, 64).await.unwrap(), None);
    }

    /// Answers no request (like permission requests nobody answers).
    pub(crate) struct Silent;

    impl AgentHandler for Silent {
        fn notification(self: Arc<Self>, _: String, _: Params, _: u64) -> BoxFuture<()> {
            Box::pin(async {})
        }
        fn request(self: Arc<Self>, _: String, _: Value) -> BoxFuture<Result<Value, RpcError>> {
            Box::pin(std::future::pending())
        }
        fn flush(self: Arc<Self>) -> BoxFuture<()> {
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn requests_from_the_agent_in_flight_are_bounded() {
        let (mut agent_out, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, agent_in) = tokio::io::duplex(1 << 20);
        let _connection = AcpConnection::start(server_in, server_out, Arc::new(Silent));
        let extra = 10;
        for id in 0..MAX_AGENT_REQUESTS + extra {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission", "params": {}});
            agent_out.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        }
        let mut answers = BufReader::new(agent_in).lines();
        for _ in 0..extra {
            let line =
                tokio::time::timeout(Duration::from_secs(5), answers.next_line()).await.unwrap().unwrap().unwrap();
            let answer: Value = serde_json::from_str(&line).unwrap();
            assert!(answer["error"]["message"].as_str().unwrap().contains("too many requests"), "{answer}");
            assert!(answer["id"].as_u64().unwrap() >= MAX_AGENT_REQUESTS as u64);
        }
    }

    /// Counts the notifications it is given, and tells how many were handled at each flush.
    struct Counting {
        notified: AtomicU64,
        flushes: mpsc::UnboundedSender<u64>,
    }

    impl AgentHandler for Counting {
        fn notification(self: Arc<Self>, _: String, _: Params, _: u64) -> BoxFuture<()> {
            self.notified.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {})
        }
        fn request(self: Arc<Self>, _: String, _: Value) -> BoxFuture<Result<Value, RpcError>> {
            Box::pin(std::future::pending())
        }
        fn flush(self: Arc<Self>) -> BoxFuture<()> {
            let _ = self.flushes.send(self.notified.load(Ordering::SeqCst));
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn an_agent_gone_quiet_has_what_its_updates_hold_flushed_without_an_answer_to_wait_for() {
        let (mut agent_out, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, _agent_in) = tokio::io::duplex(1 << 16);
        let (flushes, mut flushed) = mpsc::unbounded_channel();
        let handler = Arc::new(Counting { notified: AtomicU64::new(0), flushes });
        let _connection = AcpConnection::start(server_in, server_out, handler);
        for n in 0..3 {
            let line = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": format!("part {n}")}}}});
            agent_out.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        }
        // No response comes (the only other thing a flush waits for): the agent is quiet.
        let all_three = async {
            while let Some(handled) = flushed.recv().await {
                if handled == 3 {
                    return true;
                }
            }
            false
        };
        let flushed_all = tokio::time::timeout(Duration::from_secs(5), all_three).await;
        assert_eq!(flushed_all, Ok(true), "a flush once the three updates were handled and the agent went quiet");
    }

    /// Answers requests only once the test opens the gate.
    struct Gated(tokio::sync::Semaphore);

    impl AgentHandler for Gated {
        fn notification(self: Arc<Self>, _: String, _: Params, _: u64) -> BoxFuture<()> {
            Box::pin(async {})
        }
        fn request(self: Arc<Self>, _: String, _: Value) -> BoxFuture<Result<Value, RpcError>> {
            Box::pin(async move {
                let _ = self.0.acquire().await;
                Ok(json!({}))
            })
        }
        fn flush(self: Arc<Self>) -> BoxFuture<()> {
            Box::pin(async {})
        }
    }

    #[tokio::test]
    async fn stream_lines_are_acknowledged_only_once_they_took_effect() {
        let (lines, lines_rx) = mpsc::channel(16);
        let (input, mut host) = mpsc::unbounded_channel();
        let handler = Arc::new(Gated(tokio::sync::Semaphore::new(0)));
        let options = StreamOptions { id_base: 1000, skip_notifications_through: 0 };
        let stream = LineStream { lines: lines_rx, input, queued: Arc::default() };
        let connection = AcpConnection::start_stream(stream, handler.clone(), options, None);
        let line = |v: Value| v.to_string().into_bytes();
        let update = json!({"jsonrpc": "2.0", "method": "session/update", "params": {}});
        lines.send((1, line(update.clone()))).await.unwrap();
        lines
            .send((2, line(json!({"jsonrpc": "2.0", "id": "p", "method": "session/request_permission"}))))
            .await
            .unwrap();
        lines.send((3, line(update))).await.unwrap();
        // An answer nobody waits for (a previous server's request) is a flush point.
        lines.send((4, line(json!({"jsonrpc": "2.0", "id": 7, "result": {}})))).await.unwrap();
        let first = tokio::time::timeout(Duration::from_secs(5), host.recv()).await.unwrap().unwrap();
        assert!(matches!(first, Input::Ack(1)), "{first:?}");
        // Nothing else can happen until the request is answered.
        assert!(host.try_recv().is_err(), "the unanswered request (line 2) holds the acknowledgement back");
        handler.0.add_permits(1);
        let mut rest = Vec::new();
        while rest.len() < 2 {
            let item = tokio::time::timeout(Duration::from_secs(5), host.recv()).await.unwrap().unwrap();
            rest.push(item);
        }
        assert!(matches!(&rest[0], Input::Write(l) if l.contains("\"id\":\"p\"")), "{rest:?}");
        assert!(matches!(rest[1], Input::Ack(4)), "{rest:?}");
        let call = connection.send_request("session/prompt", json!({})).unwrap();
        assert_eq!(call.id, 1000, "ids start above a previous server's");
    }

    #[tokio::test]
    async fn an_unreadable_request_is_answered_with_a_parse_error() {
        let (mut agent_out, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, agent_in) = tokio::io::duplex(1 << 16);
        let _connection = AcpConnection::start(server_in, server_out, Arc::new(Silent));
        agent_out
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"p9\",\"method\":\"session/request_permission\",\"params\":{\n")
            .await
            .unwrap();
        let mut answers = BufReader::new(agent_in).lines();
        let line = tokio::time::timeout(Duration::from_secs(5), answers.next_line()).await.unwrap().unwrap().unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], "p9", "{answer}");
        assert_eq!(answer["error"]["code"], PARSE_ERROR, "{answer}");
    }

    #[test]
    fn request_lines_are_told_by_their_start() {
        assert_eq!(request_id_of(r#"{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{}}"#), Some(42));
        assert_eq!(request_id_of(r#"{"jsonrpc":"2.0","id":42,"result":{}}"#), None, "a response");
        assert_eq!(request_id_of(r#"{"jsonrpc":"2.0","method":"session/cancel"}"#), None);
    }
}
