//! The rollout's phase, once every pool is decided: rolled back or going
//! back, halted, paused, awaiting approval, progressing, awaiting offline
//! pools behind, or complete.

use super::{PoolDecision, PoolInput, PoolRollout, Release, RollingBack, Settings};
use crate::api::RolloutPhase;

/// The rollout's phase, from the pools behind, awaiting approval, under
/// way and offline behind.
pub(super) fn phase_of(
    settings: &Settings,
    rolling_back: Option<&RollingBack>,
    halted: bool,
    [behind, awaiting, moving, offline_behind]: [usize; 4],
) -> RolloutPhase {
    // A rollback that takes no pool back, and no release of which says it
    // went back, is a halt, and says so: never `RolledBack` when nothing
    // went back, whatever the history says of the revision.
    if let Some(back) = rolling_back.filter(|b| !b.nothing_went_back()) {
        match back.done() {
            true => RolloutPhase::RolledBack,
            false => RolloutPhase::RollingBack,
        }
    } else if halted || rolling_back.is_some() {
        RolloutPhase::Halted
    } else if behind > 0 && settings.paused {
        RolloutPhase::Paused
    } else if awaiting > 0 {
        RolloutPhase::AwaitingApproval
    } else if behind > 0 || moving > 0 {
        RolloutPhase::Progressing
    } else if offline_behind > 0 {
        RolloutPhase::AwaitingOffline
    } else {
        RolloutPhase::Complete
    }
}

/// How many offline pools are behind on the revision (their release of
/// another revision, or none yet): skipped while offline, yet still to
/// be written.
pub(super) fn offline_behind(pools: &[PoolInput], states: &[PoolDecision]) -> usize {
    let behind = |p: &PoolInput| matches!(p.release, Release::Missing | Release::Behind(_));
    pools
        .iter()
        .zip(states)
        .filter(|(p, d)| d.state == PoolRollout::Offline && behind(p))
        .count()
}
