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
    assert_eq!(of(&found, Invariant::HaltHolds), 1, "{found:?}");
    assert!(found[0].message.contains("after edge/gw read Halted"), "{}", found[0].message);
    // A new revision lifts it.
    seen(
        &mut checker,
        7,
        Kind::Application,
        application("gw", 19, progressive, "r3", "Progressing", 3),
    );
    let found = seen(&mut checker, 8, Kind::HelmRelease, release("gw", "c", 20, 3, "r3", "h3", false));
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
