//! Plan: a pool's own change after its revision completed is the
//! revision's next rollout, and what a new controller renders otherwise is
//! held unless `--rendering-changes=rollout` (docs/rollouts.md, "A pool's
//! own change is a rollout", "A new controller version").
use super::*;
use crate::reconcile::history::COMPLETE;
use crate::reconcile::release::build::pool_inputs;

/// One pool at a time, each rendering its zone label into its values.
fn zoned_app() -> NodePoolApplication {
    app(json!({
        "rollout": { "strategy": "Progressive", "maxUnavailable": 1 },
        "values": { "zone": "{{pool.labels.zone}}" },
    }))
}

fn zoned(name: &str, zone: &str) -> Pool {
    let mut p = pool(name, "east");
    p.labels.insert("zone".into(), zone.into());
    p
}

fn fleet_in(zone: &str) -> Vec<Pool> {
    ["p1", "p2", "p3"].iter().map(|n| zoned(n, zone)).collect()
}

/// The revision `a` rolls out over `pools`, and each pool's release done
/// with it as the rollout numbered 1 wrote it, stamped with the pool as it
/// was then.
fn done_by_the_first_rollout(a: &NodePoolApplication, pools: &[Pool]) -> (String, Vec<ObservedRelease>) {
    let first = Scenario::of(a).over(pools).plan();
    let revision = first.status().rollout.unwrap().revision;
    let owned = first
        .apply
        .iter()
        .map(|d| {
            let mut release = ready_release(&d.name, &d.pool, &d.spec_hash);
            let pool = pools.iter().find(|p| p.name == d.pool).unwrap();
            release.stamps = stamped(&revision, 1, pool);
            release
        })
        .collect();
    (revision, owned)
}

fn history(revision: &str, number: i64, outcome: Option<&str>) -> History {
    History::read(vec![record(revision, number, outcome)], Vec::new())
}

/// The stamps of a release of `revision` written by the rollout numbered
/// `rollout` from `pool` as it is.
fn stamped(revision: &str, rollout: i64, pool: &Pool) -> Stamps {
    Stamps {
        revision: Some(revision.to_string()),
        rollout: Some(rollout),
        pool_inputs: Some(pool_inputs(pool)),
        ..Stamps::default()
    }
}

/// `a` planned over `pools` and their releases `owned`, with `history`.
fn planned(a: &NodePoolApplication, history: &History, pools: &[Pool], owned: &[ObservedRelease]) -> Plan {
    Scenario::of(a).recorded(history).over(pools).owning(owned.to_vec()).plan()
}

#[test]
fn a_pools_own_change_after_completion_is_the_next_rollout_and_its_failure_halts_the_rest() {
    let a = zoned_app();
    let (revision, owned) = done_by_the_first_rollout(&a, &fleet_in("z1"));
    let completed = history(&revision, 1, Some(COMPLETE));
    // Unchanged pools: nothing to do, and the revision stays complete.
    let plan = planned(&a, &completed, &fleet_in("z1"), &owned);
    assert!(plan.apply.is_empty());
    assert_eq!(plan.status().rollout.unwrap().phase, RolloutPhase::Complete);

    // p2 and p3 move to zone z2: the revision is the same, their releases
    // are not, and the change goes out as its next rollout, one at a time.
    let mut moved = fleet_in("z1");
    moved[1] = zoned("p2", "z2");
    moved[2] = zoned("p3", "z2");
    let plan = planned(&a, &completed, &moved, &owned);
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.revision, revision, "a pool's change is no new revision");
    assert_eq!((rollout.phase, rollout.number), (RolloutPhase::Progressing, Some(2)));
    assert_eq!(applied_pools(&plan), ["p2"]);
    let record = plan.history.record.as_ref().expect("the revision is renumbered");
    assert_eq!((record.number, record.data.is_none(), record.outcome), (2, true, None));
    let annotations = &desired(&plan, "p2")["metadata"]["annotations"];
    assert_eq!(annotations[naming::ANNOTATION_ROLLOUT], json!("2"));
    assert_eq!(annotations[naming::ANNOTATION_POOL_INPUTS], json!(pool_inputs(&moved[1])));
    assert!(
        annotations.get(naming::ANNOTATION_ROLLBACK_REVISION).is_none(),
        "the revision before the write is this one: nothing to go back to"
    );

    // p2 fails on it: the rollout halts, and p3 is not written.
    let written = plan.apply.iter().find(|d| d.pool == "p2").unwrap();
    let mut failed = ready_release(&written.name, "p2", &written.spec_hash);
    failed.stamps = stamped(&revision, 2, &moved[1]);
    failed.status = ReleaseStatus {
        state: ReleaseState::Failed,
        reason: "UpgradeFailed".into(),
        message: "Helm upgrade failed: zone z2 has no such storage class".into(),
        ..ReleaseStatus::clone(&failed.status)
    }
    .into();
    let mut owned = owned;
    owned[1] = failed;
    let again = history(&revision, 2, None);
    let plan = planned(&a, &again, &moved, &owned);
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.phase, rollout.number), (RolloutPhase::Halted, Some(2)));
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    assert_eq!(outcome(&plan, "p3"), &Outcome::Deferred(PoolRollout::Halted));
}

/// The fleet done with the revision, each release as an earlier
/// controller rendered it (another spec hash), its pool as it was.
fn rendered_by_an_earlier_controller(a: &NodePoolApplication) -> (String, Vec<ObservedRelease>) {
    let (revision, mut owned) = done_by_the_first_rollout(a, &fleet_in("z1"));
    for release in &mut owned {
        release.spec_hash = Some("rendered-by-the-last-version".into());
    }
    // Written before releases were stamped with their pool: taken as
    // written from the pool as it is.
    owned[2].stamps.pool_inputs = None;
    (revision, owned)
}

#[test]
fn what_a_new_controller_renders_otherwise_is_held_until_the_next_revision_by_default() {
    let a = zoned_app();
    let (revision, owned) = rendered_by_an_earlier_controller(&a);
    let completed = history(&revision, 1, Some(COMPLETE));
    let plan = planned(&a, &completed, &fleet_in("z1"), &owned);
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.phase, rollout.number, rollout.updated), (RolloutPhase::Complete, Some(1), 3));
    assert!(rollout.message.contains("3 release(s) of the revision are kept"), "{}", rollout.message);
    assert!(plan.history.record.is_none(), "no new rollout");

    // `--rendering-changes=rollout`: the difference is the next rollout.
    let plan = Scenario::of(&a)
        .recorded(&completed)
        .over(&fleet_in("z1"))
        .owning(owned.clone())
        .rolling_out_rendering_changes()
        .plan();
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.phase, rollout.number), (RolloutPhase::Progressing, Some(2)));
    assert_eq!(applied_pools(&plan), ["p1"]);

    // A pool's own change is rolled out whatever the flag.
    let mut moved = fleet_in("z1");
    moved[0] = zoned("p1", "z2");
    let plan = planned(&a, &completed, &moved, &owned);
    let rollout = plan.status().rollout.unwrap();
    assert_eq!((rollout.number, applied_pools(&plan)), (Some(2), vec!["p1"]));
    assert!(rollout.message.contains("2 release(s) of the revision are kept"), "{}", rollout.message);
}

#[test]
fn a_release_relabelled_for_its_new_shard_is_written_as_before_and_starts_no_rollout() {
    let a = zoned_app();
    let (revision, mut owned) = done_by_the_first_rollout(&a, &fleet_in("z1"));
    for release in &mut owned {
        release.spec_hash = Some("labelled-for-shard-a".into());
        release.stamps.shard = Some("shard-a".into());
    }
    let completed = history(&revision, 1, Some(COMPLETE));
    let plan = planned(&a, &completed, &fleet_in("z1"), &owned);
    let rollout = plan.status().rollout.unwrap();
    assert_eq!(rollout.number, Some(1));
    assert!(plan.history.record.is_none(), "no new rollout");
    assert!(!plan.apply.is_empty(), "the releases are relabelled");
}
