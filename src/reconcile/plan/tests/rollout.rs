//! Plan: the rollout, as plan carries it out.

mod analysis;
mod approval;
mod gates;
mod offline;
mod pool_change;

use super::*;

/// Five pools in region east, each with a Ready release of `hash` (or
/// of the current spec when `hash` is None), by pool name.
pub(super) fn fleet() -> Vec<Pool> {
    ["p1", "p2", "p3", "p4", "p5"].iter().map(|n| pool(n, "east")).collect()
}

fn releases_of(a: &NodePoolApplication, pools: &[Pool], stale: &[&str]) -> Vec<ObservedRelease> {
    let first = Scenario::of(a).over(pools).plan();
    first
        .apply
        .iter()
        .map(|d| {
            let hash = if stale.contains(&d.pool.as_str()) {
                "old"
            } else {
                d.spec_hash.as_str()
            };
            ready_release(&d.name, &d.pool, hash)
        })
        .collect()
}

fn with_nodes(
    a: &NodePoolApplication,
    pools: &[Pool],
    owned: Vec<ObservedRelease>,
    nodes: &BTreeMap<String, NodeCount>,
) -> Plan {
    Scenario::of(a).over(pools).owning(owned).with_nodes(nodes).plan()
}

pub(super) fn progressive(extra: Value) -> NodePoolApplication {
    let mut rollout = json!({ "strategy": "Progressive" });
    for (k, v) in extra.as_object().unwrap() {
        rollout[k] = v.clone();
    }
    app(json!({ "rollout": rollout }))
}

#[test]
fn a_progressive_change_writes_one_pool_and_leaves_the_rest_as_they_are() {
    let a = progressive(json!({}));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p1"]);
    assert_eq!(
        plan.apply[0].object()["metadata"]["annotations"]["apps.fanout.dev/written-at"],
        "2030-01-01T00:00:00Z"
    );
    assert_eq!(outcome(&plan, "p2"), &Outcome::Deferred(PoolRollout::Pending));
    assert!(plan.prune.is_empty());
    let rollout = plan.status().rollout.as_ref().unwrap().clone();
    assert_eq!(
        (rollout.phase, rollout.updated, rollout.done, rollout.total),
        (RolloutPhase::Progressing, 1, 0, 5)
    );
    assert_eq!(rollout.progress, "Progressing 0/5");
    let p2 = plan.status().pools.iter().find(|p| p.pool == "p2").unwrap().clone();
    assert_eq!((p2.ready, p2.up_to_date, p2.rollout.as_str()), (ConditionStatus::True, false, "Pending"));
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!((p1.up_to_date, p1.rollout.as_str()), (true, "Updating"));
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "Progressing"));
    assert!(condition(&plan, "Reconciling").is_some());
    assert!(condition(&plan, "Stalled").is_none());
}

#[test]
fn a_pool_done_lets_the_next_start_and_all_done_is_ready() {
    let a = progressive(json!({}));
    let owned = releases_of(&a, &fleet(), &["p3", "p4", "p5"]);
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p3"]);
    assert_eq!(plan.status().rollout.as_ref().unwrap().done, 2);
    let owned = releases_of(&a, &fleet(), &[]);
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert!(plan.apply.is_empty());
    assert_eq!(plan.status().rollout.as_ref().unwrap().progress, "Complete 5/5");
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Succeeded"));
    assert!(condition(&plan, "Reconciling").is_none());
}

#[test]
fn a_failed_pool_halts_the_rollout_naming_it_with_fluxs_message() {
    let a = progressive(json!({}));
    let mut owned = releases_of(&a, &fleet(), &["p2", "p3", "p4", "p5"]);
    owned[0].status = ReleaseStatus {
        state: ReleaseState::Stalled,
        reason: "UpgradeFailed".into(),
        message: "Service \"gw\" is invalid: spec.ports[0].port: Invalid value: 70000".into(),
        chart_version: Some("1.0.0".into()),
        observed_latest: true,
        ready_since: None,
        ready_recorded: None,
        checks_recorded: None,
        deployed_before: true,
        deployed_version: None,
    }
    .into();
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert!(plan.apply.is_empty(), "no further pool is touched");
    assert!(plan.prune.is_empty());
    for p in ["p2", "p3", "p4", "p5"] {
        assert_eq!(outcome(&plan, p), &Outcome::Deferred(PoolRollout::Halted));
    }
    let stalled = condition(&plan, "Stalled").unwrap();
    assert_eq!(stalled.reason, "RolloutHalted");
    assert!(
        stalled.message.contains("pool \"p1\": UpgradeFailed") && stalled.message.contains("70000"),
        "{}",
        stalled.message
    );
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "RolloutHalted"));
    assert!(ready.message.contains("70000"), "{}", ready.message);
    assert!(condition(&plan, "Reconciling").is_none());
    assert_eq!(plan.status().rollout.as_ref().unwrap().progress, "Halted 0/5 (1 failed)");
}

#[test]
fn the_progress_deadline_fails_a_pool_in_the_status_too() {
    let a = progressive(json!({ "progressDeadline": "5m" }));
    let mut owned = releases_of(&a, &fleet(), &["p2"]);
    std::sync::Arc::make_mut(&mut owned[0].status).state = ReleaseState::Progressing;
    owned[0].written_at = Some("2029-12-31T23:54:00Z".into());
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!(
        (p1.ready, p1.reason.as_str(), p1.rollout.as_str()),
        (ConditionStatus::False, "ProgressDeadlineExceeded", "Failed")
    );
    assert!(p1.message.contains("progressDeadline (5m)"), "{}", p1.message);
    assert_eq!(condition(&plan, "Stalled").unwrap().reason, "RolloutHalted");
    // Before the deadline: updating, and a look again when it passes.
    let mut owned = releases_of(&a, &fleet(), &["p2"]);
    std::sync::Arc::make_mut(&mut owned[0].status).state = ReleaseState::Progressing;
    owned[0].written_at = Some("2029-12-31T23:58:00Z".into());
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(181)));
    assert!(plan.apply.is_empty());
}

#[test]
fn steps_set_the_waves() {
    let a = progressive(json!({ "maxUnavailable": 2, "steps": [{ "pools": { "names": ["p5"] } }] }));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p5"], "the canary first, alone in its wave");
    assert_eq!(plan.status().rollout.as_ref().unwrap().wave.as_deref(), Some("1/2"));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p1", "p2"]);
    assert_eq!(plan.status().rollout.as_ref().unwrap().wave.as_deref(), Some("2/2"));
}

#[test]
fn a_step_selector_that_cannot_be_read_blocks_everything() {
    let a = progressive(json!({ "steps": [{ "pools": { "selector": {
            "matchExpressions": [{ "key": "k", "operator": "Near" }] } } }] }));
    let plan = Scenario::of(&a).over(&fleet()).plan();
    assert!(plan.apply.is_empty());
    assert!(plan.blocked.as_deref().unwrap().contains("rollout.steps[0].pools"), "{:?}", plan.blocked);
}

#[test]
fn bad_rollout_settings_block_everything_naming_the_field() {
    let a = progressive(json!({ "progressDeadline": "a while" }));
    let plan = Scenario::of(&a).over(&fleet()).plan();
    assert!(plan.apply.is_empty());
    assert_eq!(condition(&plan, "Stalled").unwrap().reason, "InvalidRollout");
    assert!(plan.blocked.as_deref().unwrap().contains("rollout.progressDeadline"));
}

#[test]
fn pausing_is_no_new_revision() {
    let running = progressive(json!({}));
    let paused = progressive(json!({ "paused": true }));
    let revision =
        |a: &NodePoolApplication| Scenario::of(a).over(&fleet()).plan().status().rollout.unwrap().revision;
    assert_eq!(revision(&running), revision(&paused));
    assert_ne!(revision(&running), revision(&app(json!({ "interval": "5m" }))));
    let owned = releases_of(&paused, &fleet(), &["p1", "p2"]);
    let plan = Scenario::of(&paused).over(&fleet()).owning(owned).plan();
    assert!(plan.apply.is_empty());
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "RolloutPaused"));
    assert!(condition(&plan, "Stalled").is_none(), "a pause is the owner's choice, not a failure");
}

#[test]
fn all_at_once_still_writes_everything_and_reports_the_rollout() {
    let a = app(json!({}));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(plan.apply.len(), 5);
    assert_eq!(plan.status().rollout.as_ref().unwrap().progress, "Progressing 0/5");
}

#[test]
fn a_refused_write_reaches_the_conditions_and_the_counts() {
    let a = app(json!({}));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert_eq!(condition(&plan, "Reconciling").map(|c| c.status).as_deref(), Some("True"));
    let refused = |retriable| WriteRefused {
        pool: "shanghai".into(),
        reason: "ApplyFailed".into(),
        message: "cannot apply HelmRelease gw-shanghai: admission webhook denied it".into(),
        retriable,
    };
    let status = plan.report.after_writes(&[refused(false)]).status();
    let stalled = status.conditions.iter().find(|c| c.type_ == "Stalled").expect("a person must act");
    assert!(
        stalled.message.contains("shanghai") && stalled.message.contains("webhook"),
        "{}",
        stalled.message
    );
    assert!(
        status.conditions.iter().all(|c| c.type_ != "Reconciling"),
        "kstatus reads Failed, not InProgress"
    );
    assert_eq!(status.pool_counts.as_ref().unwrap().stalled, 1);
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "ApplyFailed"));
    // One a retry may mend: failing, and still in progress.
    let status = plan.report.after_writes(&[refused(true)]).status();
    assert_eq!(status.pool_counts.as_ref().unwrap().failed, 1);
    assert!(status.conditions.iter().all(|c| c.type_ != "Stalled"));
    assert_eq!(plan.report.after_writes(&[]).status(), plan.status(), "nothing refused, nothing changes");
}

#[test]
fn a_release_moved_is_written_on_the_version_its_move_was_decided_on() {
    let a = progressive(json!({}));
    let mut owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    for (i, o) in owned.iter_mut().enumerate() {
        o.resource_version = Some((100 + i).to_string());
    }
    // p4 is down on the revision before, as Flux judged it: it starts at
    // once, taking no slot. Had it turned Ready since, its write must fail.
    let p4 = owned.iter_mut().find(|o| o.pool.as_deref() == Some("p4")).unwrap();
    std::sync::Arc::make_mut(&mut p4.status).state = ReleaseState::Failed;
    // p5 has no release yet.
    owned.retain(|o| o.pool.as_deref() != Some("p5"));
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p4", "p5"]);
    let decided_on: Vec<Option<&str>> = plan.apply.iter().map(|d| d.decided_on.as_deref()).collect();
    assert_eq!(decided_on, [Some("103"), None], "a new release has no version to be decided on");
}

/// Found by the hour-long fault soak (seed 379907332): the status read
/// `Halted` at the application's generation, but the next plan read no
/// record of the halt in the history (not yet read back after an API
/// server restart), the failed pools' verdicts were stale, and new and
/// behind pools were written at the halted revision. The halt the status
/// reads holds; an edit since (another generation) lifts it.
#[test]
fn a_halt_the_status_reads_holds_though_the_history_has_not_recorded_it() {
    let mut a = progressive(json!({}));
    a.metadata.generation = Some(43);
    // p1 took the revision and is Ready now; p2 to p4 are behind; p5 is new.
    let mut owned = releases_of(&a, &fleet(), &["p2", "p3", "p4"]);
    owned.retain(|o| o.pool.as_deref() != Some("p5"));
    let unheld = Scenario::of(&a).over(&fleet()).owning(owned.clone()).plan();
    assert_eq!(applied_pools(&unheld), ["p2", "p5"], "without a halt, the rollout goes on");
    let revision = unheld.status().rollout.unwrap().revision;
    let reads = |phase: RolloutPhase, generation: i64| crate::api::NodePoolApplicationStatus {
        observed_generation: Some(generation),
        rollout: Some(crate::api::RolloutStatus {
            revision: revision.clone(),
            phase,
            ..Default::default()
        }),
        ..Default::default()
    };
    for phase in [
        RolloutPhase::Halted,
        RolloutPhase::RollingBack,
        RolloutPhase::RolledBack,
    ] {
        a.status = Some(reads(phase, 43));
        let held = Scenario::of(&a).over(&fleet()).owning(owned.clone()).plan();
        assert!(applied_pools(&held).is_empty(), "{phase:?}: {:?}", applied_pools(&held));
        assert_eq!(held.status().rollout.unwrap().phase, RolloutPhase::Halted, "{phase:?}");
    }
    // Read at the generation before: a person's edit since lifts it.
    a.status = Some(reads(RolloutPhase::Halted, 42));
    let edited = Scenario::of(&a).over(&fleet()).owning(owned.clone()).plan();
    assert_eq!(applied_pools(&edited), ["p2", "p5"]);
    // Another revision's halt holds nothing of this one.
    let mut other = reads(RolloutPhase::Halted, 43);
    other.rollout.as_mut().unwrap().revision = "another".into();
    a.status = Some(other);
    let changed = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&changed), ["p2", "p5"]);
}

/// Fourth review, item 4: the halt the history records holds across an
/// edit that judges nothing afresh (`paused` set and unset, a window, one
/// more pool by name, `deletionPolicy`), and ends when what judges the
/// pools changes (`maxFailures`, `onFailure`).
#[test]
fn a_halt_holds_across_edits_that_judge_nothing_and_ends_when_the_judging_changes() {
    use crate::reconcile::history::{Recorded, HALTED};
    let a = progressive(json!({}));
    // p1 took the revision and is Ready now; p2 to p4 are behind; p5 is new.
    let mut owned = releases_of(&a, &fleet(), &["p2", "p3", "p4"]);
    owned.retain(|o| o.pool.as_deref() != Some("p5"));
    let revision = Scenario::of(&a)
        .over(&fleet())
        .owning(owned.clone())
        .plan()
        .status()
        .rollout
        .unwrap()
        .revision;
    let judged = crate::reconcile::rollout::settings::judged_by(a.spec.rollout.as_ref());
    let history = History::read(
        vec![Recorded {
            name: format!("gw-{revision}"),
            revision: revision.clone(),
            number: 1,
            outcome: Some(HALTED.into()),
            halted_judgement: Some(judged),
            halted_because: None,
            chart_version: Some("1.0.0".into()),
            created: None,
            rolled_out_at: None,
        }],
        Vec::new(),
    );
    let plan_of = |edited: &NodePoolApplication| {
        Scenario::of(edited).over(&fleet()).owning(owned.clone()).recorded(&history).plan()
    };
    let edit = |rollout: Value, spec: Value| {
        let mut edited = progressive(rollout);
        let mut as_json = serde_json::to_value(&edited.spec).unwrap();
        for (k, v) in spec.as_object().unwrap() {
            as_json[k] = v.clone();
        }
        edited.spec = serde_json::from_value(as_json).unwrap();
        edited.metadata.generation = Some(7);
        edited
    };
    let window = json!([{ "schedule": "0 0 * * *", "duration": "24h" }]);
    for (what, edited) in [
        ("as it was", edit(json!({}), json!({}))),
        ("paused", edit(json!({ "paused": true }), json!({}))),
        ("unpaused", edit(json!({ "paused": false }), json!({}))),
        ("a window", edit(json!({ "windows": window }), json!({}))),
        ("deletionPolicy", edit(json!({}), json!({ "deletionPolicy": "Orphan" }))),
        (
            "one more pool",
            edit(
                json!({}),
                json!({ "pools": { "names": ["p9"], "selector": { "matchLabels": { "region": "east" } } } }),
            ),
        ),
    ] {
        let plan = plan_of(&edited);
        assert!(applied_pools(&plan).is_empty(), "{what}: {:?}", applied_pools(&plan));
        assert_eq!(plan.status().rollout.unwrap().phase, RolloutPhase::Halted, "{what}");
    }
    for (what, edited) in [
        ("maxFailures", edit(json!({ "maxFailures": 1 }), json!({}))),
        ("onFailure", edit(json!({ "onFailure": "Rollback" }), json!({}))),
    ] {
        let plan = plan_of(&edited);
        assert_eq!(applied_pools(&plan), ["p2", "p5"], "{what} judges afresh");
    }
}
