//! The runtime interface: the standalone and hosted runtimes driven by the same code through
//! `dyn Runtime`, with the mock agent, the ACP connection over the transport each one gives,
//! and the recovery half (list, reattach, release).

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_server::agent::acp::{AcpConnection, AgentHandler, BoxFuture, Params, RpcError, StreamOptions};
use baton_server::agent::host::client::AgentHost;
use baton_server::agent::runtime::{LaunchSpec, Launched, Placement, Runtime, Standalone};
use serde_json::{json, Value};

use common::*;

/// Keeps the text of the agent's message chunks; answers every request with `{}`.
#[derive(Default)]
struct Collect(Mutex<String>);

impl AgentHandler for Collect {
    fn notification(self: Arc<Self>, method: String, params: Params, _seq: u64) -> BoxFuture<()> {
        let translated = params.into_update();
        if let (true, Some(baton_protocol::SessionEvent::MessageChunk { text: chunk, .. })) =
            (method == "session/update", translated.event)
        {
            if let Ok(mut text) = self.0.lock() {
                text.push_str(&chunk);
            }
        }
        Box::pin(async {})
    }
    fn request(self: Arc<Self>, _: String, _: Value) -> BoxFuture<Result<Value, RpcError>> {
        Box::pin(async { Ok(json!({})) })
    }
    fn flush(self: Arc<Self>) -> BoxFuture<()> {
        Box::pin(async {})
    }
}

fn mock(env: &TestEnv) -> LaunchSpec {
    LaunchSpec {
        command: batond().into(),
        args: vec!["mock-agent".into(), "--state-dir".into(), env.data_dir.join("mock").display().to_string()],
        env: BTreeMap::new(),
        cwd: env.workdir.clone(),
    }
}

fn host(env: &TestEnv) -> AgentHost {
    AgentHost::new(env.data_dir.clone(), batond().into(), Duration::from_millis(300))
}

/// Connects ACP over what the runtime gave and runs one turn; returns the connection, the
/// agent's ACP session and what the turn said.
async fn turn(launched: Launched, options: StreamOptions, session: Option<&str>) -> (AcpConnection, String, String) {
    let handler = Arc::new(Collect::default());
    let acp = AcpConnection::connect(launched.transport, handler.clone(), options, launched.handle);
    let timeout = Some(WAIT);
    let session_id = match session {
        Some(session_id) => session_id.to_string(),
        None => {
            let init = acp.request("initialize", json!({"protocolVersion": 1}), timeout).await.expect("initialize");
            assert_eq!(init["protocolVersion"], 1);
            let new = acp
                .request("session/new", json!({"cwd": std::env::temp_dir(), "mcpServers": []}), timeout)
                .await
                .expect("session/new");
            new["sessionId"].as_str().expect("a session id").to_string()
        }
    };
    let prompt = json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "through the seam"}]});
    let answer = acp.request("session/prompt", prompt, timeout).await.expect("session/prompt");
    assert_eq!(answer["stopReason"], "end_turn");
    let text = handler.0.lock().unwrap().clone();
    (acp, session_id, text)
}

#[tokio::test]
async fn standalone_and_hosted_run_the_mock_agent_through_the_same_interface() {
    let env = TestEnv::new();
    let runtimes: Vec<Arc<dyn Runtime>> =
        vec![Arc::new(Standalone::guarded(std::path::Path::new(batond()))), Arc::new(host(&env))];
    for runtime in runtimes {
        let name = runtime.name();
        let log = env.data_dir.join(format!("{name}.log"));
        let launched = runtime.spawn("exec-1", &mock(&env), Some(log)).await.expect("spawn");
        let (pid, handle) = (launched.pid, launched.handle.clone());
        assert!(process_alive(pid), "{name}: the agent runs");
        match (&launched.placement, name) {
            (Placement::Child, "standalone") => assert!(!launched.transport.is_durable()),
            (Placement::Host { agent_id, .. }, "hosted") => {
                assert_eq!(agent_id, "exec-1");
                assert!(launched.transport.is_durable(), "hosted lines are kept until acknowledged");
            }
            (placement, name) => panic!("{name}: {placement:?}"),
        }
        let (_acp, _, text) = turn(launched, StreamOptions::default(), None).await;
        assert!(text.contains("through the seam"), "{name}: {text:?}");

        let listed = runtime.list().await.expect("list");
        match name {
            "standalone" => assert!(listed.is_empty(), "standalone agents die with the server: {listed:?}"),
            _ => assert!(listed.iter().any(|a| a.agent_id == "exec-1" && a.pid == pid && a.running), "{listed:?}"),
        }
        let exit = tokio::time::timeout(WAIT, handle.kill()).await.expect("stopped in time");
        assert!(exit.code.is_some() || exit.signal.is_some() || !exit.stderr_tail.is_empty(), "{name}: {exit}");
        assert!(wait_process_gone(pid).await, "{name}: the agent is gone");
    }
}

#[tokio::test]
async fn every_runtime_keeps_its_agents_stderr_in_the_log_and_names_it_at_the_exit() {
    let env = TestEnv::new();
    let runtimes: Vec<Arc<dyn Runtime>> =
        vec![Arc::new(Standalone::guarded(std::path::Path::new(batond()))), Arc::new(host(&env))];
    let script = r"echo 'first line' >&2; printf '\033[31mERROR\033[0m last line\n' >&2; exit 4";
    for runtime in runtimes {
        let name = runtime.name();
        let log = env.data_dir.join("agent-logs").join(format!("{name}.log"));
        let spec = LaunchSpec {
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::new(),
            cwd: env.workdir.clone(),
        };
        let launched = runtime.spawn("exec-err", &spec, Some(log.clone())).await.expect("spawn");
        // Held: a hosted agent whose transport is dropped is detached from, not waited for.
        let _transport = launched.transport;
        let exit = tokio::time::timeout(WAIT, launched.handle.wait()).await.expect("the agent ended");
        assert_eq!(exit.code, Some(4), "{name}: {exit}");
        assert_eq!(exit.log_file.as_deref(), Some(log.as_path()), "{name}: {exit}");
        assert!(exit.to_string().ends_with(&format!("its whole stderr is in {}", log.display())), "{name}: {exit}");
        let kept = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(kept.contains("first line\nERROR last line\n"), "{name}: {kept:?}");
        let _ = runtime.release("exec-err").await;
    }
}

#[tokio::test]
async fn a_hosted_agent_is_found_reattached_and_released_through_the_interface() {
    let env = TestEnv::new();
    let runtime: Arc<dyn Runtime> = Arc::new(host(&env));
    let launched = runtime.spawn("exec-1", &mock(&env), None).await.expect("spawn");
    let pid = launched.pid;
    let (_first, session_id, _) = turn(launched, StreamOptions::default(), None).await;

    // A new server would list, then reattach: the same agent, its ACP session still there.
    let listed = runtime.list().await.expect("list");
    assert_eq!(listed.iter().map(|a| a.agent_id.as_str()).collect::<Vec<_>>(), ["exec-1"]);
    let again = runtime.reattach("exec-1", None).await.expect("reattach");
    assert_eq!(again.pid, pid);
    // Ids above the previous connection's; what it already handled is not applied again.
    let options = StreamOptions { id_base: 1_000_000, skip_notifications_through: u64::MAX };
    let (_second, _, _) = turn(again, options, Some(&session_id)).await;

    runtime.release("exec-1").await.expect("release");
    assert!(wait_process_gone(pid).await, "a released agent is stopped");
    assert!(runtime.list().await.expect("list").is_empty(), "and forgotten");

    // A standalone agent is not kept for anybody.
    assert!(Standalone::default().reattach("exec-1", None).await.is_err());
}
