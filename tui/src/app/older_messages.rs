//! Older history. A transcript starts from the newest page of `message.list`; scrolling up past
//! its top asks for the page before it (`before_seq` = the oldest seq held) and puts that page in
//! front. The scroll offset counts lines from the bottom, so what is on screen stays put while
//! lines are added above it.

use baton_protocol::MessageListResult;

use crate::command::Request;

use super::{App, TranscriptSlot};

impl App {
    /// Asks for the page before the opened transcript's oldest entry, when the server said it
    /// has one and no such request is under way for the session.
    pub(super) fn load_older_messages(&mut self) {
        let Some(session_id) = self.opened.clone() else {
            return;
        };
        if !self.is_connected() || self.older_loading.contains(&session_id) {
            return;
        }
        let Some(transcript) = self.transcript(&session_id) else {
            return;
        };
        if !transcript.older_omitted() {
            return;
        }
        let before_seq = transcript.oldest_seq();
        self.older_loading.insert(session_id.clone());
        self.send(Request::LoadOlderMessages { session_id, before_seq });
    }

    pub(super) fn on_older_messages(&mut self, session_id: &str, before_seq: u64, page: MessageListResult) {
        self.older_loading.remove(session_id);
        let Some(TranscriptSlot::Ready(transcript)) = self.transcripts.get_mut(session_id) else {
            return;
        };
        // A transcript reloaded meanwhile may start elsewhere: the page is what comes before
        // `before_seq`, so it fits only in front of that seq.
        if transcript.oldest_seq() != before_seq {
            tracing::debug!(session = %session_id, before_seq, "dropping an older page that no longer fits");
            return;
        }
        let added = transcript.prepend_older(page.messages, page.has_more);
        tracing::debug!(session = %session_id, before_seq, added, "older messages loaded");
    }

    /// A page of older messages is being loaded for the session.
    pub fn is_loading_older(&self, session_id: &str) -> bool {
        self.older_loading.contains(session_id)
    }
}
