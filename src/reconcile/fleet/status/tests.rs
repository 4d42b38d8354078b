//! Unit tests of `status`.

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
            ready_recorded: None,
            checks_recorded: None,
            deployed_before: true,
            deployed_version: None,
        }
        .into(),
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
        held: None,
        generation: Some(4),
        previous: &[],
        now: &now,
        rollout: None,
        failed_step: None,
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
    assert_eq!(ready.message, "0/2 pools ready; pool \"a\": InvalidPoolConfig; pool \"b\": InstallFailed");
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
    std::sync::Arc::make_mut(&mut pools[0].status).message =
        format!("Job is invalid: {}: field is immutable", "é".repeat(2000));
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
            std::sync::Arc::make_mut(&mut r.status).message = long.clone();
            r.helm_release = format!("application-with-a-long-name-{i:05}-0123456789abcdef");
            r.rollout = Some(PoolRollout::Done);
            r.nodes = Some(NodeCount {
                ready: 2,
                total: 3,
                changed: None,
                of: Default::default(),
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
    std::sync::Arc::make_mut(&mut pools[0].status).message = "the one message".into();
    let now = now();
    let s = rollup(&RollupInput {
        pools: &pools,
        missing: &[],
        blocker: None,
        held: None,
        generation: Some(4),
        previous: &[],
        now: &now,
        rollout: Some(RolloutStatus {
            revision: "r1".into(),
            phase: RolloutPhase::Halted,
            ..RolloutStatus::default()
        }),
        failed_step: None,
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
        held: None,
        generation: Some(1),
        previous: &[],
        now: &now,
        rollout: None,
        failed_step: None,
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
    std::sync::Arc::make_mut(&mut b.status).chart_version = Some("1.1.0".into());
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
    let flipped = condition("Ready", ConditionStatus::False, "Progressing", "m", Some(2), &previous, &now());
    assert_eq!(flipped.last_transition_time, now());
    let other = condition("Stalled", ConditionStatus::True, "r", "m", Some(2), &previous, &now());
    assert_eq!(other.last_transition_time, now());
}

mod kstatus_cases {
    include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/offline/kstatus/cases.rs"));
}

/// kstatus's reading of a custom resource, as Flux's fork of it
/// (fluxcd/cli-utils `pkg/kstatus/status`) computes it: an unobserved
/// generation is InProgress; then the first Reconciling=True
/// (InProgress) or Stalled=True (Failed) in list order; then Ready
/// (True: Current, otherwise InProgress); no conditions: Current.
/// `tests/offline/kstatus.rs` checks the same cases with the library itself.
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
            held: case.held.map(|(r, m)| (r.to_string(), m.to_string())),
            failed_step: case.failed_step.map(|(r, m)| (r.to_string(), m.to_string())),
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

#[test]
fn a_pool_down_for_less_than_offline_after_is_not_offline_yet() {
    let down = NodeCount {
        ready: 0,
        total: 2,
        changed: Some("2029-12-31T23:59:20Z".parse().unwrap()),
        of: crate::pools::nodes::Counted::Nodes,
    };
    let waiting = PoolReport {
        nodes: Some(down),
        rollout: Some(PoolRollout::Waiting),
        ..report("a", ReleaseState::Ready, crate::api::conditions::pool_reason::NOT_REACHED)
    };
    let listed = pool_status(&waiting);
    assert_eq!((listed.offline, listed.offline_since), (false, None), "within the grace: waited for");
    assert_eq!(listed.reason, "PoolNotReached");
    let skipped = PoolReport {
        rollout: Some(PoolRollout::Offline),
        ..report("a", ReleaseState::Offline, crate::api::conditions::pool_reason::POOL_OFFLINE)
    };
    let skipped = PoolReport {
        nodes: Some(down),
        ..skipped
    };
    let listed = pool_status(&skipped);
    assert!(listed.offline && listed.offline_since.is_some(), "past the grace: offline");
}
