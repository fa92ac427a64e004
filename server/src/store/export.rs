//! The reads behind a session's export (`session.export`, `batond export`): the session's facts,
//! and its folded entries or journal events in seq order from a given seq. They work on any
//! connection, so `batond export` can read the database file read-only while a server runs on
//! it, or when none does. How they are written out and paged is server/src/export.rs.

use baton_protocol::{EventRecord, Message};
use rusqlite::{params, Connection, OptionalExtension};

use super::journal::{bounded_json, message_from_row, PARTS_UPDATED_AT, WHOLE_TEXT};
use super::{StoreError, StoreResult};

/// What an export says about the session it is of.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportedSession {
    pub task_id: String,
    pub task_title: String,
    pub agent: String,
    pub workdir: String,
    pub created_at: String,
    pub state: String,
}

/// The facts of `session_id` an export opens with.
pub fn exported_session(conn: &Connection, session_id: &str) -> StoreResult<ExportedSession> {
    // The columns every schema version has: an old database file can still be exported.
    conn.query_row(
        "SELECT s.task_id, t.title, s.agent, t.workdir, s.created_at, s.state
         FROM task_sessions s JOIN tasks t ON t.id = s.task_id WHERE s.id = ?1",
        [session_id],
        |r| {
            Ok(ExportedSession {
                task_id: r.get(0)?,
                task_title: r.get(1)?,
                agent: r.get(2)?,
                workdir: r.get(3)?,
                created_at: r.get(4)?,
                state: r.get(5)?,
            })
        },
    )
    .optional()?
    .ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))
}

/// Hands the folded entries of `session_id` from seq `start` on (thoughts only if `thoughts`)
/// to `visit` in seq order, until it returns false.
pub fn visit_exported_messages<E: From<StoreError>>(
    conn: &Connection,
    session_id: &str,
    start: u64,
    thoughts: bool,
    mut visit: impl FnMut(Message) -> Result<bool, E>,
) -> Result<(), E> {
    let sql = format!(
        "SELECT seq, kind,
                {WHOLE_TEXT},
                message_id, tool_call_id, status, data, created_at,
                CASE WHEN closed = 0 THEN {PARTS_UPDATED_AT} ELSE updated_at END FROM messages
         WHERE session_id = ?1 AND seq >= ?2 AND (?3 OR kind != 'thought') ORDER BY seq, id"
    );
    let mut statement = conn.prepare(&sql).map_err(StoreError::from)?;
    let mut rows = statement.query(params![session_id, start as i64, thoughts]).map_err(StoreError::from)?;
    while let Some(row) = rows.next().map_err(StoreError::from)? {
        let message = message_from_row(row).map_err(StoreError::from)?;
        if !visit(message)? {
            break;
        }
    }
    Ok(())
}

/// Hands the journal events of `session_id` from seq `start` on (thought chunks only if
/// `thoughts`) to `visit` in seq order, until it returns false.
pub fn visit_exported_events<E: From<StoreError>>(
    conn: &Connection,
    session_id: &str,
    start: u64,
    thoughts: bool,
    mut visit: impl FnMut(EventRecord) -> Result<bool, E>,
) -> Result<(), E> {
    let mut statement = conn
        .prepare(
            "SELECT seq, payload, created_at FROM session_events
             WHERE session_id = ?1 AND seq >= ?2 AND (?3 OR kind != 'thought_chunk') ORDER BY seq",
        )
        .map_err(StoreError::from)?;
    let mut rows = statement.query(params![session_id, start as i64, thoughts]).map_err(StoreError::from)?;
    while let Some(row) = rows.next().map_err(StoreError::from)? {
        let seq = row.get::<_, i64>(0).map_err(StoreError::from)? as u64;
        let payload: String = row.get(1).map_err(StoreError::from)?;
        let event = bounded_json(&payload).map_err(|e| StoreError::Corrupt(format!("event {seq}: {e}")))?;
        let created_at = row.get(2).map_err(StoreError::from)?;
        if !visit(EventRecord { session_id: session_id.to_string(), seq, event, created_at })? {
            break;
        }
    }
    Ok(())
}
