//! Why a session needs the user (docs/PROTOCOL.md §3, 'What needs the user'): the one place the
//! `attention` of a session row and of `session.state_changed` is derived. The store records the
//! reason with since-when (`task_sessions.attention`, `attention_since`) whenever the facts
//! change: a transition, a permission asked or answered, a restart. A leaf module: the store and
//! the orchestrator both use it.

use baton_protocol::{Attention, SessionState};

/// The facts the reason is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionFacts {
    /// The session's stored state (after the change, for a transition).
    pub state: SessionState,
    /// The server's verdict: the session needs resuming (`session_status`/`status::evaluate`).
    pub needs_resume: bool,
    /// The session's agent waits for the answer to a permission request.
    pub permission_pending: bool,
    /// The session has a `last_error`: with state `CREATED`, its launch failed before the agent
    /// ever started ("failed to start": an authentication the user must set up, a missing
    /// binary...), which nothing will retry by itself.
    pub has_error: bool,
}

impl AttentionFacts {
    /// The facts with no permission request pending.
    pub fn new(state: SessionState, needs_resume: bool, has_error: bool) -> AttentionFacts {
        AttentionFacts { state, needs_resume, permission_pending: false, has_error }
    }
}

/// Why the session needs the user, most urgent first; `None` when it needs nothing.
///
/// | facts                                    | attention    |
/// |------------------------------------------|--------------|
/// | state `FAILED`                           | `failed`     |
/// | state `CREATED` with a `last_error`      | `failed`     |
/// | a permission request waits for an answer | `permission` |
/// | `needs_resume`                           | `resume`     |
/// | state `WAITING_FOR_INPUT`                | `input`      |
/// | anything else (working, new, finished)   | none         |
pub fn attention(facts: AttentionFacts) -> Option<Attention> {
    let failed_to_start = facts.state == SessionState::Created && facts.has_error;
    if facts.state == SessionState::Failed || failed_to_start {
        return Some(Attention::Failed);
    }
    if facts.state.is_terminal() {
        return None;
    }
    if facts.permission_pending {
        return Some(Attention::Permission);
    }
    if facts.needs_resume {
        return Some(Attention::Resume);
    }
    (facts.state == SessionState::WaitingForInput).then_some(Attention::Input)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(state: SessionState, needs_resume: bool, permission_pending: bool) -> AttentionFacts {
        AttentionFacts { state, needs_resume, permission_pending, has_error: false }
    }

    #[test]
    fn a_session_that_failed_to_start_needs_the_user() {
        let failed_start = AttentionFacts::new(SessionState::Created, false, true);
        assert_eq!(attention(failed_start), Some(Attention::Failed));
        // A new session, and an error left on a session that later ran, are not failures to
        // start.
        assert_eq!(attention(AttentionFacts::new(SessionState::Created, false, false)), None);
        assert_eq!(attention(AttentionFacts::new(SessionState::Running, false, true)), None);
        assert_eq!(attention(AttentionFacts::new(SessionState::WaitingForInput, false, true)), Some(Attention::Input));
    }

    #[test]
    fn a_finished_turn_waits_for_input() {
        assert_eq!(attention(facts(SessionState::WaitingForInput, false, false)), Some(Attention::Input));
    }

    #[test]
    fn a_pending_permission_comes_before_everything_but_failure() {
        assert_eq!(attention(facts(SessionState::Running, false, true)), Some(Attention::Permission));
        assert_eq!(attention(facts(SessionState::WaitingForInput, true, true)), Some(Attention::Permission));
        assert_eq!(attention(facts(SessionState::Failed, false, true)), Some(Attention::Failed));
    }

    #[test]
    fn an_active_session_without_agent_needs_resume() {
        for state in [SessionState::WaitingForInput, SessionState::Running, SessionState::Starting] {
            assert_eq!(attention(facts(state, true, false)), Some(Attention::Resume), "{state}");
        }
    }

    #[test]
    fn a_failed_session_needs_the_user() {
        assert_eq!(attention(facts(SessionState::Failed, false, false)), Some(Attention::Failed));
    }

    #[test]
    fn working_new_and_finished_sessions_need_nothing() {
        for state in [
            SessionState::Created,
            SessionState::Starting,
            SessionState::Running,
            SessionState::Completed,
            SessionState::Cancelled,
        ] {
            assert_eq!(attention(facts(state, false, false)), None, "{state}");
        }
        // A stale `needs_resume` never makes a finished session need the user.
        assert_eq!(attention(facts(SessionState::Completed, true, false)), None);
    }
}
