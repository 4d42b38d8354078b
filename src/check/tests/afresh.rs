//! A revision that comes back is rolled out afresh, under a number of its
//! own: the status's rollout number never goes down.

use super::*;

/// Application `gw` of uid `uid` at resourceVersion `rv`, its status
/// reading `revision` as rollout `number`.
fn rollout_of(uid: &str, rv: u64, revision: &str, number: i64) -> Value {
    json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "gw", "namespace": "edge", "uid": uid, "resourceVersion": rv.to_string(),
            "generation": 2 },
        "spec": { "rollout": { "strategy": "Progressive" } },
        "status": { "observedGeneration": 2,
            "rollout": { "revision": revision, "number": number, "phase": "Progressing" } }
    })
}

#[test]
fn a_revision_undone_and_redone_is_a_new_rollout_and_never_its_earlier_ones() {
    let mut checker = Checker::new();
    let mut read = |rv: u64, revision: &str, number: i64| {
        let found = seen(&mut checker, rv as i64, Kind::Application, rollout_of("u", rv, revision, number));
        of(&found, Invariant::Afresh)
    };
    assert_eq!(read(1, "r1", 1), 0);
    assert_eq!(read(2, "r2", 2), 0);
    assert_eq!(read(3, "r2", 2), 0, "the same rollout, read again");
    assert_eq!(read(4, "r1", 3), 0, "undone: r1 comes back, renumbered");
    assert_eq!(read(5, "r2", 2), 1, "redone, r2 read by its first rollout's record");
    assert_eq!(read(6, "r2", 4), 0, "redone afresh");
}

#[test]
fn an_application_made_again_numbers_its_rollouts_afresh() {
    let mut checker = Checker::new();
    seen(&mut checker, 1, Kind::Application, rollout_of("u1", 1, "r1", 5));
    let found = seen(&mut checker, 2, Kind::Application, rollout_of("u2", 2, "r1", 1));
    assert_eq!(of(&found, Invariant::Afresh), 0, "{found:?}");
}
