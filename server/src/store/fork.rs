//! A fork's first write: the new session, its origin, and a copy of the source's conversation
//! as the start of its journal, in one transaction (so the source cannot start a turn between
//! the check and the copy).

use baton_protocol::SessionEvent;
use rusqlite::params;

use super::journal::{append_event, bounded_json};
use super::records::{add_session_in, get_session};
use super::{Store, StoreError, StoreResult};

/// What `create_fork` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Forked {
    /// The fork exists (CREATED) and its journal holds the copied conversation.
    Created,
    /// The source is in the middle of a turn: nothing was written.
    MidTurn,
}

/// The event kinds that make up a conversation, as the transcript shows it. Left out: status
/// and error lines (about the source's agent), permission requests (answered to the source's
/// agent), commands, modes and raw agent updates (the fork's agent sends its own).
const CONVERSATION_KINDS: &str = "'user_message', 'message_chunk', 'thought_chunk', 'tool_call', \
     'tool_call_update', 'plan', 'turn_started', 'turn_completed'";

impl Store {
    /// Creates `session_id` as a fork of `source_id`: same task and agent, `forked_from` and
    /// `forked_at_seq` set, the source's conversation copied into its journal, then one status
    /// event (`status` is given the seq the fork was taken at).
    pub async fn create_fork(
        &self,
        source_id: String,
        session_id: String,
        agent: Option<String>,
        status: impl FnOnce(u64) -> String + Send + 'static,
    ) -> StoreResult<Forked> {
        self.write(move |conn, outbox| {
            let source = get_session(conn, &source_id)?;
            if source.turn_open {
                return Ok(Forked::MidTurn);
            }
            let at_seq = source.last_seq;
            add_session_in(conn, &source.task_id, &session_id, agent.as_deref().unwrap_or(&source.agent))?;
            conn.execute(
                "UPDATE task_sessions SET forked_from = ?1, forked_at_seq = ?2 WHERE id = ?3",
                params![source_id, at_seq as i64, session_id],
            )?;
            let events: Vec<(i64, String)> = {
                let mut statement = conn.prepare(&format!(
                    "SELECT seq, payload FROM session_events
                     WHERE session_id = ?1 AND seq <= ?2 AND kind IN ({CONVERSATION_KINDS}) ORDER BY seq"
                ))?;
                let rows = statement.query_map(params![source_id, at_seq as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
                rows.collect::<Result<_, _>>()?
            };
            for (seq, payload) in events {
                let event: SessionEvent = bounded_json(&payload)
                    .map_err(|e| StoreError::Corrupt(format!("event {seq} of {source_id}: {e}")))?;
                append_event(conn, outbox, &session_id, event)?;
            }
            append_event(conn, outbox, &session_id, SessionEvent::status(status(at_seq)))?;
            Ok(Forked::Created)
        })
        .await
    }
}
