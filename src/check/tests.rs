//! The checker judged on histories written by hand: each invariant broken
//! once and kept once.

use serde_json::{json, Value};

use super::*;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_900_000_000 + secs).unwrap()
}

/// A release of application `app` for pool `pool`, as the API server
/// serves it: resourceVersion `rv`, generation `generation`, written at
/// `revision` with spec hash `hash`, Ready for its generation or not.
fn release(
    app: &str,
    pool: &str,
    rv: u64,
    generation: i64,
    revision: &str,
    hash: &str,
    ready: bool,
) -> Value {
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {
            "name": format!("{app}-{pool}"), "namespace": "edge", "resourceVersion": rv.to_string(),
            "generation": generation,
            "labels": { "apps.fanout.dev/application": app, "apps.fanout.dev/pool": pool },
            "annotations": { "apps.fanout.dev/revision": revision, "apps.fanout.dev/spec-hash": hash },
            "ownerReferences": [{ "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
                "name": app, "uid": "u", "controller": true }],
            "managedFields": [{ "manager": "nodepool-fanout", "operation": "Apply" }]
        },
        "spec": { "releaseName": format!("{app}-{pool}"), "targetNamespace": pool },
        "status": { "observedGeneration": generation, "conditions": [{ "type": "Ready",
            "status": if ready { "True" } else { "False" } }] }
    })
}

fn application(name: &str, rv: u64, rollout: Value, revision: &str, phase: &str, selected: u64) -> Value {
    json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": name, "namespace": "edge", "resourceVersion": rv.to_string(), "generation": 2 },
        "spec": { "rollout": rollout },
        "status": { "observedGeneration": 2, "selectedPools": selected,
            "rollout": { "revision": revision, "phase": phase } }
    })
}

fn seen(checker: &mut Checker, secs: i64, kind: Kind, object: Value) -> Vec<Violation> {
    checker.observe(Record {
        seen: at(secs),
        kind,
        object,
        deleted: false,
    })
}

fn of(violations: &[Violation], invariant: Invariant) -> usize {
    violations.iter().filter(|v| v.invariant == invariant).count()
}

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

    // Halted, then Complete after all (the pool that failed was done in
    // the end, one offline was skipped): a pool that comes back catches up.
    let mut completed = Checker::new();
    seen(
        &mut completed,
        0,
        Kind::Application,
        application("gw", 10, progressive.clone(), "r2", "Halted", 2),
    );
    seen(&mut completed, 1, Kind::HelmRelease, release("gw", "c", 5, 1, "r1", "h1", true));
    seen(
        &mut completed,
        2,
        Kind::Application,
        application("gw", 11, progressive.clone(), "r2", "Complete", 2),
    );
    seen(&mut completed, 3, Kind::HelmRelease, release("gw", "c", 12, 2, "r2", "h2", false));
    let found = seen(
        &mut completed,
        4,
        Kind::Application,
        application("gw", 13, progressive, "r2", "Complete", 2),
    );
    assert_eq!(of(&found, Invariant::HaltHolds), 0, "{found:?}");
}

#[test]
fn two_releases_driving_one_helm_release_or_holding_one_object_are_caught() {
    let mut checker = Checker::new();
    let mut a = release("gw", "a", 10, 1, "r1", "h1", true);
    a["status"]["inventory"] =
        json!({ "entries": [{ "id": "_nginx_networking.k8s.io_IngressClass", "v": "v1" }] });
    assert!(seen(&mut checker, 0, Kind::HelmRelease, a).is_empty());
    let mut b = release("gw", "b", 11, 1, "r1", "h1", true);
    b["status"]["inventory"] =
        json!({ "entries": [{ "id": "_nginx_networking.k8s.io_IngressClass", "v": "v1" }] });
    let found = seen(&mut checker, 1, Kind::HelmRelease, b);
    assert_eq!(of(&found, Invariant::Isolation), 1, "{found:?}");
    assert!(found[0].message.contains("_nginx_networking.k8s.io_IngressClass"), "{}", found[0].message);
    // The same Helm release name, one cluster.
    let mut c = release("gw", "c", 12, 1, "r1", "h1", true);
    c["spec"] = json!({ "releaseName": "gw-a", "targetNamespace": "a" });
    let found = seen(&mut checker, 2, Kind::HelmRelease, c.clone());
    assert_eq!(of(&found, Invariant::Isolation), 1, "{found:?}");
    assert!(found[0].message.contains("both drive the Helm release edge/gw-a"), "{}", found[0].message);
    // Suspended (inert), it drives nothing; in a site cluster, it is another Helm release.
    c["spec"]["suspend"] = json!(true);
    assert_eq!(of(&seen(&mut checker, 3, Kind::HelmRelease, c.clone()), Invariant::Isolation), 0);
    c["spec"]["suspend"] = json!(false);
    c["spec"]["kubeConfig"] = json!({ "secretRef": { "name": "site-1-kubeconfig" } });
    assert_eq!(of(&seen(&mut checker, 4, Kind::HelmRelease, c), Invariant::Isolation), 0);
}

#[test]
fn our_field_manager_on_a_release_we_do_not_own_is_caught() {
    let mut checker = Checker::new();
    let mut foreign = release("gw", "a", 10, 1, "r1", "h1", true);
    foreign["metadata"]["ownerReferences"] = json!([]);
    foreign["metadata"]["managedFields"] = json!([{ "manager": "kubectl", "operation": "Apply" }]);
    assert!(seen(&mut checker, 0, Kind::HelmRelease, foreign.clone()).is_empty());
    foreign["metadata"]["managedFields"] =
        json!([{ "manager": "kubectl" }, { "manager": "nodepool-fanout-inert" }]);
    let found = seen(&mut checker, 1, Kind::HelmRelease, foreign.clone());
    assert_eq!(of(&found, Invariant::Ownership), 1, "{found:?}");
    assert!(found[0].message.contains("nodepool-fanout-inert"), "{}", found[0].message);
    // Reported once, however many records show it again.
    assert!(seen(&mut checker, 1, Kind::HelmRelease, foreign.clone()).is_empty());
    // Orphaned by its application (deletionPolicy: Orphan): ours before, said so.
    foreign["metadata"]["annotations"]["apps.fanout.dev/orphaned-from"] = json!("edge/gw");
    assert_eq!(of(&seen(&mut checker, 2, Kind::HelmRelease, foreign), Invariant::Ownership), 0);
    let summary = checker.summary().to_string();
    assert!(summary.contains("ownership") && summary.contains("4 records read"), "{summary}");
    assert_eq!(checker.summary().violations.get(&Invariant::Ownership), Some(&1));
}

/// `release(…)` written rolled back from revision `from`.
fn rolled_back(mut release: Value, from: &str) -> Value {
    release["metadata"]["annotations"]["apps.fanout.dev/rolled-back-from"] = json!(from);
    release
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

#[test]
fn a_status_past_its_bounds_is_caught_and_one_within_them_is_not() {
    let pool = |i: usize, message: &str| json!({ "pool": format!("p{i}"), "message": message });
    let with_pools = |pools: Vec<Value>| {
        let mut app = application("gw", 10, json!({}), "r1", "Complete", pools.len() as u64);
        app["status"]["pools"] = json!(pools);
        app
    };
    let mut checker = Checker::new();
    let within = with_pools((0..40).map(|i| pool(i, &"m".repeat(1024))).collect());
    let found = seen(&mut checker, 0, Kind::Application, within);
    assert_eq!(of(&found, Invariant::Bounded), 0, "{found:?}");
    let too_many = with_pools((0..41).map(|i| pool(i, "ok")).collect());
    let found = seen(&mut checker, 1, Kind::Application, too_many);
    assert_eq!(of(&found, Invariant::Bounded), 1, "{found:?}");
    let too_long = with_pools(vec![pool(0, &"m".repeat(1025))]);
    let found = seen(&mut checker, 2, Kind::Application, too_long);
    assert_eq!(of(&found, Invariant::Bounded), 1, "{found:?}");
    let mut too_big = with_pools(vec![pool(0, "ok")]);
    too_big["status"]["history"] = json!("x".repeat(70 * 1024));
    let found = seen(&mut checker, 3, Kind::Application, too_big);
    assert_eq!(of(&found, Invariant::Bounded), 1, "{found:?}");
    assert!(found[0].message.contains("over 65536"), "{}", found[0].message);
}

#[test]
fn a_relist_after_the_watch_was_away_reads_what_went_meanwhile_as_deleted() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "a", 11, 1, "r1", "h1", true));
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "b", 12, 1, "r1", "h1", true));
    seen(&mut checker, 0, Kind::Application, application("gw", 13, json!({}), "r1", "Complete", 2));
    let a = release("gw", "a", 11, 1, "r1", "h1", true);
    let listed: BTreeSet<Key> = [Record::key_of(Kind::HelmRelease, &a)].into();
    let gone = checker.gone_since_relist(Kind::HelmRelease, &listed, at(1));
    let names: Vec<String> = gone.iter().map(|r| r.key().to_string()).collect();
    assert_eq!(names, ["HelmRelease edge/gw-b"]);
    assert!(gone.iter().all(|r| r.deleted));
}

#[test]
fn an_application_settles_once_complete_ready_and_every_release_at_its_revision() {
    let mut app = application("gw", 10, json!({}), "r2", "Complete", 2);
    app["status"]["readyPools"] = json!(2);
    app["status"]["conditions"] =
        json!([{ "type": "Ready", "status": "True", "message": "2/2 pools ready" }]);
    let a = release("gw", "a", 11, 2, "r2", "h2", true);
    let b = release("gw", "b", 12, 2, "r2", "h2", true);
    assert_eq!(liveness::unsettled(&app, &[a.clone(), b.clone()]), None);
    let behind = release("gw", "b", 12, 1, "r1", "h1", true);
    let why = liveness::unsettled(&app, &[a.clone(), behind]).unwrap();
    assert!(why.contains("gw-b is at revision r1"), "{why}");
    let mut terminating = b.clone();
    terminating["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
    let why = liveness::unsettled(&app, &[a.clone(), terminating]).unwrap();
    assert!(why.contains("being deleted"), "{why}");
    let mut halted = app.clone();
    halted["status"]["rollout"]["phase"] = json!("Halted");
    assert!(liveness::unsettled(&halted, &[a.clone(), b.clone()]).unwrap().contains("Halted"));
    let mut one_ready = app.clone();
    one_ready["status"]["readyPools"] = json!(1);
    assert_eq!(liveness::unsettled(&one_ready, &[a, b]).as_deref(), Some("1 of 2 pools ready"));
    let v = liveness::violation(&app, "it is not Ready", std::time::Duration::from_secs(180));
    assert_eq!(v.invariant, Invariant::Liveness);
    assert!(v.message.contains("edge/gw has not settled 180s"), "{}", v.message);
}

/// An application whose second step, `rest` (pool b), needs approval;
/// pool c is of no step, the last wave.
fn gated(rv: u64, approval: Option<&str>) -> Value {
    let steps = json!({ "strategy": "Progressive", "steps": [
        { "name": "canary", "pools": { "names": ["a"] } },
        { "name": "rest", "pools": { "names": ["b"] }, "requireApproval": true }
    ] });
    let mut app = application("gw", rv, steps, "r2", "Progressing", 3);
    if let Some(approval) = approval {
        app["metadata"]["annotations"] = json!({ "apps.fanout.dev/approve": approval });
    }
    app
}

#[test]
fn a_wave_updated_without_its_approval_or_with_another_revisions_is_caught() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, gated(10, None));
    for (i, pool) in ["a", "b", "c"].iter().enumerate() {
        seen(
            &mut checker,
            0,
            Kind::HelmRelease,
            release("gw", pool, 11 + i as u64, 1, "r1", "h1", true),
        );
    }
    // The canary needs no approval.
    let found = seen(&mut checker, 1, Kind::HelmRelease, release("gw", "a", 20, 2, "r2", "h2", true));
    assert_eq!(of(&found, Invariant::Approvals), 0, "{found:?}");
    // rest goes with an approval of the revision before: it lets nothing go.
    seen(&mut checker, 2, Kind::Application, gated(21, Some("r1/rest")));
    let found = seen(&mut checker, 3, Kind::HelmRelease, release("gw", "b", 22, 2, "r2", "h2", false));
    assert!(found.is_empty(), "judged once a later version of the application is seen: {found:?}");
    let found = seen(&mut checker, 4, Kind::Application, gated(23, Some("r1/rest")));
    assert_eq!(of(&found, Invariant::Approvals), 1, "{found:?}");
    let message = &found[0].message;
    assert!(message.contains("gw-b (pool b)") && message.contains("r2/rest"), "{message}");
    // Approved (by position), the last wave goes.
    seen(&mut checker, 5, Kind::Application, gated(30, Some("r2/2")));
    let found = seen(&mut checker, 6, Kind::HelmRelease, release("gw", "c", 31, 2, "r2", "h2", false));
    assert_eq!(of(&found, Invariant::Approvals), 0, "{found:?}");
    seen(&mut checker, 7, Kind::Application, gated(32, Some("r2/2")));
    assert_eq!(checker.summary().violations.get(&Invariant::Approvals), Some(&1));
}

#[test]
fn an_approval_its_watch_delivers_after_the_write_it_let_go_is_no_violation() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, gated(10, None));
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "b", 11, 1, "r1", "h1", true));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "b", 25, 2, "r2", "h2", false));
    // The approval was written (rv 24) before the release (rv 25).
    let found = seen(&mut checker, 2, Kind::Application, gated(24, Some("r2/rest")));
    assert!(found.is_empty(), "{found:?}");
    let found = seen(&mut checker, 3, Kind::Application, gated(26, Some("r2/rest")));
    assert!(found.is_empty(), "{found:?}");
    // Pools not Ready before their write (unavailable already) go at once.
    seen(&mut checker, 4, Kind::HelmRelease, release("gw", "c", 27, 1, "r1", "h1", false));
    let found = seen(&mut checker, 5, Kind::HelmRelease, release("gw", "c", 28, 2, "r3", "h3", false));
    seen(&mut checker, 6, Kind::Application, gated(29, None));
    assert_eq!(of(&found, Invariant::Approvals), 0);
    assert_eq!(checker.summary().violations.get(&Invariant::Approvals), None);
}

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

#[test]
fn a_gated_step_whose_pools_are_gone_still_holds_the_waves_after_it() {
    // Step rest lists pool b, which has no release (deleted): c, of the
    // last wave, still needs rest's approval.
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::Application, gated(10, None));
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "c", 11, 1, "r1", "h1", true));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "c", 12, 2, "r2", "h2", true));
    let found = seen(&mut checker, 2, Kind::Application, gated(13, None));
    assert_eq!(of(&found, Invariant::Approvals), 1, "{found:?}");
    assert!(found[0].message.contains("gw-c (pool c)") && found[0].message.contains("step(s) rest"));
}
