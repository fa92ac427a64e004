//! The agents people run, through a real batond: create → a turn (where the agent can answer
//! offline) → kill -9 of batond → resume → the transcript has nothing twice. And mid-turn (an
//! offline turn that waits on the network): kill -9 of batond, then of the agent, with no
//! process of the agent's tree left either time (found by the isolated HOME in their
//! environment); the error texts for a missing key; what opencode does offline.
//!
//! Opt-in, since it installs pinned versions (hundreds of MB) from npm and PyPI:
//!
//! ```sh
//! BATON_REAL_AGENTS=1 cargo test -p baton-server --test e2e real_agents:: -- --nocapture --test-threads 1
//! ```
//!
//! Installs go to `target/real-agents/` and are reused (`BATON_FAST_AGENT`, `BATON_OPENCODE` and
//! `BATON_CLAUDE_AGENT_ACP` name agents installed elsewhere instead): `npm install --prefix DIR`
//! of `@agentclientprotocol/claude-agent-acp@0.101.0`, `opencode-ai@1.18.33`,
//! `@zed-industries/codex-acp@0.16.0`, `@google/gemini-cli@0.61.0`, and `pip install
//! fast-agent-mcp==0.10.48` into a venv of Python 3.12+; every agent runs with an isolated HOME and dummy
//! keys, offline as far as the agent allows. Without `BATON_REAL_AGENTS=1` every test returns at
//! once.
//!
//! The scripts recorded in `replay_agent.rs` run here against the agents themselves too:
//! opencode's model and mode switched and set again after the restore, its MCP server started
//! with its env on session/new and again on the restore; fast-agent restored with
//! `session/resume` and with `session/load`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use baton_protocol::*;
use common::*;

/// How long a real agent may take for anything (installs excepted): they are slow to start.
const AGENT_WAIT: Duration = Duration::from_secs(240);

fn enabled() -> bool {
    let on = std::env::var("BATON_REAL_AGENTS").is_ok_and(|v| v == "1");
    if !on {
        eprintln!("skipped: set BATON_REAL_AGENTS=1 to run the real-agent suite");
    }
    on
}

fn cache_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/real-agents");
    std::fs::create_dir_all(&dir).expect("create the cache dir");
    dir
}

fn run(command: &mut Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The executable `var` names (an agent installed beforehand), if it does.
fn installed(var: &str) -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os(var)?);
    assert!(path.exists(), "{var}={} does not exist", path.display());
    Some(path)
}

/// `npm install PACKAGE@VERSION` into its own prefix (once); returns the path of `bin`.
fn npm_agent(package: &str, version: &str, bin: &str) -> PathBuf {
    let prefix = cache_dir().join("npm").join(format!("{package}@{version}").replace(['/', '@'], "_"));
    let path = prefix.join("node_modules/.bin").join(bin);
    if !path.exists() {
        std::fs::create_dir_all(&prefix).unwrap();
        eprintln!("installing {package}@{version} into {}", prefix.display());
        run(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&prefix)
                .arg(format!("{package}@{version}")),
            "npm install",
        );
    }
    assert!(path.exists(), "{} missing after the install", path.display());
    path
}

/// A Python ≥ 3.12 for fast-agent: `BATON_PYTHON`, `python3.13`/`python3.12` on PATH, or pyenv's.
fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("BATON_PYTHON") {
        return python.into();
    }
    for name in ["python3.13", "python3.12"] {
        let works = Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success());
        if works {
            return name.into();
        }
    }
    let pyenv = Path::new(&std::env::var("HOME").unwrap_or_default()).join(".pyenv/versions");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&pyenv)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("3.13") || n.starts_with("3.12"))
        })
        .map(|p| p.join("bin/python3"))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop().expect("fast-agent needs Python 3.12 or newer: set BATON_PYTHON")
}

/// `pip install fast-agent-mcp==VERSION` into a venv (once); returns `fast-agent-acp`.
fn fast_agent(version: &str) -> PathBuf {
    let venv = cache_dir().join(format!("fast-agent-{version}"));
    let bin = venv.join("bin/fast-agent-acp");
    if !bin.exists() {
        eprintln!("installing fast-agent-mcp {version} into {}", venv.display());
        run(Command::new(python()).args(["-m", "venv"]).arg(&venv), "python -m venv");
        run(
            Command::new(venv.join("bin/pip")).args(["install", "-q", &format!("fast-agent-mcp=={version}")]),
            "pip install fast-agent-mcp",
        );
    }
    assert!(bin.exists(), "{} missing after the install", bin.display());
    bin
}

/// One agent under test: its agents.toml entry (without the isolated environment).
struct RealAgent {
    name: &'static str,
    version: &'static str,
    command: PathBuf,
    args: Vec<&'static str>,
    /// Extra environment: keys (dummies), and what the agent needs.
    env: Vec<(&'static str, String)>,
    native_session_resume: bool,
    /// A prompt the agent answers offline, and a word its answer contains.
    turn: Option<(&'static str, &'static str)>,
}

impl RealAgent {
    fn config(&self, home: &Path) -> String {
        let mut env = vec![
            ("HOME", home.display().to_string()),
            ("XDG_CONFIG_HOME", home.join(".config").display().to_string()),
            ("XDG_DATA_HOME", home.join(".local/share").display().to_string()),
            ("XDG_CACHE_HOME", home.join(".cache").display().to_string()),
            ("XDG_STATE_HOME", home.join(".local/state").display().to_string()),
        ];
        env.extend(self.env.iter().cloned());
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
        let args: Vec<String> = self.args.iter().map(|a| format!("{a:?}")).collect();
        format!(
            "[agents.{}]\ncommand = {:?}\nargs = [{}]\nenv = {{ {} }}\nnative_session_resume = {}\n",
            self.name,
            self.command.display().to_string(),
            args.join(", "),
            env.join(", "),
            self.native_session_resume
        )
    }
}

async fn wait_settled(client: &Client, notes: &mut Notifications, session_id: &str) -> SessionStatus {
    let done = |s: SessionState| matches!(s, SessionState::WaitingForInput | SessionState::Failed);
    let now = status(client, session_id).await;
    if done(now.state) && now.state != SessionState::Starting {
        return now;
    }
    let _ = notes
        .wait_for(AGENT_WAIT, |event| match event {
            ClientEvent::Notification(Notification::StateChanged(c)) if c.session_id == session_id && done(c.state) => {
                Some(())
            }
            _ => None,
        })
        .await;
    status(client, session_id).await
}

fn summary(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| format!("{}: {}", m.kind, m.text.chars().take(100).collect::<String>())).collect()
}

/// create → turn → kill -9 → resume → no duplicated transcript. Returns the outcome line.
async fn round_trip(agent: RealAgent) {
    let Started { env, server, client, mut notes, session_id, start_secs, .. } = started(&agent).await;
    assert!(status(&client, &session_id).await.has_resume_token, "the agent's session id is stored");

    let mut turn = String::from("no offline turn");
    if let Some((text, expected)) = agent.turn {
        let reply =
            client.request_with_timeout(MessageAddParams::new(session_id.clone(), text), AGENT_WAIT).await.map(|_| ());
        reply.expect("message.add");
        let events = notes
            .wait_for(AGENT_WAIT, |event| match event {
                ClientEvent::Notification(Notification::Event(r)) if r.session_id == session_id && is_turn_end(r) => {
                    Some(())
                }
                _ => None,
            })
            .await;
        events.expect("the turn ended");
        let all = messages(&client, &session_id).await;
        let answer =
            all.iter().rev().find(|m| m.kind == MessageKind::Agent).map(|m| m.text.clone()).unwrap_or_default();
        assert!(answer.contains(expected), "{}: {answer:?} lacks {expected:?}", agent.name);
        turn = format!("turn answered {:?}", answer.chars().take(60).collect::<String>());
        wait_settled(&client, &mut notes, &session_id).await;
    }
    let before = messages(&client, &session_id).await;

    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let started = tokio::time::Instant::now();
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .expect("resume");
    let resumed = wait_settled(&client, &mut notes, &session_id).await;
    let resume_secs = started.elapsed().as_secs_f32();
    let after = messages(&client, &session_id).await;
    assert_eq!(
        &after[..before.len().min(after.len())],
        &before[..],
        "{}: the transcript is kept as it was:\nbefore {:#?}\nafter {:#?}",
        agent.name,
        summary(&before),
        summary(&after)
    );
    let added: Vec<&Message> = after[before.len()..].iter().collect();
    assert!(
        added.iter().all(|m| matches!(m.kind, MessageKind::Status | MessageKind::Error)),
        "{}: nothing but status lines is added by a resume: {:#?}",
        agent.name,
        summary(&after[before.len()..])
    );
    let line = added.last().map(|m| m.text.clone()).unwrap_or_default();
    assert_eq!(resumed.state, SessionState::WaitingForInput, "{}: {line}", agent.name);

    // A second turn after the restart where the agent can answer: the restored context answers.
    let mut after_turn = String::new();
    if let Some((_, expected)) = agent.turn {
        client
            .request_with_timeout(MessageAddParams::new(session_id.clone(), "and again"), AGENT_WAIT)
            .await
            .expect("message.add after the restart");
        notes
            .wait_for(AGENT_WAIT, |event| match event {
                ClientEvent::Notification(Notification::Event(r)) if r.session_id == session_id && is_turn_end(r) => {
                    Some(())
                }
                _ => None,
            })
            .await
            .expect("the second turn ended");
        let all = messages(&client, &session_id).await;
        let users = all.iter().filter(|m| m.kind == MessageKind::User).count();
        assert_eq!(users, 2, "{}: each message once: {:#?}", agent.name, summary(&all));
        let answer =
            all.iter().rev().find(|m| m.kind == MessageKind::Agent).map(|m| m.text.clone()).unwrap_or_default();
        assert!(answer.contains("again") || answer.contains(expected), "{}: {answer:?}", agent.name);
        after_turn = format!("; a turn after the restart answered {:?}", answer.chars().take(60).collect::<String>());
    }
    println!(
        "[real-agent] {} {}: started in {start_secs:.1} s, {turn}; kill -9 of batond; resumed in {resume_secs:.1} s: {line:?}; \
         transcript {} -> {} entries, nothing duplicated{after_turn}",
        agent.name,
        agent.version,
        before.len(),
        after.len()
    );
}

#[tokio::test]
async fn fast_agent_passthrough_round_trip() {
    if !enabled() {
        return;
    }
    let version = "0.10.48";
    round_trip(RealAgent {
        name: "fast-agent",
        version,
        command: installed("BATON_FAST_AGENT").unwrap_or_else(|| fast_agent(version)),
        args: vec!["--model", "passthrough"],
        env: vec![],
        native_session_resume: true,
        turn: Some(("hello from baton", "hello from baton")),
    })
    .await;
}

#[tokio::test]
async fn opencode_round_trip() {
    if !enabled() {
        return;
    }
    round_trip(opencode()).await;
}

#[tokio::test]
async fn codex_acp_round_trip_authenticates() {
    if !enabled() {
        return;
    }
    round_trip(codex_acp()).await;
}

#[tokio::test]
async fn gemini_cli_round_trip_authenticates_and_injects() {
    if !enabled() {
        return;
    }
    round_trip(gemini_cli()).await;
}

/// The processes whose environment has `HOME=home`: every process of an agent's tree (the
/// agent, its children, what they started in sessions of their own), found by the isolated
/// home each agent of this suite gets.
fn processes_with_home(home: &Path) -> Vec<u32> {
    let marker = format!("HOME={}", home.display());
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| environ.split(|b| *b == 0).any(|var| var == marker.as_bytes()))
        })
        .collect()
}

/// The command line of a process, for messages.
fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " ").trim().to_string())
        .unwrap_or_default()
}

/// Waits (at most `bound`) until no process of the agent's tree is left; the ones left then.
async fn tree_gone(home: &Path, bound: Duration) -> Vec<String> {
    gone(&processes_with_home(home), bound).await
}

/// Waits (at most `bound`) until none of `pids` runs; the ones left then.
async fn gone(pids: &[u32], bound: Duration) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let left: Vec<u32> = pids.iter().copied().filter(|pid| Path::new(&format!("/proc/{pid}")).exists()).collect();
        if left.is_empty() || tokio::time::Instant::now() >= deadline {
            return left.into_iter().map(|pid| format!("{pid} {}", command_line(pid))).collect();
        }
        // Polling /proc: a process's end in another tree has no event to wait on.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A real agent's session of a new batond, started and waiting for input, with its isolated
/// home, the client subscribed from the start, and how long the start took.
struct Started {
    env: TestEnv,
    home: PathBuf,
    server: Server,
    client: Client,
    notes: Notifications,
    session_id: String,
    start_secs: f32,
}

async fn started(agent: &RealAgent) -> Started {
    let env = TestEnv::new();
    let home = env.data_dir.parent().expect("a parent").join("home");
    std::fs::create_dir_all(home.join(".codex")).expect("home");
    env.agents_config(&agent.config(&home));
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("real agent", "", agent.name, false)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    let begun = tokio::time::Instant::now();
    client.request(SessionResumeParams::new(session_id.clone())).await.expect("start");
    let ready = wait_settled(&client, &mut notes, &session_id).await;
    assert_eq!(ready.state, SessionState::WaitingForInput, "{} did not start: {:?}", agent.name, ready.last_error);
    let start_secs = begun.elapsed().as_secs_f32();
    Started { env, home, server, client, notes, session_id, start_secs }
}

/// Kills mid-turn, for an agent whose offline turn stays in progress (it waits on the
/// network): batond killed with -9 mid-turn takes the agent's whole tree with it (children
/// included, within seconds, before any new batond starts); the session resumes with the turn
/// marked interrupted and the prompt once; the agent killed with -9 mid-turn leaves the session
/// resumable with an error that says so, and nothing of its tree running. An agent whose offline
/// turn ends at once has no middle to kill in: that is said, and the rest still checked.
async fn killed_mid_turn(agent: RealAgent) {
    let Started { env, home, server, client, notes, session_id, start_secs } = started(&agent).await;

    // A turn that stays in progress offline; batond is killed in the middle of it.
    let prompt = "remember the word heron";
    client.request_with_timeout(MessageAddParams::new(&session_id, prompt), AGENT_WAIT).await.expect("message.add");
    let running = status(&client, &session_id).await.state == SessionState::Running;
    let tree = processes_with_home(&home);
    let tree_size = tree.len();
    let tree_names: Vec<String> = tree.iter().map(|p| command_line(*p)).collect();
    drop((client, notes));
    server.kill9().await;
    let killed = tokio::time::Instant::now();
    let left = tree_gone(&home, Duration::from_secs(30)).await;
    assert!(left.is_empty(), "{}: the agent's tree outlived batond: {left:#?}", agent.name);
    let gone_secs = killed.elapsed().as_secs_f32();

    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let s = status(&client, &session_id).await;
    assert!(s.needs_resume, "{}: {s:?}", agent.name);
    let started = tokio::time::Instant::now();
    client.request(SessionResumeParams::new(session_id.clone())).await.expect("resume");
    let resumed = wait_settled(&client, &mut notes, &session_id).await;
    assert_eq!(resumed.state, SessionState::WaitingForInput, "{}: {:?}", agent.name, resumed.last_error);
    let resume_secs = started.elapsed().as_secs_f32();
    let all = messages(&client, &session_id).await;
    let users: Vec<&str> = all.iter().filter(|m| m.kind == MessageKind::User).map(|m| m.text.as_str()).collect();
    assert_eq!(users, [prompt], "{}: the prompt once, never sent again: {:#?}", agent.name, summary(&all));
    if running {
        let interrupted = all.iter().any(|m| m.kind == MessageKind::Status && m.text.contains("interrupted"));
        assert!(interrupted, "{}: the turn is said interrupted: {:#?}", agent.name, summary(&all));
    }

    // The agent itself killed mid-turn.
    client
        .request_with_timeout(MessageAddParams::new(&session_id, "and again"), AGENT_WAIT)
        .await
        .expect("message.add");
    let pid = status(&client, &session_id).await.agent_pid.expect("the agent's pid");
    // Its tree as it is now: what must end with it (a later launch has processes of its own).
    let tree = processes_with_home(&home);
    kill9(pid);
    let after = wait_settled(&client, &mut notes, &session_id).await;
    assert!(after.needs_resume && after.is_resumable, "{}: resumable after the agent died: {after:?}", agent.name);
    let said = after.last_error.clone().unwrap_or_default();
    assert!(said.contains("killed by signal 9"), "{}: the session says what happened: {said:?}", agent.name);
    let left = gone(&tree, Duration::from_secs(30)).await;
    assert!(left.is_empty(), "{}: the agent's tree outlived the agent: {left:#?}", agent.name);
    server.stop().await;
    let first = if running {
        format!(
            "{tree_size} processes in its tree mid-turn ({})",
            tree_names.join("; ").chars().take(200).collect::<String>()
        )
    } else {
        "its offline turn had ended before the kill (no middle to kill in)".to_string()
    };
    println!(
        "[real-agent] {} {}: started in {start_secs:.1} s; {first}; kill -9 of batond: the tree gone in {gone_secs:.1} s; \
         resumed in {resume_secs:.1} s, the prompt once; kill -9 of the agent: resumable, nothing left, said {:?}",
        agent.name,
        agent.version,
        said.chars().take(120).collect::<String>()
    );
}

fn claude_agent_acp(env: Vec<(&'static str, String)>) -> RealAgent {
    let version = "0.101.0";
    RealAgent {
        name: "claude",
        version,
        command: installed("BATON_CLAUDE_AGENT_ACP")
            .unwrap_or_else(|| npm_agent("@agentclientprotocol/claude-agent-acp", version, "claude-agent-acp")),
        args: vec![],
        env,
        native_session_resume: true,
        turn: None,
    }
}

/// opencode, as every test of it runs it: no key (it needs none for new and resume).
fn opencode() -> RealAgent {
    let version = "1.18.33";
    RealAgent {
        name: "opencode",
        version,
        command: installed("BATON_OPENCODE").unwrap_or_else(|| npm_agent("opencode-ai", version, "opencode")),
        args: vec!["acp"],
        env: vec![],
        native_session_resume: true,
        turn: None,
    }
}

/// codex-acp with a dummy OpenAI key (authenticated as `openai-api-key`).
fn codex_acp() -> RealAgent {
    let version = "0.16.0";
    RealAgent {
        name: "codex",
        version,
        command: npm_agent("@zed-industries/codex-acp", version, "codex-acp"),
        args: vec![],
        env: vec![("OPENAI_API_KEY", "sk-baton-dummy".into())],
        native_session_resume: true,
        turn: None,
    }
}

/// gemini-cli with a dummy key; it restores only by history injection.
fn gemini_cli() -> RealAgent {
    let version = "0.61.0";
    RealAgent {
        name: "gemini",
        version,
        command: npm_agent("@google/gemini-cli", version, "gemini"),
        args: vec!["--acp"],
        env: vec![("GEMINI_API_KEY", "baton-dummy".into())],
        native_session_resume: false,
        turn: None,
    }
}

/// claude-agent-acp's offline turn retries the network for minutes: a middle to kill in.
#[tokio::test]
async fn claude_agent_acp_killed_mid_turn_leaves_nothing_running() {
    if !enabled() {
        return;
    }
    killed_mid_turn(claude_agent_acp(vec![("ANTHROPIC_API_KEY", "baton-dummy".into()), ("IS_SANDBOX", "1".into())]))
        .await;
}

#[tokio::test]
async fn opencode_killed_mid_turn_leaves_nothing_running() {
    if !enabled() {
        return;
    }
    killed_mid_turn(opencode()).await;
}

#[tokio::test]
async fn codex_acp_killed_mid_turn_leaves_nothing_running() {
    if !enabled() {
        return;
    }
    killed_mid_turn(codex_acp()).await;
}

#[tokio::test]
async fn gemini_cli_killed_mid_turn_leaves_nothing_running() {
    if !enabled() {
        return;
    }
    killed_mid_turn(gemini_cli()).await;
}

/// The stop reason of the session's next `turn_completed`, and how long it took to come.
async fn next_turn_end(notes: &mut Notifications, session_id: &str) -> (String, f32) {
    let started = tokio::time::Instant::now();
    let reason = notes
        .wait_for(AGENT_WAIT, |event| match event {
            ClientEvent::Notification(Notification::Event(r)) if r.session_id == session_id => match &r.event {
                SessionEvent::TurnCompleted { stop_reason, .. } => Some(stop_reason.to_string()),
                _ => None,
            },
            _ => None,
        })
        .await
        .expect("the turn ended");
    (reason, started.elapsed().as_secs_f32())
}

/// What opencode does offline, as the README's table says it: a cancel ends the turn at once
/// (its stop reason recorded), and a prompt with no model provider to reach ends with an error
/// that says so rather than hanging.
#[tokio::test]
async fn opencode_offline_cancel_and_prompt() {
    if !enabled() {
        return;
    }
    let agent = opencode();
    let version = agent.version;
    let Started { server, client, mut notes, session_id, .. } = started(&agent).await;

    client.request_with_timeout(MessageAddParams::new(&session_id, "hello"), AGENT_WAIT).await.expect("message.add");
    client.request(SessionCancelParams { session_id: session_id.clone() }).await.expect("cancel");
    let (cancelled, cancel_secs) = next_turn_end(&mut notes, &session_id).await;

    client
        .request_with_timeout(MessageAddParams::new(&session_id, "hello again"), AGENT_WAIT)
        .await
        .expect("message.add");
    let (ended, prompt_secs) = next_turn_end(&mut notes, &session_id).await;
    let all = messages(&client, &session_id).await;
    let error = all.iter().rev().find(|m| m.kind == MessageKind::Error).map(|m| m.text.clone()).unwrap_or_default();
    println!(
        "[real-agent] opencode {version} offline: a cancel ended the turn in {cancel_secs:.1} s as {cancelled:?}; \
         a prompt ended after {prompt_secs:.1} s as {ended:?}, saying {:?}",
        error.chars().take(300).collect::<String>()
    );
    assert_eq!(cancelled, "cancelled", "whatever the agent answers a cancel with");
    assert!(!error.is_empty() || ended != "end_turn", "an offline prompt says why it failed");
    server.stop().await;
}

/// claude-agent-acp with no `ANTHROPIC_API_KEY`: the session starts, and the first prompt's
/// failure says what to set, as a failure at the start would.
#[tokio::test]
async fn claude_agent_acp_without_a_key_says_what_to_set() {
    if !enabled() {
        return;
    }
    let agent = claude_agent_acp(vec![("IS_SANDBOX", "1".into())]);
    let version = agent.version;
    if std::env::var_os("ANTHROPIC_API_KEY").is_some() {
        eprintln!("skipped: ANTHROPIC_API_KEY is set here, and batond's agents inherit it");
        return;
    }
    // It starts without the key (started() checks that it waits for input).
    let Started { home, server, client, mut notes, session_id, start_secs, .. } = started(&agent).await;
    client.request_with_timeout(MessageAddParams::new(&session_id, "hello"), AGENT_WAIT).await.expect("message.add");
    notes
        .wait_for(AGENT_WAIT, |event| match event {
            ClientEvent::Notification(Notification::Event(r)) if r.session_id == session_id && is_turn_end(r) => {
                Some(())
            }
            _ => None,
        })
        .await
        .expect("the turn ended");
    let all = messages(&client, &session_id).await;
    let error = all.iter().rev().find(|m| m.kind == MessageKind::Error).map(|m| m.text.clone()).unwrap_or_default();
    println!(
        "[real-agent] claude-agent-acp {version} without a key: started in {start_secs:.1} s; the prompt's error: {error:?}"
    );
    assert!(error.contains("ANTHROPIC_API_KEY"), "the error says what to set: {error:?}");
    server.stop().await;
    let left = tree_gone(&home, Duration::from_secs(30)).await;
    assert!(left.is_empty(), "{left:#?}");
}

/// The agent of a recorded script (replay_agent.rs), installed here.
fn recorded_agent(real: &crate::replay_agent::RealRecording) -> PathBuf {
    match real.fixture.split('-').next() {
        Some("opencode") => opencode().command,
        _ => installed("BATON_FAST_AGENT").unwrap_or_else(|| fast_agent("0.10.48")),
    }
}

/// The scripts of the recordings against the agents themselves: opencode's modes (its option
/// of category `mode`, through `session.set_mode`) and model option switched and set again after
/// a kill -9 and the restore (resume, then load), its MCP server started with its env on
/// session/new and again on the restore; fast-agent's turns around a restore both ways.
#[tokio::test]
async fn recorded_scripts_pass_against_the_agents_themselves() {
    if !enabled() {
        return;
    }
    use crate::replay_agent::{configure_real, real_resume_test, Run, REAL};
    for real in &REAL {
        let program = recorded_agent(real);
        let env = TestEnv::new();
        configure_real(&env, real, Run::Direct(&program));
        let started = tokio::time::Instant::now();
        real_resume_test(&env, real, true).await;
        println!(
            "[real-agent] {} script passed against {} in {:.1} s",
            real.fixture,
            program.display(),
            started.elapsed().as_secs_f32()
        );
    }
}
