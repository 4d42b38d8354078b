//! Where a pool that carries the revision stands: done once Ready for
//! `minReadySeconds`, failed when Flux says so or `progressDeadline`
//! passed, updating or soaking meanwhile.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::conditions;
use crate::reconcile::release_state::{ReleaseState, ReleaseStatus};

use super::{stamp, PoolDecision, PoolRollout, Requeue, Settings};

/// A pool whose release carries the revision: done, soaking, updating or failed.
pub(super) fn measure(
    settings: &Settings,
    status: &ReleaseStatus,
    written: Option<Timestamp>,
    now: Timestamp,
    requeue: &mut Requeue,
) -> PoolDecision {
    let decided = PoolDecision::of;
    let elapsed = |since: Timestamp| Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO);
    match status.state {
        ReleaseState::Ready if status.observed_latest => {
            let since = status.ready_since.as_deref().and_then(|t| t.parse::<Timestamp>().ok());
            match since.map(elapsed) {
                Some(ready_for) if ready_for < settings.min_ready => {
                    requeue.at(settings.min_ready - ready_for);
                    decided(PoolRollout::Soaking)
                }
                // Ready with no time known: Flux always stamps one, so
                // this is an old release; soaking could never end.
                _ => decided(PoolRollout::Done),
            }
        }
        ReleaseState::Failed | ReleaseState::Stalled if status.observed_latest => {
            decided(PoolRollout::Failed)
        }
        _ => match written.map(|w| (w, elapsed(w))) {
            // The message names the time of the update, not the time since:
            // it is written into the status, which must not change while
            // nothing else does.
            Some((at, waited)) if waited >= settings.progress_deadline => PoolDecision::failed(
                conditions::reason::PROGRESS_DEADLINE_EXCEEDED,
                format!(
                    "not Ready within its progressDeadline ({}) of its update at {}: {}",
                    format_duration(settings.progress_deadline),
                    stamp(at),
                    status.message
                ),
            ),
            Some((_, waited)) => {
                requeue.at(settings.progress_deadline - waited);
                decided(PoolRollout::Updating)
            }
            None => decided(PoolRollout::Updating),
        },
    }
}

pub(super) fn format_duration(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}
