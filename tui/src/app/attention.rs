//! What needs the user: the count in the status bar, the jump to the session waiting
//! longest, the list of only those, and the terminal alert when a session the user is not
//! looking at starts needing them.

use baton_protocol::{Attention, StateChanged};

use super::App;
use crate::alerts::{alert_bytes, Alert, AlertMode};
use crate::command::Command;

#[derive(Debug, Clone, Default)]
pub struct NeedsYou {
    /// The server-wide count from `attention.changed`; `None` until one arrives (then the
    /// rows held are counted).
    pub(crate) server_count: Option<u64>,
    pub(crate) alerts: AlertMode,
}

impl App {
    /// How alerts reach the user (`--alerts`).
    pub fn set_alerts(&mut self, mode: AlertMode) {
        self.needs_you.alerts = mode;
    }

    /// Sessions that need the user: the server's count (it covers sessions not loaded), but
    /// never fewer than the rows held say: a row's change arrives just before the count's.
    pub fn needs_you_count(&self) -> u64 {
        let held = self.sessions.needing_you() as u64;
        self.needs_you.server_count.map_or(held, |count| count.max(held))
    }

    /// What the status bar counts: sessions that ask something (a permission, a failure, a
    /// resume), finished turns not looked at yet, and sessions needing the user that are not
    /// loaded (the server counts them, their reason is not known here).
    pub fn needs_you_split(&self) -> (u64, u64, u64) {
        let (asks, turns) = self.sessions.needs();
        let unloaded = self.needs_you_count().saturating_sub(self.sessions.needing_you() as u64);
        (asks as u64, turns as u64, unloaded)
    }

    /// The session on screen for a moment is seen: its finished turn stops counting.
    pub(crate) fn look_at_opened(&mut self, now: std::time::Instant) {
        let (Some(session_id), Some(at)) = (self.opened.clone(), self.opened_at) else { return };
        let on_screen = !self.is_narrow() || self.narrow_shows_session;
        if on_screen && now.saturating_duration_since(at) >= super::SEEN_AFTER && self.sessions.mark_seen(&session_id) {
            self.dirty = true;
        }
    }

    /// `w`: opens the session that needs the user after the one on screen, oldest first.
    pub(crate) fn open_next_needing_you(&mut self) {
        match self.sessions.next_needing_you(self.opened.as_deref()) {
            Some(session_id) => {
                self.sessions.set_cursor(&session_id);
                self.open_cursor_session();
                self.narrow_shows_session = self.opened.is_some();
            }
            None => self.flash("nothing needs you", false),
        }
    }

    /// `W`: the list shows only the sessions that need the user, or all again.
    pub(crate) fn toggle_needs_you_only(&mut self) {
        let only = !self.sessions.needs_you_only();
        self.sessions.set_needs_you_only(only);
        let text = if only { "showing only the sessions that need you (W: all)" } else { "showing every session" };
        self.flash(text, false);
    }

    /// One alert per transition: the session now needs the user for a reason it did not have
    /// (as far as this client knew), and it is not the one on screen.
    pub(crate) fn alert_if_newly_needed(&mut self, before: Option<Option<Attention>>, change: &StateChanged) {
        let Some(reason) = change.attention else { return };
        if before == Some(Some(reason)) || self.opened.as_deref() == Some(change.session_id.as_str()) {
            return;
        }
        let bytes =
            alert_bytes(&Alert::new(&change.task_title, reason), self.needs_you.alerts, self.clipboard.multiplexer);
        if !bytes.is_empty() {
            self.commands.push(Command::Alert(bytes));
        }
    }
}
