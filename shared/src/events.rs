use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One entry of a session's journal. Every event gets a per-session sequence number and is
/// durable before it is broadcast (`session.event`). A newer server may add kinds: they decode
/// as `Unknown`, whose seq counts like any other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionEvent {
    /// A prompt sent to the agent, as the user wrote it (injected context is not shown).
    UserMessage {
        text: String,
        /// The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
        /// the `turn_id` it answered. Absent on events journaled before turns had ids, and on
        /// the close of a turn the server found open after a restart.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
    },
    /// A piece of an agent message; chunks with the same `message_id` form one message.
    MessageChunk {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        text: String,
    },
    ThoughtChunk {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        text: String,
    },
    ToolCall {
        tool_call_id: String,
        title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw_input: Option<Value>,
    },
    /// Changes to a tool call; absent fields are unchanged.
    ToolCallUpdate {
        tool_call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw_output: Option<Value>,
    },
    /// The agent's plan; each plan replaces the previous one in full.
    Plan {
        entries: Vec<PlanEntry>,
    },
    /// A status line for the user ("Session resumed", "could not be restored"...).
    Status {
        message: String,
    },
    Error {
        message: String,
    },
    /// The agent started working on a prompt.
    TurnStarted {
        /// The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
        /// the `turn_id` it answered. Absent on events journaled before turns had ids, and on
        /// the close of a turn the server found open after a restart.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
    },
    /// The turn ended: an ACP stop reason (`end_turn`, `cancelled`...) or `interrupted`/`error`.
    TurnCompleted {
        stop_reason: String,
        /// The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
        /// the `turn_id` it answered. Absent on events journaled before turns had ids, and on
        /// the close of a turn the server found open after a restart.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
    },
    /// The agent asks permission; answer with `permission.respond`.
    PermissionRequest {
        request_id: String,
        #[serde(default)]
        tool_call: Value,
        options: Vec<PermissionOption>,
    },
    /// A permission request was answered (or abandoned: `option_id` is None).
    PermissionResolved {
        request_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        option_id: Option<String>,
    },
    AvailableCommands {
        commands: Vec<Value>,
    },
    Mode {
        mode_id: String,
    },
    /// An update this server does not know, kept as the agent sent it.
    AgentUpdate {
        update_kind: String,
        raw: Value,
    },
    /// An event of a kind this version of the protocol does not know (one a newer server
    /// added), kept whole. Its `seq` counts like any other: skip it (or show it generically)
    /// and keep your cursor moving. Never written by this version of the server.
    #[serde(untagged)]
    Unknown(UnknownEvent),
}

/// An event of an unknown `kind`: its kind and the whole event object as received.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownEvent {
    /// The event's `kind` tag.
    pub kind: String,
    /// The whole event object, `kind` included; written back as it is.
    pub raw: Value,
}

impl Serialize for UnknownEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for UnknownEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = Value::deserialize(deserializer)?;
        let kind = raw.get("kind").and_then(Value::as_str).ok_or_else(|| D::Error::missing_field("kind"))?;
        // A known kind that failed to decode is an error, not an unknown event.
        if SessionEvent::KINDS.contains(&kind) {
            return Err(D::Error::custom(format!("invalid {kind} event")));
        }
        Ok(UnknownEvent { kind: kind.to_string(), raw })
    }
}

impl JsonSchema for UnknownEvent {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "UnknownEvent".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An event of a kind a newer server added: skip it, its seq still counts.",
            "type": "object",
            "properties": {"kind": {"type": "string", "not": {"enum": SessionEvent::KINDS}}},
            "required": ["kind"],
        })
    }
}

impl SessionEvent {
    /// Every kind this version knows, in declaration order.
    pub const KINDS: [&'static str; 15] = [
        "user_message",
        "message_chunk",
        "thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "status",
        "error",
        "turn_started",
        "turn_completed",
        "permission_request",
        "permission_resolved",
        "available_commands",
        "mode",
        "agent_update",
    ];

    /// The `kind` tag, as it appears on the wire and in the journal.
    pub fn kind(&self) -> &str {
        match self {
            SessionEvent::UserMessage { .. } => "user_message",
            SessionEvent::MessageChunk { .. } => "message_chunk",
            SessionEvent::ThoughtChunk { .. } => "thought_chunk",
            SessionEvent::ToolCall { .. } => "tool_call",
            SessionEvent::ToolCallUpdate { .. } => "tool_call_update",
            SessionEvent::Plan { .. } => "plan",
            SessionEvent::Status { .. } => "status",
            SessionEvent::Error { .. } => "error",
            SessionEvent::TurnStarted { .. } => "turn_started",
            SessionEvent::TurnCompleted { .. } => "turn_completed",
            SessionEvent::PermissionRequest { .. } => "permission_request",
            SessionEvent::PermissionResolved { .. } => "permission_resolved",
            SessionEvent::AvailableCommands { .. } => "available_commands",
            SessionEvent::Mode { .. } => "mode",
            SessionEvent::AgentUpdate { .. } => "agent_update",
            SessionEvent::Unknown(unknown) => &unknown.kind,
        }
    }

    /// The line the folded view shows for a turn that ended this way, if any: a cancelled turn,
    /// or one that stopped for a reason other than finishing (`max_tokens`, `refusal`...).
    /// Interrupted and failed turns are explained by their own status or error line.
    pub fn turn_end_note(stop_reason: &str) -> Option<String> {
        match stop_reason {
            "end_turn" | "interrupted" | "error" => None,
            "cancelled" => Some("Turn cancelled.".to_string()),
            "refusal" => Some("Turn ended: the agent refused.".to_string()),
            "max_tokens" => Some("Turn ended: the agent reached its token limit.".to_string()),
            "max_turn_requests" => Some("Turn ended: the agent reached its request limit.".to_string()),
            other => Some(format!("Turn ended: {other}.")),
        }
    }

    pub fn status(message: impl Into<String>) -> Self {
        SessionEvent::Status { message: message.into() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanEntry {
    pub content: String,
    #[serde(default)]
    pub priority: String,
    #[serde(default)]
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionOption {
    pub option_id: String,
    pub name: String,
    /// `allow_once`, `allow_always`, `reject_once` or `reject_always`.
    pub kind: String,
}

/// A journaled event with its sequence number: the payload of `session.event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventRecord {
    pub session_id: String,
    pub seq: u64,
    pub event: SessionEvent,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}
