//! `spec.suspend`: the application stops acting, as Flux's suspend stops a
//! controller acting on an object, and its releases are suspended with it.

use super::*;

fn suspended() -> NodePoolApplication {
    app(json!({ "suspend": true }))
}

fn marked(mut release: ObservedRelease) -> ObservedRelease {
    release.suspended_with_app = true;
    release
}

#[test]
fn a_suspended_application_writes_creates_and_prunes_nothing() {
    let a = app(json!({}));
    let first = Scenario::of(&a).over(&pools()).plan();
    let hangzhou = first.apply.iter().find(|d| d.pool == "hangzhou").unwrap();
    // hangzhou has its release; shanghai joined since; "gone" left.
    let owned = vec![
        ready_release(&hangzhou.name, "hangzhou", "an-older-spec"),
        ready_release("gw-gone-1234", "gone", "an-older-spec"),
    ];
    let plan = Scenario::of(&suspended()).over(&pools()).owning(owned).plan();
    assert!(plan.apply.is_empty(), "nothing written or created: {:?}", plan.apply);
    assert!(plan.prune.is_empty(), "nothing pruned: {:?}", plan.prune);
    assert_eq!(
        plan.suspend,
        [hangzhou.name.clone(), "gw-gone-1234".to_string()],
        "every release suspended"
    );
    assert!(plan.resume.is_empty());
    assert!(plan.pools.iter().all(|p| p.outcome == Outcome::Suspended), "{:#?}", plan.pools);
    assert_eq!(plan.requeue_after, None, "no clock to wake a suspended application");
    let ready = plan.status().conditions.iter().find(|c| c.type_ == "Ready").unwrap().clone();
    assert_eq!(ready.reason, "Suspended");
    assert!(ready.message.starts_with("suspended (spec.suspend)"), "{}", ready.message);
    assert!(
        plan.status().conditions.iter().all(|c| c.type_ != "Reconciling"),
        "nothing is in progress"
    );
}

#[test]
fn releases_already_suspended_are_not_suspended_again() {
    let owned = vec![marked(ready_release("gw-hangzhou-1", "hangzhou", "h"))];
    let plan = Scenario::of(&suspended()).over(&pools()).owning(owned).plan();
    assert!(plan.suspend.is_empty(), "{:?}", plan.suspend);
    assert!(plan.apply.is_empty());
}

#[test]
fn resumed_the_suspension_is_taken_back_and_our_spec_written_whole() {
    let a = app(json!({}));
    let at_rest: Vec<ObservedRelease> = Scenario::of(&a)
        .over(&pools())
        .plan()
        .apply
        .iter()
        .map(|d| ready_release(&d.name, &d.pool, &d.spec_hash))
        .collect();
    assert!(
        Scenario::of(&a).over(&pools()).owning(at_rest.clone()).plan().apply.is_empty(),
        "at rest, nothing to write"
    );
    let suspended_ones: Vec<ObservedRelease> = at_rest.into_iter().map(marked).collect();
    let plan = Scenario::of(&a).over(&pools()).owning(suspended_ones).plan();
    assert_eq!(plan.resume.len(), 2, "{:?}", plan.resume);
    assert!(plan.suspend.is_empty());
    // Suspending may have taken `spec.suspend` from our field manager: the
    // spec is written again whole, though its hash is the same.
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
}

#[test]
fn a_blocked_suspended_application_still_suspends_its_releases() {
    let mut a = suspended();
    a.spec.pools.selector = Some(
        serde_json::from_value(json!({ "matchExpressions": [ { "key": "region", "operator": "Bogus" } ] }))
            .unwrap(),
    );
    let plan = Scenario::of(&a)
        .over(&pools())
        .owning(vec![ready_release("gw-hangzhou-1", "hangzhou", "h")])
        .plan();
    assert!(plan.blocked.is_some());
    assert_eq!(plan.suspend, ["gw-hangzhou-1"]);
}

/// The releases of a progressive application resumed after a suspension,
/// as Flux leaves them: suspending bumped their generation, and Flux
/// stamped no verdict on it, so none reads Ready for its latest spec.
fn resumed_fleet(a: &NodePoolApplication, changed_while_suspended: bool) -> Vec<ObservedRelease> {
    let fleet = super::rollout::fleet();
    Scenario::of(a)
        .over(&fleet)
        .plan()
        .apply
        .iter()
        .map(|d| {
            let hash = if changed_while_suspended {
                "before-the-change"
            } else {
                d.spec_hash.as_str()
            };
            let mut release = marked(ready_release(&d.name, &d.pool, hash));
            std::sync::Arc::make_mut(&mut release.status).state = ReleaseState::Progressing;
            std::sync::Arc::make_mut(&mut release.status).observed_latest = false;
            release
        })
        .collect()
}

#[test]
fn resumed_a_progressive_application_goes_on_one_pool_at_a_time() {
    let a = super::rollout::progressive(json!({ "maxUnavailable": 1 }));
    let fleet = super::rollout::fleet();
    let plan = Scenario::of(&a).over(&fleet).owning(resumed_fleet(&a, true)).plan();
    assert_eq!(plan.resume.len(), 5, "{:?}", plan.resume);
    assert_eq!(applied_pools(&plan), ["p1"], "a change made while suspended keeps its canary");
    assert!(
        plan.pools
            .iter()
            .filter(|p| p.pool != "p1")
            .all(|p| p.outcome == Outcome::Deferred(PoolRollout::Pending)),
        "{:#?}",
        plan.pools
    );
}

#[test]
fn resumed_without_a_change_every_release_is_restored_at_once_and_takes_no_turn() {
    let a = super::rollout::progressive(json!({ "maxUnavailable": 1 }));
    let fleet = super::rollout::fleet();
    let plan = Scenario::of(&a).over(&fleet).owning(resumed_fleet(&a, false)).plan();
    assert_eq!(applied_pools(&plan), ["p1", "p2", "p3", "p4", "p5"], "nothing new to roll out");
    assert!(plan.apply.iter().all(|d| d.resumed));
    let rollout = plan.status().rollout.as_ref().unwrap().clone();
    assert_eq!(rollout.failed, 0, "their clock starts again: no deadline has passed");
}

#[test]
fn while_suspended_no_progress_deadline_runs() {
    let a = super::rollout::progressive(json!({ "progressDeadline": "1m" }));
    let mut suspended_app = a.clone();
    suspended_app.spec.suspend = Some(true);
    let mut owned = resumed_fleet(&a, false);
    for r in &mut owned {
        r.written_at = Some("2029-01-01T00:00:00Z".into());
    }
    let plan = Scenario::of(&suspended_app).over(&super::rollout::fleet()).owning(owned).plan();
    let rollout = plan.status().rollout.as_ref().unwrap().clone();
    assert_eq!(rollout.failed, 0, "{rollout:?}");
    assert_ne!(rollout.phase, RolloutPhase::Halted);
}
