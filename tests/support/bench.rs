//! Helpers for the benches that measure the controller alone on the local
//! control plane: many NodePools made and let go fast, the controller's
//! flags, its writes, and its memory and CPU time read from /proc.

use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use nodepool_fanout::api::NodePoolApplication;
use serde_json::{json, Value};

use super::apps::app_named;
use super::{helmrelease_resource, nodepool_resource, RunningController, TestEnv};

/// Requests in flight at once, for a raw client as for the controller's
/// writes within one reconcile.
pub const PARALLEL: usize = 16;
/// The client pace the controller runs with here: high enough that the
/// API server, not the bucket, sets the pace (the default, 50 per second,
/// would make this a measure of the flag).
pub const QPS: &str = "5000";
pub const TIMEOUT: Duration = Duration::from_secs(1800);

/// Flags of a controller measured alone: a chart per release, as Flux's
/// own model has it, and a client pace the API server sets.
pub fn controller_flags(resync: &'static str) -> Vec<&'static str> {
    vec![
        "--shared-chart=false",
        "--resync",
        resync,
        "--kube-api-qps",
        QPS,
        "--kube-api-burst",
        QPS,
    ]
}

pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// An application named `fleet` of the fixture chart over every pool of
/// `env`, its releases suspended so that helm-controller leaves them to
/// the bench; `extra` is merged over its spec.
pub fn suspended_fleet(env: &TestEnv, extra: Value) -> Value {
    let mut spec = json!({
        "pools": { "selector": { "matchLabels": { "e2e": env.prefix } } },
        "helmRelease": { "suspend": true },
        "values": { "controller": { "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" } } }
    });
    for (k, v) in extra.as_object().expect("extra spec is an object") {
        spec[k] = v.clone();
    }
    app_named("fleet", &env.namespace, "ingress-gateway", "1.0.0", spec)
}

/// Creates OpenYurt NodePools of no nodes (a pool without nodes is not
/// offline), labelled `e2e=<tag>`, the i-th in region `regions[i % len]`.
pub async fn create_pools(api: &Api<DynamicObject>, names: &[String], tag: &str, regions: &[&str]) {
    let pools = names.iter().enumerate().map(|(i, name)| {
        let region = regions[i % regions.len()];
        serde_json::from_value(json!({
            "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
            "metadata": { "name": name, "labels": { "e2e": tag, "region": region } },
            "spec": { "type": "Edge" }
        }))
        .expect("NodePool manifest")
    });
    create_all(api, pools).await;
}

/// Creates `objects` by plain parallel POSTs, 64 in flight; fails on the
/// first refused.
pub async fn create_all(api: &Api<DynamicObject>, objects: impl Iterator<Item = DynamicObject>) {
    let results: Vec<_> = stream::iter(objects)
        .map(|object| async move {
            let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
            let named = format!("{kind} {}", object.metadata.name.as_deref().unwrap_or_default());
            api.create(&PostParams::default(), &object).await.map_err(|e| (named, e))
        })
        .buffer_unordered(64)
        .collect()
        .await;
    if let Some(Err((named, e))) = results.into_iter().find(Result::is_err) {
        panic!("cannot create {named}: {e}");
    }
}

/// Deletes `namespace`, its releases and claims first, then its
/// applications, then the namespace itself. Whatever wrote them (a
/// controller) must be stopped first.
///
/// The releases are suspended, so helm-controller has nothing to
/// uninstall, yet it lets deleted releases go a few a second: the 30,000
/// of a run kept it busy for half an hour, and a test run started
/// meanwhile timed out. Their finalizers are taken off here instead.
///
/// Dependents go before their owner: when an owner goes, the garbage
/// collector looks up each dependent it still knows with a GET, about 40
/// a second here, even once the namespace is gone. The 20,000 of an
/// application of 10,000 pools were eight minutes of that, which landed
/// in the next timed write (2,300 to 2,500 GETs of Leases in one phase or
/// another from run to run). The applications' finalizers are taken off
/// too: their controller is stopped.
pub async fn let_go(client: &kube::Client, namespace: &str) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let releases: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &helmrelease_resource());
    let claims: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let apps: Api<NodePoolApplication> = Api::namespaced(client.clone(), namespace);
    // Marked deleted by one request of each kind, as many as it reaches
    // in the API server's time; the namespace's own deletion would mark
    // them a few dozen a second.
    let everything = ListParams::default();
    let _ = releases.delete_collection(&DeleteParams::background(), &everything).await;
    let _ = claims.delete_collection(&DeleteParams::background(), &everything).await;
    let unfinalize = json!({ "metadata": { "finalizers": null } });
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < TIMEOUT, "the releases and claims of {namespace} are still there");
        let listed = releases.list(&ListParams::default().limit(500)).await;
        let Ok(list) = listed else { break };
        let claims_left = count(&claims).await;
        if list.items.is_empty() && claims_left == 0 {
            break;
        }
        // A delete of 10,000 outlives the API server's request timeout
        // and leaves the rest unmarked: each one left is deleted on its
        // own, each one held by its finalizer let go.
        stream::iter(list.items)
            .for_each_concurrent(PARALLEL, |release| {
                let (releases, unfinalize) = (&releases, &unfinalize);
                async move {
                    let name = release.metadata.name.clone().unwrap_or_default();
                    if release.metadata.deletion_timestamp.is_none() {
                        let _ = releases.delete(&name, &DeleteParams::background()).await;
                    } else if release.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
                        let _ =
                            releases.patch(&name, &PatchParams::default(), &Patch::Merge(unfinalize)).await;
                    }
                }
            })
            .await;
        if claims_left > 0 {
            let _ = claims.delete_collection(&DeleteParams::background(), &everything).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if let Ok(list) = apps.list_metadata(&everything).await {
        for app in list.items.iter().filter_map(|a| a.metadata.name.clone()) {
            let _ = apps.patch(&app, &PatchParams::default(), &Patch::Merge(&unfinalize)).await;
        }
    }
    let _ = apps.delete_collection(&DeleteParams::background(), &everything).await;
    let _ = namespaces.delete(namespace, &DeleteParams::background()).await;
}

/// Removes what a bench made, its controllers stopped: its NodePools
/// (labelled `e2e=<prefix>`), its namespace ([`let_go`]), and the rest of
/// `env`.
pub async fn clean_up(env: TestEnv) {
    let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    let ours = ListParams::default().labels(&format!("e2e={}", env.prefix));
    // One delete of 20,000 pools outlives the API server's request
    // timeout and leaves the rest: the next run would then cache them as
    // its own, and its memory read high. Deleted until none is left.
    let start = Instant::now();
    loop {
        let _ = pools.delete_collection(&DeleteParams::default(), &ours).await;
        // Whether any is left: a list under a label selector says no
        // remaining count.
        match pools.list_metadata(&ours.clone().limit(1)).await {
            Ok(list) if list.items.is_empty() => break,
            Ok(_) => {}
            Err(e) => panic!("cannot list the bench's pools left: {e}"),
        }
        assert!(start.elapsed() < TIMEOUT, "the bench's pools are still there after {TIMEOUT:?}");
    }
    let_go(&env.client, &env.namespace).await;
    env.cleanup().await;
}

/// The objects of `api`, counted by the API server (a list of one, with
/// the number it left out).
pub async fn count<K>(api: &Api<K>) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(list) => list.items.len() + list.metadata.remaining_item_count.unwrap_or(0) as usize,
        Err(_) => 0,
    }
}

/// Polls `check` every 250 ms until it answers, failing after [`TIMEOUT`]
/// with the controller's log.
pub async fn wait<T, F, Fut>(what: &str, controller: &RunningController, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < TIMEOUT, "waited {TIMEOUT:?} for {what}\n{}", controller.log_tail());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What grew from `before` to `after`, each counter as "name n", the
/// counters that did not grow left out.
pub fn grown(
    before: &std::collections::BTreeMap<String, u64>,
    after: std::collections::BTreeMap<String, u64>,
) -> Vec<String> {
    (after.into_iter())
        .map(|(what, n)| (n - before.get(&what).copied().unwrap_or(0), what))
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{what} {n}"))
        .collect()
}

/// The controller's requests so far by verb and resource
/// (`nodepool_fanout_api_requests_total`), each as `<verb> <resource>`.
pub async fn requests(controller: &RunningController) -> std::collections::BTreeMap<String, u64> {
    let text = controller.scrape().await;
    let mut requests = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some((labels, value)) = line
            .strip_prefix("nodepool_fanout_api_requests_total{")
            .and_then(|l| l.rsplit_once(' '))
        else {
            continue;
        };
        let label = |key: &str| super::plane_meter::label(labels, key);
        if let (Some(verb), Some(resource), Ok(n)) = (label("verb"), label("resource"), value.parse::<u64>())
        {
            requests.insert(format!("{verb} {resource}"), n);
        }
    }
    requests
}

/// Requests that write: create, update, patch, apply, delete.
pub async fn writes(controller: &RunningController) -> u64 {
    let verbs = ["create", "update", "patch", "apply", "delete", "deletecollection"];
    controller
        .counter("nodepool_fanout_api_requests_total", |l| {
            verbs.iter().any(|v| l.contains(&format!("verb=\"{v}\"")))
        })
        .await
}

/// A size (KiB) from the process's /proc status: `VmHWM`, `VmRSS`…
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"))
}

/// The process's resident set now (KiB), from /proc.
pub fn resident_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// The process's peak resident set (KiB) and its CPU seconds, from /proc.
pub fn process_figures(pid: u32) -> (u64, f64) {
    (status_kib(pid, "VmHWM"), cpu_seconds(pid))
}

/// The process's CPU seconds (user and system) so far, from /proc; 0 for
/// a process gone meanwhile.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    cpu_of(&super::plane_meter::stat_fields(&stat))
}

/// The CPU seconds (user and system) a process's stat fields count.
pub fn cpu_of(fields: &[&str]) -> f64 {
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks as f64 / clock_ticks()
}

/// Clock ticks a second, as /proc counts CPU time.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// Resets the process's peak resident set (VmHWM) to its current one, so
/// that the next [`process_figures`] reads the peak of the interval since.
pub fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .expect("reset the peak RSS in /proc/<pid>/clear_refs");
}

/// Waits until helm-controller has caught up with every HelmRelease of the
/// cluster: each stamped with the generation it observed, none being
/// deleted. A timed write that starts while it still works through an
/// earlier phase's releases shares the API server with that backlog, and
/// its figure is the backlog's as much as its own. Says how long it waited.
pub async fn helm_controller_idle(client: &kube::Client) -> Duration {
    let releases: Api<DynamicObject> = Api::all_with(client.clone(), &helmrelease_resource());
    let start = Instant::now();
    loop {
        let list = releases.list(&ListParams::default()).await.expect("list every HelmRelease");
        let busy = (list.items.iter())
            .filter(|r| {
                let generation = r.metadata.generation;
                r.metadata.deletion_timestamp.is_some()
                    || generation.is_none()
                    || r.data["status"]["observedGeneration"].as_i64() != generation
            })
            .count();
        if busy == 0 {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "helm-controller still has {busy} HelmReleases to look at after {}",
            secs(start.elapsed())
        );
        // Listed every 2 s: a list of thousands of releases is work for
        // the API server, which helm-controller shares.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
