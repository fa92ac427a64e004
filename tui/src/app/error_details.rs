//! The last error in full: the status line cuts a long error to one row and says "E: details";
//! `E` opens it whole in a popup that scrolls.

use super::{App, Overlay};

impl App {
    /// `E`: opens the last error, from its top.
    pub(super) fn show_error(&mut self) {
        // An error shown in the highlighted session (a failed turn, a failed start) is the one
        // meant when no message of this client's is held: it is shown whole too.
        if self.last_error.is_none() {
            self.last_error = self.session_error();
        }
        if self.last_error.is_none() {
            self.flash("no error to show", false);
            return;
        }
        self.error_scroll = 0;
        self.overlay = Some(Overlay::ErrorDetails);
    }

    /// The last error of the highlighted session: the newest error line of its transcript, else
    /// the server's `last_error` for it.
    fn session_error(&self) -> Option<String> {
        let session_id = self.cursor_session()?;
        let in_transcript = self.transcript(session_id).and_then(|t| {
            t.entries().iter().rev().find_map(|entry| match &entry.body {
                crate::transcript::EntryBody::Error(text) => Some(text.clone()),
                _ => None,
            })
        });
        in_transcript.or_else(|| self.sessions.get(session_id)?.status.last_error.clone())
    }

    /// How far the open overlay is scrolled, when it is one that scrolls.
    pub(super) fn overlay_scroll(&mut self) -> Option<&mut usize> {
        match self.overlay {
            Some(Overlay::Help) => Some(&mut self.help_scroll),
            Some(Overlay::ErrorDetails) => Some(&mut self.error_scroll),
            _ => None,
        }
    }

    /// The last error shown (in full), whether or not it is still on the status line.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}
