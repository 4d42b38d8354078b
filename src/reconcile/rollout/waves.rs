//! The waves' metric checks (`analysis.waveChecks`) between waves: when
//! each wave was done, and the updates of later waves held while a done
//! wave's checks are asked.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::api::conditions::pool_reason;

use super::starting::start;
use super::{analysis, PoolDecision, PoolInput, PoolRollout, Release, Requeue, Settings};

/// The updates of the waves after a done wave whose checks are still
/// asked wait for them (new pools install, as they would anyway).
pub(super) fn wait_for_wave_checks(
    settings: &Settings,
    pools: &[PoolInput],
    states: &mut [PoolDecision],
    active: Option<usize>,
    requeue: &mut Requeue,
) {
    let asking = active.and_then(|active| {
        settings.wave_checks.range(..active).rev().find_map(|(wave, verdict)| match verdict {
            analysis::Verdict::Asking { next, message } => Some((*wave, *next, message)),
            _ => None,
        })
    });
    let Some((wave, next, message)) = asking else {
        return;
    };
    requeue.at(next);
    let step = settings.wave_steps.get(wave).cloned().unwrap_or_else(|| (wave + 1).to_string());
    for (p, d) in pools.iter().zip(states.iter_mut()) {
        let update = matches!(p.release, Release::Behind(_));
        if p.wave > wave && update && matches!(d.state, PoolRollout::Pending | PoolRollout::Write) {
            *d = PoolDecision::noted(
                PoolRollout::Waiting,
                pool_reason::WAITING_FOR_WAVE_CHECKS,
                format!("waits for the checks of wave {} (step {step}): {message}", wave + 1),
            );
        }
    }
}

/// While no pool has the revision yet, its `PreRollout` gates hold every
/// write (a change freeze holds the canary too): once one pool has it,
/// the rollout is under way and they are not asked again.
pub(super) fn wait_for_rollout_gates(
    settings: &Settings,
    pools: &[PoolInput],
    states: &mut [PoolDecision],
    requeue: &mut Requeue,
) {
    let Some(analysis::Verdict::Asking { next, message }) = &settings.pre_rollout else {
        return;
    };
    requeue.at(*next);
    for (p, d) in pools.iter().zip(states.iter_mut()) {
        let to_write = matches!(p.release, Release::Missing | Release::Behind(_));
        if to_write && matches!(d.state, PoolRollout::Pending | PoolRollout::Write) {
            *d = PoolDecision::noted(
                PoolRollout::Waiting,
                pool_reason::WAITING_FOR_ROLLOUT_GATES,
                format!("waits for the rollout's gates: {message}"),
            );
        }
    }
}

/// When each wave's every pool (offline ones aside) was done with the
/// revision, by wave index: the latest of their soaks' ends. A wave with
/// a pool not done is not listed.
pub fn waves_done(settings: &Settings, pools: &[PoolInput], now: Timestamp) -> BTreeMap<usize, Timestamp> {
    let mut done: BTreeMap<usize, Option<Timestamp>> = BTreeMap::new();
    for p in pools {
        let state = start(settings, p, now, &mut Requeue::default()).state;
        let entry = done.entry(p.wave).or_insert(Some(Timestamp::UNIX_EPOCH));
        match (state, &p.release) {
            (PoolRollout::Offline, _) => {}
            (PoolRollout::Done, Release::Current { status, written, .. }) => {
                let (_, end) = super::soak_of(settings.min_ready, status, *written);
                *entry = entry.map(|e| e.max(end));
            }
            _ => *entry = None,
        }
    }
    done.into_iter().filter_map(|(wave, at)| Some((wave, at?))).collect()
}

/// A done wave whose checks failed: which, its step, and why.
pub(super) fn failure(settings: &Settings) -> Option<(usize, String, String)> {
    settings.wave_checks.iter().find_map(|(wave, verdict)| match verdict {
        analysis::Verdict::Failed(why) => {
            let step = settings.wave_steps.get(*wave).cloned().unwrap_or_else(|| (wave + 1).to_string());
            Some((*wave, step, why.clone()))
        }
        _ => None,
    })
}
