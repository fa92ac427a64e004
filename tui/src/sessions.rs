//! The session list: rows from `task.session.list`, grouped by task, with a cursor that follows
//! a session (not a position) across refreshes. Status fields are the server's, patched in place
//! from notifications between refreshes.

use std::collections::HashMap;

use baton_protocol::{
    supersedes, ResumeReason, SessionInfo, SessionState, SessionStatus, StateChanged, Task, TaskState,
};

/// One line of the list: a task header or one of its sessions.
#[derive(Debug, Clone, Copy)]
pub enum ListItem<'a> {
    Task(&'a SessionInfo),
    Session(&'a SessionInfo),
}

#[derive(Debug, Clone, Default)]
pub struct SessionList {
    /// Grouped by task: tasks newest first, sessions of a task oldest first.
    rows: Vec<SessionInfo>,
    /// Where the next page of the server's list starts (newest first); `None` when every
    /// session is loaded.
    next_page: Option<String>,
    /// Pages loaded after the first one.
    more_pages: usize,
    cursor: Option<String>,
    loaded: bool,
    /// Lower-case words a row must all contain (in its title, agent or state) to be shown.
    filter: Vec<String>,
    /// Only the sessions that need the user are shown.
    needs_you_only: bool,
    /// Finished turns the user has looked at: the session and its `attention_since` then. Kept
    /// by this client only (the server's `attention` is the same for every client); a later
    /// turn, with a new `attention_since`, is unseen again.
    seen: HashMap<String, String>,
}

/// Why a row needs the user, as the list and the status bar tell it apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// It asks something: a permission, a failure, a session to resume.
    Asks,
    /// Its turn finished and the user has not looked at it yet.
    YourTurn,
}

impl SessionList {
    /// Replaces the rows with a fresh list. The cursor stays on its session when it still
    /// exists, else moves to the first session.
    pub fn set_rows(&mut self, mut rows: Vec<SessionInfo>) {
        // A page read before a change whose notification came first is older than what is held:
        // the held view of that session stays.
        let held: HashMap<&str, &SessionStatus> =
            self.rows.iter().map(|r| (r.status.session_id.as_str(), &r.status)).collect();
        for row in &mut rows {
            if let Some(held) = held.get(row.status.session_id.as_str()) {
                if !supersedes(row.status.change_seq, held.change_seq) {
                    row.status = (*held).clone();
                }
            }
        }
        // Tasks are ordered by their newest session, so a new task shows up on top and a
        // task does not jump around while its sessions change state.
        let mut newest: HashMap<String, String> = HashMap::new();
        for row in &rows {
            let entry = newest.entry(row.status.task_id.clone()).or_default();
            if row.created_at > *entry {
                *entry = row.created_at.clone();
            }
        }
        let newest_of = |row: &SessionInfo| newest.get(&row.status.task_id).map(String::as_str);
        rows.sort_by(|a, b| {
            newest_of(b)
                .cmp(&newest_of(a))
                .then_with(|| a.status.task_id.cmp(&b.status.task_id))
                .then_with(|| a.created_at.cmp(&b.created_at))
                .then_with(|| a.status.session_id.cmp(&b.status.session_id))
        });
        self.rows = rows;
        self.loaded = true;
        self.keep_cursor_visible();
    }

    /// Takes a fresh first page (newest sessions first). Rows of further pages already loaded
    /// (older than the page's last row) are kept, with the cursor to the page after them.
    pub fn set_first_page(&mut self, page: Vec<SessionInfo>, next_page: Option<String>) {
        let key = |row: &SessionInfo| (row.created_at.clone(), row.status.session_id.clone());
        let oldest = page.last().map(key);
        let mut rows = page;
        match (next_page, oldest) {
            (Some(next), Some(oldest)) if self.more_pages > 0 => {
                let page_ids: std::collections::HashSet<String> =
                    rows.iter().map(|r| r.status.session_id.clone()).collect();
                let older = std::mem::take(&mut self.rows)
                    .into_iter()
                    .filter(|r| key(r) < oldest && !page_ids.contains(&r.status.session_id));
                rows.extend(older);
                // The page after the rows kept is still where the next page starts.
                let _ = next;
            }
            (next, _) => {
                self.next_page = next;
                self.more_pages = 0;
            }
        }
        self.set_rows(rows);
    }

    /// Adds a page that follows the ones loaded.
    pub fn append_page(&mut self, page: Vec<SessionInfo>, next_page: Option<String>) {
        let mut rows = std::mem::take(&mut self.rows);
        let ids: std::collections::HashSet<String> = page.iter().map(|r| r.status.session_id.clone()).collect();
        rows.retain(|r| !ids.contains(&r.status.session_id));
        rows.extend(page);
        self.next_page = next_page;
        self.more_pages += 1;
        self.set_rows(rows);
    }

    /// The cursor of the next page, when more sessions exist and the cursor is within a
    /// screen of the last row shown.
    pub fn wants_more(&self) -> Option<String> {
        const NEAR_END: usize = 50;
        let next = self.next_page.as_ref()?;
        let shown: Vec<&SessionInfo> = self.visible().collect();
        let at = self.cursor.as_deref().and_then(|id| shown.iter().position(|r| r.status.session_id == id));
        let near_end = at.is_none_or(|i| i + NEAR_END >= shown.len());
        near_end.then(|| next.clone())
    }

    /// Shows only the rows whose task title, agent or state (with NEEDS RESUME) contain every
    /// word of `query`, ignoring case. The cursor moves to the first such row when its own is
    /// hidden.
    pub fn set_filter(&mut self, query: &str) {
        self.filter = query.split_whitespace().map(str::to_lowercase).collect();
        self.keep_cursor_visible();
    }

    /// The filter's words (none: every row is shown).
    pub fn filter_words(&self) -> &[String] {
        &self.filter
    }

    /// Rows exist, but the filter hides them all.
    pub fn all_filtered_out(&self) -> bool {
        !self.rows.is_empty() && self.visible().next().is_none()
    }

    /// Shows only the sessions that need the user (or every session again).
    pub fn set_needs_you_only(&mut self, only: bool) {
        self.needs_you_only = only;
        self.keep_cursor_visible();
    }

    pub fn needs_you_only(&self) -> bool {
        self.needs_you_only
    }

    /// The session's number in its task (1 for the oldest), when the task has more than one
    /// session held: sessions started with `S` are told apart by it, not by their age alone.
    pub fn number_in_task(&self, session_id: &str) -> Option<usize> {
        let row = self.get(session_id)?;
        let of_task: Vec<&SessionInfo> = self.rows.iter().filter(|r| r.status.task_id == row.status.task_id).collect();
        if of_task.len() < 2 {
            return None;
        }
        of_task.iter().position(|r| r.status.session_id == session_id).map(|i| i + 1)
    }

    /// The sessions held that need the user (their `attention` is set, seen or not).
    pub fn needing_you(&self) -> usize {
        self.rows.iter().filter(|row| row.status.attention.is_some()).count()
    }

    /// What the row needs from the user, as far as this client knows: nothing once a finished
    /// turn has been looked at.
    pub fn need(&self, row: &SessionInfo) -> Option<Need> {
        match row.status.attention? {
            baton_protocol::Attention::Input => {
                let seen = self.seen.get(&row.status.session_id);
                (seen.is_none() || seen != row.status.attention_since.as_ref()).then_some(Need::YourTurn)
            }
            _ => Some(Need::Asks),
        }
    }

    /// How many rows held ask something, and how many finished turns are unseen.
    pub fn needs(&self) -> (usize, usize) {
        let needs: Vec<Need> = self.rows.iter().filter_map(|row| self.need(row)).collect();
        let asks = needs.iter().filter(|n| **n == Need::Asks).count();
        (asks, needs.len() - asks)
    }

    /// The user looked at the session: a finished turn of it no longer counts as waiting.
    pub fn mark_seen(&mut self, session_id: &str) -> bool {
        let Some(row) = self.get(session_id) else { return false };
        if row.status.attention != Some(baton_protocol::Attention::Input) {
            return false;
        }
        let since = row.status.attention_since.clone().unwrap_or_default();
        self.seen.insert(session_id.to_string(), since.clone()) != Some(since)
    }

    /// The session that needs the user after `after` (the one on screen), in the order of how
    /// long they have waited (oldest `attention_since` first), wrapping around; among the rows
    /// shown.
    pub fn next_needing_you(&self, after: Option<&str>) -> Option<String> {
        let mut waiting: Vec<&SessionInfo> = self.visible().filter(|row| self.need(row).is_some()).collect();
        waiting.sort_by(|a, b| {
            (a.status.attention_since.is_none(), &a.status.attention_since, &a.status.session_id).cmp(&(
                b.status.attention_since.is_none(),
                &b.status.attention_since,
                &b.status.session_id,
            ))
        });
        let at = after.and_then(|id| waiting.iter().position(|r| r.status.session_id == id));
        let next = at.map_or(0, |i| (i + 1) % waiting.len());
        waiting.get(next).map(|row| row.status.session_id.clone())
    }

    fn matches(&self, row: &SessionInfo) -> bool {
        // The row under the cursor stays while it is looked at (looking marks it seen).
        let pointed = self.cursor.as_deref() == Some(row.status.session_id.as_str());
        if self.needs_you_only && self.need(row).is_none() && !pointed {
            return false;
        }
        if self.filter.is_empty() {
            return true;
        }
        // The words shown and the protocol's name both match ("done" and "completed").
        let mut haystack = format!(
            "{} {} {} {}",
            row.task_title,
            row.status.agent,
            status_name(&row.status),
            row.status.state.as_str().replace('_', " ")
        );
        if row.status.needs_resume {
            haystack.push_str(" needs resume");
        }
        let haystack = haystack.to_lowercase();
        self.filter.iter().all(|word| haystack.contains(word.as_str()))
    }

    fn visible(&self) -> impl Iterator<Item = &SessionInfo> {
        self.rows.iter().filter(|row| self.matches(row))
    }

    fn keep_cursor_visible(&mut self) {
        if self.cursor().is_none() {
            let first = self.visible().next().map(|r| r.status.session_id.clone());
            self.cursor = first;
        }
    }

    /// Every row held, shown or not.
    pub fn rows(&self) -> &[SessionInfo] {
        &self.rows
    }

    /// The list was received at least once (an empty list then means "no sessions").
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// Rows loaded (shown or hidden by the filter).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn get(&self, session_id: &str) -> Option<&SessionInfo> {
        self.rows.iter().find(|r| r.status.session_id == session_id)
    }

    fn get_mut(&mut self, session_id: &str) -> Option<&mut SessionInfo> {
        self.rows.iter_mut().find(|r| r.status.session_id == session_id)
    }

    /// The session under the cursor, unless the filter hides it.
    pub fn cursor(&self) -> Option<&SessionInfo> {
        self.cursor.as_deref().and_then(|id| self.get(id)).filter(|row| self.matches(row))
    }

    pub fn set_cursor(&mut self, session_id: &str) {
        self.cursor = Some(session_id.to_string());
    }

    /// Moves the cursor by `delta` of the sessions shown, stopping at the ends.
    pub fn move_cursor(&mut self, delta: isize) {
        let shown: Vec<&SessionInfo> = self.visible().collect();
        if shown.is_empty() {
            return;
        }
        let current = self.cursor.as_deref().and_then(|id| shown.iter().position(|r| r.status.session_id == id));
        let next = match current {
            Some(i) => i.saturating_add_signed(delta).min(shown.len() - 1),
            None => 0,
        };
        self.cursor = Some(shown[next].status.session_id.clone());
    }

    /// Task headers and the sessions the filter shows, in display order.
    pub fn items(&self) -> Vec<ListItem<'_>> {
        let mut items = Vec::with_capacity(self.rows.len() * 2);
        let mut task: Option<&str> = None;
        for row in self.visible() {
            if task != Some(row.status.task_id.as_str()) {
                task = Some(&row.status.task_id);
                items.push(ListItem::Task(row));
            }
            items.push(ListItem::Session(row));
        }
        items
    }

    /// Applies `session.state_changed`. False when the session is not in the list yet (the
    /// caller refreshes the list).
    pub fn apply_state_changed(&mut self, change: &StateChanged) -> bool {
        if self.get(&change.session_id).is_some_and(|row| !supersedes(change.change_seq, row.status.change_seq)) {
            // What is held was read after this change: it tells it already, and what came since.
            return true;
        }
        let mut found = false;
        for row in &mut self.rows {
            if row.status.task_id == change.task_id {
                row.status.task_state = change.task_state;
            }
            if row.status.session_id == change.session_id {
                if row.status.resume_reason == ResumeReason::AgentReconnecting {
                    // The server's reconnection to the agent is over (PROTOCOL.md §3, case 2b):
                    // reattached, or the session needs a resume.
                    row.status.resume_reason = match (change.needs_resume, row.status.has_resume_token) {
                        (false, _) => ResumeReason::AgentRunning,
                        (true, true) => ResumeReason::AgentNotRunning,
                        (true, false) => ResumeReason::AgentNotRunningFreshStart,
                    };
                    row.status.is_resumable = change.needs_resume;
                    row.status.is_agent_running = !change.needs_resume;
                }
                row.status.state = change.state;
                row.status.needs_resume = change.needs_resume;
                row.status.attention = change.attention;
                row.status.attention_since = change.attention_since.clone();
                row.status.change_seq = change.change_seq;
                // PROTOCOL.md §3: a session that needs resuming has no agent, and a turn only
                // runs on an attached one. The next list or status brings the server's word.
                if change.needs_resume || !change.state.is_active() {
                    row.status.is_agent_running = false;
                } else if change.state == SessionState::Running {
                    row.status.is_agent_running = true;
                }
                found = true;
            }
        }
        found
    }

    pub fn apply_task_updated(&mut self, task: &Task) {
        for row in self.rows.iter_mut().filter(|r| r.status.task_id == task.id) {
            row.task_title = task.title.clone();
            row.status.task_state = task.state;
            row.task_archived = task.archived;
        }
        // The list shows tasks that are not archived (the server's default).
        if task.archived {
            self.remove_task(&task.id);
        }
    }

    /// Drops the rows of a task (deleted, or archived); the cursor moves to the first row left
    /// when it was on one of them.
    pub fn remove_task(&mut self, task_id: &str) {
        self.rows.retain(|r| r.status.task_id != task_id);
        self.keep_cursor_visible();
    }

    /// Adds a session we learnt about before the next list (one we just created). A view held
    /// of it that is newer stays ([`SessionList::set_rows`]).
    pub fn upsert(&mut self, row: SessionInfo) {
        let mut rows: Vec<SessionInfo> =
            self.rows.iter().filter(|r| r.status.session_id != row.status.session_id).cloned().collect();
        rows.push(row);
        self.set_rows(rows);
    }

    /// Takes the fields of a `task.session.status` answer, unless it is older than the row (read
    /// before a change whose notification came first).
    pub fn apply_status(&mut self, status: &SessionStatus) {
        if let Some(row) = self.get_mut(&status.session_id) {
            if supersedes(status.change_seq, row.status.change_seq) {
                row.status = status.clone();
            }
        }
    }
}

/// A state as the list shows it (and as the filter matches it): what it means for the user,
/// not the protocol's constant.
pub fn state_name(state: SessionState) -> &'static str {
    match state {
        SessionState::Created => "not started",
        SessionState::Starting => "starting",
        SessionState::Running => "working",
        SessionState::WaitingForInput => "waiting for you",
        SessionState::Completed => "done",
        SessionState::Failed => "failed",
        SessionState::Cancelled => "cancelled",
    }
}

/// A session's state in words, as far as the status tells more than the state: a session left
/// RUNNING by a server restart, with no agent, is not working but interrupted.
pub fn status_name(status: &SessionStatus) -> &'static str {
    if status.resume_reason == ResumeReason::AgentReconnecting {
        // The server reconnects to the agent of its previous run (Docker, ssh) after it started.
        "reconnecting"
    } else if status.state == SessionState::Running && status.needs_resume {
        "interrupted"
    } else {
        state_name(status.state)
    }
}

/// A task state in words.
pub fn task_state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Todo => "to do",
        TaskState::InProgress => "in progress",
        TaskState::Review => "to review",
        TaskState::Completed => "done",
        TaskState::Failed => "failed",
    }
}

/// The agent of a session that never ran could not be started: the server put the session back
/// to CREATED and says why in `last_error` (`r` retries).
pub fn failed_to_start(status: &SessionStatus) -> Option<&str> {
    (status.state == SessionState::Created).then_some(status.last_error.as_deref()).flatten()
}

/// A turn is under way: the state says RUNNING and the server also says an agent is attached
/// to run it. After a server restart a session can stay RUNNING with no agent (NEEDS RESUME):
/// nothing is working then.
pub fn is_working(status: &SessionStatus) -> bool {
    status.state == SessionState::Running && status.is_agent_running && !status.needs_resume
}

/// `1 file`, `2 files`: a count and its noun.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Names a session for a question or message: “task title” · agent · short id.
pub fn label(row: &SessionInfo) -> String {
    format!("“{}” · {} · {}", row.task_title, row.status.agent, short_id(&row.status.session_id))
}

/// `sess-8b1e4d2c9a7f…` → `8b1e4d2c`: enough to tell sessions of one task apart.
pub fn short_id(session_id: &str) -> &str {
    let id = session_id.strip_prefix("sess-").unwrap_or(session_id);
    match id.char_indices().nth(8) {
        Some((end, _)) => &id[..end],
        None => id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::auto_resume::tests::{change, status};

    fn view(state: SessionState, change_seq: u64) -> SessionInfo {
        SessionInfo {
            status: SessionStatus { state, change_seq, ..status("s-1", false, false) },
            task_title: "Task".into(),
            task_archived: false,
            created_at: "2026-12-06T10:00:00Z".into(),
            updated_at: "2026-12-06T10:00:00Z".into(),
            last_seq: 0,
            forked_from: None,
        }
    }

    fn started(change_seq: u64) -> StateChanged {
        StateChanged {
            previous_state: Some(SessionState::Starting),
            change_seq,
            ..change("s-1", SessionState::WaitingForInput, false)
        }
    }

    fn state(list: &SessionList) -> SessionState {
        list.get("s-1").expect("the row").status.state
    }

    #[test]
    fn an_answer_read_before_a_change_whose_notification_came_first_does_not_undo_it() {
        let mut list = SessionList::default();
        list.set_rows(vec![view(SessionState::Starting, 4)]);
        assert!(list.apply_state_changed(&started(7)));
        assert_eq!(state(&list), SessionState::WaitingForInput);
        // A status, then a list, both read before the agent started (change 4), come after.
        list.apply_status(&view(SessionState::Starting, 4).status);
        assert_eq!(state(&list), SessionState::WaitingForInput, "a stale status is not taken");
        list.set_rows(vec![view(SessionState::Starting, 4)]);
        assert_eq!(state(&list), SessionState::WaitingForInput, "a stale list row is not taken");
        list.upsert(view(SessionState::Starting, 4));
        assert_eq!(state(&list), SessionState::WaitingForInput, "a stale start answer is not taken");
        // A view read later is.
        list.apply_status(&view(SessionState::Running, 8).status);
        assert_eq!(state(&list), SessionState::Running);
        assert_eq!(list.get("s-1").map(|r| r.status.change_seq), Some(8));
    }

    #[test]
    fn a_notification_older_than_the_view_held_is_left_out() {
        let mut list = SessionList::default();
        // The list was read after the agent started and after a prompt made it run (change 9).
        list.set_rows(vec![view(SessionState::Running, 9)]);
        assert!(list.apply_state_changed(&started(7)), "the session is known");
        assert_eq!(state(&list), SessionState::Running);
        // Views from a server that sends no change_seq are taken as they come.
        assert!(list.apply_state_changed(&started(0)));
        assert_eq!(state(&list), SessionState::WaitingForInput);
    }
}
