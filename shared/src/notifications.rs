use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Envelope, EventRecord, MessageType, SessionState, Task, TaskState};

/// `server.hello`: the first frame on every connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Hello {
    pub protocol_version: u32,
    pub server_version: String,
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// `session.state_changed`: sent to every client on each session state change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StateChanged {
    pub session_id: String,
    pub task_id: String,
    pub state: SessionState,
    #[serde(default)]
    pub previous_state: Option<SessionState>,
    pub task_state: TaskState,
    pub needs_resume: bool,
}

/// `task.deleted`: sent to every client when a task and its sessions were deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskDeleted {
    pub task_id: String,
    pub session_ids: Vec<String>,
}

/// Every notification the server sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    Hello(Hello),
    StateChanged(StateChanged),
    Event(EventRecord),
    TaskUpdated(Task),
    TaskDeleted(TaskDeleted),
}

impl Notification {
    pub const HELLO: &'static str = "server.hello";
    pub const STATE_CHANGED: &'static str = "session.state_changed";
    pub const EVENT: &'static str = "session.event";
    pub const TASK_UPDATED: &'static str = "task.updated";
    pub const TASK_DELETED: &'static str = "task.deleted";

    pub fn action(&self) -> &'static str {
        match self {
            Notification::Hello(_) => Self::HELLO,
            Notification::StateChanged(_) => Self::STATE_CHANGED,
            Notification::Event(_) => Self::EVENT,
            Notification::TaskUpdated(_) => Self::TASK_UPDATED,
            Notification::TaskDeleted(_) => Self::TASK_DELETED,
        }
    }

    pub fn to_envelope(&self) -> Envelope {
        let payload = match self {
            Notification::Hello(p) => serde_json::to_value(p),
            Notification::StateChanged(p) => serde_json::to_value(p),
            Notification::Event(p) => serde_json::to_value(p),
            Notification::TaskUpdated(p) => serde_json::to_value(p),
            Notification::TaskDeleted(p) => serde_json::to_value(p),
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
        }
    }

    /// Decodes the JSON text of a notification frame whose action is `action`, straight from
    /// the text (the same result as `from_envelope` on the parsed envelope).
    pub fn from_json(action: &str, text: &str) -> Result<Notification, NotificationError> {
        #[derive(Deserialize)]
        struct Frame<T> {
            payload: T,
        }
        fn payload<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
            serde_json::from_str::<Frame<T>>(text).map(|frame| frame.payload)
        }
        let decoded = match action {
            Self::HELLO => payload(text).map(Notification::Hello),
            Self::STATE_CHANGED => payload(text).map(Notification::StateChanged),
            Self::EVENT => payload(text).map(Notification::Event),
            Self::TASK_UPDATED => payload(text).map(Notification::TaskUpdated),
            Self::TASK_DELETED => payload(text).map(Notification::TaskDeleted),
            other => return Err(NotificationError::UnknownAction(other.to_string())),
        };
        decoded.map_err(|e| NotificationError::Payload(action.to_string(), e.to_string()))
    }

    /// Decodes a notification envelope. Unknown actions are an error the caller may ignore:
    /// newer servers may add notifications.
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
            other => return Err(NotificationError::UnknownAction(other.to_string())),
        };
        decoded.map_err(|e| NotificationError::Payload(envelope.action.clone(), e.to_string()))
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotificationError {
    #[error("envelope is not a notification")]
    NotANotification,
    #[error("unknown notification action {0}")]
    UnknownAction(String),
    #[error("bad payload for {0}: {1}")]
    Payload(String, String),
}
