//! The checker judged on histories written by hand: each invariant broken
//! once and kept once.

mod afresh;
mod answered;
mod approval;
mod failures;
mod first_install;
mod offline;
mod ownership;
mod paused;
mod rollback;
mod rollout;
mod status;
mod unavailable;
mod windows;

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

/// `release(…)` written rolled back from revision `from`.
fn rolled_back(mut release: Value, from: &str) -> Value {
    release["metadata"]["annotations"]["apps.fanout.dev/rolled-back-from"] = json!(from);
    release
}
