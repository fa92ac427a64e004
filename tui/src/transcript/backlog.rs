//! Building a transcript from the server's folded view (`message.list`).
//!
//! A folded entry says where it starts (`seq` of its first event) but not up to which event it
//! was folded, and only the newest entry can still be growing (a streaming agent message, a
//! running tool call). So the newest entry is dropped and rebuilt from its events: the
//! transcript claims to hold everything *before* that entry, and subscribing with that
//! `since_seq` replays the rest. Replayed updates of older tool calls and permissions set fields
//! and are harmless to apply twice; chunks and plans only ever fold into the newest entry, so
//! the older entries are loaded closed.

use baton_protocol::{Message, MessageKind, PermissionOption, PermissionStatus, PlanEntry, ToolCallStatus};
use serde_json::Value;

use super::{Entry, EntryBody, Permission, ToolCall, Transcript};

impl Transcript {
    /// A transcript holding the folded backlog, ready to be completed by subscribing with
    /// `since_seq = last_seq()`. `older_omitted` is the list's `has_more`: the server returns
    /// the newest page.
    pub fn from_backlog(mut messages: Vec<Message>, older_omitted: bool) -> Transcript {
        messages.sort_by_key(|m| m.seq);
        let last_seq = match messages.pop() {
            Some(newest) => newest.seq.saturating_sub(1),
            None => 0,
        };
        let rev = super::next_rev();
        let entries: Vec<Entry> = messages.into_iter().map(|m| entry_from_message(m, rev)).collect();
        let mut transcript =
            Transcript { open_from: entries.len(), entries, last_seq, older_omitted, rev, ..Transcript::default() };
        transcript.entries_moved();
        transcript
    }

    /// The `before_seq` that pages in what comes before the entries held: the oldest entry's
    /// seq, or with no entry yet, the seq of the newest backlog entry being rebuilt.
    pub fn oldest_seq(&self) -> u64 {
        self.entries.first().map_or(self.last_seq.saturating_add(1), |entry| entry.seq)
    }

    /// Puts a page of older messages (`message.list` with `before_seq = oldest_seq()`) in front
    /// of the entries held; `has_more` is the page's. Messages not older than the oldest entry
    /// held are already here (folded or rebuilt) and are skipped. Older entries are complete,
    /// so they are loaded closed, like the backlog. Returns how many entries were added.
    pub fn prepend_older(&mut self, mut messages: Vec<Message>, has_more: bool) -> usize {
        let before = self.oldest_seq();
        messages.retain(|m| m.seq < before);
        messages.sort_by_key(|m| m.seq);
        self.rev = super::next_rev();
        let rev = self.rev;
        let older: Vec<Entry> = messages.into_iter().map(|m| entry_from_message(m, rev)).collect();
        let added = older.len();
        self.entries.splice(0..0, older);
        self.entries_moved();
        // The open entries moved down by as many.
        self.open_from += added;
        self.older_omitted = has_more;
        added
    }
}

pub(super) fn entry_from_message(message: Message, rev: u64) -> Entry {
    let Message { seq, kind, text, message_id, tool_call_id, status, data, .. } = message;
    let data = data.unwrap_or(Value::Null);
    let body = match kind {
        MessageKind::User => EntryBody::User(text),
        MessageKind::Agent => EntryBody::Agent { message_id, text },
        MessageKind::Thought => EntryBody::Thought { message_id, text },
        MessageKind::ToolCall => EntryBody::ToolCall(ToolCall {
            id: tool_call_id.unwrap_or_default(),
            title: text,
            kind: string_field(&data, &["tool_kind", "kind"]),
            status: status.as_deref().map(ToolCallStatus::parse),
            data,
        }),
        MessageKind::Plan => EntryBody::Plan(plan_entries(&data, &text)),
        MessageKind::Status => EntryBody::Status(text),
        MessageKind::Error => EntryBody::Error(text),
        MessageKind::Permission => EntryBody::Permission(permission(&data, message_id, text, status)),
    };
    Entry { seq, body, rev }
}

fn string_field(data: &Value, names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| data.get(name).and_then(Value::as_str)).map(str::to_string)
}

/// Plan entries from `data` (`{"entries": [...]}` or the bare list); the text, one entry a line,
/// when `data` holds none.
pub(super) fn plan_entries(data: &Value, text: &str) -> Vec<PlanEntry> {
    let list = data.get("entries").unwrap_or(data);
    if let Ok(entries) = serde_json::from_value::<Vec<PlanEntry>>(list.clone()) {
        return entries;
    }
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| PlanEntry {
            content: line.trim().to_string(),
            priority: Default::default(),
            status: Default::default(),
        })
        .collect()
}

fn permission(data: &Value, request_id: Option<String>, title: String, status: Option<String>) -> Permission {
    let options = data
        .get("options")
        .and_then(|o| serde_json::from_value::<Vec<PermissionOption>>(o.clone()).ok())
        .unwrap_or_default();
    // A status this client does not know is not an answer it can show.
    let answer = PermissionStatus::parse(status.as_deref()).unwrap_or(PermissionStatus::Cancelled);
    Permission {
        request_id: string_field(data, &["request_id"]).or(request_id).unwrap_or_default(),
        title,
        tool_call: data.get("tool_call").cloned().unwrap_or(Value::Null),
        options,
        answer,
    }
}
