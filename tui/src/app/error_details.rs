//! The last error in full: the status line cuts a long error to one row and says "E: details";
//! `E` opens it whole in a popup that scrolls.

use super::{App, Overlay};

impl App {
    /// `E`: opens the last error, from its top.
    pub(super) fn show_error(&mut self) {
        if self.last_error.is_none() {
            self.flash("no error to show", false);
            return;
        }
        self.error_scroll = 0;
        self.overlay = Some(Overlay::ErrorDetails);
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
