//! A bound on connections that have not yet shown a token: a TCP connection holds a file
//! descriptor from `accept` until its request head is read and checked, so a local process that
//! opens connections and sends nothing could exhaust batond's descriptors — and with them the
//! spawning of agents. Each such connection is admitted with a [`Ticket`]; when more than the
//! bound are waiting, the oldest is closed. An honest client sends its head within
//! milliseconds, so under a flood of idle connections it is the idle ones that go, and a fresh
//! client still gets through. The request head timeout bounds how long any of them waits.
//!
//! Once the head is read (a page answered, or the WebSocket upgrade accepted after the token
//! check), the ticket is dropped and the connection no longer counts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Connections admitted before their request head is checked.
pub struct Admission {
    max: usize,
    waiting: Mutex<VecDeque<(u64, oneshot::Sender<()>)>>,
    next_id: AtomicU64,
    evicted: AtomicU64,
}

/// One admitted connection; it stops counting when dropped.
pub struct Ticket {
    id: u64,
    admission: Arc<Admission>,
    evicted: Option<oneshot::Receiver<()>>,
}

impl Admission {
    pub fn new(max: usize) -> Arc<Admission> {
        Arc::new(Admission {
            max: max.max(1),
            waiting: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        })
    }

    /// Admits a new connection, closing the oldest waiting one when the bound is reached.
    pub fn admit(self: &Arc<Self>) -> Ticket {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut oldest = Vec::new();
        {
            let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            while waiting.len() >= self.max {
                match waiting.pop_front() {
                    Some((_, evict)) => oldest.push(evict),
                    None => break,
                }
            }
            waiting.push_back((id, tx));
        }
        for evict in oldest {
            // Its task may have ended meanwhile: then there is nothing to close.
            if evict.send(()).is_ok() {
                let total = self.evicted.fetch_add(1, Ordering::Relaxed) + 1;
                // Logged at the first and then every 1,000th: a flood must not flood the log too.
                if total == 1 || total.is_multiple_of(1000) {
                    tracing::warn!(
                        bound = self.max,
                        closed_so_far = total,
                        "too many connections without a request: closed the oldest idle one"
                    );
                }
            }
        }
        Ticket { id, admission: self.clone(), evicted: Some(rx) }
    }

    /// How many connections wait for their request head to be checked.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Ticket {
    /// Resolves when this connection was closed to make room for newer ones.
    pub async fn evicted(&mut self) {
        match self.evicted.take() {
            Some(rx) => {
                if rx.await.is_err() {
                    // The sender is only dropped with the entry, which is only removed by us or
                    // by an eviction: never resolve for the former.
                    std::future::pending::<()>().await
                }
            }
            None => std::future::pending::<()>().await,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut waiting = self.admission.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = waiting.iter().position(|(id, _)| *id == self.id) {
            waiting.remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(ticket: &mut Ticket) -> bool {
        match ticket.evicted.as_mut() {
            Some(rx) => rx.try_recv().is_ok(),
            None => false,
        }
    }

    #[test]
    fn the_oldest_waiting_connection_makes_room_for_a_new_one() {
        let admission = Admission::new(2);
        let mut first = admission.admit();
        let mut second = admission.admit();
        assert_eq!(admission.waiting(), 2);
        let mut third = admission.admit();
        assert!(closed(&mut first), "the oldest is closed");
        assert!(!closed(&mut second) && !closed(&mut third));
        assert_eq!(admission.waiting(), 2);
    }

    #[test]
    fn a_checked_connection_stops_counting() {
        let admission = Admission::new(2);
        let mut first = admission.admit();
        let second = admission.admit();
        drop(second);
        assert_eq!(admission.waiting(), 1);
        let mut third = admission.admit();
        assert!(!closed(&mut first), "room was made by the one that left, not by closing");
        assert!(!closed(&mut third));
    }
}
