//! Unit tests of `events`.

use super::*;

fn pool(name: &str, ready: ConditionStatus, reason: &str, message: &str) -> PoolStatus {
    PoolStatus {
        pool: name.into(),
        helm_release: format!("app-{name}"),
        ready,
        reason: reason.into(),
        message: message.into(),
        chart_version: None,
        observed_latest: true,
        ..PoolStatus::default()
    }
}

fn status(pools: Vec<PoolStatus>) -> NodePoolApplicationStatus {
    NodePoolApplicationStatus {
        pools,
        ..Default::default()
    }
}

#[test]
fn a_pool_turning_ready_is_a_normal_event() {
    let old = status(vec![pool("hz", ConditionStatus::Unknown, "Progressing", "installing")]);
    let new = status(vec![pool("hz", ConditionStatus::True, "InstallSucceeded", "ok")]);
    let events = between(&old, &new);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, "PoolReady");
    assert!(!events[0].warning);
    assert!(events[0].message.contains("\"hz\""));
}

#[test]
fn a_failing_pool_is_a_warning_naming_pool_and_reason() {
    let old = status(vec![pool("hz", ConditionStatus::True, "InstallSucceeded", "ok")]);
    let new = status(vec![pool(
        "hz",
        ConditionStatus::False,
        "TemplateError",
        "overrides[0].values.x: unknown variable",
    )]);
    let events = between(&old, &new);
    assert_eq!(events.len(), 1);
    assert!(events[0].warning);
    assert_eq!(events[0].reason, "TemplateError", "the pool's own reason");
    assert!(events[0].message.contains("TemplateError"));
    assert!(events[0].message.contains("overrides[0].values.x"));
}

#[test]
fn an_unchanged_pool_is_no_event() {
    let s = status(vec![pool("hz", ConditionStatus::True, "InstallSucceeded", "ok")]);
    assert!(between(&s, &s).is_empty());
}

#[test]
fn waiting_for_the_chart_is_no_event() {
    let new = status(vec![pool("hz", ConditionStatus::False, "ChartNotReady", "waiting")]);
    assert!(between(&status(vec![]), &new).is_empty());
}

#[test]
fn progress_is_no_event() {
    let old = status(vec![]);
    let new = status(vec![pool("hz", ConditionStatus::Unknown, "Progressing", "installing")]);
    assert!(between(&old, &new).is_empty());
}

#[test]
fn a_soaking_pools_check_values_are_no_event_and_its_failed_check_is_a_warning() {
    let soaking = |message: &str| status(vec![pool("hz", ConditionStatus::True, "AnalysisRunning", message)]);
    let first = soaking("error-rate: 0.01 (within max 0.05)");
    let next = soaking("error-rate: 0.02 (within max 0.05)");
    assert!(between(&first, &next).is_empty(), "a new value each answer would be an Event each answer");
    let failed = status(vec![pool(
        "hz",
        ConditionStatus::False,
        "AnalysisFailed",
        "check error-rate failed 1 of 3 times (failureLimit 0); at …: 0.4 (out of max 0.05)",
    )]);
    let events = between(&next, &failed);
    assert_eq!(events.len(), 1);
    assert!(events[0].warning);
    assert_eq!(events[0].reason, "AnalysisFailed");
    assert!(events[0].message.contains("error-rate"), "{}", events[0].message);
}

fn rolling(phase: RolloutPhase, wave: Option<&str>, pools: Vec<PoolStatus>) -> NodePoolApplicationStatus {
    NodePoolApplicationStatus {
        pools,
        rollout: Some(RolloutStatus {
            revision: "r1".into(),
            phase,
            wave: wave.map(str::to_string),
            message: format!("{phase:?} message"),
            done: 1,
            total: 3,
            ..RolloutStatus::default()
        }),
        ..Default::default()
    }
}

fn done(name: &str) -> PoolStatus {
    PoolStatus {
        up_to_date: true,
        rollout: "Done".into(),
        ..pool(name, ConditionStatus::True, "UpgradeSucceeded", "ok")
    }
}

fn reasons(events: &[Transition]) -> Vec<&str> {
    events.iter().map(|e| e.reason.as_str()).collect()
}

#[test]
fn a_rollout_reports_its_start_waves_pools_done_halt_and_end() {
    let updating = PoolStatus {
        up_to_date: true,
        rollout: "Updating".into(),
        ..pool("canary", ConditionStatus::Unknown, "Progressing", "upgrading")
    };
    let started = rolling(RolloutPhase::Progressing, Some("1/2"), vec![updating]);
    assert_eq!(reasons(&between(&status(vec![]), &started)), ["RolloutStarted"]);
    let canary = rolling(RolloutPhase::Progressing, Some("1/2"), vec![done("canary")]);
    let events = between(&started, &canary);
    assert_eq!(reasons(&events), ["PoolReady", "RolloutPoolDone"]);
    assert!(events[1].message.contains("\"canary\" is on revision r1"), "{}", events[1].message);
    assert_eq!(reasons(&between(&canary, &canary)), Vec::<&str>::new(), "nothing twice");
    let wave2 = rolling(RolloutPhase::Progressing, Some("2/2"), vec![done("canary")]);
    assert_eq!(reasons(&between(&canary, &wave2)), ["RolloutWaveStarted"]);
    let halted = rolling(RolloutPhase::Halted, Some("2/2"), vec![done("canary")]);
    let events = between(&wave2, &halted);
    assert_eq!(reasons(&events), ["RolloutHalted"]);
    assert!(events[0].warning);
    let complete = rolling(RolloutPhase::Complete, None, vec![done("canary")]);
    assert_eq!(reasons(&between(&wave2, &complete)), ["RolloutComplete"]);
    assert_eq!(reasons(&between(&status(vec![]), &complete)), ["PoolReady"], "an install is no update");
}

#[test]
fn a_new_revision_starts_anew() {
    let old = rolling(RolloutPhase::Complete, None, vec![done("a")]);
    let mut new = rolling(RolloutPhase::Progressing, None, vec![done("a")]);
    new.rollout.as_mut().unwrap().revision = "r2".into();
    assert_eq!(reasons(&between(&old, &new)), ["RolloutStarted"], "a pool it does not change stays done");
}

#[test]
fn a_pool_going_offline_is_a_warning() {
    let old = status(vec![pool("hz", ConditionStatus::True, "UpgradeSucceeded", "ok")]);
    let new = status(vec![pool(
        "hz",
        ConditionStatus::Unknown,
        "PoolOffline",
        "no node is Ready (0/2)",
    )]);
    let events = between(&old, &new);
    assert_eq!(reasons(&events), ["PoolOffline"]);
    assert!(events[0].warning);
}

#[test]
fn a_new_pool_already_failing_is_reported() {
    let new = status(vec![pool("hz", ConditionStatus::False, "NameConflict", "taken")]);
    assert_eq!(between(&status(vec![]), &new).len(), 1);
}

#[test]
fn timestamps_alone_are_no_change() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let cond = |t: i64| Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Ready".into(),
        message: "3/3".into(),
        observed_generation: Some(1),
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::from_second(t).unwrap()),
    };
    let mut a = status(vec![]);
    a.conditions = vec![cond(1)];
    let mut b = a.clone();
    b.conditions = vec![cond(2)];
    assert!(same_ignoring_timestamps(&a, &b));
    b.ready_pools = 1;
    assert!(!same_ignoring_timestamps(&a, &b));
}

#[test]
fn notes_fit_the_api_servers_limit() {
    let short = "pool \"hz\": created HelmRelease r".to_string();
    assert_eq!(fit_note(short.clone()), short, "short notes are kept whole");
    let exact = "x".repeat(MAX_NOTE_BYTES);
    assert_eq!(fit_note(exact.clone()), exact, "exactly the limit is kept whole");
    for long in [
        "y".repeat(5000),
        // Multi-byte characters straddling the cut: 1021 is no char boundary.
        format!("{}{}", "a".repeat(1020), "é".repeat(100)),
        "漢".repeat(700),
    ] {
        let note = fit_note(long.clone());
        assert!(note.len() <= MAX_NOTE_BYTES, "{} bytes", note.len());
        assert!(note.len() > MAX_NOTE_BYTES - 8, "cut no more than needed: {} bytes", note.len());
        assert!(note.ends_with('…'));
        assert!(long.starts_with(note.trim_end_matches('…')), "a prefix of the message");
    }
}

#[test]
fn long_apply_failures_still_make_an_event() {
    // An API server's refusal can quote a whole HelmRelease.
    let refusal = format!("HelmRelease app-hz is invalid: {}", "spec.values: too long; ".repeat(100));
    let t = Transition::apply_failed("hz", "app-hz", "ApplyFailed", &refusal);
    assert!(t.message.len() <= MAX_NOTE_BYTES, "{} bytes", t.message.len());
    assert!(t.message.starts_with("pool \"hz\": HelmRelease app-hz is invalid"), "{}", t.message);
    let failing = pool("hz", ConditionStatus::False, "InstallFailed", &"x".repeat(4000));
    let events = between(&status(vec![]), &status(vec![failing]));
    assert!(events[0].message.len() <= MAX_NOTE_BYTES);
}

#[test]
fn apply_events_name_pool_and_release() {
    let created = Transition::applied("hz", "app-hz-1234", false);
    assert_eq!(created.reason, "ReleaseCreated");
    assert!(created.message.contains("app-hz-1234"));
    assert_eq!(created.pool.as_deref(), Some("hz"));
    assert_eq!(created.release.as_deref(), Some("app-hz-1234"));
    assert_eq!(Transition::applied("hz", "r", true).reason, "ReleaseUpdated");
    assert_eq!(Transition::pruned("hz", "r").reason, "ReleasePruned");
    assert!(Transition::apply_failed("hz", "r", "NameClash", "taken").warning);
}

#[test]
fn many_events_of_one_reason_are_one_summary() {
    let mut happened: Vec<Transition> = (0..5000)
        .map(|i| Transition::applied(&format!("p{i}"), &format!("gw-p{i}"), false))
        .collect();
    happened.insert(3, Transition::pruned("old", "gw-old"));
    happened.extend((0..3).map(|i| Transition::applied(&format!("q{i}"), &format!("gw-q{i}"), true)));
    let out = condense(happened);
    let reasons: Vec<&str> = out.iter().map(|t| t.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "ReleaseCreated",
            "ReleasePruned",
            "ReleaseUpdated",
            "ReleaseUpdated",
            "ReleaseUpdated"
        ]
    );
    let summary = &out[0];
    assert!(
        summary
            .message
            .starts_with("ReleaseCreated for 5000 pools: gw-p0, gw-p1, gw-p2, gw-p3,"),
        "{}",
        summary.message
    );
    assert!(summary.message.len() <= MAX_NOTE_BYTES, "{}", summary.message.len());
    let more: usize = summary
        .message
        .rsplit("and ")
        .next()
        .unwrap()
        .trim_end_matches(" more")
        .parse()
        .unwrap();
    let listed = summary.message.matches("gw-p").count();
    assert_eq!(listed + more, 5000, "{}", summary.message);
    assert_eq!((&summary.release, &summary.pool), (&None, &None), "a summary is of many pools");
    assert_eq!(out[1].release.as_deref(), Some("gw-old"), "a few of a kind stay one each");
    // At the limit nothing is folded.
    let few: Vec<Transition> = (0..MAX_EVENTS_PER_REASON)
        .map(|i| Transition::pruned(&format!("p{i}"), &format!("gw-p{i}")))
        .collect();
    assert_eq!(condense(few.clone()), few);
}

#[test]
fn a_rollback_reports_the_halt_then_the_pools_back() {
    let progressing = rolling(RolloutPhase::Progressing, None, vec![]);
    let going = rolling(RolloutPhase::RollingBack, None, vec![]);
    let back = rolling(RolloutPhase::RolledBack, None, vec![]);
    let events = between(&progressing, &going);
    assert_eq!(reasons(&events), ["RolloutHalted"]);
    assert!(events[0].warning);
    let events = between(&going, &back);
    assert_eq!(reasons(&events), ["RolloutRolledBack"]);
    assert!(events[0].warning);
    assert_eq!(reasons(&between(&back, &back)), Vec::<&str>::new(), "nothing twice");
    // Back at once (every pool that took it is down): both.
    assert_eq!(reasons(&between(&progressing, &back)), ["RolloutHalted", "RolloutRolledBack"]);
    // A pool reached again goes back with no second halt.
    assert_eq!(reasons(&between(&back, &going)), Vec::<&str>::new());
}
