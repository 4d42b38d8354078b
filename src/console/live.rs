//! Open pages stay live: `/events` is a stream of server-sent events that
//! says the fleet changed, at most once per [`BATCH`] however many objects
//! moved, so that a rollout over thousands of pools does not flood the
//! browser. Each event names the applications that changed (a Node or a
//! pool object: those whose selected pools it is of; `*`: any may have),
//! and a page fetches itself and swaps in its live parts only when
//! its own application is among them (`console.js`): a change of one
//! application does not make every other open page fetch itself whole. A
//! quiet fleet still gets an event each [`HEARTBEAT`], for every page: a
//! pool that is down turns Offline with time alone.
//!
//! Each open page holds a stream, so streams are capped ([`Streams`]): at
//! most [`PER_USER`] per signed-in user and [`TOTAL`] in all. Past a cap a
//! page gets a 429 saying so, and works without live updates (a reload
//! refreshes it): one user's forty tabs, or a script that opens streams
//! in a loop, cannot take the console from everyone else.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::Console;

/// The most streams one signed-in user holds at once.
pub const PER_USER: usize = 8;
/// The most streams the console holds at once.
pub const TOTAL: usize = 256;

/// The streams open now, in all and by user.
#[derive(Debug, Default)]
pub struct Streams {
    open: Mutex<(usize, HashMap<String, usize>)>,
}

/// A stream's place under the caps, given back when it ends.
#[derive(Debug)]
pub struct Held {
    streams: Arc<Streams>,
    user: Option<String>,
}

/// Which cap a new stream meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    User,
    Console,
}

impl Streams {
    /// A place for one more stream of `user` (none: nobody signed in,
    /// counted in all only), or the cap it meets.
    pub fn hold(self: &Arc<Self>, user: Option<&str>) -> Result<Held, Full> {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (total, by_user) = &mut *open;
        if *total >= TOTAL {
            return Err(Full::Console);
        }
        if let Some(user) = user {
            let mine = by_user.entry(user.to_string()).or_default();
            if *mine >= PER_USER {
                return Err(Full::User);
            }
            *mine += 1;
        }
        *total += 1;
        Ok(Held {
            streams: Arc::clone(self),
            user: user.map(str::to_string),
        })
    }

    /// How many are open, in all.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).0
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = self.streams.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (total, by_user) = &mut *open;
        *total = total.saturating_sub(1);
        if let Some(user) = &self.user {
            if let Some(mine) = by_user.get_mut(user) {
                *mine = mine.saturating_sub(1);
                if *mine == 0 {
                    by_user.remove(user);
                }
            }
        }
    }
}

/// The least time between two events of one stream.
pub const BATCH: Duration = Duration::from_millis(750);

/// The most time between two events of one stream.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

pub(super) async fn events(State(console): State<Console>, headers: HeaderMap) -> Response {
    if let Err(why) = console.reader(&headers) {
        return super::signed_out(&why);
    }
    let user = console.controls(&headers).map(|c| c.user);
    let held = match console.streams.hold(user.as_deref()) {
        Ok(held) => held,
        Err(full) => return full_response(full),
    };
    // The place is given back when the browser goes and the stream drops.
    let source = std::sync::Arc::clone(&console.source);
    let named = move |since: u64| match source.changed_since(since) {
        Some(apps) => apps.join(" "),
        None => EVERYTHING.to_string(),
    };
    let stream = batched(console.source.changes(), named).map(move |event| {
        let _held = &held;
        event
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

fn full_response(full: Full) -> Response {
    let message = match full {
        Full::User => format!(
            "You have {PER_USER} live pages of this console open already: close some. This page works \
             without live updates; reload it to refresh.\n"
        ),
        Full::Console => format!(
            "The console serves {TOTAL} live pages already. This page works without live updates; \
             reload it to refresh.\n"
        ),
    };
    let mut response = (StatusCode::TOO_MANY_REQUESTS, message).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
    response
}

/// An event's word for "any application may have changed".
pub const EVERYTHING: &str = "*";

/// One event per batch of changes of `changes`, or per heartbeat; the
/// first change after a quiet spell goes out at once. Its data is what
/// `named` says changed since the stream's last event (a heartbeat's is
/// [`EVERYTHING`]: time alone changes pages).
pub fn batched(
    changes: watch::Receiver<u64>,
    named: impl Fn(u64) -> String + Send + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let since = *changes.borrow();
    let start = (changes, Instant::now() - BATCH, since, named);
    futures::stream::unfold(start, |(mut changes, last, since, named)| async move {
        let heartbeat = match tokio::time::timeout(HEARTBEAT, changes.changed()).await {
            Ok(Err(_)) => return None, // the caches are gone: the process is stopping
            Ok(Ok(())) => false,
            Err(_) => true,
        };
        tokio::time::sleep_until(last + BATCH).await;
        let seen = *changes.borrow_and_update();
        let data = match heartbeat {
            true => EVERYTHING.to_string(),
            false => named(since),
        };
        let event = Event::default().event("fleet").data(data);
        Some((Ok(event), (changes, Instant::now(), seen, named)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_capped_per_user_and_in_all_and_given_back_when_they_end() {
        let streams = Arc::new(Streams::default());
        let alices: Vec<Held> = (0..PER_USER).map(|_| streams.hold(Some("alice")).unwrap()).collect();
        assert_eq!(streams.hold(Some("alice")).unwrap_err(), Full::User);
        let bob = streams.hold(Some("bob")).unwrap();
        drop(alices);
        assert!(streams.hold(Some("alice")).is_ok(), "closed pages give their places back");
        assert_eq!(streams.open(), 1, "bob's alone");
        drop(bob);
        let all: Vec<Held> = (0..TOTAL).map(|_| streams.hold(None).unwrap()).collect();
        assert_eq!(streams.hold(Some("carol")).unwrap_err(), Full::Console);
        assert_eq!(streams.hold(None).unwrap_err(), Full::Console);
        drop(all);
        assert_eq!(streams.open(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn many_changes_make_one_event_per_batch() {
        let (tx, rx) = watch::channel(0u64);
        let mut stream = Box::pin(batched(rx, |_| EVERYTHING.to_string()));
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

    #[tokio::test(start_paused = true)]
    async fn each_event_names_what_changed_since_the_last_and_a_heartbeat_names_everything() {
        let (tx, rx) = watch::channel(3u64);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let named = {
            let asked = Arc::clone(&asked);
            move |since: u64| {
                asked.lock().unwrap().push(since);
                format!("edge/gw-{since}")
            }
        };
        let mut stream = Box::pin(batched(rx, named));
        let data = |event: Event| format!("{event:?}");
        tx.send_modify(|n| *n += 2);
        let first = data(stream.next().await.unwrap().unwrap());
        assert!(first.contains("edge/gw-3"), "since the count the stream began at: {first}");
        tx.send_modify(|n| *n += 1);
        let second = data(stream.next().await.unwrap().unwrap());
        assert!(second.contains("edge/gw-5"), "since the last event's count: {second}");
        let quiet = data(stream.next().await.unwrap().unwrap());
        assert!(quiet.contains("data: *") || quiet.contains("\"*\""), "a heartbeat: {quiet}");
        assert_eq!(*asked.lock().unwrap(), [3, 5], "a heartbeat asks nothing");
    }
}
