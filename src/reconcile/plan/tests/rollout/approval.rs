//! Plan: waves that require approval, and the steps an approval lets go.
use super::*;
use crate::reconcile::history::{Recorded, COMPLETE};

/// A history with no record yet: the revision's first rollout, number 1.
static FIRST_ROLLOUT: std::sync::LazyLock<History> = std::sync::LazyLock::new(History::default);

/// `a` planned as its first rollout is (see [`FIRST_ROLLOUT`]).
fn scenario(a: &NodePoolApplication) -> Scenario<'_> {
    Scenario::of(a).recorded(&FIRST_ROLLOUT)
}

#[test]
fn a_wave_that_requires_approval_waits_for_an_approval_of_this_revision() {
    let mut a = progressive(json!({ "maxUnavailable": 5, "steps": [
        { "pools": { "names": ["p5"] } },
        { "pools": { "names": ["p1", "p2", "p3", "p4"] }, "requireApproval": true }
    ] }));
    // The canary is done; the second wave waits.
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    let plan = scenario(&a).over(&fleet()).owning(owned.clone()).plan();
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    assert_eq!(outcome(&plan, "p1"), &Outcome::Deferred(PoolRollout::AwaitingApproval));
    let rollout = plan.status().rollout.clone().unwrap();
    assert_eq!((rollout.phase, rollout.wave.as_deref()), (RolloutPhase::AwaitingApproval, Some("2/2")));
    let approval = format!("{}@1/2", rollout.revision);
    assert!(
        rollout.message.contains(&format!("apps.fanout.dev/approve={approval}")),
        "{}",
        rollout.message
    );
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "AwaitingApproval"));
    assert!(condition(&plan, "Stalled").is_none(), "a person is asked, nothing failed");
    // An approval of another revision, one that names no rollout, or of
    // the first wave only, is none.
    for other in [
        "0123456789@1/2".to_string(),
        format!("{}/2", rollout.revision),
        format!("{}@1/1", rollout.revision),
    ] {
        a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), other.clone())].into());
        let plan = scenario(&a).over(&fleet()).owning(owned.clone()).plan();
        assert!(plan.apply.is_empty(), "{other} approved the wave");
    }
    // Approved: the wave goes, and it is no new revision.
    a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), approval)].into());
    let plan = scenario(&a).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p1", "p2", "p3", "p4"]);
    assert_eq!(plan.status().rollout.unwrap().revision, rollout.revision);
    // A new pool installs whatever the approval.
    let mut pools = fleet();
    pools.push(pool("p6", "east"));
    a.metadata.annotations = None;
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    let plan = scenario(&a).over(&pools).owning(owned).plan();
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
    let rollout = scenario(&a).over(&fleet()).owning(owned.clone()).plan().status().rollout.unwrap();
    assert_eq!(rollout.awaiting_step.as_deref(), Some("east"));
    let approval = format!("{}@1/east", rollout.revision);
    assert!(
        rollout.message.contains(&format!("apps.fanout.dev/approve={approval}")),
        "{}",
        rollout.message
    );
    a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), approval.clone())].into());
    let plan = scenario(&a).over(&fleet()).owning(owned).plan();
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
        (format!("{}@1/2", rollout.revision), ("1/2", "east")),
    ];
    for (approval, (wave, step)) in waits {
        a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), approval.clone())].into());
        let plan = scenario(&a).over(&without_canary).owning(east_done.clone()).plan();
        assert!(plan.apply.is_empty(), "{approval} let {:?} go", applied_pools(&plan));
        let rollout = plan.status().rollout.unwrap();
        assert_eq!(rollout.phase, RolloutPhase::AwaitingApproval);
        assert_eq!((rollout.wave.as_deref(), rollout.awaiting_step.as_deref()), (Some(wave), Some(step)));
    }
    // What is asked for keeps what was approved: annotating it as said
    // never takes back an earlier step.
    a.metadata.annotations =
        Some([("apps.fanout.dev/approve".to_string(), format!("{}@1/east", rollout.revision))].into());
    let asked = scenario(&a)
        .over(&without_canary)
        .owning(east_done.clone())
        .plan()
        .status()
        .rollout
        .unwrap();
    assert!(asked.message.contains(&format!("={}@1/east,3", rollout.revision)), "{}", asked.message);
    // Both steps approved: the last goes too.
    let both = format!("{}@1/east,3", rollout.revision);
    a.metadata.annotations = Some([("apps.fanout.dev/approve".to_string(), both)].into());
    let plan = scenario(&a).over(&without_canary).owning(east_done).plan();
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
    let plan = scenario(&a).over(&gone).owning(owned.clone()).plan();
    assert!(plan.apply.is_empty(), "{:?} went unapproved", applied_pools(&plan));
    assert_eq!(outcome(&plan, "p3"), &Outcome::Deferred(PoolRollout::AwaitingApproval));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.phase, RolloutPhase::AwaitingApproval);
    assert_eq!((rollout.wave.as_deref(), rollout.awaiting_step.as_deref()), (Some("2/3"), Some("gate")));
    assert!(rollout.message.contains(&format!("={}@1/gate", rollout.revision)), "{}", rollout.message);
    a.metadata.annotations =
        Some([("apps.fanout.dev/approve".to_string(), format!("{}@1/gate", rollout.revision))].into());
    let plan = scenario(&a).over(&gone).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p3", "p4"]);
    // A gate after every pool holds nothing, and is no wave.
    let mut last = progressive(json!({ "maxUnavailable": 5, "steps": [
        { "name": "canary", "pools": { "names": ["p1", "p2", "p3", "p4", "p5"] } },
        { "name": "gate", "pools": { "names": ["p9"] }, "requireApproval": true }
    ] }));
    last.metadata.annotations = None;
    let owned = releases_of(&last, &fleet(), &["p1"]);
    let plan = scenario(&last).over(&fleet()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["p1"]);
    assert_eq!(plan.status().rollout.unwrap().wave, None, "one wave");
}

/// Fourth review, item 3: revision R approved for its gated step,
/// rolled back, the spec reverted and redone. The redo is another
/// rollout of R (numbered anew in the history), and the approval of R's
/// first rollout lets nothing of it go.
#[test]
fn an_approval_of_an_earlier_rollout_of_the_revision_lets_nothing_go() {
    let mut a = progressive(json!({ "maxUnavailable": 5, "steps": [
        { "pools": { "names": ["p5"] } },
        { "name": "east", "pools": { "names": ["p1", "p2", "p3", "p4"] }, "requireApproval": true }
    ] }));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    let revision = scenario(&a)
        .owning(owned.clone())
        .over(&fleet())
        .plan()
        .status()
        .rollout
        .unwrap()
        .revision;
    let record = |revision: &str, number| Recorded {
        name: format!("gw-{revision}"),
        revision: revision.to_string(),
        number,
        outcome: Some(COMPLETE.into()),
        halted_judgement: None,
        halted_because: None,
        chart_version: Some("1.0.0".into()),
        created: None,
        rolled_out_at: None,
    };
    // R was rolled out first (1), then the revision before it came back (2).
    let returning = History::read(vec![record("before", 2), record(&revision, 1)], Vec::new());
    a.metadata.annotations =
        Some([("apps.fanout.dev/approve".to_string(), format!("{revision}@1/east"))].into());
    let plan = Scenario::of(&a).over(&fleet()).owning(owned.clone()).recorded(&returning).plan();
    assert!(plan.apply.is_empty(), "the first rollout's approval let {:?} go", applied_pools(&plan));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.phase, rollout.number), (RolloutPhase::AwaitingApproval, Some(3)));
    let asked = format!("apps.fanout.dev/approve={revision}@3/east");
    assert!(rollout.message.contains(&asked), "{}", rollout.message);
    // Renumbered as it comes back: still rollout 3, approved as asked.
    let renumbered = History::read(vec![record(&revision, 3), record("before", 2)], Vec::new());
    a.metadata.annotations =
        Some([("apps.fanout.dev/approve".to_string(), format!("{revision}@3/east"))].into());
    let plan = Scenario::of(&a).over(&fleet()).owning(owned).recorded(&renumbered).plan();
    assert_eq!(applied_pools(&plan), ["p1", "p2", "p3", "p4"]);
}
