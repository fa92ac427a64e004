//! Resumes this client asked for (a key or the auto-resume), followed until the agent is ready
//! or the resume failed, so that a failure is shown with why, and with the keys that retry it
//! (`r`) or start a fresh agent session that is given the conversation (`R`).
//!
//! A resume can fail two ways: `task.session.resume` itself fails (the agent cannot be started),
//! or it is accepted and the launch fails later; the session then leaves STARTING still needing
//! a resume (or FAILED), and `task.session.status` says why in `last_error`.

use std::collections::{HashMap, HashSet};

use baton_protocol::{SessionState, SessionStatus, StateChanged};

use crate::command::Request;

use super::App;

/// What became of a resume, for the view.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResumeWatch {
    /// Asked for, and the agent is not ready yet.
    pending: HashSet<String>,
    /// The last resume failed: why, once known.
    failed: HashMap<String, Option<String>>,
}

impl App {
    /// A resume of this session is about to be sent.
    pub(super) fn resume_sent(&mut self, session_id: &str) {
        self.resumes.pending.insert(session_id.to_string());
        self.resumes.failed.remove(session_id);
    }

    /// `task.session.resume` failed: `why` is the server's answer.
    pub(super) fn resume_request_failed(&mut self, session_id: &str, why: String) {
        self.resumes.pending.remove(session_id);
        self.resumes.failed.insert(session_id.to_string(), Some(why));
    }

    /// The server says an agent is attached already, or it is being started.
    pub(super) fn resume_answered(&mut self, session_id: &str, launched: bool) {
        if !launched {
            self.resumes.pending.remove(session_id);
        }
    }

    /// Follows a resumed session's state: ready ends the watch; back to needing a resume (or
    /// FAILED) is a failure, whose reason the status gives.
    pub(super) fn resume_state_changed(&mut self, change: &StateChanged) {
        let id = change.session_id.as_str();
        if !self.resumes.pending.contains(id) || change.state == SessionState::Starting {
            return;
        }
        self.resumes.pending.remove(id);
        if change.needs_resume || change.state == SessionState::Failed {
            self.resumes.failed.insert(id.to_string(), None);
            self.send(Request::SessionStatus { session_id: id.to_string() });
        } else {
            self.resumes.failed.remove(id);
        }
    }

    /// A status answer gives the reason of a failure, or shows the session recovered since.
    pub(super) fn resume_status(&mut self, status: &SessionStatus) {
        let Some(why) = self.resumes.failed.get_mut(&status.session_id) else {
            return;
        };
        let still_failed = status.needs_resume || status.state == SessionState::Failed;
        if !still_failed {
            self.resumes.failed.remove(&status.session_id);
        } else if why.is_none() {
            let reason = status.last_error.clone();
            *why = Some(reason.unwrap_or_else(|| "the agent did not start (the server gave no reason)".into()));
        }
    }

    /// A resume of the session was asked for and the agent is not ready yet.
    pub fn is_resuming(&self, session_id: &str) -> bool {
        self.resumes.pending.contains(session_id)
    }

    /// The last resume of the session failed: `Some(why)`, where why is `None` until the server
    /// said.
    pub fn resume_failure(&self, session_id: &str) -> Option<Option<&str>> {
        self.resumes.failed.get(session_id).map(Option::as_deref)
    }
}
