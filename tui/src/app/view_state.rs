//! What the screen showed when `baton` quit, shown again at the next start: the session that was
//! open (opened again once the list has it) and whether thoughts were shown. Kept per server in
//! `DATA_DIR/tui-state.json` by `main`; the app only hands it over and takes it back.

use serde::{Deserialize, Serialize};

use super::App;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewState {
    /// The server it was seen on: another server's sessions are not these.
    pub server: String,
    #[serde(default)]
    pub opened: Option<String>,
    #[serde(default)]
    pub show_thoughts: bool,
}

impl App {
    /// What to keep for the next start.
    pub fn view_state(&self) -> ViewState {
        ViewState { server: self.server_url.clone(), opened: self.opened.clone(), show_thoughts: self.show_thoughts }
    }

    /// The state kept by the last run on this server, if it was this server.
    pub fn restore_view_state(&mut self, state: ViewState) {
        if state.server != self.server_url {
            return;
        }
        self.show_thoughts = state.show_thoughts;
        self.reopen = state.opened;
        self.dirty = true;
    }

    /// The list arrived: the session open at the last quit is opened again, once, if listed.
    pub(super) fn reopen_after_list(&mut self) {
        let Some(session_id) = self.reopen.take() else { return };
        if self.opened.is_none() && self.sessions.get(&session_id).is_some() {
            self.sessions.set_cursor(&session_id);
            self.open_session(&session_id);
        }
    }
}
