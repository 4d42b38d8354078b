//! Sites that are clusters: an application over ClusterProfiles fans out
//! to the local plane's site clusters (`site-1`, `site-2`: each its own
//! etcd, kube-apiserver, controller-manager, scheduler and kwok), and the
//! real helm-controller on the hub installs into each through the
//! kubeconfig Secret the site's release names.
//!
//! The tests that stop a site's API server share the two sites, so they
//! take turns (`SITES`); a test that only reads a site runs beside them.

mod offline;
mod removal;

use crate::support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::IngressClass;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{json, Value};
use tokio::sync::Mutex;

use support::apps::{app_named, apply_app, ingress_app, pool_status, ready_is, wait_named, READY_TIMEOUT};
use support::gitops::cluster_path;
use support::{
    clusterprofile_resource, ensure_crd, helmrelease_resource, wait_for, RunningController, TestEnv,
    TestResult,
};

/// The sites are shared by every test here; one that stops a site's API
/// server holds them alone.
static SITES: Mutex<()> = Mutex::const_new(());

/// The admin kubeconfig of the plane's site `site`, failing loudly when
/// the plane has no such site.
fn site_kubeconfig(site: &str) -> String {
    let path = cluster_path(&format!("sites/{site}/kubeconfig"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "the control plane has no site cluster {site} ({}: {e}); `hack/cluster.sh up` starts two",
            path.display()
        )
    })
}

async fn site_client(site: &str) -> Client {
    let kubeconfig = Kubeconfig::from_yaml(&site_kubeconfig(site)).expect("the site's kubeconfig parses");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the site's kubeconfig is usable");
    Client::try_from(config).expect("a client for the site")
}

/// Makes `site` one of the test's sites: its kubeconfig in the Secret
/// `<site>-kubeconfig` (Cluster API's convention, the key Flux reads by
/// default) and a ClusterProfile whose control plane is healthy.
async fn register(env: &TestEnv, site: &str, labels: Value) {
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.namespace);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": format!("{site}-kubeconfig") },
        "stringData": { "value": site_kubeconfig(site) }
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("the kubeconfig Secret is made");
    let profiles: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &clusterprofile_resource());
    let profile: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": { "name": site, "labels": labels },
        "spec": { "displayName": site, "clusterManager": { "name": "local-plane" } }
    }))
    .unwrap();
    profiles
        .create(&PostParams::default(), &profile)
        .await
        .expect("the ClusterProfile is made");
    set_health(env, site, true).await;
}

/// A test's world with `sites` of the plane registered, each in its
/// region: site-1 north, site-2 south.
async fn with_sites(test: &str, sites: &[&str]) -> TestEnv {
    let env = TestEnv::new(test).await;
    ensure_crd(&env.client).await;
    for site in sites {
        let region = match *site {
            "site-1" => "north",
            _ => "south",
        };
        register(&env, site, json!({ "e2e": env.prefix, "region": region })).await;
    }
    env
}

/// What the cluster manager says of the site's control plane.
async fn set_health(env: &TestEnv, site: &str, healthy: bool) {
    let profiles: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &clusterprofile_resource());
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({ "status": { "conditions": [{
        "type": "ControlPlaneHealthy", "status": if healthy { "True" } else { "False" },
        "reason": if healthy { "Healthy" } else { "Unhealthy" }, "message": "as the test says",
        "lastTransitionTime": now
    }] } });
    profiles
        .patch_status(
            site,
            &PatchParams::apply("e2e-cluster-manager").force(),
            &Patch::Apply(&json!({
                "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
                "status": status["status"]
            })),
        )
        .await
        .expect("the ClusterProfile's status is set");
}

/// The application `gw` over the test's sites: the fixture gateway in
/// namespace `<test>-gw` of each site, its region from the profile's label.
fn sites_app(env: &TestEnv, extra: Value) -> Value {
    let mut spec = json!({
        "pools": { "kind": "ClusterProfile", "selector": { "matchLabels": { "e2e": env.prefix } } },
        "targetNamespace": format!("{}-gw", env.prefix),
        "helmRelease": { "install": { "createNamespace": true } },
        "values": gateway_values("{{pool.labels.region}}")
    });
    for (k, v) in extra.as_object().expect("extra spec is an object") {
        spec[k] = v.clone();
    }
    app_named("gw", &env.namespace, "ingress-gateway", "1.0.0", spec)
}

/// The gateway's values, configured for `region`. The sites outlive each
/// test: its cluster-scoped IngressClass is named after the test's
/// namespace, as the hub's tests name theirs.
fn gateway_values(region: &str) -> Value {
    json!({ "controller": {
        "ingressClass": { "name": "{{app.namespace}}-gw" },
        "config": { "region": region }
    } })
}

/// The gateway's pods Ready in `site`, and its ConfigMap's region.
async fn gateway_in(env: &TestEnv, site: &str) -> Result<(usize, String), String> {
    let client = site_client(site).await;
    let namespace = format!("{}-gw", env.prefix);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let pods = pods.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
    let ready = pods
        .iter()
        .filter(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    let configs: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let configs = configs.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
    let region = configs
        .iter()
        .find_map(|c| c.data.as_ref()?.get("region").cloned())
        .ok_or_else(|| format!("no gateway config in {site}/{namespace}: {} pods", pods.len()))?;
    Ok((ready, region))
}

/// Waits until the gateway runs in `site`, one pod Ready, configured for `region`.
async fn wait_gateway(env: &TestEnv, site: &str, region: &str) {
    wait_for(&format!("the gateway Ready in {site} for {region}"), READY_TIMEOUT, || async {
        match gateway_in(env, site).await? {
            (1, r) if r == region => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// The Ready condition of every site, by pool.
fn sites_ready(app: &Value, sites: &[&str]) -> Result<(), String> {
    for site in sites {
        let status = pool_status(app, site).ok_or(format!("no status for {site}"))?;
        if status["ready"] != "True" {
            return Err(format!("{site}: {status}"));
        }
    }
    Ok(())
}

#[tokio::test]
async fn one_application_reaches_both_site_clusters_and_leaves_a_hub_pool_application_alone() -> TestResult {
    let _sites = SITES.lock().await;
    let mut env = with_sites("sites", &["site-1", "site-2"]).await;
    // A pool application on the hub beside it, over a pool of this cluster.
    env.create_region_pools(&["east"]).await;
    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    let hub =
        wait_named(&env, &controller, "ingress", "the hub's pool Ready", READY_TIMEOUT, ready_is("1/1"))
            .await;
    // Values differ per site by template and by override.
    let overrides = json!({ "overrides": [{ "pools": { "names": ["site-2"] },
        "values": { "controller": { "replicas": 1, "config": { "region": "south-override" } } } }] });
    apply_app(&env, &sites_app(&env, overrides)).await?;
    let app = wait_named(&env, &controller, "gw", "both sites Ready", READY_TIMEOUT, ready_is("2/2")).await;
    sites_ready(&app, &["site-1", "site-2"])?;
    wait_gateway(&env, "site-1", "north").await;
    wait_gateway(&env, "site-2", "south-override").await;
    // Nothing of the sites' gateway runs on the hub.
    let hub_pods: Api<Pod> = Api::namespaced(env.client.clone(), &format!("{}-gw", env.prefix));
    assert!(hub_pods
        .list(&ListParams::default())
        .await
        .map(|l| l.items.is_empty())
        .unwrap_or(true));
    // The releases say where they install, and only there.
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    for site in ["site-1", "site-2"] {
        let release = releases.get(&nodepool_fanout::api::naming::release_name("gw", site)).await?;
        assert_eq!(release.data["spec"]["kubeConfig"]["secretRef"]["name"], format!("{site}-kubeconfig"));
        assert!(release.data["spec"].get("postRenderers").is_none());
    }
    // The hub's application is untouched by the sites' fan-out.
    let hub_after = wait_named(
        &env,
        &controller,
        "ingress",
        "the hub's pool still Ready",
        READY_TIMEOUT,
        ready_is("1/1"),
    )
    .await;
    assert_eq!(hub["status"]["pools"], hub_after["status"]["pools"]);
    // `get` shows the sites as it shows pools, with each site's health.
    let get = std::process::Command::new(env!("CARGO_BIN_EXE_nodepool-fanout"))
        .args(["get", "gw", "-n", &env.namespace])
        .env("KUBECONFIG", support::kubeconfig())
        .output()?;
    let table = String::from_utf8_lossy(&get.stdout);
    assert!(get.status.success(), "{table}{}", String::from_utf8_lossy(&get.stderr));
    for site in ["site-1", "site-2"] {
        let line = table
            .lines()
            .find(|l| l.starts_with(site))
            .unwrap_or_else(|| panic!("{site}: {table}"));
        assert!(line.contains("control plane healthy") && line.contains("Ready"), "{line}");
    }
    // Deleting the application uninstalls the gateway from both sites.
    let apps: Api<nodepool_fanout::api::NodePoolApplication> =
        Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("gw", &DeleteParams::default()).await?;
    for site in ["site-1", "site-2"] {
        let client = site_client(site).await;
        let deployments: Api<Deployment> = Api::namespaced(client, &format!("{}-gw", env.prefix));
        wait_for(&format!("the gateway uninstalled from {site}"), READY_TIMEOUT, || async {
            match deployments.list(&ListParams::default()).await {
                Ok(list) if list.items.is_empty() => Ok(()),
                Ok(list) => Err(format!("{} deployments left", list.items.len())),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
    }
    drop(controller);
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_progressive_change_reaches_one_site_then_the_other_and_a_broken_one_halts_after_the_first(
) -> TestResult {
    let _sites = SITES.lock().await;
    let env = with_sites("sites-rollout", &["site-1", "site-2"]).await;
    let controller = RunningController::start(&env.namespace);
    let progressive = json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 1 } });
    apply_app(&env, &sites_app(&env, progressive.clone())).await?;
    wait_named(&env, &controller, "gw", "both sites installed", READY_TIMEOUT, ready_is("2/2")).await;
    // A good change: site-1 first; site-2 written only once site-1 is
    // Ready on it.
    let started = std::time::Instant::now();
    let mut good = progressive.clone();
    good["values"] = gateway_values("{{pool.labels.region}}-v2");
    apply_app(&env, &sites_app(&env, good.clone())).await?;
    let both_at_once = std::cell::Cell::new(false);
    let done = wait_named(&env, &controller, "gw", "the change on both sites", READY_TIMEOUT, |app| {
        let updating = ["site-1", "site-2"]
            .iter()
            .filter_map(|s| pool_status(app, s))
            .filter(|p| p["upToDate"] == true && p["rollout"] != "Done")
            .count();
        both_at_once.set(both_at_once.get() || updating > 1);
        match app.pointer("/status/rollout/progress").and_then(Value::as_str) {
            Some("Complete 2/2") => ready_is("2/2")(app),
            other => Err(format!("rollout {other:?}")),
        }
    })
    .await;
    let took = started.elapsed();
    assert!(!both_at_once.get(), "both sites were updating at once");
    assert_eq!(done["status"]["rollout"]["updated"], 2);
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let written = |release: &DynamicObject| {
        release
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("apps.fanout.dev/written-at"))
            .cloned()
    };
    let first = releases.get(&nodepool_fanout::api::naming::release_name("gw", "site-1")).await?;
    let second = releases.get(&nodepool_fanout::api::naming::release_name("gw", "site-2")).await?;
    assert!(
        written(&first) < written(&second),
        "site-1 first: {:?} {:?}",
        written(&first),
        written(&second)
    );
    wait_gateway(&env, "site-1", "north-v2").await;
    wait_gateway(&env, "site-2", "south-v2").await;
    eprintln!("a progressive change reached both sites in {took:?}");
    // A broken change (a port no Service may have): site-1 fails, the
    // rollout halts, site-2 keeps its release exactly.
    let kept = written(&second);
    let mut broken = good.clone();
    broken["values"]["controller"]["service"] = json!({ "port": 70000 });
    apply_app(&env, &sites_app(&env, broken)).await?;
    let halted = wait_named(&env, &controller, "gw", "the halt", READY_TIMEOUT, |app| {
        match app.pointer("/status/rollout/phase").and_then(Value::as_str) {
            Some("Halted") => Ok(()),
            other => Err(format!("phase {other:?}")),
        }
    })
    .await;
    let stalled = halted["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Stalled").cloned())
        .unwrap_or_default();
    let message = stalled["message"].as_str().unwrap_or_default();
    assert!(message.contains("site-1") && message.contains("70000"), "{message}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = releases.get(&nodepool_fanout::api::naming::release_name("gw", "site-2")).await?;
    assert_eq!(written(&second), kept, "site-2 was touched by a halted rollout");
    wait_gateway(&env, "site-2", "south-v2").await;
    let apps: Api<nodepool_fanout::api::NodePoolApplication> =
        Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("gw", &DeleteParams::default()).await?;
    drop(controller);
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_missing_kubeconfig_and_a_profile_elsewhere_are_named_and_disturb_nothing() -> TestResult {
    // site-1 is registered; "site-9" has a profile but no Secret.
    let env = with_sites("sites-bad", &["site-1"]).await;
    let profiles: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &clusterprofile_resource());
    let lonely: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": { "name": "site-9", "labels": { "e2e": env.prefix, "region": "west" } },
        "spec": { "clusterManager": { "name": "local-plane" } }
    }))
    .unwrap();
    profiles.create(&PostParams::default(), &lonely).await?;
    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &sites_app(&env, json!({}))).await?;
    let app = wait_named(&env, &controller, "gw", "site-1 Ready, site-9 failing", READY_TIMEOUT, |app| {
        sites_ready(app, &["site-1"])?;
        let site = pool_status(app, "site-9").ok_or("no site-9")?;
        let message = site["message"].as_str().unwrap_or_default();
        match site["ready"] == "False" && message.contains("site-9-kubeconfig") {
            true => Ok(()),
            false => Err(format!("site-9: {site}")),
        }
    })
    .await;
    assert_eq!(app["status"]["ready"], "1/2");
    wait_gateway(&env, "site-1", "north").await;
    // A profile of another namespace, named: not reached, and said so.
    let other = TestEnv::new("sites-other").await;
    register(&other, "site-2", json!({ "e2e": other.prefix })).await;
    let named = app_named(
        "named",
        &env.namespace,
        "ingress-gateway",
        "1.0.0",
        json!({ "pools": { "kind": "ClusterProfile", "names": ["site-1", "site-2"] },
                "targetNamespace": format!("{}-named", env.prefix),
                "helmRelease": { "install": { "createNamespace": true } } }),
    );
    apply_app(&env, &named).await?;
    let named = wait_named(&env, &controller, "named", "site-2 not found here", READY_TIMEOUT, |app| {
        let stalled = app["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Stalled").cloned())
            .ok_or("not Stalled")?;
        match stalled["message"].as_str().unwrap_or_default().contains("site-2") {
            true => Ok(()),
            false => Err(stalled.to_string()),
        }
    })
    .await;
    assert_eq!(named["status"]["selectedPools"], 1, "only its own namespace's site-1");
    // Run for one namespace, the controller holds that namespace's
    // profiles alone: site-1 and site-9, not site-2 of the other namespace
    // (nor the profiles of the tests running beside).
    let cached = |line: &str| line.contains(r#"kind="ClusterProfile""#);
    let profiles_held = controller.counter("nodepool_fanout_cached_objects", cached).await;
    assert_eq!(profiles_held, 2, "{}", controller.scrape().await);
    // The first application is undisturbed.
    let again = wait_named(&env, &controller, "gw", "gw still 1/2", READY_TIMEOUT, ready_is("1/2")).await;
    sites_ready(&again, &["site-1"])?;
    drop(controller);
    other.cleanup().await;
    env.cleanup().await;
    Ok(())
}

/// A site's API server stopped until dropped, as an outage cuts a site off.
struct SiteStopped(&'static str);

impl SiteStopped {
    fn stop(site: &'static str) -> Self {
        cluster(&["stop", &format!("kube-apiserver-{site}")]);
        SiteStopped(site)
    }
}

impl Drop for SiteStopped {
    fn drop(&mut self) {
        cluster(&["start", &format!("kube-apiserver-{}", self.0)]);
    }
}

/// `hack/cluster.sh` on the plane the tests use.
pub(crate) fn cluster(args: &[&str]) {
    let status = std::process::Command::new(support::repo_root().join("hack/cluster.sh"))
        .args(args)
        .env("LOCAL_CLUSTER_DIR", cluster_path(""))
        .status()
        .expect("hack/cluster.sh runs");
    assert!(status.success(), "hack/cluster.sh {args:?} failed");
}
