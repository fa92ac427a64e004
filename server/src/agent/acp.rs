//! ACP client side: JSON-RPC 2.0 over the agent's stdin/stdout, one JSON object per line.
//!
//! Everything the agent sends goes through one ordered queue. Notifications are applied one
//! after the other, and a response is delivered to its caller only after every message that
//! arrived before it was applied, so when `session/prompt` returns, all of the turn's
//! `session/update`s are already journaled. Requests from the agent (permission, fs) are
//! handled concurrently, since answering one may wait for a user.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};

/// Longest line accepted from an agent; longer lines are discarded (and logged), not buffered.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Requests from the agent handled at once (a permission request may wait hours for a user);
/// more are answered with an error at once instead of piling up.
pub const MAX_AGENT_REQUESTS: usize = 64;

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
        write!(f, "{} ({})", self.message, self.code)?;
        if let Some(details) = self.data.as_ref().and_then(|d| d.get("details")).and_then(Value::as_str) {
            write!(f, ": {details}")?;
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
    fn notification(self: Arc<Self>, method: String, params: Value) -> BoxFuture<()>;
    /// A request from the agent. Runs concurrently; its result is sent back as the response.
    fn request(self: Arc<Self>, method: String, params: Value) -> BoxFuture<Result<Value, RpcError>>;
    /// Completes once every notification handled so far has taken full effect. Awaited before
    /// a response is delivered, so a caller never sees an answer before the updates that
    /// preceded it.
    fn flush(self: Arc<Self>) -> BoxFuture<()>;
}

enum Incoming {
    Notification { method: String, params: Value },
    Request { id: Value, method: String, params: Value },
    Response { id: i64, result: Result<Value, RpcError> },
}

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Result<Value, CallError>>>>>;

/// A live JSON-RPC connection to one agent process.
#[derive(Clone)]
pub struct AcpConnection {
    out: mpsc::UnboundedSender<String>,
    pending: Pending,
    next_id: Arc<AtomicI64>,
    closed: Arc<AtomicBool>,
    garbage_lines: Arc<AtomicI64>,
    /// Becomes true once the agent's output ended and everything it sent was handled.
    drained: watch::Receiver<bool>,
}

impl AcpConnection {
    /// Starts the reader, dispatcher and writer tasks over the agent's pipes.
    pub fn start<R, W>(stdout: R, stdin: W, handler: Arc<dyn AgentHandler>) -> AcpConnection
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out_tx, out_rx) = mpsc::unbounded_channel::<String>();
        let pending: Pending = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let garbage_lines = Arc::new(AtomicI64::new(0));
        // Bounded: a flood from the agent waits on the pipe instead of growing memory.
        let (in_tx, in_rx) = mpsc::channel::<Incoming>(1024);
        let (drained_tx, drained) = watch::channel(false);

        tokio::spawn(write_loop(stdin, out_rx, closed.clone()));
        tokio::spawn(read_loop(BufReader::new(stdout), in_tx, garbage_lines.clone()));
        let connection = AcpConnection {
            out: out_tx,
            pending,
            next_id: Arc::new(AtomicI64::new(0)),
            closed,
            garbage_lines,
            drained,
        };
        tokio::spawn(dispatch_loop(in_rx, handler, connection.clone(), drained_tx));
        connection
    }

    /// Waits until the agent's output ended and every message it sent was applied, at most
    /// `bound` (a grandchild may hold the pipe open after the agent died).
    pub async fn wait_drained(&self, bound: Duration) -> bool {
        let mut drained = self.drained.clone();
        tokio::time::timeout(bound, drained.wait_for(|d| *d)).await.is_ok_and(|r| r.is_ok())
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
                Ok(result) => result.unwrap_or_else(|_| Err(CallError::Transport("agent connection closed".into()))),
                Err(_) => {
                    if let Ok(mut map) = self.pending.lock() {
                        map.remove(&pending.id);
                    }
                    Err(CallError::Timeout { method: method.to_string(), after })
                }
            },
            None => {
                pending.response.await.unwrap_or_else(|_| Err(CallError::Transport("agent connection closed".into())))
            }
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
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        if self.out.send(line).is_err() {
            if let Ok(mut map) = self.pending.lock() {
                map.remove(&id);
            }
            return Err(CallError::Transport("agent stdin closed".into()));
        }
        Ok(PendingCall { id, response: rx })
    }

    pub fn notify(&self, method: &str, params: Value) -> Result<(), CallError> {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string();
        self.out.send(line).map_err(|_| CallError::Transport("agent stdin closed".into()))
    }

    fn respond(&self, id: Value, result: Result<Value, RpcError>) {
        let line = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}),
        };
        let _ = self.out.send(line.to_string());
    }

    fn fail_all(&self, reason: &str) {
        self.closed.store(true, Ordering::SeqCst);
        let drained: Vec<_> = match self.pending.lock() {
            Ok(mut map) => map.drain().collect(),
            Err(_) => Vec::new(),
        };
        for (_, waiter) in drained {
            let _ = waiter.send(Err(CallError::Transport(reason.to_string())));
        }
    }
}

/// A request written to the agent, whose answer has not been read yet.
pub struct PendingCall {
    id: i64,
    response: oneshot::Receiver<Result<Value, CallError>>,
}

impl PendingCall {
    pub async fn wait(self) -> Result<Value, CallError> {
        self.response.await.unwrap_or_else(|_| Err(CallError::Transport("agent connection closed".into())))
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut stdin: W,
    mut lines: mpsc::UnboundedReceiver<String>,
    closed: Arc<AtomicBool>,
) {
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            closed.store(true, Ordering::SeqCst);
            break;
        }
    }
}

/// Reads one `\n`-terminated line of at most `max` bytes. Returns `Ok(None)` at end of input and
/// `Err(len)` for a line that was too long (it is consumed and dropped).
pub async fn read_line_bounded<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Result<Vec<u8>, usize>>> {
    let mut line = Vec::new();
    let mut dropped = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            if line.is_empty() && dropped == 0 {
                return Ok(None);
            }
            break;
        }
        let (chunk, found) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if dropped > 0 || line.len() + chunk.len() > max {
            dropped += line.len() + chunk.len();
            line = Vec::new();
        } else {
            line.extend_from_slice(chunk);
        }
        let consumed = found.unwrap_or(available.len());
        reader.consume(consumed);
        if found.is_some() {
            break;
        }
    }
    Ok(Some(if dropped > 0 { Err(dropped) } else { Ok(line) }))
}

fn parse_incoming(line: &[u8]) -> Option<Incoming> {
    let value: Value = serde_json::from_slice(line).ok()?;
    let object = value.as_object()?;
    let method = object.get("method").and_then(Value::as_str).map(str::to_owned);
    let id = object.get("id").cloned().filter(|id| !id.is_null());
    match (method, id) {
        (Some(method), Some(id)) => {
            let params = object.get("params").cloned().unwrap_or(Value::Null);
            Some(Incoming::Request { id, method, params })
        }
        (Some(method), None) => {
            let params = object.get("params").cloned().unwrap_or(Value::Null);
            Some(Incoming::Notification { method, params })
        }
        (None, Some(id)) => {
            // Our ids are integers; an answer to anything else is not ours.
            let id = id.as_i64()?;
            let result = match object.get("error") {
                Some(error) => Err(RpcError {
                    code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                    message: error.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
                    data: error.get("data").cloned().filter(|d| !d.is_null()),
                }),
                None => Ok(object.get("result").cloned().unwrap_or(Value::Null)),
            };
            Some(Incoming::Response { id, result })
        }
        (None, None) => None,
    }
}

async fn read_loop<R: AsyncBufRead + Unpin>(mut reader: R, incoming: mpsc::Sender<Incoming>, garbage: Arc<AtomicI64>) {
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
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_incoming(&line) {
            Some(message) => {
                if incoming.send(message).await.is_err() {
                    break;
                }
            }
            None => {
                garbage.fetch_add(1, Ordering::Relaxed);
                let preview: String = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
                tracing::warn!(%preview, "skipped a line from the agent that is not JSON-RPC");
            }
        }
    }
}

async fn dispatch_loop(
    mut incoming: mpsc::Receiver<Incoming>,
    handler: Arc<dyn AgentHandler>,
    connection: AcpConnection,
    drained: watch::Sender<bool>,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_AGENT_REQUESTS));
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Notification { method, params } => handler.clone().notification(method, params).await,
            Incoming::Request { id, method, params } => {
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    let message =
                        format!("too many requests in flight (at most {MAX_AGENT_REQUESTS}); {method} refused");
                    connection.respond(id, Err(RpcError::internal(message)));
                    continue;
                };
                let handler = handler.clone();
                let connection = connection.clone();
                tokio::spawn(async move {
                    let result = handler.request(method, params).await;
                    connection.respond(id, result);
                    drop(permit);
                });
            }
            Incoming::Response { id, result } => {
                handler.clone().flush().await;
                let waiter = connection.pending.lock().ok().and_then(|mut map| map.remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(result.map_err(CallError::Rpc));
                }
            }
        }
    }
    connection.fail_all("the agent closed its output");
    handler.flush().await;
    drained.send_replace(true);
}

#[cfg(test)]
mod tests {
    use super::*;

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
    struct Silent;

    impl AgentHandler for Silent {
        fn notification(self: Arc<Self>, _: String, _: Value) -> BoxFuture<()> {
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

    #[test]
    fn incoming_messages_are_told_apart() {
        assert!(matches!(
            parse_incoming(br#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#),
            Some(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parse_incoming(br#"{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file"}"#),
            Some(Incoming::Request { .. })
        ));
        assert!(matches!(
            parse_incoming(br#"{"jsonrpc":"2.0","id":3,"result":null}"#),
            Some(Incoming::Response { id: 3, result: Ok(Value::Null) })
        ));
        let Some(Incoming::Response { result: Err(e), .. }) =
            parse_incoming(br#"{"jsonrpc":"2.0","id":4,"error":{"code":-32002,"message":"nope","data":null}}"#)
        else {
            panic!("error response not parsed")
        };
        assert_eq!((e.code, e.data), (-32002, None));
        assert!(parse_incoming(b"not json").is_none());
        assert!(parse_incoming(b"[1,2]").is_none());
    }
}
