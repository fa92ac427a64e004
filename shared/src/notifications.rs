//! The notifications the server sends (`server.hello`, `session.event`...).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Attention, Envelope, EventRecord, MessageType, PermissionQueueChanged, SessionState, Task, TaskState};

/// `server.hello`: the first frame on every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hello {
    /// The server's protocol version (`PROTOCOL_VERSION`).
    pub protocol_version: u32,
    /// The server's own version.
    pub server_version: String,
    /// Features the server offers (`resume`, `since_seq`, `permissions`, `worktrees`); empty
    /// when absent.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// `session.state_changed`: sent to every client on each session state change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StateChanged {
    /// The session that changed.
    pub session_id: String,
    /// Its task.
    pub task_id: String,
    /// The task's title, so that a list row can be updated without a fetch (empty from servers
    /// before it was added).
    #[serde(default)]
    pub task_title: String,
    /// The new state.
    pub state: SessionState,
    /// The state before the change; `null` when the server resends current states after a
    /// connection fell behind.
    #[serde(default)]
    pub previous_state: Option<SessionState>,
    /// The task's state after the change.
    pub task_state: TaskState,
    /// The server's verdict after the change: the session needs resuming.
    pub needs_resume: bool,
    /// The session's newest journal seq when its state changed (0 when empty, and from servers
    /// before it was added).
    #[serde(default)]
    pub last_seq: u64,
    /// When the session's row last changed (RFC 3339 UTC; empty from servers before it was
    /// added).
    #[serde(default)]
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
    /// Why the session needs the user after the change; absent when it needs nothing. A
    /// change of only this (a permission asked or answered) is sent with `state` equal to
    /// `previous_state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<Attention>,
    /// Since when it has needed the user for that reason (RFC 3339 UTC); absent with
    /// `attention`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub attention_since: Option<String>,
    /// The session's `change_seq` after the change (see `SessionStatus::change_seq`): a client
    /// that already holds a view with a greater one (an answer read after this change) keeps
    /// that view. 0 from servers before it was added.
    #[serde(default)]
    pub change_seq: u64,
}

/// `attention.changed`: sent to every client when the number of sessions that need the user
/// changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AttentionChanged {
    /// Sessions of tasks that are not archived whose `attention` is set.
    pub count: u64,
}

/// `storage.changed`: sent to every client when the server's database stops being writable (the
/// disk is full) and when it is writable again. While it is not, agents' output is held, not
/// lost: the server stops reading the agents whose updates could not be saved (they wait, or
/// their agent host keeps their output) and saves those updates, in order, once there is room.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StorageChanged {
    /// False from the first write refused for want of space, true once a write succeeds again.
    pub writable: bool,
    /// Why, for people (the database's error when it is not writable).
    pub reason: String,
}

/// `server.shutdown`: the server is stopping (SIGTERM, Ctrl-C). The connection's close frame
/// follows, with code 1001 "going away": reconnect, a restarted server will be back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Shutdown {
    /// Why, for people ("the server is shutting down").
    pub reason: String,
}

/// `task.deleted`: sent to every client when a task and its sessions were deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskDeleted {
    /// The deleted task.
    pub task_id: String,
    /// Its sessions, deleted with it.
    pub session_ids: Vec<String>,
}

/// Every notification the server sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// `server.hello`.
    Hello(Hello),
    /// `session.state_changed`.
    StateChanged(StateChanged),
    /// `session.event`: a journaled event of a subscribed session.
    Event(EventRecord),
    /// `task.updated`: a task was created or changed (the whole task).
    TaskUpdated(Task),
    /// `task.deleted`.
    TaskDeleted(TaskDeleted),
    /// `server.shutdown`.
    Shutdown(Shutdown),
    /// `attention.changed`.
    AttentionChanged(AttentionChanged),
    /// `permission.queue_changed`.
    PermissionQueueChanged(PermissionQueueChanged),
    /// `storage.changed`.
    StorageChanged(StorageChanged),
    /// A notification this version of the protocol does not know (a newer server's), with its
    /// payload as received. Skip it.
    Unknown {
        /// The notification's `action`.
        action: String,
        /// Its payload, undecoded.
        payload: serde_json::Value,
    },
}

impl Notification {
    /// Action of [`Notification::Hello`].
    pub const HELLO: &'static str = "server.hello";
    /// Action of [`Notification::StateChanged`].
    pub const STATE_CHANGED: &'static str = "session.state_changed";
    /// Action of [`Notification::Event`].
    pub const EVENT: &'static str = "session.event";
    /// Action of [`Notification::TaskUpdated`].
    pub const TASK_UPDATED: &'static str = "task.updated";
    /// Action of [`Notification::TaskDeleted`].
    pub const TASK_DELETED: &'static str = "task.deleted";
    /// Action of [`Notification::Shutdown`].
    pub const SHUTDOWN: &'static str = "server.shutdown";
    /// Action of [`Notification::AttentionChanged`].
    pub const ATTENTION_CHANGED: &'static str = "attention.changed";
    /// Action of [`Notification::PermissionQueueChanged`].
    pub const PERMISSION_QUEUE_CHANGED: &'static str = "permission.queue_changed";
    /// Action of [`Notification::StorageChanged`].
    pub const STORAGE_CHANGED: &'static str = "storage.changed";

    /// The notification's `action` name.
    pub fn action(&self) -> &str {
        match self {
            Notification::Hello(_) => Self::HELLO,
            Notification::StateChanged(_) => Self::STATE_CHANGED,
            Notification::Event(_) => Self::EVENT,
            Notification::TaskUpdated(_) => Self::TASK_UPDATED,
            Notification::TaskDeleted(_) => Self::TASK_DELETED,
            Notification::Shutdown(_) => Self::SHUTDOWN,
            Notification::AttentionChanged(_) => Self::ATTENTION_CHANGED,
            Notification::PermissionQueueChanged(_) => Self::PERMISSION_QUEUE_CHANGED,
            Notification::StorageChanged(_) => Self::STORAGE_CHANGED,
            Notification::Unknown { action, .. } => action,
        }
    }

    /// The notification as an envelope, stamped with the current time.
    pub fn to_envelope(&self) -> Envelope {
        let payload = match self {
            Notification::Hello(p) => serde_json::to_value(p),
            Notification::StateChanged(p) => serde_json::to_value(p),
            Notification::Event(p) => serde_json::to_value(p),
            Notification::TaskUpdated(p) => serde_json::to_value(p),
            Notification::TaskDeleted(p) => serde_json::to_value(p),
            Notification::Shutdown(p) => serde_json::to_value(p),
            Notification::AttentionChanged(p) => serde_json::to_value(p),
            Notification::PermissionQueueChanged(p) => serde_json::to_value(p),
            Notification::StorageChanged(p) => serde_json::to_value(p),
            Notification::Unknown { payload, .. } => Ok(payload.clone()),
        };
        Envelope::notification(self.action(), payload.unwrap_or_default())
    }

    /// The notification as the JSON text of its envelope, the same as
    /// `self.to_envelope().to_json()` but written in one pass, without building a JSON value.
    pub fn to_json(&self) -> String {
        let action = self.action();
        match self {
            Notification::Hello(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::StateChanged(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::Event(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::TaskUpdated(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::TaskDeleted(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::Shutdown(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::AttentionChanged(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::PermissionQueueChanged(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::StorageChanged(p) => Envelope::frame_json(MessageType::Notification, None, action, p),
            Notification::Unknown { payload, .. } => {
                Envelope::frame_json(MessageType::Notification, None, action, payload)
            }
        }
    }

    /// Decodes the JSON text of a notification frame whose action is `action`, straight from
    /// the text (the same result as `from_envelope` on the parsed envelope).
    pub fn from_json(action: &str, text: &str) -> Result<Notification, NotificationError> {
        #[derive(Deserialize)]
        struct Frame<'a> {
            #[serde(borrow, default)]
            payload: Option<&'a serde_json::value::RawValue>,
        }
        let frame: Frame =
            serde_json::from_str(text).map_err(|e| NotificationError::Payload(action.to_string(), e.to_string()))?;
        Self::from_payload_json(action, frame.payload.map_or("null", |payload| payload.get()))
    }

    /// Decodes a notification from its action and the JSON text of its payload alone (what a
    /// reader that split the frame once holds; the same result as `from_json` on the frame).
    pub fn from_payload_json(action: &str, payload: &str) -> Result<Notification, NotificationError> {
        fn decode<T: serde::de::DeserializeOwned>(payload: &str) -> Result<T, serde_json::Error> {
            serde_json::from_str(payload)
        }
        let decoded = match action {
            Self::HELLO => decode(payload).map(Notification::Hello),
            Self::STATE_CHANGED => decode(payload).map(Notification::StateChanged),
            Self::EVENT => EventRecord::from_json(payload).map(Notification::Event),
            Self::TASK_UPDATED => decode(payload).map(Notification::TaskUpdated),
            Self::TASK_DELETED => decode(payload).map(Notification::TaskDeleted),
            Self::SHUTDOWN => decode(payload).map(Notification::Shutdown),
            Self::ATTENTION_CHANGED => decode(payload).map(Notification::AttentionChanged),
            Self::PERMISSION_QUEUE_CHANGED => decode(payload).map(Notification::PermissionQueueChanged),
            Self::STORAGE_CHANGED => decode(payload).map(Notification::StorageChanged),
            other => decode(payload).map(|payload| Notification::Unknown { action: other.to_string(), payload }),
        };
        decoded.map_err(|e| NotificationError::Payload(action.to_string(), e.to_string()))
    }

    /// Decodes a notification envelope. An unknown action (newer servers may add
    /// notifications) is `Notification::Unknown`.
    pub fn from_envelope(envelope: &Envelope) -> Result<Notification, NotificationError> {
        if envelope.kind != MessageType::Notification {
            return Err(NotificationError::NotANotification);
        }
        let payload = envelope.payload.clone();
        let decoded = match envelope.action.as_str() {
            Self::HELLO => serde_json::from_value(payload).map(Notification::Hello),
            Self::STATE_CHANGED => serde_json::from_value(payload).map(Notification::StateChanged),
            Self::EVENT => serde_json::from_value(payload).map(Notification::Event),
            Self::TASK_UPDATED => serde_json::from_value(payload).map(Notification::TaskUpdated),
            Self::TASK_DELETED => serde_json::from_value(payload).map(Notification::TaskDeleted),
            Self::SHUTDOWN => serde_json::from_value(payload).map(Notification::Shutdown),
            Self::ATTENTION_CHANGED => serde_json::from_value(payload).map(Notification::AttentionChanged),
            Self::PERMISSION_QUEUE_CHANGED => serde_json::from_value(payload).map(Notification::PermissionQueueChanged),
            Self::STORAGE_CHANGED => serde_json::from_value(payload).map(Notification::StorageChanged),
            other => Ok(Notification::Unknown { action: other.to_string(), payload }),
        };
        decoded.map_err(|e| NotificationError::Payload(envelope.action.clone(), e.to_string()))
    }
}

/// Why a frame could not be decoded as a notification.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotificationError {
    /// The envelope's type is not `notification`.
    #[error("envelope is not a notification")]
    NotANotification,
    /// The payload does not fit the action: the action and the decode error.
    #[error("bad payload for {0}: {1}")]
    Payload(String, String),
}
