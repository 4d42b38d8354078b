//! Plan: waves that require approval, and the steps an approval lets go.
use super::*;

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
