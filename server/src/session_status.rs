//! GetTaskSessionStatus (see docs/RESUME.md, 'Status cases'): whether a session needs resuming
//! and why.
//!
//! The one place `needs_resume` is derived. Every reader (`task.session.status`, the list rows,
//! the states sent on subscribe) and every writer (the `session.state_changed` notification of
//! each transition) asks [`evaluate`], so a notification and the next status never disagree.
//! A leaf module: the store and the orchestrator both use it.

use baton_protocol::{ResumeReason, SessionState};

/// What this server knows about the session's agent right now (in memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    /// An agent is attached and ready.
    Running,
    /// An agent is being launched (initialize, restore) for the session.
    Starting,
    /// No agent process for the session.
    None,
    /// The server is reconnecting to an agent that outlived the previous server (startup
    /// recovery of a Docker or ssh agent, in the background).
    Reconnecting,
}

impl Live {
    /// Every value, for tables and tests.
    pub const ALL: [Live; 4] = [Live::Running, Live::Starting, Live::None, Live::Reconnecting];
}

/// The facts the verdict is derived from: the stored session state and resume token, and
/// whether an agent runs for the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionFacts {
    /// The session's stored state (after the change, for a transition).
    pub state: SessionState,
    /// The executor record holds a non-empty resume token (see [`has_resume_token`]).
    pub has_resume_token: bool,
    /// The session's agent (after the change, for a transition).
    pub agent: Live,
}

/// `has_resume_token` of [`SessionFacts`] from the executor record's token column: an empty
/// token is no token.
pub fn has_resume_token(token: Option<&str>) -> bool {
    token.is_some_and(|t| !t.is_empty())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeVerdict {
    pub needs_resume: bool,
    pub is_resumable: bool,
    pub reason: ResumeReason,
}

/// The four status cases (docs/RESUME.md, 'Status cases'), plus terminal and never-started
/// sessions.
///
/// | case | condition                                   | needs_resume | reason                          |
/// |------|---------------------------------------------|--------------|---------------------------------|
/// | 1    | agent running                               | false        | agent_running                   |
/// | 2    | agent not running yet but being launched    | false        | agent_starting                  |
/// | 2b   | reconnecting to an agent of the previous run| false        | agent_reconnecting              |
/// | 3    | resume token + active state                 | true         | agent_not_running               |
/// | 4    | no token, executor record + active state    | true         | agent_not_running_fresh_start   |
///
/// Terminal states block resume. An active session that lost even its executor record is
/// treated as case 4: it can always be started again, nothing stays stuck.
pub fn evaluate(facts: SessionFacts) -> ResumeVerdict {
    let verdict = |needs_resume, is_resumable, reason| ResumeVerdict { needs_resume, is_resumable, reason };
    if facts.state.is_terminal() {
        return verdict(false, false, ResumeReason::TerminalState);
    }
    match facts.agent {
        Live::Running => return verdict(false, false, ResumeReason::AgentRunning),
        Live::Starting => return verdict(false, false, ResumeReason::AgentStarting),
        Live::Reconnecting => return verdict(false, false, ResumeReason::AgentReconnecting),
        Live::None => {}
    }
    if facts.state == SessionState::Created {
        // Never started: it can be launched (by resume or a message), but nothing was lost.
        return verdict(false, true, ResumeReason::NotStarted);
    }
    if facts.has_resume_token {
        verdict(true, true, ResumeReason::AgentNotRunning)
    } else {
        verdict(true, true, ResumeReason::AgentNotRunningFreshStart)
    }
}

/// `needs_resume` alone, for the state-change notification.
pub fn needs_resume(facts: SessionFacts) -> bool {
    evaluate(facts).needs_resume
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(state: SessionState, has_resume_token: bool, agent: Live) -> SessionFacts {
        SessionFacts { state, has_resume_token, agent }
    }

    #[test]
    fn status_case_1_agent_running() {
        let v = evaluate(facts(SessionState::WaitingForInput, true, Live::Running));
        assert_eq!(v, ResumeVerdict { needs_resume: false, is_resumable: false, reason: ResumeReason::AgentRunning });
    }

    #[test]
    fn status_case_2_agent_starting() {
        let v = evaluate(facts(SessionState::Starting, true, Live::Starting));
        assert_eq!(v, ResumeVerdict { needs_resume: false, is_resumable: false, reason: ResumeReason::AgentStarting });
    }

    #[test]
    fn status_case_3_token_and_active_state() {
        for state in [SessionState::WaitingForInput, SessionState::Running, SessionState::Starting] {
            let v = evaluate(facts(state, true, Live::None));
            assert_eq!(
                v,
                ResumeVerdict { needs_resume: true, is_resumable: true, reason: ResumeReason::AgentNotRunning },
                "{state}"
            );
        }
    }

    #[test]
    fn status_case_4_no_token() {
        for state in [SessionState::WaitingForInput, SessionState::Running, SessionState::Starting] {
            let v = evaluate(facts(state, false, Live::None));
            assert_eq!(
                v,
                ResumeVerdict {
                    needs_resume: true,
                    is_resumable: true,
                    reason: ResumeReason::AgentNotRunningFreshStart
                },
                "{state}"
            );
        }
    }

    #[test]
    fn an_empty_token_is_no_token() {
        assert!(!has_resume_token(None));
        assert!(!has_resume_token(Some("")));
        assert!(has_resume_token(Some("tok")));
    }

    #[test]
    fn terminal_states_block_resume() {
        for state in [SessionState::Completed, SessionState::Failed, SessionState::Cancelled] {
            for agent in Live::ALL {
                for token in [false, true] {
                    let v = evaluate(facts(state, token, agent));
                    assert_eq!(
                        v,
                        ResumeVerdict { needs_resume: false, is_resumable: false, reason: ResumeReason::TerminalState }
                    );
                }
            }
        }
    }

    #[test]
    fn never_started_sessions_need_nothing() {
        for token in [false, true] {
            let v = evaluate(facts(SessionState::Created, token, Live::None));
            assert_eq!(v, ResumeVerdict { needs_resume: false, is_resumable: true, reason: ResumeReason::NotStarted });
        }
    }

    /// Every combination of state, token and agent, against the rules of docs/PROTOCOL.md
    /// ("Resume status") stated as properties rather than as the function's own branches.
    #[test]
    fn every_state_token_and_agent_combination_follows_the_rules() {
        let mut seen = std::collections::HashSet::new();
        for &state in SessionState::ALL {
            for agent in Live::ALL {
                for token in [false, true] {
                    let v = evaluate(facts(state, token, agent));
                    let case = format!("{state} token={token} {agent:?}");
                    // Resume is needed exactly when an active session has no agent at all.
                    assert_eq!(v.needs_resume, state.is_active() && agent == Live::None, "{case}");
                    // Resume applies exactly when nothing runs or starts and the session is not over.
                    assert_eq!(v.is_resumable, !state.is_terminal() && agent == Live::None, "{case}");
                    assert!(!v.needs_resume || v.is_resumable, "needing resume implies resumable: {case}");
                    assert_eq!(needs_resume(facts(state, token, agent)), v.needs_resume, "{case}");
                    // The reason names the fact that decided.
                    let expected = if state.is_terminal() {
                        ResumeReason::TerminalState
                    } else if agent == Live::Running {
                        ResumeReason::AgentRunning
                    } else if agent == Live::Starting {
                        ResumeReason::AgentStarting
                    } else if agent == Live::Reconnecting {
                        ResumeReason::AgentReconnecting
                    } else if !state.is_active() {
                        ResumeReason::NotStarted
                    } else if token {
                        ResumeReason::AgentNotRunning
                    } else {
                        ResumeReason::AgentNotRunningFreshStart
                    };
                    assert_eq!(v.reason, expected, "{case}");
                    seen.insert(v.reason);
                }
            }
        }
        assert_eq!(seen.len(), ResumeReason::ALL.len(), "every reason is reachable");
    }
}
