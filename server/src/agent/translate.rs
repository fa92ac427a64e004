//! ACP messages to and from Baton's types. Parsing is typed where the schema crate knows the
//! shape and lossless where it does not: an update kind the schema does not know (or cannot
//! parse) is kept as raw JSON in an `agent_update` event, never an error.

use agent_client_protocol_schema::v1::{
    ContentBlock, InitializeResponse, SessionNotification, SessionUpdate, ToolCallContent,
};
use baton_protocol::{PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionEvent, StopReason, ToolCallStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

/// What the agent said it can do, from its `initialize` answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentCapabilities {
    pub load_session: bool,
    pub resume_session: bool,
    /// `sessionCapabilities.fork`: the agent implements `session/fork` (unstable ACP).
    pub fork_session: bool,
    /// `mcpCapabilities.http` / `.sse`: MCP servers over those transports can be passed.
    pub mcp_http: bool,
    pub mcp_sse: bool,
}

/// Reads the capabilities from an `initialize` result. Anything missing or malformed counts as
/// not supported (the ACP rule for omitted capabilities).
pub fn parse_capabilities(result: &Value) -> AgentCapabilities {
    // Read from the JSON: the schema crate has `fork` only behind its unstable features.
    let fork_session = result.pointer("/agentCapabilities/sessionCapabilities/fork").is_some_and(Value::is_object);
    match serde_json::from_value::<InitializeResponse>(result.clone()) {
        Ok(response) => AgentCapabilities {
            load_session: response.agent_capabilities.load_session,
            resume_session: response.agent_capabilities.session_capabilities.resume.is_some(),
            fork_session,
            mcp_http: response.agent_capabilities.mcp_capabilities.http,
            mcp_sse: response.agent_capabilities.mcp_capabilities.sse,
        },
        Err(_) => AgentCapabilities {
            load_session: result.pointer("/agentCapabilities/loadSession").and_then(Value::as_bool).unwrap_or(false),
            resume_session: result
                .pointer("/agentCapabilities/sessionCapabilities/resume")
                .is_some_and(|v| !v.is_null()),
            fork_session,
            mcp_http: result
                .pointer("/agentCapabilities/mcpCapabilities/http")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            mcp_sse: result.pointer("/agentCapabilities/mcpCapabilities/sse").and_then(Value::as_bool).unwrap_or(false),
        },
    }
}

/// An update translated for the journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    /// None for updates that are not shown (the user's own message echoed back).
    pub event: Option<SessionEvent>,
    /// Conversation content (messages, thoughts, tool calls, plans): what a `session/load`
    /// replays and what must not be stored twice.
    pub is_history: bool,
}

fn to_string_value<T: Serialize>(value: &T) -> Option<String> {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned))
}

fn content_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(_) => "[image]".into(),
        ContentBlock::Audio(_) => "[audio]".into(),
        ContentBlock::ResourceLink(link) => format!("[{}]", link.uri),
        other => serde_json::to_value(other)
            .map(|v| format!("[{}]", v["type"].as_str().unwrap_or("content")))
            .unwrap_or_default(),
    }
}

/// Plain text of tool call content (for history's tool results).
pub fn tool_content_text(content: &Value) -> String {
    let Some(items) = content.as_array() else {
        return String::new();
    };
    items
        .iter()
        .filter_map(|item| match item.get("type").and_then(Value::as_str) {
            Some("content") => item.pointer("/content/text").and_then(Value::as_str).map(str::to_owned),
            Some("diff") => item.get("path").and_then(Value::as_str).map(|p| format!("diff of {p}")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_contents(content: &[ToolCallContent]) -> Value {
    serde_json::to_value(content).unwrap_or(Value::Null)
}

/// Translates the params of a `session/update` notification.
pub fn translate_update(params: &Value) -> Translated {
    // Deserialised from the borrowed value: no copy of the update on the streaming path.
    match SessionNotification::deserialize(params) {
        Ok(notification) => translate_notification(notification, || raw_update(params)),
        Err(_) => Translated { event: Some(raw_update(params)), is_history: false },
    }
}

/// Translates the params of a `session/update` notification from the JSON text the agent
/// sent: decoded straight into the schema's types, with no tree of JSON values in between
/// (the streaming path). An update the schema does not know is read as a value, to keep it.
///
/// A text chunk does not come this way: its line was already read into [`ChunkParams`] (see
/// `acp::Params::Chunk`); what reaches here is every other update, and the rare chunk whose
/// line needed the careful reading (text to repair, values nested too deeply).
pub fn translate_update_text(params: &str) -> Translated {
    let raw = || raw_update(&serde_json::from_str(params).unwrap_or(Value::Null));
    match serde_json::from_str::<SessionNotification>(params) {
        Ok(notification) => translate_notification(notification, raw),
        Err(_) => Translated { event: Some(raw()), is_history: false },
    }
}

/// The params of nearly every streamed line, a chunk of the agent's text or thoughts, read
/// into borrowed fields: the schema's `SessionUpdate` is an internally tagged enum, which serde
/// decodes by first copying the whole update into a buffer of generic content (two thirds of
/// the time spent on a chunk). Read here are exactly the fields that decide the chunk's
/// translation; the schema ignores the others (unknown keys) or takes their default when they
/// cannot be read (`annotations`, `_meta`). A chunk this cannot read (a `messageId` that is not
/// a string, a key given twice, content that is not text) fails to deserialise, and one of
/// another kind gives `None` ([`ChunkParams::translated`]): the schema's types decide those.
#[derive(Deserialize)]
pub struct ChunkParams<'a> {
    // Read only to be there and a string, as the schema requires.
    #[serde(borrow, rename = "sessionId")]
    _session_id: Cow<'a, str>,
    #[serde(borrow)]
    update: ChunkUpdate<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChunkUpdate<'a> {
    #[serde(borrow)]
    session_update: Cow<'a, str>,
    #[serde(borrow)]
    content: ChunkContent<'a>,
    #[serde(borrow, default)]
    message_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChunkContent<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Cow<'a, str>,
}

impl ChunkParams<'_> {
    /// The chunk's translation: what [`translate_update_text`] gives for the same params.
    pub fn translated(self) -> Option<Translated> {
        let update = self.update;
        if update.content.kind != "text" {
            return None;
        }
        let message_id = update.message_id.map(Cow::into_owned);
        let text = update.content.text.into_owned();
        let event = match update.session_update.as_ref() {
            "agent_message_chunk" => SessionEvent::MessageChunk { message_id, text },
            "agent_thought_chunk" => SessionEvent::ThoughtChunk { message_id, text },
            _ => return None,
        };
        Some(Translated { event: Some(event), is_history: true })
    }
}

/// An update the schema does not know, kept as it came.
fn raw_update(params: &Value) -> SessionEvent {
    let raw_update = params.get("update").cloned().unwrap_or(Value::Null);
    let kind = raw_update.get("sessionUpdate").and_then(Value::as_str).unwrap_or("unknown").to_string();
    SessionEvent::AgentUpdate { update_kind: kind, raw: raw_update }
}

fn translate_notification(notification: SessionNotification, raw: impl FnOnce() -> SessionEvent) -> Translated {
    let history = |event| Translated { event: Some(event), is_history: true };
    let other = |event| Translated { event: Some(event), is_history: false };
    match notification.update {
        SessionUpdate::UserMessageChunk(_) => Translated { event: None, is_history: true },
        SessionUpdate::AgentMessageChunk(chunk) => history(SessionEvent::MessageChunk {
            message_id: chunk.message_id.map(|id| id.0.to_string()),
            text: content_text(&chunk.content),
        }),
        SessionUpdate::AgentThoughtChunk(chunk) => history(SessionEvent::ThoughtChunk {
            message_id: chunk.message_id.map(|id| id.0.to_string()),
            text: content_text(&chunk.content),
        }),
        SessionUpdate::ToolCall(call) => history(SessionEvent::ToolCall {
            tool_call_id: call.tool_call_id.0.to_string(),
            title: call.title.clone(),
            tool_kind: to_string_value(&call.kind),
            status: to_string_value(&call.status).map(ToolCallStatus::from),
            content: Some(tool_contents(&call.content)),
            raw_input: call.raw_input.clone(),
        }),
        SessionUpdate::ToolCallUpdate(update) => history(SessionEvent::ToolCallUpdate {
            tool_call_id: update.tool_call_id.0.to_string(),
            title: update.fields.title.clone(),
            status: update.fields.status.as_ref().and_then(to_string_value).map(ToolCallStatus::from),
            content: update.fields.content.as_ref().map(|c| tool_contents(c)),
            raw_output: update.fields.raw_output.clone(),
        }),
        SessionUpdate::Plan(plan) => history(SessionEvent::Plan {
            entries: plan
                .entries
                .iter()
                .map(|e| PlanEntry {
                    content: e.content.clone(),
                    priority: to_string_value(&e.priority).map(PlanEntryPriority::from).unwrap_or_default(),
                    status: to_string_value(&e.status).map(PlanEntryStatus::from).unwrap_or_default(),
                })
                .collect(),
        }),
        SessionUpdate::AvailableCommandsUpdate(update) => other(SessionEvent::AvailableCommands {
            commands: update.available_commands.iter().filter_map(|c| serde_json::to_value(c).ok()).collect(),
        }),
        SessionUpdate::CurrentModeUpdate(update) => {
            other(SessionEvent::Mode { mode_id: update.current_mode_id.0.to_string() })
        }
        SessionUpdate::ConfigOptionUpdate(update) => other(SessionEvent::Options {
            change: baton_protocol::OptionsChange {
                config_options: Some(super::options::config_options_of(&update.config_options)),
                ..Default::default()
            },
        }),
        _ => other(raw()),
    }
}

/// A stop reason read leniently: a reason this server does not know is passed on as is, and
/// an answer without one counts as a finished turn.
pub fn stop_reason(result: &Value) -> StopReason {
    result.get("stopReason").and_then(Value::as_str).map_or(StopReason::EndTurn, StopReason::parse)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn update(update: Value) -> Value {
        json!({"sessionId": "s", "update": update})
    }

    #[test]
    fn a_chunk_read_into_borrowed_fields_is_what_the_schema_reads() {
        let lines = [
            r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hi"}}}"#,
            r#"{"update":{"content":{"text":"a \"q\"\n\u00e9","type":"text"},"messageId":"m1","sessionUpdate":"agent_thought_chunk"},"sessionId":"s"}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":null,"content":{"type":"text","text":"x","annotations":{"priority":"high"},"_meta":7},"_meta":{"k":1},"extra":[1,2]}}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","messageId":42,"content":{"type":"text","text":"id of the wrong type"}}}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text"}}}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":1}}}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a","text":"b"}}}"#,
            r#"{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"no session"}}}"#,
            r#"{"sessionId":7,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"echo"}}}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"future_kind","content":{"type":"text","text":"x"}}}"#,
            r#"{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[]}}"#,
        ];
        let mut read_fast = 0;
        for line in lines {
            let borrowed = serde_json::from_str::<ChunkParams>(line).ok().and_then(ChunkParams::translated);
            if let Some(fast) = borrowed {
                read_fast += 1;
                assert_eq!(fast, translate_update_text(line), "{line}");
            }
        }
        assert_eq!(read_fast, 3, "the text chunks take the borrowed path");
    }

    #[test]
    fn chunks_tool_calls_and_plans_are_typed() {
        let t = translate_update(&update(
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "Hi"}}),
        ));
        assert_eq!(t.event, Some(SessionEvent::MessageChunk { message_id: Some("m1".into()), text: "Hi".into() }));
        assert!(t.is_history);
        let t = translate_update(&update(
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read", "kind": "read", "status": "pending"}),
        ));
        let Some(SessionEvent::ToolCall { tool_kind, status, .. }) = t.event else { panic!("not a tool call") };
        assert_eq!((tool_kind.as_deref(), status), (Some("read"), Some(ToolCallStatus::Pending)));
        let t = translate_update(&update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "out"}}]}),
        ));
        let Some(SessionEvent::ToolCallUpdate { status, content, .. }) = t.event else { panic!("not an update") };
        assert_eq!(status, Some(ToolCallStatus::Completed));
        assert_eq!(tool_content_text(&content.unwrap()), "out");
        let t = translate_update(&update(
            json!({"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high", "status": "pending"}]}),
        ));
        assert_eq!(
            t.event,
            Some(SessionEvent::Plan {
                entries: vec![PlanEntry { content: "a".into(), priority: "high".into(), status: "pending".into() }]
            })
        );
    }

    /// The text path (the streaming one) translates every update as the value path does.
    #[test]
    fn updates_translate_the_same_from_their_text() {
        let updates = [
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "a \"q\" é"}}),
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "image", "data": "", "mimeType": "image/png"}}),
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "me"}}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read", "kind": "read", "status": "pending", "rawInput": {"b": 1, "a": [2]}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "out"}}]}),
            json!({"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high", "status": "pending"}]}),
            json!({"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
            json!({"sessionUpdate": "future_thing", "z": 1, "a": {"y": 2, "b": 3}}),
        ];
        for params in updates.into_iter().map(update).chain([json!({"nonsense": true}), json!(null)]) {
            assert_eq!(translate_update_text(&params.to_string()), translate_update(&params), "{params}");
        }
    }

    #[test]
    fn unknown_kinds_are_kept_raw() {
        let raw = json!({"sessionUpdate": "future_thing", "x": 1});
        let t = translate_update(&update(raw.clone()));
        assert_eq!(t.event, Some(SessionEvent::AgentUpdate { update_kind: "future_thing".into(), raw }));
        assert!(!t.is_history);
        let t = translate_update(&json!({"nonsense": true}));
        assert!(matches!(t.event, Some(SessionEvent::AgentUpdate { .. })));
    }

    #[test]
    fn capabilities_follow_the_advertisement() {
        let both = json!({"protocolVersion": 1, "agentCapabilities": {"loadSession": true, "sessionCapabilities": {"resume": {}}}, "models": {"x": 1}});
        assert_eq!(
            parse_capabilities(&both),
            AgentCapabilities { load_session: true, resume_session: true, fork_session: false, ..Default::default() }
        );
        let fork = json!({"protocolVersion": 1, "agentCapabilities": {"sessionCapabilities": {"fork": {}}}});
        assert!(parse_capabilities(&fork).fork_session);
        let null_fork = json!({"protocolVersion": 1, "agentCapabilities": {"sessionCapabilities": {"fork": null}}});
        assert!(!parse_capabilities(&null_fork).fork_session);
        let none = json!({"protocolVersion": 1});
        assert_eq!(parse_capabilities(&none), AgentCapabilities::default());
        let null_resume = json!({"protocolVersion": 1, "agentCapabilities": {"sessionCapabilities": {"resume": null}}});
        assert!(!parse_capabilities(&null_resume).resume_session);
        assert_eq!(stop_reason(&json!({"stopReason": "something_new"})), StopReason::Other("something_new".into()));
        assert_eq!(stop_reason(&json!({"stopReason": "max_tokens"})), StopReason::MaxTokens);
        assert_eq!(stop_reason(&json!({})), StopReason::EndTurn, "no reason: the turn finished");
    }
}
