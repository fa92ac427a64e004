//! The record-and-replay agent (`batond record-agent`, `batond replay-agent`): a conversation
//! recorded through the recorder, across a restart (a new session, then its restore), replays
//! through the same resume test without the agent; the checked-in recording does too in every
//! run; a client that strays from the recording is told which message did not match.
//!
//! The checked-in recordings (tests/fixtures/recordings/) are made from the mock agent, restored
//! with `session/resume` (mock-resume.jsonl) and with `session/load` (mock-load.jsonl):
//! `BATON_RECORD_FIXTURES=1 cargo test --test e2e replay_agent::` writes them again.
//!
//! Real agents recorded through Baton are replayed in every run too (fast-agent with its
//! passthrough model, opencode: `REAL`); `BATON_RECORD_REAL_AGENTS=1` with `BATON_FAST_AGENT`
//! and `BATON_OPENCODE` naming the installed executables records them again.

use crate::common;

use std::path::{Path, PathBuf};

use baton_protocol::*;
use common::*;
use serde_json::Value;

/// How the recorded mock agent restores a session: what it advertises, and the recording.
const RESTORES: [(&str, &str, &str); 2] =
    [("both", "session/resume", "mock-resume.jsonl"), ("load", "session/load", "mock-load.jsonl")];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recordings").join(name)
}

/// `recorded`: the mock agent (natively resuming) behind the recorder, writing `recording`;
/// `replayed`: the replay of `replay`.
fn configure(env: &TestEnv, recording: &Path, replay: &Path, advertise: &str) {
    env.agents_config(&format!(
        r#"
        [agents.recorded]
        command = "{{batond}}"
        args = ["record-agent", "--out", "{}", "--", "{{batond}}", "mock-agent", "--state-dir", "{{data_dir}}/mock-agent", "--advertise", "{}"]
        native_session_resume = true

        [agents.replayed]
        command = "{{batond}}"
        args = ["replay-agent", "{}"]
        native_session_resume = true
        "#,
        recording.display(),
        advertise,
        replay.display()
    ));
}

/// The resume test: a first turn, kill -9 of the server, the session restored by the agent
/// (session/resume), and a second turn that answers from the first.
async fn resume_test(env: &TestEnv, agent: &str) {
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(env, &client, &mut notes, agent, "remember pineapple").await;
    assert_eq!(agent_text(&read_journal(&client, &mut notes, &session_id).await), "OK, I will remember pineapple.");
    let server = server.restart().await;
    let (client, mut notes) = server.reconnect(&[&session_id]).await;
    let interrupted = status(&client, &session_id).await;
    assert!(interrupted.needs_resume && !interrupted.is_agent_running, "{interrupted:?}");
    let resumed = resume(&client, &mut notes, &session_id, false).await;
    assert_eq!(resumed.last_error, None, "{resumed:?}");
    let answer = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
    assert_eq!(answer, "You asked me to remember pineapple.", "{agent}");
    let users = user_messages(&client, &session_id).await;
    assert_eq!(users, ["remember pineapple", "what did I ask you to remember?"]);
}

#[tokio::test]
async fn a_recorded_agent_replays_through_the_same_resume_test() {
    for (advertise, restore, name) in RESTORES {
        let recording_dir = tempfile::tempdir().expect("tempdir");
        let recording = recording_dir.path().join(name);
        let env = TestEnv::new();
        configure(&env, &recording, &recording, advertise);
        resume_test(&env, "recorded").await;
        drop(env);

        let text = std::fs::read_to_string(&recording).expect("the recording");
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON lines")).collect();
        assert_eq!(lines.iter().filter(|l| l.get("run").is_some()).count(), 2, "a run per agent process");
        let methods: Vec<&str> =
            lines.iter().filter(|l| l["from"] == "client").filter_map(|l| l["message"]["method"].as_str()).collect();
        assert!(methods.contains(&"session/new") && methods.contains(&restore), "{methods:?}");

        // Another data dir and working directory (other paths, other ids): the replay matches
        // by shape, and no agent runs but the replay.
        let env = TestEnv::new();
        configure(&env, &env.data_dir.join("unused.jsonl"), &recording, advertise);
        resume_test(&env, "replayed").await;
        assert!(mock_agent_processes(&env, false).is_empty(), "the mock agent did not run");

        if std::env::var_os("BATON_RECORD_FIXTURES").is_some() {
            std::fs::create_dir_all(fixture(name).parent().expect("its dir")).expect("create the fixtures dir");
            std::fs::copy(&recording, fixture(name)).expect("write the fixture");
        }
    }
}

#[tokio::test]
async fn the_checked_in_recordings_replay_through_the_resume_test() {
    for (advertise, _, name) in RESTORES {
        let env = TestEnv::new();
        configure(&env, &env.data_dir.join("unused.jsonl"), &fixture(name), advertise);
        resume_test(&env, "replayed").await;
    }
}

#[tokio::test]
async fn a_replay_names_the_first_message_that_does_not_match() {
    let env = TestEnv::new();
    configure(&env, &env.data_dir.join("unused.jsonl"), &fixture("mock-resume.jsonl"), "both");
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let session_id = started_session(&env, &client, &mut notes, "replayed", "remember pineapple").await;
    // The recording's first run ends with the first turn: a mode change is not in it.
    let options = client.request(SessionOptionsParams { session_id: session_id.clone() }).await.expect("options");
    let mode = options.options.modes.first().expect("the recorded agent offered modes").id.clone();
    let refused = client.request(SessionSetModeParams { session_id: session_id.clone(), mode_id: mode }).await;
    let error = server_error(refused);
    assert!(
        error.message.contains("message 4 from the client does not match the recording")
            && error.message.contains("\"method\":\"session/set_mode\""),
        "{error:?}"
    );
}

/// A real agent recorded through Baton (tests/fixtures/recordings/), replayed in every run.
pub struct RealRecording {
    pub fixture: &'static str,
    /// `restore_with` of the agent's entry: the request the restart's restore sends.
    restore_with: &'static str,
    /// The variable naming the installed agent's executable, to record it again.
    program_var: &'static str,
    args: &'static [&'static str],
    /// Whether the agent answers prompts offline (fast-agent's passthrough model echoes them).
    turns: bool,
    /// MCP servers of the entry (opencode's: a stdio server with a secret in its env).
    mcp: bool,
    /// The model and the mode switched before the restart and set again after it (opencode's:
    /// `configOptions` of category `model` and `mode`, and no ACP `modes`).
    options: bool,
}

/// fast-agent 0.10.48 (`fast-agent-acp --model passthrough`) and opencode 1.18.33 (`opencode acp`,
/// no prompt: it needs a model it cannot reach offline), each restored with `session/resume` and
/// with `session/load`.
pub const REAL: [RealRecording; 4] = [
    RealRecording {
        fixture: "fast-agent-resume.jsonl",
        restore_with: "resume",
        program_var: "BATON_FAST_AGENT",
        args: &["--model", "passthrough"],
        turns: true,
        mcp: false,
        options: false,
    },
    RealRecording {
        fixture: "fast-agent-load.jsonl",
        restore_with: "load",
        program_var: "BATON_FAST_AGENT",
        args: &["--model", "passthrough"],
        turns: true,
        mcp: false,
        options: false,
    },
    RealRecording {
        fixture: "opencode-resume.jsonl",
        restore_with: "resume",
        program_var: "BATON_OPENCODE",
        args: &["acp"],
        turns: false,
        mcp: true,
        options: true,
    },
    RealRecording {
        fixture: "opencode-load.jsonl",
        restore_with: "load",
        program_var: "BATON_OPENCODE",
        args: &["acp"],
        turns: false,
        mcp: true,
        options: true,
    },
];

/// The secret in the recorded MCP server's env: the recorder writes `[REDACTED]` instead.
const MCP_SECRET: &str = "probe-secret-0123456789";

/// Where a recording's paths point after [`portable`]: no machine's temporary directory.
const RECORDED_ROOT: &str = "/tmp/baton-recording";

/// How the entry `agent` runs the agent of a [`RealRecording`].
pub enum Run<'a> {
    /// The replay of its fixture.
    Replay,
    /// The installed agent (this executable) behind the recorder, writing this recording.
    Record(&'a Path, &'a Path),
    /// The installed agent itself.
    Direct(&'a Path),
}

/// Configures the entry `agent` (an isolated HOME) to run `real` as `run` says.
pub fn configure_real(env: &TestEnv, real: &RealRecording, run: Run) {
    let home = env.data_dir.parent().expect("the env's root").join("home");
    let own_args = || real.args.iter().map(|a| a.to_string());
    let (command, args): (String, Vec<String>) = match run {
        Run::Record(program, out) => {
            let mut args = vec!["record-agent".to_string(), "--out".into(), out.display().to_string(), "--".into()];
            args.push(program.display().to_string());
            args.extend(own_args());
            ("{batond}".to_string(), args)
        }
        Run::Replay => {
            ("{batond}".to_string(), vec!["replay-agent".into(), fixture(real.fixture).display().to_string()])
        }
        Run::Direct(program) => (program.display().to_string(), own_args().collect()),
    };
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let env_vars: Vec<String> = ["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"]
        .iter()
        .zip(["", ".config", ".local/share", ".cache", ".local/state"])
        .map(|(name, sub)| format!("{name} = {:?}", home.join(sub).display().to_string()))
        .collect();
    let mut toml = format!(
        "[agents.agent]\ncommand = {command:?}\nargs = [{}]\nenv = {{ {} }}\nnative_session_resume = true\nrestore_with = {:?}\n",
        args.join(", "),
        env_vars.join(", "),
        real.restore_with
    );
    if real.mcp {
        toml.push_str(&format!(
            "[[agents.agent.mcp_servers]]\ntype = \"stdio\"\nname = \"probe\"\ncommand = \"/bin/sh\"\nargs = [{:?}, {:?}]\nenv = {{ PROBE_TOKEN = {MCP_SECRET:?} }}\n",
            env.data_dir.join("mcp-probe.sh").display().to_string(),
            env.data_dir.join("mcp-probe.log").display().to_string(),
        ));
        std::fs::write(env.data_dir.join("mcp-probe.sh"), MCP_PROBE).expect("write the MCP server");
    }
    env.agents_config(&toml);
}

/// A minimal MCP server over stdio: logs that it started (with its env's token) and each
/// request, answers `initialize` and `tools/list` (one tool), and every other request with `{}`.
const MCP_PROBE: &str = r#"#!/bin/sh
log="$1"
echo "started token=$PROBE_TOKEN" >> "$log"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  method=$(printf '%s' "$line" | sed -n 's/.*"method":"\([^"]*\)".*/\1/p')
  echo "request $method" >> "$log"
  [ -z "$id" ] && continue
  case "$method" in
    initialize)
      version=$(printf '%s' "$line" | sed -n 's/.*"protocolVersion":"\([^"]*\)".*/\1/p')
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"probe","version":"1.0.0"}}}\n' "$id" "${version:-2025-06-18}" ;;
    tools/list)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"probe_echo","description":"Echoes its text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}}\n' "$id" ;;
    *)
      printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  esac
done
"#;

/// The resume test of a real agent: a session started (a first turn where the agent answers
/// offline), kill -9 of the server, the session restored by the agent with the entry's
/// `restore_with`, and nothing of what the agent replays while restoring shown a second time;
/// then a second turn.
/// `live`: a real agent runs (not the replay), so the MCP server it was given runs too.
pub async fn real_resume_test(env: &TestEnv, real: &RealRecording, live: bool) {
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let created = client.request(env.task("t", "", "agent", false)).await.expect("task.create");
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    let started = resume(&client, &mut notes, &session_id, false).await;
    assert!(started.has_resume_token && started.last_error.is_none(), "{}: {started:?}", real.fixture);
    if real.turns {
        let answer = prompt(&client, &mut notes, &session_id, "remember pineapple").await;
        assert!(answer.contains("remember pineapple"), "{}: the passthrough model echoes: {answer:?}", real.fixture);
        wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    }
    let chosen = if real.options { Some(switch_model_and_mode(&client, &session_id).await) } else { None };
    let before = messages(&client, &session_id).await;
    let probe_starts = || {
        let log = std::fs::read_to_string(env.data_dir.join("mcp-probe.log")).unwrap_or_default();
        let starts: Vec<String> = log.lines().filter(|l| l.starts_with("started")).map(str::to_owned).collect();
        assert!(starts.iter().all(|l| *l == format!("started token={MCP_SECRET}")), "{log}");
        assert!(log.contains("request tools/list"), "the agent listed the MCP server's tools: {log}");
        starts.len()
    };
    if live && real.mcp {
        assert_eq!(probe_starts(), 1, "{}: the MCP server started with its env on session/new", real.fixture);
    }

    let server = server.restart().await;
    let (client, mut notes) = server.reconnect(&[&session_id]).await;
    let interrupted = status(&client, &session_id).await;
    assert!(interrupted.needs_resume && !interrupted.is_agent_running, "{interrupted:?}");
    let resumed = resume(&client, &mut notes, &session_id, false).await;
    assert_eq!(resumed.last_error, None, "{}: {resumed:?}", real.fixture);
    let after = messages(&client, &session_id).await;
    assert_eq!(&after[..before.len().min(after.len())], &before[..], "{}: the transcript is kept", real.fixture);
    let added: Vec<String> = after[before.len()..].iter().map(|m| format!("{}: {}", m.kind, m.text)).collect();
    let restored = match real.restore_with {
        "load" => "Session resumed: the agent reloaded the conversation (its replay is not shown again).",
        _ => "Session resumed: the agent restored its context.",
    };
    assert_eq!(added.first(), Some(&format!("status: {restored}")), "{}: {added:#?}", real.fixture);
    assert!(
        added[1..].iter().all(|line| line.starts_with("status: Set on the agent as chosen: ")),
        "{}: nothing but the restore's status lines is added (no replay): {added:#?}",
        real.fixture
    );
    if live && real.mcp {
        assert_eq!(probe_starts(), 2, "{}: the MCP server started again on the restore", real.fixture);
    }
    if let Some(chosen) = chosen {
        let now = client.request(SessionOptionsParams { session_id: session_id.clone() }).await.expect("options");
        assert!(now.applied, "{now:?}");
        for (id, value) in &chosen.config {
            let option = now.options.option(id).unwrap_or_else(|| panic!("{id} offered after the restore"));
            assert_eq!(&option.current, value, "{}: {id} is as chosen after the restore", real.fixture);
        }
    }

    if real.turns {
        let answer = prompt(&client, &mut notes, &session_id, "what did I ask you to remember?").await;
        assert!(answer.contains("what did I ask you to remember?"), "{}: {answer:?}", real.fixture);
        let users = user_messages(&client, &session_id).await;
        assert_eq!(users, ["remember pineapple", "what did I ask you to remember?"], "{}", real.fixture);
    }
}

/// Switches the agent's model (its option of category `model`) to another of its values and its
/// mode to `plan` with `session.set_mode` (opencode offers its modes as an option of category
/// `mode`); returns what is chosen.
async fn switch_model_and_mode(client: &Client, session_id: &str) -> ChosenOptions {
    let offered = client.request(SessionOptionsParams { session_id: session_id.into() }).await.expect("options");
    assert!(offered.options.modes.is_empty(), "the agent offers its modes as an option: {offered:?}");
    let model = offered.options.config_options.iter().find(|o| o.category.as_deref() == Some("model"));
    let model = model.unwrap_or_else(|| panic!("a model option: {offered:?}"));
    let other = model.choices.iter().map(|c| OptionValue::Id(c.value.clone())).find(|v| *v != model.current);
    let other = other.expect("a second model");
    let set = client
        .request(SessionSetOptionParams {
            session_id: session_id.into(),
            option_id: model.id.clone(),
            value: other.clone(),
        })
        .await
        .expect("session.set_option");
    assert!(set.applied, "{set:?}");
    assert_eq!(set.options.option(&model.id).map(|o| &o.current), Some(&other), "{set:?}");
    let mode = set.options.mode_option().expect("a mode option").clone();
    assert!(mode.choices.iter().any(|c| c.value == "plan"), "{mode:?}");
    let set = client
        .request(SessionSetModeParams { session_id: session_id.into(), mode_id: "plan".into() })
        .await
        .expect("session.set_mode through the mode option");
    assert!(set.applied, "{set:?}");
    assert_eq!(set.options.option(&mode.id).map(|o| o.current.clone()), Some(OptionValue::Id("plan".into())));
    assert_eq!(set.chosen.config.get(&mode.id), Some(&OptionValue::Id("plan".into())), "{set:?}");
    let refused =
        client.request(SessionSetModeParams { session_id: session_id.into(), mode_id: "nonexistent".into() }).await;
    let error = server_error(refused);
    assert!(error.message.contains("build") && error.message.contains("plan"), "{error:?}");
    set.chosen
}

/// The client's messages of each run of a recording, and the agent's between each and the next.
fn recorded_runs(text: &str) -> Vec<Vec<Value>> {
    let mut runs: Vec<Vec<Value>> = Vec::new();
    for line in text.lines() {
        let value: Value = serde_json::from_str(line).expect("JSON lines");
        if value.get("run").is_some() {
            runs.push(Vec::new());
        } else if let Some(run) = runs.last_mut() {
            run.push(value);
        }
    }
    runs
}

/// The agent's notifications between the restore request of the last run and its answer.
fn replayed_while_restoring(text: &str, method: &str) -> Vec<Value> {
    let runs = recorded_runs(text);
    let run = runs.last().expect("a run");
    let at = run
        .iter()
        .position(|l| l["from"] == "client" && l["message"]["method"] == method)
        .unwrap_or_else(|| panic!("the last run restores with {method}"));
    let id = &run[at]["message"]["id"];
    run[at + 1..]
        .iter()
        .filter(|l| l["from"] == "agent")
        .take_while(|l| !(l["message"]["id"] == *id && l["message"].get("method").is_none()))
        .filter(|l| l["message"]["method"] == "session/update")
        .map(|l| l["message"]["params"]["update"].clone())
        .collect()
}

/// A recording with the paths of this machine's test directories and of the agent's
/// installation replaced, so that the checked-in file says nothing of where it was made.
fn portable(text: &str, env: &TestEnv, program: &Path) -> String {
    let root = env.data_dir.parent().expect("the env's root").display().to_string();
    let name = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    text.replace(&program.display().to_string(), &name).replace(&root, RECORDED_ROOT).replace(batond(), "batond")
}

/// Records the real agents again (`BATON_RECORD_REAL_AGENTS=1`, with `BATON_FAST_AGENT` and
/// `BATON_OPENCODE` naming their executables) and writes the fixtures; without it, returns.
#[tokio::test]
async fn real_agents_are_recorded_through_baton_on_request() {
    if std::env::var_os("BATON_RECORD_REAL_AGENTS").is_none() {
        return;
    }
    for real in &REAL {
        let Some(program) = std::env::var_os(real.program_var).map(PathBuf::from) else {
            eprintln!("{}: {} is not set, not recorded", real.fixture, real.program_var);
            continue;
        };
        let env = TestEnv::new();
        let recording = env.data_dir.join("recording.jsonl");
        configure_real(&env, real, Run::Record(&program, &recording));
        real_resume_test(&env, real, true).await;
        let text = std::fs::read_to_string(&recording).expect("the recording");
        let text = portable(&text, &env, &program);
        assert!(!text.contains(MCP_SECRET), "{}: the MCP server's secret is redacted", real.fixture);
        std::fs::write(fixture(real.fixture), text).expect("write the fixture");
        eprintln!("{}: recorded", real.fixture);
    }
}

#[tokio::test]
async fn the_real_agents_recordings_replay_through_the_resume_test() {
    for real in &REAL {
        let env = TestEnv::new();
        configure_real(&env, real, Run::Replay);
        real_resume_test(&env, real, false).await;
    }
}

/// What the recordings show of the real agents: the differences from the mock that the
/// replays above hold Baton to.
#[test]
fn the_real_agents_recordings_show_how_each_agent_restores() {
    let read = |name: &str| std::fs::read_to_string(fixture(name)).expect("the fixture");
    for real in &REAL {
        let text = read(real.fixture);
        let runs = recorded_runs(&text);
        assert_eq!(runs.len(), 2, "{}: a run before the restart and one after", real.fixture);
        let methods: Vec<Vec<&str>> = runs
            .iter()
            .map(|run| {
                run.iter().filter(|l| l["from"] == "client").filter_map(|l| l["message"]["method"].as_str()).collect()
            })
            .collect();
        let restore = format!("session/{}", real.restore_with);
        assert!(methods[0].contains(&"session/new") && methods[1].contains(&restore.as_str()), "{methods:?}");
        assert_eq!(methods.concat().contains(&"session/prompt"), real.turns, "{}: {methods:?}", real.fixture);
        // Nothing of the machine it was recorded on: its temporary directories are renamed.
        assert!(!text.contains("/tmp/.tmp"), "{}: a test directory's path is left", real.fixture);
        if real.mcp {
            assert!(!text.contains(MCP_SECRET), "{}", real.fixture);
            let mcp =
                runs.iter().flatten().filter(|l| l["from"] == "client").filter_map(|l| {
                    l["message"]["params"]["mcpServers"].as_array().filter(|servers| !servers.is_empty())
                });
            let servers: Vec<&Vec<Value>> = mcp.collect();
            assert_eq!(servers.len(), 2, "{}: the MCP server on session/new and on the restore", real.fixture);
            for server in servers {
                assert_eq!(server[0]["env"], serde_json::json!([{"name": "PROBE_TOKEN", "value": "[REDACTED]"}]));
            }
        }
    }
    // opencode forgets the model and the mode on a restore (it answers its defaults): Baton
    // sets both again, the replay test above checks they are as chosen.
    for name in ["opencode-resume.jsonl", "opencode-load.jsonl"] {
        let runs = recorded_runs(&read(name));
        let set: Vec<Vec<&str>> = runs
            .iter()
            .map(|run| {
                run.iter()
                    .filter(|l| l["from"] == "client" && l["message"]["method"] == "session/set_config_option")
                    .filter_map(|l| l["message"]["params"]["configId"].as_str())
                    .collect()
            })
            .collect();
        assert_eq!(set, [vec!["model", "mode"], vec!["mode", "model"]], "{name}");
    }
    // fast-agent replays the conversation on session/resume too (ACP says resume does not):
    // the replay test above proves Baton shows none of it twice.
    let replayed = replayed_while_restoring(&read("fast-agent-resume.jsonl"), "session/resume");
    let kinds: Vec<&str> = replayed.iter().filter_map(|u| u["sessionUpdate"].as_str()).collect();
    assert!(kinds.contains(&"user_message_chunk") && kinds.contains(&"agent_message_chunk"), "{kinds:?}");
    let replayed = replayed_while_restoring(&read("fast-agent-load.jsonl"), "session/load");
    let kinds: Vec<&str> = replayed.iter().filter_map(|u| u["sessionUpdate"].as_str()).collect();
    assert!(kinds.contains(&"user_message_chunk") && kinds.contains(&"agent_message_chunk"), "{kinds:?}");
}
