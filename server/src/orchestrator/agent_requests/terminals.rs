//! The agent's terminals (ACP `terminal/create`, `output`, `wait_for_exit`, `kill`, `release`):
//! a command the agent asks batond to run, in the session's working directory (or a directory
//! beneath it), with the agent's environment, in a process group of its own so that a kill
//! reaches everything it started. Its output is kept in memory up to the agent's
//! `outputByteLimit` (the start dropped first, at a character boundary) and journaled as it
//! comes (`terminal_output` events), so every client sees it live and after a restart.
//!
//! The command runs where the agent runs. For an agent on this machine (child and hosted
//! runtimes) batond starts it itself. For an agent in a container or on another host, batond
//! starts the runtime's way there (`docker exec -i CONTAINER`, `ssh HOST`) running
//! `batond agent-guard --lifeline` in the agent's directory: the guard gets the environment on
//! its stdin (not on a command line) and kills the command's tree there when that stdin ends,
//! which is when batond kills or releases the terminal (the local `docker`/`ssh` client dies)
//! or batond itself dies (its end of that stdin is closed with it).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use baton_protocol::{SessionEvent, TerminalExit};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, watch};

use crate::agent::acp::{BoxFuture, RpcError};
use crate::agent::runtime::{signal_group, Runtime, TREE_MARKER_ENV};

/// How long, after its command exited, a terminal's output is still read before the exit is
/// told: a background process of the command may keep the pipe open.
const DRAIN_AFTER_EXIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Most terminals one agent session holds at once (released ones do not count).
pub const MAX_TERMINALS: usize = 16;
/// Output kept for `terminal/output` when the agent gives no `outputByteLimit`.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1024 * 1024;
/// The most output kept for `terminal/output`, whatever the agent asks.
pub const MAX_OUTPUT_LIMIT: usize = 16 * 1024 * 1024;
/// The most of one terminal's output that is journaled; past it a line says so.
pub const MAX_JOURNALED_BYTES: usize = 4 * 1024 * 1024;
/// The largest piece of output one event carries.
const MAX_EVENT_BYTES: usize = 16 * 1024;

/// Where an agent that does not run on this machine runs its terminals: its runtime, and its
/// name there.
pub struct RemotePlace {
    pub runtime: Arc<dyn Runtime>,
    pub agent_id: String,
}

/// Journals an event of the session (a `terminal_output`).
pub type Journal = Arc<dyn Fn(SessionEvent) -> BoxFuture<()> + Send + Sync>;

/// What a `terminal/create` asks for, checked.
pub struct Create {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Where it runs: the working directory or beneath it (resolved by the caller).
    pub cwd: PathBuf,
    pub output_limit: usize,
}

impl Create {
    /// Reads the request's params; `cwd` is left to the caller (it is checked against the
    /// sandbox), given back as the agent sent it.
    pub fn parse(params: &Value) -> Result<(Create, Option<PathBuf>), RpcError> {
        let command = params
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty() && !c.contains('\0'))
            .ok_or_else(|| RpcError::invalid_params("terminal/create: missing command"))?
            .to_string();
        let strings = |v: &Value| v.as_str().filter(|s| !s.contains('\0')).map(str::to_string);
        let args = match params.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(strings)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| RpcError::invalid_params("terminal/create: args must be strings"))?,
            Some(_) => return Err(RpcError::invalid_params("terminal/create: args must be an array")),
        };
        let env = match params.get("env") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    let name = item.get("name").and_then(strings).filter(|n| !n.is_empty() && !n.contains('='))?;
                    Some((name, item.get("value").and_then(strings)?))
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| RpcError::invalid_params("terminal/create: env must be [{name, value}]"))?,
            Some(_) => return Err(RpcError::invalid_params("terminal/create: env must be an array")),
        };
        let output_limit = match params.get("outputByteLimit") {
            None | Some(Value::Null) => DEFAULT_OUTPUT_LIMIT,
            Some(limit) => limit
                .as_u64()
                .map(|l| (l as usize).min(MAX_OUTPUT_LIMIT))
                .ok_or_else(|| RpcError::invalid_params("terminal/create: outputByteLimit must be a number"))?,
        };
        let cwd = params.get("cwd").and_then(Value::as_str).map(PathBuf::from);
        Ok((Create { command, args, env, cwd: PathBuf::new(), output_limit }, cwd))
    }

    /// The command line as shown in the transcript.
    fn shown(&self) -> String {
        std::iter::once(self.command.as_str()).chain(self.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")
    }
}

/// The output kept for `terminal/output`: the last `limit` bytes.
struct Output {
    bytes: Vec<u8>,
    truncated: bool,
    limit: usize,
}

impl Output {
    fn push(&mut self, piece: &[u8]) {
        self.bytes.extend_from_slice(piece);
        if self.bytes.len() > self.limit {
            let mut cut = self.bytes.len() - self.limit;
            // The start is dropped at a character boundary (never inside a UTF-8 sequence).
            while cut < self.bytes.len() && (self.bytes[cut] & 0b1100_0000) == 0b1000_0000 {
                cut += 1;
            }
            self.bytes.drain(..cut);
            self.truncated = true;
        }
    }
}

/// One running (or finished) command.
struct Terminal {
    /// Its process group (the command's pid).
    pgid: u32,
    output: Mutex<Output>,
    exit: watch::Receiver<Option<TerminalExit>>,
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if self.exit.borrow().is_none() {
            signal_group(self.pgid, libc::SIGKILL);
        }
    }
}

/// The terminals of one agent session.
#[derive(Default)]
pub struct Terminals {
    open: Mutex<HashMap<String, Arc<Terminal>>>,
    next: AtomicU64,
}

fn exit_of(status: std::process::ExitStatus) -> TerminalExit {
    use std::os::unix::process::ExitStatusExt;
    let signal = status.signal().map(|s| match s {
        libc::SIGKILL => "SIGKILL".to_string(),
        libc::SIGTERM => "SIGTERM".to_string(),
        libc::SIGINT => "SIGINT".to_string(),
        libc::SIGHUP => "SIGHUP".to_string(),
        other => format!("signal {other}"),
    });
    TerminalExit { exit_code: status.code(), signal }
}

fn exit_json(exit: &TerminalExit) -> Value {
    json!({"exitCode": exit.exit_code, "signal": exit.signal})
}

impl Terminals {
    fn get(&self, params: &Value) -> Result<Arc<Terminal>, RpcError> {
        let id = params
            .get("terminalId")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("missing terminalId"))?;
        let open = self.open.lock().map_err(|_| RpcError::internal("terminals poisoned"))?;
        open.get(id).cloned().ok_or_else(|| {
            RpcError::invalid_params(format!("unknown terminal {id} (released, or from before the server restarted)"))
        })
    }

    /// `terminal/create`: starts the command and returns its id at once.
    pub fn create(
        &self,
        create: Create,
        agent_env: &std::collections::BTreeMap<String, String>,
        execution_id: &str,
        remote: Option<&RemotePlace>,
        journal: Journal,
    ) -> Result<Value, RpcError> {
        let mut open = self.open.lock().map_err(|_| RpcError::internal("terminals poisoned"))?;
        if open.len() >= MAX_TERMINALS {
            return Err(RpcError::new(
                -32002,
                format!("at most {MAX_TERMINALS} terminals at once: release one (terminal/release) first"),
            ));
        }
        let env = agent_env.iter().map(|(k, v)| (k.clone(), v.clone())).chain(create.env.iter().cloned());
        let (mut command, lifeline) = match remote {
            None => {
                let mut command = tokio::process::Command::new(&create.command);
                command.args(&create.args).current_dir(&create.cwd).envs(env).stdin(Stdio::null());
                (command, None)
            }
            Some(place) => {
                let cwd = place.runtime.agent_path(&create.cwd).display().to_string();
                let guard = ["agent-guard", "--lifeline", "--cwd", &cwd, "--", &create.command];
                let guard: Vec<String> =
                    guard.iter().map(|w| w.to_string()).chain(create.args.iter().cloned()).collect();
                let (program, args) = place
                    .runtime
                    .guarded_command(&place.agent_id, &guard)
                    .unwrap_or_else(|| Err(format!("the {} runtime runs no terminals", place.runtime.name())))
                    .map_err(|e| RpcError::new(-32002, format!("terminal/create: {e}")))?;
                let mut command = tokio::process::Command::new(program);
                command.args(args).stdin(Stdio::piped());
                let env: std::collections::BTreeMap<String, String> = env.collect();
                let line = serde_json::to_string(&env).map_err(|e| RpcError::internal(e.to_string()))? + "\n";
                (command, Some(line))
            }
        };
        command
            // Marked as the agent's: stopped with it, also after a kill -9 of batond.
            .env(TREE_MARKER_ENV, execution_id)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| RpcError::new(-32002, format!("terminal/create: cannot run {}: {e}", create.command)))?;
        let pid = child.id().unwrap_or_default();
        let id = format!("term-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let (exit_tx, exit_rx) = watch::channel(None);
        let output = Output { bytes: Vec::new(), truncated: false, limit: create.output_limit };
        let terminal = Arc::new(Terminal { pgid: pid, output: Mutex::new(output), exit: exit_rx });
        open.insert(id.clone(), terminal.clone());
        drop(open);

        let (pieces_tx, pieces_rx) = mpsc::channel::<Vec<u8>>(64);
        let mut pumps = Vec::new();
        for stream in [child.stdout.take().map(Reader::Out), child.stderr.take().map(Reader::Err)].into_iter().flatten()
        {
            let (terminal, pieces) = (Arc::downgrade(&terminal), pieces_tx.clone());
            pumps.push(tokio::spawn(async move { stream.pump(terminal, pieces).await }));
        }
        drop(pieces_tx);
        if let (Some(line), Some(mut stdin)) = (lifeline, child.stdin.take()) {
            // The environment, then the lifeline held until the command is over (or batond
            // kills the client carrying it, which ends it there as well).
            let mut exit = terminal.exit.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                if stdin.write_all(line.as_bytes()).await.is_ok() {
                    let _ = exit.wait_for(Option::is_some).await;
                }
                drop(stdin);
            });
        }
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => exit_of(status),
                Err(e) => {
                    tracing::warn!("terminal wait: {e}");
                    TerminalExit { exit_code: None, signal: None }
                }
            };
            // What the command wrote before it exited is read before its exit is told (an
            // agent asks for the output once it exited); a process it left behind holding the
            // pipe open is not waited for longer than a moment.
            let deadline = tokio::time::Instant::now() + DRAIN_AFTER_EXIT;
            for pump in pumps {
                let _ = tokio::time::timeout_at(deadline, pump).await;
            }
            let _ = exit_tx.send(Some(exit));
        });
        let first = SessionEvent::TerminalOutput {
            terminal_id: id.clone(),
            command: Some(create.shown()),
            output: String::new(),
            offset: 0,
            exit: None,
        };
        tokio::spawn(journal_terminal(id.clone(), first, pieces_rx, terminal.exit.clone(), journal));
        Ok(json!({"terminalId": id}))
    }

    /// `terminal/output`: what it wrote (the end of it past the limit), and its exit if over.
    pub fn output(&self, params: &Value) -> Result<Value, RpcError> {
        let terminal = self.get(params)?;
        let output = terminal.output.lock().map_err(|_| RpcError::internal("terminal output poisoned"))?;
        let mut result = json!({"output": String::from_utf8_lossy(&output.bytes), "truncated": output.truncated});
        if let Some(exit) = terminal.exit.borrow().as_ref() {
            result["exitStatus"] = exit_json(exit);
        }
        Ok(result)
    }

    /// `terminal/wait_for_exit`: waits for the command to exit.
    pub async fn wait_for_exit(&self, params: &Value) -> Result<Value, RpcError> {
        let terminal = self.get(params)?;
        let mut exit = terminal.exit.clone();
        let done = exit.wait_for(Option::is_some).await.map(|e| e.clone());
        match done {
            Ok(Some(exit)) => Ok(exit_json(&exit)),
            _ => Err(RpcError::internal("the terminal's command could not be waited for")),
        }
    }

    /// `terminal/kill`: kills the command and everything it started; the terminal stays.
    pub fn kill(&self, params: &Value) -> Result<Value, RpcError> {
        let terminal = self.get(params)?;
        if terminal.exit.borrow().is_none() {
            signal_group(terminal.pgid, libc::SIGKILL);
        }
        Ok(json!({}))
    }

    /// `terminal/release`: kills the command if it still runs and forgets the terminal.
    pub fn release(&self, params: &Value) -> Result<Value, RpcError> {
        let terminal = self.get(params)?;
        if terminal.exit.borrow().is_none() {
            signal_group(terminal.pgid, libc::SIGKILL);
        }
        if let (Some(id), Ok(mut open)) = (params.get("terminalId").and_then(Value::as_str), self.open.lock()) {
            open.remove(id);
        }
        Ok(json!({}))
    }

    /// Kills every command still running (the agent session is over).
    pub fn kill_all(&self) {
        let Ok(mut open) = self.open.lock() else { return };
        for terminal in open.values() {
            if terminal.exit.borrow().is_none() {
                signal_group(terminal.pgid, libc::SIGKILL);
            }
        }
        open.clear();
    }
}

enum Reader {
    Out(tokio::process::ChildStdout),
    Err(tokio::process::ChildStderr),
}

impl Reader {
    /// Reads the stream to its end into the terminal's output and the journal's pieces.
    async fn pump(mut self, terminal: std::sync::Weak<Terminal>, pieces: mpsc::Sender<Vec<u8>>) {
        let mut buffer = vec![0u8; 8192];
        loop {
            let read = match &mut self {
                Reader::Out(out) => out.read(&mut buffer).await,
                Reader::Err(err) => err.read(&mut buffer).await,
            };
            let n = match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let piece = &buffer[..n];
            if let Some(terminal) = terminal.upgrade() {
                if let Ok(mut output) = terminal.output.lock() {
                    output.push(piece);
                }
            }
            // The journal may fall behind (a full disk): the command then waits on its pipe.
            if pieces.send(piece.to_vec()).await.is_err() {
                return;
            }
        }
    }
}

/// Journals a terminal: its command, its output in pieces as they come (bounded), its exit.
async fn journal_terminal(
    terminal_id: String,
    first: SessionEvent,
    mut pieces: mpsc::Receiver<Vec<u8>>,
    mut exit: watch::Receiver<Option<TerminalExit>>,
    journal: Journal,
) {
    journal(first).await;
    let mut pending: Vec<u8> = Vec::new();
    let mut journaled = 0usize;
    let mut over = false;
    while let Some(piece) = pieces.recv().await {
        pending.extend_from_slice(&piece);
        // What else is already there goes in the same event.
        while pending.len() < MAX_EVENT_BYTES {
            match pieces.try_recv() {
                Ok(more) => pending.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        // A UTF-8 sequence cut between two reads waits for its end.
        let valid = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => pending.len(),
        };
        let text = String::from_utf8_lossy(&pending[..valid]).into_owned();
        pending.drain(..valid);
        if text.is_empty() || over {
            continue;
        }
        if journaled + text.len() > MAX_JOURNALED_BYTES {
            over = true;
            let note = format!("\n[output past {} MiB is not kept in the journal]\n", MAX_JOURNALED_BYTES >> 20);
            journal(output_event(&terminal_id, note, &mut journaled)).await;
            continue;
        }
        journal(output_event(&terminal_id, text, &mut journaled)).await;
    }
    if !pending.is_empty() && !over {
        let rest = String::from_utf8_lossy(&pending).into_owned();
        journal(output_event(&terminal_id, rest, &mut journaled)).await;
    }
    let exit = exit.wait_for(Option::is_some).await.ok().and_then(|e| e.clone());
    let offset = journaled as u64;
    journal(SessionEvent::TerminalOutput { terminal_id, command: None, output: String::new(), offset, exit }).await;
}

/// A piece of output, `journaled` bytes into the terminal's journaled output (counted on).
fn output_event(terminal_id: &str, output: String, journaled: &mut usize) -> SessionEvent {
    let offset = *journaled as u64;
    *journaled += output.len();
    SessionEvent::TerminalOutput { terminal_id: terminal_id.to_string(), command: None, output, offset, exit: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_its_limit_keeps_the_end_at_a_character_boundary() {
        let mut output = Output { bytes: Vec::new(), truncated: false, limit: 3 };
        output.push("ab".as_bytes());
        assert!(!output.truncated);
        // 6 bytes in all ('é' is two): the last 3 would start inside 'é', so it goes whole.
        output.push("écd".as_bytes());
        assert!(output.truncated);
        assert_eq!(String::from_utf8(output.bytes.clone()).expect("utf-8"), "cd");
        output.push("é".as_bytes());
        assert_eq!(String::from_utf8(output.bytes.clone()).expect("utf-8"), "dé");
    }

    #[test]
    fn create_params_are_checked() {
        assert!(Create::parse(&json!({"sessionId": "s"})).is_err(), "no command");
        assert!(Create::parse(&json!({"command": "ls", "args": [1]})).is_err());
        assert!(Create::parse(&json!({"command": "ls", "env": [{"name": "A=B", "value": "x"}]})).is_err());
        let (create, cwd) = Create::parse(&json!({
            "command": "ls", "args": ["-l"], "env": [{"name": "A", "value": "1"}],
            "cwd": "/w/src", "outputByteLimit": 999_999_999_999u64
        }))
        .expect("valid");
        assert_eq!((create.shown().as_str(), create.output_limit), ("ls -l", MAX_OUTPUT_LIMIT));
        assert_eq!(create.env, [("A".to_string(), "1".to_string())]);
        assert_eq!(cwd, Some(PathBuf::from("/w/src")));
    }
}
