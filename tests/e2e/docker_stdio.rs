//! The agent host's stdio seam through `docker exec -i`: a container whose main process is the
//! agent host (`batond agentctl`), built from local files (`docker import` of a tarball holding
//! this build's batond and the libraries `ldd` names; no registry), reached by the server's
//! client through `docker exec -i CONTAINER batond agentctl --stdio`, driving the mock agent
//! inside. A dropped `docker exec` loses nothing: the next one reattaches from the last
//! acknowledged line.
//!
//! Needs a Docker daemon. Where `docker info` fails, the setup installs Debian's `docker.io`
//! and starts `dockerd` on a socket of its own under the system's temp dir (left running for the
//! next run); where that is impossible (not root, no network...), the test says so on stderr
//! and is skipped.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use baton_server::agent::host::client::AgentHost;
use baton_server::agent::runtime::LaunchSpec;
use baton_server::agent::transport::Input;
use serde_json::json;

use common::acp_stream::{call, next, prompt};
use common::docker::{docker, image, Cleanup};
use common::*;

/// The `docker exec` client processes of this container (on this machine).
fn exec_clients(container: &str) -> Vec<u32> {
    processes(|args| args.first().is_some_and(|a| a.ends_with("docker")) && args.iter().any(|a| a == container))
}

#[tokio::test]
async fn a_mock_agent_in_a_container_is_driven_through_docker_exec_and_reattached_after_a_drop() {
    let _turn = common::docker::shared_turn().await;
    let Some(docker) = tokio::task::spawn_blocking(docker).await.unwrap() else { return };
    let work = tempfile::tempdir().unwrap();
    let tag = image(&docker, work.path());
    let container = format!("baton-test-{}", uuid::Uuid::new_v4().simple());
    let cleanup = Cleanup { docker: &docker, container: container.clone(), image: tag.clone() };
    docker.ok(&[
        "run",
        "-d",
        "--name",
        &container,
        "--label",
        "io.baton.test=1",
        "--network",
        "none",
        "--entrypoint",
        "/opt/baton/batond",
        &tag,
        "agentctl",
        "--data-dir",
        "/var/lib/baton",
        "--grace-ms",
        "600000",
    ]);
    // The host inside is ready once it said where it listens.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !docker.ok(&["logs", &container]).contains("agentctl listening")
        && !String::from_utf8_lossy(&docker.run(&["logs", &container]).stderr).contains("agentctl listening")
    {
        assert!(tokio::time::Instant::now() < deadline, "the agent host in the container did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut args = docker.args();
    args.extend(
        ["exec", "-i", &container, "/opt/baton/batond", "agentctl", "--stdio", "--data-dir", "/var/lib/baton"]
            .map(String::from),
    );
    let host = AgentHost::via_command("docker".into(), args);
    let info = host.existing().await.expect("the host answers through docker exec");
    assert_eq!(info.pid, 1, "the agent host is the container's main process");
    let spec = LaunchSpec {
        command: "/opt/baton/batond".into(),
        args: vec!["mock-agent".into(), "--state-dir".into(), "/tmp/mock".into()],
        env: BTreeMap::new(),
        cwd: "/tmp".into(),
    };
    let mut agent = host.spawn("agent-1", &spec, None).await.expect("spawn in the container");
    let pid = agent.pid;
    let init = call(&mut agent, 1, "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(init.last().unwrap().1["result"]["protocolVersion"], 1, "{init:?}");
    let new = call(&mut agent, 2, "session/new", json!({"cwd": "/tmp", "mcpServers": []})).await;
    let (new_seq, answer) = new.last().unwrap().clone();
    let session_id = answer["result"]["sessionId"].as_str().expect("a session id").to_string();
    agent.stream.input.send(Input::Ack(new_seq)).unwrap();
    let turn = call(&mut agent, 3, "session/prompt", prompt(&session_id, "in a box")).await;
    assert_eq!(turn.last().unwrap().1["result"]["stopReason"], "end_turn", "{turn:?}");
    let said: String = turn
        .iter()
        .filter_map(|(_, m)| m["params"]["update"]["content"]["text"].as_str().map(str::to_string))
        .collect();
    assert!(said.contains("in a box"), "{said:?}");

    // The connection drops (its docker exec is killed): a new docker exec carries the same
    // stream on, with nothing read seen again and nothing written lost.
    let clients = exec_clients(&container);
    assert_eq!(clients.len(), 1, "one docker exec carries the connection: {clients:?}");
    kill9(clients[0]);
    let second = call(&mut agent, 4, "session/prompt", prompt(&session_id, "still boxed")).await;
    assert_eq!(second.first().unwrap().0, turn.last().unwrap().0 + 1, "no gap, no duplicate");
    assert_eq!(second.last().unwrap().1["result"]["stopReason"], "end_turn");
    assert!(!agent.handle.has_exited(), "the agent did not end for the client");
    let now = exec_clients(&container);
    assert!(now.len() == 1 && now[0] != clients[0], "a new docker exec: {now:?}");

    // Let go (as by a restarted server): a new attachment gets what was not acknowledged.
    drop(agent);
    let mut again = host.attach(&info, "agent-1", None).await.expect("attach through a new docker exec");
    assert_eq!(again.pid, pid, "the same agent");
    for (seq, message) in turn.iter().chain(&second) {
        assert_eq!(&next(&mut again).await, &(*seq, message.clone()), "replayed from the last acknowledged line");
    }

    let exit = tokio::time::timeout(WAIT, again.handle.kill()).await.expect("killed in time");
    assert!(exit.signal.is_some() || exit.code.is_some(), "{exit}");
    drop(again);
    drop(cleanup);
    let gone = docker.run(&["inspect", &container]);
    assert!(!gone.status.success(), "the container is removed");
}
