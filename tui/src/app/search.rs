//! `f`: full-text search over every session's messages (`message.search`). The query is sent
//! as the user types, once typing pauses ([`SEARCH_DEBOUNCE`]); moving down past the last hit
//! loaded asks for the next page; Enter opens the hit in context: its session opened, the
//! transcript focused with the entry selected and scrolled into view (older pages are loaded
//! until they hold it).

use std::time::{Duration, Instant};

use baton_protocol::{MessageSearchResult, SearchHit};

use crate::action::Action;
use crate::command::Request;
use crate::text_field::TextField;

use super::{App, Focus, Overlay, TranscriptSlot};

/// How long typing must pause before the query is sent: one request per word, not per key.
pub const SEARCH_DEBOUNCE: Duration = Duration::from_millis(250);

/// The search view.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SearchView {
    pub query: TextField,
    /// The hits of `searched`, newest first, as far as they are loaded.
    pub hits: Vec<SearchHit>,
    /// The query the hits are for (`None`: nothing searched yet).
    pub searched: Option<String>,
    pub next_cursor: Option<String>,
    /// The hit chosen (index into `hits`).
    pub selected: usize,
    /// When the query typed is due to be sent.
    due: Option<Instant>,
    /// A page is on its way (the first, or a further one).
    pub loading: bool,
    pub error: Option<String>,
}

impl SearchView {
    /// The query to send for what is typed: the last word, being typed, matches as a prefix
    /// ("pine" finds "pineapple" before the word is finished); a space after it ends it.
    fn query(&self) -> String {
        let typed = self.query.text();
        let trimmed = typed.trim();
        let finished = typed.ends_with(char::is_whitespace) || trimmed.ends_with('*');
        if trimmed.is_empty() || finished {
            trimmed.to_string()
        } else {
            format!("{trimmed}*")
        }
    }
}

/// A hit being opened: its session's transcript must hold the entry before it is selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Jump {
    session_id: String,
    seq: u64,
}

impl App {
    /// `f`: opens the search view (with the last query and its hits, when there was one).
    pub(super) fn open_search(&mut self) {
        let view = self.last_search.take().unwrap_or_default();
        self.overlay = Some(Overlay::Search(view));
    }

    /// What the search view does with an action; false when it is not open or the action is
    /// not its own.
    pub(super) fn search_action(&mut self, action: &Action) -> bool {
        let Some(Overlay::Search(view)) = &mut self.overlay else {
            return false;
        };
        match action {
            Action::Edit(op) => {
                view.query.apply(op);
                view.due = Some(Instant::now() + SEARCH_DEBOUNCE);
                view.error = None;
            }
            Action::MoveUp => view.selected = view.selected.saturating_sub(1),
            Action::ScrollUp => view.selected = view.selected.saturating_sub(10),
            Action::MoveDown | Action::ScrollDown => {
                let step = if *action == Action::MoveDown { 1 } else { 10 };
                view.selected = (view.selected + step).min(view.hits.len().saturating_sub(1));
                self.search_more();
            }
            Action::Submit => self.open_hit(),
            Action::CloseOverlay => {
                if let Some(Overlay::Search(view)) = self.overlay.take() {
                    self.last_search = Some(view);
                }
            }
            _ => return false,
        }
        true
    }

    /// Sends the query typed once typing has paused.
    pub(super) fn search_tick(&mut self, now: Instant) {
        let Some(Overlay::Search(view)) = &mut self.overlay else {
            return;
        };
        if view.due.is_none_or(|due| now < due) {
            return;
        }
        view.due = None;
        let query = view.query();
        if query.is_empty() {
            *view = SearchView { query: view.query.clone(), ..SearchView::default() };
            self.dirty = true;
            return;
        }
        if view.searched.as_deref() == Some(query.as_str()) {
            return;
        }
        view.loading = true;
        self.send(Request::Search { query, cursor: None });
        self.dirty = true;
    }

    /// The chosen hit is the last loaded and more are on the server: asks for the next page.
    fn search_more(&mut self) {
        let Some(Overlay::Search(view)) = &mut self.overlay else {
            return;
        };
        let near_end = view.selected + 1 >= view.hits.len();
        let (Some(query), Some(cursor)) = (view.searched.clone(), view.next_cursor.clone()) else {
            return;
        };
        if near_end && !view.loading && self.connection == super::ConnectionState::Connected {
            view.loading = true;
            self.send(Request::Search { query, cursor: Some(cursor) });
        }
    }

    /// A page of hits. One for a query no longer typed, or a page that does not follow the
    /// hits held, is dropped.
    pub(super) fn on_search_hits(&mut self, query: &str, cursor: Option<&str>, page: MessageSearchResult) {
        let Some(Overlay::Search(view)) = &mut self.overlay else {
            return;
        };
        if view.query() != query {
            return;
        }
        view.loading = false;
        match cursor {
            None => {
                view.hits = page.hits;
                view.selected = 0;
            }
            Some(cursor) if view.next_cursor.as_deref() == Some(cursor) => view.hits.extend(page.hits),
            Some(_) => return,
        }
        view.searched = Some(query.to_string());
        view.next_cursor = page.next_cursor;
        view.error = None;
    }

    /// The search failed: said in the view (a query the server refuses, a lost connection).
    pub(super) fn search_failed(&mut self, query: &str, text: String) -> bool {
        match &mut self.overlay {
            Some(Overlay::Search(view)) => {
                if view.query() == query {
                    view.loading = false;
                    view.error = Some(text);
                }
                true
            }
            _ => false,
        }
    }

    /// Enter: the chosen hit's session opened, its transcript focused on the entry.
    fn open_hit(&mut self) {
        let Some(Overlay::Search(view)) = &self.overlay else {
            return;
        };
        let Some(hit) = view.hits.get(view.selected).cloned() else {
            return;
        };
        if let Some(Overlay::Search(view)) = self.overlay.take() {
            self.last_search = Some(view);
        }
        self.open_session(&hit.session_id);
        self.narrow_shows_session = true;
        self.focus = Focus::List;
        self.focus_transcript();
        self.jump = Some(Jump { session_id: hit.session_id, seq: hit.seq });
        self.continue_jump();
    }

    /// Selects the hit's entry once its session's transcript holds it; until then, asks for
    /// the older page that comes before what is held. Called again as each page arrives.
    pub(super) fn continue_jump(&mut self) {
        let Some(jump) = self.jump.clone() else {
            return;
        };
        if self.opened.as_deref() != Some(jump.session_id.as_str()) {
            // Another session was opened meanwhile: the user moved on.
            self.jump = None;
            return;
        }
        let Some(TranscriptSlot::Ready(transcript)) = self.transcripts.get(&jump.session_id) else {
            return; // loading: called again when it is
        };
        if transcript.oldest_seq() > jump.seq && transcript.older_omitted() {
            self.load_older_messages();
            return;
        }
        self.jump = None;
        self.reading.selected = Some(jump.seq);
        self.reading.reveal = true;
        self.reading.pin_row = None;
        self.dirty = true;
    }
}
