//! Fan-out of committed notifications to every connection.
//!
//! The store publishes here after each commit, in commit order. A connection that falls behind
//! the channel's capacity is not waited for: it re-reads what it missed from the journal (see
//! `Connection::catch_up` in `gateway/connection.rs`), so a slow client never blocks an agent or
//! other clients.

use std::sync::{Arc, OnceLock};

use baton_protocol::Notification;
use bytes::Bytes;
use tokio::sync::broadcast;

/// Notifications kept for slow receivers before they must catch up from the journal.
const CAPACITY: usize = 8192;

/// A committed notification. Its JSON text is serialised once, by the first connection that
/// sends it, and shared (not copied) by every other connection.
pub struct Published {
    pub notification: Notification,
    json: OnceLock<Bytes>,
    /// A journaled event's JSON text as stored: its frame is written around it, by the first
    /// connection that sends it (on a connection's task, not on the store's writer thread,
    /// which every event of every session waits for).
    stored_event: Option<String>,
}

impl Published {
    pub fn new(notification: Notification) -> Self {
        Published { notification, json: OnceLock::new(), stored_event: None }
    }

    /// A journaled event (`Notification::Event`) and its JSON text as stored, which its frame
    /// reuses instead of serialising the event again.
    pub fn with_stored_event(notification: Notification, event_json: String) -> Self {
        Published { notification, json: OnceLock::new(), stored_event: Some(event_json) }
    }

    /// The notification as UTF-8 JSON text (a cheap, reference-counted clone).
    pub fn json(&self) -> Bytes {
        self.json
            .get_or_init(|| {
                let frame = match (&self.notification, &self.stored_event) {
                    (Notification::Event(record), Some(event)) => {
                        event_frame(&record.session_id, record.seq, event, &record.created_at)
                    }
                    _ => None,
                };
                Bytes::from(frame.unwrap_or_else(|| self.notification.to_json()))
            })
            .clone()
    }
}

/// The `session.event` frame of a journaled event, written around the event's JSON text as it
/// is stored (the event is serialised once, for the journal and for every client). The
/// envelope's timestamp is the event's journal time.
fn event_frame(session_id: &str, seq: u64, event: &str, created_at: &str) -> Option<String> {
    #[derive(serde::Serialize)]
    struct Record<'a> {
        session_id: &'a str,
        seq: u64,
        event: &'a serde_json::value::RawValue,
        created_at: &'a str,
    }
    #[derive(serde::Serialize)]
    struct Frame<'a> {
        #[serde(rename = "type")]
        kind: baton_protocol::MessageType,
        action: &'a str,
        payload: Record<'a>,
        timestamp: &'a str,
    }
    let event: &serde_json::value::RawValue = serde_json::from_str(event).ok()?;
    let frame = Frame {
        kind: baton_protocol::MessageType::Notification,
        action: Notification::EVENT,
        payload: Record { session_id, seq, event, created_at },
        timestamp: created_at,
    };
    serde_json::to_string(&frame).ok()
}

impl From<Notification> for Published {
    fn from(notification: Notification) -> Self {
        Published::new(notification)
    }
}

impl std::ops::Deref for Published {
    type Target = Notification;

    fn deref(&self) -> &Notification {
        &self.notification
    }
}

#[derive(Clone)]
pub struct Hub {
    tx: broadcast::Sender<Arc<Published>>,
}

impl Default for Hub {
    fn default() -> Self {
        Self::new()
    }
}

impl Hub {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(CAPACITY);
        Hub { tx }
    }

    pub fn publish(&self, notification: impl Into<Published>) {
        // No receiver is not an error: nobody is connected.
        let _ = self.tx.send(Arc::new(notification.into()));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Published>> {
        self.tx.subscribe()
    }
}
