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

/// A resume writes each release back as it was, which is no update: the
/// releases keep the time of their update, and a pool done with it before
/// the suspension that goes offline just after the resume is offline, not
/// failed with `OfflineAfterUpdate`, whether Flux has read the resume yet
/// or not (fourth review, item 13: the resume restamped `written-at`, so
/// with `minReadySeconds` the pool had yet to prove its update).
#[test]
fn a_pool_done_before_a_suspension_that_goes_offline_after_the_resume_is_offline_not_failed() {
    let a = super::rollout::progressive(
        json!({ "maxUnavailable": 1, "minReadySeconds": 60, "offlineAfter": "1m" }),
    );
    let fleet = super::rollout::fleet();
    let (updated, ready_at) = ("2029-12-31T00:00:00Z", "2029-12-31T00:01:00Z");
    let mut before = resumed_fleet(&a, false);
    for r in &mut before {
        r.written_at = Some(updated.into());
        std::sync::Arc::make_mut(&mut r.status).ready_recorded = Some(ready_at.into());
    }
    let resume = Scenario::of(&a).over(&fleet).owning(before).plan();
    assert_eq!(applied_pools(&resume), ["p1", "p2", "p3", "p4", "p5"]);
    for d in &resume.apply {
        let annotations = &d.object()["metadata"]["annotations"];
        assert_eq!(annotations[naming::ANNOTATION_WRITTEN_AT], updated, "a resume is no update");
        assert_eq!(annotations[naming::ANNOTATION_RESUMED_AT], "2030-01-01T00:00:00Z");
    }
    // The releases as the resume left them, with the mark of when they
    // were first seen Ready; p1's nodes down ten seconds after the resume.
    let after = |flux_read: bool| -> Vec<ObservedRelease> {
        let observed = if flux_read { 3 } else { 2 };
        (resume.apply.iter())
            .map(|d| {
                let mut object = d.object();
                object["metadata"]["generation"] = json!(3);
                object["metadata"]["annotations"][naming::ANNOTATION_READY_AT] = json!(ready_at);
                object["status"] = json!({ "observedGeneration": observed, "conditions": [{
                    "type": "Ready", "status": "True", "reason": "UpgradeSucceeded", "message": "",
                    "observedGeneration": observed, "lastTransitionTime": ready_at }] });
                ObservedRelease::from_value(&object).unwrap()
            })
            .collect()
    };
    let down = NodeCount {
        ready: 0,
        total: 1,
        changed: Some("2030-01-01T00:00:10Z".parse().unwrap()),
        of: Default::default(),
    };
    let nodes = BTreeMap::from([("p1".to_string(), down)]);
    for flux_read in [false, true] {
        let plan = (Scenario::of(&a).over(&fleet).owning(after(flux_read)))
            .with_nodes(&nodes)
            .at("2030-01-01T00:01:30Z")
            .plan();
        let rollout = plan.status().rollout.clone().unwrap();
        // Until Flux has read the resume, the others are progressing.
        let phase = if flux_read {
            RolloutPhase::Complete
        } else {
            RolloutPhase::Progressing
        };
        assert_eq!((rollout.failed, rollout.phase), (0, phase), "Flux read the resume: {flux_read}");
        let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
        assert_eq!(p1.reason, "PoolOffline", "Flux read the resume: {flux_read}: {}", p1.message);
        assert!(
            plan.ready_marks.is_empty(),
            "the mark made before the suspension stands: {:?}",
            plan.ready_marks
        );
    }
}

/// A resumed release's progress deadline runs from the resume, not from
/// the update it keeps the time of: Flux did nothing with it meanwhile.
#[test]
fn a_resumed_releases_progress_deadline_runs_from_the_resume() {
    let a = super::rollout::progressive(json!({ "progressDeadline": "5m" }));
    let fleet = super::rollout::fleet();
    let mut owned = resumed_fleet(&a, false);
    for r in &mut owned {
        r.suspended_with_app = false;
        r.written_at = Some("2029-12-01T00:00:00Z".into());
        r.resumed_at = Some("2030-01-01T00:00:00Z".into());
    }
    let failed_at = |now: &str| {
        let plan = Scenario::of(&a).over(&fleet).owning(owned.clone()).at(now).plan();
        plan.status().rollout.as_ref().unwrap().failed
    };
    assert_eq!(failed_at("2030-01-01T00:04:00Z"), 0, "within five minutes of the resume");
    assert_eq!(failed_at("2030-01-01T00:06:00Z"), 5, "five minutes past the resume");
}

/// An application's first install on the fleet's first pool, p1,
/// suspended with it before Helm judged it: the release, and p1's
/// release name.
fn first_install_suspended(a: &NodePoolApplication, fleet: &[Pool]) -> (ObservedRelease, String) {
    let first = Scenario::of(a).over(fleet).planned_by_the_controller().plan();
    assert_eq!(applied_pools(&first), ["p1"]);
    let p1 = &first.apply[0];
    let mut installing = marked(ready_release(&p1.name, "p1", &p1.spec_hash));
    installing.suspended = true;
    installing.written_at = Some("2029-12-31T23:59:00Z".into());
    let status = std::sync::Arc::make_mut(&mut installing.status);
    (status.state, status.observed_latest, status.deployed_before) =
        (ReleaseState::Progressing, false, false);
    (installing, p1.name.clone())
}

/// An application suspended during its first install and resumed: the
/// first pool's install goes on with the resume, so the others wait for
/// it, as for any first install (found by the fault soak, seeds 31337 and
/// 6021, once the checker judged first installs: a new pool installed
/// beside the resumed one).
#[test]
fn a_first_install_resumed_holds_the_other_pools_as_one_under_way() {
    let a = app(json!({}));
    let fleet = super::rollout::fleet();
    let (installing, p1_name) = first_install_suspended(&a, &fleet);
    for changed_while_suspended in [false, true] {
        let mut installing = installing.clone();
        if changed_while_suspended {
            installing.spec_hash = Some("before-the-change".into());
        }
        let plan = Scenario::of(&a)
            .over(&fleet)
            .owning(vec![installing])
            .planned_by_the_controller()
            .plan();
        assert_eq!(plan.resume, std::slice::from_ref(&p1_name));
        let written = applied_pools(&plan);
        assert!(
            written.iter().all(|p| *p == "p1"),
            "changed while suspended: {changed_while_suspended}: only the install under way goes on: {written:?}"
        );
    }
}

/// Found by the fault soak (seed 6021): a pool left the selection while
/// its application was suspended in the middle of the first install. At
/// the resume its release is resumed (so that helm-controller uninstalls
/// it) and pruned; a new pool waits until it is gone, and installs once
/// it is, or once any release was deployed.
#[test]
fn a_first_install_whose_pool_left_holds_the_new_pools_until_it_is_gone() {
    let a = app(json!({}));
    let fleet = super::rollout::fleet();
    let (installing, p1_name) = first_install_suspended(&a, &fleet);
    let without_p1: Vec<_> = fleet.iter().filter(|p| p.name != "p1").cloned().collect();
    let plan = Scenario::of(&a)
        .over(&without_p1)
        .owning(vec![installing.clone()])
        .planned_by_the_controller()
        .plan();
    assert_eq!(plan.resume, std::slice::from_ref(&p1_name), "resumed to be uninstalled");
    assert_eq!(plan.prune, std::slice::from_ref(&p1_name));
    assert!(applied_pools(&plan).is_empty(), "{:?}", applied_pools(&plan));
    let p2 = plan.status().pools.into_iter().find(|p| p.pool == "p2").unwrap();
    assert!(p2.message.contains(&p1_name), "{p2:?}");
    // Being deleted, it holds them still; gone, the next pool goes first.
    let mut deleting = installing.clone();
    (deleting.suspended, deleting.deleting) = (false, true);
    let plan = Scenario::of(&a)
        .over(&without_p1)
        .owning(vec![deleting])
        .planned_by_the_controller()
        .plan();
    assert!(applied_pools(&plan).is_empty(), "{:?}", applied_pools(&plan));
    let gone = Scenario::of(&a).over(&without_p1).planned_by_the_controller().plan();
    assert_eq!(applied_pools(&gone), ["p2"]);
    // Most of the fleet leaving at once, the prune guard holds: the
    // releases stay, and hold no install (the first goes alone, as ever).
    let mut p2_left = installing.clone();
    (p2_left.name, p2_left.pool) = ("gw-p2-left".into(), Some("p2".into()));
    let without_two: Vec<_> =
        fleet.iter().filter(|p| !["p1", "p2"].contains(&p.name.as_str())).cloned().collect();
    let plan = Scenario::of(&a)
        .over(&without_two)
        .owning(vec![installing.clone(), p2_left])
        .planned_by_the_controller()
        .plan();
    assert!(plan.prune.is_empty(), "held: {:?}", plan.prune);
    assert_eq!(applied_pools(&plan), ["p3"]);
    // Deployed, it installs nothing more: the first install of the pools
    // selected goes on, one pool first.
    let mut deployed = installing;
    std::sync::Arc::make_mut(&mut deployed.status).deployed_before = true;
    let plan = Scenario::of(&a)
        .over(&without_p1)
        .owning(vec![deployed])
        .planned_by_the_controller()
        .plan();
    assert_eq!(applied_pools(&plan), ["p2"]);
}
