//! Rollout: which pools may have their release written now, and where the
//! current revision has got to. Pure and stateless: every decision is made
//! again from the releases as they are (which revision each carries, Flux's
//! verdict on it, when it was written and since when it is Ready) and the
//! time, so a restarted controller, a new revision or a halt needs no memory.
//!
//! The rules, in order:
//! - A pool down (nodes, none Ready; a site not reached) for less than
//!   `offlineAfter` is not offline yet: the rollout waits for it. It is
//!   neither written (a write would land on nodes that cannot run it) nor
//!   skipped, and its wave is not done without it, so a flapping link
//!   moves no pool in or out of the rollout.
//! - A pool whose maintenance windows are all closed waits for the next
//!   to open (see [`window`]): its update is not written, it takes no
//!   slot, and its wave is not done without it. A new pool is installed
//!   at once unless a window says `newPools: Wait`.
//! - An offline pool (down for `offlineAfter`) is skipped unless `offlinePools:
//!   Include`: its release stays as it is and it blocks no wave, but one
//!   still behind keeps the revision from completing (`AwaitingOffline`)
//!   and a halt holds for it. Unless
//!   it went offline after the current revision was written to it, before
//!   it was done with it (Ready for `minReadySeconds`): then the revision
//!   may be what took it down (a chart that breaks the kubelet, the CNI or
//!   the edge agent), and it counts as failed.
//! - A pool with no release yet is installed at once: it has nothing to
//!   break. Only a halt holds it back (the revision is known bad). Except
//!   the application's very first install on pools of one cluster: one
//!   pool goes alone until its release is judged (see
//!   [`first_install_alone`]). So does a new chart version, to one pool
//!   alone until it is done with it (see [`new_chart_alone`]).
//! - A pool whose release carries the revision is done once Ready for its
//!   current generation for `minReadySeconds`; failed when Flux says the
//!   current generation failed or stalled, or `progressDeadline` passed
//!   since the write before it was done.
//! - More failures than `maxFailures` halt the rollout: no further pool is
//!   touched. Not so once the revision completed (every pool was done
//!   with it): a pool failing later (a new pool's install, a done pool
//!   turning not Ready) is that pool's failure, reported on it, and
//!   neither halts the revision nor takes any pool back. A pool's own
//!   change after that (a label its release reads) is the revision's next
//!   rollout, judged afresh (see `plan::rewrite`).
//! - Otherwise pools whose release is behind start: first those Flux says
//!   are not Ready for their own generation (they are unavailable already;
//!   a release Flux has not looked at since it was suspended or changed is
//!   no such verdict), then the healthy ones of the earliest
//!   unfinished wave in name order, never more than `maxUnavailable`
//!   updated-but-not-done at once. `paused` stops any from starting, and
//!   so does a wave that requires approval until it is approved for the
//!   revision.
//! - Under `onFailure: Rollback`, a halt takes the pools that took the
//!   revision back instead (see [`rollback`]).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::conditions::pool_reason;
use crate::api::RolloutPhase;

pub mod analysis;
mod held;
mod measure;
mod phase;
mod pool;
mod rollback;
pub mod settings;
mod starting;
mod status;
mod waves;
pub mod window;
use held::{down_briefly, grace_left, held_by_window, offline, outside_window};
use measure::{format_duration, measure};
pub use measure::{soak_left, soak_of};
use phase::{offline_behind, phase_of};
use pool::deadline_from;
pub use pool::{Closed, Note, PoolDecision, PoolInput, PoolRollout, Release};
pub use rollback::{RollingBack, Stamp};
pub use settings::{parse_duration, Settings, DEFAULT_OFFLINE_AFTER, DEFAULT_PROGRESS_DEADLINE};
use starting::{active_wave, first_install_alone, gate_before, halt, new_chart_alone, pause, pick, start};
use status::halt_cause;
pub use waves::waves_done;
use waves::{wait_for_rollout_gates, wait_for_wave_checks};

/// The rollout of the current revision, as of now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// By pool name.
    pub pools: BTreeMap<String, PoolDecision>,
    pub phase: RolloutPhase,
    /// Pools the rollout covers (offline ones aside).
    pub total: usize,
    pub updated: usize,
    pub done: usize,
    /// Failed pools, by name.
    pub failed: Vec<String>,
    /// The wave under way and the number of waves, when there are steps.
    pub wave: Option<(usize, usize)>,
    /// The wave (by index, from 0) whose updates wait for approval.
    pub awaiting_approval: Option<usize>,
    /// What an approval calls that wave's step (see `Settings::wave_steps`).
    pub awaiting_step: Option<String>,
    /// Under `onFailure: Rollback`, once the revision halted: the pools
    /// that go back.
    pub rolling_back: Option<RollingBack>,
    /// When the decision changes by the clock alone: a soak ends or a
    /// deadline passes.
    pub requeue_after: Option<Duration>,
    /// A done wave whose checks failed (`analysis.waveChecks`): which,
    /// its step, and why. The revision halts on it.
    pub wave_failure: Option<(usize, String, String)>,
    /// Offline pools behind on the revision: it is not complete until
    /// they catch up.
    pub offline_behind: usize,
    /// Why it halts, when it does and something fails now: the failed
    /// pools with what each failed on, or the wave's failed checks. The
    /// history keeps it, for when the pools' own state has moved on.
    pub halt_cause: Option<String>,
}

impl Decision {
    pub fn state(&self, pool: &str) -> Option<PoolRollout> {
        self.pools.get(pool).map(|d| d.state)
    }

    /// The decisions, for pools looked up in name order: each found in a
    /// step of one walk rather than by a search of its own (any pool out
    /// of order is still found, by a search).
    pub fn in_order(&self) -> InOrder<'_> {
        InOrder {
            decision: self,
            walk: self.pools.iter().peekable(),
        }
    }

    /// How many releases under way must reach a verdict (turn Ready, or
    /// fail) before a look is worth taking at once, while changes wait for
    /// a slot or an earlier wave that those releases free; `None` when no
    /// change waits on a release. A tenth of `max_unavailable`, or every
    /// release under way when fewer: at 10,000 pools and 1,000 slots, a
    /// hundred Ready releases start a hundred pools, and a release turning
    /// Ready does not replan the fleet on its own; with one slot, each
    /// verdict starts the next pool.
    pub fn waits_on_releases(&self, max_unavailable: usize) -> Option<usize> {
        let rolling = matches!(self.phase, RolloutPhase::Progressing | RolloutPhase::RollingBack);
        let waiting = |d: &PoolDecision| {
            matches!(d.state, PoolRollout::Pending | PoolRollout::RollbackPending)
                || d.note.as_ref().is_some_and(|n| {
                    [pool_reason::FIRST_INSTALL, pool_reason::NEW_CHART_FIRST].contains(&n.reason)
                })
        };
        if !rolling || !self.pools.values().any(waiting) {
            return None;
        }
        // Those written now are under way once written.
        let under_way = |d: &&PoolDecision| {
            matches!(
                d.state,
                PoolRollout::Write | PoolRollout::Updating | PoolRollout::RollBack | PoolRollout::RollingBack
            )
        };
        let in_flight = self.pools.values().filter(under_way).count();
        (in_flight > 0).then(|| in_flight.min((max_unavailable / 10).max(1)))
    }
}

/// See [`Decision::in_order`].
pub struct InOrder<'a> {
    decision: &'a Decision,
    walk: std::iter::Peekable<std::collections::btree_map::Iter<'a, String, PoolDecision>>,
}

impl<'a> InOrder<'a> {
    /// The decision of `pool`, if the rollout covers it.
    pub fn get(&mut self, pool: &str) -> Option<&'a PoolDecision> {
        while self.walk.next_if(|(name, _)| name.as_str() < pool).is_some() {}
        match self.walk.peek() {
            Some((name, decided)) if name.as_str() == pool => Some(*decided),
            _ => self.decision.pools.get(pool),
        }
    }
}

/// A pool left to write later, in an open window, is held once the
/// window closes, and its status says so: the plan looks again then.
fn window_closings(pools: &[PoolInput], states: &[PoolDecision], now: Timestamp, requeue: &mut Requeue) {
    for (p, d) in pools.iter().zip(states) {
        let later =
            matches!(d.state, PoolRollout::Pending | PoolRollout::Waiting | PoolRollout::AwaitingApproval);
        let closes = p.window_closes.filter(|_| later);
        if let Some(left) = closes.and_then(|at| Duration::try_from(at.duration_since(now)).ok()) {
            requeue.at(left);
        }
    }
}

/// A pool on the way to the revision, or failed on it: not done with it.
fn not_done_yet(d: &PoolDecision) -> bool {
    matches!(
        d.state,
        PoolRollout::Pending
            | PoolRollout::Write
            | PoolRollout::Waiting
            | PoolRollout::Updating
            | PoolRollout::Soaking
            | PoolRollout::Failed
    )
}

/// Decides every pool of `pools` (names unique) at `now`.
pub fn decide(settings: &Settings, pools: &[PoolInput], waves: usize, now: Timestamp) -> Decision {
    let mut requeue = Requeue::default();
    // Where each pool stands before anything is written, in the order of `pools`.
    let mut states: Vec<PoolDecision> = pools.iter().map(|p| start(settings, p, now, &mut requeue)).collect();
    let failed: Vec<String> = pools
        .iter()
        .zip(&states)
        .filter(|(_, d)| d.state == PoolRollout::Failed)
        .map(|(p, _)| p.pool.to_string())
        .collect();
    // A revision that completed stays completed: what fails on it later
    // is that pool's own failure, not the revision's.
    //
    // A halt holds: once the history records the revision halted at this
    // generation, it stays halted until every pool is done with it,
    // even when no pool fails now (the failed one recovered, its site came
    // back, or it left the selection): the revision is known bad, and a
    // person acts (a fix, a request, new rollout settings). Found by the
    // fault soak: a failed pool that left the selection let the halted
    // revision walk on.
    //
    // An offline pool still behind on the revision is still to be
    // written: the revision is not done until it is, and a halt holds for
    // it (fourth review, item 2: a halted revision read `Complete` behind
    // two offline sites, and each returning site took the known-bad
    // revision).
    //
    // Nor is it done while a pool on it is still updating, soaking or
    // failed: until every pool is done with it, a halted revision reads
    // `Halted` (the docs' "Complete" comes only then). Reading it
    // `Progressing` meanwhile also wiped the status's record of the halt,
    // which holds it as the history's does (found by the fault soak, seed
    // 636492862: the failed pool left while two others soaked, and pools
    // added later installed at the halted revision).
    let offline_behind = offline_behind(pools, &states);
    let unfinished = offline_behind > 0 || states.iter().any(not_done_yet);
    let wave_failure = waves::failure(settings);
    let halted = settings.progressive
        && !settings.completed
        && (failed.len() > settings.max_failures
            || (settings.halted_before && unfinished)
            || wave_failure.is_some());
    let halt_cause = halted.then(|| halt_cause(pools, &states, wave_failure.as_ref())).flatten();
    let busy = |s: PoolRollout| matches!(s, PoolRollout::Updating | PoolRollout::Soaking);
    // A pool that took the revision and went offline (or out of reach)
    // before it was done keeps its slot: it comes back still updating,
    // and freeing the slot meanwhile would let more than maxUnavailable
    // update at once. Until its progressDeadline: then the slot is free.
    let keeps_slot = |p: &PoolInput, d: &PoolDecision| {
        d.state == PoolRollout::Offline
            && match p.release {
                Release::Current {
                    status,
                    written,
                    resumed,
                } => {
                    let analysis = p.analysis.as_ref();
                    let from = deadline_from(written, resumed);
                    busy(measure(settings, status, from, analysis, now, &mut Requeue::default()).state)
                }
                _ => false,
            }
    };
    let unavailable = pools.iter().zip(&states).filter(|(p, d)| busy(d.state) || keeps_slot(p, d)).count();

    let rolling_back = rollback::applies(settings, pools, halted)
        .then(|| rollback::roll_back(settings, pools, &mut states, now, &mut requeue));
    if rolling_back.is_some() {
        // Decided already.
    } else if halted {
        halt(&mut states);
    } else if settings.paused {
        pause(pools, &mut states);
    } else if settings.progressive {
        let active = active_wave(pools, &states);
        pick(settings, pools, &mut states, unavailable, now, &mut requeue);
        wait_for_wave_checks(settings, pools, &mut states, active, &mut requeue);
        wait_for_rollout_gates(settings, pools, &mut states, &mut requeue);
    }
    if settings.first_install_alone && rolling_back.is_none() && !halted {
        first_install_alone(settings, pools, &mut states, now);
    }
    if let Some(version) = settings.new_chart_alone.as_deref().filter(|_| rolling_back.is_none() && !halted) {
        new_chart_alone(version, pools, &mut states);
    }

    window_closings(pools, &states, now, &mut requeue);
    let count = |wanted: &[PoolRollout]| states.iter().filter(|d| wanted.contains(&d.state)).count();
    let total = pools.len() - count(&[PoolRollout::Offline]);
    let awaiting = count(&[PoolRollout::AwaitingApproval]);
    let behind = awaiting
        + count(&[
            PoolRollout::Pending,
            PoolRollout::Paused,
            PoolRollout::Halted,
            PoolRollout::Waiting,
        ]);
    let moving = count(&[PoolRollout::Write, PoolRollout::Updating, PoolRollout::Soaking]);
    let phase = phase_of(settings, rolling_back.as_ref(), halted, [behind, awaiting, moving, offline_behind]);
    let awaiting_approval = pools
        .iter()
        .zip(&states)
        .find(|(_, d)| d.state == PoolRollout::AwaitingApproval)
        .map(|(p, _)| gate_before(settings, p.wave).unwrap_or(p.wave));
    // The wave a person is asked to let go, while one is; else the
    // earliest unfinished.
    let wave = (waves > 1).then(|| {
        let current = awaiting_approval.or(active_wave(pools, &states)).unwrap_or(waves - 1);
        (current + 1, waves)
    });
    let awaiting_step =
        awaiting_approval.map(|w| settings.wave_steps.get(w).cloned().unwrap_or_else(|| (w + 1).to_string()));
    Decision {
        awaiting_approval,
        awaiting_step,
        rolling_back,
        updated: states.iter().filter(|d| d.state.up_to_date()).count(),
        done: count(&[PoolRollout::Done]),
        pools: pools.iter().map(|p| p.pool.to_string()).zip(states).collect(),
        phase,
        total,
        failed,
        wave,
        requeue_after: requeue.0,
        wave_failure,
        offline_behind,
        halt_cause,
    }
}

pub(super) fn stamp(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The earliest moment the clock alone changes a decision.
#[derive(Default)]
struct Requeue(Option<Duration>);

impl Requeue {
    fn at(&mut self, after: Duration) {
        // A second's margin, so the next look finds the moment passed (a
        // plan at rest holds until the moment, see `plan::rest`).
        let after = after + Duration::from_secs(1);
        self.0 = Some(self.0.map_or(after, |d| d.min(after)));
    }
}

#[cfg(test)]
mod tests;
