//! Which pools start: where each pool stands before anything is written,
//! and which of them the rollout lets be written now.

use k8s_openapi::jiff::Timestamp;

use crate::api::conditions::pool_reason;
use crate::reconcile::release::state::{ReleaseState, ReleaseStatus};

use super::{
    down_briefly, grace_left, held_by_window, measure, offline, outside_window, PoolDecision, PoolInput,
    PoolRollout, Release, Requeue, Settings,
};

/// Where one pool stands before the rollout picks what starts: held by
/// itself, new, behind, or measured on the revision.
pub(super) fn start(
    settings: &Settings,
    p: &PoolInput,
    now: Timestamp,
    requeue: &mut Requeue,
) -> PoolDecision {
    let decided = PoolDecision::of;

    let down = p.offline && settings.skip_offline;
    let grace = grace_left(settings, p, now).filter(|_| down);
    if let Some(left) = grace {
        requeue.at(left);
    }
    match p.release {
        Release::Missing | Release::Behind(_) if grace.is_some() => down_briefly(settings, p),
        // Within the grace, a pool on the revision is measured as
        // any other: neither skipped nor failed for being down.
        _ if down && grace.is_none() => offline(settings, p),
        Release::Missing | Release::Behind(_) if held_by_window(p).is_some() => {
            outside_window(held_by_window(p), now, requeue)
        }
        Release::Missing => decided(PoolRollout::Write),
        Release::Behind(_) if !settings.progressive => decided(PoolRollout::Write),
        Release::Behind(_) => decided(PoolRollout::Pending),
        Release::Current {
            status,
            written,
            resumed,
        } => {
            let from = super::deadline_from(written, resumed);
            let counted_from = from.map(|w| settings.clock_since.map_or(w, |since| w.max(since)));
            measure(settings, status, counted_from, p.analysis.as_ref(), now, requeue)
        }
    }
}

/// An application's first install on pools of one cluster goes to one
/// pool alone, until a release of it is Ready or Helm deployed one. Helm
/// looks for an object before it creates it, so
/// installs that run together each find nothing and each create an object
/// whose name does not vary by pool (an IngressClass, a ClusterRole, a
/// webhook): two releases then hold one object, and uninstalling either
/// deletes what the other uses. Once one install is judged, such objects
/// exist, and Helm refuses them to every later install, which the pool's
/// status names. A first install that failed does not end it: Helm may
/// have failed before it created anything (a failed pre-install hook, a
/// values error, a CRD missing), and the next pool then goes alone
/// (fourth review, item 9: the rest installed together behind such a
/// failure, each creating the fixed-name object). The first to go is the
/// first pool in rollout order that may be written now, so a pool that is
/// down or outside its window, with no install under way, holds no one
/// back; once any pool's release is Ready, or was deployed by Helm (an
/// update of the fleet, a new pool joining it), nothing waits here.
///
/// A release behind is judged only once Helm deployed it or it was Ready:
/// one whose install of an earlier revision is under way (its pool now
/// outside its window, or the revision superseded) installs still, and
/// the others wait for it as for any first install, until its
/// `progressDeadline` from its write (found by the fault soak, seed 41,
/// once the checker judged first installs: a window closed on the first
/// pool in the change after the install, and the second pool installed
/// beside it).
pub(super) fn first_install_alone(
    settings: &Settings,
    pools: &[PoolInput],
    states: &mut [PoolDecision],
    now: Timestamp,
) {
    let installed = |s: &ReleaseStatus| s.deployed_before || s.state == ReleaseState::Ready;
    let judged = |p: &PoolInput, d: &PoolDecision| {
        matches!(p.release, Release::Behind(status) if installed(status))
            || matches!(p.release, Release::Current { status, .. } if status.deployed_before)
            || matches!(
                d.state,
                PoolRollout::Done
                    | PoolRollout::Soaking
                    | PoolRollout::RollBack
                    | PoolRollout::RollbackPending
                    | PoolRollout::RollingBack
                    | PoolRollout::RolledBack
            )
    };
    if pools.iter().zip(states.iter()).any(|(p, d)| judged(p, d)) {
        return;
    }
    // A release written suspended installs nothing: it neither goes first nor waits.
    let new_and_written = |i: &usize| {
        matches!(pools[*i].release, Release::Missing)
            && states[*i].state == PoolRollout::Write
            && !pools[*i].suspended
            && !pools[*i].refused_before
    };
    let going: Vec<bool> = (0..pools.len()).map(|i| new_and_written(&i)).collect();
    let installing_behind = (0..pools.len()).find(|&i| {
        let p = &pools[i];
        let recent = written_within_deadline(settings, p, now);
        matches!(p.release, Release::Behind(status)
            if !matches!(status.state, ReleaseState::Failed | ReleaseState::Stalled))
            && recent
            && !p.suspended
    });
    // A release of a pool that left before any install was judged may
    // still install, or be uninstalled deleting what it created: every
    // new pool waits until it is gone.
    if let Some(leaving) = settings.undeployed_leaving.as_deref() {
        let message = format!(
            "waits for release {leaving:?}, whose pool left the selection before the application's first \
             install was judged, to be uninstalled: an install beside it would share the chart's objects \
             whose names do not vary by pool"
        );
        for i in (0..pools.len()).filter(|i| going[*i]) {
            states[i] =
                PoolDecision::noted(PoolRollout::Waiting, pool_reason::FIRST_INSTALL, message.clone());
        }
        return;
    }
    let in_flight = updating_now(pools, states).or(installing_behind);
    tracing::debug!(
        in_flight = ?in_flight.map(|i| pools[i].pool),
        pools = ?pools
            .iter()
            .zip(states.iter())
            .map(|(p, d)| (p.pool, &p.release, d.state, p.suspended, p.last_written))
            .collect::<Vec<_>>(),
        "first install"
    );
    one_goes_first(pools, states, &going, in_flight, pool_reason::FIRST_INSTALL, |first| {
        format!(
            "waits for the application's first install, on pool {first:?}, to be Ready or fail: installs \
             that run together would each create the chart's objects whose names do not vary by pool"
        )
    });
}

/// Whether the pool's release was written by us within `progressDeadline`
/// of `now`, at whatever revision (its `written-at` stamp).
fn written_within_deadline(settings: &Settings, p: &PoolInput, now: Timestamp) -> bool {
    p.last_written
        .is_some_and(|w| now.duration_since(w).as_secs_f64() < settings.progress_deadline.as_secs_f64())
}

/// The pool whose release is under way on the revision, if any: written
/// at it and not yet judged, and not suspended.
fn updating_now(pools: &[PoolInput], states: &[PoolDecision]) -> Option<usize> {
    (0..pools.len()).find(|&i| {
        matches!(pools[i].release, Release::Current { .. })
            && states[i].state == PoolRollout::Updating
            && !pools[i].suspended
    })
}

/// Lets one pool go of those `going` marks, and holds the others with
/// `reason` and the message `waits_for` gives of the one that goes: the
/// one `in_flight` already, else the first in rollout order.
fn one_goes_first(
    pools: &[PoolInput],
    states: &mut [PoolDecision],
    going: &[bool],
    in_flight: Option<usize>,
    reason: &'static str,
    waits_for: impl Fn(&str) -> String,
) {
    let going = |i: &usize| going[*i];
    let first =
        in_flight.or_else(|| (0..pools.len()).filter(going).min_by_key(|&i| (pools[i].wave, pools[i].pool)));
    let Some(first) = first else { return };
    let message = waits_for(pools[first].pool);
    let held: Vec<usize> = (0..pools.len()).filter(going).filter(|&i| i != first).collect();
    for i in held {
        states[i] = PoolDecision::noted(PoolRollout::Waiting, reason, message.clone());
    }
}

/// A new chart version goes to one pool alone first, on pools of one
/// cluster, whatever the strategy and `maxUnavailable`, until a pool's
/// release is Ready on it. A version may add an object whose name does
/// not vary by pool, and upgrades that run together would each find it
/// missing and each create it, as first installs would (see
/// [`first_install_alone`]); once one release holds it, Helm refuses it
/// to every later upgrade, which that pool's status names (fourth
/// review, item 9). Nothing waits once a pool's release is Ready on the
/// version or Helm deployed it on one. It costs one upgrade's time per
/// chart version. The first to go is one under way already, else the
/// first in rollout order
/// that may be written now; a pool that is down, outside its window,
/// written suspended or refused neither goes first nor waits.
pub(super) fn new_chart_alone(version: &str, pools: &[PoolInput], states: &mut [PoolDecision]) {
    fn status_of<'a>(p: &PoolInput<'a>) -> Option<&'a ReleaseStatus> {
        match p.release {
            Release::Current { status, .. } | Release::Behind(status) => Some(status),
            Release::Missing => None,
        }
    }
    let on_version =
        |p: &PoolInput| status_of(p).is_some_and(|s| s.chart_version.as_deref() == Some(version));
    let ready_on_it =
        |p: &PoolInput| on_version(p) && status_of(p).is_some_and(|s| s.state == ReleaseState::Ready);
    // Deployed by Helm on some pool, the version's objects exist, however
    // the release stands now: an update of values that Helm has yet to
    // take (its controller down) left every release not Ready, and a pool
    // joining then waited for the others (seen live).
    let deployed_on_it =
        |p: &PoolInput| status_of(p).is_some_and(|s| s.deployed_version.as_deref() == Some(version));
    if pools.iter().any(|p| ready_on_it(p) || deployed_on_it(p)) {
        return;
    }
    let moving = |i: &usize| {
        states[*i].state == PoolRollout::Write
            && !on_version(&pools[*i])
            && !pools[*i].suspended
            && !pools[*i].refused_before
    };
    let moving: Vec<bool> = (0..pools.len()).map(|i| moving(&i)).collect();
    let in_flight = updating_now(pools, states);
    one_goes_first(pools, states, &moving, in_flight, pool_reason::NEW_CHART_FIRST, |first| {
        format!(
            "waits for pool {first:?} to be Ready on chart version {version}: upgrades that run together \
             would each create the objects a new version adds whose names do not vary by pool"
        )
    });
}

/// A progressive rollout's pick of the behind pools that start now:
/// those Flux finds unavailable already, then the earliest unfinished
/// wave's in name order within `maxUnavailable`, unless that wave or one
/// before it awaits approval. `unavailable` counts the pools updated and
/// not yet done.
pub(super) fn pick(
    settings: &Settings,
    pools: &[PoolInput],
    states: &mut [PoolDecision],
    mut unavailable: usize,
    now: Timestamp,
    requeue: &mut Requeue,
) {
    // Pools Flux says are not Ready (Waiting reasons aside) are
    // unavailable already: they start at once. Not so a release Flux has not judged since its last
    // change (a suspension, a resume): opening those would write every
    // pool at once, past maxUnavailable and the waves.
    //
    // Such a release written by us within its progressDeadline is an
    // update under way all the same (of the revision before, superseded
    // mid-rollout): Helm is upgrading it, or is about to. It takes a slot
    // until Flux judges it, and only then takes its turn: counting it
    // free let a new revision start a healthy pool beside it, two pools
    // down under `maxUnavailable: 1` (found by the fault soak, seed
    // 98979945). A suspended release is upgraded by no one and takes
    // none; one written longer ago (resumed, its spec unchanged since)
    // holds no slot for ever.
    let mut in_flight = vec![false; pools.len()];
    for (i, (p, d)) in pools.iter().zip(states.iter_mut()).enumerate() {
        let Release::Behind(status) = p.release else {
            continue;
        };
        if d.state != PoolRollout::Pending {
            continue;
        }
        let recent = written_within_deadline(settings, p, now);
        // A release Flux waits on (its source not Ready, its artifact not
        // fetched, a dependency) runs its workload as before: it is
        // waiting, not unavailable, and takes its turn like a healthy one
        // (fourth review, item 11: a source outage would otherwise write
        // every waiting pool at once, past the waves and approvals).
        let unavailable_already =
            status.observed_latest && !matches!(status.state, ReleaseState::Ready | ReleaseState::Waiting);
        // Ready on the revision before and still soaking for
        // `minReadySeconds`, it is updated and not yet done all the same:
        // it keeps its slot until its soak ends (found by the fault soak,
        // seed 178552357: a new revision started a healthy pool beside one
        // that had turned Ready on the last revision a second before).
        let soaking = (status.observed_latest && recent && !p.suspended)
            .then(|| super::soak_left(settings.min_ready, status, now))
            .flatten()
            .filter(|left| !left.is_zero());
        if unavailable_already {
            d.state = PoolRollout::Write;
            unavailable += 1;
        } else if !status.observed_latest && !p.suspended && recent {
            in_flight[i] = true;
            unavailable += 1;
        } else if let Some(left) = soaking {
            requeue.at(left);
            in_flight[i] = true;
            unavailable += 1;
        }
    }
    let mut waiting: Vec<usize> = (0..pools.len())
        .filter(|&i| states[i].state == PoolRollout::Pending && !in_flight[i])
        .collect();
    waiting.sort_by_key(|&i| (pools[i].wave, pools[i].pool));
    let active = active_wave(pools, states);
    // A step that requires approval holds every wave from its own on
    // until it is approved for this revision, even when none of its own
    // pools is to be updated now: its pools left the selection, or were
    // new and installed at once. Holding only while its own pools waited
    // let the waves after it go unapproved (found by the fault soak, seed
    // 88641237: the gated step's pools deleted, the last wave went).
    let gated = active.and_then(|a| gate_before(settings, a));
    for i in waiting {
        // The pools of the active wave wait for the approval; every pool
        // waiting after them is of a later wave.
        if gated.is_some() {
            if active == Some(pools[i].wave) {
                states[i] = PoolDecision::of(PoolRollout::AwaitingApproval);
            }
            continue;
        }
        if unavailable >= settings.max_unavailable || Some(pools[i].wave) != active {
            break;
        }
        states[i].state = PoolRollout::Write;
        unavailable += 1;
    }
}

/// A halted revision: every pool still to be written stays where it is.
pub(super) fn halt(states: &mut [PoolDecision]) {
    for d in states
        .iter_mut()
        .filter(|d| matches!(d.state, PoolRollout::Pending | PoolRollout::Write | PoolRollout::Waiting))
    {
        *d = PoolDecision::of(PoolRollout::Halted);
    }
}

/// A paused rollout: the pools behind wait, the new ones install.
pub(super) fn pause(pools: &[PoolInput], states: &mut [PoolDecision]) {
    for (p, d) in pools.iter().zip(states.iter_mut()) {
        // A new pool has nothing to break; only updates wait.
        let held = matches!(p.release, Release::Behind(_))
            && matches!(d.state, PoolRollout::Pending | PoolRollout::Write | PoolRollout::Waiting);
        if held {
            *d = PoolDecision::of(PoolRollout::Paused);
        }
    }
}

/// The earliest wave at or before `wave` that awaits approval.
pub(super) fn gate_before(settings: &Settings, wave: usize) -> Option<usize> {
    settings.awaiting_approval.iter().copied().find(|g| *g <= wave)
}

/// The earliest wave with a pool behind or not yet done.
pub(super) fn active_wave(pools: &[PoolInput], states: &[PoolDecision]) -> Option<usize> {
    pools
        .iter()
        .zip(states)
        .filter(|(_, d)| {
            matches!(
                d.state,
                PoolRollout::Pending
                    | PoolRollout::Write
                    | PoolRollout::Updating
                    | PoolRollout::Soaking
                    | PoolRollout::Waiting
                    | PoolRollout::AwaitingApproval
            )
        })
        .map(|(p, _)| p.wave)
        .min()
}
