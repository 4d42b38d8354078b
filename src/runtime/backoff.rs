//! Per-application retry backoff: consecutive failures double the wait,
//! from 1 s (or another first wait) up to 5 min.
//!
//! The count is the application's current streak of failures, nothing
//! more: any reconcile that ends without error (including one that waits
//! for source-controller, or finds the application gone) ends the streak
//! and forgets the entry, so a later error starts again from 1 s and a
//! deleted application leaves nothing behind.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// The longest wait between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// Consecutive failures per key.
#[derive(Debug)]
pub struct Backoff<K> {
    failures: Mutex<HashMap<K, u32>>,
    first: Duration,
}

impl<K: Eq + Hash> Default for Backoff<K> {
    fn default() -> Self {
        Self::starting_at(Duration::from_secs(1))
    }
}

impl<K: Eq + Hash> Backoff<K> {
    /// Waits `first` after the first failure, doubling from there.
    pub fn starting_at(first: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            first,
        }
    }

    /// Counts one more failure of `key` and returns how long to wait before
    /// the next attempt (without jitter).
    pub fn failed(&self, key: K) -> Duration {
        let mut failures = self.lock();
        let attempts = failures.entry(key).or_insert(0);
        *attempts = attempts.saturating_add(1);
        (delay(*attempts) * self.first.as_secs().max(1) as u32).min(MAX_DELAY)
    }

    /// Ends the streak of `key`: it succeeded, or it is gone.
    pub fn reset(&self, key: &K) {
        self.lock().remove(key);
    }

    /// Settles one reconcile of `key`: an error is counted by the error
    /// policy (through [`Backoff::failed`]); anything else ends the streak.
    pub fn settle<T, E>(&self, key: &K, result: &Result<T, E>) {
        if result.is_ok() {
            self.reset(key);
        }
    }

    /// How many keys have a streak: bounded by the applications now failing.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, u32>> {
        // A panic elsewhere while holding the lock leaves a usable map.
        self.failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
    }

    #[test]
    fn a_streak_grows_per_key() {
        let backoff = Backoff::default();
        assert_eq!(backoff.failed("a"), Duration::from_secs(1));
        assert_eq!(backoff.failed("a"), Duration::from_secs(2));
        assert_eq!(backoff.failed("b"), Duration::from_secs(1), "keys are independent");
        assert_eq!(backoff.failed("a"), Duration::from_secs(4));
        assert_eq!(backoff.len(), 2);
    }

    #[test]
    fn a_reset_starts_the_next_streak_from_one_second() {
        let backoff = Backoff::default();
        for _ in 0..6 {
            backoff.failed("a");
        }
        backoff.reset(&"a");
        assert_eq!(backoff.failed("a"), Duration::from_secs(1));
    }

    #[test]
    fn any_reconcile_without_error_ends_the_streak() {
        let backoff = Backoff::default();
        backoff.failed("a");
        backoff.failed("a");
        backoff.settle(&"a", &Err::<(), _>("still failing"));
        assert_eq!(backoff.failed("a"), Duration::from_secs(4), "an error keeps the streak");
        // Waiting for source-controller, or finding the application
        // deleted, ends without error: the next failure starts over.
        backoff.settle(&"a", &Ok::<_, ()>("requeue in 3 s"));
        assert!(backoff.is_empty());
        assert_eq!(backoff.failed("a"), Duration::from_secs(1));
    }

    #[test]
    fn a_later_first_wait_doubles_from_there() {
        let backoff = Backoff::starting_at(Duration::from_secs(3));
        let got: Vec<u64> = (0..9).map(|_| backoff.failed("a").as_secs()).collect();
        assert_eq!(got, [3, 6, 12, 24, 48, 96, 192, 300, 300]);
    }

    #[test]
    fn reset_forgets_the_key() {
        let backoff = Backoff::default();
        backoff.failed("gone");
        backoff.reset(&"gone");
        backoff.reset(&"never-failed");
        assert!(backoff.is_empty());
    }
}
