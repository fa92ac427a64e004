//! Every message Baton sends an agent, built in one place with the ACP schema crate's types:
//! the requests and the one notification (each with its method name), and the results that
//! answer the agent's own requests. Nothing else names an ACP method it sends.

use agent_client_protocol_schema::v1::{
    AuthenticateRequest, CancelNotification, ClientCapabilities, ContentBlock, FileSystemCapabilities,
    ForkSessionRequest, Implementation, InitializeRequest, LoadSessionRequest, McpServer, NewSessionRequest,
    PromptRequest, ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionResponse, ResumeSessionRequest,
    SelectedPermissionOutcome, SessionConfigOptionValue, SetSessionConfigOptionRequest, SetSessionModeRequest,
    TextContent, WriteTextFileResponse, AGENT_METHOD_NAMES,
};
use agent_client_protocol_schema::ProtocolVersion;
use serde::Serialize;
use serde_json::{json, Value};

/// A request or notification for the agent: its method and params.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub method: &'static str,
    pub params: Value,
}

/// The JSON of an ACP value. The schema's types always serialize (string keys, no paths
/// that are not UTF-8: every path here comes from a `&str`).
fn json(value: impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}

fn message(method: &'static str, params: impl Serialize) -> Outgoing {
    Outgoing { method, params: json(params) }
}

/// `initialize`: what Baton is and what it offers the agent (text files read and written
/// inside the session's working directory; terminals to an agent that runs on this machine).
pub fn initialize(terminals: bool) -> Outgoing {
    let capabilities = ClientCapabilities::new()
        .fs(FileSystemCapabilities::new().read_text_file(true).write_text_file(true))
        .terminal(terminals);
    let request = InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(capabilities)
        .client_info(Implementation::new("batond", env!("CARGO_PKG_VERSION")));
    message(AGENT_METHOD_NAMES.initialize, request)
}

/// `authenticate` with one of the methods the agent offered.
pub fn authenticate(method_id: &str) -> Outgoing {
    message(AGENT_METHOD_NAMES.authenticate, AuthenticateRequest::new(method_id.to_string()))
}

/// Where an agent session is opened: its working directory and the MCP servers it gets (on
/// every new, load, resume and fork alike, so a restored session keeps its tools).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionPlace {
    pub cwd: String,
    pub mcp_servers: Vec<McpServer>,
}

impl SessionPlace {
    /// `cwd` with no MCP servers.
    pub fn bare(cwd: &str) -> Self {
        SessionPlace { cwd: cwd.to_string(), mcp_servers: Vec::new() }
    }
}

/// `session/new` in `place`.
pub fn new_session(place: &SessionPlace) -> Outgoing {
    let request = NewSessionRequest::new(place.cwd.as_str()).mcp_servers(place.mcp_servers.clone());
    message(AGENT_METHOD_NAMES.session_new, request)
}

/// `session/load` of `session_id` in `place`.
pub fn load_session(session_id: &str, place: &SessionPlace) -> Outgoing {
    let request =
        LoadSessionRequest::new(session_id.to_string(), place.cwd.as_str()).mcp_servers(place.mcp_servers.clone());
    message(AGENT_METHOD_NAMES.session_load, request)
}

/// `session/resume` of `session_id` in `place`.
pub fn resume_session(session_id: &str, place: &SessionPlace) -> Outgoing {
    let request =
        ResumeSessionRequest::new(session_id.to_string(), place.cwd.as_str()).mcp_servers(place.mcp_servers.clone());
    message(AGENT_METHOD_NAMES.session_resume, with_mcp_servers(json(request)))
}

/// `session/fork` of `session_id` in `place` (unstable ACP).
pub fn fork_session(session_id: &str, place: &SessionPlace) -> Outgoing {
    let request =
        ForkSessionRequest::new(session_id.to_string(), place.cwd.as_str()).mcp_servers(place.mcp_servers.clone());
    message(AGENT_METHOD_NAMES.session_fork, with_mcp_servers(json(request)))
}

/// The schema leaves an empty `mcpServers` out of `session/resume` and `session/fork` (where
/// it is optional); Baton sends it there as in `session/new` and `session/load`, so that every
/// agent gets the same request it always got.
fn with_mcp_servers(mut params: Value) -> Value {
    if let Some(object) = params.as_object_mut() {
        object.entry("mcpServers").or_insert_with(|| Value::Array(Vec::new()));
    }
    params
}

/// `session/prompt` with the user's text.
pub fn prompt(session_id: &str, text: &str) -> Outgoing {
    let prompt = vec![ContentBlock::Text(TextContent::new(text))];
    message(AGENT_METHOD_NAMES.session_prompt, PromptRequest::new(session_id.to_string(), prompt))
}

/// `session/cancel`: the notification that ends the turn under way.
pub fn cancel(session_id: &str) -> Outgoing {
    message(AGENT_METHOD_NAMES.session_cancel, CancelNotification::new(session_id.to_string()))
}

/// `session/set_mode`: switches the session to one of the modes the agent offered.
pub fn set_mode(session_id: &str, mode_id: &str) -> Outgoing {
    let request = SetSessionModeRequest::new(session_id.to_string(), mode_id.to_string());
    message(AGENT_METHOD_NAMES.session_set_mode, request)
}

/// `session/set_config_option`: sets one of the configuration options the agent offered.
pub fn set_config_option(session_id: &str, config_id: &str, value: SessionConfigOptionValue) -> Outgoing {
    let request = SetSessionConfigOptionRequest::new(session_id.to_string(), config_id.to_string(), value);
    message(AGENT_METHOD_NAMES.session_set_config_option, request)
}

/// `session/set_model`: the older way to switch a model that an agent offers the older way (a
/// `models` answer). No longer in the schema (configuration options replaced it), so written
/// here.
pub fn set_model(session_id: &str, model_id: &str) -> Outgoing {
    Outgoing { method: "session/set_model", params: json!({"sessionId": session_id, "modelId": model_id}) }
}

/// The result of a `session/request_permission`: the option chosen, or `cancelled`.
pub fn permission_outcome(choice: Option<String>) -> Value {
    let outcome = match choice {
        Some(option_id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option_id)),
        None => RequestPermissionOutcome::Cancelled,
    };
    json(RequestPermissionResponse::new(outcome))
}

/// The result of an `fs/read_text_file`.
pub fn read_text_file_result(content: String) -> Value {
    json(ReadTextFileResponse::new(content))
}

/// The result of an `fs/write_text_file`.
pub fn write_text_file_result() -> Value {
    json(WriteTextFileResponse::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are the ones Baton has always sent, method and params alike.
    #[test]
    fn every_message_has_its_method_and_params() {
        let w = SessionPlace::bare("/w");
        let cases = [
            (authenticate("chatgpt"), "authenticate", json!({"methodId": "chatgpt"})),
            (new_session(&w), "session/new", json!({"cwd": "/w", "mcpServers": []})),
            (load_session("s1", &w), "session/load", json!({"cwd": "/w", "mcpServers": [], "sessionId": "s1"})),
            (resume_session("s1", &w), "session/resume", json!({"cwd": "/w", "mcpServers": [], "sessionId": "s1"})),
            (fork_session("s1", &w), "session/fork", json!({"cwd": "/w", "mcpServers": [], "sessionId": "s1"})),
            (
                prompt("s1", "hi"),
                "session/prompt",
                json!({"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}),
            ),
            (cancel("s1"), "session/cancel", json!({"sessionId": "s1"})),
            (set_mode("s1", "plan"), "session/set_mode", json!({"sessionId": "s1", "modeId": "plan"})),
            (
                set_config_option("s1", "think", true.into()),
                "session/set_config_option",
                json!({"sessionId": "s1", "configId": "think", "type": "boolean", "value": true}),
            ),
            (set_model("s1", "m2"), "session/set_model", json!({"sessionId": "s1", "modelId": "m2"})),
        ];
        for (message, method, params) in cases {
            assert_eq!(message, Outgoing { method, params });
        }
        assert_eq!(initialize(false).params["clientCapabilities"]["terminal"], false);
        let initialize = initialize(true);
        assert_eq!(initialize.params["clientCapabilities"]["terminal"], true);
        assert_eq!(initialize.method, "initialize");
        assert_eq!(initialize.params["protocolVersion"], 1);
        assert_eq!(initialize.params["clientCapabilities"]["fs"], json!({"readTextFile": true, "writeTextFile": true}));
        assert_eq!(initialize.params["clientInfo"]["name"], "batond");
    }

    #[test]
    fn every_result_has_its_shape() {
        assert_eq!(
            permission_outcome(Some("allow".into())),
            json!({"outcome": {"outcome": "selected", "optionId": "allow"}})
        );
        assert_eq!(permission_outcome(None), json!({"outcome": {"outcome": "cancelled"}}));
        assert_eq!(read_text_file_result("a\n".into()), json!({"content": "a\n"}));
        assert_eq!(write_text_file_result(), json!({}));
    }
}
