//! `batond agentctl --stdio`: the agent host's protocol over a child's stdin/stdout (what
//! `docker exec -i` and `ssh` give), driven by the server's client with the mock agent. The
//! agent lives in the detached host: a connection that drops, or whose process is killed, is
//! followed by a new one that attaches again with nothing lost and nothing twice.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use baton_server::agent::host::client::AgentHost;
use baton_server::agent::runtime::LaunchSpec;
use baton_server::agent::transport::Input as HostInput;
use serde_json::json;

use common::acp_stream::{call, next, prompt};
use common::*;

fn stdio_host(env: &TestEnv) -> AgentHost {
    let args = ["agentctl", "--stdio", "--grace-ms", "300", "--data-dir"].map(String::from);
    let mut args = args.to_vec();
    args.push(env.data_dir.display().to_string());
    AgentHost::via_command(batond().into(), args)
}

/// The `agentctl --stdio` processes serving this data dir.
fn relays(env: &TestEnv) -> Vec<u32> {
    let data_dir = env.data_dir.display().to_string();
    processes(|args| args.iter().any(|a| a == "--stdio") && args.contains(&data_dir))
}

async fn wait_relays_gone(env: &TestEnv) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !relays(env).is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the relay process did not end: {:?}", relays(env));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_mock_agent_driven_over_stdio_outlives_its_connection_and_is_reattached_without_gap() {
    let env = TestEnv::new();
    let host = stdio_host(&env);
    let spec = LaunchSpec {
        command: batond().into(),
        args: vec!["mock-agent".into(), "--state-dir".into(), env.data_dir.join("mock").display().to_string()],
        env: BTreeMap::new(),
        cwd: env.workdir.clone(),
    };
    let mut agent = host.spawn("agent-1", &spec, None).await.expect("spawn over stdio");
    let pid = agent.pid;
    assert!(env.data_dir.join("agentctl.json").exists(), "the command started the data dir's host");
    assert_eq!(relays(&env).len(), 1, "one relay process carries the connection");

    let init = call(&mut agent, 1, "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}})).await;
    assert_eq!(init.last().unwrap().1["result"]["protocolVersion"], 1, "{init:?}");
    let new = call(&mut agent, 2, "session/new", json!({"cwd": env.workdir, "mcpServers": []})).await;
    let (new_seq, answer) = new.last().unwrap().clone();
    let session_id = answer["result"]["sessionId"].as_str().expect("a session id").to_string();
    // Everything up to the session's creation took effect; the turn's lines did not yet.
    agent.stream.input.send(HostInput::Ack(new_seq)).unwrap();
    let turn = call(&mut agent, 3, "session/prompt", prompt(&session_id, "over stdio")).await;
    assert!(turn.len() > 1, "the turn streams updates before its answer: {turn:?}");
    assert_eq!(turn.last().unwrap().1["result"]["stopReason"], "end_turn", "{turn:?}");

    // The client side drops: its relay process ends, the agent stays in the host.
    drop(agent);
    wait_relays_gone(&env).await;
    assert!(process_alive(pid), "the agent outlived the connection");

    // A new connection (a new process) attaches: the unacknowledged lines come again, in
    // order, each once, then the agent goes on.
    let info = host.existing().await.expect("the host answers over stdio");
    let mut again = host.attach(&info, "agent-1", None).await.expect("attach over stdio");
    assert_eq!(again.pid, pid);
    for (seq, message) in &turn {
        assert_eq!(&next(&mut again).await, &(*seq, message.clone()), "replayed from the last acknowledged line");
    }
    let last = turn.last().unwrap().0;
    again.stream.input.send(HostInput::Ack(last)).unwrap();
    let second = call(&mut again, 4, "session/prompt", prompt(&session_id, "still here")).await;
    assert_eq!(second.first().unwrap().0, last + 1, "numbering goes on without a gap");
    assert_eq!(second.last().unwrap().1["result"]["stopReason"], "end_turn", "{second:?}");

    // The relay is killed (a dropped ssh connection): a new one carries the same stream on,
    // with the lines already read not seen again and the line written meanwhile not lost.
    let relay = relays(&env);
    assert_eq!(relay.len(), 1);
    kill9(relay[0]);
    let mut third = again;
    let after = call(&mut third, 5, "session/prompt", prompt(&session_id, "after the drop")).await;
    assert_eq!(after.first().unwrap().0, second.last().unwrap().0 + 1, "nothing twice, nothing lost");
    assert_eq!(after.last().unwrap().1["result"]["stopReason"], "end_turn", "{after:?}");
    assert!(!third.handle.has_exited(), "the agent did not end for the server");
    let now = relays(&env);
    assert!(now.len() == 1 && now[0] != relay[0], "a new relay process: {now:?}");

    let exit = tokio::time::timeout(WAIT, third.handle.kill()).await.expect("killed in time");
    assert!(exit.signal.is_some() || exit.code.is_some(), "{exit}");
    assert!(wait_process_gone(pid).await);
    drop(third);
    assert!(wait_process_gone(info.pid).await, "the idle host exits after its grace period");
}

#[tokio::test]
async fn a_command_that_serves_no_host_is_a_clear_error() {
    let env = TestEnv::new();
    let host =
        AgentHost::via_command("sh".into(), vec!["-c".into(), "echo 'no such container: c1' >&2; exit 1".into()]);
    let spec = LaunchSpec { command: "true".into(), args: vec![], env: BTreeMap::new(), cwd: env.workdir.clone() };
    let error = match host.spawn("agent-1", &spec, None).await {
        Ok(_) => panic!("nothing serves the protocol"),
        Err(e) => format!("{e:?}"),
    };
    assert!(error.contains("no such container: c1"), "the command's own words are kept: {error}");
}
