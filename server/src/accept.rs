//! Backing off when `accept()` fails. A full descriptor table (EMFILE, ENFILE) or a memory
//! shortage does not clear by retrying at once, and the connection left waiting in the backlog
//! makes every retry fail at once: retried at a fixed short interval, the loop would wake and log
//! many times a second for as long as the shortage lasts. Written here because it is a few lines
//! over a counter, shared by the gateway and the agent host.

use std::time::{Duration, Instant};

/// The first wait after a failure; each further failure doubles it, up to [`MOST`].
const FIRST: Duration = Duration::from_millis(10);
/// The longest wait between two attempts: how late a connection may be accepted once
/// descriptors are free again.
pub const MOST: Duration = Duration::from_secs(1);

/// A listener's streak of failed accepts.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    failures: u32,
    since: Option<Instant>,
}

impl AcceptBackoff {
    /// Counts a failure of `listener`; returns how long to wait before the next attempt. The
    /// first failure of a streak is logged as a warning; the others are counted, and told when
    /// accepting works again.
    pub fn failed(&mut self, listener: &str, error: &std::io::Error) -> Duration {
        self.failures = self.failures.saturating_add(1);
        if self.since.is_none() {
            self.since = Some(Instant::now());
            tracing::warn!("{listener}: accept failed: {error}; retrying, at most every {MOST:?}, until it works");
        }
        self.wait()
    }

    /// The wait after the failures counted so far.
    fn wait(&self) -> Duration {
        let doublings = self.failures.saturating_sub(1).min(16);
        FIRST.saturating_mul(1 << doublings).min(MOST)
    }

    /// A connection was accepted: the streak, if any, ends (and is logged).
    pub fn succeeded(&mut self, listener: &str) {
        if let Some(since) = self.since.take() {
            tracing::info!(
                "{listener}: accepting connections again after {} failed attempts over {} ms",
                self.failures,
                since.elapsed().as_millis()
            );
        }
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_a_second_and_start_over_after_a_success() {
        let mut backoff = AcceptBackoff::default();
        let error = std::io::Error::from_raw_os_error(libc::EMFILE);
        let waits: Vec<u128> = (0..10).map(|_| backoff.failed("test", &error).as_millis()).collect();
        assert_eq!(waits, vec![10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]);
        // Attempts over a long shortage: about one a second, not one per fixed short interval.
        for _ in 0..1000 {
            assert_eq!(backoff.failed("test", &error), MOST);
        }
        backoff.succeeded("test");
        assert_eq!(backoff.failed("test", &error).as_millis(), 10);
    }
}
