//! Faults on the shared control plane: the controller killed in the middle
//! of a fan-out loses nothing and duplicates nothing once it is back; a pool
//! deleted while its release installs, and an application deleted while
//! pools are added, leave exactly what should remain. (Outages of the API
//! server and of Flux have control planes of their own: e2e_*_outage.rs.)
use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::Api;
use nodepool_fanout::api::naming;
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

/// Our releases in the test's namespace, by pool, listed by our label: a
/// plain list of the namespace fails as a whole on a release nested past
/// what clients read, which is what the test below puts there.
async fn our_release_pools(env: &TestEnv) -> Vec<String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let ours = format!("{}={}", naming::LABEL_MANAGED_BY, naming::MANAGER);
    let list = api.list(&ListParams::default().labels(&ours)).await.expect("list our HelmReleases");
    let mut pools: Vec<String> = list
        .items
        .iter()
        .filter_map(|r| r.metadata.labels.as_ref()?.get(naming::LABEL_POOL).cloned())
        .collect();
    pools.sort();
    pools
}

async fn wait_our_release_pools(env: &TestEnv, want: &[&str]) {
    support::wait_for(&format!("releases for {want:?}"), CHANGE_TIMEOUT, || async {
        match our_release_pools(env).await {
            have if have == want => Ok(()),
            have => Err(format!("releases for {have:?}")),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_helmrelease_nested_too_deep_to_read_stalls_nothing_before_or_after_a_restart() -> TestResult {
    let mut env = TestEnv::new("deep-release").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let first_pool = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 0).await;
    // Anyone who may create a HelmRelease in a watched namespace can make
    // one nested 130 deep: the API server takes it, clients stop at 128.
    let depth = 130;
    let deep = format!(
        r#"{{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease",
            "metadata":{{"name":"deep","namespace":"{}"}},
            "spec":{{"suspend":true,"interval":"10m","chart":{{"spec":{{"chart":"x",
              "sourceRef":{{"kind":"HelmRepository","name":"fixtures","namespace":"flux-system"}}}}}},
              "values":{}"bottom"{}}}}}"#,
        env.namespace,
        r#"{"level":"#.repeat(depth),
        "}".repeat(depth)
    );
    let file = support::repo_root().join(format!("target/e2e-logs/{}-deep-release.json", env.namespace));
    std::fs::write(&file, deep)?;
    support::kubectl(&["create", "-f", &file.to_string_lossy()]);

    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &ingress_app(&env, json!({ "helmRelease": { "suspend": true } }))).await?;
    wait_our_release_pools(&env, &[&first_pool]).await;
    assert_eq!(controller.readyz().await, 200, "its caches listed:\n{}", controller.log_tail());
    let log = std::fs::read_to_string(&controller.log)?;
    assert!(
        log.contains("nests deeper than"),
        "the deep release is reported:\n{}",
        controller.log_tail()
    );

    // After a restart the release is listed again, with every other one:
    // a pool that joins gets its release.
    drop(controller);
    let controller = RunningController::start(&env.namespace);
    let second_pool = env.create_pool("b", &[("e2e", &tag), ("region", "east")], 0).await;
    wait_our_release_pools(&env, &[&first_pool, &second_pool]).await;
    assert_eq!(controller.readyz().await, 200, "{}", controller.log_tail());
    drop(controller);
    support::kubectl(&[
        "delete",
        "helmrelease",
        "deep",
        "-n",
        &env.namespace,
        "--wait=false",
    ]);
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_the_controller_while_a_cache_cannot_list() -> TestResult {
    let mut env = TestEnv::new("sigterm").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    env.create_pool("a", &[("e2e", &tag), ("region", "east")], 0).await;
    apply_app(&env, &ingress_app(&env, json!({ "helmRelease": { "suspend": true } }))).await?;
    // An identity that may read applications and nothing else: every other
    // watch is refused and retried, so the reconcile of the application
    // waits for caches that never list.
    let account = "apps-only";
    support::kubectl(&["-n", &env.namespace, "create", "serviceaccount", account]);
    support::kubectl(&[
        "-n",
        &env.namespace,
        "create",
        "role",
        account,
        "--verb=get,list,watch",
        "--resource=nodepoolapplications.apps.fanout.dev",
    ]);
    support::kubectl(&[
        "-n",
        &env.namespace,
        "create",
        "rolebinding",
        account,
        &format!("--role={account}"),
        &format!("--serviceaccount={}:{account}", env.namespace),
    ]);
    let kubeconfig = support::kubeconfig_as(&env.namespace, account);
    let mut controller = RunningController::start_as(&env.namespace, &[], &kubeconfig);
    support::wait_for("the reconcile waiting on the caches", Duration::from_secs(60), || async {
        let log = std::fs::read_to_string(&controller.log).unwrap_or_default();
        match log.contains("watch failed; retrying") {
            true => Ok(()),
            false => Err("no watch refused yet".to_string()),
        }
    })
    .await;
    assert_eq!(controller.readyz().await, 503, "its caches have not listed:\n{}", controller.log_tail());
    let took = controller.terminate(Duration::from_secs(30));
    let log = controller.log_tail();
    let took = took.unwrap_or_else(|| panic!("still running 30 s after SIGTERM:\n{log}"));
    assert!(took < Duration::from_secs(20), "took {took:?} to stop:\n{log}");
    println!("stopped {took:?} after SIGTERM");
    env.cleanup().await;
    Ok(())
}
