//! A new chart version, on pools of one cluster: one pool alone first,
//! the others once its release is Ready on it.
use super::*;

/// All at once, as the controller decides over pools of one cluster, to
/// chart version 2.0.0.
fn new_chart_alone() -> Settings {
    Settings {
        new_chart_alone: Some("2.0.0".into()),
        ..Settings::default()
    }
}

/// `s`, of a release Helm last acted on at chart `version`.
fn on(version: &str, s: ReleaseStatus) -> ReleaseStatus {
    ReleaseStatus {
        chart_version: Some(version.into()),
        ..s
    }
}

fn waiters(d: &Decision) -> Vec<&str> {
    pools_where(d, |p| p.note.as_ref().is_some_and(|n| n.reason == pool_reason::NEW_CHART_FIRST))
}

#[test]
fn a_new_chart_version_goes_to_one_pool_alone_until_its_release_is_ready_on_it() {
    let fleet = Fleet::new()
        .behind("c", 0, on("1.0.0", ready()))
        .behind("a", 0, on("1.0.0", ready()))
        .behind("b", 0, on("1.0.0", ready()));
    let d = fleet.decide(&new_chart_alone(), 1);
    assert_eq!(written(&d), ["a"]);
    assert_eq!(waiters(&d), ["b", "c"]);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(d.waits_on_releases(1), Some(1), "a verdict on the first is worth a reconcile at once");
    // Without the rule (sites that are clusters), every pool at once.
    assert_eq!(written(&fleet.decide(&Settings::default(), 1)), ["a", "b", "c"]);

    // Written, not yet upgraded by Helm: the others wait for it.
    let upgrading = on("1.0.0", status(ReleaseState::Progressing, false, None));
    let under_way = Fleet::new()
        .current("b", 0, upgrading, 9_990)
        .behind("a", 0, on("1.0.0", ready()))
        .behind("c", 0, on("1.0.0", ready()));
    let d = under_way.decide(&new_chart_alone(), 1);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(waiters(&d), ["a", "c"]);
    let message = &d.pools["a"].note.as_ref().unwrap().message;
    assert!(message.contains("pool \"b\"") && message.contains("2.0.0"), "{message}");

    // Ready on it: the rest go together.
    let done = Fleet::new()
        .current("b", 0, on("2.0.0", ready()), 9_990)
        .behind("a", 0, on("1.0.0", ready()))
        .behind("c", 0, on("1.0.0", ready()));
    assert_eq!(written(&done.decide(&new_chart_alone(), 1)), ["a", "c"]);

    // Failed on it: Helm may have failed before it created anything, so
    // the next goes alone.
    let failed = Fleet::new()
        .current("b", 0, on("2.0.0", status(ReleaseState::Failed, true, None)), 9_990)
        .behind("a", 0, on("1.0.0", ready()))
        .behind("c", 0, on("1.0.0", ready()));
    let d = failed.decide(&new_chart_alone(), 1);
    assert_eq!((written(&d), waiters(&d)), (vec!["a"], vec!["c"]));
}

#[test]
fn a_version_a_pool_runs_already_or_a_change_of_values_alone_waits_for_nothing() {
    // An earlier revision brought 2.0.0 to pool a: its objects exist.
    let fleet = Fleet::new()
        .behind("a", 0, on("2.0.0", ready()))
        .behind("b", 0, on("1.0.0", ready()))
        .behind("c", 0, on("1.0.0", ready()));
    assert_eq!(written(&fleet.decide(&new_chart_alone(), 1)), ["a", "b", "c"]);
    // A suspended pool neither goes first nor waits.
    let fleet = Fleet::new()
        .behind("a", 0, on("1.0.0", ready()))
        .behind("b", 0, on("1.0.0", ready()))
        .suspended("a");
    let d = fleet.decide(&new_chart_alone(), 1);
    assert_eq!((written(&d), waiters(&d)), (vec!["a", "b"], Vec::<&str>::new()));
}

#[test]
fn a_version_helm_deployed_is_not_new_while_its_pools_take_other_values() {
    // The fleet runs 2.0.0; an update of values waits on Helm (its
    // controller down), so no release is Ready; a pool joins. Its install
    // waits for nothing: 2.0.0's objects exist (seen live, in the
    // helm-controller outage test: the new pool waited for the others).
    let deployed = ReleaseStatus {
        deployed_before: true,
        deployed_version: Some("2.0.0".into()),
        ..on("2.0.0", status(ReleaseState::Progressing, false, None))
    };
    let fleet = Fleet::new()
        .current("a", 0, deployed.clone(), 9_990)
        .current("b", 0, deployed.clone(), 9_990)
        .new_pool("c");
    let d = fleet.decide(&new_chart_alone(), 1);
    assert_eq!((written(&d), waiters(&d)), (vec!["c"], Vec::<&str>::new()));
    // Deployed at an older version only, the version is new all the same.
    let older = ReleaseStatus {
        deployed_version: Some("1.0.0".into()),
        ..deployed
    };
    let fleet = Fleet::new()
        .current("a", 0, older.clone(), 9_990)
        .current("b", 0, older, 9_990)
        .new_pool("c");
    let d = fleet.decide(&new_chart_alone(), 1);
    assert_eq!(waiters(&d), ["c"], "{:?}", d.pools);
}
