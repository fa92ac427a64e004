//! `batond mock-agent`: a scripted but protocol-faithful ACP agent, so that
//! end-to-end tests and newcomers without API keys exercise the real
//! supervision paths (persistence, load/resume, permissions, crashes).

mod options;
mod store;
mod turn;
mod wire;

use std::collections::hash_map::Entry as MapEntry;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{oneshot, watch};

use store::{Role, SessionFile, Store};
use wire::{Outbox, RpcError};

#[derive(clap::Args, Debug, Clone)]
pub struct MockAgentArgs {
    /// Directory holding `sessions/<sessionId>.json`.
    #[arg(long)]
    pub state_dir: PathBuf,

    /// Which restore methods `initialize` advertises; the others answer
    /// -32601.
    #[arg(long, value_enum, default_value_t = Advertise::Both)]
    pub advertise: Advertise,

    /// Answer `session/load` and `session/resume` with this JSON-RPC error
    /// code instead of restoring.
    #[arg(long, allow_negative_numbers = true)]
    pub restore_error: Option<i64>,

    /// Answer only `session/resume` with this JSON-RPC error code (e.g. -32601: resume is
    /// advertised but not implemented, so a client falls back to `session/load`).
    #[arg(long, allow_negative_numbers = true)]
    pub resume_error: Option<i64>,

    /// Never answer `session/load` or `session/resume` (wins over
    /// `--restore-error`).
    #[arg(long)]
    pub restore_hang: bool,

    /// Replay history on `session/resume` too, like some non-conformant
    /// agents do.
    #[arg(long)]
    pub resume_replays: bool,

    /// Delay between streamed chunks, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub chunk_delay_ms: u64,

    /// `agentInfo.name` reported by `initialize`.
    #[arg(long, default_value = "baton-mock")]
    pub name: String,

    /// Require ACP `authenticate` before `session/new`, `session/load`, `session/resume` and
    /// `session/prompt` (answered -32000 until then). Two methods are offered: `mock-api-key`
    /// (`type: "env_var"`, works when `MOCK_API_KEY` is set in the agent's environment) and
    /// `mock-login` (works when `<state-dir>/logged-in` exists, like a CLI's own login).
    #[arg(long)]
    pub require_auth: bool,

    /// With `--require-auth`, also offer two interactive logins, as real agents do: `chatgpt`
    /// (no type: a browser login, like codex's) and `mock-terminal-login` (`type: "terminal"`,
    /// like copilot's). `authenticate` with either never answers, as such a login waits for a
    /// person.
    #[arg(long)]
    pub interactive_login: bool,

    /// Open sessions without authentication but answer every prompt -32000 "Authentication
    /// required" until `authenticate` succeeded, as claude-agent-acp does without its key. The
    /// `--require-auth` methods are offered.
    #[arg(long)]
    pub prompt_needs_auth: bool,

    /// At startup, start three `sleep` processes that outlive nothing on their own: one in the
    /// agent's process group, one in a process group of its own and one in a session of its
    /// own; their pids are written to this file, one per line (a wrapper's children).
    #[arg(long)]
    pub spawn_children: Option<PathBuf>,

    /// Answer a cancelled prompt with `stopReason: "end_turn"` instead of `"cancelled"`, as
    /// opencode does.
    #[arg(long)]
    pub cancel_ends_turn: bool,

    /// Answer a cancelled prompt with an error (-32603 "Internal error: aborted") instead of
    /// `"cancelled"`, as opencode 1.18 does.
    #[arg(long)]
    pub cancel_errors: bool,

    /// Advertise `sessionCapabilities.fork` and implement `session/fork` (unstable ACP): the
    /// new session starts with a copy of the source's history and memory. `/origin` tells
    /// which session a session was forked from.
    #[arg(long)]
    pub advertise_fork: bool,

    /// What the mock offers to switch: modes and configuration options, modes and the older
    /// `models` answer only, or nothing.
    #[arg(long, value_enum, default_value_t = options::OfferedOptions::Full)]
    pub options: options::OfferedOptions,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advertise {
    Resume,
    Load,
    Both,
    None,
}

impl Advertise {
    fn resume(self) -> bool {
        matches!(self, Advertise::Resume | Advertise::Both)
    }

    fn load(self) -> bool {
        matches!(self, Advertise::Load | Advertise::Both)
    }
}

/// How long a stuck stdout may delay exiting after stdin EOF: the server is
/// gone, so an orphaned agent must not linger.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// Serves ACP on stdin/stdout. Never returns `Ok`: stdin EOF ends the process
/// with `std::process::exit(0)` (and `/crash` with exit code 3). Returns `Err`
/// only if it cannot start (state dir not creatable, writer thread).
pub async fn run(args: MockAgentArgs) -> anyhow::Result<()> {
    let store = Store::open(&args.state_dir)?;
    if let Some(path) = &args.spawn_children {
        spawn_children(path)?;
    }
    let out = Outbox::start()?;
    let agent = Arc::new(Agent {
        args,
        out: out.clone(),
        store,
        sessions: Mutex::new(HashMap::new()),
        pending: Mutex::new(HashMap::new()),
        next_request_id: AtomicU64::new(0),
        next_tool_id: AtomicU64::new(1),
        authenticated: std::sync::atomic::AtomicBool::new(false),
        deaf: std::sync::atomic::AtomicBool::new(false),
        client_terminals: std::sync::atomic::AtomicBool::new(false),
    });

    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match stdin.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(message) => {
                agent.handle(message).await;
                if agent.deaf.load(Ordering::SeqCst) {
                    // `/exit`: what the client writes from now on stays in the pipe, like a
                    // message written to an agent in the instant it exits.
                    std::future::pending::<()>().await;
                }
            }
            Err(_) => {
                out.fail(&Value::Null, RpcError::new(-32700, "Parse error")).await;
            }
        }
    }

    // Exiting through the writer lets already-queued lines go out first.
    let _ = tokio::time::timeout(EXIT_GRACE, out.exit(0)).await;
    tokio::time::sleep(EXIT_GRACE).await;
    std::process::exit(0)
}

struct Agent {
    args: MockAgentArgs,
    out: Outbox,
    store: Store,
    sessions: Mutex<HashMap<String, Session>>,
    /// Our own requests to the client, keyed by the JSON text of their id.
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, RpcError>>>>,
    next_request_id: AtomicU64,
    next_tool_id: AtomicU64,
    /// Set by a successful `authenticate` (only checked with `--require-auth`).
    authenticated: std::sync::atomic::AtomicBool,
    /// Set by an `/exit`, `/exit-deaf`, `/deaf` or `/flood-read` prompt: stdin is not read any more.
    deaf: std::sync::atomic::AtomicBool,
    /// The client offered terminals in `initialize` (`clientCapabilities.terminal`).
    client_terminals: std::sync::atomic::AtomicBool,
}

/// The environment variable the `mock-api-key` method reads.
const MOCK_API_KEY: &str = "MOCK_API_KEY";

/// `--spawn-children`: children like a wrapper's (npx, node, a shell) that do not die with
/// the agent, so a server must find them by more than the agent's process group.
fn spawn_children(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut pids = Vec::new();
    for own in ["", "group", "session"] {
        let mut command = std::process::Command::new("sleep");
        command
            .arg("1000")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        match own {
            "group" => {
                command.process_group(0);
            }
            "session" => {
                // SAFETY: setsid is async-signal-safe and touches no memory.
                unsafe {
                    command.pre_exec(|| {
                        libc::setsid();
                        Ok(())
                    });
                }
            }
            _ => {}
        }
        // Never waited for: the point is that they outlive this process.
        let child = command.spawn()?;
        pids.push(child.id().to_string());
    }
    std::fs::write(path, pids.join("\n") + "\n")?;
    Ok(())
}
struct Session {
    cwd: PathBuf,
    /// The mode and options it runs with (a new process starts with the defaults).
    settings: options::Settings,
    file: SessionFile,
    /// Bumped by `session/cancel`; a turn subscribes when it starts, so only
    /// cancels that arrive after its prompt affect it.
    cancel: watch::Sender<u64>,
    /// The `mcpServers` of the request that opened it in this process (new, load, resume,
    /// fork): what `/mcp` tells.
    mcp_servers: Value,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Restore {
    Load,
    Resume,
}

/// Nothing here holds a guard across an await, so a poisoned lock can only
/// mean a panic mid-update of plain data; carrying on is the useful choice
/// for a test double.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn str_param<'a>(params: &'a Value, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

impl Agent {
    async fn handle(self: &Arc<Self>, message: Value) {
        let method = message.get("method").and_then(Value::as_str);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, message.get("id")) {
            (Some(method), Some(id)) => self.handle_request(method, id.clone(), params).await,
            (Some(method), None) => self.handle_notification(method, &params),
            (None, Some(id)) => self.handle_response(id, &message),
            (None, None) => {
                self.out.fail(&Value::Null, RpcError::new(-32600, "Invalid Request")).await;
            }
        }
    }

    async fn handle_request(self: &Arc<Self>, method: &str, id: Value, params: Value) {
        let advertise = self.args.advertise;
        let gated =
            matches!(method, "session/new" | "session/load" | "session/resume" | "session/prompt" | "session/fork");
        let needs_auth = self.args.require_auth || (self.args.prompt_needs_auth && method == "session/prompt");
        if gated && needs_auth && !self.authenticated.load(Ordering::SeqCst) {
            return self.out.fail(&id, RpcError::new(-32000, "Authentication required")).await;
        }
        match method {
            "initialize" => {
                let terminals = params.pointer("/clientCapabilities/terminal").and_then(Value::as_bool);
                self.client_terminals.store(terminals == Some(true), Ordering::SeqCst);
                self.out.respond(&id, self.initialize()).await
            }
            "authenticate" => self.authenticate(&id, &params).await,
            "session/new" => self.new_session(&id, &params).await,
            "session/load" if advertise.load() => self.restore(&id, &params, Restore::Load).await,
            "session/resume" if advertise.resume() => {
                self.restore(&id, &params, Restore::Resume).await;
            }
            "session/prompt" => self.prompt(id, &params).await,
            "session/fork" if self.args.advertise_fork => self.fork(&id, &params).await,
            _ => {
                if self.set_option(method, &id, &params).await.is_none() {
                    self.out.fail(&id, RpcError::method_not_found()).await;
                }
            }
        }
    }

    /// Unknown notifications are ignored, as JSON-RPC requires.
    fn handle_notification(&self, method: &str, params: &Value) {
        if method != "session/cancel" {
            return;
        }
        let Some(session_id) = str_param(params, "sessionId") else {
            return;
        };
        if let Some(session) = lock(&self.sessions).get(session_id) {
            session.cancel.send_modify(|generation| *generation += 1);
        }
    }

    /// Answers nobody is waiting for (abandoned or never asked) are dropped.
    fn handle_response(&self, id: &Value, message: &Value) {
        let Some(waiter) = lock(&self.pending).remove(&id.to_string()) else {
            return;
        };
        let answer = match message.get("error") {
            Some(error) => Err(RpcError::from_json(error)),
            None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
        };
        let _ = waiter.send(answer);
    }

    fn initialize(&self) -> Value {
        let advertise = self.args.advertise;
        let mut capabilities = json!({
            "loadSession": advertise.load(),
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
            "mcpCapabilities": {"http": true, "sse": false},
        });
        if advertise.resume() {
            capabilities["sessionCapabilities"]["resume"] = json!({});
        }
        if self.args.advertise_fork {
            capabilities["sessionCapabilities"]["fork"] = json!({});
        }
        json!({
            "protocolVersion": 1,
            "agentCapabilities": capabilities,
            "authMethods": self.auth_methods(),
            "agentInfo": {"name": self.args.name, "version": "0.1.0"},
        })
    }

    fn auth_methods(&self) -> Value {
        if !self.args.require_auth && !self.args.prompt_needs_auth {
            return json!([]);
        }
        let mut methods = vec![
            json!({"id": "mock-login", "name": "Log in", "description": "Run `batond mock-agent` login first"}),
            json!({"id": "mock-api-key", "name": "API key", "type": "env_var", "varName": MOCK_API_KEY}),
        ];
        if self.args.interactive_login {
            methods.push(json!({"id": "chatgpt", "name": "Login with ChatGPT",
                "description": "Opens a browser to sign in to your ChatGPT account"}));
            methods.push(json!({"id": "mock-terminal-login", "name": "Log in at a terminal", "type": "terminal",
                "description": "Signs in through the mock's own login screen", "args": ["login"]}));
        }
        Value::Array(methods)
    }

    async fn authenticate(&self, id: &Value, params: &Value) {
        let usable = match str_param(params, "methodId") {
            Some("mock-api-key") => std::env::var_os(MOCK_API_KEY).is_some_and(|v| !v.is_empty()),
            Some("mock-login") => self.args.state_dir.join("logged-in").exists(),
            // A login that waits for a person (a browser, a terminal) that never comes.
            Some("chatgpt" | "mock-terminal-login") if self.args.interactive_login => {
                return std::future::pending().await
            }
            _ => return self.out.fail(id, RpcError::invalid_params("unknown methodId")).await,
        };
        if !usable {
            return self.out.fail(id, RpcError::new(-32000, "Authentication failed: no credentials")).await;
        }
        self.authenticated.store(true, Ordering::SeqCst);
        self.out.respond(id, json!({})).await;
    }

    async fn new_session(&self, id: &Value, params: &Value) {
        let Some(cwd) = str_param(params, "cwd") else {
            return self.out.fail(id, RpcError::invalid_params("cwd is required")).await;
        };
        let session_id = format!("mock-{}", uuid::Uuid::new_v4());
        let file = SessionFile { cwd: Some(PathBuf::from(cwd)), ..SessionFile::default() };
        if let Err(e) = self.store.save(&session_id, &file) {
            return self.out.fail(id, RpcError::internal(e)).await;
        }
        self.install(&session_id, PathBuf::from(cwd), file, params);
        let mut result = json!({"sessionId": session_id});
        self.offered(&session_id, &mut result);
        self.out.respond(id, result).await;
        self.advertise_commands(&session_id).await;
    }

    /// `session/fork`: a new session whose history and memory are a copy of the source's (the
    /// source's live state when this process hosts it, else its saved file).
    async fn fork(&self, id: &Value, params: &Value) {
        let (Some(source), Some(cwd)) = (str_param(params, "sessionId"), str_param(params, "cwd")) else {
            return self.out.fail(id, RpcError::invalid_params("sessionId and cwd are required")).await;
        };
        let live = lock(&self.sessions).get(source).map(|session| session.file.clone());
        let file = match live {
            Some(file) => file,
            None => match self.store.load(source) {
                Ok(Some(file)) => file,
                Ok(None) => return self.out.fail(id, RpcError::session_not_found(source)).await,
                Err(e) => return self.out.fail(id, RpcError::internal(e)).await,
            },
        };
        let session_id = format!("mock-{}", uuid::Uuid::new_v4());
        let file = SessionFile { cwd: Some(PathBuf::from(cwd)), forked_from: Some(source.to_string()), ..file };
        if let Err(e) = self.store.save(&session_id, &file) {
            return self.out.fail(id, RpcError::internal(e)).await;
        }
        self.install(&session_id, PathBuf::from(cwd), file, params);
        let mut result = json!({"sessionId": session_id});
        self.offered(&session_id, &mut result);
        self.out.respond(id, result).await;
        self.advertise_commands(&session_id).await;
    }

    async fn restore(&self, id: &Value, params: &Value, kind: Restore) {
        if self.args.restore_hang {
            return;
        }
        let Some(session_id) = str_param(params, "sessionId") else {
            return self.out.fail(id, RpcError::invalid_params("sessionId is required")).await;
        };
        let scripted = match kind {
            Restore::Resume => self.args.resume_error.or(self.args.restore_error),
            Restore::Load => self.args.restore_error,
        };
        if let Some(code) = scripted {
            return self.out.fail(id, RpcError::scripted(code, session_id)).await;
        }
        let file = match self.store.load(session_id) {
            Ok(Some(file)) => file,
            Ok(None) => return self.out.fail(id, RpcError::session_not_found(session_id)).await,
            Err(e) => return self.out.fail(id, RpcError::internal(e)).await,
        };
        let cwd = str_param(params, "cwd")
            .map(PathBuf::from)
            .or_else(|| file.cwd.clone())
            .unwrap_or_else(|| PathBuf::from("."));
        let history = file.history.clone();
        self.install(session_id, cwd, file, params);

        if kind == Restore::Load || self.args.resume_replays {
            for entry in history {
                let tag = match entry.role {
                    Role::User => "user_message_chunk",
                    Role::Agent => "agent_message_chunk",
                };
                let update = json!({
                    "sessionUpdate": tag,
                    "content": {"type": "text", "text": entry.text},
                });
                self.out.update(session_id, update).await;
            }
        }
        let mut result = json!({});
        self.offered(session_id, &mut result);
        self.out.respond(id, result).await;
        if kind == Restore::Load {
            self.advertise_commands(session_id).await;
        }
    }

    /// A restored session keeps its cancel channel, so a cancel still
    /// reaches turns that were running when it was reloaded.
    fn install(&self, session_id: &str, cwd: PathBuf, file: SessionFile, params: &Value) {
        let mcp_servers = params.get("mcpServers").cloned().unwrap_or(Value::Null);
        match lock(&self.sessions).entry(session_id.to_string()) {
            MapEntry::Occupied(mut slot) => {
                let session = slot.get_mut();
                session.cwd = cwd;
                session.file = file;
                session.mcp_servers = mcp_servers;
            }
            MapEntry::Vacant(slot) => {
                slot.insert(Session {
                    cwd,
                    file,
                    cancel: watch::channel(0).0,
                    settings: Default::default(),
                    mcp_servers,
                });
            }
        }
    }

    /// `/mcp`: the MCP servers the session was given, one per line (`name (stdio): command args,
    /// env KEY=VALUE` / `name (http): url, header NAME=VALUE`), or that there are none.
    pub(super) fn describe_mcp(&self, session_id: &str) -> String {
        let servers = lock(&self.sessions).get(session_id).map(|s| s.mcp_servers.clone()).unwrap_or_default();
        let Some(servers) = servers.as_array().filter(|a| !a.is_empty()) else {
            return "No MCP servers.".to_string();
        };
        let pairs = |list: Option<&Value>, what: &str| -> String {
            list.and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| format!(", {what} {}={}", p["name"].as_str().unwrap_or(""), p["value"].as_str().unwrap_or("")))
                .collect()
        };
        let lines: Vec<String> = servers
            .iter()
            .map(|server| {
                let name = server["name"].as_str().unwrap_or("?");
                match server["type"].as_str() {
                    Some(kind @ ("http" | "sse")) => {
                        let url = server["url"].as_str().unwrap_or("");
                        format!("{name} ({kind}): {url}{}", pairs(server.get("headers"), "header"))
                    }
                    _ => {
                        let mut command = server["command"].as_str().unwrap_or("").to_string();
                        for arg in server["args"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                            command.push(' ');
                            command.push_str(arg);
                        }
                        format!("{name} (stdio): {command}{}", pairs(server.get("env"), "env"))
                    }
                }
            })
            .collect();
        format!("MCP servers: {}", lines.join("; "))
    }

    async fn advertise_commands(&self, session_id: &str) {
        let commands: Vec<Value> = turn::COMMANDS
            .iter()
            .map(|(name, hint, description)| match hint {
                Some(hint) => {
                    json!({"name": name, "description": description, "input": {"hint": hint}})
                }
                None => json!({"name": name, "description": description}),
            })
            .collect();
        let update = json!({
            "sessionUpdate": "available_commands_update",
            "availableCommands": commands,
        });
        self.out.update(session_id, update).await;
    }

    /// The turn runs in its own task so that this reader keeps serving
    /// cancels and the client's answers to our requests meanwhile.
    async fn prompt(self: &Arc<Self>, id: Value, params: &Value) {
        let (Some(session_id), Some(blocks)) =
            (str_param(params, "sessionId"), params.get("prompt").and_then(Value::as_array))
        else {
            let error = RpcError::invalid_params("sessionId and prompt are required");
            return self.out.fail(&id, error).await;
        };
        // Newline-joined so that one block's last line and the next block's
        // first line stay separate lines for the line-based scripts.
        let text = blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| str_param(block, "text"))
            .collect::<Vec<_>>()
            .join("\n");
        let started = lock(&self.sessions)
            .get(session_id)
            .map(|session| (session.cwd.clone(), session.file.clone(), session.cancel.subscribe()));
        let Some((cwd, file, cancel)) = started else {
            return self.out.fail(&id, RpcError::session_not_found(session_id)).await;
        };
        // An agent that is about to exit reads nothing more: what the client writes meanwhile
        // stays unread in the pipe (`/exit`, `/exit-deaf` which exits later, `/deaf` and
        // `/flood-read`).
        let request = turn::current_request(&text).trim_start();
        if ["/exit", "/deaf", "/flood-read"].iter().any(|command| request.starts_with(command)) {
            self.deaf.store(true, Ordering::SeqCst);
        }
        let turn = turn::Turn {
            agent: Arc::clone(self),
            request_id: id,
            session_id: session_id.to_string(),
            cwd,
            memory: file.memory,
            forked_from: file.forked_from,
            usage: None,
            cancel,
        };
        tokio::spawn(turn::run(turn, text));
    }

    /// Registers the waiter before sending, so even an instant answer finds it.
    async fn call(&self, method: &str, params: Value) -> (String, oneshot::Receiver<Result<Value, RpcError>>) {
        let id = Value::from(self.next_request_id.fetch_add(1, Ordering::Relaxed));
        let key = id.to_string();
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(key.clone(), tx);
        self.out.request(&id, method, params).await;
        (key, rx)
    }

    /// Like `call`, with the request's line passed through `mangle` before it is written.
    async fn call_mangled(
        &self,
        method: &str,
        params: Value,
        mangle: impl Fn(String) -> String,
    ) -> (String, oneshot::Receiver<Result<Value, RpcError>>) {
        let id = Value::from(self.next_request_id.fetch_add(1, Ordering::Relaxed));
        let key = id.to_string();
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(key.clone(), tx);
        let line = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        self.out.raw(mangle(line)).await;
        (key, rx)
    }

    fn abandon(&self, key: &str) {
        lock(&self.pending).remove(key);
    }

    fn next_tool_id(&self) -> String {
        format!("tool-{}", self.next_tool_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Saved under the sessions lock so that two turns finishing together
    /// cannot rename an older snapshot over a newer one.
    fn finish_turn(&self, session_id: &str, user: String, reply: String, memory: Option<String>) -> Result<(), String> {
        let mut sessions = lock(&self.sessions);
        let Some(session) = sessions.get_mut(session_id) else {
            return Err(format!("session {session_id} vanished during the turn"));
        };
        let history = &mut session.file.history;
        history.push(store::Entry { role: Role::User, text: user });
        history.push(store::Entry { role: Role::Agent, text: reply });
        session.file.memory = memory;
        session.file.cwd = Some(session.cwd.clone());
        self.store.save(session_id, &session.file)
    }
}
