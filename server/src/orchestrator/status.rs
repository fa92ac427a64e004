//! GetTaskSessionStatus (seed, "Entry Points" §2): whether a session needs resuming and why.

use baton_protocol::{ResumeReason, SessionState};

use crate::store::{ExecutorRecord, SessionRecord};

/// What this server knows about the session's agent right now (in memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    /// An agent is attached and ready.
    Running,
    /// An agent is being launched (initialize, restore) for the session.
    Starting,
    /// No agent process for the session.
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumeVerdict {
    pub needs_resume: bool,
    pub is_resumable: bool,
    pub reason: ResumeReason,
}

/// The seed's four cases, plus terminal and never-started sessions.
///
/// | case | condition                                   | needs_resume | reason                          |
/// |------|---------------------------------------------|--------------|---------------------------------|
/// | 1    | agent running                               | false        | agent_running                   |
/// | 2    | agent not running yet but being launched    | false        | agent_starting                  |
/// | 3    | resume token + active state                 | true         | agent_not_running               |
/// | 4    | no token, executor record + active state    | true         | agent_not_running_fresh_start   |
///
/// Terminal states block resume. An active session that lost even its executor record is
/// treated as case 4: it can always be started again, nothing stays stuck.
pub fn evaluate(session: &SessionRecord, executor: Option<&ExecutorRecord>, live: Live) -> ResumeVerdict {
    let verdict = |needs_resume, is_resumable, reason| ResumeVerdict { needs_resume, is_resumable, reason };
    if session.state.is_terminal() {
        return verdict(false, false, ResumeReason::TerminalState);
    }
    match live {
        Live::Running => return verdict(false, false, ResumeReason::AgentRunning),
        Live::Starting => return verdict(false, false, ResumeReason::AgentStarting),
        Live::None => {}
    }
    if session.state == SessionState::Created {
        // Never started: it can be launched (by resume or a message), but nothing was lost.
        return verdict(false, true, ResumeReason::NotStarted);
    }
    let has_token = executor.and_then(|e| e.resume_token.as_deref()).is_some_and(|t| !t.is_empty());
    if has_token {
        verdict(true, true, ResumeReason::AgentNotRunning)
    } else {
        verdict(true, true, ResumeReason::AgentNotRunningFreshStart)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use baton_protocol::TaskState;

    pub(crate) fn session(state: SessionState) -> SessionRecord {
        SessionRecord {
            id: "s".into(),
            task_id: "t".into(),
            agent: "mock".into(),
            state,
            last_error: None,
            created_at: String::new(),
            updated_at: String::new(),
            last_seq: 0,
            turn_open: false,
            task_title: "t".into(),
            task_description: "d".into(),
            task_state: TaskState::Review,
            workdir: "/tmp".into(),
            task_archived: false,
            change_seq: 0,
            attention: None,
            attention_since: None,
        }
    }

    pub(crate) fn executor(token: Option<&str>) -> ExecutorRecord {
        ExecutorRecord {
            session_id: "s".into(),
            resume_token: token.map(Into::into),
            status: "stopped".into(),
            ..Default::default()
        }
    }

    #[test]
    fn status_case_1_agent_running() {
        let v = evaluate(&session(SessionState::WaitingForInput), Some(&executor(Some("tok"))), Live::Running);
        assert_eq!(v, ResumeVerdict { needs_resume: false, is_resumable: false, reason: ResumeReason::AgentRunning });
    }

    #[test]
    fn status_case_2_agent_starting() {
        let v = evaluate(&session(SessionState::Starting), Some(&executor(Some("tok"))), Live::Starting);
        assert_eq!(v, ResumeVerdict { needs_resume: false, is_resumable: false, reason: ResumeReason::AgentStarting });
    }

    #[test]
    fn status_case_3_token_and_active_state() {
        for state in [SessionState::WaitingForInput, SessionState::Running, SessionState::Starting] {
            let v = evaluate(&session(state), Some(&executor(Some("tok"))), Live::None);
            assert_eq!(
                v,
                ResumeVerdict { needs_resume: true, is_resumable: true, reason: ResumeReason::AgentNotRunning },
                "{state}"
            );
        }
    }

    #[test]
    fn status_case_4_no_token_but_executor() {
        for state in [SessionState::WaitingForInput, SessionState::Running, SessionState::Starting] {
            let v = evaluate(&session(state), Some(&executor(None)), Live::None);
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
        let empty_token = evaluate(&session(SessionState::Running), Some(&executor(Some(""))), Live::None);
        assert_eq!(empty_token.reason, ResumeReason::AgentNotRunningFreshStart);
    }

    #[test]
    fn terminal_states_block_resume() {
        for state in [SessionState::Completed, SessionState::Failed, SessionState::Cancelled] {
            for live in [Live::None, Live::Running] {
                let v = evaluate(&session(state), Some(&executor(Some("tok"))), live);
                assert_eq!(
                    v,
                    ResumeVerdict { needs_resume: false, is_resumable: false, reason: ResumeReason::TerminalState }
                );
            }
        }
    }

    #[test]
    fn never_started_sessions_need_nothing() {
        let v = evaluate(&session(SessionState::Created), None, Live::None);
        assert_eq!(v, ResumeVerdict { needs_resume: false, is_resumable: true, reason: ResumeReason::NotStarted });
    }
}
