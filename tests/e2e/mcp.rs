//! MCP servers with a real batond and real mock agents: those of the agent's agents.toml entry
//! and those a task adds reach the agent on session/new and again on the restore after
//! `kill -9` of batond (the mock forgets them with its process, so only batond passing them
//! again can make `/mcp` tell them); transports the agent does not take are left out and said;
//! the protocol never shows their secrets.

use std::collections::BTreeMap;

use crate::common;

use baton_protocol::*;
use common::*;

const AGENTS: &str = r#"
[[agents.mock.mcp_servers]]
type = "stdio"
name = "files"
command = "mcp-files"
args = ["--root", "."]
env = { FILES_TOKEN = "s3cret-env" }

[[agents.mock.mcp_servers]]
type = "http"
name = "docs"
url = "https://docs.example/mcp?key=s3cret-query"
headers = { Authorization = "Bearer s3cret-header" }

[[agents.mock.mcp_servers]]
type = "sse"
name = "old"
url = "https://old.example/sse"
"#;

fn task_server() -> McpServerConfig {
    McpServerConfig::Stdio {
        name: "task-tool".into(),
        command: "task-tool".into(),
        args: vec![],
        env: BTreeMap::from([("TASK_KEY".to_string(), "s3cret-task".to_string())]),
    }
}

const EXPECTED: &str = "MCP servers: files (stdio): mcp-files --root ., env FILES_TOKEN=s3cret-env; \
     docs (http): https://docs.example/mcp?key=s3cret-query, header Authorization=Bearer s3cret-header; \
     task-tool (stdio): task-tool, env TASK_KEY=s3cret-task";

#[tokio::test]
async fn mcp_servers_reach_the_agent_on_start_and_again_after_a_kill_9_without_showing_secrets() {
    let env = TestEnv::new();
    env.agents_config(AGENTS);
    let server = env.start().await;
    let (client, mut notes) = server.client().await;

    let mut params = env.task("tools", "hi", "mock", true);
    params.mcp_servers = vec![task_server()];
    let created = client.request(params).await.expect("task.create");
    let session_id = created.session.status.session_id.clone();
    subscribe(&client, &session_id, Some(0)).await;
    collect_events(&mut notes, &session_id, is_turn_end).await;
    wait_state(&client, &mut notes, &session_id, SessionState::WaitingForInput).await;
    assert_eq!(prompt(&client, &mut notes, &session_id, "/mcp").await, EXPECTED);

    // Left out, and said: the mock takes http but not sse servers.
    let journal = read_journal(&client, &mut notes, &session_id).await;
    let said = journal.iter().any(|e| {
        matches!(&e.event, SessionEvent::Status { message } if message.contains("MCP server “old” (sse) was not passed"))
    });
    assert!(said, "the left-out server is named in the journal");

    // What the protocol shows: names, no values.
    let task_json = serde_json::to_string(&created.task).expect("json");
    let agents = client.request(AgentListParams {}).await.expect("agent.list");
    let agents_json = serde_json::to_string(&agents).expect("json");
    for shown in [&task_json, &agents_json] {
        assert!(!shown.contains("s3cret"), "a secret is shown: {shown}");
    }
    assert_eq!(created.task.mcp_servers[0].secret_names, ["TASK_KEY"]);
    let mock = agents.agents.iter().find(|a| a.name == "mock").expect("the mock");
    let docs = mock.mcp_servers.iter().find(|s| s.name == "docs").expect("docs");
    assert_eq!(docs.url.as_deref(), Some("https://docs.example/mcp"));
    assert_eq!(docs.secret_names, ["Authorization"]);

    server.kill9().await;
    let server = env.start().await;
    let (client, mut notes) = server.client().await;
    subscribe(&client, &session_id, None).await;
    let after = prompt(&client, &mut notes, &session_id, "/mcp").await;
    assert_eq!(after, EXPECTED, "the restored session got its MCP servers again");
    server.stop().await;
}

#[tokio::test]
async fn a_task_with_a_bad_mcp_server_is_refused_with_its_name() {
    let env = TestEnv::new();
    let server = env.start().await;
    let (client, _notes) = server.client().await;
    let mut params = env.task("tools", "hi", "mock", false);
    params.mcp_servers = vec![McpServerConfig::Http {
        name: "local-file".into(),
        url: "file:///etc/passwd".into(),
        headers: BTreeMap::new(),
    }];
    let refused = server_error(client.request(params).await);
    assert_eq!(refused.code, ErrorCode::ValidationError, "{refused:?}");
    assert!(refused.message.contains("“local-file”") && refused.message.contains("http"), "{refused:?}");
    server.stop().await;
}
