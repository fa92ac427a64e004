//! One session's transcript as the user sees it, folded from journal events the way the server
//! folds them for `message.list` (server/src/store/journal.rs `fold`): chunks continue the newest
//! entry when it is an open message of the same kind and id, a tool call is one entry updated in
//! place wherever it is, consecutive plans share one entry, and the end of a turn closes every
//! entry so that the next turn starts new ones.
//!
//! Events are applied at most once: every event carries a per-session sequence number, and an
//! event at or below the highest one applied is a replay and is ignored (DESIGN.md §2).

mod backlog;

use baton_protocol::{EventRecord, PermissionOption, PlanEntry, SessionEvent};

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Sequence number of the first event folded into the entry.
    pub seq: u64,
    pub body: EntryBody,
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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transcript {
    entries: Vec<Entry>,
    /// Entries before this index are closed: chunks and plans no longer fold into them.
    open_from: usize,
    last_seq: u64,
    older_omitted: bool,
}

impl Transcript {
    /// An empty transcript that has seen every event up to `last_seq`.
    pub fn starting_after(last_seq: u64) -> Self {
        Transcript { last_seq, ..Transcript::default() }
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
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
        self.entries.iter().rev().find_map(|entry| match &entry.body {
            EntryBody::Permission(p) if p.answer == PermissionAnswer::Pending => Some(p),
            _ => None,
        })
    }

    /// The permission request with this id, answered or not.
    pub fn permission(&self, request_id: &str) -> Option<&Permission> {
        self.entries.iter().rev().find_map(|entry| match &entry.body {
            EntryBody::Permission(p) if p.request_id == request_id => Some(p),
            _ => None,
        })
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
                match self.tool_call_mut(tool_call_id) {
                    Some(existing) => *existing = call,
                    None => self.push(seq, EntryBody::ToolCall(call)),
                }
            }
            SessionEvent::ToolCallUpdate { tool_call_id, title, status, .. } => {
                self.update_tool_call(seq, tool_call_id, title, status)
            }
            SessionEvent::Plan { entries } => match self.open_last().filter(|e| matches!(e.body, EntryBody::Plan(_))) {
                Some(entry) => entry.body = EntryBody::Plan(entries.clone()),
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
                match self.permission_mut(request_id) {
                    Some(existing) => *existing = permission,
                    None => self.push(seq, EntryBody::Permission(permission)),
                }
            }
            SessionEvent::PermissionResolved { request_id, option_id } => {
                if let Some(permission) = self.permission_mut(request_id) {
                    permission.answer = match option_id {
                        Some(id) => PermissionAnswer::Chosen(id.clone()),
                        None => PermissionAnswer::Abandoned,
                    };
                }
            }
            // Not shown in the transcript.
            SessionEvent::TurnStarted {}
            | SessionEvent::AvailableCommands { .. }
            | SessionEvent::Mode { .. }
            | SessionEvent::AgentUpdate { .. } => {}
        }
    }

    fn push(&mut self, seq: u64, body: EntryBody) {
        self.entries.push(Entry { seq, body });
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
        if let Some(call) = self.tool_call_mut(id) {
            if let Some(title) = title {
                call.title = title.clone();
            }
            if status.is_some() {
                call.status = status.clone();
            }
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

    fn tool_call_mut(&mut self, id: &str) -> Option<&mut ToolCall> {
        self.entries.iter_mut().rev().find_map(|entry| match &mut entry.body {
            EntryBody::ToolCall(call) if call.id == id => Some(call),
            _ => None,
        })
    }

    fn permission_mut(&mut self, request_id: &str) -> Option<&mut Permission> {
        self.entries.iter_mut().rev().find_map(|entry| match &mut entry.body {
            EntryBody::Permission(p) if p.request_id == request_id => Some(p),
            _ => None,
        })
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
