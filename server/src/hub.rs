//! Fan-out of committed notifications to every connection.
//!
//! The store publishes here after each commit, in commit order. A connection that falls behind
//! the channel's capacity is not waited for: it re-reads what it missed from the journal (see
//! `gateway::subscriptions`), so a slow client never blocks an agent or other clients.

use std::sync::{Arc, OnceLock};

use baton_protocol::Notification;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Utf8Bytes;

/// Notifications kept for slow receivers before they must catch up from the journal.
const CAPACITY: usize = 8192;

/// A committed notification. Its frame is serialised once, by the first connection that sends
/// it, and shared (not copied) by every other connection.
pub struct Published {
    pub notification: Notification,
    frame: OnceLock<Utf8Bytes>,
}

impl Published {
    pub fn new(notification: Notification) -> Self {
        Published { notification, frame: OnceLock::new() }
    }

    /// The notification's WebSocket text frame.
    pub fn frame(&self) -> Utf8Bytes {
        self.frame.get_or_init(|| Utf8Bytes::from(self.notification.to_json())).clone()
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

    pub fn publish(&self, notification: Notification) {
        // No receiver is not an error: nobody is connected.
        let _ = self.tx.send(Arc::new(Published::new(notification)));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Published>> {
        self.tx.subscribe()
    }
}
