//! Plan: `onFailure: Rollback`, from the history and the releases' stamps
//! to the writes that take pools back.

use super::rollout::{fleet, progressive};
use super::*;
use crate::reconcile::history::{Recorded, COMPLETE};

/// The application with `replicas` controller replicas, rolled back on failure.
fn with_replicas(replicas: i64) -> NodePoolApplication {
    let mut a = progressive(json!({ "onFailure": "Rollback" }));
    a.spec.values =
        Some(json!({ "controller": { "replicas": replicas, "ingressClass": { "name": "{{pool.name}}" } } }));
    a
}

fn revision_of(a: &NodePoolApplication) -> String {
    Scenario::of(a).over(&fleet()).plan().status().rollout.unwrap().revision
}

/// Each pool's release as `a` builds it, Ready, stamped with `stamps`.
fn built(a: &NodePoolApplication, stamps: &Stamps) -> Vec<ObservedRelease> {
    Scenario::of(a)
        .over(&fleet())
        .plan()
        .apply
        .iter()
        .map(|d| ObservedRelease {
            stamps: stamps.clone(),
            ..ready_release(&d.name, &d.pool, &d.spec_hash)
        })
        .collect()
}

/// `good` recorded as complete, then `bad` under way.
fn history(good: &NodePoolApplication, bad: &NodePoolApplication) -> History {
    let record =
        |a: &NodePoolApplication, number, outcome: Option<&str>| record(&revision_of(a), number, outcome);
    // Newest first, as the history reads them.
    History::read(
        vec![record(bad, 2, None), record(good, 1, Some(COMPLETE))],
        vec![PastRevision {
            revision: revision_of(good),
            spec: revision_spec(&good.spec),
            chart_ref: None,
            requests: Vec::new(),
        }],
    )
}

/// Every pool on `good`, but p1, which took `bad` and failed.
fn first_failed(good: &NodePoolApplication, bad: &NodePoolApplication) -> Vec<ObservedRelease> {
    let mut owned = built(good, &written(&revision_of(good)));
    let took = Stamps {
        revision: Some(revision_of(bad)),
        rollback_revision: Some(revision_of(good)),
        rolled_back_from: None,
        rollout: None,
        pool_inputs: None,
        shard: None,
    };
    let p1 = built(bad, &took).remove(0);
    owned[0] = ObservedRelease {
        status: ReleaseStatus {
            state: ReleaseState::Failed,
            reason: "UpgradeFailed".into(),
            ..ReleaseStatus::clone(&p1.status)
        }
        .into(),
        ..p1
    };
    owned
}

fn written(revision: &str) -> Stamps {
    Stamps {
        revision: Some(revision.into()),
        ..Stamps::default()
    }
}

#[test]
fn a_write_stamps_the_revision_and_where_the_release_would_go_back_to() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    let history = history(&good, &bad);
    let owned = built(&good, &written(&revision_of(&good)));
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    let write = plan.apply[0].object();
    let annotations = &write["metadata"]["annotations"];
    assert_eq!(annotations[naming::ANNOTATION_REVISION], json!(revision_of(&bad)));
    assert_eq!(annotations[naming::ANNOTATION_ROLLBACK_REVISION], json!(revision_of(&good)));
    assert!(annotations.get(naming::ANNOTATION_ROLLED_BACK_FROM).is_none());
}

#[test]
fn a_failed_pool_goes_back_to_the_last_complete_revision_and_stays_there() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    let (good_rev, bad_rev) = (revision_of(&good), revision_of(&bad));
    let history = history(&good, &bad);
    // p1 took the bad revision, and failed.
    let mut owned = first_failed(&good, &bad);
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned.clone()).recorded(&history).plan();
    assert_eq!(applied_pools(&plan), ["p1"]);
    let write = plan.apply[0].object();
    assert_eq!(write["spec"]["values"]["controller"]["replicas"], json!(1));
    let annotations = &write["metadata"]["annotations"];
    assert_eq!(annotations[naming::ANNOTATION_REVISION], json!(good_rev));
    assert_eq!(annotations[naming::ANNOTATION_ROLLED_BACK_FROM], json!(bad_rev));
    assert_eq!(outcome(&plan, "p2"), &Outcome::Deferred(PoolRollout::Halted));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(
        (rollout.phase, rollout.rolled_back_to.as_deref()),
        (RolloutPhase::RollingBack, Some(good_rev.as_str()))
    );
    let stalled = condition(&plan, "Stalled").unwrap();
    assert_eq!(stalled.reason, "RolledBack");
    assert!(stalled.message.contains("rolling back to revision"), "{}", stalled.message);
    assert_eq!(condition(&plan, "Ready").unwrap().reason, "RolledBack");

    // Back and Ready: rolled back, and nothing is written again.
    let back = ObservedRelease {
        stamps: Stamps::rolled_back(&bad_rev, &good_rev),
        ..ready_release(&plan.apply[0].name, "p1", &plan.apply[0].spec_hash)
    };
    owned[0] = back;
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.phase, rollout.progress.as_str()), (RolloutPhase::RolledBack, "RolledBack 1/1"));
    assert!(condition(&plan, "Stalled").is_some());
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!((p1.ready, p1.rollout.as_str()), (ConditionStatus::True, "RolledBack"));
}

#[test]
fn under_halt_nothing_goes_back() {
    let good = with_replicas(1);
    let mut bad = with_replicas(2);
    bad.spec.rollout.as_mut().unwrap().on_failure = Some(crate::api::OnFailure::Halt);
    let history = history(&good, &bad);
    let owned = first_failed(&good, &bad);
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    assert!(plan.apply.is_empty());
    assert_eq!(plan.status().rollout.unwrap().phase, RolloutPhase::Halted);
}

#[test]
fn a_pool_the_past_revision_cannot_be_built_for_stays_as_it_is() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    // The revision read a label the pool no longer has.
    let mut past = good.clone();
    past.spec.values = Some(json!({ "controller": { "image": "{{pool.labels.zone}}" } }));
    let history = History::read(
        history(&good, &bad).recorded,
        vec![PastRevision {
            revision: revision_of(&good),
            spec: revision_spec(&past.spec),
            chart_ref: None,
            requests: Vec::new(),
        }],
    );
    let owned = first_failed(&good, &bad);
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    let Outcome::Failed { field, message } = outcome(&plan, "p1") else {
        panic!("{:?}", outcome(&plan, "p1"))
    };
    assert!(field.starts_with("values"), "{field}");
    assert!(message.starts_with("cannot go back to revision") && message.contains("zone"), "{message}");
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert!(p1.message.contains("the pool stays as it is"), "{}", p1.message);
}

#[test]
fn a_pool_failing_after_its_revision_completed_takes_no_healthy_pool_back() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    let (good_rev, bad_rev) = (revision_of(&good), revision_of(&bad));
    // `bad` rolled out to every pool and completed; then p5, installed
    // by it as a new pool, failed.
    let mut history = history(&good, &bad);
    history.recorded[0].outcome = Some(COMPLETE.into());
    let took = Stamps {
        revision: Some(bad_rev.clone()),
        rollback_revision: Some(good_rev),
        rolled_back_from: None,
        rollout: None,
        pool_inputs: None,
        shard: None,
    };
    let mut owned = built(&bad, &took);
    owned[4].stamps = written(&bad_rev);
    owned[4].status = ReleaseStatus {
        state: ReleaseState::Failed,
        reason: "InstallFailed".into(),
        ..ReleaseStatus::clone(&owned[4].status)
    }
    .into();
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    assert_eq!(applied_pools(&plan), Vec::<&str>::new(), "no healthy pool is written");
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.phase, rollout.rolled_back_to), (RolloutPhase::Complete, None));
    assert_eq!(rollout.failed, 1);
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!(ready.status, "False");
    assert!(ready.message.contains("p5"), "the failed pool is named: {}", ready.message);
}

#[test]
fn a_revision_is_what_the_releases_would_be() {
    let good = with_replicas(1);
    let mut same = good.clone();
    same.spec.pools.names = vec!["p9".into()];
    same.spec.deletion_policy = Some(crate::api::DeletionPolicy::Orphan);
    assert_eq!(revision_of(&same), revision_of(&good), "no release changes: no new revision");
    assert_ne!(revision_of(&with_replicas(2)), revision_of(&good));
}

#[test]
fn a_revision_that_comes_back_after_a_rollback_is_rolled_out_afresh() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    let (good_rev, bad_rev) = (revision_of(&good), revision_of(&bad));
    // `bad` was rolled back, another revision came and went, and `bad`
    // came back: renumbered an hour ago, with no outcome yet.
    let mut history = history(&good, &bad);
    history.recorded[0].number = 3;
    history.recorded[0].rolled_out_at = Some("2029-12-31T23:00:00Z".into());
    let mut owned = built(&good, &written(&good_rev));
    for release in &mut owned[..2] {
        // Taken back by the earlier rollout of `bad`, a day ago.
        release.stamps = Stamps::rolled_back(&bad_rev, &good_rev);
        release.written_at = Some(WrittenAt::from("2029-12-31T00:00:00Z".to_string()));
    }
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned.clone()).recorded(&history).plan();
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.phase, RolloutPhase::Progressing, "{}", rollout.message);
    assert_eq!(applied_pools(&plan), ["p1"], "the canary takes it again, as the user asked");
    // Taken back by this rollout of it: it stays rolled back.
    for release in &mut owned[..2] {
        release.written_at = Some(WrittenAt::from("2029-12-31T23:30:00Z".to_string()));
    }
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    assert_eq!(plan.status().rollout.unwrap().phase, RolloutPhase::RolledBack);
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
}

/// Every pool back on `good` from `bad` a day ago, by an earlier rollout
/// of `bad`, which is now under way again.
fn taken_back_a_day_ago(good: &NodePoolApplication, bad: &NodePoolApplication) -> Vec<ObservedRelease> {
    let (good_rev, bad_rev) = (revision_of(good), revision_of(bad));
    let mut owned = built(good, &written(&good_rev));
    for release in &mut owned {
        release.stamps = Stamps::rolled_back(&bad_rev, &good_rev);
        release.written_at = Some(WrittenAt::from("2029-12-31T00:00:00Z".to_string()));
    }
    owned
}

/// Found on the local plane (fourth review, item 1): `bad` rolled back,
/// the spec reverted to `good` (which completed at once, writing nothing,
/// so every release kept its rolled-back-from stamp), then `bad` again.
/// The first plan of `bad`'s return reads its record before the reconcile
/// renumbers it: the record's `RolledBack` and its start are of the
/// earlier rollout, and the returning revision is rolled out afresh.
#[test]
fn a_change_undone_then_redone_is_rolled_out_afresh_from_its_first_plan() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    let mut history = history(&good, &bad);
    history.recorded[0].outcome = Some(crate::reconcile::history::ROLLED_BACK.into());
    history.recorded[0].rolled_out_at = Some("2029-12-30T00:00:00Z".into());
    // `good` came back after it, and completed: the newest record.
    history.recorded[1].number = 3;
    history.recorded.reverse();
    let owned = taken_back_a_day_ago(&good, &bad);
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.phase, RolloutPhase::Progressing, "{}", rollout.message);
    assert_eq!(applied_pools(&plan), ["p1"], "the canary takes it again, as the user asked");
    assert!(condition(&plan, "Stalled").is_none(), "{:?}", condition(&plan, "Stalled"));
}

/// The same stamps, and `bad`'s record forgotten past
/// `revisionHistoryLimit`: a revision with no record begins now.
#[test]
fn a_revision_whose_record_was_forgotten_is_rolled_out_afresh() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    let mut history = history(&good, &bad);
    history.recorded.remove(0);
    let owned = taken_back_a_day_ago(&good, &bad);
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.phase, RolloutPhase::Progressing, "{}", rollout.message);
    assert_eq!(applied_pools(&plan), ["p1"]);
}

/// A history that says this rollout of the revision was rolled back,
/// while no release says it went back (they left the selection, say), is
/// a halt: never `RolledBack` with nothing back (third review, item 6).
#[test]
fn a_rollback_the_releases_do_not_show_reads_as_a_halt() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    let mut history = history(&good, &bad);
    history.recorded[0].outcome = Some(crate::reconcile::history::ROLLED_BACK.into());
    let owned = built(&good, &written(&revision_of(&good)));
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.phase, RolloutPhase::Halted, "{}", rollout.message);
    assert!(!rollout.message.contains("0 of 0"), "{}", rollout.message);
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
}

#[test]
fn a_revision_made_by_a_flux_request_goes_back_to_the_release_as_it_was() {
    let good = with_replicas(1);
    // The same spec, retried with a request: a revision of its own.
    let mut retried = good.clone();
    retried.metadata.annotations = Some(
        [
            ("reconcile.fluxcd.io/requestedAt".to_string(), "t1".to_string()),
            ("reconcile.fluxcd.io/forceAt".to_string(), "t1".to_string()),
        ]
        .into(),
    );
    let (good_rev, retried_rev) = (revision_of(&good), revision_of(&retried));
    assert_ne!(good_rev, retried_rev);
    let history = history(&good, &retried);
    let mut owned = first_failed(&good, &retried);
    let plan = Scenario::of(&retried).over(&fleet()).owning(owned.clone()).recorded(&history).plan();
    assert_eq!(applied_pools(&plan), ["p1"], "the rollback writes the release as it was");
    let write = plan.apply[0].object();
    let annotations = &write["metadata"]["annotations"];
    assert!(annotations.get("reconcile.fluxcd.io/forceAt").is_none(), "{annotations}");
    assert_eq!(annotations[naming::ANNOTATION_ROLLED_BACK_FROM], json!(retried_rev));
    // Back and Ready: rolled back, not rolling back forever.
    owned[0] = ObservedRelease {
        stamps: Stamps::rolled_back(&retried_rev, &good_rev),
        ..ready_release(&plan.apply[0].name, "p1", &plan.apply[0].spec_hash)
    };
    let plan = Scenario::of(&retried).over(&fleet()).owning(owned).recorded(&history).plan();
    assert_eq!(plan.status().rollout.unwrap().phase, RolloutPhase::RolledBack);
}

#[test]
fn a_pool_goes_back_to_the_revision_it_was_done_with_though_the_fleet_never_completed_it() {
    // A burst of commits: 2 was written everywhere (each pool done with
    // it, the last still soaking) and never completed; then 3 broke the
    // canary.
    let (two, three) = (with_replicas(2), with_replicas(3));
    let (two_rev, three_rev) = (revision_of(&two), revision_of(&three));
    let record = |revision: &str, number| Recorded {
        name: format!("gw-{revision}"),
        revision: revision.to_string(),
        number,
        outcome: None,
        halted_judgement: None,
        halted_because: None,
        chart_version: None,
        created: None,
        rolled_out_at: None,
    };
    let past = PastRevision {
        revision: two_rev.clone(),
        spec: revision_spec(&two.spec),
        chart_ref: None,
        requests: Vec::new(),
    };
    let history =
        History::read(vec![record(&three_rev, 3), record(&two_rev, 2), record("one", 1)], vec![past]);
    // The canary's write of 3 is stamped with where it goes back: 2, the
    // revision it was done with.
    let at_two = built(&two, &written(&two_rev));
    let plan = Scenario::of(&three).over(&fleet()).owning(at_two.clone()).recorded(&history).plan();
    assert_eq!(applied_pools(&plan), ["p1"]);
    assert_eq!(plan.apply[0].stamps.rollback_revision.as_deref(), Some(two_rev.as_str()));
    // It failed: it goes back to 2.
    let mut owned = at_two;
    let took = Stamps {
        revision: Some(three_rev.clone()),
        rollback_revision: Some(two_rev.clone()),
        rolled_back_from: None,
        rollout: None,
        pool_inputs: None,
        shard: None,
    };
    let p1 = built(&three, &took).remove(0);
    owned[0] = ObservedRelease {
        status: ReleaseStatus {
            state: ReleaseState::Failed,
            ..ReleaseStatus::clone(&p1.status)
        }
        .into(),
        ..p1
    };
    let plan = Scenario::of(&three).over(&fleet()).owning(owned).recorded(&history).plan();
    assert_eq!(applied_pools(&plan), ["p1"], "{}", plan.status().rollout.unwrap().message);
    let write = plan.apply[0].object();
    assert_eq!(write["spec"]["values"]["controller"]["replicas"], json!(2));
    assert_eq!(write["metadata"]["annotations"][naming::ANNOTATION_ROLLED_BACK_FROM], json!(three_rev));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.phase, rollout.rolled_back_to), (RolloutPhase::RollingBack, Some(two_rev)));
}

#[test]
fn a_rollback_with_nowhere_to_go_says_so_and_is_no_rollback() {
    let (good, bad) = (with_replicas(1), with_replicas(2));
    // p1 took `bad` over a release no revision had completed on.
    let history = History::read(history(&good, &bad).recorded, Vec::new());
    let owned = first_failed(&good, &bad);
    let plan = Scenario::of(&bad).over(&fleet()).owning(owned).recorded(&history).plan();
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.phase, rollout.rolled_back_to), (RolloutPhase::Halted, None));
    assert!(rollout.message.contains("onFailure: Rollback could not apply"), "{}", rollout.message);
    assert!(
        rollout.message.contains("is no longer in the history"),
        "the reason is named: {}",
        rollout.message
    );
}
