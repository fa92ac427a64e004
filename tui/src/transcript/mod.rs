//! One session's transcript as the user sees it, folded from journal events by the protocol's
//! fold rules (`baton_protocol::fold_event`, the same the server's `message.list` is folded by):
//! the transcript is the [`FoldTarget`] that keeps the entries as the view draws them.
//!
//! Events are applied at most once: every event carries a per-session sequence number, and an
//! event at or below the highest one applied is a replay and is ignored (docs/PROTOCOL.md §6).

mod backlog;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use std::convert::Infallible;

use baton_protocol::{
    fold_event, EventRecord, FoldTarget, LastOpen, Message, MessageKind, PermissionOption, PermissionStatus, PlanEntry,
    ToolCallStatus,
};
use serde_json::{Map, Value};

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
    pub status: Option<ToolCallStatus>,
    /// What the fold keeps of the call (`baton_protocol::fold_event`): `content` (ACP tool call
    /// content: text, diffs, terminals), `raw_input` and `raw_output`, as the agent sent them.
    pub data: Value,
}

impl ToolCall {
    /// The call's input as the agent gave it (ACP `rawInput`), when it gave one.
    pub fn raw_input(&self) -> Option<&Value> {
        self.data.get("raw_input").filter(|v| !v.is_null())
    }

    /// The call's output as the agent gave it (ACP `rawOutput`), when it gave one.
    pub fn raw_output(&self) -> Option<&Value> {
        self.data.get("raw_output").filter(|v| !v.is_null())
    }

    /// A terminal's output (the end of it) when the call is one of the agent's terminals
    /// (`terminal_output` events), with its exit once it is over.
    pub fn terminal(&self) -> Option<(&str, Option<&Value>)> {
        let terminal = self.data.get("terminal")?;
        let output = terminal.get("output").and_then(Value::as_str).unwrap_or_default();
        Some((output, terminal.get("exit").filter(|e| !e.is_null())))
    }

    /// The ACP content items produced so far (text, diffs, terminals).
    pub fn content(&self) -> &[Value] {
        self.data.get("content").and_then(Value::as_array).map_or(&[], Vec::as_slice)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Permission {
    pub request_id: String,
    /// What the agent wants to do (the title of the tool call it asks about).
    pub title: String,
    /// The tool call asked about, as the agent sent it (its input, its diff), shown where the
    /// question is asked.
    pub tool_call: serde_json::Value,
    pub options: Vec<PermissionOption>,
    pub answer: PermissionStatus,
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
        let Ok(()) = fold_event(self, record.seq, &record.event, &record.created_at);
        true
    }

    /// The newest permission request still waiting for an answer.
    pub fn pending_permission(&self) -> Option<&Permission> {
        self.permissions_newest_first().find(|p| p.answer == PermissionStatus::Pending)
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

    fn push(&mut self, seq: u64, body: EntryBody) {
        if matches!(body, EntryBody::Permission(_)) {
            self.permissions.push(self.entries.len());
        }
        self.rev = next_rev();
        self.entries.push(Entry { seq, body, rev: self.rev });
        self.log_change(self.entries.len() - 1);
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

impl FoldTarget for Transcript {
    type Error = Infallible;

    fn last_open(&mut self) -> Result<Option<LastOpen>, Infallible> {
        let open = self.entries.len() > self.open_from;
        Ok(self.entries.last().filter(|_| open).map(|entry| match &entry.body {
            EntryBody::Agent { message_id, .. } => {
                LastOpen { kind: MessageKind::Agent, message_id: message_id.clone() }
            }
            EntryBody::Thought { message_id, .. } => {
                LastOpen { kind: MessageKind::Thought, message_id: message_id.clone() }
            }
            EntryBody::User(_) => LastOpen { kind: MessageKind::User, message_id: None },
            EntryBody::ToolCall(_) => LastOpen { kind: MessageKind::ToolCall, message_id: None },
            EntryBody::Plan(_) => LastOpen { kind: MessageKind::Plan, message_id: None },
            EntryBody::Status(_) => LastOpen { kind: MessageKind::Status, message_id: None },
            EntryBody::Error(_) => LastOpen { kind: MessageKind::Error, message_id: None },
            EntryBody::Permission(p) => {
                LastOpen { kind: MessageKind::Permission, message_id: Some(p.request_id.clone()) }
            }
        }))
    }

    fn push(&mut self, entry: Message) -> Result<(), Infallible> {
        let entry = backlog::entry_from_message(entry, 0);
        self.push(entry.seq, entry.body);
        Ok(())
    }

    fn append_text(&mut self, _seq: u64, chunk: &str, _at: &str) -> Result<(), Infallible> {
        if let Some(entry) = self.entries.last_mut() {
            if let EntryBody::Agent { text, .. } | EntryBody::Thought { text, .. } = &mut entry.body {
                text.push_str(chunk);
            }
            self.touch(self.entries.len() - 1);
        }
        Ok(())
    }

    fn replace_plan(&mut self, data: Value, _at: &str) -> Result<(), Infallible> {
        if let Some(entry) = self.entries.last_mut() {
            entry.body = EntryBody::Plan(backlog::plan_entries(&data, ""));
            self.touch(self.entries.len() - 1);
        }
        Ok(())
    }

    fn replace_tool_call(
        &mut self,
        id: &str,
        title: &str,
        status: Option<&ToolCallStatus>,
        data: Value,
        _at: &str,
    ) -> Result<bool, Infallible> {
        let Some(index) = self.tool_call_index(id) else { return Ok(false) };
        self.entries[index].body = EntryBody::ToolCall(ToolCall {
            id: id.to_string(),
            title: title.to_string(),
            kind: data.get("tool_kind").and_then(Value::as_str).map(str::to_string),
            status: status.cloned(),
            data,
        });
        self.touch(index);
        Ok(true)
    }

    fn update_tool_call(
        &mut self,
        id: &str,
        title: Option<&str>,
        status: Option<&ToolCallStatus>,
        patch: &Map<String, Value>,
        _at: &str,
    ) -> Result<bool, Infallible> {
        let Some(index) = self.tool_call_index(id) else { return Ok(false) };
        if let EntryBody::ToolCall(call) = &mut self.entries[index].body {
            if let Some(title) = title {
                call.title = title.to_string();
            }
            if let Some(status) = status {
                call.status = Some(status.clone());
            }
            // Merged as the server's fold merges it, so the live call and a reloaded one agree.
            if !call.data.is_object() {
                call.data = Value::Object(Map::new());
            }
            if let Some(object) = call.data.as_object_mut() {
                object.extend(patch.clone());
            }
        }
        self.touch(index);
        Ok(true)
    }

    fn tool_call_data(&mut self, id: &str) -> Result<Option<Value>, Infallible> {
        let Some(index) = self.tool_call_index(id) else { return Ok(None) };
        Ok(match &self.entries[index].body {
            EntryBody::ToolCall(call) => Some(call.data.clone()),
            _ => None,
        })
    }

    fn set_permission_status(
        &mut self,
        request_id: &str,
        status: &PermissionStatus,
        _at: &str,
    ) -> Result<(), Infallible> {
        if let Some(index) = self.permission_index(request_id) {
            if let EntryBody::Permission(permission) = &mut self.entries[index].body {
                permission.answer = status.clone();
            }
            self.touch(index);
        }
        Ok(())
    }

    fn close_all(&mut self) -> Result<(), Infallible> {
        self.open_from = self.entries.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
