//! MCP servers given to an agent: configured per agent in agents.toml, or added by a task at
//! creation (`task.create`'s `mcp_servers`). The server passes them on every session/new,
//! session/load, session/resume and session/fork, so a resumed session keeps its tools. What
//! the protocol shows of them ([`McpServerInfo`]) leaves out the values of environment
//! variables and headers, and a URL's credentials and query.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most MCP servers a task adds.
pub const MAX_MCP_SERVERS: usize = 16;
/// Most environment variables or headers of one MCP server.
pub const MAX_MCP_PAIRS: usize = 64;

/// One MCP server, as given to the agent (ACP `McpServer`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum McpServerConfig {
    /// A process the agent starts, speaking MCP on its stdio.
    Stdio {
        /// Its name (what the agent calls its tools by).
        name: String,
        /// The command (a path, or a name on the agent's PATH).
        command: String,
        /// Its arguments.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        /// Environment variables set for it (values never shown by the protocol).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
    /// A server reached over streamable HTTP (only for agents whose `mcpCapabilities` say `http`).
    Http {
        /// Its name.
        name: String,
        /// Its URL (`http://` or `https://`).
        url: String,
        /// Headers sent with each request (values never shown by the protocol).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
    /// A server reached over server-sent events (only for agents whose `mcpCapabilities` say `sse`).
    Sse {
        /// Its name.
        name: String,
        /// Its URL (`http://` or `https://`).
        url: String,
        /// Headers sent with each request (values never shown by the protocol).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
    },
}

/// What the protocol shows of an MCP server: no secret values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerInfo {
    /// Its name.
    pub name: String,
    /// `stdio`, `http` or `sse`.
    pub transport: String,
    /// The command of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The URL of an http or sse server, without credentials or query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The names of the environment variables (stdio) or headers (http, sse) it is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_names: Vec<String>,
}

impl McpServerConfig {
    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            McpServerConfig::Stdio { name, .. }
            | McpServerConfig::Http { name, .. }
            | McpServerConfig::Sse { name, .. } => name,
        }
    }

    /// `stdio`, `http` or `sse`.
    pub fn transport(&self) -> &'static str {
        match self {
            McpServerConfig::Stdio { .. } => "stdio",
            McpServerConfig::Http { .. } => "http",
            McpServerConfig::Sse { .. } => "sse",
        }
    }

    /// What the protocol shows of it.
    pub fn info(&self) -> McpServerInfo {
        let (command, url, secrets) = match self {
            McpServerConfig::Stdio { command, env, .. } => (Some(command.clone()), None, env),
            McpServerConfig::Http { url, headers, .. } | McpServerConfig::Sse { url, headers, .. } => {
                (None, Some(shown_url(url)), headers)
            }
        };
        McpServerInfo {
            name: self.name().to_string(),
            transport: self.transport().to_string(),
            command,
            url,
            secret_names: secrets.keys().cloned().collect(),
        }
    }

    /// Why it cannot be given to an agent, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        let name = self.name();
        if name.trim().is_empty() || name.chars().count() > 128 || name.chars().any(char::is_control) {
            return Err("an MCP server's name must have 1 to 128 characters and no control characters".into());
        }
        let pairs = match self {
            McpServerConfig::Stdio { command, env, args, .. } => {
                if command.trim().is_empty() || command.contains('\0') || args.iter().any(|a| a.contains('\0')) {
                    return Err(format!("MCP server “{name}”: command must not be empty or contain NUL"));
                }
                env
            }
            McpServerConfig::Http { url, headers, .. } | McpServerConfig::Sse { url, headers, .. } => {
                if !(url.starts_with("http://") || url.starts_with("https://")) || url.chars().any(char::is_whitespace)
                {
                    return Err(format!("MCP server “{name}”: url must be an http:// or https:// address"));
                }
                headers
            }
        };
        if pairs.len() > MAX_MCP_PAIRS {
            return Err(format!("MCP server “{name}”: at most {MAX_MCP_PAIRS} environment variables or headers"));
        }
        if pairs.keys().any(|k| k.is_empty() || k.contains(['=', '\0', '\n'])) {
            return Err(format!("MCP server “{name}”: an environment variable or header name is empty or invalid"));
        }
        Ok(())
    }
}

/// A URL without its credentials (`user:password@`) or query (`?token=…`): what is shown.
fn shown_url(url: &str) -> String {
    let without_query = url.split(['?', '#']).next().unwrap_or_default();
    match without_query.split_once("://") {
        Some((scheme, rest)) => {
            let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            if path.is_empty() {
                format!("{scheme}://{host}")
            } else {
                format!("{scheme}://{host}/{path}")
            }
        }
        None => without_query.to_string(),
    }
}

/// Checks a task's MCP servers: valid each, names unique, at most [`MAX_MCP_SERVERS`].
pub fn validate_mcp_servers(servers: &[McpServerConfig]) -> Result<(), String> {
    if servers.len() > MAX_MCP_SERVERS {
        return Err(format!("at most {MAX_MCP_SERVERS} MCP servers (got {})", servers.len()));
    }
    let mut names = std::collections::BTreeSet::new();
    for server in servers {
        server.validate()?;
        if !names.insert(server.name()) {
            return Err(format!("two MCP servers are named “{}”", server.name()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_shown_has_no_secret() {
        let http = McpServerConfig::Http {
            name: "docs".into(),
            url: "https://me:hunter2@docs.example/mcp?token=abc".into(),
            headers: [("Authorization".to_string(), "Bearer s3cret".to_string())].into(),
        };
        let shown = serde_json::to_string(&http.info()).expect("json");
        assert!(!shown.contains("hunter2") && !shown.contains("abc") && !shown.contains("s3cret"), "{shown}");
        assert_eq!(http.info().url.as_deref(), Some("https://docs.example/mcp"));
        assert_eq!(http.info().secret_names, ["Authorization"]);
    }

    #[test]
    fn bad_servers_are_refused_with_their_name() {
        let no_command =
            McpServerConfig::Stdio { name: "x".into(), command: " ".into(), args: vec![], env: BTreeMap::new() };
        assert!(no_command.validate().is_err_and(|e| e.contains("“x”")));
        let file =
            McpServerConfig::Sse { name: "y".into(), url: "file:///etc/passwd".into(), headers: BTreeMap::new() };
        assert!(file.validate().is_err());
        let twice = vec![
            McpServerConfig::Stdio { name: "a".into(), command: "a".into(), args: vec![], env: BTreeMap::new() },
            McpServerConfig::Stdio { name: "a".into(), command: "b".into(), args: vec![], env: BTreeMap::new() },
        ];
        assert!(validate_mcp_servers(&twice).is_err_and(|e| e.contains("two MCP servers")));
    }
}
