//! A pause starts no pool, judged by what the controller observed.

use super::*;

/// Application `gw` at resourceVersion `rv`, generation `generation`, its
/// status observing `observed`, paused or not.
fn app(rv: u64, generation: i64, observed: i64, paused: bool) -> Value {
    json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "gw", "namespace": "edge", "resourceVersion": rv.to_string(),
            "generation": generation },
        "spec": { "rollout": { "strategy": "Progressive", "paused": paused } },
        "status": { "observedGeneration": observed, "rollout": { "revision": "r2", "phase": "Paused" } }
    })
}

fn started(checker: &mut Checker, rv: u64) -> Vec<Violation> {
    seen(checker, 1, Kind::HelmRelease, release("gw", "a", rv - 1, 1, "r1", "h1", true));
    seen(checker, 2, Kind::HelmRelease, release("gw", "a", rv, 2, "r2", "h2", false))
}

#[test]
fn a_pool_started_once_the_controller_observed_the_pause_breaks_it() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, app(10, 1, 1, false));
    seen(&mut checker, 0, Kind::Application, app(11, 2, 1, true));
    seen(&mut checker, 0, Kind::Application, app(12, 2, 2, true));
    // Written after the controller reported the paused generation: judged
    // once a newer version of the application is seen.
    assert_eq!(of(&started(&mut checker, 21), Invariant::Paused), 0);
    let found = seen(&mut checker, 3, Kind::Application, app(30, 3, 2, false));
    assert_eq!(of(&found, Invariant::Paused), 1, "{found:?}");
    assert!(found[0].message.contains("paused"), "{}", found[0].message);
}

#[test]
fn a_write_the_pause_edit_raced_or_an_unpause_let_go_is_no_start_while_paused() {
    // The pause is edited in, but the controller has not observed it: a
    // reconcile that read the spec before it may still write.
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, app(10, 1, 1, false));
    seen(&mut checker, 0, Kind::Application, app(11, 2, 1, true));
    started(&mut checker, 21);
    let found = seen(&mut checker, 3, Kind::Application, app(30, 2, 2, true));
    assert_eq!(of(&found, Invariant::Paused), 0, "{found:?}");

    // Unpaused before the write, whose record came first.
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, app(10, 2, 2, true));
    seen(&mut checker, 0, Kind::Application, app(11, 3, 2, false));
    started(&mut checker, 21);
    let found = seen(&mut checker, 3, Kind::Application, app(30, 3, 3, false));
    assert_eq!(of(&found, Invariant::Paused), 0, "{found:?}");
}

#[test]
fn a_paused_application_still_installs_new_pools_finishes_updates_and_rolls_back() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, app(10, 2, 2, true));
    // A new pool: no release before.
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "new", 20, 1, "r2", "h2", false));
    // One under way at r2, written again.
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "b", 21, 1, "r2", "h2", false));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "b", 22, 2, "r2", "h2", true));
    // One taken back from r2.
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "c", 23, 1, "r2", "h2", false));
    let back = rolled_back(release("gw", "c", 24, 2, "r1", "h1", false), "r2");
    seen(&mut checker, 1, Kind::HelmRelease, back);
    let found = seen(&mut checker, 3, Kind::Application, app(30, 2, 2, true));
    assert_eq!(of(&found, Invariant::Paused), 0, "{found:?}");
    assert!(checker.summary().checks.get(&Invariant::Paused).copied().unwrap_or_default() >= 5);
}

#[test]
fn a_pause_lifted_and_set_again_is_in_force_once_the_controller_observed_it_again() {
    // Paused at 2 and observed; unpaused at 3; paused again at 4 before
    // the controller reported 3: a reconcile that read 3 may write.
    let mut checker = Checker::new();
    for (rv, generation, observed, paused) in [(10, 2, 2, true), (11, 3, 2, false), (12, 4, 2, true)] {
        seen(&mut checker, 0, Kind::Application, app(rv, generation, observed, paused));
    }
    started(&mut checker, 21);
    let found = seen(&mut checker, 3, Kind::Application, app(30, 4, 3, true));
    assert_eq!(of(&found, Invariant::Paused), 0, "{found:?}");

    // Once the controller observed 4, the same write breaks it.
    seen(&mut checker, 3, Kind::Application, app(31, 4, 4, true));
    assert_eq!(pool_b_started_then_unpaused(&mut checker, 41), 1);
}

/// Pool `b` moved to r2 at `rv`, then the application unpaused at
/// generation 5: the pause violations that shows.
fn pool_b_started_then_unpaused(checker: &mut Checker, rv: u64) -> usize {
    seen(checker, 4, Kind::HelmRelease, release("gw", "b", rv - 1, 1, "r1", "h1", true));
    seen(checker, 4, Kind::HelmRelease, release("gw", "b", rv, 2, "r2", "h2", false));
    let found = seen(checker, 5, Kind::Application, app(rv + 9, 5, 4, false));
    of(&found, Invariant::Paused)
}

#[test]
fn a_write_inside_a_relists_gap_is_judged_by_nothing_one_after_it_is() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, app(10, 2, 2, true));
    // Away: unpaused, written, paused again and observed; the re-list
    // shows the last version of the application, the release's watch
    // delivers its writes after.
    let relisted = Record {
        seen: at(4),
        kind: Kind::Application,
        object: app(40, 4, 4, true),
        deleted: false,
    };
    let mut found = checker.relisted(Kind::Application, vec![relisted], at(4));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "a", 19, 1, "r1", "h1", true));
    found.extend(seen(&mut checker, 2, Kind::HelmRelease, release("gw", "a", 21, 2, "r2", "h2", false)));
    assert_eq!(of(&found, Invariant::Paused), 0, "{found:?}");

    // A write after the re-listed version is judged.
    assert_eq!(pool_b_started_then_unpaused(&mut checker, 51), 1);
}

#[test]
fn a_release_deleted_and_made_again_unseen_is_an_install_while_paused() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, app(10, 2, 2, true));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "a", 20, 1, "r1", "h1", true));
    let mut again = release("gw", "a", 21, 1, "r2", "h2", false);
    again["metadata"]["uid"] = json!("another");
    seen(&mut checker, 2, Kind::HelmRelease, again);
    let found = seen(&mut checker, 3, Kind::Application, app(30, 3, 2, false));
    assert_eq!(of(&found, Invariant::Paused), 0, "{found:?}");
}
