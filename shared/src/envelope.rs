//! The envelope every frame is, and decoding of the frames clients send.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What an envelope is: a client request, its response or error, or a server notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageType {
    /// A client's request (`id` required).
    Request,
    /// The successful answer to a request (echoes its `id` and `action`).
    Response,
    /// A message from the server that answers no request (no `id`).
    Notification,
    /// The failed answer to a request; the payload is an error payload.
    Error,
}

/// The one frame shape of the protocol.
///
/// Requests carry a client-chosen `id`; the response or error echoes `id` and `action`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Envelope {
    /// The request id chosen by the client, echoed by its response or error; absent on
    /// notifications (and on errors for frames whose id could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What the frame is (`type` on the wire).
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// The action (`task.create`...) or notification (`session.event`...) name; `""` when absent.
    #[serde(default)]
    pub action: String,
    /// The action's params, its result, an error payload or a notification's payload; null
    /// when absent.
    #[serde(default)]
    pub payload: Value,
    /// When the frame was written (RFC 3339 UTC with milliseconds); set by the server on every
    /// frame it sends, optional and ignored in requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub timestamp: Option<String>,
}

impl Envelope {
    /// An envelope of this type, stamped with the current time.
    pub fn new(kind: MessageType, id: Option<String>, action: impl Into<String>, payload: Value) -> Self {
        Envelope { id, kind, action: action.into(), payload, timestamp: Some(now_timestamp()) }
    }

    /// A request envelope.
    pub fn request(id: impl Into<String>, action: impl Into<String>, payload: Value) -> Self {
        Self::new(MessageType::Request, Some(id.into()), action, payload)
    }

    /// A response envelope answering the request `id`.
    pub fn response(id: Option<String>, action: impl Into<String>, payload: Value) -> Self {
        Self::new(MessageType::Response, id, action, payload)
    }

    /// A notification envelope (no id).
    pub fn notification(action: impl Into<String>, payload: Value) -> Self {
        Self::new(MessageType::Notification, None, action, payload)
    }

    /// An error envelope answering the request `id` (absent when it could not be read).
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

    /// The envelope's JSON text.
    pub fn to_json(&self) -> String {
        // An Envelope holds only strings and JSON values, so serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// RFC 3339 UTC timestamp with milliseconds, as used in envelopes and records.
pub fn now_timestamp() -> String {
    format_timestamp(chrono::Utc::now())
}

/// `at` written as [`now_timestamp`] writes the present.
pub fn format_timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A client frame that is a request: its id, action and (not yet decoded) payload.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFrame {
    /// The request's id (non-empty).
    pub id: String,
    /// The requested action (not yet checked against the known ones).
    pub action: String,
    /// The payload, undecoded (null when absent).
    pub payload: Value,
}

/// Why a client frame is not a request. `id` and `action` are echoed when they could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameError {
    /// The frame's id, when it was a string.
    pub id: Option<String>,
    /// The frame's action, when it was a string; `""` otherwise.
    pub action: String,
    /// The `BAD_REQUEST` error to answer with.
    pub error: crate::ErrorPayload,
}

impl Envelope {
    /// Decodes a text frame a client sent: a JSON envelope of type `request` with a non-empty
    /// id. Anything else (malformed or too deeply nested JSON, wrong types, another type, no
    /// id) is a `BAD_REQUEST` naming what is wrong. Never panics, whatever the input.
    // The error is answered at once, never kept or passed up: its size costs nothing.
    #[allow(clippy::result_large_err)]
    pub fn decode_request(text: &str) -> Result<RequestFrame, FrameError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            let (id, action) = readable_id_and_action(text);
            FrameError { id, action, error: crate::ErrorPayload::bad_request(format!("malformed JSON: {e}")) }
        })?;
        let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
        let action = value.get("action").and_then(Value::as_str).unwrap_or("").to_string();
        let fail = |id: Option<String>, message: String| FrameError {
            id,
            action: action.clone(),
            error: crate::ErrorPayload::bad_request(message),
        };
        let envelope: Envelope =
            serde_json::from_value(value).map_err(|e| fail(id.clone(), format!("not an envelope: {e}")))?;
        if envelope.kind != MessageType::Request {
            return Err(fail(id, "clients send requests only (type \"request\")".into()));
        }
        let Some(id) = envelope.id.filter(|id| !id.is_empty()) else {
            return Err(fail(None, "a request needs an id".into()));
        };
        Ok(RequestFrame { id, action: envelope.action, payload: envelope.payload })
    }
}

/// The `id` and `action` of a frame that is not valid JSON as a whole, when they can still be
/// read: a lone surrogate escape (`"\ud800"`) elsewhere in the frame is refused by the JSON
/// parser, yet the client deserves the answer tied to its request. The other members are only
/// skipped (not decoded), so what they hold does not matter; `(None, "")` when the frame is not
/// an object or its `id` is not a readable string.
fn readable_id_and_action(text: &str) -> (Option<String>, String) {
    use serde_json::value::RawValue;
    #[derive(Deserialize)]
    struct Members<'a> {
        #[serde(default, borrow)]
        id: Option<&'a RawValue>,
        #[serde(default, borrow)]
        action: Option<&'a RawValue>,
    }
    let Ok(members) = serde_json::from_str::<Members<'_>>(text) else {
        return (None, String::new());
    };
    let read = |raw: Option<&RawValue>| raw.and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    (read(members.id).filter(|id| !id.is_empty()), read(members.action).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn requests_decode_and_everything_else_is_a_bad_request() {
        let frame = Envelope::decode_request(r#"{"id":"c1","type":"request","action":"task.list"}"#).unwrap();
        assert_eq!((frame.id.as_str(), frame.action.as_str(), frame.payload), ("c1", "task.list", Value::Null));
        let nested = "[".repeat(100_000);
        let cases: &[(&str, &str)] = &[
            ("", "malformed JSON"),
            ("{\"id\":\"c1\",\"type\":\"req", "malformed JSON"),
            (&nested, "recursion limit"),
            (r#"{"id":5,"type":"request","action":"task.list"}"#, "not an envelope"),
            (r#"{"id":"c1","type":"response","action":"task.list"}"#, "requests only"),
            (r#"{"type":"request","action":"task.list"}"#, "needs an id"),
            (r#"{"id":"","type":"request","action":"task.list"}"#, "needs an id"),
            (r#"{"id":"c1","type":"request","action":7}"#, "not an envelope"),
            ("[1,2,3]", "not an envelope"),
        ];
        for (text, expected) in cases {
            let error = Envelope::decode_request(text).unwrap_err();
            assert_eq!(error.error.code, ErrorCode::BadRequest);
            assert!(
                error.error.message.contains(expected),
                "{:?}: {}",
                &text[..text.len().min(40)],
                error.error.message
            );
        }
        // A lone surrogate makes the frame malformed JSON, but its id and action are still echoed.
        let surrogate = Envelope::decode_request(
            r#"{"id":"c7","type":"request","action":"message.add","payload":{"content":"\ud800"}}"#,
        )
        .unwrap_err();
        assert_eq!((surrogate.id.as_deref(), surrogate.action.as_str()), (Some("c7"), "message.add"));
        assert!(surrogate.error.message.contains("malformed JSON"), "{}", surrogate.error.message);
        let unreadable_id = Envelope::decode_request(r#"{"id":"\udc00","type":"request","x":"\ud800"}"#).unwrap_err();
        assert_eq!((unreadable_id.id, unreadable_id.action.as_str()), (None, ""));
        let wrong_type = Envelope::decode_request(r#"{"id":"c9","type":"notification","action":"x"}"#).unwrap_err();
        assert_eq!((wrong_type.id.as_deref(), wrong_type.action.as_str()), (Some("c9"), "x"));
    }
}
