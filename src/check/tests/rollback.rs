//! A rollback takes back only what took the revision, to where it was.

use super::*;

/// A release of pool `pool` at revision `revision` (resourceVersion `rv`),
/// done with `last_done` before it when that is given.
fn at_revision(pool: &str, rv: u64, revision: &str, last_done: Option<&str>) -> Value {
    let mut r = release("gw", pool, rv, 2, revision, &format!("h-{revision}"), true);
    if let Some(done) = last_done {
        r["metadata"]["annotations"]["apps.fanout.dev/rollback-revision"] = json!(done);
    }
    r
}

#[test]
fn a_rollback_of_a_pool_that_took_the_revision_to_its_last_done_one_breaks_nothing() {
    let mut checker = Checker::new();
    assert!(seen(&mut checker, 0, Kind::HelmRelease, at_revision("a", 10, "bad", Some("good"))).is_empty());
    let back = rolled_back(at_revision("a", 11, "good", None), "bad");
    assert!(seen(&mut checker, 1, Kind::HelmRelease, back.clone()).is_empty());
    // Written again as it is (its drift undone, say): no new rollback.
    let mut again = back;
    again["metadata"]["resourceVersion"] = json!("12");
    assert!(seen(&mut checker, 2, Kind::HelmRelease, again).is_empty());
    assert!(checker.summary().checks[&Invariant::RollbackTakesBack] >= 3);
}

#[test]
fn a_rollback_of_a_pool_that_never_took_the_revision_or_to_elsewhere_is_a_violation() {
    // b never took `bad`: it was on `good` when it was written rolled back.
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::HelmRelease, at_revision("b", 10, "good", Some("older")));
    let found =
        seen(&mut checker, 1, Kind::HelmRelease, rolled_back(at_revision("b", 11, "good", None), "bad"));
    assert_eq!(of(&found, Invariant::RollbackTakesBack), 1, "{found:?}");
    assert!(found[0].message.contains("did not take it"), "{}", found[0].message);

    // c took `bad` after `good`, and went back to `older`.
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::HelmRelease, at_revision("c", 10, "bad", Some("good")));
    let found = seen(
        &mut checker,
        1,
        Kind::HelmRelease,
        rolled_back(at_revision("c", 11, "older", None), "bad"),
    );
    assert_eq!(of(&found, Invariant::RollbackTakesBack), 1, "{found:?}");
    assert!(found[0].message.contains("not to good"), "{}", found[0].message);

    // d was installed by `bad`: nothing to go back to.
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::HelmRelease, at_revision("d", 10, "bad", None));
    let found =
        seen(&mut checker, 1, Kind::HelmRelease, rolled_back(at_revision("d", 11, "good", None), "bad"));
    assert_eq!(of(&found, Invariant::RollbackTakesBack), 1, "{found:?}");
    assert!(found[0].message.contains("nothing to go back to"), "{}", found[0].message);
}

#[test]
fn a_rollback_inside_a_relists_gap_is_judged_by_nothing() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::HelmRelease, at_revision("e", 10, "good", Some("older")));
    // The watch was away while `bad` was written and taken back.
    let back = Record {
        seen: at(5),
        kind: Kind::HelmRelease,
        object: rolled_back(at_revision("e", 20, "good", None), "bad"),
        deleted: false,
    };
    let found = checker.relisted(Kind::HelmRelease, vec![back], at(5));
    assert_eq!(of(&found, Invariant::RollbackTakesBack), 0, "{found:?}");
}
