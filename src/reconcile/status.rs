//! Rolling the pools up into the application's kstatus-compatible status.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{
    ConditionStatus, NodePoolApplicationStatus, PoolCounts, PoolStatus, RolloutPhase, RolloutStatus,
};
use crate::pools::nodes::NodeCount;
use crate::reconcile::release_state::{ReleaseState, ReleaseStatus};
use crate::reconcile::rollout::PoolRollout;

/// A pool's line in the roll-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolReport {
    pub pool: String,
    pub helm_release: String,
    pub status: ReleaseStatus,
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
    pub generation: Option<i64>,
    pub previous: &'a [Condition],
    pub now: &'a Time,
    /// The rollout of the current revision, when planning got that far.
    pub rollout: Option<RolloutStatus>,
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
    let settled = ready + offline == total && phase.is_none_or(|p| p == RolloutPhase::Complete);

    let (ready_status, reason) = ready_reason(input, settled);
    let mut conditions = vec![make(
        "Ready",
        ready_status,
        &reason,
        &summary(input, ready, offline),
    )];
    if let Some((reason, message)) = stalled(input) {
        conditions.push(make("Stalled", ConditionStatus::True, &reason, &message));
    } else if let Some(p) = first_with(input.pools, BUSY) {
        conditions.push(make("Reconciling", ConditionStatus::True, "Progressing", &describe(p)));
    } else if let Some(r) = input.rollout.as_ref().filter(|r| r.phase == RolloutPhase::Progressing) {
        conditions.push(make("Reconciling", ConditionStatus::True, "Progressing", &rollout_message(r)));
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
        pool_counts: (total > 0).then(|| pool_counts(input.pools)),
        offline_pools: count(offline),
        rollout: input.rollout.clone(),
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
    if let Some(r) = input.rollout.as_ref().filter(|r| r.phase == RolloutPhase::Halted) {
        return Some(("RolloutHalted".to_string(), halt_message(input, r)));
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
        ("PoolNotFound".to_string(), message)
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
        "RolloutHalted".to_string()
    } else if let Some(reason) = worst(&[ReleaseState::Stalled]) {
        reason
    } else if let Some(reason) = worst(&[ReleaseState::Failed]) {
        reason
    } else if !input.missing.is_empty() {
        "PoolNotFound".to_string()
    } else if phase == Some(RolloutPhase::Paused) {
        "RolloutPaused".to_string()
    } else if !settled {
        "Progressing".to_string()
    } else if input.pools.is_empty() {
        return (ConditionStatus::True, "NoPoolsSelected".to_string());
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
    if p.status.message.is_empty() {
        format!("pool {:?}: {}", p.pool, p.status.reason)
    } else {
        let message = cut(&p.status.message, MAX_QUOTED_MESSAGE);
        format!("pool {:?}: {}: {message}", p.pool, p.status.reason)
    }
}

/// `text` in at most `max` bytes: its head and its tail around a `…`,
/// since an error's cause often comes last (`…: field is immutable`).
fn cut(text: &str, max: usize) -> String {
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

fn pool_status(p: &PoolReport) -> PoolStatus {
    let ready = match p.status.state {
        ReleaseState::Ready => ConditionStatus::True,
        ReleaseState::Failed | ReleaseState::Stalled | ReleaseState::Waiting => ConditionStatus::False,
        ReleaseState::Progressing | ReleaseState::Unknown | ReleaseState::Offline => ConditionStatus::Unknown,
    };
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
        offline: p.nodes.is_some_and(NodeCount::offline),
        offline_since: p.nodes.filter(|n| n.offline()).and_then(|n| n.changed).map(|t| t.to_string()),
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
mod tests {
    use super::*;

    fn now() -> Time {
        Time("2030-01-01T00:00:00Z".parse().unwrap())
    }

    fn earlier() -> Time {
        Time("2020-01-01T00:00:00Z".parse().unwrap())
    }

    fn report(pool: &str, state: ReleaseState, reason: &str) -> PoolReport {
        PoolReport {
            pool: pool.into(),
            helm_release: format!("app-{pool}"),
            status: ReleaseStatus {
                state,
                reason: reason.into(),
                message: String::new(),
                chart_version: Some("1.0.0".into()),
                observed_latest: state == ReleaseState::Ready,
                ready_since: None,
            },
            rollout: None,
            nodes: None,
        }
    }

    fn roll(pools: &[PoolReport], missing: &[String]) -> NodePoolApplicationStatus {
        let now = now();
        rollup(&RollupInput {
            pools,
            missing,
            blocker: None,
            generation: Some(4),
            previous: &[],
            now: &now,
            rollout: None,
        })
    }

    fn get<'a>(status: &'a NodePoolApplicationStatus, kind: &str) -> Option<&'a Condition> {
        status.conditions.iter().find(|c| c.type_ == kind)
    }

    #[test]
    fn all_ready() {
        let s = roll(
            &[
                report("a", ReleaseState::Ready, "UpgradeSucceeded"),
                report("b", ReleaseState::Ready, "x"),
            ],
            &[],
        );
        assert_eq!((s.ready.as_str(), s.ready_pools, s.selected_pools), ("2/2", 2, 2));
        let ready = get(&s, "Ready").unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Succeeded"));
        assert_eq!(ready.message, "2/2 pools ready");
        assert_eq!(ready.observed_generation, Some(4));
        assert!(get(&s, "Reconciling").is_none() && get(&s, "Stalled").is_none());
        assert_eq!(s.chart_version.as_deref(), Some("1.0.0"));
        assert_eq!(s.observed_generation, Some(4));
    }

    #[test]
    fn progressing_pool_sets_reconciling() {
        let s = roll(
            &[
                report("a", ReleaseState::Ready, "x"),
                report("b", ReleaseState::Progressing, "Progressing"),
            ],
            &[],
        );
        assert_eq!(s.ready, "1/2");
        assert_eq!(get(&s, "Ready").unwrap().status, "False");
        assert_eq!(get(&s, "Reconciling").unwrap().status, "True");
        assert!(get(&s, "Stalled").is_none());
        assert_eq!(s.pools[1].ready, ConditionStatus::Unknown);
    }

    #[test]
    fn stalled_pool_sets_stalled_and_ready_reason() {
        let s = roll(
            &[
                report("a", ReleaseState::Stalled, "InvalidPoolConfig"),
                report("b", ReleaseState::Failed, "InstallFailed"),
            ],
            &[],
        );
        let ready = get(&s, "Ready").unwrap();
        assert_eq!(ready.reason, "InvalidPoolConfig");
        assert_eq!(
            ready.message,
            "0/2 pools ready; pool \"a\": InvalidPoolConfig; pool \"b\": InstallFailed"
        );
        assert_eq!(get(&s, "Stalled").unwrap().reason, "InvalidPoolConfig");
        assert_eq!(s.pools[0].ready, ConditionStatus::False);
    }

    #[test]
    fn failed_pool_is_not_stalled() {
        let s = roll(&[report("a", ReleaseState::Failed, "UpgradeFailed")], &[]);
        assert_eq!(get(&s, "Ready").unwrap().reason, "UpgradeFailed");
        assert!(get(&s, "Stalled").is_none());
    }

    #[test]
    fn missing_pools_keep_ready_false() {
        let s = roll(&[report("a", ReleaseState::Ready, "x")], &["gone".to_string()]);
        let ready = get(&s, "Ready").unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "PoolNotFound"));
        assert!(ready.message.contains("node pools not found: gone"), "{}", ready.message);
        assert_eq!(s.ready, "1/1");
    }

    #[test]
    fn no_pools_is_ready_with_a_reason() {
        let s = roll(&[], &[]);
        let ready = get(&s, "Ready").unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "NoPoolsSelected"));
        assert_eq!(s.ready, "0/0");
        assert_eq!(s.chart_version, None);
    }

    #[test]
    fn conditions_quote_a_pools_message_cut_and_the_pool_keeps_it_whole() {
        let mut pools = vec![report("hz", ReleaseState::Stalled, "UpgradeFailed")];
        pools[0].status.message = format!("Job is invalid: {}: field is immutable", "é".repeat(2000));
        let s = roll(&pools, &[]);
        for kind in ["Ready", "Stalled"] {
            let message = &get(&s, kind).unwrap().message;
            assert!(message.len() < MAX_QUOTED_MESSAGE + 100, "{kind}: {} bytes", message.len());
            assert!(message.contains("Job is invalid: éé") && message.contains(" … "), "{message}");
            assert!(message.ends_with("éé: field is immutable"), "the cause, at the end, is kept: {message}");
        }
        assert_eq!(s.pools[0].message, cut(&pools[0].status.message, MAX_LISTED_MESSAGE));
        assert!(s.pools[0].message.ends_with("field is immutable"));
        for text in [
            "short",
            &"x".repeat(MAX_QUOTED_MESSAGE),
            &"ü".repeat(500),
            &"a".repeat(1000),
        ] {
            let c = cut(text, MAX_QUOTED_MESSAGE);
            assert!(c.len() <= MAX_QUOTED_MESSAGE, "{} bytes", c.len());
            assert_eq!(c == text, text.len() <= MAX_QUOTED_MESSAGE);
        }
    }

    #[test]
    fn the_status_of_ten_thousand_pools_stays_under_64_kib() {
        let long = "x".repeat(5000);
        let pools: Vec<PoolReport> = (0..10_000)
            .map(|i| {
                let state = match i % 100 {
                    0 => ReleaseState::Failed,
                    1 => ReleaseState::Offline,
                    2..=4 => ReleaseState::Progressing,
                    _ => ReleaseState::Ready,
                };
                let mut r = report(&format!("site-{i:05}-{}", "n".repeat(40)), state, "UpgradeFailed");
                r.status.message = long.clone();
                r.helm_release = format!("application-with-a-long-name-{i:05}-0123456789abcdef");
                r.rollout = Some(PoolRollout::Done);
                r.nodes = Some(NodeCount {
                    ready: 2,
                    total: 3,
                    changed: None,
                });
                r
            })
            .collect();
        let s = roll(&pools, &[]);
        let bytes = serde_json::to_vec(&s).unwrap().len();
        assert!(bytes < 64 * 1024, "{bytes} bytes");
        assert_eq!(s.pools.len(), MAX_LISTED_POOLS);
        assert_eq!(s.omitted_pools, 10_000 - MAX_LISTED_POOLS as i32);
        let counts = s.pool_counts.clone().unwrap();
        assert_eq!((counts.ready, counts.failed, counts.offline, counts.progressing), (9_500, 100, 100, 300));
        // Those needing attention are the ones listed: the 100 failed,
        // then none ready while others wait.
        assert!(s
            .pools
            .iter()
            .all(|p| p.reason == "UpgradeFailed" && p.ready == ConditionStatus::False));
        assert!(s.pools.windows(2).all(|w| w[0].pool < w[1].pool), "shown by name");
        assert_eq!((s.ready.as_str(), s.selected_pools), ("9500/10000 (100 offline)", 10_000));
        // A small fleet is listed whole.
        let small = roll(&pools[..5], &[]);
        assert_eq!((small.pools.len(), small.omitted_pools), (5, 0));
    }

    #[test]
    fn a_halt_names_its_failed_pools_once() {
        let mut pools = vec![
            report("hz", ReleaseState::Stalled, "UpgradeFailed"),
            report("sh", ReleaseState::Ready, "UpgradeSucceeded"),
        ];
        pools[0].rollout = Some(PoolRollout::Failed);
        pools[0].status.message = "the one message".into();
        let now = now();
        let s = rollup(&RollupInput {
            pools: &pools,
            missing: &[],
            blocker: None,
            generation: Some(4),
            previous: &[],
            now: &now,
            rollout: Some(RolloutStatus {
                revision: "r1".into(),
                phase: RolloutPhase::Halted,
                ..RolloutStatus::default()
            }),
        });
        let ready = &get(&s, "Ready").unwrap().message;
        assert_eq!(ready.matches("the one message").count(), 1, "{ready}");
        let stalled = get(&s, "Stalled").unwrap();
        assert_eq!(stalled.reason, "RolloutHalted");
        assert!(
            stalled.message.contains("pool \"hz\": UpgradeFailed: the one message"),
            "{}",
            stalled.message
        );
    }

    #[test]
    fn blocker_stalls_everything() {
        let now = now();
        let input = RollupInput {
            pools: &[],
            missing: &[],
            blocker: Some(("InvalidSelector".into(), "spec.pools.selector: bad".into())),
            generation: Some(1),
            previous: &[],
            now: &now,
            rollout: None,
        };
        let s = rollup(&input);
        assert_eq!(get(&s, "Ready").unwrap().reason, "InvalidSelector");
        assert_eq!(get(&s, "Stalled").unwrap().message, "spec.pools.selector: bad");
    }

    #[test]
    fn long_problem_lists_are_cut() {
        let pools: Vec<_> = (0..5)
            .map(|i| report(&format!("p{i}"), ReleaseState::Progressing, "Progressing"))
            .collect();
        let message = get(&roll(&pools, &[]), "Ready").unwrap().message.clone();
        assert!(message.ends_with("and 2 more"), "{message}");
    }

    #[test]
    fn differing_chart_versions_are_listed() {
        let mut b = report("b", ReleaseState::Ready, "x");
        b.status.chart_version = Some("1.1.0".into());
        let s = roll(&[report("a", ReleaseState::Ready, "x"), b], &[]);
        assert_eq!(s.chart_version.as_deref(), Some("1.0.0, 1.1.0"));
    }

    #[test]
    fn transition_time_kept_while_status_holds() {
        let previous = [condition(
            "Ready",
            ConditionStatus::True,
            "Succeeded",
            "old",
            Some(1),
            &[],
            &earlier(),
        )];
        let same = condition("Ready", ConditionStatus::True, "Succeeded", "new", Some(2), &previous, &now());
        assert_eq!(same.last_transition_time, earlier());
        assert_eq!(same.message, "new");
        let flipped =
            condition("Ready", ConditionStatus::False, "Progressing", "m", Some(2), &previous, &now());
        assert_eq!(flipped.last_transition_time, now());
        let other = condition("Stalled", ConditionStatus::True, "r", "m", Some(2), &previous, &now());
        assert_eq!(other.last_transition_time, now());
    }

    mod kstatus_cases {
        include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kstatus/cases.rs"));
    }

    /// kstatus's reading of a custom resource, as Flux's fork of it
    /// (fluxcd/cli-utils `pkg/kstatus/status`) computes it: an unobserved
    /// generation is InProgress; then the first Reconciling=True
    /// (InProgress) or Stalled=True (Failed) in list order; then Ready
    /// (True: Current, otherwise InProgress); no conditions: Current.
    /// `tests/kstatus.rs` checks the same cases with the library itself.
    fn kstatus(status: &NodePoolApplicationStatus, generation: i64) -> &'static str {
        if status.observed_generation != Some(generation) {
            return "InProgress";
        }
        for c in &status.conditions {
            match (c.type_.as_str(), c.status.as_str()) {
                ("Reconciling", "True") => return "InProgress",
                ("Stalled", "True") => return "Failed",
                _ => {}
            }
        }
        match get(status, "Ready").map(|c| c.status.as_str()) {
            Some("True") | None => "Current",
            Some(_) => "InProgress",
        }
    }

    #[test]
    fn kstatus_reads_every_case_as_a_person_would() {
        let now = now();
        for case in kstatus_cases::CASES {
            let pools = kstatus_cases::reports(case);
            let missing: Vec<String> = case.missing.iter().map(|m| m.to_string()).collect();
            let status = rollup(&RollupInput {
                pools: &pools,
                missing: &missing,
                blocker: case.blocker.map(|(r, m)| (r.to_string(), m.to_string())),
                generation: Some(4),
                previous: &[],
                now: &now,
                rollout: kstatus_cases::rollout(case),
            });
            assert_eq!(kstatus(&status, 4), case.kstatus, "{}: {:#?}", case.name, status.conditions);
            // Stalled and Reconciling never stand together, as in Flux.
            assert!(
                get(&status, "Stalled").is_none() || get(&status, "Reconciling").is_none(),
                "{}",
                case.name
            );
        }
    }
}
