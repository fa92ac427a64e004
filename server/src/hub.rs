//! Fan-out of committed notifications to every connection.
//!
//! The store publishes here after each commit, in commit order. A connection that falls behind
//! the channel's capacity is not waited for: it re-reads what it missed from the journal (see
//! `gateway::subscriptions`), so a slow client never blocks an agent or other clients.

use std::sync::Arc;

use baton_protocol::Notification;
use tokio::sync::broadcast;

/// Notifications kept for slow receivers before they must catch up from the journal.
const CAPACITY: usize = 8192;

#[derive(Clone)]
pub struct Hub {
    tx: broadcast::Sender<Arc<Notification>>,
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
        let _ = self.tx.send(Arc::new(notification));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Notification>> {
        self.tx.subscribe()
    }
}
