//! Interoperability with an ACP agent nobody here wrote: an echo agent built on the reference
//! Python SDK (PyPI `agent-client-protocol`), installed into a virtualenv under target/.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use baton_protocol::*;
use common::*;

const SDK: &str = "agent-client-protocol==0.12.1";

/// Creates (once) a virtualenv with the SDK; None, after saying why, where that is impossible.
fn python_with_sdk() -> Option<PathBuf> {
    static VENV: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    VENV.get_or_init(|| {
        let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("py-acp-venv");
        let python = venv.join("bin/python");
        let ready = venv.join(".installed");
        if ready.exists() {
            return Some(python);
        }
        let step = |cmd: &mut Command, what: &str| match cmd.output() {
            Ok(out) if out.status.success() => true,
            Ok(out) => {
                eprintln!("SKIPPED interop test: {what} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
                false
            }
            Err(e) => {
                eprintln!("SKIPPED interop test: {what} could not run: {e}");
                false
            }
        };
        let _ = std::fs::remove_dir_all(&venv);
        if !step(Command::new("python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv") {
            return None;
        }
        let mut pip = Command::new(venv.join("bin/pip"));
        pip.args(["install", "--quiet", "--disable-pip-version-check", SDK]);
        if !step(&mut pip, &format!("pip install {SDK}")) {
            return None;
        }
        std::fs::write(&ready, SDK).ok()?;
        Some(python)
    })
    .clone()
}

fn configure(env: &TestEnv, python: &std::path::Path) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/py_echo_agent.py");
    env.agents_config(&format!(
        r#"
        [agents.py-echo]
        display_name = "Python SDK echo agent"
        command = "{}"
        args = ["{}"]
        native_session_resume = true
        env = {{ PY_ECHO_STATE_DIR = "{{data_dir}}/py-echo" }}
        "#,
        python.display(),
        script.display()
    ));
}

#[tokio::test]
async fn the_reference_python_sdk_agent_runs_turns_and_resumes_after_a_restart() {
    let Some(python) = python_with_sdk() else { return };
    let env = TestEnv::new();
    configure(&env, &python);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let installed = client.request(AgentListParams {}).await.unwrap().agents.into_iter().find(|a| a.name == "py-echo");
    assert!(installed.is_some_and(|a| a.installed));

    let created = client.request(env.task("interop", "hello world", "py-echo", true)).await.unwrap();
    let session_id = created.session.status.session_id;
    subscribe(&client, &session_id, Some(0)).await;
    let events = collect_events(&mut notes, &session_id, is_turn_end).await;
    assert_eq!(agent_text(&events), "py-echo: hello world");
    let chunks = events.iter().filter(|e| matches!(e.event, SessionEvent::MessageChunk { .. })).count();
    assert!(chunks >= 2, "the SDK streamed chunks ({chunks})");
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "second turn").await, "py-echo: second turn");
    let before = messages(&client, &session_id).await;
    assert_eq!(before.iter().filter(|m| m.kind == MessageKind::Agent).count(), 2);

    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    let status = client.request(SessionStatusParams { session_id: session_id.clone() }).await.unwrap();
    assert!(status.needs_resume && status.has_resume_token);
    client
        .request(SessionResumeParams { session_id: session_id.clone(), fresh: false, retry_failed: false })
        .await
        .unwrap();
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    subscribe(&client, &session_id, None).await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "after restart").await, "py-echo: after restart");
    let after = messages(&client, &session_id).await;
    assert_eq!(&after[..before.len()], &before[..], "the restored conversation is not duplicated");
    assert!(after.iter().any(|m| m.kind == MessageKind::Status && m.text.contains("Session resumed")));
}
