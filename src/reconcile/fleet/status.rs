//! Rolling the pools up into the application's kstatus-compatible
//! conditions, counts and bounded pool list.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::conditions;
use crate::api::{
    ConditionStatus, NodePoolApplicationStatus, PoolCounts, PoolStatus, RolloutPhase, RolloutStatus,
};
use crate::pools::nodes::NodeCount;
use crate::reconcile::release::state::{ReleaseState, ReleaseStatus};
use crate::reconcile::rollout::PoolRollout;

/// A pool's line in the roll-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolReport {
    pub pool: String,
    pub helm_release: String,
    pub status: std::sync::Arc<ReleaseStatus>,
    /// Where it stands in the rollout, when the rollout covers it.
    pub rollout: Option<PoolRollout>,
    pub nodes: Option<NodeCount>,
}

/// Everything the application's status is computed from.
#[derive(Debug, Clone)]
pub struct RollupInput<'a> {
    pub pools: &'a [PoolReport],
    /// Pools named in the spec that do not exist.
    pub missing: &'a [String],
    /// A problem that stopped all planning: (reason, message).
    pub blocker: Option<(String, String)>,
    /// What every write waits on, that is expected to pass without a
    /// person (the chart's source not ready yet, the API server busy):
    /// (reason, message).
    pub held: Option<(String, String)>,
    pub generation: Option<i64>,
    pub previous: &'a [Condition],
    pub now: &'a Time,
    /// The rollout of the current revision, when planning got that far.
    pub rollout: Option<RolloutStatus>,
    /// A step of the reconcile that failed after the plan, retried:
    /// (reason, message).
    pub failed_step: Option<(String, String)>,
}

/// The application's status. Reconciling and Stalled appear only while
/// True, as Flux does, so that `kubectl wait --for=condition=Ready` and
/// kstatus both read it the usual way.
///
/// kstatus (inside Flux's health checks) reads the first of Reconciling=True
/// (InProgress) and Stalled=True (Failed) it meets, and only then Ready,
/// where False reads as InProgress. So:
/// - Stalled=True whenever a person must act: a blocker (an invalid
///   selector, an unresolvable chart, an empty selection that protects
///   releases), a pool whose config is invalid or that Flux gave up on, a
///   named pool that does not exist. Reconciling is then left out, as Flux
///   leaves it out beside Stalled, so kstatus reads Failed at once rather
///   than waiting out its timeout.
/// - Otherwise Reconciling=True while any pool is progressing, waiting or
///   failing with retries left (Flux retries it).
pub fn rollup(input: &RollupInput) -> NodePoolApplicationStatus {
    let total = input.pools.len();
    let ready = input.pools.iter().filter(|p| p.status.state == ReleaseState::Ready).count();
    let offline = input.pools.iter().filter(|p| p.status.state == ReleaseState::Offline).count();
    let make = |kind, status, reason: &str, message: &str| {
        condition(kind, status, reason, message, input.generation, input.previous, input.now)
    };
    let phase = input.rollout.as_ref().map(|r| r.phase);
    // An offline pool is waited for by nobody: Flux's health checks would
    // otherwise hang on every site whose link is down.
    let settled = ready + offline == total
        && phase.is_none_or(|p| matches!(p, RolloutPhase::Complete | RolloutPhase::AwaitingOffline));

    let (ready_status, reason) = ready_reason(input, settled);
    let mut conditions = vec![make(
        conditions::READY,
        ready_status,
        &reason,
        &summary(input, ready, offline),
    )];
    if let Some((reason, message)) = stalled(input) {
        conditions.push(make(conditions::STALLED, ConditionStatus::True, &reason, &message));
    } else if let Some((reason, message)) = &input.failed_step {
        conditions.push(make(conditions::RECONCILING, ConditionStatus::True, reason, message));
    } else if let Some((reason, message)) = &input.held {
        conditions.push(make(conditions::RECONCILING, ConditionStatus::True, reason, message));
    } else if let Some(p) = first_with(input.pools, BUSY) {
        conditions.push(make(
            conditions::RECONCILING,
            ConditionStatus::True,
            conditions::reason::PROGRESSING,
            &describe(p),
        ));
    } else if let Some(r) = input.rollout.as_ref().filter(|r| r.phase == RolloutPhase::Progressing) {
        conditions.push(make(
            conditions::RECONCILING,
            ConditionStatus::True,
            conditions::reason::PROGRESSING,
            &rollout_message(r),
        ));
    }
    NodePoolApplicationStatus {
        observed_generation: input.generation,
        selected_pools: count(total),
        ready_pools: count(ready),
        ready: match offline {
            0 => format!("{ready}/{total}"),
            n => format!("{ready}/{total} ({n} offline)"),
        },
        chart_version: chart_versions(input.pools),
        conditions,
        pools: listed(input.pools).into_iter().map(pool_status).collect(),
        omitted_pools: count(total.saturating_sub(MAX_LISTED_POOLS)),
        refused_pools: count(input.pools.iter().filter(|p| super::is_refusal(&p.status.reason)).count()),
        pool_counts: (total > 0).then(|| pool_counts(input.pools)),
        offline_pools: count(offline),
        rollout: input.rollout.clone(),
        // Recorded by the plan, which reads the application's annotations.
        ..NodePoolApplicationStatus::default()
    }
}

/// The most pools `status.pools` lists. With messages cut to
/// [`MAX_LISTED_MESSAGE`], the status stays under 64 KiB however many pools
/// are selected (etcd refuses objects past 1.5 MiB, which 7,000 full
/// entries would pass).
pub const MAX_LISTED_POOLS: usize = 40;
/// A pool's message in `status.pools`, at most, head and tail.
pub const MAX_LISTED_MESSAGE: usize = 1024;

/// The pools `status.pools` lists: those needing attention first (stalled,
/// failed, waiting, progressing, offline), then the ready ones, up to
/// [`MAX_LISTED_POOLS`], shown by name.
fn listed(pools: &[PoolReport]) -> Vec<&PoolReport> {
    let attention = |p: &PoolReport| match p.status.state {
        ReleaseState::Stalled => 0,
        ReleaseState::Failed => 1,
        ReleaseState::Waiting => 2,
        ReleaseState::Progressing | ReleaseState::Unknown => 3,
        ReleaseState::Offline => 4,
        ReleaseState::Ready => 5,
    };
    let mut chosen: Vec<&PoolReport> = pools.iter().collect();
    if chosen.len() > MAX_LISTED_POOLS {
        chosen.sort_by_key(|p| (attention(p), p.pool.as_str()));
        chosen.truncate(MAX_LISTED_POOLS);
        chosen.sort_by_key(|p| p.pool.as_str());
    }
    chosen
}

fn pool_counts(pools: &[PoolReport]) -> PoolCounts {
    let mut counts = PoolCounts::default();
    for p in pools {
        let slot = match p.status.state {
            ReleaseState::Ready => &mut counts.ready,
            ReleaseState::Progressing => &mut counts.progressing,
            ReleaseState::Waiting => &mut counts.waiting,
            ReleaseState::Failed => &mut counts.failed,
            ReleaseState::Stalled => &mut counts.stalled,
            ReleaseState::Unknown => &mut counts.unknown,
            ReleaseState::Offline => &mut counts.offline,
        };
        *slot += 1;
    }
    counts
}

fn rollout_message(r: &RolloutStatus) -> String {
    format!("rollout of revision {}: {}", r.revision, r.message)
}

/// Pool states in which Flux or this controller is still working.
const BUSY: &[ReleaseState] = &[
    ReleaseState::Progressing,
    ReleaseState::Waiting,
    ReleaseState::Unknown,
    ReleaseState::Failed,
];

/// Why a person must act, if one must: (reason, message).
fn stalled(input: &RollupInput) -> Option<(String, String)> {
    if let Some(blocker) = &input.blocker {
        return Some(blocker.clone());
    }
    if let Some(r) = input.rollout.as_ref() {
        match r.phase {
            RolloutPhase::Halted => {
                return Some((conditions::reason::ROLLOUT_HALTED.to_string(), halt_message(input, r)))
            }
            // The spec still names the revision that failed: a person fixes it.
            RolloutPhase::RollingBack | RolloutPhase::RolledBack => {
                return Some((conditions::reason::ROLLED_BACK.to_string(), rollout_message(r)))
            }
            _ => {}
        }
    }
    let stalled: Vec<&PoolReport> =
        input.pools.iter().filter(|p| p.status.state == ReleaseState::Stalled).collect();
    if let Some(first) = stalled.first() {
        let message = match stalled.len() {
            1 => describe(first),
            n => format!("{}; and {} more pools", describe(first), n - 1),
        };
        return Some((first.status.reason.clone(), message));
    }
    (!input.missing.is_empty()).then(|| {
        let message = format!(
            "node pools not found: {}; create them, or remove them from spec.pools.names",
            input.missing.join(", ")
        );
        (conditions::reason::POOL_NOT_FOUND.to_string(), message)
    })
}

/// The failed pools with Flux's own words, then what to do.
fn halt_message(input: &RollupInput, r: &RolloutStatus) -> String {
    let failed: Vec<String> = input
        .pools
        .iter()
        .filter(|p| p.rollout == Some(PoolRollout::Failed))
        .map(describe)
        .collect();
    // No pool failed: a wave's checks did, and the rollout says which.
    if failed.is_empty() && !r.message.is_empty() {
        return format!("rollout of revision {}: {}", r.revision, r.message);
    }
    let named = match failed.len() {
        n if n <= 3 => failed.join("; "),
        n => format!("{}; and {} more", failed[..3].join("; "), n - 3),
    };
    format!(
        "rollout of revision {} halted: {named}. The pools not yet updated keep their previous \
         release; fix the change (a new revision starts again, failed pools first) or raise \
         rollout.maxFailures",
        r.revision
    )
}

fn ready_reason(input: &RollupInput, settled: bool) -> (ConditionStatus, String) {
    let worst = |states: &[ReleaseState]| first_with(input.pools, states).map(|p| p.status.reason.clone());
    let phase = input.rollout.as_ref().map(|r| r.phase);
    let reason = if let Some((reason, _)) = &input.blocker {
        reason.clone()
    } else if phase == Some(RolloutPhase::Halted) {
        conditions::reason::ROLLOUT_HALTED.to_string()
    } else if matches!(phase, Some(RolloutPhase::RollingBack | RolloutPhase::RolledBack)) {
        conditions::reason::ROLLED_BACK.to_string()
    } else if let Some(reason) = worst(&[ReleaseState::Stalled]) {
        reason
    } else if let Some(reason) = worst(&[ReleaseState::Failed]) {
        reason
    } else if !input.missing.is_empty() {
        conditions::reason::POOL_NOT_FOUND.to_string()
    } else if let Some((reason, _)) = &input.failed_step {
        reason.clone()
    } else if let Some((reason, _)) = &input.held {
        reason.clone()
    } else if phase == Some(RolloutPhase::Paused) {
        conditions::reason::ROLLOUT_PAUSED.to_string()
    } else if phase == Some(RolloutPhase::AwaitingApproval) {
        conditions::reason::AWAITING_APPROVAL.to_string()
    } else if !settled {
        "Progressing".to_string()
    } else if input.pools.is_empty() {
        return (ConditionStatus::True, conditions::reason::NO_POOLS_SELECTED.to_string());
    } else {
        return (ConditionStatus::True, "Succeeded".to_string());
    };
    (ConditionStatus::False, reason)
}

fn summary(input: &RollupInput, ready: usize, offline: usize) -> String {
    if let Some((_, message)) = &input.blocker {
        return message.clone();
    }
    let total = input.pools.len();
    if total == 0 && input.missing.is_empty() {
        return "no node pool matches spec.pools".to_string();
    }
    let halted = input.rollout.as_ref().is_some_and(|r| r.phase == RolloutPhase::Halted);
    let mut problems: Vec<String> = input
        .pools
        .iter()
        .filter(|p| !matches!(p.status.state, ReleaseState::Ready | ReleaseState::Offline))
        // The halt names its failed pools already.
        .filter(|p| !(halted && p.rollout == Some(PoolRollout::Failed)))
        .map(describe)
        .collect();
    if !input.missing.is_empty() {
        problems.insert(0, format!("node pools not found: {}", input.missing.join(", ")));
    }
    if let Some((_, message)) = &input.held {
        problems.insert(0, format!("every write waits: {message}"));
    }
    if let Some((_, message)) = &input.failed_step {
        problems.insert(0, format!("{message}; retried"));
    }
    if let Some(r) = input.rollout.as_ref().filter(|r| r.phase != RolloutPhase::Complete) {
        let text = match r.phase {
            RolloutPhase::Halted => halt_message(input, r),
            _ => rollout_message(r),
        };
        problems.insert(0, text);
    }
    let mut head = format!("{ready}/{total} pools ready");
    if offline > 0 {
        let names: Vec<&str> = input
            .pools
            .iter()
            .filter(|p| p.status.state == ReleaseState::Offline)
            .map(|p| p.pool.as_str())
            .take(3)
            .collect();
        let more = if offline > names.len() { ", …" } else { "" };
        head.push_str(&format!(", {offline} offline ({}{more})", names.join(", ")));
    }
    match problems.len() {
        0 => head,
        n if n <= 3 => format!("{head}; {}", problems.join("; ")),
        n => format!("{head}; {}; and {} more", problems[..3].join("; "), n - 3),
    }
}

/// A pool's message as the conditions quote it, at most this many bytes:
/// Flux's messages carry whole objects (a refused Job's template runs to
/// kilobytes), and a condition is read in `kubectl get`. The pool's own
/// entry in `status.pools` keeps the whole message.
pub const MAX_QUOTED_MESSAGE: usize = 240;

fn describe(p: &PoolReport) -> String {
    quote_pool(&p.pool, &p.status.reason, &p.status.message)
}

/// A pool's reason and message as the conditions (and a halt's cause)
/// quote them: `pool "a": UpgradeFailed: …`, the message cut to
/// [`MAX_QUOTED_MESSAGE`].
pub(crate) fn quote_pool(pool: &str, reason: &str, message: &str) -> String {
    if message.is_empty() {
        format!("pool {pool:?}: {reason}")
    } else {
        let message = cut(message, MAX_QUOTED_MESSAGE);
        format!("pool {pool:?}: {reason}: {message}")
    }
}

/// `text` in at most `max` bytes: its head and its tail around a `…`,
/// since an error's cause often comes last (`…: field is immutable`).
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let budget = max - " … ".len();
    let mut head = budget * 2 / 3;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (budget - head);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} … {}", &text[..head], &text[tail..])
}

fn first_with<'a>(pools: &'a [PoolReport], states: &[ReleaseState]) -> Option<&'a PoolReport> {
    pools.iter().find(|p| states.contains(&p.status.state))
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn chart_versions(pools: &[PoolReport]) -> Option<String> {
    let versions: BTreeSet<&str> = pools.iter().filter_map(|p| p.status.chart_version.as_deref()).collect();
    (!versions.is_empty()).then(|| versions.into_iter().collect::<Vec<_>>().join(", "))
}

pub(super) fn pool_status(p: &PoolReport) -> PoolStatus {
    let ready = match p.status.state {
        ReleaseState::Ready => ConditionStatus::True,
        ReleaseState::Failed | ReleaseState::Stalled | ReleaseState::Waiting => ConditionStatus::False,
        ReleaseState::Progressing | ReleaseState::Unknown | ReleaseState::Offline => ConditionStatus::Unknown,
    };
    // Offline once down past `offlineAfter`, when the rollout skips it (or
    // counts it failed for going down after its update); a pool down for
    // less is waited for, and says so in its reason, not offline yet.
    let past_grace = p.status.state == ReleaseState::Offline
        || p.status.reason == crate::api::conditions::pool_reason::OFFLINE_AFTER_UPDATE;
    let offline = p.nodes.is_some_and(NodeCount::offline) && past_grace;
    PoolStatus {
        pool: p.pool.clone(),
        helm_release: p.helm_release.clone(),
        ready,
        reason: p.status.reason.clone(),
        message: cut(&p.status.message, MAX_LISTED_MESSAGE),
        chart_version: p.status.chart_version.clone(),
        observed_latest: p.status.observed_latest,
        up_to_date: p.rollout.is_some_and(PoolRollout::up_to_date),
        rollout: p.rollout.map(|r| r.as_str().to_string()).unwrap_or_default(),
        nodes: p.nodes.map(|n| n.to_string()),
        offline,
        offline_since: p.nodes.filter(|_| offline).and_then(|n| n.changed).map(|t| t.to_string()),
    }
}

/// A condition whose `lastTransitionTime` moves only when its status flips,
/// so that "since when" stays true across reconciles.
pub fn condition(
    kind: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    previous: &[Condition],
    now: &Time,
) -> Condition {
    let since = previous
        .iter()
        .find(|c| c.type_ == kind && c.status == status.as_str())
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: kind.to_string(),
        status: status.as_str().to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: generation,
        last_transition_time: since,
    }
}

#[cfg(test)]
mod tests;
