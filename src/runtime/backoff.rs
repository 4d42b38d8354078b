//! Retry backoff: consecutive failures double the wait, from 1 s (or
//! another first wait) up to 5 min.
//!
//! The count is an application's current streak of failures, kept with
//! everything else of the application ([`super::index::AppIndex`]): any
//! reconcile that ends without error (including one that waits for
//! source-controller, or finds the application gone) ends the streak, so
//! a later error starts again from the first wait, and a deleted
//! application leaves nothing behind.

use std::time::Duration;

/// The longest wait between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// How long to wait after a streak of failures.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    first: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::starting_at(Duration::from_secs(1))
    }
}

impl Backoff {
    /// Waits `first` after the first failure, doubling from there.
    pub fn starting_at(first: Duration) -> Self {
        Self { first }
    }

    /// How long to wait before the next attempt after `failures` in a row
    /// (without jitter).
    pub fn wait(&self, failures: u32) -> Duration {
        (delay(failures) * self.first.as_secs().max(1) as u32).min(MAX_DELAY)
    }
}

/// 1 s after the first failure, doubling, at most [`MAX_DELAY`].
pub fn delay(attempts: u32) -> Duration {
    let exponent = attempts.clamp(1, 10) - 1;
    Duration::from_secs(1u64 << exponent).min(MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_five_minutes() {
        let got: Vec<u64> = (1..=12).map(|n| delay(n).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(delay(0), Duration::from_secs(1));
        assert_eq!(delay(u32::MAX), MAX_DELAY);
        let waits: Vec<u64> = (1..=4).map(|n| Backoff::default().wait(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8]);
    }

    #[test]
    fn a_later_first_wait_doubles_from_there() {
        let backoff = Backoff::starting_at(Duration::from_secs(3));
        let got: Vec<u64> = (1..=9).map(|n| backoff.wait(n).as_secs()).collect();
        assert_eq!(got, [3, 6, 12, 24, 48, 96, 192, 300, 300]);
    }
}
