//! A record-and-replay agent for tests: `batond record-agent --out FILE -- COMMAND ARGS...` sits
//! between batond (or any ACP client) and a real agent and appends the ACP exchange to FILE;
//! `batond replay-agent FILE` then plays the agent's side back, deterministically, without the
//! agent (no network, no API key, no model).
//!
//! A recording is JSON Lines. Each agent process is one *run*: a `{"run": {...}}` line (the
//! command, its secrets redacted), then one line per message in the order it crossed the pipe,
//! `{"from": "client", "message": ...}` or `{"from": "agent", "message": ...}` (a line that is not
//! JSON is kept as `"line"`). Several runs of one agent (a session started, then resumed after a
//! restart) go to the same file, one after the other.
//!
//! Secrets are redacted before anything is written: every value of an `env` or `headers` entry
//! (ACP's MCP server settings), every string under a key that names a secret (`token`,
//! `api_key`, `password`, `authorization`...), and every occurrence of the value of an
//! environment variable of the recorder whose name names one (`ANTHROPIC_API_KEY`...).
//!
//! Replaying, each message the client sends is matched against the recording by its kind
//! (request, notification, response), its method and its *shape* (the keys of its objects and
//! the types of its values, recursively), never by ids, texts or timestamps; the agent's
//! messages are then written as recorded, the ids of answers set to the ids the client used.
//! Of several runs, the one whose messages match is played (a `session/load` picks the run that
//! loaded). A message that matches no run is answered with a JSON-RPC error (when it is a
//! request) and the replay exits, saying on stderr which message did not match, how, and what
//! the recording expected.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use serde_json::{json, Map, Value};

/// `batond record-agent`.
#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// The recording to append this run to (created when missing).
    #[arg(long)]
    pub out: PathBuf,
    /// The agent's command line.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

/// `batond replay-agent`.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// A recording made with `batond record-agent`.
    pub recording: PathBuf,
}

const REDACTED: &str = "[REDACTED]";

/// A key or variable name that names a secret.
fn names_a_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace('-', "_");
    ["token", "secret", "password", "passwd", "api_key", "apikey", "authorization", "credential", "cookie"]
        .iter()
        .any(|word| name.contains(word))
}

/// What the recorder redacts: the values of its environment variables that name secrets.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    secrets: Vec<(String, String)>,
}

impl Redactor {
    /// From the recorder's own environment (the agent's: the recorder passes it on).
    pub fn from_env() -> Redactor {
        Redactor::from_vars(std::env::vars())
    }

    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Redactor {
        // Short values would redact ordinary words; a secret is longer.
        let secrets = vars.into_iter().filter(|(name, value)| names_a_secret(name) && value.len() >= 8).collect();
        Redactor { secrets }
    }

    fn text(&self, text: &str) -> String {
        self.secrets
            .iter()
            .fold(text.to_string(), |text, (name, value)| text.replace(value, &format!("[REDACTED:{name}]")))
    }

    /// `value` with its secrets replaced.
    pub fn value(&self, value: &mut Value) {
        match value {
            Value::String(text) => *text = self.text(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            Value::Object(object) => {
                for (key, inner) in object.iter_mut() {
                    match inner {
                        // ACP's `env` and `headers` of an MCP server: `[{name, value}]`.
                        Value::Array(entries) if key == "env" || key == "headers" => {
                            for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                                if entry.contains_key("value") {
                                    entry.insert("value".into(), json!(REDACTED));
                                }
                            }
                        }
                        Value::Object(map) if key == "env" || key == "headers" => {
                            map.values_mut().for_each(|v| *v = json!(REDACTED));
                        }
                        Value::String(_) if names_a_secret(key) => *inner = json!(REDACTED),
                        _ => self.value(inner),
                    }
                }
            }
            _ => {}
        }
    }

    /// A command line with the values of secret flags (`--api-key X`, `--token=X`) replaced.
    pub fn command(&self, command: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(command.len());
        let mut hide_next = false;
        for arg in command {
            if hide_next {
                out.push(REDACTED.to_string());
                hide_next = false;
                continue;
            }
            match arg.split_once('=') {
                Some((name, _)) if names_a_secret(name) => out.push(format!("{name}={REDACTED}")),
                _ => {
                    hide_next = arg.starts_with('-') && names_a_secret(arg);
                    out.push(self.text(arg));
                }
            }
        }
        out
    }
}

/// One recorded line of a run.
#[derive(Debug, Clone, PartialEq)]
enum Entry {
    Client(Value),
    Agent(Value),
    /// A line of the agent's stdout that is not JSON, written back as it was.
    AgentLine(String),
}

fn entry_line(from: &str, line: &str, redactor: &Redactor) -> String {
    match serde_json::from_str::<Value>(line) {
        Ok(mut message) => {
            redactor.value(&mut message);
            json!({"from": from, "message": message}).to_string()
        }
        Err(_) => json!({"from": from, "line": redactor.text(line)}).to_string(),
    }
}

/// `batond record-agent`: runs the agent, passes every line both ways and appends them to the
/// recording; exits with the agent's status.
pub fn record(args: RecordArgs) -> anyhow::Result<i32> {
    let redactor = Redactor::from_env();
    let (program, rest) = args.command.split_first().context("no agent command")?;
    let command: Vec<String> = args.command.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .with_context(|| format!("cannot open the recording {}", args.out.display()))?;
    let out = Arc::new(Mutex::new(file));
    let write = |out: &Mutex<std::fs::File>, line: String| -> std::io::Result<()> {
        let mut file = out.lock().map_err(|_| std::io::Error::other("the recording's lock is poisoned"))?;
        // One write per line, flushed at once: a run cut short by a kill keeps what it had.
        file.write_all(format!("{line}\n").as_bytes())?;
        file.flush()
    };
    write(&out, json!({"run": {"command": redactor.command(&command)}}).to_string())?;

    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {}", program.to_string_lossy()))?;
    let mut agent_in = child.stdin.take().context("the agent's stdin")?;
    let agent_out = child.stdout.take().context("the agent's stdout")?;

    let client_out = out.clone();
    let client_redactor = redactor.clone();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if write(&client_out, entry_line("client", &line, &client_redactor)).is_err()
                || agent_in.write_all(format!("{line}\n").as_bytes()).and_then(|_| agent_in.flush()).is_err()
            {
                break;
            }
        }
        // Dropping the agent's stdin tells it the client is gone.
    });

    let mut stdout = std::io::stdout().lock();
    for line in BufReader::new(agent_out).lines() {
        let Ok(line) = line else { break };
        write(&out, entry_line("agent", &line, &redactor))?;
        if stdout.write_all(format!("{line}\n").as_bytes()).and_then(|_| stdout.flush()).is_err() {
            break;
        }
    }
    let status = child.wait().context("wait for the agent")?;
    Ok(status.code().unwrap_or(1))
}

/// The runs of a recording.
fn parse_recording(text: &str, path: &Path) -> anyhow::Result<Vec<Vec<Entry>>> {
    let mut runs: Vec<Vec<Entry>> = Vec::new();
    for (number, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{}:{}", path.display(), number + 1);
        let value: Value = serde_json::from_str(line).with_context(|| format!("{}: not JSON", at()))?;
        if value.get("run").is_some() {
            runs.push(Vec::new());
            continue;
        }
        let Some(run) = runs.last_mut() else { bail!("{}: a message before the first run line", at()) };
        let entry = match (value["from"].as_str(), value.get("message"), value["line"].as_str()) {
            (Some("client"), Some(message), _) => Entry::Client(message.clone()),
            (Some("agent"), Some(message), _) => Entry::Agent(message.clone()),
            (Some("agent"), None, Some(line)) => Entry::AgentLine(line.to_string()),
            // A client line that was not JSON: nothing the replay can match; skipped.
            (Some("client"), None, Some(_)) => continue,
            _ => bail!("{}: neither a run nor a message of the client or the agent", at()),
        };
        run.push(entry);
    }
    if runs.iter().all(Vec::is_empty) {
        bail!("{}: the recording holds no message", path.display());
    }
    Ok(runs)
}

/// The shape of a JSON value: the keys of its objects and the types of its values. An array's
/// shape is the shapes of its items, each once.
pub fn shape(value: &Value) -> Value {
    match value {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("boolean"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(items) => {
            let mut shapes: Vec<Value> = Vec::new();
            for item in items.iter().map(shape) {
                if !shapes.contains(&item) {
                    shapes.push(item);
                }
            }
            shapes.sort_by_key(|s| s.to_string());
            Value::Array(shapes)
        }
        Value::Object(object) => {
            Value::Object(object.iter().map(|(k, v)| (k.clone(), shape(v))).collect::<Map<_, _>>())
        }
    }
}

/// What a JSON-RPC message is, for matching: its kind and method.
fn kind(message: &Value) -> String {
    match (message.get("method").and_then(Value::as_str), message.get("id").is_some()) {
        (Some(method), true) => format!("request {method}"),
        (Some(method), false) => format!("notification {method}"),
        (None, _) if message.get("error").is_some() => "error response".into(),
        (None, _) => "response".into(),
    }
}

/// Where `got` differs from `expected` in kind, method or shape (params or result), None when
/// it matches.
pub fn mismatch(expected: &Value, got: &Value) -> Option<String> {
    let (expected_kind, got_kind) = (kind(expected), kind(got));
    if expected_kind != got_kind {
        return Some(format!("expected a {expected_kind}, got a {got_kind}"));
    }
    for part in ["params", "result", "error"] {
        if let Some(difference) = shape_difference(&shape(&expected[part]), &shape(&got[part]), part) {
            return Some(format!("{got_kind}: {difference}"));
        }
    }
    None
}

fn shape_difference(expected: &Value, got: &Value, at: &str) -> Option<String> {
    match (expected, got) {
        (Value::Object(e), Value::Object(g)) => {
            if let Some(key) = e.keys().find(|k| !g.contains_key(*k)) {
                return Some(format!("{at}.{key} is missing"));
            }
            if let Some(key) = g.keys().find(|k| !e.contains_key(*k)) {
                return Some(format!("{at}.{key} is not in the recording"));
            }
            e.iter().find_map(|(key, inner)| shape_difference(inner, &g[key], &format!("{at}.{key}")))
        }
        _ if expected == got => None,
        _ => Some(format!("{at} is {got}, the recording has {expected}")),
    }
}

/// The replay of one client connection: which runs still match, and where each stands.
struct Replay {
    runs: Vec<Vec<Entry>>,
    /// Indexes of the runs that matched every client message so far, with their position.
    candidates: Vec<(usize, usize)>,
    /// Recorded request id (as JSON text) -> the id the client used.
    ids: std::collections::HashMap<String, Value>,
    received: usize,
}

/// What the replay does next.
enum Step {
    /// Write these lines (the agent's), then go on.
    Write(Vec<String>),
    /// Read the client's next message.
    Read,
    /// The recording is over.
    End,
}

impl Replay {
    fn new(runs: Vec<Vec<Entry>>) -> Replay {
        let candidates = (0..runs.len()).map(|run| (run, 0)).collect();
        Replay { runs, candidates, ids: Default::default(), received: 0 }
    }

    /// The agent's lines due now: those that come next in the first matching run (runs that
    /// go another way here are dropped).
    fn next(&mut self) -> Step {
        let Some(&(run, position)) = self.candidates.first() else { return Step::End };
        match self.runs[run].get(position) {
            None => Step::End,
            Some(Entry::Client(_)) => Step::Read,
            Some(_) => {
                let lead: Vec<Entry> =
                    self.runs[run][position..].iter().take_while(|e| !matches!(e, Entry::Client(_))).cloned().collect();
                let runs = &self.runs;
                self.candidates.retain(|&(r, p)| runs[r].get(p..p + lead.len()) == Some(&lead[..]));
                for (_, p) in self.candidates.iter_mut() {
                    *p += lead.len();
                }
                Step::Write(lead.iter().map(|entry| self.agent_line(entry)).collect())
            }
        }
    }

    fn agent_line(&self, entry: &Entry) -> String {
        match entry {
            Entry::AgentLine(line) => line.clone(),
            Entry::Agent(message) => {
                let mut message = message.clone();
                // An answer to a client's request carries the id the client used.
                if message.get("method").is_none() {
                    if let Some(id) = message.get("id").and_then(|id| self.ids.get(&id.to_string())) {
                        message["id"] = id.clone();
                    }
                }
                message.to_string()
            }
            Entry::Client(message) => message.to_string(),
        }
    }

    /// Matches the client's message; Err says how it differs from what the recording expects.
    fn receive(&mut self, message: &Value) -> Result<(), String> {
        self.received += 1;
        let runs = &self.runs;
        let expected = |&(r, p): &(usize, usize)| match runs[r].get(p) {
            Some(Entry::Client(expected)) => Some(expected.clone()),
            _ => None,
        };
        let first_expected = self.candidates.first().and_then(expected);
        let matching: Vec<(usize, usize)> = self
            .candidates
            .iter()
            .filter(|c| expected(c).is_some_and(|e| mismatch(&e, message).is_none()))
            .copied()
            .collect();
        if matching.is_empty() {
            let difference = match &first_expected {
                Some(e) => mismatch(e, message).unwrap_or_default(),
                None => "the recording has no more messages from the client".into(),
            };
            return Err(format!(
                "message {} from the client does not match the recording: {difference}\n  got:      {message}\n  expected: {}",
                self.received,
                first_expected.map_or("nothing".to_string(), |e| e.to_string())
            ));
        }
        if let (Some(recorded), Some(id)) = (first_expected.as_ref().and_then(|e| e.get("id")), message.get("id")) {
            if message.get("method").is_some() {
                self.ids.insert(recorded.to_string(), id.clone());
            }
        }
        self.candidates = matching.into_iter().map(|(r, p)| (r, p + 1)).collect();
        Ok(())
    }
}

/// `batond replay-agent`: plays the agent's side of a recording on stdin/stdout; the exit code
/// is 0 when the client closed stdin, 2 after a message that does not match.
pub fn replay(args: ReplayArgs) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&args.recording)
        .with_context(|| format!("cannot read the recording {}", args.recording.display()))?;
    let mut replay = Replay::new(parse_recording(&text, &args.recording)?);
    let mut stdout = std::io::stdout().lock();
    let mut lines = std::io::stdin().lock().lines();
    loop {
        match replay.next() {
            Step::Write(out) => {
                for line in out {
                    stdout.write_all(format!("{line}\n").as_bytes())?;
                }
                stdout.flush()?;
            }
            Step::Read | Step::End => {
                let Some(line) = lines.next() else { return Ok(0) };
                let line = line.context("read stdin")?;
                if line.trim().is_empty() {
                    continue;
                }
                let message: Value = match serde_json::from_str(&line) {
                    Ok(message) => message,
                    Err(e) => {
                        eprintln!("replay-agent ({}): not JSON ({e}): {line}", args.recording.display());
                        return Ok(2);
                    }
                };
                if let Err(why) = replay.receive(&message) {
                    eprintln!("replay-agent ({}): {why}", args.recording.display());
                    if let Some(id) = message.get("id").filter(|_| message.get("method").is_some()) {
                        let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": format!("replay-agent: {why}")}});
                        stdout.write_all(format!("{error}\n").as_bytes())?;
                        stdout.flush()?;
                    }
                    return Ok(2);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_from_messages_and_command_lines() {
        let redactor = Redactor::from_vars([
            ("ANTHROPIC_API_KEY".to_string(), "sk-ant-0123456789".to_string()),
            ("HOME".to_string(), "/home/ana/long/enough".to_string()),
            ("GH_TOKEN".to_string(), "short".to_string()),
        ]);
        let mut message = json!({"method": "session/new", "params": {
            "cwd": "/home/ana/long/enough/src",
            "mcpServers": [{"name": "gh", "command": "gh-mcp", "env": [{"name": "GH_TOKEN", "value": "ghp_secret"}],
                            "headers": [{"name": "Authorization", "value": "Bearer x"}]}],
            "note": "my key is sk-ant-0123456789", "apiKey": "abc", "authMethods": [{"id": "token"}]}});
        redactor.value(&mut message);
        let params = &message["params"];
        assert_eq!(params["cwd"], "/home/ana/long/enough/src", "only variables that name secrets");
        assert_eq!(params["mcpServers"][0]["env"][0], json!({"name": "GH_TOKEN", "value": REDACTED}));
        assert_eq!(params["mcpServers"][0]["headers"][0]["value"], REDACTED);
        assert_eq!(params["note"], "my key is [REDACTED:ANTHROPIC_API_KEY]");
        assert_eq!(params["apiKey"], REDACTED);
        assert_eq!(params["authMethods"][0]["id"], "token", "a value that is a word, not a secret");
        let command: Vec<String> =
            ["agent", "--api-key", "k1", "--token=t2", "acp", "--model", "m"].iter().map(|s| s.to_string()).collect();
        assert_eq!(
            redactor.command(&command),
            ["agent", "--api-key", REDACTED, "--token=[REDACTED]", "acp", "--model", "m"]
        );
    }

    #[test]
    fn messages_match_by_kind_method_and_shape_not_by_ids_or_values() {
        let recorded = json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
            "params": {"sessionId": "s-1", "prompt": [{"type": "text", "text": "hello"}]}});
        let same_shape = json!({"jsonrpc": "2.0", "id": 99, "method": "session/prompt",
            "params": {"sessionId": "s-2", "prompt": [{"type": "text", "text": "other"}, {"type": "text", "text": "x"}]}});
        assert_eq!(mismatch(&recorded, &same_shape), None);
        let other_method = json!({"jsonrpc": "2.0", "id": 1, "method": "session/cancel", "params": {}});
        assert_eq!(
            mismatch(&recorded, &other_method).unwrap(),
            "expected a request session/prompt, got a request session/cancel"
        );
        let missing = json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s"}});
        assert_eq!(mismatch(&recorded, &missing).unwrap(), "request session/prompt: params.prompt is missing");
        let retyped =
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": 5, "prompt": []}});
        assert_eq!(
            mismatch(&recorded, &retyped).unwrap(),
            "request session/prompt: params.sessionId is \"number\", the recording has \"string\""
        );
    }

    fn runs(text: &str) -> Vec<Vec<Entry>> {
        parse_recording(text, Path::new("r.jsonl")).expect("a recording")
    }

    #[test]
    fn the_run_that_matches_is_played_with_the_clients_ids() {
        let recording = [
            r#"{"run":{"command":["agent"]}}"#,
            r#"{"from":"client","message":{"id":0,"method":"initialize","params":{"v":1}}}"#,
            r#"{"from":"agent","message":{"id":0,"result":{"caps":{}}}}"#,
            r#"{"from":"client","message":{"id":1,"method":"session/new","params":{"cwd":"/a"}}}"#,
            r#"{"from":"agent","message":{"id":1,"result":{"sessionId":"s1"}}}"#,
            r#"{"run":{"command":["agent"]}}"#,
            r#"{"from":"client","message":{"id":0,"method":"initialize","params":{"v":1}}}"#,
            r#"{"from":"agent","message":{"id":0,"result":{"caps":{}}}}"#,
            r#"{"from":"client","message":{"id":1,"method":"session/load","params":{"cwd":"/a","sessionId":"s1"}}}"#,
            r#"{"from":"agent","message":{"method":"session/update","params":{"u":1}}}"#,
            r#"{"from":"agent","message":{"id":1,"result":null}}"#,
        ]
        .join("\n");
        let mut replay = Replay::new(runs(&recording));
        assert!(matches!(replay.next(), Step::Read));
        replay.receive(&json!({"id": "a", "method": "initialize", "params": {"v": 2}})).expect("initialize");
        let Step::Write(lines) = replay.next() else { panic!("the answer") };
        assert_eq!(lines, [r#"{"id":"a","result":{"caps":{}}}"#]);
        assert!(matches!(replay.next(), Step::Read));
        replay
            .receive(&json!({"id": "b", "method": "session/load", "params": {"cwd": "/b", "sessionId": "s9"}}))
            .expect("load");
        let Step::Write(lines) = replay.next() else { panic!("the load's answer") };
        assert_eq!(lines, [r#"{"method":"session/update","params":{"u":1}}"#, r#"{"id":"b","result":null}"#]);
        assert!(matches!(replay.next(), Step::End));
        let error = replay.receive(&json!({"id": "c", "method": "session/prompt", "params": {}})).unwrap_err();
        assert!(error.contains("message 3 from the client") && error.contains("no more messages"), "{error}");

        let mut replay = Replay::new(runs(&recording));
        replay.next();
        let error = replay.receive(&json!({"id": "a", "method": "authenticate", "params": {}})).unwrap_err();
        assert!(error.starts_with("message 1 from the client does not match the recording: expected a request initialize, got a request authenticate"), "{error}");
        assert!(parse_recording("", Path::new("r")).is_err());
        assert!(parse_recording(r#"{"from":"agent","message":{}}"#, Path::new("r")).is_err());
    }
}
