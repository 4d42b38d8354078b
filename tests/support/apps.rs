//! Helpers for tests of NodePoolApplications: applying them, waiting on
//! their status, and reading the HelmReleases they own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::Api;
use nodepool_fanout::api::naming;
use nodepool_fanout::api::NodePoolApplication;
use serde_json::{json, Value};

use super::{helmrelease_resource, RunningController, TestEnv};

pub const READY_TIMEOUT: Duration = Duration::from_secs(180);
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(60);

/// An application named `ingress` in the test's namespace installing
/// `chart` at `version` from the fixture repository; `spec` adds to or
/// replaces fields of its spec.
pub fn app(env: &TestEnv, chart: &str, version: &str, spec: Value) -> Value {
    app_named("ingress", &env.namespace, chart, version, spec)
}

/// As `app`, with another name and namespace.
pub fn app_named(name: &str, namespace: &str, chart: &str, version: &str, spec: Value) -> Value {
    let mut full = json!({
        "chart": { "spec": {
            "chart": chart, "version": version,
            "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" }
        }},
        "interval": "10m"
    });
    for (k, v) in spec.as_object().expect("spec is an object") {
        full[k] = v.clone();
    }
    json!({
        "apiVersion": "apps.fanout.dev/v1alpha1",
        "kind": "NodePoolApplication",
        "metadata": { "name": name, "namespace": namespace },
        "spec": full
    })
}

/// The ingress-shaped fixture chart over the pools labelled
/// `e2e=<test prefix>`; `extra` is merged over the spec.
pub fn ingress_app(env: &TestEnv, extra: Value) -> Value {
    let mut spec = json!({
        "pools": { "selector": { "matchLabels": { "e2e": env.prefix } } },
        "values": { "controller": {
            // IngressClasses are cluster-scoped: one per pool and per test.
            "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" },
            "config": { "region": "{{pool.labels.region}}" }
        }},
        "placement": { "valuesPaths": ["controller.nodeSelector"] }
    });
    for (k, v) in extra.as_object().expect("extra spec is an object") {
        spec[k] = v.clone();
    }
    app(env, "ingress-gateway", "1.0.0", spec)
}

/// `kubectl apply --server-side` of an application.
pub async fn apply_app(env: &TestEnv, manifest: &Value) -> Result<NodePoolApplication, kube::Error> {
    let api: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default().to_string();
    api.patch(&name, &PatchParams::apply("e2e-user").force(), &Patch::Apply(manifest))
        .await
}

/// Waits until the application's status is of its latest generation and
/// satisfies `check`, which explains what it saw when it is not satisfied.
pub async fn wait_app(
    env: &TestEnv,
    controller: &RunningController,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Value) -> Result<(), String>,
) -> Value {
    wait_named(env, controller, "ingress", what, timeout, check).await
}

/// As `wait_app`, for the application `name`.
pub async fn wait_named(
    env: &TestEnv,
    controller: &RunningController,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Value) -> Result<(), String>,
) -> Value {
    let api: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    while Instant::now() < deadline {
        match api.get(name).await.map(|app| serde_json::to_value(&app)) {
            Ok(Ok(value)) => {
                let generation = value.pointer("/metadata/generation");
                if value.pointer("/status/observedGeneration") != generation {
                    last = format!("status not of generation {generation:?}: {}", value["status"]);
                } else {
                    match check(&value) {
                        Ok(()) => return value,
                        Err(e) => last = format!("{e}; status: {}", value["status"]),
                    }
                }
            }
            Ok(Err(e)) => last = e.to_string(),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "timed out after {timeout:?} waiting for {what}; last seen: {last}\n--- controller log ---\n{}",
        controller.log_tail()
    )
}

/// The rollout is complete and every one of `total` pools is Ready.
pub fn complete(total: usize) -> impl Fn(&Value) -> Result<(), String> {
    reads_ready(format!("Complete {total}/{total}"))
}

/// Every pool reached done, `total` of them, with offline pools behind:
/// Ready, and not complete (`AwaitingOffline`).
pub fn awaiting_offline(total: usize) -> impl Fn(&Value) -> Result<(), String> {
    reads_ready(format!("AwaitingOffline {total}/{total}"))
}

/// The rollout's progress reads `want`, and the application is Ready.
fn reads_ready(want: String) -> impl Fn(&Value) -> Result<(), String> {
    move |app| {
        let progress = app.pointer("/status/rollout/progress").and_then(Value::as_str);
        let ready = super::condition(app, "Ready").map(|c| c["status"].clone());
        match (progress, ready) {
            (Some(p), Some(r)) if p == want && r == "True" => Ok(()),
            other => Err(format!("rollout and Ready are {other:?}, want {want} and True")),
        }
    }
}

pub fn ready_is(expected: impl Into<String>) -> impl Fn(&Value) -> Result<(), String> {
    let expected = expected.into();
    move |app| match app.pointer("/status/ready").and_then(Value::as_str) {
        Some(r) if r == expected => Ok(()),
        other => Err(format!("ready is {other:?}, want {expected}")),
    }
}

/// The application is Stalled for `reason`.
pub fn stalled_because(reason: &'static str) -> impl Fn(&Value) -> Result<(), String> {
    move |app| {
        let stalled = app
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Stalled"));
        match stalled {
            Some(c) if c["reason"] == reason => Ok(()),
            other => Err(format!("Stalled is {other:?}, want reason {reason}")),
        }
    }
}

pub fn pool_status<'a>(app: &'a Value, pool: &str) -> Option<&'a Value> {
    app.pointer("/status/pools")?.as_array()?.iter().find(|p| p["pool"] == pool)
}

/// The application's HelmReleases by pool.
pub async fn releases_by_pool(env: &TestEnv) -> BTreeMap<String, Value> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let list = api.list(&ListParams::default()).await.expect("list HelmReleases");
    list.items
        .into_iter()
        .filter_map(|hr| {
            let value = serde_json::to_value(&hr).ok()?;
            let pool = value.pointer(&format!(
                "/metadata/annotations/{}",
                naming::ANNOTATION_POOL_NAME.replace('/', "~1")
            ))?;
            Some((pool.as_str()?.to_string(), value))
        })
        .collect()
}

pub async fn wait_pools_with_releases(env: &TestEnv, controller: &RunningController, want: &[&str]) {
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    let result = tokio::time::timeout(CHANGE_TIMEOUT, async {
        loop {
            let have: Vec<String> = releases_by_pool(env).await.into_keys().collect();
            if have == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    if result.is_err() {
        let have: Vec<String> = releases_by_pool(env).await.into_keys().collect();
        panic!(
            "releases are for pools {have:?}, want {want:?}\n--- controller log ---\n{}",
            controller.log_tail()
        );
    }
}
