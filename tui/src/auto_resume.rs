//! The seed's frontend auto-resume ("Entry Points, 1. Frontend auto-resume"): when a session is
//! opened, ask `task.session.status`; if `needs_resume && is_resumable`, send
//! `task.session.resume`, and only once per selection (Kandev's `hasAttemptedResume` ref).
//! Whether a session needs resuming is the server's answer, never inferred here.

use baton_protocol::SessionStatus;

#[derive(Debug, Clone, Default)]
pub struct AutoResume {
    selected: Option<String>,
    attempted: bool,
}

impl AutoResume {
    /// Records the selected session; choosing another one allows one more attempt.
    pub fn select(&mut self, session_id: &str) {
        if self.selected.as_deref() != Some(session_id) {
            self.selected = Some(session_id.to_string());
            self.attempted = false;
        }
    }

    pub fn clear(&mut self) {
        self.selected = None;
        self.attempted = false;
    }

    /// True when `status` calls for a resume now. The attempt is counted at decision time, so a
    /// second status answer for the same selection (a reconnect, a refresh) cannot resume twice.
    pub fn should_resume(&mut self, status: &SessionStatus) -> bool {
        if self.selected.as_deref() != Some(status.session_id.as_str()) || self.attempted {
            return false;
        }
        if status.needs_resume && status.is_resumable {
            self.attempted = true;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use baton_protocol::{ResumeReason, SessionState, TaskState};

    use super::*;

    fn status(session_id: &str, needs_resume: bool, is_resumable: bool) -> SessionStatus {
        SessionStatus {
            session_id: session_id.into(),
            task_id: "t-1".into(),
            agent: "mock".into(),
            state: SessionState::WaitingForInput,
            task_state: TaskState::Review,
            is_agent_running: !needs_resume,
            is_resumable,
            needs_resume,
            resume_reason: ResumeReason::AgentNotRunning,
            has_resume_token: true,
            last_error: None,
            worktree_path: None,
            agent_pid: None,
        }
    }

    #[test]
    fn resumes_once_per_selection() {
        let mut auto = AutoResume::default();
        auto.select("s-1");
        assert!(auto.should_resume(&status("s-1", true, true)));
        assert!(!auto.should_resume(&status("s-1", true, true)));
        // Opening the same session again is not a new selection.
        auto.select("s-1");
        assert!(!auto.should_resume(&status("s-1", true, true)));
    }

    #[test]
    fn selecting_another_session_allows_a_new_attempt() {
        let mut auto = AutoResume::default();
        auto.select("s-1");
        assert!(auto.should_resume(&status("s-1", true, true)));
        auto.select("s-2");
        auto.select("s-1");
        assert!(auto.should_resume(&status("s-1", true, true)));
    }

    #[test]
    fn does_not_resume_when_not_needed_or_not_resumable() {
        let mut auto = AutoResume::default();
        auto.select("s-1");
        assert!(!auto.should_resume(&status("s-1", false, true)));
        assert!(!auto.should_resume(&status("s-1", true, false)));
        // Neither answer used up the attempt.
        assert!(auto.should_resume(&status("s-1", true, true)));
    }

    #[test]
    fn ignores_the_status_of_a_session_that_is_no_longer_selected() {
        let mut auto = AutoResume::default();
        auto.select("s-2");
        assert!(!auto.should_resume(&status("s-1", true, true)));
        auto.clear();
        assert!(!auto.should_resume(&status("s-2", true, true)));
    }
}
