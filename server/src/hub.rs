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
}

impl Published {
    pub fn new(notification: Notification) -> Self {
        Published { notification, json: OnceLock::new() }
    }

    /// A notification whose JSON text was written already (`None`: written when first sent).
    pub fn with_json(notification: Notification, json: Option<String>) -> Self {
        let published = Published::new(notification);
        if let Some(json) = json {
            let _ = published.json.set(Bytes::from(json));
        }
        published
    }

    /// The notification as UTF-8 JSON text (a cheap, reference-counted clone).
    pub fn json(&self) -> Bytes {
        self.json.get_or_init(|| Bytes::from(self.notification.to_json())).clone()
    }
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
