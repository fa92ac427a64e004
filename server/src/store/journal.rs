//! The per-session event journal and the folded message view built from it.
//!
//! Appending an event assigns the session's next sequence number, stores the event, folds it
//! into `messages` (chunks are appended in SQL, never rewritten whole), and queues the
//! `session.event` notification for after the commit.

use baton_protocol::{now_timestamp, EventRecord, Message, MessageKind, Notification, SessionEvent, SessionState};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

use super::records::{get_session, LeftoverProcess};
use super::{Outbox, Store, StoreError, StoreResult};

/// Appends one event inside a write and returns it with its sequence number.
pub fn append_event(
    conn: &Connection,
    outbox: &mut Outbox,
    session_id: &str,
    event: SessionEvent,
) -> StoreResult<EventRecord> {
    let turn_open = match &event {
        SessionEvent::TurnStarted {} => Some(1),
        SessionEvent::TurnCompleted { .. } => Some(0),
        _ => None,
    };
    // The statements of this path are cached: preparing them costs more than running them.
    let seq: Option<i64> = conn
        .prepare_cached(
            "UPDATE task_sessions SET last_seq = last_seq + 1, turn_open = COALESCE(?2, turn_open)
             WHERE id = ?1 RETURNING last_seq",
        )?
        .query_row(params![session_id, turn_open], |r| r.get(0))
        .optional()?;
    let seq = seq.ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))? as u64;
    let created_at = now_timestamp();
    let payload = serde_json::to_string(&event).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    conn.prepare_cached(
        "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![session_id, seq as i64, event.kind(), payload, created_at])?;
    fold(conn, session_id, seq, &event, &created_at)?;
    let record = EventRecord { session_id: session_id.to_string(), seq, event, created_at };
    outbox.push(Notification::Event(record.clone()));
    Ok(record)
}

struct LastRow {
    id: i64,
    kind: String,
    message_id: Option<String>,
    closed: bool,
}

fn last_row(conn: &Connection, session_id: &str) -> StoreResult<Option<LastRow>> {
    Ok(conn
        .prepare_cached(
            "SELECT id, kind, message_id, closed FROM messages WHERE session_id = ?1 ORDER BY seq DESC, id DESC LIMIT 1",
        )?
        .query_row([session_id], |r| {
            Ok(LastRow { id: r.get(0)?, kind: r.get(1)?, message_id: r.get(2)?, closed: r.get::<_, i64>(3)? != 0 })
        })
        .optional()?)
}

/// A new entry of the folded view.
struct NewRow<'a> {
    kind: MessageKind,
    text: &'a str,
    message_id: Option<&'a str>,
    tool_call_id: Option<&'a str>,
    status: Option<&'a str>,
    data: Option<&'a Value>,
}

impl<'a> NewRow<'a> {
    fn new(kind: MessageKind, text: &'a str) -> Self {
        NewRow { kind, text, message_id: None, tool_call_id: None, status: None, data: None }
    }
}

fn insert_row(conn: &Connection, session_id: &str, seq: u64, row: NewRow<'_>, now: &str) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO messages (session_id, seq, kind, message_id, tool_call_id, text, status, data, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
    )?
    .execute(params![
            session_id,
            seq as i64,
            row.kind.as_str(),
            row.message_id,
            row.tool_call_id,
            row.text,
            row.status,
            row.data.map(|d| d.to_string()),
            now
        ],
    )?;
    Ok(())
}

/// Adds a chunk to the open message of the same kind and id (as a part: O(1), the row is not
/// rewritten), or starts a new message.
fn fold_chunk(
    conn: &Connection,
    session_id: &str,
    seq: u64,
    kind: MessageKind,
    message_id: Option<&str>,
    text: &str,
    now: &str,
) -> StoreResult<()> {
    if let Some(last) = last_row(conn, session_id)? {
        if !last.closed && last.kind == kind.as_str() && last.message_id.as_deref() == message_id {
            conn.prepare_cached("INSERT INTO message_parts (message_row, seq, text) VALUES (?1, ?2, ?3)")?
                .execute(params![last.id, seq as i64, text])?;
            conn.prepare_cached("UPDATE messages SET updated_at = ?1 WHERE id = ?2")?.execute(params![now, last.id])?;
            return Ok(());
        }
    }
    insert_row(conn, session_id, seq, NewRow { message_id, ..NewRow::new(kind, text) }, now)
}

/// Folds the parts of a session's open messages into their text (at the end of a turn).
fn close_messages(conn: &Connection, session_id: &str) -> StoreResult<()> {
    conn.execute(
        "UPDATE messages SET text = text || (SELECT group_concat(p.text, '' ORDER BY p.seq) FROM message_parts p WHERE p.message_row = messages.id)
         WHERE session_id = ?1 AND closed = 0 AND EXISTS (SELECT 1 FROM message_parts p WHERE p.message_row = messages.id)",
        [session_id],
    )?;
    conn.execute(
        "DELETE FROM message_parts WHERE message_row IN (SELECT id FROM messages WHERE session_id = ?1 AND closed = 0)",
        [session_id],
    )?;
    conn.execute("UPDATE messages SET closed = 1 WHERE session_id = ?1 AND closed = 0", [session_id])?;
    Ok(())
}

fn merge_data(
    conn: &Connection,
    session_id: &str,
    tool_call_id: &str,
    patch: Map<String, Value>,
) -> StoreResult<Option<Value>> {
    let existing: Option<Option<String>> = conn
        .query_row(
            "SELECT data FROM messages WHERE session_id = ?1 AND tool_call_id = ?2",
            params![session_id, tool_call_id],
            |r| r.get(0),
        )
        .optional()?;
    let Some(existing) = existing else {
        return Ok(None);
    };
    let mut data = existing.and_then(|d| serde_json::from_str::<Value>(&d).ok()).unwrap_or_else(|| json!({}));
    if let Some(object) = data.as_object_mut() {
        object.extend(patch);
    }
    Ok(Some(data))
}

fn fold(conn: &Connection, session_id: &str, seq: u64, event: &SessionEvent, now: &str) -> StoreResult<()> {
    match event {
        SessionEvent::UserMessage { text } => {
            insert_row(conn, session_id, seq, NewRow::new(MessageKind::User, text), now)
        }
        SessionEvent::MessageChunk { message_id, text } => {
            fold_chunk(conn, session_id, seq, MessageKind::Agent, message_id.as_deref(), text, now)
        }
        SessionEvent::ThoughtChunk { message_id, text } => {
            fold_chunk(conn, session_id, seq, MessageKind::Thought, message_id.as_deref(), text, now)
        }
        SessionEvent::ToolCall { tool_call_id, title, tool_kind, status, content, raw_input } => {
            let data = json!({"tool_kind": tool_kind, "content": content, "raw_input": raw_input});
            let updated = conn.execute(
                "UPDATE messages SET text = ?1, status = ?2, data = ?3, updated_at = ?4 WHERE session_id = ?5 AND tool_call_id = ?6",
                params![title, status, data.to_string(), now, session_id, tool_call_id],
            )?;
            if updated == 0 {
                let row = NewRow {
                    tool_call_id: Some(tool_call_id),
                    status: status.as_deref(),
                    data: Some(&data),
                    ..NewRow::new(MessageKind::ToolCall, title)
                };
                insert_row(conn, session_id, seq, row, now)?;
            }
            Ok(())
        }
        SessionEvent::ToolCallUpdate { tool_call_id, title, status, content, raw_output } => {
            let mut patch = Map::new();
            if let Some(content) = content {
                patch.insert("content".into(), content.clone());
            }
            if let Some(raw_output) = raw_output {
                patch.insert("raw_output".into(), raw_output.clone());
            }
            match merge_data(conn, session_id, tool_call_id, patch.clone())? {
                Some(data) => {
                    conn.execute(
                        "UPDATE messages SET text = COALESCE(?1, text), status = COALESCE(?2, status), data = ?3, updated_at = ?4
                         WHERE session_id = ?5 AND tool_call_id = ?6",
                        params![title, status, data.to_string(), now, session_id, tool_call_id],
                    )?;
                    Ok(())
                }
                // An update for a call we never saw still deserves an entry.
                None => {
                    let text = title.clone().unwrap_or_else(|| tool_call_id.clone());
                    let data = Value::Object(patch);
                    let row = NewRow {
                        tool_call_id: Some(tool_call_id),
                        status: status.as_deref(),
                        data: Some(&data),
                        ..NewRow::new(MessageKind::ToolCall, &text)
                    };
                    insert_row(conn, session_id, seq, row, now)
                }
            }
        }
        SessionEvent::Plan { entries } => {
            let data = json!({"entries": entries});
            // Each plan replaces the previous one in full; consecutive plans share one entry.
            if let Some(last) = last_row(conn, session_id)? {
                if !last.closed && last.kind == MessageKind::Plan.as_str() {
                    conn.execute(
                        "UPDATE messages SET data = ?1, updated_at = ?2 WHERE id = ?3",
                        params![data.to_string(), now, last.id],
                    )?;
                    return Ok(());
                }
            }
            insert_row(conn, session_id, seq, NewRow { data: Some(&data), ..NewRow::new(MessageKind::Plan, "") }, now)
        }
        SessionEvent::Status { message } => {
            insert_row(conn, session_id, seq, NewRow::new(MessageKind::Status, message), now)
        }
        SessionEvent::Error { message } => {
            insert_row(conn, session_id, seq, NewRow::new(MessageKind::Error, message), now)
        }
        SessionEvent::PermissionRequest { request_id, tool_call, options } => {
            let data = json!({"request_id": request_id, "tool_call": tool_call, "options": options});
            let title = tool_call.get("title").and_then(Value::as_str).unwrap_or("Permission requested");
            let row = NewRow {
                message_id: Some(request_id),
                status: Some("pending"),
                data: Some(&data),
                ..NewRow::new(MessageKind::Permission, title)
            };
            insert_row(conn, session_id, seq, row, now)
        }
        SessionEvent::PermissionResolved { request_id, option_id } => {
            let status = match option_id {
                Some(option) => format!("selected:{option}"),
                None => "cancelled".to_string(),
            };
            conn.execute(
                "UPDATE messages SET status = ?1, updated_at = ?2 WHERE session_id = ?3 AND kind = 'permission' AND message_id = ?4",
                params![status, now, session_id, request_id],
            )?;
            Ok(())
        }
        SessionEvent::TurnCompleted { stop_reason } => {
            close_messages(conn, session_id)?;
            match SessionEvent::turn_end_note(stop_reason) {
                Some(note) => insert_row(conn, session_id, seq, NewRow::new(MessageKind::Status, &note), now),
                None => Ok(()),
            }
        }
        SessionEvent::TurnStarted {}
        | SessionEvent::AvailableCommands { .. }
        | SessionEvent::Mode { .. }
        | SessionEvent::AgentUpdate { .. } => Ok(()),
    }
}

fn message_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
    let kind: String = row.get(1)?;
    let kind = MessageKind::parse(&kind).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            1,
            rusqlite::types::Type::Text,
            format!("unknown message kind {kind}").into(),
        )
    })?;
    let data: Option<String> = row.get(6)?;
    Ok(Message {
        seq: row.get::<_, i64>(0)? as u64,
        kind,
        text: row.get(2)?,
        message_id: row.get(3)?,
        tool_call_id: row.get(4)?,
        status: row.get(5)?,
        data: data.and_then(|d| serde_json::from_str(&d).ok()),
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
    })
}

/// A page of events after a sequence number.
pub struct EventsPage {
    pub events: Vec<EventRecord>,
    /// The session's newest sequence number when the page was read.
    pub current_seq: u64,
}

impl Store {
    /// Appends events in order, in one write; returns them with their sequence numbers.
    pub async fn append_events(&self, session_id: &str, events: Vec<SessionEvent>) -> StoreResult<Vec<EventRecord>> {
        let session_id = session_id.to_string();
        self.write(move |conn, outbox| {
            events.into_iter().map(|event| append_event(conn, outbox, &session_id, event)).collect()
        })
        .await
    }

    /// Queues one event now (see [`Store::submit`]).
    pub fn submit_append(
        &self,
        session_id: &str,
        event: SessionEvent,
    ) -> StoreResult<super::PendingWrite<EventRecord>> {
        let session_id = session_id.to_string();
        self.submit(move |conn, outbox| append_event(conn, outbox, &session_id, event))
    }

    pub async fn append(&self, session_id: &str, event: SessionEvent) -> StoreResult<EventRecord> {
        let mut records = self.append_events(session_id, vec![event]).await?;
        records.pop().ok_or_else(|| StoreError::Corrupt("append returned nothing".into()))
    }

    /// The sequence number of the session's newest event (0 when the journal is empty).
    pub async fn current_seq(&self, session_id: &str) -> StoreResult<u64> {
        let session_id = session_id.to_string();
        self.read(move |conn| Ok(get_session(conn, &session_id)?.last_seq)).await
    }

    /// Whether a prompt of the user ever reached the session's journal.
    pub async fn has_user_messages(&self, session_id: &str) -> StoreResult<bool> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            Ok(conn.query_row(
                "SELECT EXISTS(SELECT 1 FROM messages WHERE session_id = ?1 AND kind = 'user')",
                [session_id],
                |r| r.get(0),
            )?)
        })
        .await
    }

    /// Events with `seq > after`, oldest first, at most `limit`.
    pub async fn events_after(&self, session_id: &str, after: u64, limit: usize) -> StoreResult<EventsPage> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            let current_seq = get_session(conn, &session_id)?.last_seq;
            let mut stmt = conn.prepare(
                "SELECT seq, payload, created_at FROM session_events WHERE session_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )?;
            let rows = stmt.query_map(params![session_id, after as i64, limit as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })?;
            let mut events = Vec::new();
            for row in rows {
                let (seq, payload, created_at) = row?;
                let event = serde_json::from_str(&payload).map_err(|e| StoreError::Corrupt(format!("event {seq}: {e}")))?;
                events.push(EventRecord { session_id: session_id.clone(), seq: seq as u64, event, created_at });
            }
            Ok(EventsPage { events, current_seq })
        })
        .await
    }

    /// The folded view. With `after_seq`, the oldest entries after it; otherwise the newest
    /// entries (before `before_seq` if given). Always returned oldest first.
    pub async fn list_messages(
        &self,
        session_id: &str,
        before_seq: Option<u64>,
        after_seq: Option<u64>,
        limit: usize,
    ) -> StoreResult<(Vec<Message>, bool)> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            get_session(conn, &session_id)?;
            // Sequence numbers are stored as i64; larger bounds mean "no bound".
            let before = before_seq.map(|s| s.min(i64::MAX as u64) as i64).unwrap_or(i64::MAX);
            let after = after_seq.map(|s| s.min(i64::MAX as u64) as i64).unwrap_or(-1);
            let ascending = after_seq.is_some();
            let sql = format!(
                "SELECT seq, kind,
                        text || COALESCE((SELECT group_concat(p.text, '' ORDER BY p.seq) FROM message_parts p WHERE p.message_row = messages.id), ''),
                        message_id, tool_call_id, status, data, created_at, updated_at FROM messages
                 WHERE session_id = ?1 AND seq > ?2 AND seq < ?3 ORDER BY seq {order}, id {order} LIMIT ?4",
                order = if ascending { "ASC" } else { "DESC" }
            );
            let mut stmt = conn.prepare(&sql)?;
            let rows = stmt.query_map(params![session_id, after, before, limit as i64 + 1], message_from_row)?;
            let mut messages = rows.collect::<Result<Vec<_>, _>>()?;
            let has_more = messages.len() > limit;
            messages.truncate(limit);
            if !ascending {
                messages.reverse();
            }
            Ok((messages, has_more))
        })
        .await
    }

    /// Startup reconciliation (DESIGN.md §5): turns left open are closed as interrupted with a
    /// status event; active sessions keep their state (they will report `needs_resume`); the
    /// executor records forget their processes. Returns the processes a previous run left
    /// behind, for the caller to make sure they are gone.
    pub async fn reconcile_after_restart(&self) -> StoreResult<Vec<LeftoverProcess>> {
        self.reconcile_after_restart_keeping(Vec::new()).await
    }

    /// [`Self::reconcile_after_restart`], leaving alone the sessions in `keep`: their agents
    /// still run (in the agent host) and are reattached, turns and records included.
    pub async fn reconcile_after_restart_keeping(&self, keep: Vec<String>) -> StoreResult<Vec<LeftoverProcess>> {
        let keep_json = serde_json::to_string(&keep).unwrap_or_else(|_| "[]".into());
        self.write(move |conn, outbox| {
            let open: Vec<String> = {
                let mut stmt = conn.prepare(
                    "SELECT id FROM task_sessions WHERE turn_open = 1 AND id NOT IN (SELECT value FROM json_each(?1))",
                )?;
                let rows = stmt.query_map([&keep_json], |r| r.get(0))?;
                rows.collect::<Result<_, _>>()?
            };
            for session_id in &open {
                append_event(
                    conn,
                    outbox,
                    session_id,
                    SessionEvent::TurnCompleted { stop_reason: "interrupted".into() },
                )?;
                append_event(
                    conn,
                    outbox,
                    session_id,
                    SessionEvent::status(
                        "The server restarted while the agent was working: that turn was interrupted. \
                         The interrupted prompt will not be sent again by itself.",
                    ),
                )?;
            }
            // Permission requests die with the agent that asked: mark them answered `cancelled`.
            let pending: Vec<(String, String)> = {
                let mut stmt = conn.prepare(
                    "SELECT session_id, message_id FROM messages WHERE kind = 'permission' AND status = 'pending'",
                )?;
                let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                rows.collect::<Result<_, _>>()?
            };
            for (session_id, request_id) in pending {
                append_event(
                    conn,
                    outbox,
                    &session_id,
                    SessionEvent::PermissionResolved { request_id, option_id: None },
                )?;
            }
            let leftovers: Vec<LeftoverProcess> = {
                let mut stmt = conn.prepare(
                    "SELECT session_id, pid, pid_start_time, agent_execution_id FROM executors_running
                     WHERE pid IS NOT NULL AND session_id NOT IN (SELECT value FROM json_each(?1))",
                )?;
                let rows = stmt.query_map([&keep_json], |r| {
                    Ok(LeftoverProcess {
                        session_id: r.get(0)?,
                        pid: r.get::<_, i64>(1)? as u32,
                        start_time: r.get::<_, Option<i64>>(2)?.map(|t| t as u64),
                        execution_id: r.get(3)?,
                    })
                })?;
                rows.collect::<Result<_, _>>()?
            };
            conn.execute(
                "UPDATE executors_running SET pid = NULL, pid_start_time = NULL, status = 'stopped', updated_at = ?1
                 WHERE (status IN ('starting', 'ready') OR pid IS NOT NULL)
                   AND session_id NOT IN (SELECT value FROM json_each(?2))",
                params![now_timestamp(), keep_json],
            )?;
            let active: i64 = conn.query_row(
                "SELECT COUNT(*) FROM task_sessions WHERE state IN (?1, ?2, ?3)",
                params![
                    SessionState::Starting.as_str(),
                    SessionState::Running.as_str(),
                    SessionState::WaitingForInput.as_str()
                ],
                |r| r.get(0),
            )?;
            tracing::info!(
                interrupted_turns = open.len(),
                active_sessions = active,
                leftovers = leftovers.len(),
                "reconciled after restart"
            );
            Ok(leftovers)
        })
        .await
    }
}
