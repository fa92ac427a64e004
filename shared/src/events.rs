//! The events of a session's journal (`session.event`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{MessageQueue, OptionsChange, PlanEntryPriority, PlanEntryStatus, StopReason, ToolCallStatus};

/// One entry of a session's journal. Every event gets a per-session sequence number and is
/// durable before it is broadcast (`session.event`). A newer server may add kinds: they decode
/// as `Unknown`, whose seq counts like any other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionEvent {
    /// A prompt sent to the agent, as the user wrote it (injected context is not shown).
    UserMessage {
        /// The prompt text.
        text: String,
        /// The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
        /// the `turn_id` it answered. Absent on events journaled before turns had ids, and on
        /// the close of a turn the server found open after a restart.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
    },
    /// A piece of an agent message; chunks with the same `message_id` form one message.
    MessageChunk {
        /// The agent's message id; absent when the agent gives none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// The text of this piece (a delta).
        text: String,
    },
    /// A piece of the agent's thinking; chunks with the same `message_id` form one thought.
    ThoughtChunk {
        /// The agent's message id; absent when the agent gives none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// The text of this piece (a delta).
        text: String,
    },
    /// The agent started (or restated) a tool call.
    ToolCall {
        /// The tool call's id, scoped to the agent process (`<agent's id>@<execution>`).
        tool_call_id: String,
        /// What the tool call does, for display.
        title: String,
        /// The ACP tool kind (`read`, `edit`, `execute`, `search`...).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_kind: Option<String>,
        /// `pending`, `in_progress`, `completed` or `failed` (another value an agent sends is
        /// passed on as is).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ToolCallStatus>,
        /// The ACP tool-call content array (Baton always sends it, possibly `[]`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Value>,
        /// The tool's input as the agent sent it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw_input: Option<Value>,
    },
    /// Changes to a tool call; absent fields are unchanged.
    ToolCallUpdate {
        /// The id of the tool call this updates.
        tool_call_id: String,
        /// A new title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// A new status (`pending`, `in_progress`, `completed`, `failed`; another value an
        /// agent sends is passed on as is).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ToolCallStatus>,
        /// New ACP tool-call content.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Value>,
        /// The tool's output as the agent sent it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw_output: Option<Value>,
    },
    /// The agent's plan; each plan replaces the previous one in full.
    Plan {
        /// The plan's steps, in order.
        entries: Vec<PlanEntry>,
    },
    /// A status line for the user ("Session resumed", "could not be restored"...).
    Status {
        /// The status line.
        message: String,
    },
    /// An error for the user (a failed turn, a failed restore...).
    Error {
        /// The error message, saying what to do when something can be done.
        message: String,
    },
    /// A prompt was sent to the agent: a turn began.
    TurnStarted {
        /// The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
        /// the `turn_id` it answered. Absent on events journaled before turns had ids, and on
        /// the close of a turn the server found open after a restart.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
    },
    /// The turn ended: an ACP stop reason (`end_turn`, `cancelled`...) or `interrupted`/`error`.
    TurnCompleted {
        /// Why the turn ended (`end_turn`, `max_tokens`, `max_turn_requests`, `refusal`,
        /// `cancelled`, `interrupted`, `error`; unknown ACP reasons are passed on).
        stop_reason: StopReason,
        /// The turn this event belongs to, unique per turn: for a turn opened by `message.add`,
        /// the `turn_id` it answered. Absent on events journaled before turns had ids, and on
        /// the close of a turn the server found open after a restart.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_id: Option<String>,
    },
    /// The agent asks permission; answer with `permission.respond`.
    PermissionRequest {
        /// The id to answer with.
        request_id: String,
        /// The agent's ACP `toolCall` as sent (camelCase; may be null).
        #[serde(default)]
        tool_call: Value,
        /// The choices offered.
        options: Vec<PermissionOption>,
    },
    /// A permission request was answered (or abandoned: `option_id` is None).
    PermissionResolved {
        /// The id of the answered request.
        request_id: String,
        /// The chosen option; absent when the request was abandoned (cancel, stop, agent exit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        option_id: Option<String>,
    },
    /// The slash commands the agent offers now.
    AvailableCommands {
        /// ACP available commands (`name`, `description`, `input`?), as sent.
        commands: Vec<Value>,
    },
    /// The agent switched mode.
    Mode {
        /// The ACP id of the new mode.
        mode_id: String,
    },
    /// What the agent offers to switch changed (its modes, its configuration options), as it
    /// said when its session opened or later; absent parts are unchanged. A client keeps the
    /// latest (`session.options` gives it whole).
    Options {
        /// The change.
        #[serde(flatten)]
        change: OptionsChange,
    },
    /// The session's message queue changed (a message queued, edited, removed or sent, the queue
    /// held or released): the whole queue as it is now. A client keeps the latest
    /// (`queue.list` gives it whole).
    Queue {
        /// The queue.
        #[serde(flatten)]
        queue: MessageQueue,
    },
    /// A command the agent runs in a terminal the server gave it (ACP `terminal/*`): the first
    /// event of a terminal names its command, the next ones carry its output as it comes
    /// (pieces, in order; stdout and stderr together), the last one how it exited. The folded
    /// view (`message.list`) shows it as a tool call `terminal:<terminal_id>` whose data holds
    /// `terminal: {terminal_id, output, total, exit?}` (the last 64 KiB of its output, and how
    /// many bytes it wrote in all).
    TerminalOutput {
        /// The terminal's id, as the agent knows it (in its tool calls' `{type:"terminal"}`
        /// content).
        terminal_id: String,
        /// The command line, on the terminal's first event only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<String>,
        /// A piece of its output (may be empty on the first and last events).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        output: String,
        /// How many bytes (UTF-8) of its output came before this piece: a client that folds
        /// the same piece twice (a replay after `message.list`) can tell.
        #[serde(default)]
        offset: u64,
        /// How it exited, on its last event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit: Option<TerminalExit>,
    },
    /// An update this server does not know, kept as the agent sent it.
    AgentUpdate {
        /// The ACP `sessionUpdate` tag.
        update_kind: String,
        /// The update as the agent sent it.
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
    pub const KINDS: [&'static str; 18] = [
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
        "options",
        "queue",
        "terminal_output",
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
            SessionEvent::Options { .. } => "options",
            SessionEvent::Queue { .. } => "queue",
            SessionEvent::TerminalOutput { .. } => "terminal_output",
            SessionEvent::AgentUpdate { .. } => "agent_update",
            SessionEvent::Unknown(unknown) => &unknown.kind,
        }
    }

    /// A `status` event with this message.
    pub fn status(message: impl Into<String>) -> Self {
        SessionEvent::Status { message: message.into() }
    }
}

/// How a terminal's command exited (ACP `TerminalExitStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TerminalExit {
    /// Its exit code, when it exited by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it (`SIGKILL`...), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
}

impl TerminalExit {
    /// It exited by itself with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && self.signal.is_none()
    }
}

/// One step of an agent's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanEntry {
    /// What the step is.
    pub content: String,
    /// The agent's priority (`high`, `medium`, `low`); `""` when absent.
    #[serde(default)]
    pub priority: PlanEntryPriority,
    /// `pending`, `in_progress` or `completed`; `""` when absent.
    #[serde(default)]
    pub status: PlanEntryStatus,
}

/// One choice of a permission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PermissionOption {
    /// The id to send in `permission.respond`.
    pub option_id: String,
    /// The label to show.
    pub name: String,
    /// `allow_once`, `allow_always`, `reject_once` or `reject_always`.
    pub kind: String,
}

/// A journaled event with its sequence number: the payload of `session.event`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventRecord {
    /// The session whose journal holds the event.
    pub session_id: String,
    /// The event's sequence number: per session, from 1, without gaps.
    pub seq: u64,
    /// The event itself.
    pub event: SessionEvent,
    /// When the event was journaled (RFC 3339, UTC).
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
}

impl EventRecord {
    /// Decodes a `session.event` payload. A text chunk, the common event of a stream, is read
    /// straight into its fields: the internally tagged `SessionEvent` first copies every event
    /// into serde's generic content to find its `kind`, which was most of a chunk's decoding.
    /// Anything else, and a chunk that does not read that way, takes the general path; both
    /// give the same record (`the_chunk_path_decodes_as_the_general_path`).
    pub fn from_json(text: &str) -> serde_json::Result<EventRecord> {
        #[derive(Deserialize)]
        struct Chunk<'a> {
            #[serde(borrow)]
            kind: std::borrow::Cow<'a, str>,
            #[serde(default)]
            message_id: Option<String>,
            text: String,
        }
        #[derive(Deserialize)]
        struct ChunkRecord<'a> {
            session_id: String,
            seq: u64,
            #[serde(borrow)]
            event: Chunk<'a>,
            created_at: String,
        }
        if let Ok(record) = serde_json::from_str::<ChunkRecord>(text) {
            let Chunk { kind, message_id, text: chunk } = record.event;
            let event = match &*kind {
                "message_chunk" => Some(SessionEvent::MessageChunk { message_id, text: chunk }),
                "thought_chunk" => Some(SessionEvent::ThoughtChunk { message_id, text: chunk }),
                _ => None,
            };
            if let Some(event) = event {
                return Ok(EventRecord {
                    session_id: record.session_id,
                    seq: record.seq,
                    event,
                    created_at: record.created_at,
                });
            }
        }
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general path: the derived decoding of the whole record.
    fn general(text: &str) -> Result<EventRecord, String> {
        serde_json::from_str::<EventRecord>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_chunk_path_decodes_as_the_general_path() {
        let lines = [
            r#"{"session_id":"s1","seq":4,"event":{"kind":"message_chunk","text":"c1 "},"created_at":"2026-01-01T00:00:00.000Z"}"#,
            r#"{"session_id":"s1","seq":4,"event":{"kind":"message_chunk","message_id":"m1","text":"a"},"created_at":"t"}"#,
            r#"{"session_id":"s1","seq":4,"event":{"kind":"thought_chunk","message_id":null,"text":"hmm"},"created_at":"t"}"#,
            // Escapes in every string, the kind last, fields in another order.
            r#"{"created_at":"t\u00e9","event":{"text":"line\n\"quoted\" \ud83d\ude00","kind":"message_chunk"},"seq":1,"session_id":"s\/1"}"#,
            // Unknown fields, in the record and in the event.
            r#"{"session_id":"s1","seq":4,"event":{"kind":"message_chunk","text":"a","extra":[1,{"x":2}]},"created_at":"t","more":true}"#,
            // Other kinds, known and unknown, go the general way.
            r#"{"session_id":"s1","seq":4,"event":{"kind":"status","text":"Agent ready"},"created_at":"t"}"#,
            r#"{"session_id":"s1","seq":4,"event":{"kind":"usage","text":"x","tokens":3},"created_at":"t"}"#,
            r#"{"session_id":"s1","seq":4,"event":{"kind":"turn_started"},"created_at":"t"}"#,
            // What neither path decodes.
            r#"{"session_id":"s1","seq":4,"event":{"kind":"message_chunk"},"created_at":"t"}"#,
            r#"{"session_id":"s1","seq":4,"event":{"kind":"message_chunk","text":"a","text":"b"},"created_at":"t"}"#,
            r#"{"session_id":"s1","seq":4,"event":{"kind":"message_chunk","kind":"status","text":"a"},"created_at":"t"}"#,
            r#"{"session_id":"s1","seq":4,"event":{"kind":"message_chunk","message_id":7,"text":"a"},"created_at":"t"}"#,
            r#"{"session_id":"s1","seq":-1,"event":{"kind":"message_chunk","text":"a"},"created_at":"t"}"#,
            r#"{"session_id":"s1","event":{"kind":"message_chunk","text":"a"},"created_at":"t"}"#,
            r#"{"session_id":"s1","seq":4,"event":{"kind":"message_chunk","text":"a"}"#,
        ];
        let mut fast = 0;
        for line in lines {
            let decoded = EventRecord::from_json(line).map_err(|e| e.to_string());
            let expected = general(line);
            assert_eq!(decoded.is_ok(), expected.is_ok(), "{line}: {decoded:?} vs {expected:?}");
            if let (Ok(decoded), Ok(expected)) = (&decoded, &expected) {
                assert_eq!(decoded, expected, "{line}");
                fast += usize::from(matches!(
                    decoded.event,
                    SessionEvent::MessageChunk { .. } | SessionEvent::ThoughtChunk { .. }
                ));
            }
        }
        assert_eq!(fast, 5, "the chunks decode");
    }
}
