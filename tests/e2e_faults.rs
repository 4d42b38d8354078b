//! Faults: the controller killed in the middle of a fan-out loses nothing
//! and duplicates nothing once it is back.
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{DynamicObject, ListParams};
use kube::Api;
use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, wait_app, READY_TIMEOUT};
use support::{ensure_crd, helmrelease_resource, RunningController, TestEnv, TestResult};

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
    let app = ingress_app(&env, json!({ "suspend": true }));
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
    let status = wait_app(&env, &second, "every pool's release in the status", READY_TIMEOUT, |app| {
        let pools = app.pointer("/status/pools").and_then(Value::as_array).cloned().unwrap_or_default();
        let held = pools
            .iter()
            .filter(|p| p["reason"] == "ChartNotReady" || p["reason"] == "Progressing")
            .count();
        match (pools.len(), held) {
            (POOLS, 0) => Ok(()),
            (n, held) => Err(format!("{n} pools in the status, {held} still held or progressing")),
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
