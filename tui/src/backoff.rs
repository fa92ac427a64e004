//! Exponential backoff between reconnect attempts: quick to notice a server that comes back,
//! without hammering one that stays away.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff { initial, max, attempt: 0 }
    }

    /// The reconnect schedule: 0.5 s, doubling, capped at 10 s.
    pub fn reconnect() -> Self {
        Self::new(Duration::from_millis(500), Duration::from_secs(10))
    }

    /// The delay before the next attempt; each call moves one step along the schedule.
    pub fn next_delay(&mut self) -> Duration {
        // Capping the exponent keeps the multiplication far from overflow.
        let factor = 1u32 << self.attempt.min(16);
        self.attempt = self.attempt.saturating_add(1);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// How many delays were handed out since the last success.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Called after a success: the next failure starts the schedule over.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnect_schedule_doubles_from_half_a_second_to_ten() {
        let mut backoff = Backoff::reconnect();
        let delays: Vec<u64> = (0..8).map(|_| backoff.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, vec![500, 1000, 2000, 4000, 8000, 10000, 10000, 10000]);
    }

    #[test]
    fn stays_capped_after_many_attempts() {
        let mut backoff = Backoff::reconnect();
        for _ in 0..100 {
            backoff.next_delay();
        }
        assert_eq!(backoff.next_delay(), Duration::from_secs(10));
    }

    #[test]
    fn reset_starts_over() {
        let mut backoff = Backoff::reconnect();
        backoff.next_delay();
        backoff.next_delay();
        assert_eq!(backoff.attempts(), 2);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_millis(500));
    }
}
