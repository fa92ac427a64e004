//! One session's transcript as the user sees it, folded from journal events the way the server
//! folds them for `message.list` (server/src/store/journal.rs `fold`): chunks continue the newest
//! entry when it is an open message of the same kind and id, a tool call is one entry updated in
//! place wherever it is, consecutive plans share one entry, and the end of a turn closes every
//! entry so that the next turn starts new ones.
//!
//! Events are applied at most once: every event carries a per-session sequence number, and an
//! event at or below the highest one applied is a replay and is ignored (DESIGN.md §2).

mod backlog;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use baton_protocol::{EventRecord, PermissionOption, PlanEntry, SessionEvent};

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Sequence number of the first event folded into the entry.
    pub seq: u64,
    pub body: EntryBody,
    /// Stamped from one process-wide counter whenever the entry is created or changed: a view
    /// that laid the entry out at this revision can reuse that layout (see `ui/transcript.rs`).
    rev: u64,
}

impl Entry {
    pub fn rev(&self) -> u64 {
        self.rev
    }
}

static NEXT_REV: AtomicU64 = AtomicU64::new(1);

/// A revision no entry of any transcript had before.
fn next_rev() -> u64 {
    NEXT_REV.fetch_add(1, Ordering::Relaxed)
}

#[derive(Debug, Clone, PartialEq)]
pub enum EntryBody {
    User(String),
    Agent { message_id: Option<String>, text: String },
    Thought { message_id: Option<String>, text: String },
    ToolCall(ToolCall),
    Plan(Vec<PlanEntry>),
    Status(String),
    Error(String),
    Permission(Permission),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub title: String,
    pub kind: Option<String>,
    pub status: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Permission {
    pub request_id: String,
    /// What the agent wants to do (the title of the tool call it asks about).
    pub title: String,
    pub options: Vec<PermissionOption>,
    pub answer: PermissionAnswer,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    Pending,
    Chosen(String),
    /// The request went away unanswered (the turn ended, the agent stopped).
    Abandoned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkKind {
    Agent,
    Thought,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    entries: Vec<Entry>,
    /// Entries before this index are closed: chunks and plans no longer fold into them.
    open_from: usize,
    last_seq: u64,
    older_omitted: bool,
    /// The newest revision stamped on an entry, or on the transcript when it was built.
    rev: u64,
    /// Which entries the latest revisions changed or added, oldest first: a view that saw
    /// revision `r` catches up from the changes after `r` (see [`Transcript::changes_since`]).
    changes: VecDeque<(u64, usize)>,
    /// Changes at or below this revision are not in `changes`: dropped for room, or entries moved
    /// (the transcript was built, an older page was put in front).
    changes_floor: u64,
    /// Indices of the permission entries, in order: a frame asks for the pending one several
    /// times, which must not scan a long transcript.
    permissions: Vec<usize>,
}

/// Changes remembered for views that catch up; a view further behind lays out again.
const CHANGES_KEPT: usize = 4096;

impl Default for Transcript {
    /// Empty, with a revision of its own: no view laid out another transcript at it.
    fn default() -> Self {
        let rev = next_rev();
        Transcript {
            entries: Vec::new(),
            open_from: 0,
            last_seq: 0,
            older_omitted: false,
            rev,
            changes: VecDeque::new(),
            changes_floor: rev,
            permissions: Vec::new(),
        }
    }
}

impl Transcript {
    /// An empty transcript that has seen every event up to `last_seq`.
    pub fn starting_after(last_seq: u64) -> Self {
        Transcript { last_seq, ..Transcript::default() }
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Changes whenever an entry is added, changed or put in front.
    pub fn revision(&self) -> u64 {
        self.rev
    }

    /// Marks the entry at `index` changed.
    fn touch(&mut self, index: usize) {
        self.rev = next_rev();
        self.entries[index].rev = self.rev;
        self.log_change(index);
    }

    fn log_change(&mut self, index: usize) {
        if self.changes.len() == CHANGES_KEPT {
            if let Some((dropped, _)) = self.changes.pop_front() {
                self.changes_floor = dropped;
            }
        }
        self.changes.push_back((self.rev, index));
    }

    /// Entries moved: every index seen before `self.rev` may be wrong now.
    fn entries_moved(&mut self) {
        self.index_permissions();
        self.changes.clear();
        self.changes_floor = self.rev;
    }

    /// The indices of the entries changed or added after revision `rev`, in the order of the
    /// changes (an index may repeat); `None` when they are not all known (entries moved since,
    /// or too many changes), and the caller must compare every entry.
    pub fn changes_since(&self, rev: u64) -> Option<impl Iterator<Item = usize> + '_> {
        if rev < self.changes_floor {
            return None;
        }
        let from = self.changes.partition_point(|(changed, _)| *changed <= rev);
        Some(self.changes.range(from..).map(|(_, index)| *index))
    }

    /// The highest sequence number held: what to subscribe `since_seq` to miss nothing.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The server had older messages than the backlog we loaded.
    pub fn older_omitted(&self) -> bool {
        self.older_omitted
    }

    /// Applies one journal event. Returns false, changing nothing, for a replay of an event
    /// already applied.
    pub fn apply(&mut self, record: &EventRecord) -> bool {
        if record.seq <= self.last_seq {
            return false;
        }
        if record.seq > self.last_seq + 1 {
            tracing::warn!(
                session = %record.session_id,
                held = self.last_seq,
                got = record.seq,
                "gap in session events"
            );
        }
        self.last_seq = record.seq;
        self.fold(record.seq, &record.event);
        true
    }

    /// The newest permission request still waiting for an answer.
    pub fn pending_permission(&self) -> Option<&Permission> {
        self.permissions_newest_first().find(|p| p.answer == PermissionAnswer::Pending)
    }

    /// The permission request with this id, answered or not.
    pub fn permission(&self, request_id: &str) -> Option<&Permission> {
        self.permissions_newest_first().find(|p| p.request_id == request_id)
    }

    fn permissions_newest_first(&self) -> impl Iterator<Item = &Permission> {
        self.permissions.iter().rev().filter_map(|&index| match &self.entries.get(index)?.body {
            EntryBody::Permission(p) => Some(p),
            _ => None,
        })
    }

    /// Finds the permission entries again after entries were added in bulk.
    fn index_permissions(&mut self) {
        self.permissions = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, entry)| matches!(entry.body, EntryBody::Permission(_)))
            .map(|(index, _)| index)
            .collect();
    }

    fn fold(&mut self, seq: u64, event: &SessionEvent) {
        match event {
            SessionEvent::UserMessage { text } => self.push(seq, EntryBody::User(text.clone())),
            SessionEvent::MessageChunk { message_id, text } => {
                self.append_chunk(seq, ChunkKind::Agent, message_id, text)
            }
            SessionEvent::ThoughtChunk { message_id, text } => {
                self.append_chunk(seq, ChunkKind::Thought, message_id, text)
            }
            SessionEvent::ToolCall { tool_call_id, title, tool_kind, status, .. } => {
                let call = ToolCall {
                    id: tool_call_id.clone(),
                    title: title.clone(),
                    kind: tool_kind.clone(),
                    status: status.clone(),
                };
                match self.tool_call_index(tool_call_id) {
                    Some(index) => {
                        self.entries[index].body = EntryBody::ToolCall(call);
                        self.touch(index);
                    }
                    None => self.push(seq, EntryBody::ToolCall(call)),
                }
            }
            SessionEvent::ToolCallUpdate { tool_call_id, title, status, .. } => {
                self.update_tool_call(seq, tool_call_id, title, status)
            }
            SessionEvent::Plan { entries } => match self.open_last().filter(|e| matches!(e.body, EntryBody::Plan(_))) {
                Some(entry) => {
                    entry.body = EntryBody::Plan(entries.clone());
                    self.touch(self.entries.len() - 1);
                }
                None => self.push(seq, EntryBody::Plan(entries.clone())),
            },
            SessionEvent::Status { message } => self.push(seq, EntryBody::Status(message.clone())),
            SessionEvent::Error { message } => self.push(seq, EntryBody::Error(message.clone())),
            SessionEvent::TurnCompleted { stop_reason } => {
                // A turn that did not finish (cancelled, refused...) gets the status line the
                // server's fold gives it, from the same function, so that a live transcript and
                // a reloaded one read alike. Interrupted and failed turns have their own line.
                if let Some(note) = SessionEvent::turn_end_note(stop_reason) {
                    self.push(seq, EntryBody::Status(note));
                }
                self.open_from = self.entries.len();
            }
            SessionEvent::PermissionRequest { request_id, tool_call, options } => {
                let title = tool_call
                    .get("title")
                    .and_then(|t| t.as_str())
                    .unwrap_or("the agent asks for permission")
                    .to_string();
                let permission = Permission {
                    request_id: request_id.clone(),
                    title,
                    options: options.clone(),
                    answer: PermissionAnswer::Pending,
                };
                match self.permission_index(request_id) {
                    Some(index) => {
                        self.entries[index].body = EntryBody::Permission(permission);
                        self.touch(index);
                    }
                    None => self.push(seq, EntryBody::Permission(permission)),
                }
            }
            SessionEvent::PermissionResolved { request_id, option_id } => {
                if let Some(index) = self.permission_index(request_id) {
                    if let EntryBody::Permission(permission) = &mut self.entries[index].body {
                        permission.answer = match option_id {
                            Some(id) => PermissionAnswer::Chosen(id.clone()),
                            None => PermissionAnswer::Abandoned,
                        };
                    }
                    self.touch(index);
                }
            }
            // Not shown in the transcript.
            SessionEvent::TurnStarted {}
            | SessionEvent::AvailableCommands { .. }
            | SessionEvent::Mode { .. }
            | SessionEvent::AgentUpdate { .. }
            | SessionEvent::Unknown(_) => {}
        }
    }

    fn push(&mut self, seq: u64, body: EntryBody) {
        if matches!(body, EntryBody::Permission(_)) {
            self.permissions.push(self.entries.len());
        }
        self.rev = next_rev();
        self.entries.push(Entry { seq, body, rev: self.rev });
        self.log_change(self.entries.len() - 1);
    }

    /// The newest entry, unless a turn ended after it.
    fn open_last(&mut self) -> Option<&mut Entry> {
        let open_from = self.open_from;
        self.entries.iter_mut().enumerate().next_back().filter(|(i, _)| *i >= open_from).map(|(_, entry)| entry)
    }

    /// A chunk continues the newest entry when it is an open message of the same kind and the
    /// same message id (both absent counts as the same); otherwise it starts a new message.
    fn append_chunk(&mut self, seq: u64, kind: ChunkKind, message_id: &Option<String>, chunk: &str) {
        let target = self.open_last().filter(|e| chunk_of(&e.body, kind).is_some_and(|(id, _)| id == message_id));
        if let Some(entry) = target {
            if let EntryBody::Agent { text, .. } | EntryBody::Thought { text, .. } = &mut entry.body {
                text.push_str(chunk);
            }
            self.touch(self.entries.len() - 1);
            return;
        }
        let (message_id, text) = (message_id.clone(), chunk.to_string());
        let body = match kind {
            ChunkKind::Agent => EntryBody::Agent { message_id, text },
            ChunkKind::Thought => EntryBody::Thought { message_id, text },
        };
        self.push(seq, body);
    }

    fn update_tool_call(&mut self, seq: u64, id: &str, title: &Option<String>, status: &Option<String>) {
        if let Some(index) = self.tool_call_index(id) {
            if let EntryBody::ToolCall(call) = &mut self.entries[index].body {
                if let Some(title) = title {
                    call.title = title.clone();
                }
                if status.is_some() {
                    call.status = status.clone();
                }
            }
            self.touch(index);
            return;
        }
        // An update for a call we never saw (its start is older than our backlog) still shows.
        let call = ToolCall {
            id: id.to_string(),
            title: title.clone().unwrap_or_else(|| id.to_string()),
            kind: None,
            status: status.clone(),
        };
        self.push(seq, EntryBody::ToolCall(call));
    }

    fn tool_call_index(&self, id: &str) -> Option<usize> {
        self.entries.iter().rposition(|entry| matches!(&entry.body, EntryBody::ToolCall(call) if call.id == id))
    }

    fn permission_index(&self, request_id: &str) -> Option<usize> {
        self.permissions
            .iter()
            .rev()
            .copied()
            .find(|&index| matches!(&self.entries[index].body, EntryBody::Permission(p) if p.request_id == request_id))
    }
}

/// The message id and text of an entry when it is a message of the given kind.
fn chunk_of(body: &EntryBody, kind: ChunkKind) -> Option<(&Option<String>, &String)> {
    match (body, kind) {
        (EntryBody::Agent { message_id, text }, ChunkKind::Agent)
        | (EntryBody::Thought { message_id, text }, ChunkKind::Thought) => Some((message_id, text)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
