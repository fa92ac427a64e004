//! Error codes and the payload of `error` envelopes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Error codes of the protocol (the `code` of an error payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The frame is not a valid envelope, or the payload does not fit the action.
    BadRequest,
    /// The payload is well formed but its values are not acceptable.
    ValidationError,
    /// No session or task with that id (or no pending permission request with that id).
    NotFound,
    /// The request conflicts with the current state (a turn is already running...).
    Conflict,
    /// A valid token is required (answered at the HTTP handshake as status 401).
    Unauthorized,
    /// The page's origin is not allowed (answered at the HTTP handshake as status 403).
    Forbidden,
    /// The action is not one the server knows; `details.actions` lists them.
    UnknownAction,
    /// The server cannot do it now (agent missing, shutting down, too many subscriptions).
    Unavailable,
    /// A fault of the server (database error...).
    InternalError,
}

impl ErrorCode {
    /// The code as spelled on the wire (`BAD_REQUEST`...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "BAD_REQUEST",
            ErrorCode::ValidationError => "VALIDATION_ERROR",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::UnknownAction => "UNKNOWN_ACTION",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::InternalError => "INTERNAL_ERROR",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    /// Machine-readable detail for some errors (e.g. `actions` for `UNKNOWN_ACTION`); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorPayload {
    /// An error with this code and message and no details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorPayload { code, message: message.into(), details: None }
    }

    /// The same error with `details` set.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
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
    /// A `CONFLICT` error.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    /// An `UNAVAILABLE` error.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
    /// An `INTERNAL_ERROR` error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, message)
    }
}
