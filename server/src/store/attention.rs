//! The stored attention of sessions (`task_sessions.attention`, `attention_since`) and the
//! server-wide count of sessions that need the user. What the reason is, is decided in
//! [`crate::attention`]; here it is recorded, with the notifications its changes produce. The
//! writes that derive it from a session's record (a transition, a refresh) are the records'
//! (`store::records`), which call down to this module, never the other way.

use baton_protocol::{now_timestamp, Attention, AttentionChanged, Notification};
use rusqlite::{params, Connection};

use super::{Outbox, Store, StoreResult};

/// A session's attention as it is recorded now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedAttention<'a> {
    pub session_id: &'a str,
    pub reason: Option<Attention>,
    pub since: Option<&'a str>,
}

/// A session's attention after it was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttentionUpdate {
    pub reason: Option<Attention>,
    pub since: Option<String>,
    /// The reason differs from the one recorded before.
    pub changed: bool,
    /// Whether the session needed the user before (any reason).
    pub needed_before: bool,
}

impl AttentionUpdate {
    /// Sends `attention.changed` when the change moved the server-wide count: the session
    /// started or stopped needing the user, and its task is counted (not archived).
    pub fn tell_count(&self, conn: &Connection, outbox: &mut Outbox, task_archived: bool) -> StoreResult<()> {
        if self.changed && self.needed_before != self.reason.is_some() && !task_archived {
            push_count_in(conn, outbox)?;
        }
        Ok(())
    }
}

/// Records `reason` as the session's attention. Its since-when is kept while the reason stays
/// the same and is now when it changes.
pub fn set_attention_in(
    conn: &Connection,
    recorded: RecordedAttention<'_>,
    reason: Option<Attention>,
) -> StoreResult<AttentionUpdate> {
    let needed_before = recorded.reason.is_some();
    if recorded.reason == reason {
        let since = if reason.is_some() { recorded.since.map(str::to_string) } else { None };
        return Ok(AttentionUpdate { reason, since, changed: false, needed_before });
    }
    let since = reason.map(|_| now_timestamp());
    conn.execute(
        "UPDATE task_sessions SET attention = ?1, attention_since = ?2 WHERE id = ?3",
        params![reason.map(Attention::as_str), since, recorded.session_id],
    )?;
    Ok(AttentionUpdate { reason, since, changed: true, needed_before })
}

/// Sessions of tasks that are not archived whose attention is set: the count the triggers of
/// migration 0140 keep in step with every change (one row read, not a count over the sessions).
pub fn attention_count_in(conn: &Connection) -> StoreResult<u64> {
    let count: i64 =
        conn.prepare_cached("SELECT value FROM attention_counter WHERE id = 0")?.query_row([], |r| r.get(0))?;
    Ok(count.max(0) as u64)
}

/// The same count, counted over the sessions (what the kept count must always equal).
#[cfg(test)]
pub fn attention_count_counted_in(conn: &Connection) -> StoreResult<u64> {
    let count: i64 = conn.query_row(
        "SELECT COUNT(*) FROM task_sessions s JOIN tasks t ON t.id = s.task_id
         WHERE s.attention IS NOT NULL AND t.archived = 0",
        [],
        |r| r.get(0),
    )?;
    Ok(count.max(0) as u64)
}

/// Queues `attention.changed` with the count as this write leaves it.
pub fn push_count_in(conn: &Connection, outbox: &mut Outbox) -> StoreResult<()> {
    let count = attention_count_in(conn)?;
    outbox.push(Notification::AttentionChanged(AttentionChanged { count }).into());
    Ok(())
}

/// Some session of the task needs the user.
pub fn task_needs_user_in(conn: &Connection, task_id: &str) -> StoreResult<bool> {
    let found: i64 = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM task_sessions WHERE task_id = ?1 AND attention IS NOT NULL)",
        [task_id],
        |r| r.get(0),
    )?;
    Ok(found != 0)
}

/// One session as the startup settling of attention reads it ([`Store::attention_inputs`]).
#[derive(Debug, Clone)]
pub struct AttentionInput {
    pub session_id: String,
    pub state: baton_protocol::SessionState,
    pub attention: Option<Attention>,
    pub has_resume_token: bool,
    /// The session has a `last_error`.
    pub has_error: bool,
}

impl Store {
    /// What the startup settling of attention needs of every session, and nothing more: its
    /// id, state, stored attention and whether its executor record holds a resume token (whole
    /// session rows cost several times as much to read, at every start).
    pub async fn attention_inputs(&self) -> StoreResult<Vec<AttentionInput>> {
        self.read(|conn| {
            let mut statement = conn.prepare(
                "SELECT s.id, s.state, s.attention, e.resume_token, s.last_error IS NOT NULL FROM task_sessions s
                 LEFT JOIN executors_running e ON e.session_id = s.id",
            )?;
            let rows = statement.query_map([], |row| {
                let state: String = row.get(1)?;
                Ok((
                    row.get::<_, String>(0)?,
                    state,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, bool>(4)?,
                ))
            })?;
            let mut inputs = Vec::new();
            for row in rows {
                let (session_id, state, stored, token, has_error) = row?;
                let state = baton_protocol::SessionState::parse(&state).ok_or_else(|| {
                    super::StoreError::Corrupt(format!("session {session_id} has unknown state {state}"))
                })?;
                inputs.push(AttentionInput {
                    session_id,
                    state,
                    attention: stored.as_deref().and_then(Attention::parse),
                    has_resume_token: crate::session_status::has_resume_token(token.as_deref()),
                    has_error,
                });
            }
            Ok(inputs)
        })
        .await
    }

    /// The server-wide count of sessions that need the user.
    pub async fn attention_count(&self) -> StoreResult<u64> {
        self.read(attention_count_in).await
    }
}
