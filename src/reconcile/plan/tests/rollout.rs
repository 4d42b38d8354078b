//! Plan: the rollout, as plan carries it out.

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
        installed_before: true,
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
fn an_offline_pool_is_left_alone_reported_apart_and_waited_for_by_nobody() {
    let a = progressive(json!({}));
    let nodes: BTreeMap<String, NodeCount> = [
        (
            "p1".to_string(),
            NodeCount {
                ready: 0,
                total: 2,
                changed: Some("2029-12-31T23:00:00Z".parse().unwrap()),
                of: Default::default(),
            },
        ),
        (
            "p2".to_string(),
            NodeCount {
                ready: 2,
                total: 3,
                changed: None,
                of: Default::default(),
            },
        ),
    ]
    .into();
    let owned = releases_of(&a, &fleet(), &["p1", "p2"]);
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert_eq!(applied_pools(&plan), ["p2"], "p1 is offline: p2 goes instead");
    assert_eq!(outcome(&plan, "p1"), &Outcome::Deferred(PoolRollout::Offline));
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!((p1.offline, p1.nodes.as_deref(), p1.reason.as_str()), (true, Some("0/2"), "PoolOffline"));
    assert_eq!(p1.offline_since.as_deref(), Some("2029-12-31T23:00:00Z"));
    assert!(p1.message.contains("since 2029-12-31T23:00:00Z"), "{}", p1.message);
    let p2 = plan.status().pools.iter().find(|p| p.pool == "p2").unwrap().clone();
    assert_eq!((p2.offline, p2.nodes.as_deref()), (false, Some("2/3")));
    assert_eq!(plan.status().offline_pools, 1);
    // The rest done: Ready, the offline pool counted apart.
    let owned = releases_of(&a, &fleet(), &["p1"]);
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert!(plan.apply.is_empty());
    assert_eq!(plan.status().ready, "4/5 (1 offline)");
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!(ready.status.as_str(), "True", "{}", ready.message);
    assert!(ready.message.contains("1 offline (p1)"), "{}", ready.message);
    // Its nodes back: it catches up.
    let back: BTreeMap<String, NodeCount> = [(
        "p1".to_string(),
        NodeCount {
            ready: 1,
            total: 2,
            changed: None,
            of: Default::default(),
        },
    )]
    .into();
    let owned = releases_of(&a, &fleet(), &["p1"]);
    assert_eq!(applied_pools(&with_nodes(&a, &fleet(), owned, &back)), ["p1"]);
}

#[test]
fn an_offline_pools_failed_upgrade_is_not_the_charts_failure() {
    let a = progressive(json!({}));
    let nodes: BTreeMap<String, NodeCount> = [(
        "p1".to_string(),
        NodeCount {
            ready: 0,
            total: 1,
            changed: None,
            of: Default::default(),
        },
    )]
    .into();
    let mut owned = releases_of(&a, &fleet(), &["p2"]);
    std::sync::Arc::make_mut(&mut owned[0].status).state = ReleaseState::Failed;
    std::sync::Arc::make_mut(&mut owned[0].status).reason = "UpgradeFailed".into();
    std::sync::Arc::make_mut(&mut owned[0].status).message = "context deadline exceeded".into();
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert_eq!(applied_pools(&plan), ["p2"]);
    assert!(condition(&plan, "Stalled").is_none());
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!(p1.reason, "PoolOffline");
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
fn a_pool_the_change_took_offline_halts_the_rollout() {
    let a = progressive(json!({}));
    let pools = fleet();
    let mut owned = releases_of(&a, &pools, &["p2", "p3", "p4", "p5"]);
    // p1 took the revision at 23:50 and is still being upgraded; its nodes
    // stopped being Ready at 23:55.
    owned[0].written_at = Some("2029-12-31T23:50:00Z".into());
    std::sync::Arc::make_mut(&mut owned[0].status).state = ReleaseState::Progressing;
    std::sync::Arc::make_mut(&mut owned[0].status).observed_latest = false;
    let down = NodeCount {
        ready: 0,
        total: 2,
        changed: Some("2029-12-31T23:55:00Z".parse().unwrap()),
        of: Default::default(),
    };
    let up = NodeCount {
        ready: 1,
        total: 1,
        changed: None,
        of: Default::default(),
    };
    let nodes: BTreeMap<String, NodeCount> = pools
        .iter()
        .map(|p| (p.name.clone(), if p.name == "p1" { down } else { up }))
        .collect();
    let plan = with_nodes(&a, &pools, owned.clone(), &nodes);
    assert!(plan.apply.is_empty(), "no further pool is written: {:?}", applied_pools(&plan));
    let rollout = plan.status().rollout.as_ref().unwrap().clone();
    assert_eq!(rollout.phase, RolloutPhase::Halted);
    let stalled = condition(&plan, "Stalled").unwrap();
    assert_eq!(stalled.reason, "RolloutHalted");
    assert!(stalled.message.contains("OfflineAfterUpdate"), "{}", stalled.message);
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!(p1.reason, "OfflineAfterUpdate");
    assert!(p1.offline);

    // Offline since before its update: skipped, and the rollout goes on.
    let nodes: BTreeMap<String, NodeCount> = nodes
        .into_iter()
        .map(|(name, mut n)| {
            if name == "p1" {
                n.changed = Some("2029-12-31T23:40:00Z".parse().unwrap());
            }
            (name, n)
        })
        .collect();
    let plan = with_nodes(&a, &pools, owned, &nodes);
    assert_eq!(applied_pools(&plan), ["p2"]);
    assert_eq!(plan.status().rollout.as_ref().unwrap().phase, RolloutPhase::Progressing);
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
fn a_wave_that_requires_approval_waits_for_an_approval_of_this_revision() {
    let mut a = progressive(json!({ "maxUnavailable": 5, "steps": [
        { "pools": { "names": ["p5"] } },
        { "pools": { "names": ["p1", "p2", "p3", "p4"] }, "requireApproval": true }
    ] }));
    // The canary is done; the second wave waits.
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    let plan = Scenario::of(&a).over(&fleet()).owning(owned.clone()).plan();
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    assert_eq!(outcome(&plan, "p1"), &Outcome::Deferred(PoolRollout::AwaitingApproval));
    let rollout = plan.status().rollout.clone().unwrap();
    assert_eq!((rollout.phase, rollout.wave.as_deref()), (RolloutPhase::AwaitingApproval, Some("2/2")));
    let approval = format!("{}/2", rollout.revision);
    assert!(
        rollout.message.contains(&format!("apps.fanout.dev/approve={approval}")),
        "{}",
        rollout.message
    );
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "AwaitingApproval"));
    assert!(condition(&plan, "Stalled").is_none(), "a person is asked, nothing failed");
    // An approval of another revision, or of the first wave only, is none.
    for other in ["0123456789/2".to_string(), format!("{}/1", rollout.revision)] {
        a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), other.clone())].into());
        let plan = Scenario::of(&a).over(&fleet()).owning(owned.clone()).plan();
        assert!(plan.apply.is_empty(), "{other} approved the wave");
    }
    // Approved: the wave goes, and it is no new revision.
    a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), approval)].into());
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p1", "p2", "p3", "p4"]);
    assert_eq!(plan.status().rollout.unwrap().revision, rollout.revision);
    // A new pool installs whatever the approval.
    let mut pools = fleet();
    pools.push(pool("p6", "east"));
    a.metadata.annotations = None;
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    let plan = Scenario::of(&a).over(&pools).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p6"]);
}

#[test]
fn an_approval_lets_go_the_step_it_names_however_the_waves_move() {
    let mut a = progressive(json!({ "maxUnavailable": 5, "steps": [
        { "name": "canary", "pools": { "names": ["p5"] } },
        { "name": "east", "pools": { "names": ["p1", "p2"] }, "requireApproval": true },
        { "pools": { "names": ["p3", "p4"] }, "requireApproval": true }
    ] }));
    // The canary is done; east waits, and says what to approve.
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    let rollout = Scenario::of(&a)
        .over(&fleet())
        .owning(owned.clone())
        .plan()
        .status()
        .rollout
        .unwrap();
    assert_eq!(rollout.awaiting_step.as_deref(), Some("east"));
    let approval = format!("{}/east", rollout.revision);
    assert!(
        rollout.message.contains(&format!("apps.fanout.dev/approve={approval}")),
        "{}",
        rollout.message
    );
    a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), approval.clone())].into());
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p1", "p2"]);
    // East done; then the canary's pool goes away: east is now the first
    // wave and the last step the second, which no one approved.
    let east_done = releases_of(&a, &fleet(), &["p3", "p4"]);
    let without_canary: Vec<Pool> = fleet().into_iter().filter(|p| p.name != "p5").collect();
    let east_done: Vec<ObservedRelease> =
        east_done.into_iter().filter(|o| o.pool.as_deref() != Some("p5")).collect();
    // An approval that no longer names east takes it back: east holds
    // every wave after it again, and is what is asked for.
    let waits = [
        (approval, ("2/2", "3")),
        (format!("{}/2", rollout.revision), ("1/2", "east")),
    ];
    for (approval, (wave, step)) in waits {
        a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), approval.clone())].into());
        let plan = Scenario::of(&a).over(&without_canary).owning(east_done.clone()).plan();
        assert!(plan.apply.is_empty(), "{approval} let {:?} go", applied_pools(&plan));
        let rollout = plan.status().rollout.unwrap();
        assert_eq!(rollout.phase, RolloutPhase::AwaitingApproval);
        assert_eq!((rollout.wave.as_deref(), rollout.awaiting_step.as_deref()), (Some(wave), Some(step)));
    }
    // What is asked for keeps what was approved: annotating it as said
    // never takes back an earlier step.
    a.metadata.annotations =
        Some([("apps.fanout.dev/approve".to_string(), format!("{}/east", rollout.revision))].into());
    let asked = Scenario::of(&a)
        .over(&without_canary)
        .owning(east_done.clone())
        .plan()
        .status()
        .rollout
        .unwrap();
    assert!(asked.message.contains(&format!("={}/east,3", rollout.revision)), "{}", asked.message);
    // Both steps approved: the last goes too.
    let both = format!("{}/east,3", rollout.revision);
    a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), both)].into());
    let plan = Scenario::of(&a).over(&without_canary).owning(east_done).plan();
    assert_eq!(applied_pools(&plan), ["p3", "p4"]);
}

#[test]
fn a_step_that_requires_approval_holds_the_waves_after_it_when_its_own_pools_are_gone() {
    // Found by the fault soak (seed 88641237): the gated step's pools were
    // deleted, and the last wave went without its approval.
    let mut a = progressive(json!({ "maxUnavailable": 5, "steps": [
        { "name": "canary", "pools": { "names": ["p5"] } },
        { "name": "gate", "pools": { "names": ["p1", "p2"] }, "requireApproval": true }
    ] }));
    let gone: Vec<Pool> = fleet().into_iter().filter(|p| p.name != "p1" && p.name != "p2").collect();
    let owned = releases_of(&a, &gone, &["p3", "p4"]);
    let plan = Scenario::of(&a).over(&gone).owning(owned.clone()).plan();
    assert!(plan.apply.is_empty(), "{:?} went unapproved", applied_pools(&plan));
    assert_eq!(outcome(&plan, "p3"), &Outcome::Deferred(PoolRollout::AwaitingApproval));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.phase, RolloutPhase::AwaitingApproval);
    assert_eq!((rollout.wave.as_deref(), rollout.awaiting_step.as_deref()), (Some("2/3"), Some("gate")));
    assert!(rollout.message.contains(&format!("={}/gate", rollout.revision)), "{}", rollout.message);
    a.metadata.annotations =
        Some([("apps.fanout.dev/approve".to_string(), format!("{}/gate", rollout.revision))].into());
    let plan = Scenario::of(&a).over(&gone).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p3", "p4"]);
    // A gate after every pool holds nothing, and is no wave.
    let mut last = progressive(json!({ "maxUnavailable": 5, "steps": [
        { "name": "canary", "pools": { "names": ["p1", "p2", "p3", "p4", "p5"] } },
        { "name": "gate", "pools": { "names": ["p9"] }, "requireApproval": true }
    ] }));
    last.metadata.annotations = None;
    let owned = releases_of(&last, &fleet(), &["p1"]);
    let plan = Scenario::of(&last).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p1"]);
    assert_eq!(plan.status().rollout.unwrap().wave, None, "one wave");
}
