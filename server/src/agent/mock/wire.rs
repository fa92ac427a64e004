//! JSON-RPC framing for the mock agent: a single writer owns stdout so that
//! lines queued by concurrent turns can never interleave mid-line.

use std::io::Write;

use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Deep enough that fast streams rarely wait on the writer, shallow enough
/// that a peer which stops reading our stdout stalls the turn instead of
/// letting queued output grow without bound.
const QUEUE_DEPTH: usize = 1024;

enum Out {
    Line(String),
    /// Goes through the same queue as lines, so everything queued before it
    /// reaches the peer before the process ends.
    Exit(i32),
}

#[derive(Clone)]
pub(super) struct Outbox {
    tx: mpsc::Sender<Out>,
}

impl Outbox {
    /// The writer is a plain thread rather than a task so that its blocking
    /// writes and its `process::exit` never depend on the async runtime.
    pub(super) fn start() -> anyhow::Result<Outbox> {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        std::thread::Builder::new().name("mock-agent-stdout".into()).spawn(move || write_loop(rx))?;
        Ok(Outbox { tx })
    }

    /// Sends fail only once the writer is gone, i.e. the process is already
    /// exiting, so there is nobody left to tell.
    pub(super) async fn raw(&self, line: String) {
        let _ = self.tx.send(Out::Line(line)).await;
    }

    pub(super) async fn send(&self, message: &Value) {
        self.raw(message.to_string()).await;
    }

    pub(super) async fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params})).await;
    }

    pub(super) async fn update(&self, session_id: &str, update: Value) {
        self.notify("session/update", json!({"sessionId": session_id, "update": update})).await;
    }

    pub(super) async fn request(&self, id: &Value, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
    }

    pub(super) async fn respond(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result})).await;
    }

    pub(super) async fn fail(&self, id: &Value, error: RpcError) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})).await;
    }

    pub(super) async fn exit(&self, code: i32) {
        let _ = self.tx.send(Out::Exit(code)).await;
    }
}

fn write_loop(mut rx: mpsc::Receiver<Out>) {
    let mut stdout = std::io::stdout().lock();
    while let Some(out) = rx.blocking_recv() {
        match out {
            Out::Line(mut line) => {
                line.push('\n');
                let written = stdout.write_all(line.as_bytes()).and_then(|()| stdout.flush());
                if written.is_err() {
                    // Our stdout is closed, which only happens when the
                    // server went away; that is a normal end, like stdin EOF.
                    std::process::exit(0);
                }
            }
            Out::Exit(code) => {
                let _ = stdout.flush();
                std::process::exit(code);
            }
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

pub(super) const INTERNAL_ERROR: i64 = -32603;
pub(super) const METHOD_NOT_FOUND: i64 = -32601;
pub(super) const RESOURCE_NOT_FOUND: i64 = -32002;
const AUTH_REQUIRED: i64 = -32000;

impl RpcError {
    pub(super) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: None }
    }

    pub(super) fn method_not_found() -> RpcError {
        RpcError::new(METHOD_NOT_FOUND, "Method not found")
    }

    pub(super) fn invalid_params(detail: &str) -> RpcError {
        RpcError { data: Some(json!({"detail": detail})), ..RpcError::new(-32602, "Invalid params") }
    }

    pub(super) fn internal(detail: impl Into<String>) -> RpcError {
        RpcError { data: Some(json!({"detail": detail.into()})), ..RpcError::new(INTERNAL_ERROR, "Internal error") }
    }

    pub(super) fn session_not_found(session_id: &str) -> RpcError {
        RpcError {
            data: Some(json!({"sessionId": session_id})),
            ..RpcError::new(RESOURCE_NOT_FOUND, format!("Resource not found: session {session_id}"))
        }
    }

    /// The error `--restore-error CODE` answers with, worded the way real
    /// agents word that code so clients see realistic messages.
    pub(super) fn scripted(code: i64, session_id: &str) -> RpcError {
        match code {
            RESOURCE_NOT_FOUND => RpcError::session_not_found(session_id),
            INTERNAL_ERROR => RpcError::new(code, "Internal error"),
            METHOD_NOT_FOUND => RpcError::method_not_found(),
            AUTH_REQUIRED => RpcError::new(code, "Authentication required"),
            _ => RpcError::new(code, "Scripted error"),
        }
    }

    /// Reads the `error` member of a response from the client; a malformed
    /// one still has to become some error rather than a success.
    pub(super) fn from_json(error: &Value) -> RpcError {
        RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(INTERNAL_ERROR),
            message: error.get("message").and_then(Value::as_str).unwrap_or("unknown error").to_string(),
            data: error.get("data").cloned(),
        }
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}
