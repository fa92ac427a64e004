//! How an agent's lines travel between it and the ACP connection, wherever it runs. The lowest
//! layer of `agent`: it knows nothing of ACP, of processes or of hosts.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::mpsc;

/// Longest line accepted from an agent; longer lines are discarded (and logged), not buffered.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Our end of a child agent's stdin: a plain non-blocking pipe (not tokio's `ChildStdin`, whose
/// child would hold a pidfd; see [`super::reaper`]).
pub type AgentStdin = tokio::net::unix::pipe::Sender;

/// Our end of a child agent's stdout (or stderr).
pub type AgentStdout = tokio::net::unix::pipe::Receiver;

/// What the ACP connection sends on a transport.
#[derive(Debug)]
pub enum Input {
    /// A line for the agent's stdin.
    Write(String),
    /// Every output line up to this one has taken full effect in the server: whoever keeps the
    /// lines may drop them.
    Ack(u64),
}

/// An agent's output as numbered lines and its input, relayed by whatever runs the agent and
/// keeps its lines until they are acknowledged.
pub struct LineStream {
    pub lines: mpsc::Receiver<(u64, Vec<u8>)>,
    pub input: mpsc::UnboundedSender<Input>,
    /// Bytes of the `Write` lines in `input` not yet passed on (each line plus its newline):
    /// the sender adds, the relay subtracts once it passed the line on.
    pub queued: Arc<AtomicU64>,
}

/// The line transport of one agent, as a runtime hands it to the ACP connection.
pub enum Transport {
    /// A child's pipes, read and written in place. Nothing keeps the lines elsewhere, so
    /// nothing is acknowledged.
    Pipes { stdout: AgentStdout, stdin: AgentStdin },
    /// Numbered lines kept where the agent runs until acknowledged: after a restart the
    /// connection resumes after the last acknowledged line.
    Stream(LineStream),
}

impl Transport {
    /// Whether lines are kept until acknowledged (and so survive this server).
    pub fn is_durable(&self) -> bool {
        matches!(self, Transport::Stream(_))
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
