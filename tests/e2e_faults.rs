//! Faults on the shared control plane: the controller killed in the middle
//! of a fan-out loses nothing and duplicates nothing once it is back; a pool
//! deleted while its release installs, and an application deleted while
//! pools are added, leave exactly what should remain. (Outages of the API
//! server and of Flux have control planes of their own: e2e_*_outage.rs.)
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::Api;
use nodepool_fanout::api::NodePoolApplication;
use nodepool_fanout::chart::shared as shared_chart;
use serde_json::{json, Value};
use support::apps::{
    apply_app, ingress_app, ready_is, releases_by_pool, wait_app, wait_pools_with_releases, CHANGE_TIMEOUT,
    READY_TIMEOUT,
};
use support::{
    ensure_crd, helmchart_resource, helmrelease_resource, nodepool_resource, RunningController, TestEnv,
    TestResult,
};

const POOLS: usize = 100;

#[tokio::test(flavor = "multi_thread")]
async fn a_controller_killed_mid_fan_out_converges_to_exactly_one_release_per_pool() -> TestResult {
    let mut env = TestEnv::new("sigkill").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    for i in 0..POOLS {
        env.create_pool(&format!("p{i}"), &[("e2e", &tag), ("region", "east")], 0).await;
    }
    // Suspended releases: this test is about what the controller writes,
    // not about Helm installing a hundred charts.
    let app = ingress_app(&env, json!({ "helmRelease": { "suspend": true } }));
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let count = || async {
        releases
            .list_metadata(&ListParams::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or(0)
    };

    let mut first = RunningController::start_env(&env.namespace, &[], &[("POD_NAME", "first")]);
    apply_app(&env, &app).await?;
    // SIGKILL as soon as the first releases appear, while it is writing.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = 0;
    while seen == 0 && Instant::now() < deadline {
        seen = count().await;
        if seen == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    first.kill();
    let at_kill = count().await;
    assert!(at_kill > 0, "the first controller wrote nothing in 60 s:\n{}", first.log_tail());
    println!("killed the controller with {at_kill} of {POOLS} releases written");

    let second = RunningController::start_env(&env.namespace, &[], &[("POD_NAME", "second")]);
    support::wait_for(&format!("{POOLS} releases after the restart"), Duration::from_secs(120), || async {
        match count().await {
            POOLS => Ok(()),
            n => Err(format!("{n} releases")),
        }
    })
    .await;
    // The status describes every pool's release again, none held back.
    // The status lists 40 pools at most and counts them all: none may be
    // waiting for the chart (held) or for our write (progressing).
    let status = wait_app(&env, &second, "every pool's release in the status", READY_TIMEOUT, |app| {
        let listed = app.pointer("/status/pools").and_then(Value::as_array).map_or(0, Vec::len);
        let omitted = app.pointer("/status/omittedPools").and_then(Value::as_u64).unwrap_or(0) as usize;
        let counts = app.pointer("/status/poolCounts").cloned().unwrap_or_default();
        let held = ["waiting", "progressing"].iter().filter_map(|k| counts[k].as_u64()).sum::<u64>();
        match (listed + omitted, held) {
            (POOLS, 0) => Ok(()),
            (n, held) => Err(format!("{n} pools in the status, {held} still held or progressing: {counts}")),
        }
    })
    .await;
    assert_eq!(status["status"]["selectedPools"], POOLS);

    let list = releases.list(&ListParams::default()).await?;
    let mut per_pool: BTreeMap<String, usize> = BTreeMap::new();
    for hr in &list.items {
        let pool = hr
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("apps.fanout.dev/pool-name"))
            .cloned()
            .unwrap_or_default();
        *per_pool.entry(pool).or_default() += 1;
    }
    assert_eq!(list.items.len(), POOLS, "exactly one release per pool");
    assert_eq!(per_pool.len(), POOLS, "every pool has a release: {per_pool:?}");
    assert!(per_pool.values().all(|n| *n == 1), "a pool has two releases: {per_pool:?}");
    env.cleanup().await;
    Ok(())
}

/// The Ready condition of a HelmRelease, as helm-controller last wrote it.
fn release_ready(hr: &Value) -> Option<&str> {
    hr.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?
        .get("status")?
        .as_str()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_deleted_while_its_release_installs_is_uninstalled_and_leaves_the_others_alone() -> TestResult
{
    let mut env = TestEnv::new("poolgone").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let a = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    wait_app(&env, &controller, "READY 1/1", READY_TIMEOUT, ready_is("1/1")).await;

    // A new pool, deleted as soon as helm-controller has begun installing
    // its release: the release has a Ready condition that is not True yet.
    let b = env.create_pool("b", &[("e2e", &tag), ("region", "west")], 1).await;
    let installing = support::wait_for("the new pool's release installing", CHANGE_TIMEOUT, || async {
        let releases = releases_by_pool(&env).await;
        match releases.get(&b).map(release_ready) {
            Some(Some("True")) => Ok(false),
            Some(Some(_)) => Ok(true),
            Some(None) => Err("the release has no Ready condition yet".to_string()),
            None => Err("no release yet".to_string()),
        }
    })
    .await;
    let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    pools.delete(&b, &DeleteParams::default()).await?;
    println!(
        "deleted the pool while its release was {}",
        if installing { "installing" } else { "already ready" }
    );

    // Its release goes, and Helm uninstalls what it had installed.
    wait_pools_with_releases(&env, &controller, &[&a]).await;
    let app = wait_app(&env, &controller, "READY 1/1 with pool a alone", READY_TIMEOUT, |app| {
        let pools = app.pointer("/status/pools").and_then(Value::as_array).cloned().unwrap_or_default();
        let names: Vec<&str> = pools.iter().filter_map(|p| p["pool"].as_str()).collect();
        match (app.pointer("/status/ready").and_then(Value::as_str), names.as_slice()) {
            (Some("1/1"), [only]) if *only == a => Ok(()),
            (ready, names) => Err(format!("ready {ready:?}, pools {names:?}")),
        }
    })
    .await;
    assert!(app["status"]["conditions"].as_array().is_some_and(|c| !c.is_empty()));
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), &env.namespace);
    support::wait_for("the deleted pool's workloads uninstalled", CHANGE_TIMEOUT, || async {
        let names: Vec<String> = deployments
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter_map(|d| d.metadata.name)
            .collect();
        match names.iter().filter(|n| n.contains(&b)).count() {
            0 if names.iter().any(|n| n.contains(&a)) => Ok(()),
            _ => Err(format!("deployments {names:?}")),
        }
    })
    .await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_application_deleted_while_pools_are_added_leaves_nothing_behind() -> TestResult {
    let mut env = TestEnv::new("appgone").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    for p in ["a", "b"] {
        env.create_pool(p, &[("e2e", &tag), ("region", "east")], 0).await;
    }
    let controller = RunningController::start(&env.namespace);
    // Installs are not awaited: this test is about what the controller writes.
    apply_app(&env, &ingress_app(&env, json!({ "helmRelease": { "suspend": true } }))).await?;
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    support::wait_for("two releases", CHANGE_TIMEOUT, || async {
        match releases.list_metadata(&ListParams::default()).await.map(|l| l.items.len()) {
            Ok(2) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // Pools keep coming while the application is deleted half-way through.
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    for i in 0..12 {
        env.create_pool(&format!("n{i}"), &[("e2e", &tag), ("region", "east")], 0).await;
        if i == 5 {
            apps.delete("ingress", &DeleteParams::default()).await?;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The application goes (its finalizer released), with every release and
    // shared chart it made, and nothing new appears for the later pools.
    support::wait_for("the application gone", CHANGE_TIMEOUT, || async {
        match apps.get_opt("ingress").await {
            Ok(None) => Ok(()),
            Ok(Some(app)) => Err(format!("still there, finalizers {:?}", app.metadata.finalizers)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let charts: Api<DynamicObject> = Api::all_with(env.client.clone(), &helmchart_resource());
    let selector = format!("{}={}", shared_chart::LABEL_APPLICATION_NAMESPACE, env.namespace);
    let leftovers = || async {
        let hr = releases
            .list_metadata(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        let hc = charts.list_metadata(&ListParams::default().labels(&selector)).await;
        Ok::<_, String>((hr, hc.map_err(|e| e.to_string())?.items.len()))
    };
    support::wait_for("no release and no shared chart left", CHANGE_TIMEOUT, || async {
        match leftovers().await? {
            (0, 0) => Ok(()),
            (hr, hc) => Err(format!("{hr} releases, {hc} shared charts")),
        }
    })
    .await;
    // And none comes back: a reconcile still in flight must not resurrect it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(leftovers().await?, (0, 0), "something came back:\n{}", controller.log_tail());
    env.cleanup().await;
    Ok(())
}
