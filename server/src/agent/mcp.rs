//! The MCP servers a session's agent gets: its agents.toml entry's and its task's, as ACP
//! `McpServer` values, leaving out the transports the agent does not take (`mcpCapabilities`:
//! stdio always, http and sse only when advertised).

use agent_client_protocol_schema::v1::{
    EnvVariable, HttpHeader, McpServer, McpServerHttp, McpServerSse, McpServerStdio,
};
use baton_protocol::McpServerConfig;

use super::translate::AgentCapabilities;

/// The servers to pass, and a line for each one left out (what and why).
pub fn for_agent(configs: &[McpServerConfig], caps: AgentCapabilities) -> (Vec<McpServer>, Vec<String>) {
    let mut passed = Vec::new();
    let mut left_out = Vec::new();
    for config in configs {
        let server = match config {
            McpServerConfig::Stdio { name, command, args, env } => McpServer::Stdio(
                McpServerStdio::new(name.clone(), command.clone())
                    .args(args.clone())
                    .env(env.iter().map(|(k, v)| EnvVariable::new(k.clone(), v.clone())).collect()),
            ),
            McpServerConfig::Http { name, url, headers } if caps.mcp_http => McpServer::Http(
                McpServerHttp::new(name.clone(), url.clone())
                    .headers(headers.iter().map(|(k, v)| HttpHeader::new(k.clone(), v.clone())).collect()),
            ),
            McpServerConfig::Sse { name, url, headers } if caps.mcp_sse => McpServer::Sse(
                McpServerSse::new(name.clone(), url.clone())
                    .headers(headers.iter().map(|(k, v)| HttpHeader::new(k.clone(), v.clone())).collect()),
            ),
            other => {
                left_out.push(format!(
                    "MCP server “{}” ({}) was not passed: the agent does not take {} servers (its mcpCapabilities)",
                    other.name(),
                    other.transport(),
                    other.transport()
                ));
                continue;
            }
        };
        passed.push(server);
    }
    (passed, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn transports_the_agent_does_not_take_are_left_out_and_said() {
        let configs = vec![
            McpServerConfig::Stdio {
                name: "files".into(),
                command: "mcp-files".into(),
                args: vec!["--root".into(), ".".into()],
                env: [("TOKEN".to_string(), "t0k".to_string())].into(),
            },
            McpServerConfig::Http {
                name: "docs".into(),
                url: "https://docs.example/mcp".into(),
                headers: BTreeMap::new(),
            },
            McpServerConfig::Sse {
                name: "old".into(),
                url: "https://old.example/sse".into(),
                headers: BTreeMap::new(),
            },
        ];
        let caps = AgentCapabilities { mcp_http: true, ..AgentCapabilities::default() };
        let (passed, left_out) = for_agent(&configs, caps);
        let json = serde_json::to_value(&passed).expect("json");
        assert_eq!(json[0]["name"], "files");
        assert_eq!(json[0]["env"][0]["value"], "t0k", "the agent gets the value");
        assert_eq!(json[1]["type"], "http");
        assert_eq!(passed.len(), 2);
        assert_eq!(left_out.len(), 1);
        assert!(left_out[0].contains("“old” (sse)"), "{left_out:?}");
    }
}
