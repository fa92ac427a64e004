//! `F`: forks the highlighted session, after a question: a new session of its task that starts
//! from the conversation so far (`task.session.fork`). The fork is opened; the list and its
//! header say where it came from (`forked_from`).

use baton_protocol::SessionInfo;

use crate::command::Request;
use crate::sessions::label;

use super::{App, Confirmation, Overlay};

impl App {
    pub(super) fn ask_fork(&mut self) {
        let Some(row) = self.sessions.cursor() else {
            self.flash("no session selected", true);
            return;
        };
        let (session_id, label) = (row.status.session_id.clone(), label(row));
        self.overlay = Some(Overlay::Confirm(Confirmation::Fork { session_id, label }));
    }

    pub(super) fn fork_confirmed(&mut self, session_id: String, label: String) {
        self.flash(format!("forking {label}…"), false);
        self.send(Request::Fork { session_id });
    }

    pub(super) fn on_forked(&mut self, session: SessionInfo) {
        let session_id = session.status.session_id.clone();
        let origin =
            session.forked_from.as_ref().map(|origin| crate::sessions::short_id(&origin.session_id).to_string());
        let from = origin.map(|o| format!(" from {o}")).unwrap_or_default();
        self.flash_while_starting(format!("forked{from}: {} (its agent is starting)", label(&session)), &session_id);
        self.sessions.upsert(session);
        self.open_session(&session_id);
        self.schedule_list_refresh();
    }
}

/// "fork of 8b1e4d2c": where a forked session came from; `None` for one that is not a fork.
pub fn fork_note(row: &SessionInfo) -> Option<String> {
    let origin = row.forked_from.as_ref()?;
    Some(format!("fork of {}", crate::sessions::short_id(&origin.session_id)))
}
