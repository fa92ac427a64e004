//! Fan-out of committed notifications to every connection.
//!
//! The store publishes here after each commit, in commit order. A connection that falls behind
//! the channel's capacity is not waited for: it re-reads what it missed from the journal (see
//! `Connection::catch_up` in `gateway/connection.rs`), so a slow client never blocks an agent or
//! other clients.

use std::sync::{Arc, OnceLock};

use baton_protocol::Notification;
use tokio_tungstenite::tungstenite::Utf8Bytes;
use tokio::sync::broadcast;

/// Notifications kept for slow receivers before they must catch up from the journal.
const CAPACITY: usize = 8192;

/// A committed notification. Its frame is written once, by the first connection that sends
/// it, and shared (not copied, not checked again) by every other connection.
pub struct Published {
    pub notification: Notification,
    frame: OnceLock<Utf8Bytes>,
    /// A journaled event's JSON text as stored: its frame is written around it, by the first
    /// connection that sends it (on a connection's task, not on the store's writer thread,
    /// which every event of every session waits for).
    stored_event: Option<String>,
}

impl Published {
    pub fn new(notification: Notification) -> Self {
        Published { notification, frame: OnceLock::new(), stored_event: None }
    }

    /// A journaled event (`Notification::Event`) and its JSON text as stored, which its frame
    /// reuses instead of serialising the event again.
    pub fn with_stored_event(notification: Notification, event_json: String) -> Self {
        Published { notification, frame: OnceLock::new(), stored_event: Some(event_json) }
    }

    /// The notification's frame: UTF-8 JSON text, a cheap reference-counted clone.
    pub fn frame(&self) -> Utf8Bytes {
        self.frame
            .get_or_init(|| {
                let text = match (&self.notification, &self.stored_event) {
                    (Notification::Event(record), Some(event)) => {
                        event_frame(&record.session_id, record.seq, event, &record.created_at)
                    }
                    _ => None,
                };
                Utf8Bytes::from(text.unwrap_or_else(|| self.notification.to_json()))
            })
            .clone()
    }
}

/// The `session.event` frame of a journaled event, written around the event's JSON text as it
/// is stored (the event is serialised once, for the journal and for every client). The
/// envelope's timestamp is the event's journal time.
///
/// Written piece by piece into a buffer of the right size rather than through a serde struct
/// holding a `RawValue`: that parses the stored text again only to check it (it is the
/// journal's own serialisation) and grows its buffer several times per frame, which together
/// were a tenth of the server's CPU per streamed event. The strings are escaped by serde_json.
fn event_frame(session_id: &str, seq: u64, event: &str, created_at: &str) -> Option<String> {
    // Writing JSON into a Vec cannot fail.
    fn push_str(frame: &mut Vec<u8>, text: &str) {
        let _ = serde_json::to_writer(&mut *frame, text);
    }
    let mut frame = Vec::with_capacity(event.len() + session_id.len() + 2 * created_at.len() + 128);
    frame.extend_from_slice(b"{\"type\":");
    let _ = serde_json::to_writer(&mut frame, &baton_protocol::MessageType::Notification);
    frame.extend_from_slice(b",\"action\":");
    push_str(&mut frame, Notification::EVENT);
    frame.extend_from_slice(b",\"payload\":{\"session_id\":");
    push_str(&mut frame, session_id);
    frame.extend_from_slice(b",\"seq\":");
    let _ = serde_json::to_writer(&mut frame, &seq);
    frame.extend_from_slice(b",\"event\":");
    frame.extend_from_slice(event.as_bytes());
    frame.extend_from_slice(b",\"created_at\":");
    push_str(&mut frame, created_at);
    frame.extend_from_slice(b"},\"timestamp\":");
    push_str(&mut frame, created_at);
    frame.push(b'}');
    // Every piece is UTF-8 (text, and JSON serde_json wrote): this check cannot fail.
    String::from_utf8(frame).ok()
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
