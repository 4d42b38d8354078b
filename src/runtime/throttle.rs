//! A per-key throttle for reconcile triggers.
//!
//! kube's controller debounce restarts its timer at every trigger, so a
//! steady trickle of events for one application (helm-controller stamping
//! `observedGeneration` on 10,000 releases one by one, or releases turning
//! Ready through a rollout) holds that application's reconcile off until
//! the trickle stops: minutes with no status roll-up and no resync.
//!
//! A throttle bounds both ways instead: the first trigger for a key passes
//! at once (a site coming online is acted on without delay), and every
//! trigger that follows within the window is folded into one that passes
//! when the window ends (the last change is never lost). A key triggered
//! all the time is thus reconciled once per window, no more and no less.
//! Each window's length is asked for when it opens, so that a key whose
//! reconcile is costly can be given a longer one.
//!
//! A window sheds load; it must not hold back a change a person waits to
//! see. An urgent trigger (a pool entering or leaving an application's
//! selection) ends the window it falls in at most [`URGENT_WAIT`] after
//! the window opened, however long it was to be: a site that appears is
//! written within about a second even at ten thousand pools, while status
//! churn still folds into one reconcile a window.

use std::collections::HashMap;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::time::Instant;
use tokio_util::time::{delay_queue, DelayQueue};

/// The longest an urgent trigger waits after the window it falls in
/// opened.
pub const URGENT_WAIT: Duration = Duration::from_millis(500);

/// One trigger for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake<K> {
    pub key: K,
    /// Ends an open window early (see [`URGENT_WAIT`]).
    pub urgent: bool,
}

impl<K> Wake<K> {
    /// A trigger folded into the window it falls in.
    pub fn folded(key: K) -> Self {
        Self { key, urgent: false }
    }

    /// A trigger that waits [`URGENT_WAIT`] at most.
    pub fn urgent(key: K) -> Self {
        Self { key, urgent: true }
    }
}

/// The throttled stream of [`per_key`].
pub struct Throttled<S, K, W> {
    triggers: Option<Pin<Box<S>>>,
    window: W,
    /// The keys whose window is open.
    open: HashMap<K, Open>,
    closing: DelayQueue<K>,
}

/// A key's open window.
struct Open {
    /// Whether a trigger came during it.
    pending: bool,
    opened: Instant,
    /// Its place in the closing queue, to end it early.
    closes: delay_queue::Key,
}

/// `triggers` with each key passed at most once per window, `window(key)`
/// long: at once when no window is open for it, else once when the window
/// ends (an urgent trigger ends it [`URGENT_WAIT`] after it opened).
pub fn per_key<S, K, W>(triggers: S, window: W) -> Throttled<S, K, W>
where
    S: Stream<Item = Wake<K>>,
    K: Eq + Hash + Clone,
    W: FnMut(&K) -> Duration,
{
    Throttled {
        triggers: Some(Box::pin(triggers)),
        window,
        open: HashMap::new(),
        closing: DelayQueue::new(),
    }
}

impl<S, K, W> Throttled<S, K, W>
where
    K: Eq + Hash + Clone,
    W: FnMut(&K) -> Duration,
{
    fn open(&mut self, key: K) {
        let closes = self.closing.insert(key.clone(), (self.window)(&key));
        let window = Open {
            pending: false,
            opened: Instant::now(),
            closes,
        };
        self.open.insert(key, window);
    }
}

impl<S, K, W> Stream for Throttled<S, K, W>
where
    S: Stream<Item = Wake<K>>,
    K: Eq + Hash + Clone + Unpin,
    W: FnMut(&K) -> Duration + Unpin,
{
    type Item = K;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<K>> {
        let this = self.get_mut();
        // New triggers first: one for a key with no open window passes now.
        while let Some(triggers) = this.triggers.as_mut() {
            match triggers.as_mut().poll_next(cx) {
                Poll::Ready(Some(Wake { key, urgent })) => match this.open.get_mut(&key) {
                    Some(window) => {
                        window.pending = true;
                        let by = window.opened + URGENT_WAIT;
                        if urgent && this.closing.deadline(&window.closes) > by {
                            this.closing.reset_at(&window.closes, by);
                        }
                    }
                    None => {
                        this.open(key.clone());
                        return Poll::Ready(Some(key));
                    }
                },
                Poll::Ready(None) => this.triggers = None,
                Poll::Pending => break,
            }
        }
        // Then windows that ended: a key triggered during its window passes
        // now and opens the next one.
        loop {
            match this.closing.poll_expired(cx) {
                Poll::Ready(Some(expired)) => {
                    let key = expired.into_inner();
                    if this.open.remove(&key).is_some_and(|w| w.pending) {
                        this.open(key.clone());
                        return Poll::Ready(Some(key));
                    }
                }
                // No window open: done once the triggers are.
                Poll::Ready(None) => {
                    return match this.triggers {
                        None => Poll::Ready(None),
                        Some(_) => Poll::Pending,
                    };
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc;
    use futures::{FutureExt, StreamExt};
    use tokio::time::{advance, Instant};

    const WINDOW: Duration = Duration::from_secs(1);

    /// The keys that passed by now, each with the time since `start`.
    async fn passed(
        throttled: &mut (impl Stream<Item = &'static str> + Unpin),
        start: Instant,
    ) -> Vec<(&'static str, Duration)> {
        let mut out = Vec::new();
        while let Some(Some(key)) = throttled.next().now_or_never() {
            out.push((key, start.elapsed()));
        }
        out
    }

    type Triggers = (mpsc::UnboundedSender<Wake<&'static str>>, mpsc::UnboundedReceiver<Wake<&'static str>>);

    fn channel() -> Triggers {
        mpsc::unbounded()
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_trigger_passes_at_once() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW);
        let start = Instant::now();
        tx.unbounded_send(Wake::folded("a")).unwrap();
        assert_eq!(passed(&mut throttled, start).await, vec![("a", Duration::ZERO)]);
    }

    #[tokio::test(start_paused = true)]
    async fn triggers_within_the_window_fold_into_one_at_its_end() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW);
        let start = Instant::now();
        tx.unbounded_send(Wake::folded("a")).unwrap();
        assert_eq!(passed(&mut throttled, start).await.len(), 1);
        for _ in 0..5 {
            advance(Duration::from_millis(100)).await;
            tx.unbounded_send(Wake::folded("a")).unwrap();
            assert_eq!(passed(&mut throttled, start).await, vec![]);
        }
        advance(Duration::from_millis(500)).await;
        assert_eq!(passed(&mut throttled, start).await, vec![("a", WINDOW)]);
        // Nothing came in the second window: nothing more passes, and the
        // next trigger passes at once again.
        advance(WINDOW * 3).await;
        assert_eq!(passed(&mut throttled, start).await, vec![]);
        tx.unbounded_send(Wake::folded("a")).unwrap();
        assert_eq!(passed(&mut throttled, start).await, vec![("a", Duration::from_secs(4))]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_trickle_passes_once_per_window_not_never() {
        // The defect this guards against: a debounce that restarts at every
        // trigger never fires while triggers keep coming.
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW);
        let start = Instant::now();
        let mut seen = Vec::new();
        for _ in 0..100 {
            tx.unbounded_send(Wake::folded("a")).unwrap();
            seen.extend(passed(&mut throttled, start).await);
            advance(Duration::from_millis(50)).await;
        }
        seen.extend(passed(&mut throttled, start).await);
        let times: Vec<u64> = seen.iter().map(|(_, at)| at.as_secs()).collect();
        assert_eq!(times, vec![0, 1, 2, 3, 4, 5]);
    }

    #[tokio::test(start_paused = true)]
    async fn keys_are_throttled_apart() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW);
        let start = Instant::now();
        tx.unbounded_send(Wake::folded("a")).unwrap();
        tx.unbounded_send(Wake::folded("a")).unwrap();
        tx.unbounded_send(Wake::folded("b")).unwrap();
        assert_eq!(passed(&mut throttled, start).await, vec![("a", Duration::ZERO), ("b", Duration::ZERO)]);
        advance(WINDOW).await;
        assert_eq!(passed(&mut throttled, start).await, vec![("a", WINDOW)]);
    }

    #[tokio::test(start_paused = true)]
    async fn each_window_is_as_long_as_asked_when_it_opens() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |key: &&str| match *key {
            "slow" => WINDOW * 10,
            _ => WINDOW,
        });
        let start = Instant::now();
        for key in ["slow", "fast", "slow", "fast"] {
            tx.unbounded_send(Wake::folded(key)).unwrap();
        }
        assert_eq!(passed(&mut throttled, start).await.len(), 2);
        advance(WINDOW).await;
        assert_eq!(passed(&mut throttled, start).await, vec![("fast", WINDOW)]);
        advance(WINDOW * 8).await;
        assert_eq!(passed(&mut throttled, start).await, vec![]);
        advance(WINDOW).await;
        assert_eq!(passed(&mut throttled, start).await, vec![("slow", WINDOW * 10)]);
    }

    #[tokio::test(start_paused = true)]
    async fn ends_once_the_triggers_end_and_the_last_window_closed() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW);
        tx.unbounded_send(Wake::folded("a")).unwrap();
        tx.unbounded_send(Wake::folded("a")).unwrap();
        drop(tx);
        assert_eq!(throttled.next().await, Some("a"));
        // The folded trigger still passes before the end.
        assert_eq!(throttled.next().await, Some("a"));
        assert_eq!(throttled.next().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_urgent_trigger_ends_a_long_window_early() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW * 10);
        let start = Instant::now();
        tx.unbounded_send(Wake::folded("a")).unwrap();
        assert_eq!(passed(&mut throttled, start).await.len(), 1);
        // Status churn waits for the window's end…
        advance(Duration::from_millis(100)).await;
        tx.unbounded_send(Wake::folded("a")).unwrap();
        assert_eq!(passed(&mut throttled, start).await, vec![]);
        // …but a pool entering the selection passes URGENT_WAIT after the
        // window opened, with the churn folded into it.
        advance(Duration::from_millis(100)).await;
        tx.unbounded_send(Wake::urgent("a")).unwrap();
        assert_eq!(passed(&mut throttled, start).await, vec![]);
        advance(URGENT_WAIT - Duration::from_millis(200)).await;
        assert_eq!(passed(&mut throttled, start).await, vec![("a", URGENT_WAIT)]);
        // The window that opens then is as long as ever for churn.
        tx.unbounded_send(Wake::folded("a")).unwrap();
        advance(WINDOW * 9).await;
        assert_eq!(passed(&mut throttled, start).await, vec![]);
        advance(WINDOW).await;
        assert_eq!(passed(&mut throttled, start).await, vec![("a", URGENT_WAIT + WINDOW * 10)]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_urgent_trigger_late_in_a_window_passes_at_once() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW * 10);
        let start = Instant::now();
        tx.unbounded_send(Wake::urgent("a")).unwrap();
        assert_eq!(passed(&mut throttled, start).await, vec![("a", Duration::ZERO)]);
        advance(WINDOW * 3).await;
        tx.unbounded_send(Wake::urgent("a")).unwrap();
        // Past its deadline already: it expires at the next poll.
        advance(Duration::from_millis(1)).await;
        let passed = passed(&mut throttled, start).await;
        assert_eq!(passed.len(), 1, "{passed:?}");
        assert!(passed[0].1 <= WINDOW * 3 + Duration::from_millis(1), "{passed:?}");
        // Another key's window is its own.
        tx.unbounded_send(Wake::urgent("b")).unwrap();
        assert_eq!(throttled.next().await, Some("b"));
    }
}
