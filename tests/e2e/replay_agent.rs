//! The record-and-replay agent (`batond record-agent`, `batond replay-agent`): a conversation
//! recorded through the recorder, across a restart (a new session, then its restore), replays
//! through the same resume test without the agent; the checked-in recording does too in every
//! run; a client that strays from the recording is told which message did not match.
//!
//! The checked-in recordings (tests/fixtures/recordings/) are made from the mock agent, restored
//! with `session/resume` (mock-resume.jsonl) and with `session/load` (mock-load.jsonl):
//! `BATON_RECORD_FIXTURES=1 cargo test --test e2e replay_agent::` writes them again.

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
