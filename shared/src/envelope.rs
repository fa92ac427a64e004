use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What an envelope is: a client request, its response or error, or a server notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageType {
    Request,
    Response,
    Notification,
    Error,
}

/// The one frame shape of the protocol.
///
/// Requests carry a client-chosen `id`; the response or error echoes `id` and `action`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Envelope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub kind: MessageType,
    #[serde(default)]
    pub action: String,
    #[serde(default)]
    pub payload: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

impl Envelope {
    pub fn new(kind: MessageType, id: Option<String>, action: impl Into<String>, payload: Value) -> Self {
        Envelope { id, kind, action: action.into(), payload, timestamp: Some(now_timestamp()) }
    }

    pub fn request(id: impl Into<String>, action: impl Into<String>, payload: Value) -> Self {
        Self::new(MessageType::Request, Some(id.into()), action, payload)
    }

    pub fn response(id: Option<String>, action: impl Into<String>, payload: Value) -> Self {
        Self::new(MessageType::Response, id, action, payload)
    }

    pub fn notification(action: impl Into<String>, payload: Value) -> Self {
        Self::new(MessageType::Notification, None, action, payload)
    }

    pub fn error(id: Option<String>, action: impl Into<String>, error: &crate::ErrorPayload) -> Self {
        let payload = serde_json::to_value(error).unwrap_or(Value::Null);
        Self::new(MessageType::Error, id, action, payload)
    }

    /// The JSON text of an envelope with this payload, written in one pass from the payload's
    /// own type (the same text as building the `Envelope` and calling `to_json`, without the
    /// intermediate JSON value).
    pub fn frame_json<T: Serialize + ?Sized>(kind: MessageType, id: Option<&str>, action: &str, payload: &T) -> String {
        #[derive(Serialize)]
        struct Frame<'a, T: Serialize + ?Sized> {
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<&'a str>,
            #[serde(rename = "type")]
            kind: MessageType,
            action: &'a str,
            payload: &'a T,
            timestamp: String,
        }
        let frame = Frame { id, kind, action, payload, timestamp: now_timestamp() };
        // Protocol payloads hold only strings, numbers and JSON values: serialising cannot fail.
        serde_json::to_string(&frame).unwrap_or_default()
    }

    pub fn to_json(&self) -> String {
        // An Envelope holds only strings and JSON values, so serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// RFC 3339 UTC timestamp with milliseconds, as used in envelopes and records.
pub fn now_timestamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
