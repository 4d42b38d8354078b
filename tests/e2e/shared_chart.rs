//! One chart for all pools, end to end: the version resolved once from the
//! repository index, one shared HelmChart per version, and values checked
//! against the chart's schema before anything is written.
use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, ListParams};
use kube::Api;
use serde_json::{json, Value};
use support::apps::{
    app, apply_app, ingress_app, pool_status, ready_is, releases_by_pool, stalled_because, wait_app,
    CHANGE_TIMEOUT, READY_TIMEOUT,
};
use support::{ensure_crd, helmchart_resource, RunningController, TestEnv, TestResult};

/// HelmCharts in flux-system that belong to this test: the shared ones
/// (labelled with the application's namespace) and any per-release ones
/// Flux would make (named after the namespace).
async fn charts_of(env: &TestEnv) -> Vec<Value> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "flux-system", &helmchart_resource());
    let list = api.list(&ListParams::default()).await.expect("list HelmCharts");
    list.items
        .into_iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .filter(|c| {
            let name = c["metadata"]["name"].as_str().unwrap_or_default();
            c["metadata"]["labels"]["apps.fanout.dev/application-namespace"] == env.namespace.as_str()
                || name.starts_with(&env.namespace)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_pool_shares_one_helmchart_of_the_centrally_resolved_version() -> TestResult {
    let mut env = TestEnv::new("shared").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    for pool in ["a", "b", "c", "d"] {
        env.create_pool(pool, &[("e2e", &tag), ("region", "east")], 1).await;
    }
    let controller = RunningController::start(&env.namespace);

    // ^1.0 matches 1.0.0 and 1.1.0; 2.0.0-rc.1 is a prerelease of another major.
    let mut app = ingress_app(&env, json!({}));
    app["spec"]["chart"]["spec"]["version"] = json!("^1.0");
    apply_app(&env, &app).await?;
    let status = wait_app(&env, &controller, "READY 4/4", READY_TIMEOUT, ready_is("4/4")).await;
    assert_eq!(status["status"]["chartVersion"], "1.1.0", "latest stable matching ^1.0");

    let charts = charts_of(&env).await;
    assert_eq!(charts.len(), 1, "one HelmChart for four pools: {:?}", names(&charts));
    let shared = charts[0]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    assert_eq!(charts[0]["spec"]["version"], "1.1.0", "the shared chart pins the resolved version");
    for (pool, hr) in releases_by_pool(&env).await {
        assert_eq!(hr["spec"]["chartRef"]["name"], shared.as_str(), "pool {pool}");
        assert_eq!(hr["spec"]["chartRef"]["kind"], "HelmChart");
        assert!(hr["spec"].get("chart").is_none(), "pool {pool} carries its own chart.spec");
    }

    // A version change moves every pool to a new shared chart; the old one
    // goes. The pools share one cluster, so the new version goes to one
    // pool alone until its release is Ready on it, though nothing else
    // paces this application (isolation.md).
    app["spec"]["chart"]["spec"]["version"] = json!("1.0.0");
    apply_app(&env, &app).await?;
    let waited = AtomicBool::new(false);
    let status = wait_app(&env, &controller, "every pool on 1.0.0", READY_TIMEOUT, |app| {
        let pools = app.pointer("/status/pools").and_then(Value::as_array).cloned().unwrap_or_default();
        if pools.iter().any(|p| p["reason"] == "WaitingForNewChartVersion") {
            waited.store(true, Ordering::Relaxed);
        }
        ready_is("4/4")(app)?;
        match app.pointer("/status/chartVersion").and_then(Value::as_str) {
            Some("1.0.0") => Ok(()),
            other => Err(format!("chartVersion {other:?}")),
        }
    })
    .await;
    assert_eq!(status["status"]["readyPools"], 4);
    let charts = charts_of(&env).await;
    assert_eq!(charts.len(), 1, "the old HelmChart is gone: {:?}", names(&charts));
    assert_ne!(charts[0]["metadata"]["name"], shared.as_str());
    assert_eq!(charts[0]["spec"]["version"], "1.0.0");
    assert!(waited.load(Ordering::Relaxed), "no pool read WaitingForNewChartVersion");
    let releases = releases_by_pool(&env).await;
    let time = |pool: &str, key: &str| {
        releases[&env.pool_name(pool)]["metadata"]["annotations"][key]
            .as_str()
            .and_then(|t| t.parse::<Timestamp>().ok())
    };
    // The first in rollout order (by name, here) goes first.
    let first_ready = time("a", "apps.fanout.dev/ready-at");
    for pool in ["b", "c", "d"] {
        let written = time(pool, "apps.fanout.dev/written-at");
        assert!(
            matches!((first_ready, written), (Some(r), Some(w)) if r <= w),
            "pool {pool} was written at {written:?}, before pool a was Ready on 1.0.0 at {first_ready:?}"
        );
    }

    // Deleting the application deletes the shared chart (in another namespace).
    let apps: Api<nodepool_fanout::api::NodePoolApplication> =
        Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("ingress", &Default::default()).await?;
    support::wait_for("the shared HelmChart to go", CHANGE_TIMEOUT, || async {
        let left = charts_of(&env).await;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{:?}", names(&left)))
        }
    })
    .await;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unresolvable_version_holds_every_write_and_says_why() -> TestResult {
    let mut env = TestEnv::new("noversion").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    env.create_pool("a", &[("e2e", &tag)], 1).await;
    let controller = RunningController::start(&env.namespace);
    let mut app = ingress_app(&env, json!({}));
    app["spec"]["chart"]["spec"]["version"] = json!(">=3.0.0");
    apply_app(&env, &app).await?;
    let status = wait_app(
        &env,
        &controller,
        "a Stalled condition",
        CHANGE_TIMEOUT,
        stalled_because("ChartVersionNotFound"),
    )
    .await;
    let message = status.to_string();
    assert!(
        message.contains(">=3.0.0") && message.contains("1.1.0"),
        "names wanted and available: {message}"
    );
    assert!(releases_by_pool(&env).await.is_empty(), "nothing is written while the version is unknown");
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn values_that_break_the_charts_schema_fail_only_their_pool_before_anything_is_written() -> TestResult {
    let mut env = TestEnv::new("schema").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let good = env.create_pool("good", &[("e2e", &tag)], 1).await;
    let bad = env.create_pool("bad", &[("e2e", &tag)], 1).await;
    let controller = RunningController::start(&env.namespace);
    let app = app(
        &env,
        "strict-schema",
        "2.x",
        json!({
            "pools": { "selector": { "matchLabels": { "e2e": tag } } },
            "values": { "message": "hello {{pool.name}}" },
            "overrides": [ { "pools": { "names": [bad] }, "values": { "mode": "orbit" } } ]
        }),
    );
    apply_app(&env, &app).await?;
    let bad_pool = bad.clone();
    let good_pool = good.clone();
    let status = wait_app(&env, &controller, "good ready, bad failed", READY_TIMEOUT, move |app| {
        match (pool_status(app, &good_pool), pool_status(app, &bad_pool)) {
            (Some(g), Some(b)) if g["ready"] == "True" && b["ready"] == "False" => Ok(()),
            other => Err(format!("pools {other:?}")),
        }
    })
    .await;
    let failed = pool_status(&status, &bad).cloned().unwrap_or_default();
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(message.contains("/mode") && message.contains("enum"), "names path and rule: {message}");
    let releases = releases_by_pool(&env).await;
    assert!(releases.contains_key(&good));
    assert!(!releases.contains_key(&bad), "a release was written for values the schema rejects");
    assert_eq!(status["status"]["ready"], "1/2");
    env.cleanup().await;
    Ok(())
}

fn names(charts: &[Value]) -> Vec<String> {
    charts
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn cross_namespace_sources_are_refused_when_locked_down() -> TestResult {
    let mut env = TestEnv::new("lockdown").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let controller = RunningController::start_with(&env.namespace, &["--no-cross-namespace-refs=true"]);
    // The fixture repository lives in flux-system, another namespace.
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    let status = wait_app(
        &env,
        &controller,
        "a Stalled condition",
        CHANGE_TIMEOUT,
        stalled_because("CrossNamespaceRefForbidden"),
    )
    .await;
    assert!(status.to_string().contains("sourceRef"), "{status}");
    assert!(releases_by_pool(&env).await.is_empty(), "nothing is written for a refused application");
    assert!(charts_of(&env).await.is_empty(), "no HelmChart is made for a refused application");
    env.cleanup().await;
    Ok(())
}
