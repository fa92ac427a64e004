//! The per-session event journal and the folded message view built from it.
//!
//! Appending an event assigns the session's next sequence number, stores the event, folds it
//! into `messages` (chunks are appended in SQL, never rewritten whole), and queues the
//! `session.event` notification for after the commit.

use baton_protocol::{
    fold_event, now_timestamp, CutText, EventRecord, FoldTarget, LastOpen, Message, MessageKind, Notification,
    PermissionStatus, SessionEvent, SessionState, ToolCallStatus, MESSAGE_TEXT_CUT,
};
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Map, Value};

use super::records::{get_session, transition_in, ExecutorStatus, LeftoverProcess, Transition};
use super::{Outbox, Store, StoreError, StoreResult};
use crate::hub::Published;

/// Appends one event inside a write and returns it with its sequence number.
pub fn append_event(
    conn: &Connection,
    outbox: &mut Outbox,
    session_id: &str,
    event: SessionEvent,
) -> StoreResult<EventRecord> {
    journal_event(conn, outbox, session_id, event, true).map(|record| record.expect("kept when asked for"))
}

fn journal_event(
    conn: &Connection,
    outbox: &mut Outbox,
    session_id: &str,
    event: SessionEvent,
    keep: bool,
) -> StoreResult<Option<EventRecord>> {
    let turn_open = turn_open_after(&event);
    // The statements of this path are cached: preparing them costs more than running them.
    // An UPDATE and a SELECT instead of `UPDATE … RETURNING`: RETURNING opens a temporary
    // b-tree and a statement journal at every call, which cost more than the second statement.
    let updated = conn
        .prepare_cached(
            "UPDATE task_sessions SET last_seq = last_seq + 1, turn_open = COALESCE(?2, turn_open) WHERE id = ?1",
        )?
        .execute(params![session_id, turn_open])?;
    if updated == 0 {
        return Err(StoreError::NotFound(format!("session {session_id}")));
    }
    let seq: i64 = conn
        .prepare_cached("SELECT last_seq FROM task_sessions WHERE id = ?1")?
        .query_row([session_id], |r| r.get(0))?;
    let mut last = LastRow::default();
    let record = record_event(conn, None, outbox, session_id, seq as u64, event, keep, &mut last)?;
    last.write_part(conn)?;
    Ok(record)
}

/// The time of an event journaled now ([`now_timestamp`]'s text), formatted once per
/// millisecond per thread: a stream journals several events per millisecond, and formatting
/// the time was a few percent of the writer's time per event.
fn journal_time() -> String {
    thread_local! {
        static LAST: std::cell::RefCell<(i64, String)> = const { std::cell::RefCell::new((i64::MIN, String::new())) };
    }
    let now = chrono::Utc::now();
    let millis = now.timestamp_millis();
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != millis {
            *last = (millis, baton_protocol::format_timestamp(now));
        }
        last.1.clone()
    })
}

/// Whether the session's turn is open after `event` (`None`: unchanged).
fn turn_open_after(event: &SessionEvent) -> Option<bool> {
    match event {
        SessionEvent::TurnStarted { .. } => Some(true),
        SessionEvent::TurnCompleted { .. } => Some(false),
        _ => None,
    }
}

/// The statement that stores an event (`record_event`).
pub(super) const INSERT_EVENT: &str =
    "INSERT INTO session_events (session_id, seq, kind, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5)";

/// Stores `event` as the session's event `seq`, folds it into the messages, and queues its
/// notification. The session's journal cursor (`last_seq`) is the caller's. `insert` is
/// [`INSERT_EVENT`] prepared by the caller (the writer's streaming path holds it for its life,
/// so that an event does not look it up in the statement cache and put it back); without it,
/// the cached one is used.
#[allow(clippy::too_many_arguments)]
fn record_event(
    conn: &Connection,
    insert: Option<&mut rusqlite::Statement<'_>>,
    outbox: &mut Outbox,
    session_id: &str,
    seq: u64,
    event: SessionEvent,
    keep: bool,
    last: &mut LastRow,
) -> StoreResult<Option<EventRecord>> {
    let created_at = journal_time();
    let payload = serde_json::to_string(&event).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let values = params![session_id, seq as i64, event.kind(), payload, created_at];
    match insert {
        Some(statement) => statement.execute(values)?,
        None => conn.prepare_cached(INSERT_EVENT)?.execute(values)?,
    };
    fold_event(&mut SqlFold { conn, session_id, last }, seq, &event, &created_at)?;
    super::options::project(conn, session_id, &event)?;
    let record = EventRecord { session_id: session_id.to_string(), seq, event, created_at };
    let kept = keep.then(|| record.clone());
    outbox.push(Published::with_stored_event(Notification::Event(record), payload));
    Ok(kept)
}

/// An agent update queued for the writer as data, not as a closure (the streaming path: one
/// per chunk).
pub(super) struct Append {
    pub session_id: String,
    pub event: SessionEvent,
    /// A hosted agent's output line this update came from: the session's output cursor moves
    /// to it in the same write.
    pub host_seq: Option<u64>,
}

/// What the writer knows of one session while it appends a run of that session's updates
/// inside one batch, so that each update costs its own rows only: the journal cursor
/// (`last_seq`, `turn_open`) is read once and written back once, before any other write of
/// the batch and before the commit ([`Streak::flush`]); the newest message row is remembered
/// between updates.
pub(super) struct Streak {
    pub(super) session_id: String,
    last_seq: u64,
    turn_open: bool,
    /// The cursor moved since it was read.
    dirty: bool,
    last: LastRow,
}

impl Streak {
    fn load(conn: &Connection, session_id: &str) -> StoreResult<Streak> {
        let (last_seq, turn_open): (i64, i64) = conn
            .prepare_cached("SELECT last_seq, turn_open FROM task_sessions WHERE id = ?1")?
            .query_row([session_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
        Ok(Streak {
            session_id: session_id.to_string(),
            last_seq: last_seq.max(0) as u64,
            turn_open: turn_open != 0,
            dirty: false,
            last: LastRow::default(),
        })
    }

    /// The streak of `session_id`, started unless one runs (the writer ends another session's
    /// streak first); fails, writing nothing, when the session does not exist.
    pub(super) fn ensure<'a>(
        streak: &'a mut Option<Streak>,
        conn: &Connection,
        session_id: &str,
    ) -> StoreResult<&'a mut Streak> {
        let current = match streak.take() {
            Some(current) if current.session_id == session_id => current,
            Some(other) => {
                *streak = Some(other);
                return Err(StoreError::Corrupt(format!("an update of {session_id} in another session's streak")));
            }
            None => Streak::load(conn, session_id)?,
        };
        Ok(streak.insert(current))
    }

    /// Writes the journal cursor back, if it moved, and ends the streak.
    pub(super) fn flush(streak: &mut Option<Streak>, conn: &Connection) -> StoreResult<()> {
        let Some(mut streak) = streak.take() else { return Ok(()) };
        streak.last.write_part(conn)?;
        if streak.dirty {
            conn.prepare_cached("UPDATE task_sessions SET last_seq = ?2, turn_open = ?3 WHERE id = ?1")?
                .execute(params![streak.session_id, streak.last_seq as i64, streak.turn_open])?;
        }
        Ok(())
    }
}

/// Appends one agent update of `current`'s session on the writer thread ([`Streak::ensure`]
/// started it). On error what it wrote is undone with its whole batch (the writer fails the
/// batch and drops the streak).
pub(super) fn append_in(
    conn: &Connection,
    insert: Option<&mut rusqlite::Statement<'_>>,
    outbox: &mut Outbox,
    current: &mut Streak,
    append: Append,
) -> StoreResult<u64> {
    let seq = current.last_seq + 1;
    let turn_open = turn_open_after(&append.event).unwrap_or(current.turn_open);
    record_event(conn, insert, outbox, &append.session_id, seq, append.event, false, &mut current.last)?;
    if let Some(host_seq) = append.host_seq {
        conn.prepare_cached("UPDATE executors_running SET host_seq = MAX(host_seq, ?1) WHERE session_id = ?2")?
            .execute(params![host_seq as i64, append.session_id])?;
    }
    current.last_seq = seq;
    current.turn_open = turn_open;
    current.dirty = true;
    Ok(seq)
}

/// The folded view in SQLite: the protocol's fold rules (`baton_protocol::fold_event`) applied
/// to the `messages` table. A streaming message's chunks are rows of `message_parts` (O(1) per
/// chunk, the message is not rewritten), joined into its text by the writer's own write right
/// after the turn's end ([`fold_due`]).
/// A message's `updated_at` counting its parts: the time of the event of its newest part (the
/// stored value when it has none). SQL over the row of `messages` being read or updated.
pub(super) const PARTS_UPDATED_AT: &str = "COALESCE((SELECT e.created_at FROM session_events e
        WHERE e.session_id = messages.session_id
          AND e.seq = (SELECT MAX(p.seq) FROM message_parts p WHERE p.message_row = messages.id)), messages.updated_at)";

/// A message's whole text: its text and the parts not yet joined into it, in order. SQL over
/// the row of `messages` being read or updated.
pub(super) const WHOLE_TEXT: &str =
    "text || COALESCE((SELECT group_concat(p.text, '' ORDER BY p.seq) FROM message_parts p WHERE p.message_row = messages.id), '')";

/// The message's parts are all joined into its text (its `text` column is its whole text). SQL
/// over the row of `messages` being read.
const PARTS_JOINED: &str = "NOT EXISTS (SELECT 1 FROM message_parts p WHERE p.message_row = messages.id)";

struct SqlFold<'a> {
    conn: &'a Connection,
    session_id: &'a str,
    last: &'a mut LastRow,
}

/// The session's newest entry of `messages`, once read (or written) by the fold.
#[derive(Debug, Clone, Default)]
pub(super) struct LastRow {
    known: bool,
    /// The newest entry unless it is closed (`FoldTarget::last_open`).
    open: Option<LastOpen>,
    /// Its row id (`None`: the session has no entry).
    row: Option<i64>,
    /// Chunks of the newest entry not yet written: consecutive chunks of one message within a
    /// batch become one `message_parts` row (a row per batch, not per chunk), written before
    /// anything else of the batch and before its commit ([`LastRow::write_part`]).
    part: Option<PendingPart>,
}

/// Text of consecutive chunks of one message, keyed by the seq of the newest of them (so the
/// message's `updated_at`, the time of its newest part's event, stays exact).
#[derive(Debug, Clone)]
struct PendingPart {
    message_row: i64,
    seq: u64,
    text: String,
}

impl LastRow {
    /// Writes the pending part, if any.
    fn write_part(&mut self, conn: &Connection) -> StoreResult<()> {
        if let Some(part) = self.part.take() {
            conn.prepare_cached("INSERT INTO message_parts (message_row, seq, text) VALUES (?1, ?2, ?3)")?
                .execute(params![part.message_row, part.seq as i64, part.text])?;
        }
        Ok(())
    }
}

impl FoldTarget for SqlFold<'_> {
    type Error = StoreError;

    fn last_open(&mut self) -> StoreResult<Option<LastOpen>> {
        if self.last.known {
            return Ok(self.last.open.clone());
        }
        let last = self
            .conn
            .prepare_cached(
                "SELECT kind, message_id, closed, id FROM messages WHERE session_id = ?1 ORDER BY seq DESC, id DESC LIMIT 1",
            )?
            .query_row([self.session_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, i64>(2)? != 0, r.get::<_, i64>(3)?))
            })
            .optional()?;
        let row = last.as_ref().map(|row| row.3);
        let open = last.and_then(|(kind, message_id, closed, _)| {
            let kind = MessageKind::parse(&kind)?;
            (!closed).then_some(LastOpen { kind, message_id })
        });
        let part = self.last.part.take();
        *self.last = LastRow { known: true, open: open.clone(), row, part };
        Ok(open)
    }

    fn push(&mut self, entry: Message) -> StoreResult<()> {
        self.last.write_part(self.conn)?;
        self.conn
            .prepare_cached(
                "INSERT INTO messages (session_id, seq, kind, message_id, tool_call_id, text, status, data, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute(params![
                self.session_id,
                entry.seq as i64,
                entry.kind.as_str(),
                entry.message_id,
                entry.tool_call_id,
                entry.text,
                entry.status,
                entry.data.map(|d| d.to_string()),
                entry.created_at,
                entry.updated_at
            ])?;
        // The new row is the newest (the highest seq) and open.
        *self.last = LastRow {
            known: true,
            open: Some(LastOpen { kind: entry.kind, message_id: entry.message_id }),
            row: Some(self.conn.last_insert_rowid()),
            part: None,
        };
        Ok(())
    }

    /// A part of the newest entry. Its `updated_at` is not rewritten per chunk: it is the
    /// time of its newest part's event, read with the parts (`messages_page`) and stored when
    /// the parts are folded in (`close_all`).
    fn append_text(&mut self, seq: u64, text: &str, _at: &str) -> StoreResult<()> {
        let id: i64 = match self.last.row {
            Some(id) => id,
            None => {
                let id = self
                    .conn
                    .prepare_cached("SELECT id FROM messages WHERE session_id = ?1 ORDER BY seq DESC, id DESC LIMIT 1")?
                    .query_row([self.session_id], |r| r.get(0))?;
                self.last.row = Some(id);
                id
            }
        };
        match &mut self.last.part {
            Some(part) if part.message_row == id => {
                part.text.push_str(text);
                part.seq = seq;
            }
            _ => {
                self.last.write_part(self.conn)?;
                self.last.part = Some(PendingPart { message_row: id, seq, text: text.to_string() });
            }
        }
        Ok(())
    }

    fn replace_plan(&mut self, data: Value, at: &str) -> StoreResult<()> {
        self.last.write_part(self.conn)?;
        self.conn.execute(
            "UPDATE messages SET data = ?1, updated_at = ?2
             WHERE id = (SELECT id FROM messages WHERE session_id = ?3 ORDER BY seq DESC, id DESC LIMIT 1)",
            params![data.to_string(), at, self.session_id],
        )?;
        Ok(())
    }

    fn replace_tool_call(
        &mut self,
        id: &str,
        title: &str,
        status: Option<&ToolCallStatus>,
        data: Value,
        at: &str,
    ) -> StoreResult<bool> {
        let updated = self.conn.execute(
            "UPDATE messages SET text = ?1, status = ?2, data = ?3, updated_at = ?4 WHERE session_id = ?5 AND tool_call_id = ?6",
            params![title, status.map(ToolCallStatus::as_str), data.to_string(), at, self.session_id, id],
        )?;
        Ok(updated > 0)
    }

    fn update_tool_call(
        &mut self,
        id: &str,
        title: Option<&str>,
        status: Option<&ToolCallStatus>,
        patch: &Map<String, Value>,
        at: &str,
    ) -> StoreResult<bool> {
        let Some(mut data) = self.tool_call_data(id)? else {
            return Ok(false);
        };
        if let Some(object) = data.as_object_mut() {
            object.extend(patch.clone());
        }
        self.conn.execute(
            "UPDATE messages SET text = COALESCE(?1, text), status = COALESCE(?2, status), data = ?3, updated_at = ?4
             WHERE session_id = ?5 AND tool_call_id = ?6",
            params![title, status.map(ToolCallStatus::as_str), data.to_string(), at, self.session_id, id],
        )?;
        Ok(true)
    }

    fn tool_call_data(&mut self, id: &str) -> StoreResult<Option<Value>> {
        let existing: Option<Option<String>> = self
            .conn
            .query_row(
                "SELECT data FROM messages WHERE session_id = ?1 AND tool_call_id = ?2",
                params![self.session_id, id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(existing.map(|data| data.and_then(|d| serde_json::from_str::<Value>(&d).ok()).unwrap_or_else(|| json!({}))))
    }

    fn set_permission_status(&mut self, request_id: &str, status: &PermissionStatus, at: &str) -> StoreResult<()> {
        self.last.write_part(self.conn)?;
        self.conn.execute(
            "UPDATE messages SET status = ?1, updated_at = ?2 WHERE session_id = ?3 AND kind = 'permission' AND message_id = ?4",
            params![status.to_wire(), at, self.session_id, request_id],
        )?;
        Ok(())
    }

    /// Closes every entry. The open messages' parts stay as they are, read with them, and the
    /// messages that have parts are listed as due to be joined ([`fold_due`]): the writer joins
    /// them after this write is published, so the end of a long answer is not held back by
    /// joining and indexing its text. Their `updated_at` is stored now (the time of the newest
    /// part, as readers saw it while the message was open).
    fn close_all(&mut self) -> StoreResult<()> {
        self.last.write_part(self.conn)?;
        let conn = self.conn;
        conn.prepare_cached(
            "INSERT OR IGNORE INTO message_folds_due (message_row)
             SELECT id FROM messages
             WHERE session_id = ?1 AND closed = 0 AND EXISTS (SELECT 1 FROM message_parts p WHERE p.message_row = messages.id)",
        )?
        .execute([self.session_id])?;
        // A message without parts keeps its `updated_at` (PARTS_UPDATED_AT falls back to it).
        conn.prepare_cached(&format!(
            "UPDATE messages SET updated_at = {PARTS_UPDATED_AT}, closed = 1 WHERE session_id = ?1 AND closed = 0"
        ))?
        .execute([self.session_id])?;
        self.last.open = None;
        Ok(())
    }
}

/// Whether any closed message still has parts to be joined into its text.
pub(super) fn folds_due(conn: &Connection) -> StoreResult<bool> {
    Ok(conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM message_folds_due)")?.query_row([], |r| r.get(0))?)
}

/// Joins the parts of the closed messages listed as due into their text (which indexes it for
/// search: `messages_fts`'s update trigger) and forgets the parts, each message on its own
/// (one that cannot be joined stays due, readable from its parts, and does not hold back the
/// others). Inside a write; returns how many are left due, and how many bytes of text were
/// joined. A message listed but open cannot be
/// (a closed entry is never reopened); it is skipped, not joined, should it ever be.
pub(super) fn fold_due(conn: &Connection) -> StoreResult<(usize, usize)> {
    let rows: Vec<i64> = {
        let mut statement = conn.prepare_cached(
            "SELECT d.message_row FROM message_folds_due d JOIN messages m ON m.id = d.message_row WHERE m.closed = 1",
        )?;
        let rows = statement.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut left = 0;
    let mut joined_bytes = 0;
    for row in rows {
        let bytes: i64 = conn
            .prepare_cached("SELECT COALESCE(SUM(octet_length(text)), 0) FROM message_parts WHERE message_row = ?1")?
            .query_row([row], |r| r.get(0))?;
        joined_bytes += usize::try_from(bytes).unwrap_or(0);
        conn.execute_batch("SAVEPOINT fold")?;
        let joined = conn
            .prepare_cached(&format!("UPDATE messages SET text = {WHOLE_TEXT} WHERE id = ?1"))
            .and_then(|mut s| s.execute([row]))
            .and_then(|_| conn.prepare_cached("DELETE FROM message_parts WHERE message_row = ?1")?.execute([row]))
            .and_then(|_| conn.prepare_cached("DELETE FROM message_folds_due WHERE message_row = ?1")?.execute([row]));
        match joined {
            Ok(_) => conn.execute_batch("RELEASE fold")?,
            Err(e) => {
                tracing::error!(message_row = row, "cannot join a closed message's parts into its text: {e}");
                conn.execute_batch("ROLLBACK TO fold; RELEASE fold")?;
                left += 1;
            }
        }
    }
    // What is listed but not closed (or gone) has nothing to join.
    // (Looked up row by row: `NOT IN (SELECT id FROM messages …)` would read every message.)
    conn.prepare_cached(
        "DELETE FROM message_folds_due
         WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = message_folds_due.message_row AND m.closed = 1)",
    )?
    .execute([])?;
    Ok((left, joined_bytes))
}

/// The start of `text` of at most `limit` bytes that ends at a character boundary, yet at least
/// its first character (a limit smaller than it still moves a reader on).
fn head(text: &str, limit: usize) -> &str {
    let end = text.floor_char_boundary(limit.min(text.len()));
    let end = if end == 0 && !text.is_empty() { text.ceil_char_boundary(1) } else { end };
    &text[..end]
}

/// The first `bytes` bytes (or fewer, to end at a character boundary) of the text of the
/// message row `row_id`, read without loading the rest (SQLite's incremental blob I/O, which reads
/// a TEXT column's bytes as they are stored: UTF-8).
fn text_start(conn: &Connection, row_id: i64, bytes: usize) -> StoreResult<String> {
    Ok(text_range(conn, row_id, 0, bytes)?.unwrap_or_default())
}

/// Up to `bytes` bytes of the text of message row `row_id` from byte `offset`, ending at a
/// character boundary (an empty string when the first byte is not the start of a character);
/// read without loading the rest. None when the row is gone meanwhile (the blob is opened apart
/// from the query that found it: a delete may come in between).
fn text_range(conn: &Connection, row_id: i64, offset: usize, bytes: usize) -> StoreResult<Option<String>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut blob = match conn.blob_open(rusqlite::MAIN_DB, "messages", "text", row_id, true) {
        Ok(blob) => blob,
        Err(e) => {
            tracing::debug!(row_id, "a message's text is gone before it was read: {e}");
            return Ok(None);
        }
    };
    let read = |e: std::io::Error| StoreError::Invalid(format!("cannot read a message's text: {e}"));
    blob.seek(SeekFrom::Start(offset as u64)).map_err(read)?;
    let mut start = Vec::with_capacity(bytes);
    blob.take(bytes as u64).read_to_end(&mut start).map_err(read)?;
    Ok(Some(match String::from_utf8(start) {
        Ok(text) => text,
        // Cut inside a character: up to its start.
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    }))
}

pub(super) fn message_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Message> {
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
        data: data.and_then(|d| bounded_json(&d).ok()),
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
    pub fn submit_append(&self, session_id: &str, event: SessionEvent) -> StoreResult<super::PendingWrite<u64>> {
        self.submit_job(Append { session_id: session_id.to_string(), event, host_seq: None })
    }

    /// Appends events and applies a state transition in one write: a client that sees the last
    /// event finds the session already in its new state. The events are appended whatever the
    /// transition's compare-and-set finds; its result says whether the state changed.
    pub async fn append_with_transition(
        &self,
        session_id: &str,
        events: Vec<SessionEvent>,
        transition: Transition,
    ) -> StoreResult<Option<baton_protocol::StateChanged>> {
        let session_id = session_id.to_string();
        self.write(move |conn, outbox| {
            for event in events {
                append_event(conn, outbox, &session_id, event)?;
            }
            transition_in(conn, outbox, &transition)
        })
        .await
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
                let event = bounded_json(&payload).map_err(|e| StoreError::Corrupt(format!("event {seq}: {e}")))?;
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
    ) -> StoreResult<(Vec<Message>, bool, Vec<CutText>)> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            get_session(conn, &session_id)?;
            // Sequence numbers are stored as i64; larger bounds mean "no bound".
            let before = before_seq.map(|s| s.min(i64::MAX as u64) as i64).unwrap_or(i64::MAX);
            let after = after_seq.map(|s| s.min(i64::MAX as u64) as i64).unwrap_or(-1);
            let ascending = after_seq.is_some();
            // A finished entry's long text is cut (an open one is not: its chunks keep coming
            // and are appended to it by the clients). Its size comes from the record and only
            // its start is read (incremental blob I/O): a page stays quick whatever the size.
            let sql = format!(
                "SELECT seq, kind,
                        CASE WHEN {LONG} THEN ''
                             ELSE {WHOLE_TEXT} END,
                        message_id, tool_call_id, status, data, created_at,
                        CASE WHEN closed = 0 THEN {PARTS_UPDATED_AT} ELSE updated_at END,
                        CASE WHEN {LONG} THEN octet_length(text) END, id, closed
                 FROM messages
                 WHERE session_id = ?1 AND seq > ?2 AND seq < ?3 ORDER BY seq {order}, id {order} LIMIT ?4",
                order = if ascending { "ASC" } else { "DESC" },
                // Finished, its parts joined into its text (the join follows the close), and long.
                LONG = format!("closed = 1 AND octet_length(text) > {MESSAGE_TEXT_CUT} AND {PARTS_JOINED}"),
            );
            let mut stmt = conn.prepare(&sql)?;
            let rows = stmt.query_map(params![session_id, after, before, limit as i64 + 1], |row| {
                Ok((
                    message_from_row(row)?,
                    row.get::<_, Option<i64>>(9)?,
                    row.get::<_, i64>(10)?,
                    row.get::<_, bool>(11)?,
                ))
            })?;
            let mut rows = rows.collect::<Result<Vec<_>, _>>()?;
            let has_more = rows.len() > limit;
            rows.truncate(limit);
            if !ascending {
                rows.reverse();
            }
            let mut cut = Vec::new();
            let mut messages = Vec::with_capacity(rows.len());
            for (mut message, long, row_id, closed) in rows {
                if let Some(total) = long {
                    message.text = text_start(conn, row_id, MESSAGE_TEXT_CUT)?;
                    cut.push(CutText { seq: message.seq, total_bytes: total as u64 });
                } else if closed && message.text.len() > MESSAGE_TEXT_CUT {
                    // Finished but its parts not joined yet (the join follows the close): read
                    // whole, then cut.
                    cut.push(CutText { seq: message.seq, total_bytes: message.text.len() as u64 });
                    message.text.truncate(head(&message.text, MESSAGE_TEXT_CUT).len());
                }
                messages.push(message);
            }
            Ok((messages, has_more, cut))
        })
        .await
    }

    /// A part of the text of the session's entry `seq`, and the whole text's size: from byte
    /// `offset`, at most `limit` bytes ending at a character boundary, yet at least one
    /// character. A finished entry whose parts are joined is read in that range only, anything
    /// else whole. None when the session has no such entry; `Invalid` when `offset` is beyond
    /// the text or inside a character.
    pub async fn message_text_part(
        &self,
        session_id: &str,
        seq: u64,
        offset: usize,
        limit: usize,
    ) -> StoreResult<Option<(String, usize)>> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            get_session(conn, &session_id)?;
            let seq = seq.min(i64::MAX as u64) as i64;
            let beyond =
                |total: usize| StoreError::Invalid(format!("offset {offset} is beyond the text's {total} bytes"));
            let inside = || {
                StoreError::Invalid(format!(
                    "offset {offset} is inside a character: give an offset this action returned (next_offset)"
                ))
            };
            let joined: Option<(i64, i64)> = conn
                .prepare_cached(&format!(
                    "SELECT id, octet_length(text) FROM messages
                     WHERE session_id = ?1 AND seq = ?2 AND {PARTS_JOINED} ORDER BY id LIMIT 1"
                ))?
                .query_row(params![session_id, seq], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            if let Some((row_id, total)) = joined {
                let total = usize::try_from(total).unwrap_or(0);
                if offset > total {
                    return Err(beyond(total));
                }
                if offset == total {
                    return Ok(Some((String::new(), total)));
                }
                // A character's first byte reads as one; a continuation byte alone does not.
                let Some(rest) = text_range(conn, row_id, offset, limit.max(4))? else { return Ok(None) };
                if rest.is_empty() {
                    return Err(inside());
                }
                return Ok(Some((head(&rest, limit).to_string(), total)));
            }
            let text: Option<String> = conn
                .prepare_cached(&format!(
                    "SELECT {WHOLE_TEXT} FROM messages WHERE session_id = ?1 AND seq = ?2 ORDER BY id LIMIT 1"
                ))?
                .query_row(params![session_id, seq], |r| r.get(0))
                .optional()?;
            let Some(text) = text else { return Ok(None) };
            let total = text.len();
            if offset > total {
                return Err(beyond(total));
            }
            if !text.is_char_boundary(offset) {
                return Err(inside());
            }
            Ok(Some((head(&text[offset..], limit).to_string(), total)))
        })
        .await
    }

    /// Startup reconciliation's writes (the policy and its words are the orchestrator's,
    /// `orchestrator/launch/reconcile.rs`): every session with a turn left open gets `interrupted`
    /// appended (which closes the turn); pending permission requests are resolved `cancelled`;
    /// the executor records forget their processes. Sessions keep their states. Returns the
    /// processes a previous run left behind, for the caller to make sure they are gone.
    pub async fn reconcile_after_restart(&self, interrupted: Vec<SessionEvent>) -> StoreResult<Vec<LeftoverProcess>> {
        self.reconcile_after_restart_keeping(Vec::new(), interrupted).await
    }

    /// [`Self::reconcile_after_restart`], leaving alone the sessions in `keep`: their agents
    /// still run (in the agent host) and are reattached, turns and records included.
    pub async fn reconcile_after_restart_keeping(
        &self,
        keep: Vec<String>,
        interrupted: Vec<SessionEvent>,
    ) -> StoreResult<Vec<LeftoverProcess>> {
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
                for event in &interrupted {
                    append_event(conn, outbox, session_id, event.clone())?;
                }
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
                    // Agents reached through a command (a container's host) run in another pid
                    // namespace or on another machine: their pid means nothing here. Their
                    // runtime removes what is left of them (its strays, at startup).
                    "SELECT session_id, pid, pid_start_time, agent_execution_id FROM executors_running
                     WHERE pid IS NOT NULL AND session_id NOT IN (SELECT value FROM json_each(?1))
                       AND (agentctl_url IS NULL OR agentctl_url NOT LIKE 'stdio:%')",
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
                "UPDATE executors_running SET pid = NULL, pid_start_time = NULL, status = ?3, updated_at = ?1
                 WHERE (status IN (?4, ?5) OR pid IS NOT NULL)
                   AND session_id NOT IN (SELECT value FROM json_each(?2))",
                params![
                    now_timestamp(),
                    keep_json,
                    ExecutorStatus::Stopped.as_str(),
                    ExecutorStatus::Starting.as_str(),
                    ExecutorStatus::Ready.as_str()
                ],
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

/// Decodes stored JSON, cut at [`baton_protocol::MAX_NESTING`] levels like every value from an
/// agent: rows written before values were cut where they enter would otherwise make frames
/// the typed client cannot decode. A byte scan first: what was cut on entry is decoded as is.
pub(super) fn bounded_json<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    if baton_protocol::nesting_of(text.as_bytes()) <= baton_protocol::MAX_NESTING {
        return serde_json::from_str(text);
    }
    let mut value: Value = serde_json::from_str(text)?;
    baton_protocol::bound_nesting(&mut value, baton_protocol::MAX_NESTING);
    serde_json::from_value(value)
}
