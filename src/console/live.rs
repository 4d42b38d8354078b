//! Open pages stay live: `/events` is a stream of server-sent events that
//! says the fleet changed, at most once per [`BATCH`] however many objects
//! moved, so that a rollout over thousands of pools does not flood the
//! browser. The page then fetches itself and swaps in its live parts
//! (`console.js`). A quiet fleet still gets an event each [`HEARTBEAT`]:
//! a pool that is down turns Offline with time alone.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::watch;
use tokio::time::Instant;

use super::Console;

/// The least time between two events of one stream.
pub const BATCH: Duration = Duration::from_millis(750);

/// The most time between two events of one stream.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

pub(super) async fn events(
    State(console): State<Console>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    Sse::new(batched(console.source.changes())).keep_alive(KeepAlive::default())
}

/// One event per batch of changes of `changes`, or per heartbeat; the
/// first change after a quiet spell goes out at once.
pub fn batched(changes: watch::Receiver<u64>) -> impl Stream<Item = Result<Event, Infallible>> {
    let start = (changes, Instant::now() - BATCH);
    futures::stream::unfold(start, |(mut changes, last)| async move {
        if let Ok(Err(_)) = tokio::time::timeout(HEARTBEAT, changes.changed()).await {
            return None; // the caches are gone: the process is stopping
        }
        tokio::time::sleep_until(last + BATCH).await;
        let seen = *changes.borrow_and_update();
        let event = Event::default().event("fleet").data(seen.to_string());
        Some((Ok(event), (changes, Instant::now())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test(start_paused = true)]
    async fn many_changes_make_one_event_per_batch() {
        let (tx, rx) = watch::channel(0u64);
        let mut stream = Box::pin(batched(rx));
        tx.send_modify(|n| *n += 1);
        let first = Instant::now();
        let _: Event = stream.next().await.unwrap().unwrap();
        assert_eq!(first.elapsed(), Duration::ZERO, "the first change goes out at once");
        for _ in 0..1_000 {
            tx.send_modify(|n| *n += 1);
        }
        let second = Instant::now();
        let _: Event = stream.next().await.unwrap().unwrap();
        assert_eq!(second.elapsed(), BATCH, "a thousand changes wait out one batch, together");
        let quiet = Instant::now();
        let _: Event = stream.next().await.unwrap().unwrap();
        assert_eq!(quiet.elapsed(), HEARTBEAT, "a quiet fleet still hears each heartbeat");
        drop(tx);
        assert!(stream.next().await.is_none(), "the stream ends with the caches");
    }
}
