//! What holds one pool back whatever the rollout's turn: the pool itself
//! is offline, down for less than `offlineAfter`, or outside its
//! maintenance windows.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::conditions;
use crate::reconcile::release::state::ReleaseState;

use super::{
    format_duration, stamp, Closed, PoolDecision, PoolInput, PoolRollout, Release, Requeue, Settings,
};

/// An offline pool, skipped by the rollout: unless the current revision
/// reached it before it went down, and it was not done with it first
/// (Ready on it for `minReadySeconds`, the proof the rollout asks of every
/// pool). Then the revision may be what took it down, and it counts as
/// failed, so that a chart that bricks its sites halts at the first one
/// instead of walking the fleet pool by pool. Node conditions carry whole
/// seconds: going down within the second of the write counts as after it.
///
/// The time a node went down is the edge node's own clock (the kubelet
/// writes its NotReady), which may lag ours. The order is judged on our
/// clock instead where we know it: the rollout writes no pool it sees
/// down, so a release written at this revision (its stamp says so, and its
/// `written-at` is our clock) was up when written, and went down after,
/// whatever the node's clock says.
pub(super) fn offline(settings: &Settings, p: &PoolInput) -> PoolDecision {
    let skipped = PoolDecision::of(PoolRollout::Offline);
    let Release::Current {
        status,
        written: Some(written),
        resumed,
    } = p.release
    else {
        return skipped;
    };
    let seen_up_at_write = matches!(p.stamp, super::Stamp::Took { .. });
    let since = p.offline_since.map(|since| match seen_up_at_write {
        true => since.max(written),
        false => since,
    });
    let Some(since) = since.filter(|since| since.as_second() >= written.as_second()) else {
        return skipped;
    };
    let ready_since = status.ready_since.as_deref().and_then(|t| t.parse::<Timestamp>().ok());
    let done_by = |ready: Timestamp, until: Timestamp| {
        let ran_for = Duration::try_from(until.duration_since(ready.max(written))).unwrap_or(Duration::ZERO);
        ready <= until && ran_for >= settings.min_ready
    };
    let proven = status.state == ReleaseState::Ready
        && status.observed_latest
        && ready_since.is_some_and(|ready| done_by(ready, since));
    // A resume writes back what the release held. One whose mark says it
    // was done with its update before the resume (or before it went down,
    // if that came first) went down after no update of ours, whether or
    // not Flux has read the resume yet (fourth review, item 13).
    let marked = status.ready_recorded.as_deref().and_then(|t| t.parse::<Timestamp>().ok());
    let done_before_resume = resumed
        .zip(marked)
        .is_some_and(|(resumed, ready)| done_by(ready, since.min(resumed)));
    if proven || done_before_resume {
        return skipped;
    }
    PoolDecision::failed(
        conditions::pool_reason::OFFLINE_AFTER_UPDATE,
        format!(
            "went offline at {} after its update at {}: no node of the pool is Ready, and the update \
             may be what took it down; the rollout counts it as failed until a node is Ready again",
            stamp(since),
            stamp(written)
        ),
    )
}

/// How much of `offlineAfter` a pool that is down has left, if any: none
/// when it is up, or when since when it is down is not known.
pub(super) fn grace_left(settings: &Settings, p: &PoolInput, now: Timestamp) -> Option<Duration> {
    let since = p.down_since.filter(|_| p.offline)?;
    let down_for = Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO);
    settings.offline_after.checked_sub(down_for).filter(|left| !left.is_zero())
}

/// A pool down for less than `offlineAfter`, with its update or install
/// to come: it waits for the pool, which is not offline yet.
pub(super) fn down_briefly(settings: &Settings, p: &PoolInput) -> PoolDecision {
    let since = p.down_since.map(stamp).unwrap_or_default();
    let until = p
        .down_since
        .and_then(|s| s.checked_add(settings.offline_after).ok())
        .map(stamp)
        .unwrap_or_default();
    PoolDecision::noted(
        PoolRollout::Waiting,
        conditions::pool_reason::NOT_REACHED,
        format!(
            "down since {since}: its update waits until it is back; it counts as offline from {until} \
             (rollout.offlineAfter {})",
            format_duration(settings.offline_after)
        ),
    )
}

/// The closed windows that hold a pool's update (or, with `newPools:
/// Wait`, its install) back.
pub(super) fn held_by_window<'p>(p: &'p PoolInput) -> Option<&'p Closed> {
    let closed = p.closed.as_ref()?;
    match p.release {
        Release::Behind(_) => Some(closed),
        Release::Missing if closed.holds_installs => Some(closed),
        _ => None,
    }
}

/// A pool whose update waits for a maintenance window.
pub(super) fn outside_window(closed: Option<&Closed>, now: Timestamp, requeue: &mut Requeue) -> PoolDecision {
    let opens = closed.and_then(|c| c.opens);
    if let Some(left) = opens.and_then(|at| Duration::try_from(at.duration_since(now)).ok()) {
        requeue.at(left);
    }
    if let Some(problem) = closed.and_then(|c| c.unreadable.as_deref()) {
        return PoolDecision::noted(
            PoolRollout::Waiting,
            conditions::pool_reason::INVALID_WINDOW,
            format!(
                "its update waits: the pool's annotation {}: {problem}",
                crate::api::naming::ANNOTATION_MAINTENANCE_WINDOW
            ),
        );
    }
    let message = match opens {
        Some(at) => {
            format!("outside its maintenance windows: its update waits for the next, at {}", stamp(at))
        }
        None => "outside its maintenance windows, and none of them opens again: its update waits".to_string(),
    };
    PoolDecision::noted(PoolRollout::Waiting, conditions::pool_reason::OUTSIDE_WINDOW, message)
}
