//! Each session's queue of messages written while a turn ran (`message_queues`).
//!
//! Every change is written together with a `queue` event carrying the whole queue, in one
//! write: clients are never told of a queue the database does not hold. A message leaves the
//! queue in the write that journals it as its turn's `user_message` ([`Store::append_turn_start`]),
//! so a crash can neither lose it nor send it twice.

use baton_protocol::{
    now_timestamp, ErrorPayload, EventRecord, MessageQueue, QueuedMessage, SessionEvent, StopReason, MAX_QUEUED,
};
use rusqlite::{params, Connection, OptionalExtension};

use super::journal::append_event;
use super::{Outbox, Store, StoreError, StoreResult};

fn queue_in(conn: &Connection, session_id: &str) -> StoreResult<MessageQueue> {
    let text: Option<String> = conn
        .prepare_cached("SELECT queue FROM message_queues WHERE session_id = ?1")?
        .query_row([session_id], |r| r.get(0))
        .optional()?;
    match text {
        None => Ok(MessageQueue::default()),
        Some(text) => serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("message queue: {e}"))),
    }
}

/// Writes the queue and journals it.
fn write_queue(conn: &Connection, outbox: &mut Outbox, session_id: &str, queue: &MessageQueue) -> StoreResult<()> {
    let json = serde_json::to_string(queue).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    conn.prepare_cached(
        "INSERT INTO message_queues (session_id, queue) VALUES (?1, ?2)
         ON CONFLICT (session_id) DO UPDATE SET queue = excluded.queue",
    )?
    .execute(params![session_id, json])?;
    append_event(conn, outbox, session_id, SessionEvent::Queue { queue: queue.clone() })?;
    Ok(())
}

/// Where a steering message goes: after the other steering messages, before the rest.
fn steer_position(queue: &MessageQueue) -> usize {
    queue.messages.iter().take_while(|m| m.steer).count()
}

/// A change the user asked of a queue, refused when it cannot apply.
type Refusable<T> = Result<T, ErrorPayload>;

fn missing(id: &str) -> ErrorPayload {
    ErrorPayload::not_found(format!("no queued message {id} (it may have been sent already; see queue.list)"))
}

/// The payload of the session's newest `turn_completed`, through its partial index (migration
/// 260).
pub(super) const LAST_TURN_COMPLETED: &str =
    "SELECT payload FROM session_events WHERE session_id = ?1 AND kind = 'turn_completed'
     ORDER BY seq DESC LIMIT 1";

impl Store {
    /// The session's queue.
    pub async fn message_queue(&self, session_id: &str) -> StoreResult<MessageQueue> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            super::records::get_session(conn, &session_id)?;
            queue_in(conn, &session_id)
        })
        .await
    }

    /// Puts a message at the end of the queue (a steering one ahead of the others); refused
    /// when the queue is full.
    pub async fn enqueue(
        &self,
        session_id: &str,
        text: &str,
        steer: bool,
    ) -> StoreResult<Refusable<(QueuedMessage, MessageQueue)>> {
        let (session_id, text) = (session_id.to_string(), text.to_string());
        self.write(move |conn, outbox| {
            super::records::get_session(conn, &session_id)?;
            let mut queue = queue_in(conn, &session_id)?;
            if queue.messages.len() >= MAX_QUEUED {
                return Ok(Err(ErrorPayload::conflict(format!(
                    "the session's queue is full ({MAX_QUEUED} messages); wait for its turns to end, or remove one \
                     (queue.remove)"
                ))));
            }
            let now = now_timestamp();
            let message = QueuedMessage {
                id: format!("q-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
                text,
                steer,
                created_at: now.clone(),
                updated_at: now,
            };
            let at = if steer { steer_position(&queue) } else { queue.messages.len() };
            queue.messages.insert(at, message.clone());
            write_queue(conn, outbox, &session_id, &queue)?;
            Ok(Ok((message, queue)))
        })
        .await
    }

    /// Replaces the text of a queued message.
    pub async fn edit_queued(&self, session_id: &str, id: &str, text: &str) -> StoreResult<Refusable<MessageQueue>> {
        let (session_id, id, text) = (session_id.to_string(), id.to_string(), text.to_string());
        self.write(move |conn, outbox| {
            super::records::get_session(conn, &session_id)?;
            let mut queue = queue_in(conn, &session_id)?;
            let Some(message) = queue.messages.iter_mut().find(|m| m.id == id) else {
                return Ok(Err(missing(&id)));
            };
            message.text = text;
            message.updated_at = now_timestamp();
            write_queue(conn, outbox, &session_id, &queue)?;
            Ok(Ok(queue))
        })
        .await
    }

    /// Takes a message out of the queue.
    pub async fn remove_queued(&self, session_id: &str, id: &str) -> StoreResult<Refusable<MessageQueue>> {
        let (session_id, id) = (session_id.to_string(), id.to_string());
        self.write(move |conn, outbox| {
            super::records::get_session(conn, &session_id)?;
            let mut queue = queue_in(conn, &session_id)?;
            let before = queue.messages.len();
            queue.messages.retain(|m| m.id != id);
            if queue.messages.len() == before {
                return Ok(Err(missing(&id)));
            }
            if queue.messages.is_empty() {
                queue.held = None;
            }
            write_queue(conn, outbox, &session_id, &queue)?;
            Ok(Ok(queue))
        })
        .await
    }

    /// Holds a queue that has messages and is not held yet, saying why; returns the queue.
    pub async fn hold_queue(&self, session_id: &str, reason: &str) -> StoreResult<MessageQueue> {
        let (session_id, reason) = (session_id.to_string(), reason.to_string());
        self.write(move |conn, outbox| {
            let mut queue = queue_in(conn, &session_id)?;
            if !queue.messages.is_empty() && queue.held.is_none() {
                queue.held = Some(reason);
                write_queue(conn, outbox, &session_id, &queue)?;
            }
            Ok(queue)
        })
        .await
    }

    /// Lifts the hold of a queue; returns the queue.
    pub async fn release_queue(&self, session_id: &str) -> StoreResult<MessageQueue> {
        let session_id = session_id.to_string();
        self.write(move |conn, outbox| {
            super::records::get_session(conn, &session_id)?;
            let mut queue = queue_in(conn, &session_id)?;
            if queue.held.take().is_some() {
                write_queue(conn, outbox, &session_id, &queue)?;
            }
            Ok(queue)
        })
        .await
    }

    /// Journals the start of a turn; with `dequeue`, the queued message it sends leaves the
    /// queue in the same write (the queue's event follows the turn's). Fails, journaling
    /// nothing, when that message is no longer queued.
    pub async fn append_turn_start(
        &self,
        session_id: &str,
        events: Vec<SessionEvent>,
        dequeue: Option<&str>,
    ) -> StoreResult<Vec<EventRecord>> {
        let session_id = session_id.to_string();
        let dequeue = dequeue.map(str::to_string);
        self.write(move |conn, outbox| {
            let records: Vec<EventRecord> = events
                .into_iter()
                .map(|event| append_event(conn, outbox, &session_id, event))
                .collect::<StoreResult<_>>()?;
            if let Some(id) = dequeue {
                let mut queue = queue_in(conn, &session_id)?;
                let before = queue.messages.len();
                queue.messages.retain(|m| m.id != id);
                if queue.messages.len() == before {
                    return Err(StoreError::NotFound(format!("queued message {id}")));
                }
                write_queue(conn, outbox, &session_id, &queue)?;
            }
            Ok(records)
        })
        .await
    }

    /// How the session's last turn ended, from its journal; None before its first turn.
    pub async fn last_turn_end(&self, session_id: &str) -> StoreResult<Option<StopReason>> {
        let session_id = session_id.to_string();
        self.read(move |conn| {
            let payload: Option<String> =
                conn.prepare_cached(LAST_TURN_COMPLETED)?.query_row([&session_id], |r| r.get(0)).optional()?;
            let Some(payload) = payload else { return Ok(None) };
            match serde_json::from_str::<SessionEvent>(&payload) {
                Ok(SessionEvent::TurnCompleted { stop_reason, .. }) => Ok(Some(stop_reason)),
                Ok(_) | Err(_) => Err(StoreError::Corrupt(format!("a turn_completed event of {session_id}"))),
            }
        })
        .await
    }

    /// The sessions that have queued messages.
    pub async fn sessions_with_queue(&self) -> StoreResult<Vec<String>> {
        self.read(move |conn| {
            let mut statement = conn.prepare_cached(
                "SELECT session_id FROM message_queues WHERE json_array_length(queue, '$.messages') > 0",
            )?;
            let rows = statement.query_map([], |r| r.get(0))?;
            rows.collect::<Result<Vec<String>, _>>().map_err(StoreError::from)
        })
        .await
    }
}
