//! Error codes and the payload of `error` envelopes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent_values::open_string_enum;

open_string_enum! {
    /// Error codes of the protocol (the `code` of an error payload). A newer server may send a
    /// code this version does not know: it is kept as sent (`Other`), with the payload's
    /// message; treat it by the payload's `retryable`.
    ErrorCode {
        /// The frame is not a valid envelope, or the payload does not fit the action (a missing
        /// field, a field of the wrong type).
        BadRequest => "BAD_REQUEST",
        /// The payload is well formed but a value is not acceptable (out of range, empty...).
        ValidationError => "VALIDATION_ERROR",
        /// No session or task with that id (or no pending permission request with that id).
        NotFound => "NOT_FOUND",
        /// The request conflicts with the current state: a finished session, a turn already
        /// running... (`retryable` tells a conflict that passes from one that does not).
        Conflict => "CONFLICT",
        /// A valid token is required (answered at the HTTP handshake as status 401).
        Unauthorized => "UNAUTHORIZED",
        /// The page's origin is not allowed (answered at the HTTP handshake as status 403).
        Forbidden => "FORBIDDEN",
        /// The action is not one the server knows; `details.actions` lists them.
        UnknownAction => "UNKNOWN_ACTION",
        /// The server cannot do it now or here: an agent starting or missing, a shutdown, a
        /// limit (`retryable` tells which).
        Unavailable => "UNAVAILABLE",
        /// A fault of the server (database error...).
        InternalError => "INTERNAL_ERROR",
    }
}

impl ErrorCode {
    /// Whether an error of this code can pass by itself, when the error does not say
    /// otherwise: `UNAVAILABLE` can; the others need the request or the state to change.
    pub fn retryable_by_default(&self) -> bool {
        matches!(self, ErrorCode::Unavailable)
    }
}

/// Payload of an `error` envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ErrorPayload {
    /// What kind of error it is.
    pub code: ErrorCode,
    /// What went wrong, for people.
    pub message: String,
    /// Whether the same request can succeed later without the client changing it: true when
    /// what stands in the way passes (a turn that is running ends, an agent that is starting
    /// gets ready, a server that shuts down comes back); false when the request or the
    /// session's state must change first (a finished session, a bad value, a limit reached).
    /// Absent (false) from servers older than this field.
    #[serde(default)]
    #[schemars(required)]
    pub retryable: bool,
    /// How long to wait before retrying, in milliseconds, when the server knows; absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// Machine-readable detail for some errors (e.g. `actions` for `UNKNOWN_ACTION`); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: most errors have none, and an error is passed up by value through many calls.
    pub details: Option<Box<Value>>,
}

impl ErrorPayload {
    /// An error with this code and message and no details, retryable as its code is by
    /// default ([`ErrorCode::retryable_by_default`]).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let retryable = code.retryable_by_default();
        ErrorPayload { code, message: message.into(), retryable, retry_after_ms: None, details: None }
    }

    /// The same error, saying whether the request can succeed later ([`ErrorPayload::retryable`]).
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        if !retryable {
            self.retry_after_ms = None;
        }
        self
    }

    /// The same error, retryable after `ms` milliseconds.
    pub fn retry_after_ms(mut self, ms: u64) -> Self {
        self.retryable = true;
        self.retry_after_ms = Some(ms);
        self
    }

    /// The same error with `details` set.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// A `BAD_REQUEST` error.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }
    /// A `VALIDATION_ERROR` error.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationError, message)
    }
    /// A `NOT_FOUND` error.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    /// A `CONFLICT` error that does not pass by itself (a finished session...): not retryable.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    /// A `CONFLICT` error with something that passes (a turn that is running): retryable.
    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message).retryable(true)
    }
    /// An `UNAVAILABLE` error that passes (an agent starting, a shutdown): retryable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
    /// An `UNAVAILABLE` error that does not pass by itself (a limit reached, a missing agent, an
    /// agent without the feature): not retryable.
    pub fn unavailable_until_changed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message).retryable(false)
    }
    /// An `INTERNAL_ERROR` error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, message)
    }
}
