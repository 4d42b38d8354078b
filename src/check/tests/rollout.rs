//! A rollout's pace and halts: pools down past `maxUnavailable`, a pool
//! written at a halted revision, a completed revision taken back.
use super::*;

#[test]
fn a_progressive_rollout_past_max_unavailable_is_caught_and_one_within_it_is_not() {
    let progressive = json!({ "strategy": "Progressive", "maxUnavailable": 1 });
    let mut checker = Checker::new();
    seen(
        &mut checker,
        0,
        Kind::Application,
        application("gw", 10, progressive, "r2", "Progressing", 3),
    );
    for (i, pool) in ["a", "b", "c"].iter().enumerate() {
        let rv = 20 + i as u64;
        assert!(
            seen(&mut checker, 1, Kind::HelmRelease, release("gw", pool, rv, 1, "r1", "h1", true)).is_empty()
        );
    }
    // a taken down, then back: within the limit.
    let found = seen(&mut checker, 2, Kind::HelmRelease, release("gw", "a", 30, 2, "r2", "h2", true));
    assert_eq!(of(&found, Invariant::MaxUnavailable), 0, "Ready at once: {found:?}");
    let found = seen(&mut checker, 3, Kind::HelmRelease, release("gw", "b", 31, 2, "r2", "h2", false));
    assert_eq!(of(&found, Invariant::MaxUnavailable), 0);
    // A release deleted while down (by hand, or pruned) is down no more:
    // its pool's next release is an install.
    let mut gone = Checker::new();
    let progressive = json!({ "strategy": "Progressive", "maxUnavailable": 1 });
    seen(
        &mut gone,
        0,
        Kind::Application,
        application("gw", 10, progressive, "r2", "Progressing", 2),
    );
    seen(&mut gone, 1, Kind::HelmRelease, release("gw", "a", 11, 1, "r1", "h1", true));
    seen(&mut gone, 1, Kind::HelmRelease, release("gw", "b", 12, 1, "r1", "h1", true));
    seen(&mut gone, 2, Kind::HelmRelease, release("gw", "a", 13, 2, "r2", "h2", false));
    gone.observe(Record {
        seen: at(3),
        kind: Kind::HelmRelease,
        object: release("gw", "a", 14, 2, "r2", "h2", false),
        deleted: true,
    });
    let found = seen(&mut gone, 4, Kind::HelmRelease, release("gw", "b", 15, 2, "r2", "h2", false));
    assert_eq!(of(&found, Invariant::MaxUnavailable), 0, "{found:?}");
    // c written while b is down: two at once.
    let found = seen(&mut checker, 4, Kind::HelmRelease, release("gw", "c", 32, 2, "r2", "h2", false));
    assert_eq!(of(&found, Invariant::MaxUnavailable), 1, "{found:?}");
    let message = &found[0].message;
    assert!(message.contains("gw-b, gw-c") && message.contains("maxUnavailable 1"), "{message}");
    assert!(found[0].story.iter().any(|l| l.contains("HelmRelease edge/gw-c")), "{:?}", found[0].story);
    assert_eq!(checker.summary().violations.get(&Invariant::MaxUnavailable), Some(&1));
}

#[test]
fn pools_not_ready_before_their_write_new_pools_and_all_at_once_take_no_slot() {
    let progressive = json!({ "strategy": "Progressive", "maxUnavailable": "50%" });
    let mut checker = Checker::new();
    seen(
        &mut checker,
        0,
        Kind::Application,
        application("gw", 10, progressive, "r2", "Progressing", 4),
    );
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "a", 20, 1, "r1", "h1", false));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "b", 21, 1, "r1", "h1", true));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "c", 22, 1, "r1", "h1", true));
    let mut found = Vec::new();
    // a was down already; d is new; b and c are the two slots of 50% of 4.
    for (pool, rv) in [("a", 30), ("d", 31), ("b", 32), ("c", 33)] {
        found.extend(seen(&mut checker, 2, Kind::HelmRelease, release("gw", pool, rv, 2, "r2", "h2", false)));
    }
    assert_eq!(of(&found, Invariant::MaxUnavailable), 0, "{found:?}");
    let all_at_once = json!({ "strategy": "AllAtOnce" });
    let mut checker = Checker::new();
    seen(
        &mut checker,
        0,
        Kind::Application,
        application("gw", 10, all_at_once, "r2", "Progressing", 2),
    );
    for (pool, rv) in [("a", 20), ("b", 21)] {
        seen(&mut checker, 1, Kind::HelmRelease, release("gw", pool, rv, 1, "r1", "h1", true));
    }
    for (pool, rv) in [("a", 30), ("b", 31)] {
        let found = seen(&mut checker, 2, Kind::HelmRelease, release("gw", pool, rv, 2, "r2", "h2", false));
        assert_eq!(of(&found, Invariant::MaxUnavailable), 0);
    }
}

#[test]
fn a_pool_written_at_a_halted_revision_is_caught_and_one_written_before_the_halt_is_not() {
    let progressive = json!({ "strategy": "Progressive" });
    let mut checker = Checker::new();
    seen(
        &mut checker,
        0,
        Kind::Application,
        application("gw", 10, progressive.clone(), "r2", "Progressing", 3),
    );
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "a", 11, 1, "r1", "h1", true));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "b", 12, 1, "r1", "h1", true));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "c", 13, 1, "r1", "h1", true));
    seen(&mut checker, 2, Kind::HelmRelease, release("gw", "a", 14, 2, "r2", "h2", false));
    seen(
        &mut checker,
        3,
        Kind::Application,
        application("gw", 16, progressive.clone(), "r2", "Halted", 3),
    );
    // b's write came before the halt (resourceVersion 15), delivered after it.
    let found = seen(&mut checker, 4, Kind::HelmRelease, release("gw", "b", 15, 2, "r2", "h2", false));
    assert_eq!(of(&found, Invariant::HaltHolds), 0, "{found:?}");
    // The halt reads Progressing again for the same revision: it still holds.
    seen(
        &mut checker,
        5,
        Kind::Application,
        application("gw", 17, progressive.clone(), "r2", "Progressing", 3),
    );
    let found = seen(&mut checker, 6, Kind::HelmRelease, release("gw", "c", 18, 2, "r2", "h2", false));
    assert_eq!(
        of(&found, Invariant::HaltHolds),
        0,
        "judged once a newer version of the application is seen"
    );
    // A new revision lifts it, but not for what was written before it.
    let found = seen(
        &mut checker,
        7,
        Kind::Application,
        application("gw", 19, progressive.clone(), "r3", "Progressing", 3),
    );
    assert_eq!(of(&found, Invariant::HaltHolds), 1, "{found:?}");
    assert!(found[0].message.contains("after edge/gw read Halted"), "{}", found[0].message);
    let found = seen(&mut checker, 8, Kind::HelmRelease, release("gw", "c", 20, 3, "r3", "h3", false));
    assert_eq!(of(&found, Invariant::HaltHolds), 0, "{found:?}");

    // A person's edit (new rollout settings: another generation, the same
    // revision) lifts a halt, also for a write its watch delivers first.
    let mut edited = Checker::new();
    seen(
        &mut edited,
        0,
        Kind::Application,
        application("gw", 10, progressive.clone(), "r2", "Halted", 2),
    );
    seen(&mut edited, 1, Kind::HelmRelease, release("gw", "b", 5, 1, "r1", "h1", true));
    let found = seen(&mut edited, 2, Kind::HelmRelease, release("gw", "b", 12, 2, "r2", "h2", false));
    assert!(found.is_empty());
    let mut raised =
        application("gw", 11, json!({ "strategy": "Progressive", "maxFailures": 1 }), "r2", "Halted", 2);
    raised["metadata"]["generation"] = json!(3);
    let found = seen(&mut edited, 3, Kind::Application, raised.clone());
    assert!(found.is_empty(), "{found:?}");
    raised["metadata"]["resourceVersion"] = json!("13");
    raised["status"]["observedGeneration"] = json!(3);
    raised["status"]["rollout"]["phase"] = json!("Progressing");
    let found = seen(&mut edited, 4, Kind::Application, raised);
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(edited.summary().violations.get(&Invariant::HaltHolds), None);
}

/// Fourth review, E2 and E3: the exemptions that hid a halted revision
/// completing behind offline sites, and a halt lifted by any edit.
#[test]
fn only_a_complete_fleet_or_a_change_of_what_judges_ends_a_halt() {
    let progressive = json!({ "strategy": "Progressive" });
    // E2: Complete read while pool c is still on r1 (an
    // offline site behind) lifts nothing: c written at r2 is caught.
    let mut behind = Checker::new();
    seen(
        &mut behind,
        0,
        Kind::Application,
        application("gw", 10, progressive.clone(), "r2", "Halted", 2),
    );
    seen(&mut behind, 1, Kind::HelmRelease, release("gw", "a", 5, 2, "r2", "h2", true));
    seen(&mut behind, 1, Kind::HelmRelease, release("gw", "c", 6, 1, "r1", "h1", true));
    seen(
        &mut behind,
        2,
        Kind::Application,
        application("gw", 11, progressive.clone(), "r2", "Complete", 2),
    );
    seen(&mut behind, 3, Kind::HelmRelease, release("gw", "c", 12, 2, "r2", "h2", false));
    let found = seen(
        &mut behind,
        4,
        Kind::Application,
        application("gw", 13, progressive.clone(), "r2", "Complete", 2),
    );
    assert_eq!(of(&found, Invariant::HaltHolds), 1, "{found:?}");

    // Complete while every release carries r2 lifts it: a release
    // re-created later catches up. Someone else's release that copies the
    // application's label is none of its pools (E10: found by the soak,
    // seeds 41 and 636492862, whose witness release kept every halt of
    // the first application in force).
    let mut completed = Checker::new();
    seen(
        &mut completed,
        0,
        Kind::Application,
        application("gw", 10, progressive.clone(), "r2", "Halted", 2),
    );
    seen(&mut completed, 1, Kind::HelmRelease, release("gw", "a", 5, 2, "r2", "h2", true));
    let mut someone_elses = release("gw", "elsewhere", 6, 1, "r1", "h1", true);
    someone_elses["metadata"]["ownerReferences"] = json!([]);
    seen(&mut completed, 1, Kind::HelmRelease, someone_elses);
    seen(
        &mut completed,
        2,
        Kind::Application,
        application("gw", 11, progressive.clone(), "r2", "Complete", 2),
    );
    seen(&mut completed, 3, Kind::HelmRelease, release("gw", "c", 12, 1, "r2", "h2", false));
    let found = seen(
        &mut completed,
        4,
        Kind::Application,
        application("gw", 13, progressive.clone(), "r2", "Complete", 2),
    );
    assert_eq!(of(&found, Invariant::HaltHolds), 0, "{found:?}");

    // Fourth review, E3: an edit that judges nothing afresh (paused set,
    // another generation) lifts nothing.
    let mut paused = Checker::new();
    seen(
        &mut paused,
        0,
        Kind::Application,
        application("gw", 10, progressive.clone(), "r2", "Halted", 2),
    );
    seen(&mut paused, 1, Kind::HelmRelease, release("gw", "b", 5, 1, "r1", "h1", true));
    let mut edit =
        application("gw", 11, json!({ "strategy": "Progressive", "paused": true }), "r2", "Halted", 2);
    edit["metadata"]["generation"] = json!(3);
    seen(&mut paused, 2, Kind::Application, edit.clone());
    seen(&mut paused, 3, Kind::HelmRelease, release("gw", "b", 12, 2, "r2", "h2", false));
    edit["metadata"]["resourceVersion"] = json!("13");
    let found = seen(&mut paused, 4, Kind::Application, edit);
    assert_eq!(of(&found, Invariant::HaltHolds), 1, "{found:?}");
}

#[test]
fn a_completed_revision_halted_or_taken_back_is_caught_and_a_rollback_of_an_unfinished_one_is_not() {
    let rollback = json!({ "strategy": "Progressive", "onFailure": "Rollback" });
    let mut checker = Checker::new();
    seen(
        &mut checker,
        0,
        Kind::Application,
        application("gw", 10, rollback.clone(), "r2", "Progressing", 2),
    );
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "a", 11, 2, "r2", "h2", false));
    // r2 never completed: taking it back is the rollback docs/rollouts.md promises.
    let found = seen(
        &mut checker,
        2,
        Kind::HelmRelease,
        rolled_back(release("gw", "a", 12, 3, "r1", "h1", false), "r2"),
    );
    assert_eq!(of(&found, Invariant::CompletedStays), 0, "{found:?}");
    let found = seen(
        &mut checker,
        3,
        Kind::Application,
        application("gw", 13, rollback.clone(), "r2", "RolledBack", 2),
    );
    assert_eq!(of(&found, Invariant::CompletedStays), 0, "{found:?}");

    // r3 completes; a new pool's install fails later, and the fleet goes back.
    seen(
        &mut checker,
        4,
        Kind::Application,
        application("gw", 20, rollback.clone(), "r3", "Complete", 2),
    );
    seen(&mut checker, 5, Kind::HelmRelease, release("gw", "a", 21, 4, "r3", "h3", true));
    let found = seen(
        &mut checker,
        6,
        Kind::HelmRelease,
        rolled_back(release("gw", "a", 22, 5, "r1", "h1", false), "r3"),
    );
    assert_eq!(of(&found, Invariant::CompletedStays), 1, "{found:?}");
    assert!(
        found[0].message.contains("gw-a") && found[0].message.contains("r3"),
        "{}",
        found[0].message
    );
    let found = seen(
        &mut checker,
        7,
        Kind::Application,
        application("gw", 23, rollback.clone(), "r3", "RollingBack", 3),
    );
    assert_eq!(of(&found, Invariant::CompletedStays), 1, "{found:?}");
    // Reported once.
    let found = seen(
        &mut checker,
        8,
        Kind::Application,
        application("gw", 24, rollback, "r3", "RollingBack", 3),
    );
    assert_eq!(of(&found, Invariant::CompletedStays), 0, "{found:?}");
    assert_eq!(checker.summary().violations.get(&Invariant::CompletedStays), Some(&2));
}
