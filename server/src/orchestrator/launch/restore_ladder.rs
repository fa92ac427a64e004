//! The ACP restore ladder (see docs/RESUME.md, 'Restore ladder'), and the one place where
//! restore errors are classified.
//!
//! - resume advertised → `session/resume`;
//! - `session/resume` answered -32601 and load advertised → `session/load`;
//! - resume not advertised → `session/load` (if advertised);
//! - an entry with `restore_with = "load"` swaps the two: `session/load` first, and
//!   `session/resume` after a -32601;
//! - only an explicit "unsupported" or "unknown session" answer falls back to `session/new`;
//!   transport, auth, cancellation, timeout and inconclusive failures keep the saved identity.

use std::time::Duration;

use agent_client_protocol_schema::v1::AGENT_METHOD_NAMES;
use serde_json::Value;

use crate::agent::acp::outgoing::{self, Outgoing, SessionPlace};
use crate::agent::acp::{AcpConnection, CallError, RpcError};
use crate::agent::registry::RestoreWith;
use crate::agent::translate::AgentCapabilities;

/// Why a restore attempt failed, as far as we can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreFailure {
    /// The agent does not implement the method (-32601) or does not advertise it.
    Unsupported,
    /// The agent does not know the session: the token is invalid.
    UnknownSession,
    /// The process or its pipes went away.
    Transport,
    /// -32000: the agent needs authentication first.
    Auth,
    /// -32800: the request was cancelled.
    Cancelled,
    Timeout,
    /// Anything else, including a bare -32603 "Internal error".
    Inconclusive,
}

impl RestoreFailure {
    /// Whether the failure proves the saved session cannot be restored, so that starting a new
    /// session loses nothing that could have been kept.
    pub fn allows_fallback(self) -> bool {
        matches!(self, RestoreFailure::Unsupported | RestoreFailure::UnknownSession)
    }

    /// Whether trying the same restore again may work: the agent did not answer, or not yet.
    /// An agent that answered with an error (opencode's own store lost the session: -32603
    /// "service failure" on every attempt) will answer the same way next time.
    pub fn is_transient(self) -> bool {
        matches!(self, RestoreFailure::Transport | RestoreFailure::Timeout | RestoreFailure::Cancelled)
    }

    pub fn describe(self) -> &'static str {
        match self {
            RestoreFailure::Unsupported => "the agent cannot restore sessions",
            RestoreFailure::UnknownSession => "the agent no longer knows the session",
            RestoreFailure::Transport => "the agent process went away",
            RestoreFailure::Auth => "the agent needs authentication",
            RestoreFailure::Cancelled => "the restore was cancelled",
            RestoreFailure::Timeout => "the agent did not answer in time",
            RestoreFailure::Inconclusive => "the agent reported an error",
        }
    }
}

/// Phrases agents use when they do not know a session id (see docs/ACP.md, 'Error codes' and
/// 'Real agents'): matched case-insensitively in the message and the data.
const UNKNOWN_SESSION_PHRASES: &[&str] = &[
    "session not found",
    "unknown session",
    "no such session",
    "invalid session",
    "no previous session",
    "requires a valid session",
    "session does not exist",
    "resource not found",
    "not found: session",
];

fn mentions_unknown_session(error: &RpcError) -> bool {
    let mut text = error.message.to_lowercase();
    if let Some(data) = &error.data {
        text.push(' ');
        text.push_str(&data.to_string().to_lowercase());
    }
    UNKNOWN_SESSION_PHRASES.iter().any(|phrase| text.contains(phrase))
}

/// Classifies a JSON-RPC error from `session/load` or `session/resume`, by code and message:
/// unknown-session codes differ by agent (-32002, -32603, -32602 are all seen), so a bare
/// -32603 or -32602 is inconclusive and only its message can make it "unknown session".
pub fn classify_rpc(error: &RpcError) -> RestoreFailure {
    match error.code {
        -32601 => RestoreFailure::Unsupported,
        -32002 => RestoreFailure::UnknownSession,
        -32000 => RestoreFailure::Auth,
        -32800 => RestoreFailure::Cancelled,
        -32603 | -32602 if mentions_unknown_session(error) => RestoreFailure::UnknownSession,
        _ => RestoreFailure::Inconclusive,
    }
}

pub fn classify(error: &CallError) -> RestoreFailure {
    match error {
        CallError::Rpc(rpc) => classify_rpc(rpc),
        CallError::Transport(_) => RestoreFailure::Transport,
        CallError::Timeout { .. } => RestoreFailure::Timeout,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreMethod {
    Resume,
    Load,
    /// A fork's agent session copied from its source's (`task.session.fork`).
    Fork,
}

impl RestoreMethod {
    /// The ACP request that restores `session_id` in `cwd` this way.
    pub fn request(self, session_id: &str, place: &SessionPlace) -> Outgoing {
        match self {
            RestoreMethod::Resume => outgoing::resume_session(session_id, place),
            RestoreMethod::Load => outgoing::load_session(session_id, place),
            RestoreMethod::Fork => outgoing::fork_session(session_id, place),
        }
    }

    /// The method of that request.
    pub fn acp_method(self) -> &'static str {
        match self {
            RestoreMethod::Resume => AGENT_METHOD_NAMES.session_resume,
            RestoreMethod::Load => AGENT_METHOD_NAMES.session_load,
            RestoreMethod::Fork => AGENT_METHOD_NAMES.session_fork,
        }
    }
}

/// Why a new session was created instead of restoring one.
#[derive(Debug, Clone, PartialEq)]
pub enum NewReason {
    /// Nothing to restore: no token, or the agent does not restore natively.
    NothingToRestore,
    /// The restore was proven impossible; the saved identity is dropped.
    FellBack { failure: RestoreFailure, detail: String },
}

/// How the ladder ended.
#[derive(Debug, Clone, PartialEq)]
pub enum LadderOutcome {
    Restored {
        method: RestoreMethod,
        session_id: String,
        /// The agent's answer (its modes and configuration options, when it sends them).
        answer: Value,
    },
    New {
        session_id: String,
        reason: NewReason,
        /// The agent's answer to `session/new`.
        answer: Value,
    },
    /// The restore failed in a way that does not prove the session is gone: keep the token.
    Preserved { failure: RestoreFailure, detail: String },
}

/// The first rung for an agent with these capabilities, or None when it can restore nothing:
/// the preferred request where the agent advertises it, else the other one.
pub fn first_rung(caps: AgentCapabilities, prefer: RestoreWith) -> Option<RestoreMethod> {
    match prefer {
        RestoreWith::Load if caps.load_session => Some(RestoreMethod::Load),
        _ if caps.resume_session => Some(RestoreMethod::Resume),
        _ if caps.load_session => Some(RestoreMethod::Load),
        _ => None,
    }
}

/// The rung after a failed one, or None when the ladder ends there: only a preferred request
/// the agent does not implement after all (-32601) is followed by the other one.
pub fn next_rung(
    caps: AgentCapabilities,
    prefer: RestoreWith,
    failed: RestoreMethod,
    failure: RestoreFailure,
) -> Option<RestoreMethod> {
    match (prefer, failed, failure) {
        (RestoreWith::Resume, RestoreMethod::Resume, RestoreFailure::Unsupported) if caps.load_session => {
            Some(RestoreMethod::Load)
        }
        (RestoreWith::Load, RestoreMethod::Load, RestoreFailure::Unsupported) if caps.resume_session => {
            Some(RestoreMethod::Resume)
        }
        _ => None,
    }
}

/// Hooks the ladder calls around requests, so the caller can route and suppress replay.
pub trait RestoreHooks {
    /// Called before `session/load`/`session/resume` is sent: replay that arrives from now on
    /// must not be stored a second time.
    fn before_restore(&self, method: RestoreMethod);
}

/// The new session's id and the agent's whole answer.
async fn new_session(
    acp: &AcpConnection,
    place: &SessionPlace,
    timeout: Duration,
) -> Result<(String, Value), CallError> {
    let Outgoing { method, params } = outgoing::new_session(place);
    let result = acp.request(method, params, Some(timeout)).await?;
    let id = result
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| CallError::Rpc(RpcError::internal("session/new answered without a sessionId")))?;
    Ok((id, result))
}

/// Runs the ladder. `token` is the saved ACP session id (None for a fresh start); `native`
/// is the agent's `native_session_resume`, `prefer` its `restore_with`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    acp: &AcpConnection,
    caps: AgentCapabilities,
    native: bool,
    prefer: RestoreWith,
    token: Option<&str>,
    place: &SessionPlace,
    timeout: Duration,
    hooks: &(dyn RestoreHooks + Sync),
) -> Result<LadderOutcome, CallError> {
    let Some(token) = token.filter(|t| native && !t.is_empty()) else {
        let (session_id, answer) = new_session(acp, place, timeout).await?;
        return Ok(LadderOutcome::New { session_id, reason: NewReason::NothingToRestore, answer });
    };
    let mut rung = first_rung(caps, prefer);
    let mut last =
        (RestoreFailure::Unsupported, "the agent advertises neither session/resume nor session/load".to_string());
    while let Some(method) = rung {
        hooks.before_restore(method);
        let Outgoing { method: name, params } = method.request(token, place);
        match acp.request(name, params, Some(timeout)).await {
            Ok(answer) => return Ok(LadderOutcome::Restored { method, session_id: token.to_string(), answer }),
            Err(error) => {
                let failure = classify(&error);
                tracing::info!(method = method.acp_method(), ?failure, %error, "restore attempt failed");
                last = (failure, format!("{}: {error}", method.acp_method()));
                if !failure.allows_fallback() {
                    return Ok(LadderOutcome::Preserved { failure, detail: last.1 });
                }
                rung = next_rung(caps, prefer, method, failure);
            }
        }
    }
    let (session_id, answer) = new_session(acp, place, timeout).await?;
    Ok(LadderOutcome::New { session_id, reason: NewReason::FellBack { failure: last.0, detail: last.1 }, answer })
}

/// The agent session of a fork (`task.session.fork`): `session/fork` of the source's agent
/// session where the agent advertises it (an unstable ACP method), otherwise a new session —
/// the caller then injects the recorded history, as after any start that restored nothing.
/// A refused fork falls back to a new session too: the fork loses nothing that way, since its
/// conversation is injected.
pub async fn fork(
    acp: &AcpConnection,
    caps: AgentCapabilities,
    source: Option<&str>,
    place: &SessionPlace,
    timeout: Duration,
) -> Result<LadderOutcome, CallError> {
    let reason = match source.filter(|s| !s.is_empty()) {
        Some(source) if caps.fork_session => {
            let Outgoing { method, params } = outgoing::fork_session(source, place);
            match acp.request(method, params, Some(timeout)).await {
                Ok(result) => match result.get("sessionId").and_then(Value::as_str) {
                    Some(id) => {
                        let session_id = id.to_string();
                        return Ok(LadderOutcome::Restored { method: RestoreMethod::Fork, session_id, answer: result });
                    }
                    None => NewReason::FellBack {
                        failure: RestoreFailure::Inconclusive,
                        detail: "session/fork answered without a sessionId".into(),
                    },
                },
                // The agent went away: a new session could not be asked for either.
                Err(error @ CallError::Transport(_)) => return Err(error),
                Err(error) => {
                    let failure = classify(&error);
                    tracing::info!(?failure, %error, "session/fork failed; starting a new agent session");
                    NewReason::FellBack { failure, detail: format!("session/fork: {error}") }
                }
            }
        }
        _ => NewReason::NothingToRestore,
    };
    let (session_id, answer) = new_session(acp, place, timeout).await?;
    Ok(LadderOutcome::New { session_id, reason, answer })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_restore_method_names_the_method_of_its_request() {
        for method in [RestoreMethod::Resume, RestoreMethod::Load, RestoreMethod::Fork] {
            assert_eq!(method.request("s1", &SessionPlace::bare("/w")).method, method.acp_method());
        }
    }

    fn rpc(code: i64, message: &str, data: Option<Value>) -> RpcError {
        RpcError { code, message: message.into(), data }
    }

    /// The unknown-session answers of real agents (docs/ACP.md, 'Real agents'), and neighbours.
    #[test]
    fn classification_matches_real_agents() {
        let cases = [
            (
                "codex-acp 0.16",
                rpc(-32002, "Resource not found", Some(json!({"uri": "x"}))),
                RestoreFailure::UnknownSession,
            ),
            (
                "fast-agent",
                rpc(-32002, "Session not found", Some(json!({"sessionId": "x"}))),
                RestoreFailure::UnknownSession,
            ),
            ("python sdk", rpc(-32002, "Resource not found", None), RestoreFailure::UnknownSession),
            (
                "claude-agent-acp",
                rpc(
                    -32603,
                    "Internal error",
                    Some(json!({"details": "--resume requires a valid session ID or session title"})),
                ),
                RestoreFailure::UnknownSession,
            ),
            ("opencode", rpc(-32603, "OpenCode service failure", None), RestoreFailure::Inconclusive),
            (
                "gemini load",
                rpc(-32603, "No previous sessions found for this project.", None),
                RestoreFailure::UnknownSession,
            ),
            ("codex-acp 2.6", rpc(-32603, "invalid session id", None), RestoreFailure::UnknownSession),
            ("mistral-vibe", rpc(-32602, "Session not found: x", None), RestoreFailure::UnknownSession),
            ("bare -32602", rpc(-32602, "Invalid params", None), RestoreFailure::Inconclusive),
            ("bare -32603", rpc(-32603, "Internal error", None), RestoreFailure::Inconclusive),
            (
                "gemini resume",
                rpc(-32601, "Method not found", Some(json!({"method": "session/resume"}))),
                RestoreFailure::Unsupported,
            ),
            ("auth", rpc(-32000, "Authentication required", None), RestoreFailure::Auth),
            ("cancelled", rpc(-32800, "Request cancelled", None), RestoreFailure::Cancelled),
            ("other", rpc(-1, "weird", None), RestoreFailure::Inconclusive),
        ];
        for (agent, error, expected) in cases {
            assert_eq!(classify_rpc(&error), expected, "{agent}: {error}");
        }
        assert_eq!(classify(&CallError::Transport("eof".into())), RestoreFailure::Transport);
        assert_eq!(
            classify(&CallError::Timeout { method: "session/load".into(), after: Duration::from_secs(1) }),
            RestoreFailure::Timeout
        );
    }

    #[test]
    fn only_proof_of_loss_allows_a_new_session() {
        use RestoreFailure::*;
        for failure in [Unsupported, UnknownSession] {
            assert!(failure.allows_fallback());
        }
        for failure in [Transport, Auth, Cancelled, Timeout, Inconclusive] {
            assert!(!failure.allows_fallback(), "{failure:?} must keep the token");
        }
    }

    #[test]
    fn ladder_rungs_follow_the_advertisement() {
        let both =
            AgentCapabilities { load_session: true, resume_session: true, fork_session: false, ..Default::default() };
        let resume_only =
            AgentCapabilities { load_session: false, resume_session: true, fork_session: false, ..Default::default() };
        let load_only =
            AgentCapabilities { load_session: true, resume_session: false, fork_session: false, ..Default::default() };
        let (resume, load) = (RestoreWith::Resume, RestoreWith::Load);
        assert_eq!(first_rung(both, resume), Some(RestoreMethod::Resume));
        assert_eq!(first_rung(load_only, resume), Some(RestoreMethod::Load));
        assert_eq!(first_rung(AgentCapabilities::default(), resume), None);
        assert_eq!(
            next_rung(both, resume, RestoreMethod::Resume, RestoreFailure::Unsupported),
            Some(RestoreMethod::Load)
        );
        assert_eq!(next_rung(resume_only, resume, RestoreMethod::Resume, RestoreFailure::Unsupported), None);
        assert_eq!(
            next_rung(both, resume, RestoreMethod::Resume, RestoreFailure::UnknownSession),
            None,
            "an unknown session is not retried with load"
        );
        assert_eq!(next_rung(both, resume, RestoreMethod::Load, RestoreFailure::Unsupported), None);

        // restore_with = "load": load first where advertised, resume after a -32601.
        assert_eq!(first_rung(both, load), Some(RestoreMethod::Load));
        assert_eq!(first_rung(resume_only, load), Some(RestoreMethod::Resume));
        assert_eq!(first_rung(AgentCapabilities::default(), load), None);
        assert_eq!(
            next_rung(both, load, RestoreMethod::Load, RestoreFailure::Unsupported),
            Some(RestoreMethod::Resume)
        );
        assert_eq!(next_rung(both, load, RestoreMethod::Load, RestoreFailure::UnknownSession), None);
        assert_eq!(next_rung(both, load, RestoreMethod::Resume, RestoreFailure::Unsupported), None);
    }
}
