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

use std::collections::HashMap;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio_util::time::DelayQueue;

/// The throttled stream of [`per_key`].
pub struct Throttled<S: Stream, W> {
    triggers: Option<Pin<Box<S>>>,
    window: W,
    /// The keys whose window is open, and whether a trigger came during it.
    open: HashMap<S::Item, bool>,
    closing: DelayQueue<S::Item>,
}

/// `triggers` with each key passed at most once per window, `window(key)`
/// long: at once when no window is open for it, else once when the window
/// ends.
pub fn per_key<S, W>(triggers: S, window: W) -> Throttled<S, W>
where
    S: Stream,
    S::Item: Eq + Hash + Clone,
    W: FnMut(&S::Item) -> Duration,
{
    Throttled {
        triggers: Some(Box::pin(triggers)),
        window,
        open: HashMap::new(),
        closing: DelayQueue::new(),
    }
}

impl<S, W> Stream for Throttled<S, W>
where
    S: Stream,
    S::Item: Eq + Hash + Clone + Unpin,
    W: FnMut(&S::Item) -> Duration + Unpin,
{
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = self.get_mut();
        // New triggers first: one for a key with no open window passes now.
        while let Some(triggers) = this.triggers.as_mut() {
            match triggers.as_mut().poll_next(cx) {
                Poll::Ready(Some(key)) => match this.open.get_mut(&key) {
                    Some(pending) => *pending = true,
                    None => {
                        this.open.insert(key.clone(), false);
                        this.closing.insert(key.clone(), (this.window)(&key));
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
                    if this.open.remove(&key) == Some(true) {
                        this.open.insert(key.clone(), false);
                        this.closing.insert(key.clone(), (this.window)(&key));
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

    fn channel() -> (mpsc::UnboundedSender<&'static str>, mpsc::UnboundedReceiver<&'static str>) {
        mpsc::unbounded()
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_trigger_passes_at_once() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW);
        let start = Instant::now();
        tx.unbounded_send("a").unwrap();
        assert_eq!(passed(&mut throttled, start).await, vec![("a", Duration::ZERO)]);
    }

    #[tokio::test(start_paused = true)]
    async fn triggers_within_the_window_fold_into_one_at_its_end() {
        let (tx, rx) = channel();
        let mut throttled = per_key(rx, |_| WINDOW);
        let start = Instant::now();
        tx.unbounded_send("a").unwrap();
        assert_eq!(passed(&mut throttled, start).await.len(), 1);
        for _ in 0..5 {
            advance(Duration::from_millis(100)).await;
            tx.unbounded_send("a").unwrap();
            assert_eq!(passed(&mut throttled, start).await, vec![]);
        }
        advance(Duration::from_millis(500)).await;
        assert_eq!(passed(&mut throttled, start).await, vec![("a", WINDOW)]);
        // Nothing came in the second window: nothing more passes, and the
        // next trigger passes at once again.
        advance(WINDOW * 3).await;
        assert_eq!(passed(&mut throttled, start).await, vec![]);
        tx.unbounded_send("a").unwrap();
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
            tx.unbounded_send("a").unwrap();
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
        tx.unbounded_send("a").unwrap();
        tx.unbounded_send("a").unwrap();
        tx.unbounded_send("b").unwrap();
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
            tx.unbounded_send(key).unwrap();
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
        tx.unbounded_send("a").unwrap();
        tx.unbounded_send("a").unwrap();
        drop(tx);
        assert_eq!(throttled.next().await, Some("a"));
        // The folded trigger still passes before the end.
        assert_eq!(throttled.next().await, Some("a"));
        assert_eq!(throttled.next().await, None);
    }
}
