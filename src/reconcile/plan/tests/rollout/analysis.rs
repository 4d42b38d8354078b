//! Plan: metric checks between pools (`rollout.analysis`).

use super::*;
use k8s_openapi::jiff::Timestamp;

fn judged(min_ready: i64) -> NodePoolApplication {
    progressive(json!({
        "minReadySeconds": min_ready,
        "analysis": {
            "prometheus": { "address": "http://prometheus:9090" },
            "checks": [{
                "name": "error-rate",
                "query": "sum(rate(errors_total{site=\"{{pool.name}}\"}[1m]))",
                "max": 0.05,
                "interval": "10s",
            }],
        },
    }))
}

/// p1 carries the revision, Ready since a minute before the plan's
/// `now`; the others are behind.
fn canary_ready(a: &NodePoolApplication) -> Vec<ObservedRelease> {
    let mut owned = releases_of(a, &fleet(), &["p2", "p3", "p4", "p5"]);
    let p1 = owned.iter_mut().find(|o| o.pool.as_deref() == Some("p1")).unwrap();
    Arc::make_mut(&mut p1.status).ready_since = Some("2029-12-31T23:59:00Z".into());
    owned
}

/// The plan over [`canary_ready`], with `answers`.
fn with_canary(a: &NodePoolApplication, answers: Answers) -> Plan {
    Scenario::of(a).over(&fleet()).owning(canary_ready(a)).answered(answers).plan()
}

fn revision_of(a: &NodePoolApplication) -> String {
    Scenario::of(a)
        .over(&fleet())
        .plan()
        .status()
        .rollout
        .as_ref()
        .unwrap()
        .revision
        .clone()
}

/// p1's check answered `answer` at `at`.
fn answers(a: &NodePoolApplication, answer: Answer, at: &str) -> Records {
    let checks = Checks::new(a.spec.rollout.as_ref().unwrap().analysis.as_ref().unwrap()).unwrap();
    let mut pool = PoolRecords {
        revision: revision_of(a),
        ready_since: Some("2029-12-31T23:59:00Z".parse().unwrap()),
        ..Default::default()
    };
    let at: Timestamp = at.parse().unwrap();
    pool.checks
        .entry("error-rate".into())
        .or_default()
        .record(&checks.checks[0], at, answer);
    [("p1".to_string(), pool)].into()
}

fn row(plan: &Plan, pool: &str) -> crate::api::PoolStatus {
    plan.status().pools.into_iter().find(|p| p.pool == pool).unwrap()
}

#[test]
fn a_canary_whose_checks_were_not_asked_yet_soaks_and_the_plan_asks_them() {
    let a = judged(30);
    let records = Records::new();
    let plan = with_canary(&a, Answers::Asked(&records));
    assert!(
        plan.apply.is_empty(),
        "nothing goes on while the canary is judged: {:?}",
        applied_pools(&plan)
    );
    let p1 = row(&plan, "p1");
    assert_eq!((p1.rollout.as_str(), p1.reason.as_str()), ("Soaking", "AnalysisRunning"));
    assert!(p1.message.contains("error-rate: not asked yet"), "{}", p1.message);
    let asks = &plan.analysis.as_ref().unwrap().asks;
    assert_eq!(asks.len(), 1);
    assert_eq!((asks[0].pool.as_str(), asks[0].check.as_str()), ("p1", "error-rate"));
    assert_eq!(asks[0].query, r#"sum(rate(errors_total{site="p1"}[1m]))"#);
    assert!(plan.requeue_after.is_some());
}

#[test]
fn a_canary_within_bounds_at_its_soaks_end_is_done_and_the_next_pool_starts() {
    let a = judged(30);
    let records = answers(&a, Answer::Value(0.01), "2029-12-31T23:59:40Z");
    let plan = with_canary(&a, Answers::Asked(&records));
    assert_eq!(row(&plan, "p1").rollout, "Done");
    assert_eq!(applied_pools(&plan), ["p2"]);
    assert!(plan.analysis.as_ref().unwrap().asks.is_empty());
}

#[test]
fn a_revision_that_completed_is_judged_no_more_so_its_answers_are_let_go() {
    use crate::reconcile::history::{History, Recorded, COMPLETE};
    let a = judged(30);
    let records = answers(&a, Answer::Value(0.01), "2029-12-31T23:59:40Z");
    let plan = with_canary(&a, Answers::Asked(&records));
    assert!(plan.analysis.as_ref().unwrap().judged, "judged while under way");
    let revision = revision_of(&a);
    let complete = Recorded {
        name: format!("gw-{revision}"),
        revision,
        number: 1,
        outcome: Some(COMPLETE.into()),
        halted_judgement: None,
        halted_because: None,
        chart_version: None,
        created: None,
        rolled_out_at: None,
    };
    let history = History::read(vec![complete], Vec::new());
    let (pools, owned) = (fleet(), canary_ready(&a));
    let scenario = Scenario::of(&a).over(&pools).owning(owned);
    let plan = scenario.answered(Answers::Asked(&records)).recorded(&history).plan();
    let analysing = plan.analysis.as_ref().unwrap();
    // The runtime keeps no answers after a plan that judged none.
    assert!(!analysing.judged, "a completed revision is not judged");
    assert!(analysing.asks.is_empty(), "{:?}", analysing.asks);
}

#[test]
fn a_canary_out_of_bounds_fails_and_the_rollout_halts_naming_check_value_and_bound() {
    let a = judged(30);
    let records = answers(&a, Answer::Value(0.4), "2029-12-31T23:59:10Z");
    let plan = with_canary(&a, Answers::Asked(&records));
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    let p1 = row(&plan, "p1");
    assert_eq!((p1.rollout.as_str(), p1.reason.as_str()), ("Failed", "AnalysisFailed"));
    assert_eq!(p1.ready, ConditionStatus::False);
    for said in ["error-rate", "0.4", "max 0.05"] {
        assert!(p1.message.contains(said), "{said} in {}", p1.message);
    }
    assert_eq!(plan.status().rollout.as_ref().unwrap().phase, RolloutPhase::Halted);
}

#[test]
fn a_canary_whose_checks_go_unanswered_waits_then_fails_at_its_deadline() {
    let a = judged(30);
    let down = || Answer::Unanswered("connection refused".into());
    let records = answers(&a, down(), "2029-12-31T23:59:50Z");
    let plan = with_canary(&a, Answers::Asked(&records));
    let p1 = row(&plan, "p1");
    assert_eq!((p1.rollout.as_str(), p1.reason.as_str()), ("Soaking", "AnalysisRunning"));
    assert!(p1.message.contains("connection refused"), "{}", p1.message);
    assert!(plan.apply.is_empty());
    // Unanswered since long before the deadline (10m by default).
    let records = answers(&a, down(), "2029-12-31T23:40:00Z");
    let plan = with_canary(&a, Answers::Asked(&records));
    let p1 = row(&plan, "p1");
    assert_eq!((p1.rollout.as_str(), p1.reason.as_str()), ("Failed", "AnalysisFailed"));
    assert!(p1.message.contains("unanswered"), "{}", p1.message);
}

#[test]
fn those_who_only_look_read_the_verdicts_the_status_reports() {
    let a = judged(30);
    let verdicts = [("p1".to_string(), Verdict::Failed("check error-rate failed".into()))].into();
    let plan = with_canary(&a, Answers::Reported(&verdicts));
    assert_eq!(row(&plan, "p1").rollout, "Failed");
    assert!(plan.analysis.as_ref().unwrap().asks.is_empty(), "a looker asks nothing");
    let none = BTreeMap::new();
    let plan = with_canary(&a, Answers::Reported(&none));
    assert_eq!(row(&plan, "p1").rollout, "Done");
}

#[test]
fn a_query_that_is_not_promql_stops_the_application_naming_the_check() {
    let mut a = judged(30);
    let analysis = a.spec.rollout.as_mut().unwrap().analysis.as_mut().unwrap();
    analysis.checks[0].query = "sum(rate(errors_total[1m]".into();
    let plan = Scenario::of(&a).over(&fleet()).plan();
    assert!(plan.apply.is_empty());
    let stalled = condition(&plan, "Stalled").unwrap();
    assert_eq!(stalled.reason, "InvalidRollout");
    assert!(stalled.message.contains("rollout.analysis.checks[0].query"), "{}", stalled.message);
    assert!(stalled.message.contains("error-rate"), "{}", stalled.message);
}

/// A canary step, then the rest, with a wave check over the canary's pools.
fn wave_judged() -> NodePoolApplication {
    progressive(json!({
        "minReadySeconds": 30,
        "steps": [{ "name": "canary", "pools": { "names": ["p1"] } }],
        "analysis": {
            "prometheus": { "address": "http://prometheus:9090" },
            "waveChecks": [{
                "name": "error-budget",
                "query": "sum(increase(errors_total{site=~\"{{wave.pools}}\"}[10m]))",
                "max": 10,
                "interval": "10s",
            }],
        },
    }))
}

/// The canary wave's check answered `answer` at `at`; the canary was done
/// at 23:59:30 (Ready at 23:59:00, soaked for 30 s).
fn wave_answers(a: &NodePoolApplication, answer: Answer, at: &str) -> Records {
    let checks = Checks::new(a.spec.rollout.as_ref().unwrap().analysis.as_ref().unwrap()).unwrap();
    let mut wave = PoolRecords {
        revision: revision_of(a),
        ready_since: Some("2029-12-31T23:59:30Z".parse().unwrap()),
        ..Default::default()
    };
    let at: Timestamp = at.parse().unwrap();
    let record = wave.checks.entry("error-budget".into()).or_default();
    record.record(&checks.wave_checks[0], at, answer);
    [("wave:canary".to_string(), wave)].into()
}

#[test]
fn the_next_wave_waits_for_the_done_waves_checks_which_are_asked_over_its_pools() {
    let a = wave_judged();
    let records = Records::new();
    let plan = with_canary(&a, Answers::Asked(&records));
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    assert_eq!(row(&plan, "p1").rollout, "Done");
    let p2 = row(&plan, "p2");
    assert_eq!((p2.rollout.as_str(), p2.reason.as_str()), ("Waiting", "WaitingForWaveChecks"));
    assert!(p2.message.contains("wave 1 (step canary)"), "{}", p2.message);
    let asks = &plan.analysis.as_ref().unwrap().asks;
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!((asks[0].pool.as_str(), asks[0].check.as_str()), ("wave:canary", "error-budget"));
    assert_eq!(asks[0].query, r#"sum(increase(errors_total{site=~"p1"}[10m]))"#);
}

#[test]
fn a_wave_within_its_budget_lets_the_next_start() {
    let a = wave_judged();
    let records = wave_answers(&a, Answer::Value(2.0), "2029-12-31T23:59:40Z");
    let plan = with_canary(&a, Answers::Asked(&records));
    assert_eq!(applied_pools(&plan), ["p2"]);
}

#[test]
fn a_wave_over_its_budget_halts_the_rollout_naming_the_wave_and_the_check() {
    let a = wave_judged();
    let records = wave_answers(&a, Answer::Value(40.0), "2029-12-31T23:59:40Z");
    let plan = with_canary(&a, Answers::Asked(&records));
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.phase, RolloutPhase::Halted);
    for said in ["wave 1 (step canary)", "error-budget", "40", "max 10"] {
        assert!(rollout.message.contains(said), "{said} in {}", rollout.message);
    }
    let stalled = condition(&plan, "Stalled").unwrap();
    assert!(stalled.message.contains("error-budget"), "{}", stalled.message);
    assert_eq!(row(&plan, "p2").rollout, "Halted");
}

/// A canary that fails its check under `onFailure: Rollback` goes back;
/// the halt names the check, its value and bound as it names Flux's
/// message, and the history records it: once the canary is back (its
/// row shows the upgrade that took it back), the rollout still says why
/// (fourth review, item 7: seen live, nothing named `AnalysisFailed`).
#[test]
fn a_check_that_fails_a_canary_is_named_by_the_halt_and_kept_by_the_history() {
    use crate::reconcile::history::{History, Recorded, ROLLED_BACK};
    let mut a = judged(30);
    a.spec.rollout.as_mut().unwrap().on_failure = Some(crate::api::OnFailure::Rollback);
    let records = answers(&a, Answer::Value(0.4), "2029-12-31T23:59:10Z");
    let history = History::read(Vec::new(), Vec::new());
    let (pools, owned) = (fleet(), canary_ready(&a));
    let scenario = Scenario::of(&a).over(&pools).owning(owned);
    let plan = scenario.answered(Answers::Asked(&records)).recorded(&history).plan();
    let rollout = plan.status().rollout.unwrap();
    for said in ["AnalysisFailed", "error-rate", "0.4", "max 0.05"] {
        assert!(rollout.message.contains(said), "{said} in {}", rollout.message);
    }
    let record = plan.history.record.as_ref().expect("the revision is recorded");
    let because = record.halted_because.clone().expect("the halt's cause is recorded");
    assert!(because.contains("error-rate") && because.contains("AnalysisFailed"), "{because}");

    // Later, with nothing failing now and no answers kept (a restart):
    // the record says why it halted.
    let revision = revision_of(&a);
    let recorded = Recorded {
        name: format!("gw-{revision}"),
        revision,
        number: 1,
        outcome: Some(ROLLED_BACK.into()),
        halted_judgement: None,
        halted_because: Some(because),
        chart_version: None,
        created: None,
        rolled_out_at: None,
    };
    let history = History::read(vec![recorded], Vec::new());
    let behind = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let none = Records::new();
    let scenario = Scenario::of(&a).over(&pools).owning(behind);
    let plan = scenario.answered(Answers::Asked(&none)).recorded(&history).plan();
    let rollout = plan.status().rollout.unwrap();
    assert!(
        rollout.message.contains("error-rate") && rollout.message.contains("AnalysisFailed"),
        "{}",
        rollout.message
    );
}

/// A restart, a failover or a shard move empties the memory of answers:
/// the failures a pool's checks had over its soak are kept on its release
/// with the mark of when it turned Ready, and judged from there, so the
/// pool that failed is not soaked afresh and passed (fourth review, item 7).
#[test]
fn a_failed_check_kept_on_the_release_still_fails_the_pool_after_a_restart() {
    let a = judged(30);
    let records = answers(&a, Answer::Value(0.4), "2029-12-31T23:59:10Z");
    let failed = with_canary(&a, Answers::Asked(&records));
    let mark = failed
        .ready_marks
        .iter()
        .find(|m| m.release.starts_with("gw-p1-"))
        .expect("p1 is marked");
    assert_eq!(mark.at.as_deref(), Some("2029-12-31T23:59:00Z"));
    let kept = mark.failures.clone().expect("p1's failure is kept");
    assert!(kept.contains("error-rate") && kept.contains("0.4"), "{kept}");

    // Restarted: nothing in memory, the release read back with its mark.
    let mut owned = canary_ready(&a);
    let p1 = owned.iter_mut().find(|o| o.pool.as_deref() == Some("p1")).unwrap();
    let status = Arc::make_mut(&mut p1.status);
    status.ready_recorded = mark.at.clone();
    status.checks_recorded = Some(kept);
    let empty = Records::new();
    let pools = fleet();
    let scenario = Scenario::of(&a).over(&pools).owning(owned);
    let restarted = scenario.answered(Answers::Asked(&empty)).plan();
    let p1 = row(&restarted, "p1");
    assert_eq!((p1.rollout.as_str(), p1.reason.as_str()), ("Failed", "AnalysisFailed"), "{}", p1.message);
    assert!(p1.message.contains("0.4"), "{}", p1.message);
    assert!(restarted.apply.is_empty(), "{:?}", applied_pools(&restarted));
    assert!(restarted.ready_marks.iter().all(|m| !m.release.starts_with("gw-p1-")), "kept already");
    let analysing = restarted.analysis.as_ref().unwrap();
    assert_eq!(analysing.kept.iter().map(|(pool, _)| pool.as_str()).collect::<Vec<_>>(), ["p1"]);
}
