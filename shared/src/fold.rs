//! The folded message view (PROTOCOL.md §7): how journal events become the entries of
//! `message.list`. The rules are here once, as [`fold_event`]; each fold keeps its entries its own
//! way behind [`FoldTarget`] — the server's in SQLite, the TUI's in its transcript, and
//! [`MessageFold`], a plain list of [`Message`]s for other clients and tests.
//!
//! The rules: a chunk continues the newest entry when that is an open message of the same kind
//! and message id (both absent counts as the same), otherwise it starts one; a tool call is one
//! entry, replaced or updated in place wherever it is; consecutive plans share one entry; a
//! permission request is an entry whose status becomes its answer; the end of a turn adds a note
//! when the turn did not simply finish and closes every entry, so the next turn starts new ones.

use std::convert::Infallible;

use serde_json::{json, Map, Value};

use crate::{EventRecord, Message, MessageKind, SessionEvent, ToolCallStatus};

/// A permission entry's `status`: `pending`, `selected:<option_id>` or `cancelled` (the request
/// went away unanswered: the turn ended, the agent stopped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionStatus {
    /// Not answered yet (`pending`).
    Pending,
    /// Answered with this option (`selected:<option_id>`).
    Selected(String),
    /// Gone unanswered (`cancelled`).
    Cancelled,
}

impl PermissionStatus {
    /// The answer a `permission_resolved` event carries.
    pub fn resolved(option_id: Option<&str>) -> PermissionStatus {
        match option_id {
            Some(option) => PermissionStatus::Selected(option.to_string()),
            None => PermissionStatus::Cancelled,
        }
    }

    /// The wire form (`Message::status`).
    pub fn to_wire(&self) -> String {
        match self {
            PermissionStatus::Pending => "pending".into(),
            PermissionStatus::Selected(option) => format!("selected:{option}"),
            PermissionStatus::Cancelled => "cancelled".into(),
        }
    }

    /// Reads the wire form; an absent status is pending. None for anything else.
    pub fn parse(status: Option<&str>) -> Option<PermissionStatus> {
        match status {
            None | Some("pending") => Some(PermissionStatus::Pending),
            Some("cancelled") => Some(PermissionStatus::Cancelled),
            Some(other) => other.strip_prefix("selected:").map(|option| PermissionStatus::Selected(option.to_string())),
        }
    }
}

/// The newest entry of a fold, while no turn has ended since it was added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastOpen {
    /// The entry's kind.
    pub kind: MessageKind,
    /// The entry's message id, if it has one.
    pub message_id: Option<String>,
}

/// What a fold does with its entries; [`fold_event`] decides which, and when. `at` is the
/// event's `created_at`, the `updated_at` of what it changes.
pub trait FoldTarget {
    /// What the target's storage can fail with.
    type Error;
    /// The newest entry, unless a turn ended after it was added.
    fn last_open(&mut self) -> Result<Option<LastOpen>, Self::Error>;
    /// Adds an entry at the end (`created_at` = `updated_at` = the event's time).
    fn push(&mut self, entry: Message) -> Result<(), Self::Error>;
    /// Adds text to the newest entry, a message still streaming.
    fn append_text(&mut self, seq: u64, text: &str, at: &str) -> Result<(), Self::Error>;
    /// Sets the `data` of the newest entry, a plan.
    fn replace_plan(&mut self, data: Value, at: &str) -> Result<(), Self::Error>;
    /// Sets the text (title), status and data of the tool call `id`; false when it has no entry.
    fn replace_tool_call(
        &mut self,
        id: &str,
        title: &str,
        status: Option<&ToolCallStatus>,
        data: Value,
        at: &str,
    ) -> Result<bool, Self::Error>;
    /// Sets the title and status of the tool call `id` where given and merges `patch` into its
    /// data; false when it has no entry.
    fn update_tool_call(
        &mut self,
        id: &str,
        title: Option<&str>,
        status: Option<&ToolCallStatus>,
        patch: &Map<String, Value>,
        at: &str,
    ) -> Result<bool, Self::Error>;
    /// The data of the tool call `id`, if it has an entry.
    fn tool_call_data(&mut self, id: &str) -> Result<Option<Value>, Self::Error>;
    /// Sets the status of the permission entry of `request_id`, if there is one.
    fn set_permission_status(
        &mut self,
        request_id: &str,
        status: &PermissionStatus,
        at: &str,
    ) -> Result<(), Self::Error>;
    /// Closes every entry: chunks and plans no longer fold into them.
    fn close_all(&mut self) -> Result<(), Self::Error>;
}

/// A new entry of `kind` starting at `seq`.
fn entry(seq: u64, kind: MessageKind, text: &str, at: &str) -> Message {
    Message {
        seq,
        kind,
        text: text.to_string(),
        message_id: None,
        tool_call_id: None,
        status: None,
        data: None,
        created_at: at.to_string(),
        updated_at: at.to_string(),
    }
}

/// Folds one event (the `seq`-th of its session, journaled at `at`) into `target`.
pub fn fold_event<T: FoldTarget>(target: &mut T, seq: u64, event: &SessionEvent, at: &str) -> Result<(), T::Error> {
    match event {
        SessionEvent::UserMessage { text, .. } => target.push(entry(seq, MessageKind::User, text, at)),
        SessionEvent::MessageChunk { message_id, text } => {
            fold_chunk(target, seq, MessageKind::Agent, message_id.as_deref(), text, at)
        }
        SessionEvent::ThoughtChunk { message_id, text } => {
            fold_chunk(target, seq, MessageKind::Thought, message_id.as_deref(), text, at)
        }
        SessionEvent::ToolCall { tool_call_id, title, tool_kind, status, content, raw_input } => {
            let data = json!({"tool_kind": tool_kind, "content": content, "raw_input": raw_input});
            if target.replace_tool_call(tool_call_id, title, status.as_ref(), data.clone(), at)? {
                return Ok(());
            }
            target.push(Message {
                tool_call_id: Some(tool_call_id.clone()),
                status: status.as_ref().map(|s| s.as_str().to_string()),
                data: Some(data),
                ..entry(seq, MessageKind::ToolCall, title, at)
            })
        }
        SessionEvent::ToolCallUpdate { tool_call_id, title, status, content, raw_output } => {
            let mut patch = Map::new();
            if let Some(content) = content {
                patch.insert("content".into(), content.clone());
            }
            if let Some(raw_output) = raw_output {
                patch.insert("raw_output".into(), raw_output.clone());
            }
            if target.update_tool_call(tool_call_id, title.as_deref(), status.as_ref(), &patch, at)? {
                return Ok(());
            }
            // An update of a call never seen (its start is older than what the fold holds)
            // still deserves an entry.
            target.push(Message {
                tool_call_id: Some(tool_call_id.clone()),
                status: status.as_ref().map(|s| s.as_str().to_string()),
                data: Some(Value::Object(patch)),
                ..entry(seq, MessageKind::ToolCall, title.as_deref().unwrap_or(tool_call_id), at)
            })
        }
        SessionEvent::Plan { entries } => {
            let data = json!({"entries": entries});
            if target.last_open()?.is_some_and(|last| last.kind == MessageKind::Plan) {
                target.replace_plan(data, at)
            } else {
                target.push(Message { data: Some(data), ..entry(seq, MessageKind::Plan, "", at) })
            }
        }
        SessionEvent::Status { message } => target.push(entry(seq, MessageKind::Status, message, at)),
        SessionEvent::Error { message } => target.push(entry(seq, MessageKind::Error, message, at)),
        SessionEvent::PermissionRequest { request_id, tool_call, options } => {
            let title = tool_call.get("title").and_then(Value::as_str).unwrap_or("Permission requested");
            target.push(Message {
                message_id: Some(request_id.clone()),
                status: Some(PermissionStatus::Pending.to_wire()),
                data: Some(json!({"request_id": request_id, "tool_call": tool_call, "options": options})),
                ..entry(seq, MessageKind::Permission, title, at)
            })
        }
        SessionEvent::PermissionResolved { request_id, option_id } => {
            target.set_permission_status(request_id, &PermissionStatus::resolved(option_id.as_deref()), at)
        }
        SessionEvent::TurnCompleted { stop_reason, .. } => {
            // A turn that did not simply finish (cancelled, refused...) says so; interrupted and
            // failed turns are explained by their own status or error line.
            if let Some(note) = stop_reason.turn_end_note() {
                target.push(entry(seq, MessageKind::Status, &note, at))?;
            }
            target.close_all()
        }
        SessionEvent::TerminalOutput { terminal_id, command, output, offset, exit } => {
            let piece = TerminalPiece { command: command.as_deref(), output, offset: *offset, exit: exit.as_ref() };
            fold_terminal(target, seq, terminal_id, piece, at)
        }
        SessionEvent::TurnStarted { .. }
        | SessionEvent::AvailableCommands { .. }
        | SessionEvent::Mode { .. }
        | SessionEvent::Options { .. }
        | SessionEvent::Queue { .. }
        | SessionEvent::AgentUpdate { .. }
        | SessionEvent::Unknown(_) => Ok(()),
    }
}

/// The most of a terminal's output its folded entry keeps (the end of it); the journal keeps
/// the rest.
pub const MAX_FOLDED_TERMINAL_BYTES: usize = 64 * 1024;

/// A terminal's events fold into one tool-call entry, `terminal:<id>`: its command is the title,
/// its output (the last [`MAX_FOLDED_TERMINAL_BYTES`]) and exit in `data.terminal`.
/// One `terminal_output` event's parts.
struct TerminalPiece<'a> {
    command: Option<&'a str>,
    output: &'a str,
    offset: u64,
    exit: Option<&'a crate::TerminalExit>,
}

fn fold_terminal<T: FoldTarget>(
    target: &mut T,
    seq: u64,
    terminal_id: &str,
    piece: TerminalPiece<'_>,
    at: &str,
) -> Result<(), T::Error> {
    let TerminalPiece { command, output, offset, exit } = piece;
    let id = format!("terminal:{terminal_id}");
    let status = exit.map(|e| if e.success() { ToolCallStatus::Completed } else { ToolCallStatus::Failed });
    let Some(mut data) = target.tool_call_data(&id)? else {
        let title = format!("$ {}", command.unwrap_or(terminal_id));
        let total = offset + output.len() as u64;
        let terminal = json!({"terminal_id": terminal_id, "output": tail(output), "total": total, "exit": exit});
        return target.push(Message {
            tool_call_id: Some(id),
            status: Some(status.unwrap_or(ToolCallStatus::InProgress).as_str().to_string()),
            data: Some(json!({"tool_kind": "execute", "terminal": terminal})),
            ..entry(seq, MessageKind::ToolCall, &title, at)
        });
    };
    let terminal = data.get_mut("terminal").and_then(Value::as_object_mut);
    let mut patch = Map::new();
    if let Some(terminal) = terminal {
        let total = terminal.get("total").and_then(Value::as_u64).unwrap_or_default();
        // What the entry holds already (a piece folded twice) is not added again.
        let skip = usize::try_from(total.saturating_sub(offset)).unwrap_or(usize::MAX).min(output.len());
        let new = output.get(skip..).unwrap_or_default();
        let mut text = terminal.get("output").and_then(Value::as_str).unwrap_or_default().to_string();
        text.push_str(new);
        terminal.insert("output".into(), Value::String(tail(&text)));
        terminal.insert("total".into(), json!(total.max(offset + output.len() as u64)));
        if let Some(exit) = exit {
            terminal.insert("exit".into(), json!(exit));
        }
        patch.insert("terminal".into(), Value::Object(terminal.clone()));
    }
    target.update_tool_call(&id, None, status.as_ref(), &patch, at).map(|_| ())
}

/// The end of `text`, at most [`MAX_FOLDED_TERMINAL_BYTES`], cut at a character boundary.
fn tail(text: &str) -> String {
    if text.len() <= MAX_FOLDED_TERMINAL_BYTES {
        return text.to_string();
    }
    let mut start = text.len() - MAX_FOLDED_TERMINAL_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

fn fold_chunk<T: FoldTarget>(
    target: &mut T,
    seq: u64,
    kind: MessageKind,
    message_id: Option<&str>,
    text: &str,
    at: &str,
) -> Result<(), T::Error> {
    let continues =
        target.last_open()?.is_some_and(|last| last.kind == kind && last.message_id.as_deref() == message_id);
    if continues {
        target.append_text(seq, text, at)
    } else {
        target.push(Message { message_id: message_id.map(str::to_string), ..entry(seq, kind, text, at) })
    }
}

/// The folded view as a list of [`Message`]s, the same as `message.list` returns for the events
/// applied (a web or script client can keep one per session).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageFold {
    messages: Vec<Message>,
    /// Entries before this index are closed.
    open_from: usize,
    last_seq: u64,
}

impl MessageFold {
    /// Applies a journal event; an event at or below the highest seq applied is a replay and
    /// changes nothing (false).
    pub fn apply(&mut self, record: &EventRecord) -> bool {
        if record.seq <= self.last_seq {
            return false;
        }
        self.last_seq = record.seq;
        let Ok(()) = fold_event(self, record.seq, &record.event, &record.created_at);
        true
    }

    /// The entries folded so far, ordered by `seq`.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn tool_call(&mut self, id: &str) -> Option<&mut Message> {
        self.messages
            .iter_mut()
            .rev()
            .find(|m| m.kind == MessageKind::ToolCall && m.tool_call_id.as_deref() == Some(id))
    }
}

impl FoldTarget for MessageFold {
    type Error = Infallible;

    fn last_open(&mut self) -> Result<Option<LastOpen>, Infallible> {
        let open = self.messages.len() > self.open_from;
        Ok(self.messages.last().filter(|_| open).map(|m| LastOpen { kind: m.kind, message_id: m.message_id.clone() }))
    }

    fn push(&mut self, entry: Message) -> Result<(), Infallible> {
        self.messages.push(entry);
        Ok(())
    }

    fn append_text(&mut self, _seq: u64, text: &str, at: &str) -> Result<(), Infallible> {
        if let Some(last) = self.messages.last_mut() {
            last.text.push_str(text);
            last.updated_at = at.to_string();
        }
        Ok(())
    }

    fn replace_plan(&mut self, data: Value, at: &str) -> Result<(), Infallible> {
        if let Some(last) = self.messages.last_mut() {
            last.data = Some(data);
            last.updated_at = at.to_string();
        }
        Ok(())
    }

    fn replace_tool_call(
        &mut self,
        id: &str,
        title: &str,
        status: Option<&ToolCallStatus>,
        data: Value,
        at: &str,
    ) -> Result<bool, Infallible> {
        let Some(call) = self.tool_call(id) else { return Ok(false) };
        call.text = title.to_string();
        call.status = status.map(|s| s.as_str().to_string());
        call.data = Some(data);
        call.updated_at = at.to_string();
        Ok(true)
    }

    fn update_tool_call(
        &mut self,
        id: &str,
        title: Option<&str>,
        status: Option<&ToolCallStatus>,
        patch: &Map<String, Value>,
        at: &str,
    ) -> Result<bool, Infallible> {
        let Some(call) = self.tool_call(id) else { return Ok(false) };
        if let Some(title) = title {
            call.text = title.to_string();
        }
        if let Some(status) = status {
            call.status = Some(status.as_str().to_string());
        }
        let data = call.data.get_or_insert_with(|| json!({}));
        if let Some(object) = data.as_object_mut() {
            object.extend(patch.clone());
        }
        call.updated_at = at.to_string();
        Ok(true)
    }

    fn tool_call_data(&mut self, id: &str) -> Result<Option<Value>, Infallible> {
        Ok(self.tool_call(id).map(|call| call.data.clone().unwrap_or_else(|| json!({}))))
    }

    fn set_permission_status(
        &mut self,
        request_id: &str,
        status: &PermissionStatus,
        at: &str,
    ) -> Result<(), Infallible> {
        for entry in self
            .messages
            .iter_mut()
            .filter(|m| m.kind == MessageKind::Permission && m.message_id.as_deref() == Some(request_id))
        {
            entry.status = Some(status.to_wire());
            entry.updated_at = at.to_string();
        }
        Ok(())
    }

    fn close_all(&mut self) -> Result<(), Infallible> {
        self.open_from = self.messages.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_status_round_trips_its_wire_form() {
        for status in
            [PermissionStatus::Pending, PermissionStatus::Selected("allow".into()), PermissionStatus::Cancelled]
        {
            assert_eq!(PermissionStatus::parse(Some(&status.to_wire())), Some(status));
        }
        assert_eq!(PermissionStatus::parse(None), Some(PermissionStatus::Pending));
        assert_eq!(PermissionStatus::parse(Some("maybe")), None);
    }
}
