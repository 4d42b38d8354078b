//! Faults: Flux's helm-controller stops while the application changes. The
//! releases stay where they are, the status says they are progressing (not
//! failed) for as long as nobody acts on them, and everything turns ready
//! once helm-controller is back.
//!
//! Stopping helm-controller would stall every other test's releases, so this
//! test has a control plane of its own (`PrivateCluster`).
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::private_cluster::PrivateCluster;
use crate::support::apps::{apply_app, ingress_app, ready_is, releases_by_pool, wait_app, READY_TIMEOUT};
use crate::support::{ensure_crd, TestResult};

/// How long the test watches the status while helm-controller is away.
const WATCH_WHILE_DOWN: Duration = Duration::from_secs(20);

fn spec(log_level: &str) -> Value {
    json!({ "values": { "controller": {
        "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" },
        "config": { "region": "{{pool.labels.region}}", "log-level": log_level }
    }}})
}

fn uids(releases: &BTreeMap<String, Value>) -> BTreeMap<String, String> {
    releases
        .iter()
        .map(|(pool, hr)| (pool.clone(), hr["metadata"]["uid"].as_str().unwrap_or_default().to_string()))
        .collect()
}

/// Every pool of the status: none failed, and the application is neither
/// Stalled nor Ready.
fn progressing_not_failed(pools: usize) -> impl Fn(&Value) -> Result<(), String> {
    move |app| {
        let listed = app.pointer("/status/pools").and_then(Value::as_array).cloned().unwrap_or_default();
        if listed.len() != pools {
            return Err(format!("{} pools in the status, want {pools}", listed.len()));
        }
        if let Some(p) = listed.iter().find(|p| p["ready"] != "Unknown") {
            return Err(format!(
                "pool {} is ready={} ({}), want Unknown",
                p["pool"], p["ready"], p["reason"]
            ));
        }
        let conditions = app
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(c) = conditions.iter().find(|c| c["type"] == "Stalled" && c["status"] == "True") {
            return Err(format!("the application is Stalled: {c}"));
        }
        match conditions.iter().find(|c| c["type"] == "Ready") {
            Some(c) if c["status"] == "False" && c["reason"] == "Progressing" => Ok(()),
            other => Err(format!("Ready is {other:?}, want False/Progressing")),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn releases_stay_and_wait_as_progressing_while_helm_controller_is_down() -> TestResult {
    let cluster = PrivateCluster::up("flux-outage", 16520);
    let mut env = cluster.env("fluxdown").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    env.create_pool("b", &[("e2e", &tag), ("region", "west")], 1).await;
    let controller = cluster.controller(&env.namespace, &[]);
    apply_app(&env, &ingress_app(&env, spec("info"))).await?;
    wait_app(&env, &controller, "READY 2/2 before the outage", READY_TIMEOUT, ready_is("2/2")).await;
    let before = uids(&releases_by_pool(&env).await);

    cluster.stop("helm-controller");
    // Both need Helm: a values change for the existing pools, and then a
    // new pool joining a fleet whose update Helm has yet to take. The
    // fleet was installed, so the new pool's install goes at once: it
    // waited for ever behind the first install while the release cache
    // dropped the status of Helm's history.
    apply_app(&env, &ingress_app(&env, spec("debug"))).await?;
    let written = |app: &Value| {
        let pools = app.pointer("/status/pools").and_then(Value::as_array).cloned().unwrap_or_default();
        match pools.iter().filter(|p| p["upToDate"] == true).count() {
            2 => Ok(()),
            n => Err(format!("{n} of 2 pools written at the new revision")),
        }
    };
    wait_app(&env, &controller, "the update written to both pools", READY_TIMEOUT, written).await;
    env.create_pool("c", &[("e2e", &tag), ("region", "north")], 1).await;
    let check = progressing_not_failed(3);
    wait_app(&env, &controller, "every pool progressing", READY_TIMEOUT, &check).await;
    // And it stays so: nobody acts on the releases, which is no failure.
    let until = Instant::now() + WATCH_WHILE_DOWN;
    while Instant::now() < until {
        wait_app(&env, &controller, "every pool still progressing", Duration::from_secs(5), &check).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let during = releases_by_pool(&env).await;
    assert_eq!(during.len(), 3, "one release per pool while helm-controller is down");
    for (pool, uid) in &before {
        assert_eq!(uids(&during).get(pool), Some(uid), "the release of {pool} was replaced");
        assert_eq!(
            during[pool].pointer("/spec/values/controller/config/log-level"),
            Some(&json!("debug")),
            "the release of {pool} carries the new values"
        );
    }

    cluster.start("helm-controller");
    let app = wait_app(
        &env,
        &controller,
        "READY 3/3 once helm-controller is back",
        READY_TIMEOUT,
        ready_is("3/3"),
    )
    .await;
    assert_eq!(app["status"]["selectedPools"], 3);
    let after = uids(&releases_by_pool(&env).await);
    for (pool, uid) in &before {
        assert_eq!(after.get(pool), Some(uid), "the release of {pool} was replaced");
    }
    env.cleanup().await;
    drop(controller);
    drop(cluster);
    Ok(())
}
