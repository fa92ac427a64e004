//! Messages the user wrote while a turn ran: each session's queue, sent one turn at a time once
//! the running turn ends, and the actions that look at and change it (`queue.list`,
//! `queue.edit`, `queue.remove`, `queue.release`). `message.add` puts a message in the queue.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most messages one session's queue holds; `message.add` past it is refused.
pub const MAX_QUEUED: usize = 32;

/// One message waiting for its turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QueuedMessage {
    /// Its id in the queue (what `queue.edit` and `queue.remove` take). Gone once it is sent:
    /// the message then appears in the journal as a `user_message` like any other.
    pub id: String,
    /// The prompt.
    pub text: String,
    /// Queued with `steer: true`: the running turn was cancelled for it, and it goes first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub steer: bool,
    /// When it was queued (RFC 3339).
    pub created_at: String,
    /// When its text last changed (RFC 3339).
    pub updated_at: String,
}

/// A session's queue: the messages in the order they will be sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MessageQueue {
    /// The messages, the next one to send first.
    #[serde(default)]
    pub messages: Vec<QueuedMessage>,
    /// Why the queue waits instead of sending its next message when no turn runs: the last
    /// turn failed, was cancelled, or was cut short by a crash or a restart, so the agent may
    /// not be where the messages expect it. `queue.release` sends the next message anyway; a
    /// message sent with `message.add` meanwhile goes straight to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

impl MessageQueue {
    /// The message with this id, if it is still queued.
    pub fn find(&self, id: &str) -> Option<&QueuedMessage> {
        self.messages.iter().find(|m| m.id == id)
    }
}

/// `queue.list`: the session's queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueListParams {
    /// The session.
    pub session_id: String,
}

/// `queue.edit`: replaces the text of a message that is still queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueEditParams {
    /// The session.
    pub session_id: String,
    /// The queued message's id.
    pub id: String,
    /// Its new text; must not be empty or whitespace only.
    pub content: String,
}

/// `queue.remove`: takes a message out of the queue; it is never sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueRemoveParams {
    /// The session.
    pub session_id: String,
    /// The queued message's id.
    pub id: String,
}

/// `queue.release`: a held queue goes on: its next message is sent now when the session waits
/// for input (resuming its agent if needed), and the rest follow one turn at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueReleaseParams {
    /// The session.
    pub session_id: String,
}

/// The answer to every `queue.*` action: the session's queue after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueueResult {
    /// The session.
    pub session_id: String,
    /// Its queue.
    #[serde(flatten)]
    pub queue: MessageQueue,
}
