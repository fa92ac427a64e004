//! One prompt turn: what the mock "does" with the prompt text. Each script
//! exercises one part of ACP a supervising client has to handle.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use super::wire::{RpcError, INTERNAL_ERROR};
use super::Agent;

/// Slash commands announced in `available_commands_update`:
/// (name, input hint, description).
pub(super) const COMMANDS: &[(&str, Option<&str>, &str)] = &[
    ("tool", None, "run a tool call"),
    ("plan", None, "publish a three-step plan"),
    ("permission", Some("[always] [TITLE]"), "ask the client for permission (always: also offer allow/reject always)"),
    ("run", Some("COMMAND"), "ask to run COMMAND (an execute tool titled \"Run tests\", offering allow/reject always)"),
    ("write", Some("REL TEXT"), "write a file through the client"),
    ("read", Some("REL"), "read a file through the client"),
    ("chunks", Some("N"), "stream N numbered chunks"),
    ("slow", Some("N"), "stream N chunks 50 ms apart"),
    ("paced", Some("RATE N"), "stream N chunks at RATE per second, each stamped with its send time"),
    ("hang", None, "work until cancelled"),
    ("stubborn", None, "work forever, ignoring session/cancel"),
    ("crash", None, "exit with code 3 mid-turn"),
    ("hog", Some("MIB"), "take MIB MiB of memory (written to, so it is really used), then work until cancelled"),
    ("error", None, "fail the prompt with a JSON-RPC error"),
    ("garbage", None, "write malformed and unexpected output"),
    ("half-emoji", None, "a chunk and a permission request cut mid-emoji (a lone \\ud83d escape)"),
    ("broken-request", None, "a permission request cut short, then one whose options do not decode"),
    ("deep", Some("N"), "a tool call whose input nests N levels of arrays"),
    ("think", None, "stream thoughts before replying"),
    ("exit", None, "answer, then exit"),
    ("exit-deaf", Some("MS"), "answer, read nothing more, exit MS ms later"),
    ("deaf", None, "answer, then read nothing more (and never exit by itself)"),
    ("origin", None, "tell which session this one was forked from"),
    ("options", None, "tell the mode and options this session runs with"),
    ("usage", Some("IN OUT [CACHED] [COST]"), "report token usage for the turn (and a session cost in USD)"),
    ("flood-read", Some("REL N"), "read nothing more, ask to read REL N times, never answer the prompt"),
];

const RESUME_MARKER: &str = "RESUME CONTEXT FOR CONTINUING TASK";
const CURRENT_MARKER: &str = "=== CURRENT REQUEST ===";
const INSTRUCTIONS_MARKER: &str = "=== INSTRUCTIONS ===";
const MAX_CHUNKS: u64 = 1_000_000;
/// Fastest rate `/paced` accepts, in chunks per second.
const MAX_PACED_RATE: u64 = 1_000_000;
const SLOW_CHUNK_DELAY: Duration = Duration::from_millis(50);
const GARBAGE_CHUNK_BYTES: usize = 3 * 1024 * 1024;

pub(super) struct Turn {
    pub agent: Arc<Agent>,
    pub request_id: Value,
    pub session_id: String,
    pub cwd: PathBuf,
    /// Starts as the session's memory; the prompt may overwrite it.
    pub memory: Option<String>,
    /// The session this one was forked from (`session/fork`).
    pub forked_from: Option<String>,
    /// `usage` of the prompt's answer, when the turn reports one (`/usage`).
    pub usage: Option<Value>,
    pub cancel: watch::Receiver<u64>,
}

enum Stop {
    Cancelled,
    Failed(RpcError),
}

/// Every update of the turn is queued before this answers the prompt, and
/// the single writer keeps that order on the wire.
pub(super) async fn run(mut turn: Turn, text: String) {
    // `/exit` answers the prompt, then the process exits: an agent that goes away between turns.
    let (command, arg) = split_word(current_request(&text).lines().next().unwrap_or("").trim());
    let exits_after = match command {
        "/exit" => Some(Duration::ZERO),
        "/exit-deaf" => Some(Duration::from_millis(arg.trim().parse().unwrap_or(500))),
        _ => None,
    };
    let outcome = turn.play(&text).await;
    let agent = Arc::clone(&turn.agent);
    let answer = match outcome {
        Ok(reply) => {
            let memory = turn.memory.take();
            let usage = turn.usage.take();
            agent
                .finish_turn(&turn.session_id, text, reply, memory)
                .map(|()| match usage {
                    Some(usage) => json!({"stopReason": "end_turn", "usage": usage}),
                    None => json!({"stopReason": "end_turn"}),
                })
                .map_err(RpcError::internal)
        }
        Err(Stop::Cancelled) if agent.args.cancel_ends_turn => Ok(json!({"stopReason": "end_turn"})),
        Err(Stop::Cancelled) if agent.args.cancel_errors => Err(RpcError::internal("Internal error: aborted")),
        Err(Stop::Cancelled) => Ok(json!({"stopReason": "cancelled"})),
        Err(Stop::Failed(error)) => Err(error),
    };
    match answer {
        Ok(result) => agent.out.respond(&turn.request_id, result).await,
        Err(error) => agent.out.fail(&turn.request_id, error).await,
    }
    if let Some(after) = exits_after {
        tokio::time::sleep(after).await;
        agent.out.exit(0).await;
    }
}

impl Turn {
    /// Returns the reply text exactly as streamed, for the history.
    async fn play(&mut self, text: &str) -> Result<String, Stop> {
        if let Some(memory) = scan_memory(text) {
            self.memory = Some(memory);
        }
        let prefix = if text.contains(RESUME_MARKER) { "[resume context received] " } else { "" };
        let request = current_request(text);
        let first_line = request.lines().next().unwrap_or("").trim();
        let lower = first_line.to_lowercase();
        let (command, arg) = split_word(first_line);
        let delay = Duration::from_millis(self.agent.args.chunk_delay_ms);

        // These three stream exactly what they are named for, with no
        // thought and no prefix, so tests can count chunks precisely.
        match command {
            "/chunks" => {
                let reply = match parse_count(arg) {
                    Some(n) => numbered("c", n),
                    None => "Usage: /chunks N".to_string(),
                };
                self.stream(&reply, delay).await?;
                return Ok(reply);
            }
            "/paced" => return self.paced(arg).await,
            "/garbage" => return self.garbage().await,
            "/half-emoji" => return self.half_emoji().await,
            "/broken-request" => return self.broken_request().await,
            "/crash" => return self.crash().await,
            "/hog" => return self.hog(arg).await,
            "/stubborn" => return self.stubborn().await,
            "/exit" | "/exit-deaf" => {
                self.stream("Bye.", delay).await?;
                return Ok("Bye.".to_string());
            }
            "/deaf" => {
                self.stream("Not listening.", delay).await?;
                return Ok("Not listening.".to_string());
            }
            "/flood-read" => return self.flood_read(arg).await,
            "/error" => return Err(Stop::Failed(RpcError::new(INTERNAL_ERROR, "Scripted prompt failure"))),
            _ => {}
        }

        self.think("Thinking.").await?;
        let mut reply_delay = delay;
        let body = if lower.contains("what did i ask you to remember") {
            match &self.memory {
                Some(memory) => format!("You asked me to remember {memory}."),
                None => "You did not ask me to remember anything.".to_string(),
            }
        } else if let (true, Some(memory)) = (lower.starts_with("remember "), &self.memory) {
            format!("OK, I will remember {memory}.")
        } else {
            match command {
                "/tool" => self.tool().await?,
                "/edit" => self.edit().await?,
                "/deep" => self.deep(arg).await?,
                "/plan" => self.plan().await,
                "/permission" => self.permission(arg).await?,
                "/run" => {
                    let tool = json!({"title": "Run tests", "kind": "execute", "rawInput": {"command": arg.trim()}});
                    self.ask_permission(tool, true).await?
                }
                "/terminal" => self.terminal(arg, TerminalUse::Wait).await?,
                "/terminal-leave" => self.terminal(arg, TerminalUse::Leave).await?,
                "/terminal-kill" => self.terminal(arg, TerminalUse::Kill).await?,
                "/write" => self.write(arg).await?,
                "/read" => self.read(arg).await?,
                "/think" => {
                    self.think("Thought it through.").await?;
                    "Thought about it.".to_string()
                }
                "/slow" => {
                    reply_delay = SLOW_CHUNK_DELAY;
                    match parse_count(arg) {
                        Some(n) => numbered("s", n),
                        None => "Usage: /slow N".to_string(),
                    }
                }
                "/hang" => return self.hang().await,
                "/until" => return self.until(arg.trim()).await,
                "/origin" => match &self.forked_from {
                    Some(source) => format!("Forked from {source}."),
                    None => "Not a fork.".to_string(),
                },
                "/options" => self.agent.settings(&self.session_id).describe(),
                "/mcp" => self.agent.describe_mcp(&self.session_id),
                "/usage" => self.usage(arg).await,
                "/stderr" => {
                    // `\e` stands for ESC, so a prompt can carry colour codes like a CLI's logger.
                    for line in arg.replace("\\e", "\x1b").split(" \\n ") {
                        eprintln!("{line}");
                    }
                    "Wrote to stderr.".to_string()
                }
                "/env" => {
                    let name = arg.trim();
                    match std::env::var(name) {
                        Ok(value) => format!("{name}={value}"),
                        Err(_) => format!("{name} is not set"),
                    }
                }
                _ => format!("Echo: {}", request.chars().take(200).collect::<String>()),
            }
        };
        let reply = format!("{prefix}{body}");
        self.stream(&reply, reply_delay).await?;
        Ok(reply)
    }

    /// `/usage IN OUT [CACHED] [COST]`: the answer reports IN input and OUT output tokens (ACP
    /// `PromptResponse.usage`), CACHED cache-read tokens if given; with COST, a `usage_update`
    /// reports the session's cumulative cost in USD (and its context window) first.
    async fn usage(&mut self, arg: &str) -> String {
        let numbers: Vec<&str> = arg.split_whitespace().collect();
        let count = |at: usize| numbers.get(at).and_then(|n| n.parse::<u64>().ok());
        let (Some(input), Some(output)) = (count(0), count(1)) else {
            return "Usage: /usage IN OUT [CACHED] [COST]".to_string();
        };
        let mut usage = json!({"totalTokens": input + output, "inputTokens": input, "outputTokens": output});
        if let Some(cached) = count(2) {
            usage["cachedReadTokens"] = json!(cached);
        }
        if let Some(cost) = numbers.get(3).and_then(|n| n.parse::<f64>().ok()).filter(|c| c.is_finite()) {
            self.update(json!({
                "sessionUpdate": "usage_update",
                "used": input + output,
                "size": 200_000,
                "cost": {"amount": cost, "currency": "USD"},
            }))
            .await;
        }
        self.usage = Some(usage);
        format!("Used {input} input and {output} output tokens.")
    }

    async fn update(&self, update: Value) {
        self.agent.out.update(&self.session_id, update).await;
    }

    fn check(&self) -> Result<(), Stop> {
        match self.cancel.has_changed() {
            Ok(true) => Err(Stop::Cancelled),
            _ => Ok(()),
        }
    }

    async fn pause(&mut self, delay: Duration) -> Result<(), Stop> {
        if !delay.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = cancelled(&mut self.cancel) => return Err(Stop::Cancelled),
            }
        }
        self.check()
    }

    /// One chunk per word, keeping each word's trailing space, so the
    /// chunks concatenate back to exactly `reply`.
    async fn stream(&mut self, reply: &str, delay: Duration) -> Result<(), Stop> {
        let message_id = format!("msg-{}", uuid::Uuid::new_v4());
        for (i, word) in reply.split_inclusive(' ').enumerate() {
            if i > 0 {
                self.pause(delay).await?;
            }
            self.check()?;
            self.update(json!({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": word},
                "messageId": message_id,
            }))
            .await;
        }
        Ok(())
    }

    /// `/paced RATE N`: N chunks on a fixed schedule of RATE per second (chunk i is due at
    /// i / RATE after the first; a late chunk goes out at once, so the average rate holds).
    /// Each chunk is `t=<microseconds since the Unix epoch when it was written> `, which lets a
    /// client measure the delay from the agent to itself.
    async fn paced(&mut self, arg: &str) -> Result<String, Stop> {
        let (rate, rest) = split_word(arg);
        let rate = rate.parse::<u64>().ok().filter(|r| (1..=MAX_PACED_RATE).contains(r));
        let (Some(rate), Some(count)) = (rate, parse_count(rest)) else {
            let usage = "Usage: /paced RATE N".to_string();
            self.stream(&usage, Duration::ZERO).await?;
            return Ok(usage);
        };
        let message_id = format!("msg-{}", uuid::Uuid::new_v4());
        let started = tokio::time::Instant::now();
        let mut reply = String::new();
        for i in 0..count {
            let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
            if due > tokio::time::Instant::now() {
                tokio::select! {
                    () = tokio::time::sleep_until(due) => {}
                    () = cancelled(&mut self.cancel) => return Err(Stop::Cancelled),
                }
            }
            self.check()?;
            let sent = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let text = format!("t={} ", sent.as_micros());
            reply.push_str(&text);
            self.update(json!({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
                "messageId": message_id,
            }))
            .await;
        }
        Ok(reply)
    }

    async fn think(&self, thought: &str) -> Result<(), Stop> {
        self.check()?;
        // Each thought is its own message, as real agents mark them.
        self.update(json!({
            "sessionUpdate": "agent_thought_chunk",
            "messageId": format!("thought-{}", uuid::Uuid::new_v4().simple()),
            "content": {"type": "text", "text": thought},
        }))
        .await;
        Ok(())
    }

    /// Sends a request to the client and waits for its answer, unless the
    /// turn is cancelled first; then the request is abandoned and a late
    /// answer is dropped by the reader.
    async fn call(&mut self, method: &str, params: Value) -> Result<Result<Value, RpcError>, Stop> {
        let (key, answer) = self.agent.call(method, params).await;
        tokio::select! {
            answer = answer => Ok(answer.unwrap_or_else(|_| {
                Err(RpcError::internal("request dropped without an answer"))
            })),
            () = cancelled(&mut self.cancel) => {
                self.agent.abandon(&key);
                Err(Stop::Cancelled)
            }
        }
    }

    /// A tool call whose input is N arrays, one inside the other, around the text "core".
    async fn deep(&mut self, arg: &str) -> Result<String, Stop> {
        let Ok(levels) = arg.trim().parse::<usize>() else {
            return Ok("Usage: /deep N".to_string());
        };
        let input = (0..levels).fold(json!("core"), |inner, _| json!([inner]));
        self.update(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": self.agent.next_tool_id(),
            "title": format!("Deep input ({levels} levels)"),
            "kind": "other",
            "status": "completed",
            "rawInput": input,
        }))
        .await;
        Ok("Deep tool call sent.".to_string())
    }

    async fn tool(&mut self) -> Result<String, Stop> {
        let tool_call_id = self.agent.next_tool_id();
        let path = self.cwd.join("README.md");
        let delay = Duration::from_millis(self.agent.args.chunk_delay_ms);
        self.update(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": "Read file",
            "kind": "read",
            "status": "pending",
            "rawInput": {"path": path.display().to_string()},
        }))
        .await;
        self.pause(delay).await?;
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": "in_progress",
        }))
        .await;
        self.pause(delay).await?;
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "tool output"}}],
        }))
        .await;
        Ok("Tool finished.".to_string())
    }

    /// An edit tool call whose content is a diff of `src/lib.rs` (reported, not written).
    async fn edit(&mut self) -> Result<String, Stop> {
        let tool_call_id = self.agent.next_tool_id();
        let path = self.cwd.join("src").join("lib.rs").display().to_string();
        let delay = Duration::from_millis(self.agent.args.chunk_delay_ms);
        self.update(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": "Edit src/lib.rs",
            "kind": "edit",
            "status": "in_progress",
            "rawInput": {"path": path},
        }))
        .await;
        self.pause(delay).await?;
        self.update(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": "completed",
            "content": [{
                "type": "diff",
                "path": path,
                "oldText": "pub fn greet() -> &'static str {\n    \"hello\"\n}\n",
                "newText": "/// The greeting.\npub fn greet() -> &'static str {\n    \"hello, world\"\n}\n",
            }],
        }))
        .await;
        Ok("Edited src/lib.rs.".to_string())
    }

    async fn plan(&self) -> String {
        self.update(json!({
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Read the code", "priority": "high", "status": "completed"},
                {"content": "Make the change", "priority": "medium", "status": "in_progress"},
                {"content": "Run the tests", "priority": "low", "status": "pending"},
            ],
        }))
        .await;
        "Plan ready.".to_string()
    }

    /// `/permission [always] [TITLE]`: asks to run an `edit` tool titled TITLE ("Write file"
    /// by default). With `always`, the options include `allow_always` and `reject_always` (as
    /// real agents offer them; the mock does not remember them: that is the client's job) and
    /// the tool call carries its input and a diff.
    async fn permission(&mut self, arg: &str) -> Result<String, Stop> {
        let (first, rest) = split_word(arg);
        let (always, title) = if first == "always" { (true, rest) } else { (false, arg) };
        let title = if title.trim().is_empty() { "Write file" } else { title.trim() };
        let mut tool_call = json!({"title": title, "kind": "edit"});
        if always {
            let new_text = "pub fn answer() -> u32 {\n    42\n}\n";
            tool_call["rawInput"] = json!({"path": "src/lib.rs", "content": new_text});
            tool_call["content"] = json!([{"type": "diff", "path": "src/lib.rs", "oldText": "pub fn answer() -> u32 {\n    41\n}\n", "newText": new_text}]);
        }
        self.ask_permission(tool_call, always).await
    }

    /// Asks the client to let `tool_call` run (its id and status are added), offering allow and
    /// reject once, and with `always` allow and reject always too; replies with the outcome.
    async fn ask_permission(&mut self, mut tool_call: Value, always: bool) -> Result<String, Stop> {
        let mut options = vec![
            json!({"optionId": "allow", "name": "Allow", "kind": "allow_once"}),
            json!({"optionId": "reject", "name": "Reject", "kind": "reject_once"}),
        ];
        if always {
            options.insert(1, json!({"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"}));
            options.push(json!({"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"}));
        }
        tool_call["toolCallId"] = json!(self.agent.next_tool_id());
        tool_call["status"] = json!("pending");
        let params = json!({"sessionId": self.session_id, "toolCall": tool_call, "options": options});
        let reply = match self.call("session/request_permission", params).await? {
            Ok(result) => {
                let outcome = result.get("outcome").unwrap_or(&Value::Null);
                match (outcome.get("outcome").and_then(Value::as_str), outcome.get("optionId").and_then(Value::as_str))
                {
                    (Some("selected"), Some(option)) => {
                        format!("Permission outcome: selected {option}")
                    }
                    (Some("cancelled"), _) => "Permission outcome: cancelled".to_string(),
                    _ => "Permission failed: malformed outcome".to_string(),
                }
            }
            Err(error) => format!("Permission failed: {}", error.message),
        };
        Ok(reply)
    }

    async fn write(&mut self, arg: &str) -> Result<String, Stop> {
        let (rel, content) = split_word(arg);
        if rel.is_empty() {
            return Ok("Usage: /write REL TEXT".to_string());
        }
        // A prompt's first line is its command: `\n` stands for a newline in the text.
        let content = content.replace("\\n", "\n");
        let params = json!({
            "sessionId": self.session_id,
            "path": resolve(&self.cwd, rel),
            "content": content,
        });
        Ok(match self.call("fs/write_text_file", params).await? {
            Ok(_) => format!("Wrote {rel}."),
            Err(error) => format!("Write failed: {}", error.message),
        })
    }

    /// `/terminal [--limit N] [--cwd DIR] COMMAND`: runs `sh -c COMMAND` in a terminal of the
    /// client's, shown in a tool call, and answers with its exit and output. `/terminal-leave`
    /// starts it and ends the turn without releasing it; `/terminal-kill` kills it once it has
    /// written something, then waits for its exit.
    async fn terminal(&mut self, arg: &str, mode: TerminalUse) -> Result<String, Stop> {
        if !self.agent.client_terminals.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok("Terminals not offered.".to_string());
        }
        let mut rest = arg.trim();
        let mut params = json!({"sessionId": self.session_id, "command": "sh"});
        loop {
            let (word, after) = split_word(rest);
            match word {
                "--limit" => {
                    let (n, after) = split_word(after);
                    params["outputByteLimit"] = json!(n.parse::<u64>().unwrap_or(0));
                    rest = after;
                }
                "--cwd" => {
                    let (dir, after) = split_word(after);
                    params["cwd"] = json!(resolve(&self.cwd, dir));
                    rest = after;
                }
                _ => break,
            }
        }
        params["args"] = json!(["-c", rest]);
        params["env"] = json!([{"name": "MOCK_TERMINAL", "value": "yes"}]);
        let created = match self.call("terminal/create", params).await? {
            Ok(result) => result,
            Err(error) => return Ok(format!("Terminal refused: {}", error.message)),
        };
        let Some(terminal_id) = created.get("terminalId").and_then(Value::as_str).map(str::to_string) else {
            return Ok("Terminal refused: no terminalId".to_string());
        };
        let tool_call_id = self.agent.next_tool_id();
        self.update(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": format!("Run {rest}"),
            "kind": "execute",
            "status": "in_progress",
            "content": [{"type": "terminal", "terminalId": terminal_id}],
        }))
        .await;
        let id = json!({"sessionId": self.session_id, "terminalId": terminal_id});
        match mode {
            TerminalUse::Leave => return Ok(format!("Left {terminal_id} running.")),
            TerminalUse::Kill => {
                // Once it has written something it is running: then kill it.
                loop {
                    let output = self.call("terminal/output", id.clone()).await?.unwrap_or_default();
                    if output.get("output").and_then(Value::as_str).is_some_and(|o| !o.is_empty()) {
                        break;
                    }
                    self.pause(Duration::from_millis(10)).await?;
                }
                if let Err(error) = self.call("terminal/kill", id.clone()).await? {
                    return Ok(format!("Kill refused: {}", error.message));
                }
            }
            TerminalUse::Wait => {}
        }
        let exit = match self.call("terminal/wait_for_exit", id.clone()).await? {
            Ok(exit) => exit,
            Err(error) => return Ok(format!("Wait refused: {}", error.message)),
        };
        let output = self.call("terminal/output", id.clone()).await?.unwrap_or_default();
        let _ = self.call("terminal/release", id.clone()).await?;
        let after_release = match self.call("terminal/output", id).await? {
            Ok(_) => "still known after release",
            Err(_) => "released",
        };
        self.update(json!({"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": "completed"}))
            .await;
        let text = output.get("output").and_then(Value::as_str).unwrap_or_default();
        let truncated = output.get("truncated").and_then(Value::as_bool).unwrap_or(false);
        let code = exit.get("exitCode").and_then(Value::as_i64).map_or("none".to_string(), |c| c.to_string());
        let signal = exit.get("signal").and_then(Value::as_str).unwrap_or("none");
        Ok(format!("Exit {code}, signal {signal}, truncated {truncated}, {after_release}: {}", text.trim_end()))
    }

    async fn read(&mut self, arg: &str) -> Result<String, Stop> {
        let (rel, _) = split_word(arg);
        if rel.is_empty() {
            return Ok("Usage: /read REL".to_string());
        }
        let params = json!({"sessionId": self.session_id, "path": resolve(&self.cwd, rel)});
        Ok(match self.call("fs/read_text_file", params).await? {
            Ok(result) => match result.get("content").and_then(Value::as_str) {
                Some(content) => format!("Read: {content}"),
                None => "Read failed: response has no content".to_string(),
            },
            Err(error) => format!("Read failed: {}", error.message),
        })
    }

    async fn hang(&mut self) -> Result<String, Stop> {
        self.stream("working ", Duration::ZERO).await?;
        cancelled(&mut self.cancel).await;
        Err(Stop::Cancelled)
    }

    /// Works until `path` exists (looked at every 10 ms), then ends the turn: a turn that lasts
    /// as long as a test wants, and ends by itself, through a restart of the server if its
    /// agent outlives it.
    async fn until(&mut self, path: &str) -> Result<String, Stop> {
        if path.is_empty() {
            return Ok("Usage: /until PATH".to_string());
        }
        self.stream(&format!("waiting for {path} "), Duration::ZERO).await?;
        let path = std::path::PathBuf::from(resolve(&self.cwd, path));
        while !path.exists() {
            tokio::select! {
                () = cancelled(&mut self.cancel) => return Err(Stop::Cancelled),
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
        let reply = format!("{} appeared.", path.display());
        self.stream(&reply, Duration::ZERO).await?;
        Ok(reply)
    }

    /// Takes `mib` MiB (at most 64 GiB), touching every page, one MiB at a time, and keeps it
    /// until cancelled: an agent that runs out of memory, for a container's memory limit.
    async fn hog(&mut self, mib: &str) -> Result<String, Stop> {
        let mib: usize = mib.trim().parse().unwrap_or(0).min(64 * 1024);
        self.stream(&format!("taking {mib} MiB "), Duration::ZERO).await?;
        let mut held: Vec<Vec<u8>> = Vec::with_capacity(mib);
        for _ in 0..mib {
            held.push(vec![1u8; 1024 * 1024]);
            tokio::task::yield_now().await;
        }
        self.stream(&format!("holding {} MiB ", held.len()), Duration::ZERO).await?;
        cancelled(&mut self.cancel).await;
        drop(held);
        Err(Stop::Cancelled)
    }

    /// Ignores `session/cancel`: the prompt is never answered, whatever the client sends.
    async fn stubborn(&mut self) -> Result<String, Stop> {
        self.stream("working and not stopping ", Duration::ZERO).await?;
        std::future::pending().await
    }

    /// A hostile agent: asks for the file `REL` N times and reads none of the answers (stdin is
    /// no longer read, see `prompt`); the prompt is never answered.
    async fn flood_read(&mut self, arg: &str) -> Result<String, Stop> {
        let (rel, count) = split_word(arg);
        let count = parse_count(count).unwrap_or(1);
        self.stream("reading ", Duration::ZERO).await?;
        let params = json!({"sessionId": self.session_id, "path": resolve(&self.cwd, rel)});
        for _ in 0..count {
            let id = Value::from(self.agent.next_request_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            self.agent.out.request(&id, "fs/read_text_file", params.clone()).await;
        }
        std::future::pending().await
    }

    /// The prompt is never answered: the exit is queued behind the chunk so
    /// the client sees output followed by the process dying mid-turn.
    async fn crash(&mut self) -> Result<String, Stop> {
        self.stream("about to crash ", Duration::ZERO).await?;
        self.agent.out.exit(3).await;
        std::future::pending().await
    }

    /// What a JavaScript agent writes for text cut in the middle of an emoji: the first half of
    /// a surrogate pair, escaped, alone. JSON from Rust cannot hold one, so a placeholder is
    /// replaced in the serialised line.
    async fn half_emoji(&mut self) -> Result<String, Stop> {
        const HALF: &str = "\u{e000}HALF";
        let half = |line: String| line.replace(HALF, "\\ud83d");
        let chunk = json!({
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": self.session_id, "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": format!("cut {HALF} here. ")},
            }},
        });
        self.agent.out.raw(half(chunk.to_string())).await;
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": {"toolCallId": self.agent.next_tool_id(), "title": format!("Write {HALF}"), "kind": "edit", "status": "pending"},
            "options": [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ],
        });
        let (key, answer) = self.agent.call_mangled("session/request_permission", params, half).await;
        let answer = tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| Err(RpcError::internal("request dropped without an answer"))),
            () = cancelled(&mut self.cancel) => {
                self.agent.abandon(&key);
                return Err(Stop::Cancelled);
            }
        };
        let reply = match answer {
            Ok(result) => format!("Permission answered: {}", result["outcome"]["outcome"].as_str().unwrap_or("?")),
            Err(error) => format!("Permission failed: {}", error.message),
        };
        let delay = Duration::from_millis(self.agent.args.chunk_delay_ms);
        self.stream(&reply, delay).await?;
        Ok(reply)
    }

    /// A permission request whose line ends in the middle of its params (as a process killed
    /// mid-write leaves it), then one whose options are not a list. Replies with what each
    /// answer was.
    async fn broken_request(&mut self) -> Result<String, Stop> {
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": {"toolCallId": self.agent.next_tool_id(), "title": "Cut short", "kind": "edit", "status": "pending"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
        });
        let cut = |line: String| line[..line.find("\"options\"").unwrap_or(line.len())].to_string();
        let (key, answer) = self.agent.call_mangled("session/request_permission", params, cut).await;
        let first = self.answer_of(&key, answer).await?;
        let params = json!({
            "sessionId": self.session_id,
            "toolCall": {"toolCallId": self.agent.next_tool_id(), "title": "Bad options", "kind": "edit", "status": "pending"},
            "options": "allow",
        });
        let (key, answer) = self.agent.call("session/request_permission", params).await;
        let second = self.answer_of(&key, answer).await?;
        let reply = format!("Cut short: {first}. Bad options: {second}.");
        let delay = Duration::from_millis(self.agent.args.chunk_delay_ms);
        self.stream(&reply, delay).await?;
        Ok(reply)
    }

    /// How the client answered a request: its outcome, or its error's code and message.
    async fn answer_of(
        &mut self,
        key: &str,
        answer: tokio::sync::oneshot::Receiver<Result<Value, RpcError>>,
    ) -> Result<String, Stop> {
        let answer = tokio::select! {
            answer = answer => answer.unwrap_or_else(|_| Err(RpcError::internal("request dropped without an answer"))),
            () = cancelled(&mut self.cancel) => {
                self.agent.abandon(key);
                return Err(Stop::Cancelled);
            }
        };
        Ok(match answer {
            Ok(result) => format!("answered {}", result["outcome"]["outcome"].as_str().unwrap_or("?")),
            Err(error) => format!("error {} {}", error.code, error.message),
        })
    }

    async fn garbage(&mut self) -> Result<String, Stop> {
        let out = &self.agent.out;
        let session_id = &self.session_id;
        out.raw("this is not json".to_string()).await;
        out.raw(r#"{"jsonrpc":"2.0""#.to_string()).await;
        let huge = "x".repeat(GARBAGE_CHUNK_BYTES);
        out.update(
            session_id,
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": huge}}),
        )
        .await;
        out.notify("mock/unknown", json!({"sessionId": session_id})).await;
        // Sent outside the pending table on purpose: its answer is ignored.
        out.send(&json!({
            "jsonrpc": "2.0",
            "id": "g1",
            "method": "mock/ask",
            "params": {"sessionId": session_id},
        }))
        .await;
        out.update(session_id, json!({"sessionUpdate": "future_thing", "x": 1})).await;
        let reply = "Still here.".to_string();
        let delay = Duration::from_millis(self.agent.args.chunk_delay_ms);
        self.stream(&reply, delay).await?;
        Ok(reply)
    }
}

/// Resolves once the session is cancelled after this turn began. If the
/// session's sender is gone no cancel can ever come, so it never resolves.
async fn cancelled(cancel: &mut watch::Receiver<u64>) {
    if cancel.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Absolute paths pass through so tests can reach outside the cwd.
fn resolve(cwd: &Path, rel: &str) -> String {
    let path = Path::new(rel);
    if path.is_absolute() {
        rel.to_string()
    } else {
        cwd.join(path).display().to_string()
    }
}

/// What `/terminal` does with the terminal it creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TerminalUse {
    Wait,
    Leave,
    Kill,
}

fn split_word(s: &str) -> (&str, &str) {
    match s.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim_start()),
        None => (s, ""),
    }
}

/// `c1 c2 … cN ` for `numbered("c", N)`: every chunk keeps its trailing space.
fn numbered(prefix: &str, n: u64) -> String {
    (1..=n).fold(String::new(), |mut text, i| {
        let _ = write!(text, "{prefix}{i} ");
        text
    })
}

fn parse_count(arg: &str) -> Option<u64> {
    let (n, _) = split_word(arg);
    n.parse::<u64>().ok().map(|n| n.min(MAX_CHUNKS))
}

/// The last line containing `remember <something>` wins, so injected
/// history lines such as `[USER]: remember pineapple` count too.
fn scan_memory(text: &str) -> Option<String> {
    text.lines().rev().find_map(memory_in_line)
}

fn memory_in_line(line: &str) -> Option<String> {
    const KEY: &str = "remember ";
    // ASCII lowercasing keeps byte offsets valid for slicing `line`.
    let lower = line.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(KEY) {
        let start = from + pos + KEY.len();
        let rest = line[start..].trim().trim_end_matches(['.', '!', '?']).trim_end();
        if !rest.is_empty() {
            return Some(rest.to_string());
        }
        from = start;
    }
    None
}

/// Baton's resume prompt wraps the user's actual request in markers; the
/// scripts must react to that request, not to the injected context.
pub(super) fn current_request(text: &str) -> &str {
    let Some(start) = text.find(CURRENT_MARKER) else {
        return text.trim();
    };
    let after = &text[start + CURRENT_MARKER.len()..];
    let end = after.find(INSTRUCTIONS_MARKER).unwrap_or(after.len());
    after[..end].trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_set_by_remember_lines_only() {
        assert_eq!(scan_memory("remember pineapple").as_deref(), Some("pineapple"));
        assert_eq!(scan_memory("[USER]: Remember the blue door!\nok").as_deref(), Some("the blue door"));
        assert_eq!(scan_memory("what did I ask you to remember?"), None);
        assert_eq!(scan_memory("remember   ?"), None);
        assert_eq!(scan_memory("remember a\nremember b.\nwhat did I ask you to remember?").as_deref(), Some("b"));
    }

    #[test]
    fn current_request_is_between_markers() {
        let text = format!(
            "{RESUME_MARKER}\n[USER]: remember x\n{CURRENT_MARKER}\n  /tool now \n{INSTRUCTIONS_MARKER}\nbe nice"
        );
        assert_eq!(current_request(&text), "/tool now");
        assert_eq!(current_request(" plain "), "plain");
        assert_eq!(current_request("=== CURRENT REQUEST === tail"), "tail");
    }

    #[test]
    fn paths_resolve_against_cwd_unless_absolute() {
        assert_eq!(resolve(Path::new("/w"), "a/b.txt"), "/w/a/b.txt");
        assert_eq!(resolve(Path::new("/w"), "/etc/x"), "/etc/x");
    }

    #[test]
    fn counts_are_capped() {
        assert_eq!(parse_count("3"), Some(3));
        assert_eq!(parse_count("999999999"), Some(MAX_CHUNKS));
        assert_eq!(parse_count("x"), None);
    }
}
