//! The messages queued while a turn runs: listed under the opened session's transcript (kept
//! up to date from the journal's `queue` events), and managed in a list (`u`): `e` edits the
//! message under the cursor in the prompt box (Enter saves it, `queue.edit`), `x` removes it,
//! `r` sends the next one of a held queue (`queue.release`).

use baton_protocol::{MessageQueue, QueueResult, SessionEvent};

use super::{App, Overlay};
use crate::action::Action;
use crate::command::Request;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueView {
    pub session_id: String,
    pub label: String,
    pub selected: usize,
}

impl App {
    /// The queue of a session, as last heard (empty when none is known).
    pub fn queue_of(&self, session_id: &str) -> Option<&MessageQueue> {
        self.queues.get(session_id).filter(|q| !q.messages.is_empty())
    }

    /// The queued message being edited in the prompt box, if any: (session, id).
    pub fn editing_queued(&self) -> Option<&(String, String)> {
        self.editing_queued.as_ref()
    }

    /// `u`: the opened session's queue.
    pub(super) fn open_queue(&mut self) {
        let Some(session_id) = self.opened.clone() else {
            self.flash("open a session first (Enter)", true);
            return;
        };
        let label = self.sessions.get(&session_id).map_or_else(|| session_id.clone(), crate::sessions::label);
        self.overlay = Some(Overlay::Queue(QueueView { session_id: session_id.clone(), label, selected: 0 }));
        self.send(Request::QueueList { session_id });
    }

    /// Keys while the list is open; false for the ones it leaves alone.
    pub(super) fn queue_action(&mut self, action: &Action) -> bool {
        let Some(Overlay::Queue(view)) = &mut self.overlay else { return false };
        let session_id = view.session_id.clone();
        let messages = self.queues.get(&session_id).map(|q| q.messages.clone()).unwrap_or_default();
        let selected = view.selected.min(messages.len().saturating_sub(1));
        match action {
            Action::MoveUp => view.selected = selected.saturating_sub(1),
            Action::MoveDown => view.selected = (selected + 1).min(messages.len().saturating_sub(1)),
            Action::RemoveQueued => match messages.get(selected) {
                Some(message) => self.send(Request::QueueRemove { session_id, id: message.id.clone() }),
                None => self.flash("nothing is queued", true),
            },
            Action::ReleaseQueue => self.send(Request::QueueRelease { session_id }),
            Action::EditQueued => match messages.get(selected) {
                Some(message) => {
                    self.overlay = None;
                    self.input = crate::text_field::TextField::with_text(message.text.clone());
                    self.editing_queued = Some((session_id, message.id.clone()));
                    self.focus = super::Focus::Input;
                    self.flash("editing a queued message: Enter saves it, Esc leaves it as it was", false);
                }
                None => self.flash("nothing is queued", true),
            },
            _ => return false,
        }
        self.dirty = true;
        true
    }

    /// Enter in the prompt box while a queued message is edited: saves it. True when it was.
    pub(super) fn save_edited_queued(&mut self) -> bool {
        let Some((session_id, id)) = self.editing_queued.take() else { return false };
        let content = self.input.take();
        self.send(Request::QueueEdit { session_id, id, content });
        true
    }

    /// Leaves the edit of a queued message (Esc in the prompt box): the message stays as it was.
    pub(super) fn abandon_queued_edit(&mut self) {
        if self.editing_queued.take().is_some() {
            self.input.take();
            self.dirty = true;
        }
    }

    /// A `queue.*` answer.
    pub(super) fn queue_answered(&mut self, result: QueueResult) {
        self.queues.insert(result.session_id.clone(), result.queue);
        self.dirty = true;
    }

    /// A `queue` event: the session's queue now.
    pub(super) fn queue_event(&mut self, session_id: &str, event: &SessionEvent) {
        if let SessionEvent::Queue { queue } = event {
            self.queues.insert(session_id.to_string(), queue.clone());
            if self.opened.as_deref() == Some(session_id) {
                self.dirty = true;
            }
        }
    }
}
