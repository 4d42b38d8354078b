//! Where a pool that carries the revision stands: done once Ready for
//! `minReadySeconds` and its metric checks passed, failed when Flux says
//! so, a check fails or `progressDeadline` passed, updating or soaking
//! meanwhile.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::conditions;
use crate::api::conditions::pool_reason;
use crate::reconcile::release::state::{ReleaseState, ReleaseStatus};

use super::analysis::Verdict;
use super::{stamp, PoolDecision, PoolRollout, Requeue, Settings};

/// A pool whose release carries the revision: done, soaking, updating or failed.
pub(super) fn measure(
    settings: &Settings,
    status: &ReleaseStatus,
    written: Option<Timestamp>,
    analysis: Option<&Verdict>,
    now: Timestamp,
    requeue: &mut Requeue,
) -> PoolDecision {
    let decided = PoolDecision::of;
    let elapsed = |since: Timestamp| Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO);
    match status.state {
        ReleaseState::Ready if status.observed_latest => {
            // A failed check fails the pool at once, soak or not.
            if let Some(Verdict::Failed(message)) = analysis {
                return PoolDecision::failed(pool_reason::ANALYSIS_FAILED, message.clone());
            }
            match (soak_left(settings.min_ready, status, now), analysis) {
                (Some(left), _) if !left.is_zero() => {
                    requeue.at(left);
                    match analysis {
                        Some(Verdict::Asking { message, .. }) => PoolDecision::noted(
                            PoolRollout::Soaking,
                            pool_reason::ANALYSIS_RUNNING,
                            message.clone(),
                        ),
                        _ => decided(PoolRollout::Soaking),
                    }
                }
                (_, Some(Verdict::Asking { next, message })) => {
                    requeue.at(*next);
                    PoolDecision::noted(PoolRollout::Soaking, pool_reason::ANALYSIS_RUNNING, message.clone())
                }
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

/// How much longer a release must stay Ready to be done with the revision
/// it carries (Ready on its latest spec for `min_ready`): zero once done,
/// `None` while it is not Ready on its latest spec. Ready with no time
/// known is an old release, done: Flux always stamps one, so soaking could
/// never end.
pub fn soak_left(min_ready: Duration, status: &ReleaseStatus, now: Timestamp) -> Option<Duration> {
    if status.state != ReleaseState::Ready || !status.observed_latest {
        return None;
    }
    let since = status.ready_since.as_deref().and_then(|t| t.parse::<Timestamp>().ok());
    let ready_for = since.map(|s| Duration::try_from(now.duration_since(s)).unwrap_or(Duration::ZERO));
    Some(ready_for.map_or(Duration::ZERO, |r| min_ready.saturating_sub(r)))
}

/// The soak of a release Ready on the revision it carries, as its checks
/// see it: from when Ready turned True (Flux stamps it; a release without
/// the stamp soaks from its write, or is an old one, long Ready) to
/// `min_ready` later.
pub fn soak_of(
    min_ready: Duration,
    status: &ReleaseStatus,
    written: Option<Timestamp>,
) -> (Timestamp, Timestamp) {
    let since = status.ready_since.as_deref().and_then(|t| t.parse::<Timestamp>().ok());
    let since = since.or(written).unwrap_or(Timestamp::UNIX_EPOCH);
    let min_ready = k8s_openapi::jiff::SignedDuration::try_from(min_ready).unwrap_or_default();
    (since, since.checked_add(min_ready).unwrap_or(since))
}

pub(super) fn format_duration(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}
