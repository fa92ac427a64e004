//! The frontend auto-resume (docs/RESUME.md, 'Glossary'; docs/PROTOCOL.md §8, 'Auto-resume
//! recipe'): when a session is opened, ask `task.session.status`; if
//! `needs_resume && is_resumable`, send `task.session.resume`, at most once per selection.
//! Whether a session needs resuming is the server's answer, never inferred here.
//!
//! A selection outlives what its attempt was about, so the attempt is re-armed when
//! the agent is lost again while the session stays open: on a new connection (the server
//! restarted: once per selection and connection), and when `session.state_changed` sets
//! `needs_resume` again after the agent had become ready (once per such edge). A launch that
//! fails goes STARTING → needs_resume without ever being ready, so a failing resume is not
//! retried in a loop; and an agent that dies each time soon after it is ready is resumed again
//! only a few times per connection.

use baton_protocol::{SessionState, SessionStatus, StateChanged};

/// Re-arms by `needs_resume` edges per selection and connection.
const MAX_EDGE_REARMS: u8 = 3;

#[derive(Debug, Clone, Default)]
pub struct AutoResume {
    selected: Option<String>,
    attempted: bool,
    /// The agent was seen ready (attached, not starting) since the last attempt.
    seen_ready: bool,
    edge_rearms: u8,
}

impl AutoResume {
    /// Records the selected session; choosing another one allows one more attempt.
    pub fn select(&mut self, session_id: &str) {
        if self.selected.as_deref() != Some(session_id) {
            *self = AutoResume { selected: Some(session_id.to_string()), ..AutoResume::default() };
        }
    }

    pub fn clear(&mut self) {
        *self = AutoResume::default();
    }

    /// A new connection: whatever the last attempt achieved may be gone with the old server.
    pub fn on_new_connection(&mut self) {
        self.attempted = false;
        self.edge_rearms = 0;
    }

    /// Follows the selected session's state. True when its status should be asked again to
    /// decide on a resume: `needs_resume` became true and there is an attempt to spend.
    pub fn on_state_changed(&mut self, change: &StateChanged) -> bool {
        if self.selected.as_deref() != Some(change.session_id.as_str()) {
            return false;
        }
        if !change.needs_resume {
            if change.state.is_active() && change.state != SessionState::Starting {
                self.seen_ready = true;
            }
            return false;
        }
        if self.attempted && self.seen_ready && self.edge_rearms < MAX_EDGE_REARMS {
            // The agent we resumed came up and was lost again: a new edge.
            self.attempted = false;
            self.edge_rearms += 1;
        }
        self.seen_ready = false;
        !self.attempted
    }

    /// True when `status` calls for a resume now. The attempt is counted at decision time, so a
    /// second status answer for the same selection (a refresh) cannot resume twice.
    pub fn should_resume(&mut self, status: &SessionStatus) -> bool {
        if self.selected.as_deref() != Some(status.session_id.as_str()) || self.attempted {
            return false;
        }
        if status.needs_resume && status.is_resumable {
            self.attempted = true;
            self.seen_ready = false;
            return true;
        }
        false
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use baton_protocol::{ResumeReason, TaskState};

    use super::*;

    pub(crate) fn status(session_id: &str, needs_resume: bool, is_resumable: bool) -> SessionStatus {
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
            attention: None,
            attention_since: None,
            change_seq: 0,
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

    pub(crate) fn change(session_id: &str, state: SessionState, needs_resume: bool) -> StateChanged {
        StateChanged {
            session_id: session_id.into(),
            task_id: "t-1".into(),
            state,
            previous_state: None,
            task_state: TaskState::Review,
            task_title: "Task".into(),
            last_seq: 0,
            updated_at: "2025-06-02T14:03:12.004Z".into(),
            needs_resume,
            attention: None,
            attention_since: None,
            change_seq: 0,
        }
    }

    #[test]
    fn a_new_connection_allows_one_more_attempt() {
        let mut auto = AutoResume::default();
        auto.select("s-1");
        assert!(auto.should_resume(&status("s-1", true, true)));
        auto.on_new_connection();
        assert!(auto.should_resume(&status("s-1", true, true)));
        assert!(!auto.should_resume(&status("s-1", true, true)));
    }

    #[test]
    fn losing_the_agent_after_it_was_ready_rearms_but_a_failed_launch_does_not() {
        let mut auto = AutoResume::default();
        auto.select("s-1");
        assert!(auto.should_resume(&status("s-1", true, true)));
        // The launch fails: STARTING, then back to needing a resume, never ready.
        assert!(!auto.on_state_changed(&change("s-1", SessionState::Starting, false)));
        assert!(!auto.on_state_changed(&change("s-1", SessionState::WaitingForInput, true)));
        assert!(!auto.should_resume(&status("s-1", true, true)));

        // Another connection's attempt succeeds; later the agent dies.
        auto.on_new_connection();
        assert!(auto.should_resume(&status("s-1", true, true)));
        assert!(!auto.on_state_changed(&change("s-1", SessionState::Starting, false)));
        assert!(!auto.on_state_changed(&change("s-1", SessionState::WaitingForInput, false)));
        assert!(auto.on_state_changed(&change("s-1", SessionState::WaitingForInput, true)));
        assert!(auto.should_resume(&status("s-1", true, true)));
        // Other sessions' changes are not ours to act on.
        assert!(!auto.on_state_changed(&change("s-2", SessionState::WaitingForInput, true)));
    }

    #[test]
    fn an_agent_that_keeps_dying_once_ready_is_resumed_only_a_few_times() {
        let mut auto = AutoResume::default();
        auto.select("s-1");
        let mut resumes = 0;
        for _ in 0..10 {
            if auto.should_resume(&status("s-1", true, true)) {
                resumes += 1;
            }
            auto.on_state_changed(&change("s-1", SessionState::WaitingForInput, false));
            auto.on_state_changed(&change("s-1", SessionState::WaitingForInput, true));
        }
        assert_eq!(resumes, 1 + MAX_EDGE_REARMS as usize);
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
