//! The first install goes alone, on pools of one cluster.

use super::*;

/// A release of `gw` for `pool`, just created (resourceVersion `rv`) and
/// written at `written` seconds: Helm installing it.
fn installing(pool: &str, rv: u64, written: i64) -> Value {
    let mut r = release("gw", pool, rv, 1, "r1", "h1", false);
    r["metadata"]["annotations"]["apps.fanout.dev/written-at"] = json!(at(written).to_string());
    r["status"]["conditions"] = json!([{ "type": "Ready", "status": "Unknown", "reason": "Progressing" }]);
    r
}

/// `release`, with Flux's Ready condition `status` and `reason` for its generation.
fn judged(mut release: Value, status: &str, reason: &str) -> Value {
    release["status"]["conditions"] = json!([{ "type": "Ready", "status": status, "reason": reason }]);
    release
}

fn checker_with_app() -> Checker {
    let mut checker = Checker::new();
    let rollout = json!({ "strategy": "AllAtOnce", "progressDeadline": "1m" });
    seen(&mut checker, 0, Kind::Application, application("gw", 10, rollout, "r1", "Progressing", 3));
    checker
}

#[test]
fn a_second_install_while_the_first_still_installs_breaks_it() {
    let mut checker = checker_with_app();
    assert_eq!(
        of(
            &seen(&mut checker, 1, Kind::HelmRelease, installing("a", 20, 1)),
            Invariant::FirstInstallAlone
        ),
        0
    );
    let found = seen(&mut checker, 5, Kind::HelmRelease, installing("b", 21, 5));
    assert_eq!(of(&found, Invariant::FirstInstallAlone), 1, "{found:?}");
    assert!(found[0].message.contains("edge/gw-a"), "{}", found[0].message);
}

#[test]
fn the_next_goes_once_the_first_failed_or_passed_its_deadline_and_all_once_one_is_ready() {
    let mut checker = checker_with_app();
    seen(&mut checker, 1, Kind::HelmRelease, installing("a", 20, 1));
    seen(
        &mut checker,
        9,
        Kind::HelmRelease,
        judged(installing("a", 21, 1), "False", "InstallFailed"),
    );
    // The next alone, behind a failure.
    let found = seen(&mut checker, 10, Kind::HelmRelease, installing("b", 22, 10));
    assert_eq!(of(&found, Invariant::FirstInstallAlone), 0, "{found:?}");
    // Past b's progressDeadline (1m), c goes.
    let found = seen(&mut checker, 71, Kind::HelmRelease, installing("c", 23, 71));
    assert_eq!(of(&found, Invariant::FirstInstallAlone), 0, "{found:?}");
    // c Ready: the rest together.
    seen(
        &mut checker,
        80,
        Kind::HelmRelease,
        judged(installing("c", 24, 71), "True", "InstallSucceeded"),
    );
    for (pool, rv) in [("d", 25), ("e", 26)] {
        let found = seen(&mut checker, 81, Kind::HelmRelease, installing(pool, rv, 81));
        assert_eq!(of(&found, Invariant::FirstInstallAlone), 0, "{found:?}");
    }
    assert!(checker.summary().checks[&Invariant::FirstInstallAlone] >= 6);
}

#[test]
fn a_release_helm_deployed_a_suspended_one_or_a_site_clusters_holds_no_one_back() {
    // Deployed before (a fleet whose update Helm has yet to take).
    let mut checker = checker_with_app();
    let mut deployed = installing("a", 20, 1);
    deployed["status"]["history"] = json!([{ "chartVersion": "1.0.0", "version": 1, "status": "deployed" }]);
    seen(&mut checker, 1, Kind::HelmRelease, deployed);
    let found = seen(&mut checker, 2, Kind::HelmRelease, installing("b", 21, 2));
    assert_eq!(of(&found, Invariant::FirstInstallAlone), 0, "{found:?}");

    // Written suspended: it installs nothing.
    let mut checker = checker_with_app();
    let mut held = installing("a", 20, 1);
    held["spec"]["suspend"] = json!(true);
    seen(&mut checker, 1, Kind::HelmRelease, held);
    let found = seen(&mut checker, 2, Kind::HelmRelease, installing("b", 21, 2));
    assert_eq!(of(&found, Invariant::FirstInstallAlone), 0, "{found:?}");

    // Sites that are clusters share no object.
    let mut checker = checker_with_app();
    let site = |pool, rv| {
        let mut r = installing(pool, rv, 1);
        r["spec"]["kubeConfig"] = json!({ "secretRef": { "name": pool } });
        r
    };
    seen(&mut checker, 1, Kind::HelmRelease, site("a", 20));
    let found = seen(&mut checker, 2, Kind::HelmRelease, site("b", 21));
    assert_eq!(of(&found, Invariant::FirstInstallAlone), 0, "{found:?}");
}

/// A re-list judges in resourceVersion order: a release created in the
/// gap, listed before a first release listed at a later version, cannot
/// be judged by how that one stood before the gap (it changed in the gap:
/// Ready, maybe). One listed as it stood is still evidence.
#[test]
fn a_release_created_in_a_relist_gap_is_judged_only_by_those_known_then() {
    let listed = |records: Vec<Value>| {
        records
            .into_iter()
            .map(|object| Record {
                seen: at(30),
                kind: Kind::HelmRelease,
                object,
                deleted: false,
            })
            .collect::<Vec<_>>()
    };
    for (a_listed_at, caught) in [(40, 0), (20, 1)] {
        let mut checker = checker_with_app();
        seen(&mut checker, 1, Kind::HelmRelease, installing("a", 20, 1));
        let a = installing("a", a_listed_at, 1);
        let found = checker.relisted(Kind::HelmRelease, listed(vec![a, installing("b", 30, 25)]), at(30));
        assert_eq!(of(&found, Invariant::FirstInstallAlone), caught, "a listed at {a_listed_at}: {found:?}");
    }
    // Gone in the gap (its pool left, and it was uninstalled): the re-list
    // reads its deletion last, yet it installed nothing beside b.
    let mut checker = checker_with_app();
    seen(&mut checker, 1, Kind::HelmRelease, installing("a", 20, 1));
    let found = checker.relisted(Kind::HelmRelease, listed(vec![installing("b", 30, 25)]), at(30));
    assert_eq!(of(&found, Invariant::FirstInstallAlone), 0, "{found:?}");
}
