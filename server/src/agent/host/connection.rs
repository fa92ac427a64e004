//! One authenticated connection to an agent host: over loopback TCP to the data dir's host, or
//! over the standard streams of a command that serves the protocol (`batond agentctl --stdio`,
//! run directly, by `docker exec -i` or by `ssh`).

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::protocol::{encode, FromHost, Reply, Request, ToHost};
use super::{HostInfo, MAX_FRAME_BYTES};
use crate::agent::transport::read_line_bounded;

/// Bound on connecting to the host and on its answers to control requests.
pub(super) const HOST_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) type Reader = BufReader<Box<dyn tokio::io::AsyncRead + Send + Unpin>>;
pub(super) type Writer = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;

/// One authenticated connection to the host.
pub(super) struct Connection {
    pub(super) reader: Reader,
    pub(super) writer: Writer,
    pub(super) next_id: AtomicU64,
    /// The host's pid, as its hello said.
    pub(super) host_pid: u32,
}

/// Why a request to the host did not get its answer.
pub(super) enum CallError {
    /// The host answered with an error: its message.
    Refused(String),
    /// The host could not be heard.
    Lost(String),
}

impl Connection {
    /// Runs the access command and says hello over its standard streams (the token is the
    /// command's to supply: whoever may run it may read the host's token).
    pub(super) async fn spawn(program: &std::path::Path, args: &[String]) -> Result<Connection, String> {
        let mut command = tokio::process::Command::new(program);
        crate::umask::for_user(command.as_std_mut());
        let mut child = command
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

    pub(super) async fn open(info: &HostInfo) -> Result<Connection, String> {
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
    pub(super) async fn over(
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

    pub(super) async fn send(&mut self, frame: &ToHost) -> Result<(), String> {
        let mut line = encode(frame);
        line.push('\n');
        self.writer.write_all(line.as_bytes()).await.map_err(|e| format!("agent host connection: {e}"))?;
        self.writer.flush().await.map_err(|e| format!("agent host connection: {e}"))
    }

    /// A request whose answer is the next frame with its id (no stream is attached yet).
    pub(super) async fn call(&mut self, request: Request) -> Result<Reply, String> {
        let action = request.action();
        self.ask(request).await.map_err(|e| match e {
            CallError::Refused(refusal) => format!("the agent host refused {action}: {refusal}"),
            CallError::Lost(e) => e,
        })
    }

    pub(super) async fn ask(&mut self, request: Request) -> Result<Reply, CallError> {
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
