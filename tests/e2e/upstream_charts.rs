//! Upstream charts, unmodified (`charts-fixtures/upstream/`), fanned out
//! through the real helm-controller on the local control plane:
//!
//! - ingress-nginx made unique per pool by templates: Ready everywhere, one
//!   IngressClass per pool, no object in two pools' inventories; with its
//!   defaults beside it: the first pool keeps the class `nginx`, the others
//!   fail naming it, and the application is not Ready.
//! - podinfo with its hook Jobs and Helm tests: every pod, hooks and tests
//!   included, is scheduled onto its own pool's node.
//! - MetalLB, whose CRDs and webhook configurations have fixed names: the
//!   second pool is refused, naming the object and the pool that holds it.
//! - `render --check-isolation` finds the same before Git, with Helm's own
//!   `helm template` (and says what to do when there is no Helm).
use crate::support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use nodepool_fanout::api::naming;
use serde_json::{json, Value};
use support::apps::{app_named, apply_app, pool_status, ready_is, wait_named, READY_TIMEOUT};
use support::{ensure_crd, helmrelease_resource, RunningController, TestEnv, TestResult};

/// An application of an upstream chart over the test's pools, with `spec`
/// merged over its spec.
fn upstream(env: &TestEnv, name: &str, chart: &str, version: &str, spec: Value) -> Value {
    let mut full = json!({ "pools": { "selector": { "matchLabels": { "e2e": env.prefix } } } });
    for (key, value) in spec.as_object().expect("spec is an object") {
        full[key] = value.clone();
    }
    app_named(name, &env.namespace, chart, version, full)
}

/// Every pool's release of application `app` refused, naming the pool
/// `holder` as the one whose release holds the object.
fn refused_for(pools: &[String], holder: &str) -> impl Fn(&Value) -> Result<(), String> {
    let (pools, holder) = (pools.to_vec(), holder.to_string());
    move |app| {
        for pool in &pools {
            let status = pool_status(app, pool).ok_or(format!("no status for {pool}"))?;
            let message = status["message"].as_str().unwrap_or_default();
            let names_holder = message.contains(&format!("is not taken over: the release of pool {holder} "));
            if status["reason"] != "ObjectHeldElsewhere" || !names_holder {
                return Err(format!("{pool}: {status}"));
            }
        }
        Ok(())
    }
}

/// The application's releases, by pool: (release, inventory ids).
async fn inventories(env: &TestEnv, app: &str) -> BTreeMap<String, (Value, Vec<String>)> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let mine = ListParams::default().labels(&format!("{}={app}", naming::LABEL_APPLICATION));
    let list = api.list(&mine).await.expect("list HelmReleases");
    list.items
        .into_iter()
        .filter_map(|hr| {
            let pool = hr.annotations().get(naming::ANNOTATION_POOL_NAME)?.clone();
            let hr = serde_json::to_value(&hr).ok()?;
            let ids = hr
                .pointer("/status/inventory/entries")
                .and_then(Value::as_array)
                .map(|e| e.iter().filter_map(|e| e["id"].as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            Some((pool, (hr, ids)))
        })
        .collect()
}

/// Three new pools at once: the first install goes alone (Helm looks for
/// an object before it creates it, so installs that run together would
/// each create the defaults' IngressClass `nginx`), and the others are
/// then refused it, naming the pool that holds it. No object is in two
/// releases' inventories.
#[tokio::test(flavor = "multi_thread")]
async fn ingress_nginx_per_pool_is_isolated_and_its_defaults_are_refused_not_shared() -> TestResult {
    let mut env = TestEnv::new("nginx").await;
    ensure_crd(&env.client).await;
    let mut pools = env.create_region_pools(&["east", "west", "north"]).await;
    pools.sort();
    let first = pools.remove(0);
    let others = pools;
    let controller = RunningController::start(&env.namespace);
    let class = "{{app.namespace}}-{{pool.name}}";
    // The chart names its admission Service `<release>-ingress-nginx-
    // controller-admission`, which Kubernetes caps at 63 characters: the
    // default `<app>-<pool>-<hash>` of this test's long pool names passes
    // that, so each application names its Helm releases shorter.
    let per_pool = json!({ "releaseName": "{{pool.name}}-pp", "values": { "controller": {
        "ingressClass": class,
        "ingressClassResource": { "name": class, "controllerValue": format!("k8s.io/{class}") }
    } } });
    apply_app(&env, &upstream(&env, "per-pool", "ingress-nginx", "4.15.1", per_pool)).await?;
    // Its defaults: the IngressClass `nginx`, the same for every pool.
    let defaults = json!({ "releaseName": "{{pool.name}}-df" });
    apply_app(&env, &upstream(&env, "defaults", "ingress-nginx", "4.15.1", defaults)).await?;

    let app = wait_named(
        &env,
        &controller,
        "defaults",
        "defaults: the first pool installed, the others refused",
        READY_TIMEOUT,
        refused_for(&others, &first),
    )
    .await;
    let message = pool_status(&app, &others[0]).and_then(|s| s["message"].as_str()).unwrap_or_default();
    assert!(
        message.starts_with("IngressClass nginx (cluster-scoped) exists and is not taken over"),
        "{message}"
    );
    assert_eq!(support::condition(&app, "Ready").map(|c| c["status"].clone()), Some(json!("False")));
    let app =
        wait_named(&env, &controller, "defaults", "defaults READY 1/3", READY_TIMEOUT, ready_is("1/3")).await;
    assert_eq!(pool_status(&app, &first).map(|s| s["ready"].clone()), Some(json!("True")));
    let defaults = inventories(&env, "defaults").await;
    assert_eq!(defaults.len(), 3, "{:?}", defaults.keys());
    let class_id = "_nginx_networking.k8s.io_IngressClass".to_string();
    let holding: Vec<&String> = defaults
        .iter()
        .filter(|(_, (_, ids))| ids.contains(&class_id))
        .map(|(p, _)| p)
        .collect();
    assert_eq!(holding, [&first], "IngressClass nginx in one inventory, the first pool's");
    one_holder_each(&defaults);

    wait_named(&env, &controller, "per-pool", "per-pool READY 3/3", READY_TIMEOUT, ready_is("3/3")).await;
    let releases = inventories(&env, "per-pool").await;
    assert_eq!(releases.len(), 3, "{:?}", releases.keys());
    let classes: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &kube::discovery::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "networking.k8s.io",
            "v1",
            "IngressClass",
        )),
    );
    for (pool, (hr, ids)) in &releases {
        let name = format!("{}-{pool}", env.namespace);
        let owned = classes.get(&name).await?;
        let release = hr["spec"]["releaseName"].as_str().unwrap_or_default();
        assert_eq!(
            owned
                .metadata
                .annotations
                .unwrap_or_default()
                .get("meta.helm.sh/release-name")
                .map(String::as_str),
            Some(release),
            "the class of pool {pool} belongs to its release"
        );
        assert!(ids.contains(&format!("_{name}_networking.k8s.io_IngressClass")), "{pool}: {ids:?}");
    }
    let held = one_holder_each(&releases);
    assert!(held > 3 * 5, "every release lists its objects: {held}");
    env.cleanup().await;
    Ok(())
}

/// Fails when an object is in the inventories of two pools' releases;
/// how many objects they list.
fn one_holder_each(releases: &BTreeMap<String, (Value, Vec<String>)>) -> usize {
    let mut holders: BTreeMap<&str, &str> = BTreeMap::new();
    for (pool, (_, ids)) in releases {
        for id in ids {
            if let Some(other) = holders.insert(id, pool) {
                panic!("{id} is in the inventories of pools {other} and {pool}");
            }
        }
    }
    holders.len()
}

#[tokio::test(flavor = "multi_thread")]
async fn podinfo_hooks_and_tests_run_on_their_own_pool() -> TestResult {
    let mut env = TestEnv::new("podinfo").await;
    ensure_crd(&env.client).await;
    let pools = env.create_region_pools(&["east", "west"]).await;
    let controller = RunningController::start(&env.namespace);
    let hooks = json!({ "job": { "enabled": true } });
    let spec = json!({
        "values": { "hooks": { "preInstall": hooks, "postInstall": hooks } },
        // kwok completes the pods of Jobs, not bare Pods: the tests run
        // (their pods are scheduled) and time out, which is ignored.
        "helmRelease": { "test": { "enable": true, "ignoreFailures": true, "timeout": "20s" } }
    });
    apply_app(&env, &upstream(&env, "podinfo", "podinfo", "6.14.1", spec)).await?;
    wait_named(&env, &controller, "podinfo", "podinfo READY 2/2", READY_TIMEOUT, ready_is("2/2")).await;

    // Each release's pods by the scheduler's word: (pod, node).
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.namespace);
    let releases: BTreeMap<String, String> = inventories(&env, "podinfo")
        .await
        .into_iter()
        .map(|(pool, (hr, _))| (pool, hr["spec"]["releaseName"].as_str().unwrap_or_default().to_string()))
        .collect();
    assert_eq!(releases.len(), 2, "{releases:?}");
    // Helm runs the tests one by one and stops at the first that fails;
    // kwok never completes a bare Pod, so the first test (grpc, by name)
    // times out and the others are never made. Its pod is the bare Pod
    // whose placement is checked.
    let kinds = ["-pre-install-", "-post-install-", "-grpc-test-"];
    let scheduled = support::wait_for("every pod of both pools scheduled", READY_TIMEOUT, || async {
        let list = events
            .list(&ListParams::default().fields("reason=Scheduled"))
            .await
            .map_err(|e| e.to_string())?;
        let placed: Vec<(String, String)> = list
            .items
            .iter()
            .filter_map(|e| {
                let pod = e.involved_object.name.clone()?;
                let node = e.message.as_deref()?.rsplit_once(" to ")?.1.to_string();
                Some((pod, node))
            })
            .collect();
        for (pool, release) in &releases {
            for kind in kinds {
                if !placed.iter().any(|(pod, _)| pod.starts_with(release.as_str()) && pod.contains(kind)) {
                    return Err(format!("no {kind} pod of pool {pool} scheduled yet: {placed:?}"));
                }
            }
        }
        Ok(placed)
    })
    .await;
    for (pool, release) in &releases {
        let mine: Vec<&(String, String)> =
            scheduled.iter().filter(|(pod, _)| pod.starts_with(release.as_str())).collect();
        // The Deployment's pod besides one of each kind.
        assert!(mine.len() > kinds.len(), "{pool}: {mine:?}");
        for (pod, node) in mine {
            assert!(node.starts_with(&format!("{pool}-node-")), "{pod} of pool {pool} ran on {node}");
        }
    }
    assert_eq!(pools.len(), releases.len());
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn metallbs_cluster_wide_objects_are_reported_not_shared() -> TestResult {
    let mut env = TestEnv::new("metallb").await;
    ensure_crd(&env.client).await;
    let first = env.create_region_pools(&["east"]).await.remove(0);
    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &upstream(&env, "metallb", "metallb", "0.16.1", json!({}))).await?;
    wait_named(&env, &controller, "metallb", "metallb READY 1/1", READY_TIMEOUT, ready_is("1/1")).await;

    let second = env.create_region_pools(&["west"]).await;
    let app = wait_named(
        &env,
        &controller,
        "metallb",
        "the second pool refused",
        READY_TIMEOUT,
        refused_for(&second, &first),
    )
    .await;
    let message = pool_status(&app, &second[0]).and_then(|s| s["message"].as_str()).unwrap_or_default();
    assert!(
        message.contains("(cluster-scoped)") || message.contains(&format!(" {}/", env.namespace)),
        "{message}"
    );
    assert_eq!(support::condition(&app, "Ready").map(|c| c["status"].clone()), Some(json!("False")));
    // The first pool keeps what it has.
    assert_eq!(pool_status(&app, &first).map(|s| s["ready"].clone()), Some(json!("True")));
    env.cleanup().await;
    Ok(())
}

/// `nodepool-fanout render --check-isolation` over the example pools with
/// an application file; (success, stdout, stderr).
fn render_check(name: &str, app: &str, helm: &std::path::Path) -> (bool, String, String) {
    let root = support::repo_root();
    let file = std::env::temp_dir().join(format!("render-check-{}-{name}.yaml", std::process::id()));
    std::fs::write(&file, app).expect("write the application file");
    let chart = root.join("charts-fixtures/upstream").join(name);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nodepool-fanout"))
        .args(["render", "--check-isolation", "-f"])
        .arg(&file)
        .arg("--pools")
        .arg(root.join("examples/pools.yaml"))
        .arg("--chart")
        .arg(&chart)
        .arg("--helm")
        .arg(helm)
        .output()
        .expect("run nodepool-fanout render");
    let _ = std::fs::remove_file(&file);
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

fn app_file(chart: &str, version: &str, values: &str) -> String {
    format!(
        "apiVersion: apps.fanout.dev/v1alpha1\nkind: NodePoolApplication\nmetadata: {{ name: site, namespace: edge }}\n\
         spec:\n  pools: {{ selector: {{ matchLabels: {{ region: east }} }} }}\n  chart:\n    spec:\n      \
         chart: {chart}\n      version: \"{version}\"\n      sourceRef: {{ kind: HelmRepository, name: charts }}\n  \
         interval: 10m\n  values: {values}\n"
    )
}

#[test]
fn render_checks_isolation_with_helm_before_git() {
    let helm = support::controlplane_bin().join("helm");
    // ingress-nginx's defaults: its IngressClass would be both pools'.
    let (ok, _, stderr) = render_check("ingress-nginx", &app_file("ingress-nginx", "4.15.1", "{}"), &helm);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains(
            "error: IngressClass.networking.k8s.io nginx (cluster-scoped) would be in the releases of pools \
             hangzhou, shanghai: set controller.ingressClass or controller.ingressClassResource.name per pool"
        ),
        "{stderr}"
    );
    // Made unique per pool, it passes: every pod of the chart, its
    // admission hook Jobs included, is pinned.
    let unique =
        "{ controller: { ingressClass: \"{{pool.name}}\", ingressClassResource: { name: \"{{pool.name}}\", \
                  controllerValue: \"k8s.io/{{pool.name}}\" } } }";
    let (ok, stdout, stderr) =
        render_check("ingress-nginx", &app_file("ingress-nginx", "4.15.1", unique), &helm);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.matches("kind: HelmRelease").count(), 2, "{stdout}");
    // podinfo's test Pods are bare Pods: pinned too.
    let (ok, _, stderr) = render_check("podinfo", &app_file("podinfo", "6.14.1", "{}"), &helm);
    assert!(ok, "{stderr}");
    // MetalLB's CRDs and webhook configuration are meant once per cluster.
    let (ok, _, stderr) = render_check("metallb", &app_file("metallb", "0.16.1", "{}"), &helm);
    assert!(!ok);
    assert!(
        stderr.contains(
            "error: CustomResourceDefinition.apiextensions.k8s.io bfdprofiles.metallb.io (cluster-scoped) would be \
             in the releases of pools hangzhou, shanghai"
        ),
        "{stderr}"
    );
    // No Helm: the check says what to do, and fails.
    let (ok, _, stderr) = render_check(
        "podinfo",
        &app_file("podinfo", "6.14.1", "{}"),
        std::path::Path::new("/nonexistent/helm"),
    );
    assert!(!ok);
    assert!(stderr.contains("install Helm, or name its binary with --helm"), "{stderr}");
}
