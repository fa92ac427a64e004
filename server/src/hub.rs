//! Fan-out of committed notifications to every connection.
//!
//! The store publishes here after each commit, in commit order, the notifications of a commit
//! together: one message of the channel (and one wake of each waiting receiver) per commit,
//! not per event. A connection that falls behind the channel's capacity is not waited for: it
//! re-reads what it missed from the journal (see `Connection::catch_up` in
//! `gateway/connection.rs`), so a slow client never blocks an agent or other clients.

use std::sync::{Arc, OnceLock};

use baton_protocol::Notification;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// Messages (each up to [`BATCH`] notifications of one commit) kept for slow receivers before
/// they must catch up from the journal: at least 256 commits (each waits for the disk, so a
/// connection busy with a request for a moment does not fall behind), at most 8192
/// notifications (what a stuck client can hold in memory).
const CAPACITY: usize = 256;
/// Most notifications in one message of the channel: a commit of more is published in several.
const BATCH: usize = 32;

/// Notifications of one commit, in order.
type Batch = Arc<Vec<Arc<Published>>>;

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
    fn push(frame: &mut Vec<u8>, value: &impl serde::Serialize) {
        let _ = serde_json::to_writer(&mut *frame, value);
    }
    // The envelope's fixed text is about 130 bytes.
    let mut frame = Vec::with_capacity(event.len() + session_id.len() + 2 * created_at.len() + 192);
    frame.extend_from_slice(b"{\"type\":");
    push(&mut frame, &baton_protocol::MessageType::Notification);
    frame.extend_from_slice(b",\"action\":");
    push(&mut frame, &Notification::EVENT);
    frame.extend_from_slice(b",\"payload\":{\"session_id\":");
    push(&mut frame, &session_id);
    frame.extend_from_slice(b",\"seq\":");
    push(&mut frame, &seq);
    frame.extend_from_slice(b",\"event\":");
    frame.extend_from_slice(event.as_bytes());
    frame.extend_from_slice(b",\"created_at\":");
    push(&mut frame, &created_at);
    frame.extend_from_slice(b"},\"timestamp\":");
    push(&mut frame, &created_at);
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
    tx: broadcast::Sender<Batch>,
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
        self.publish_all(vec![notification.into()]);
    }

    /// Publishes the notifications of one commit, in order.
    pub fn publish_all(&self, notifications: Vec<Published>) {
        let mut notifications = notifications.into_iter().map(Arc::new).peekable();
        while notifications.peek().is_some() {
            let batch: Vec<Arc<Published>> = notifications.by_ref().take(BATCH).collect();
            // No receiver is not an error: nobody is connected.
            let _ = self.tx.send(Arc::new(batch));
        }
    }

    pub fn subscribe(&self) -> Receiver {
        Receiver { rx: self.tx.subscribe(), batch: None, next: 0 }
    }
}

/// What one subscriber receives: every notification published after it subscribed, one at a
/// time, in order. `Lagged` counts the channel's messages missed (each up to 32 notifications).
pub struct Receiver {
    rx: broadcast::Receiver<Batch>,
    /// The message being read, and the index of its next notification.
    batch: Option<Batch>,
    next: usize,
}

impl Receiver {
    /// The next notification of the message being read, if it holds one more.
    fn next_held(&mut self) -> Option<Arc<Published>> {
        let batch = self.batch.as_ref()?;
        let published = batch.get(self.next).cloned();
        self.next += 1;
        if self.next >= batch.len() {
            self.batch = None;
        }
        published
    }

    /// Keeps `batch` and returns its first notification.
    fn hold(&mut self, batch: Batch) -> Option<Arc<Published>> {
        self.batch = Some(batch);
        self.next = 0;
        self.next_held()
    }

    /// Waits for the next notification. Cancel-safe (nothing is taken from the channel by a
    /// call that does not return), as `select!` needs.
    pub async fn recv(&mut self) -> Result<Arc<Published>, broadcast::error::RecvError> {
        loop {
            if let Some(published) = self.next_held() {
                return Ok(published);
            }
            let batch = self.rx.recv().await?;
            if let Some(published) = self.hold(batch) {
                return Ok(published);
            }
        }
    }

    /// The next notification if one was published, without waiting.
    pub fn try_recv(&mut self) -> Result<Arc<Published>, broadcast::error::TryRecvError> {
        loop {
            if let Some(published) = self.next_held() {
                return Ok(published);
            }
            let batch = self.rx.try_recv()?;
            if let Some(published) = self.hold(batch) {
                return Ok(published);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_protocol::Shutdown;

    fn note(n: usize) -> Published {
        Published::new(Notification::Shutdown(Shutdown { reason: n.to_string() }))
    }

    fn reason(published: &Published) -> String {
        match &published.notification {
            Notification::Shutdown(shutdown) => shutdown.reason.clone(),
            other => panic!("not one of ours: {other:?}"),
        }
    }

    /// A commit of more notifications than one message holds reaches a receiver whole and in
    /// order, after what was published before it, through `recv` and `try_recv` alike.
    #[tokio::test]
    async fn a_receiver_gets_every_notification_of_each_commit_in_order() {
        let hub = Hub::new();
        let mut waiting = hub.subscribe();
        let mut polling = hub.subscribe();
        hub.publish(note(0));
        hub.publish_all((1..=BATCH * 2 + 5).map(note).collect());
        hub.publish_all(Vec::new());
        hub.publish(note(BATCH * 2 + 6));
        let expected: Vec<String> = (0..=BATCH * 2 + 6).map(|n| n.to_string()).collect();
        let mut received = Vec::new();
        while received.len() < expected.len() {
            received.push(reason(&waiting.recv().await.expect("published")));
        }
        assert_eq!(received, expected);
        let polled: Vec<String> = std::iter::from_fn(|| polling.try_recv().ok()).map(|p| reason(&p)).collect();
        assert_eq!(polled, expected);
        assert!(matches!(waiting.try_recv(), Err(broadcast::error::TryRecvError::Empty)));
    }

    /// A receiver that fell behind the channel's capacity is told so, then reads on from the
    /// oldest message still held.
    #[tokio::test]
    async fn a_receiver_far_behind_is_told_it_lagged() {
        let hub = Hub::new();
        let mut slow = hub.subscribe();
        for n in 0..CAPACITY + 3 {
            hub.publish(note(n));
        }
        assert!(matches!(slow.recv().await, Err(broadcast::error::RecvError::Lagged(3))));
        assert_eq!(reason(&slow.recv().await.expect("held")), "3");
    }
}
