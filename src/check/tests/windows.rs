//! Maintenance windows: a pool updated while its windows are closed, and
//! the windows the checker does not judge.
use super::*;

/// An application whose window for `b` never opens (February 29th comes
/// back in 2032 here), whose window for `c` is always open, and `a` with
/// no window; `generation` as given, its status of generation 2.
fn windowed(rv: u64, generation: i64, closed: &[&str]) -> Value {
    let rollout = json!({ "strategy": "Progressive", "maxUnavailable": 3, "windows": [
        { "schedule": "0 0 29 2 *", "duration": "1m", "pools": { "names": closed } },
        { "schedule": "* * * * *", "duration": "1m", "pools": { "names": ["c"] } }
    ] });
    let mut app = application("win", rv, rollout, "r2", "Progressing", 3);
    app["metadata"]["generation"] = json!(generation);
    app
}

#[test]
fn a_pool_updated_while_its_windows_are_closed_is_caught_and_one_open_or_without_window_is_not() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, windowed(10, 2, &["b", "c"]));
    for (i, pool) in ["a", "b", "c"].iter().enumerate() {
        seen(
            &mut checker,
            0,
            Kind::HelmRelease,
            release("win", pool, 11 + i as u64, 1, "r1", "h1", true),
        );
    }
    // b's only window is closed: judged once a later version of the
    // application is seen.
    let found = seen(&mut checker, 1, Kind::HelmRelease, release("win", "b", 20, 2, "r2", "h2", true));
    assert!(found.is_empty(), "{found:?}");
    let found = seen(&mut checker, 2, Kind::Application, windowed(21, 2, &["b", "c"]));
    assert_eq!(of(&found, Invariant::Windows), 1, "{found:?}");
    assert!(
        found[0].message.contains("win-b (pool b)") && found[0].message.contains("from revision r1 to r2")
    );
    // a has no window, and c has an open one besides its closed one.
    for (rv, pool) in [(22, "a"), (23, "c")] {
        let found = seen(&mut checker, 3, Kind::HelmRelease, release("win", pool, rv, 2, "r2", "h2", true));
        assert_eq!(of(&found, Invariant::Windows), 0, "{pool}: {found:?}");
    }
    // Judged at once when the application's next version came first.
    let found = seen(&mut checker, 4, Kind::Application, windowed(30, 2, &["b", "c"]));
    assert_eq!(of(&found, Invariant::Windows), 0, "{found:?}");
    // A rollback is no update to a revision: a failed pool goes back at once.
    let back = rolled_back(release("win", "b", 25, 3, "r1", "h1", false), "r2");
    let found = seen(&mut checker, 5, Kind::HelmRelease, back);
    assert_eq!(of(&found, Invariant::Windows), 0, "{found:?}");
    assert_eq!(checker.summary().violations.get(&Invariant::Windows), Some(&1));
}

#[test]
fn a_window_closed_by_an_edit_the_controller_has_not_read_or_chosen_by_selector_is_not_judged() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, windowed(10, 2, &["b"]));
    seen(&mut checker, 0, Kind::HelmRelease, release("win", "a", 11, 1, "r1", "h1", true));
    // a's window closed by generation 3, which the status (of generation
    // 2) has not read when a is written.
    seen(&mut checker, 1, Kind::Application, windowed(12, 3, &["a", "b"]));
    seen(&mut checker, 2, Kind::HelmRelease, release("win", "a", 13, 2, "r2", "h2", true));
    let found = seen(&mut checker, 3, Kind::Application, windowed(14, 3, &["a", "b"]));
    assert_eq!(of(&found, Invariant::Windows), 0, "{found:?}");
    // A window chosen by selector: which pools it holds is not known here.
    let mut by_selector = windowed(20, 2, &["a", "b"]);
    by_selector["spec"]["rollout"]["windows"][1]["pools"] =
        json!({ "selector": { "matchLabels": { "x": "y" } } });
    seen(&mut checker, 4, Kind::Application, by_selector.clone());
    seen(&mut checker, 5, Kind::HelmRelease, release("win", "a", 21, 3, "r3", "h3", true));
    by_selector["metadata"]["resourceVersion"] = json!("22");
    let found = seen(&mut checker, 6, Kind::Application, by_selector);
    assert_eq!(of(&found, Invariant::Windows), 0, "{found:?}");
    assert!(checker.summary().checks.get(&Invariant::Windows).copied().unwrap_or_default() > 0);
    assert_eq!(checker.summary().violations.get(&Invariant::Windows), None);
}

/// Soak seed 236826834: the checker's watch re-listed across a restart of
/// the API server and never saw the version of the application that
/// dropped its windows; the controller, which read it, moved the pool to
/// that spec's revision. The last version the checker knows before the
/// write rolls out another revision: what the write was decided on is not
/// known, and it is not judged. A write to that version's own revision is.
#[test]
fn a_write_to_a_revision_of_a_spec_the_watch_missed_is_not_judged_against_an_older_one() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, windowed(10, 2, &["a", "b"]));
    for (rv, pool) in [(11, "a"), (12, "b")] {
        seen(&mut checker, 0, Kind::HelmRelease, release("win", pool, rv, 1, "r1", "h1", true));
    }
    // r3 is the revision of generation 3, whose first versions were missed.
    seen(&mut checker, 1, Kind::HelmRelease, release("win", "a", 20, 2, "r3", "h3", true));
    let mut healed = application("win", 30, json!({ "strategy": "Progressive" }), "r3", "Progressing", 3);
    healed["metadata"]["generation"] = json!(3);
    healed["status"]["observedGeneration"] = json!(3);
    let found = seen(&mut checker, 2, Kind::Application, healed);
    assert_eq!(of(&found, Invariant::Windows), 0, "{found:?}");
    // b, moved to r2 while generation 2 (which rolls out r2) held it
    // closed, is still caught, at once: a newer version is in hand.
    let found = seen(&mut checker, 3, Kind::HelmRelease, release("win", "b", 21, 2, "r2", "h2", true));
    assert_eq!(of(&found, Invariant::Windows), 1, "{found:?}");
}
