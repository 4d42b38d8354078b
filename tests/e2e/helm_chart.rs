//! The Helm chart under `charts/nodepool-fanout` is a versioned install of
//! what `deploy/` installs, and the two are kept in step here:
//!
//! - rendered with its default values, the chart holds every object
//!   `kubectl kustomize deploy/` builds (the namespace aside: Helm or a
//!   HelmRelease makes it), under the same names, with the same RBAC rules,
//!   the same pod and container (security context, args, env, probes,
//!   ports, resources), the same NetworkPolicy and the CRD of `crds/`,
//!   and nothing more; a difference either way fails with what differs;
//! - non-default values land where they should, and contradictory ones
//!   are refused;
//! - the pod runs as the image's numeric user, as `tests/offline/deploy.rs`
//!   checks for `deploy/`;
//! - the API server of the local control plane accepts the render
//!   (`kubectl apply --dry-run=server`).

mod compare;
mod console;
mod values;

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::{assert_runs_as_image_user, repo_root};

use compare::{differences, Differences};

const CHART: &str = "charts/nodepool-fanout";
/// The release name and namespace under which the chart's objects are
/// named as `deploy/` names them.
const RELEASE: &str = "nodepool-fanout";
const NAMESPACE: &str = "nodepool-fanout-system";

fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(support::controlplane_bin)
}

/// This test's scratch directory: values files, Helm's own homes, renders.
fn scratch() -> PathBuf {
    let dir = repo_root().join("target/helm-chart-test");
    std::fs::create_dir_all(&dir).expect("create the test's scratch directory");
    dir
}

fn documents(text: &str, what: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{what} is not YAML: {e}\n{text}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// Runs the control plane's helm, isolated from any user configuration.
fn helm(args: &[&str]) -> std::process::Output {
    let home = scratch().join("helm-home");
    Command::new(bin_dir().join("helm"))
        .args(args)
        .current_dir(repo_root())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("helm could not be run")
}

/// `helm template` of the chart with `values` (and the chart's CRDs), as
/// text, or helm's complaint.
fn template_text(release: &str, namespace: &str, values: &Value) -> Result<String, String> {
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let file = scratch().join(format!(
        "values-{}-{}.json",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    ));
    // JSON is YAML: helm reads it as a values file.
    std::fs::write(&file, values.to_string()).expect("write a values file");
    let file_arg = file.to_string_lossy().into_owned();
    let output = helm(&[
        "template",
        release,
        CHART,
        "--namespace",
        namespace,
        "--include-crds",
        "--values",
        &file_arg,
    ]);
    let _ = std::fs::remove_file(&file);
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

fn render(release: &str, namespace: &str, values: &Value) -> Vec<Value> {
    let text = template_text(release, namespace, values)
        .unwrap_or_else(|e| panic!("helm template {CHART} with {values} failed:\n{e}"));
    documents(&text, "the chart's render")
}

fn render_defaults() -> Vec<Value> {
    render(RELEASE, NAMESPACE, &json!({}))
}

/// What `kubectl apply -k deploy/` applies.
fn deploy_objects() -> Vec<Value> {
    kustomize(&repo_root().join("deploy"))
}

/// What `kubectl kustomize dir` builds.
fn kustomize(dir: &Path) -> Vec<Value> {
    let output = Command::new(bin_dir().join("kubectl"))
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl could not be run");
    assert!(
        output.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    documents(&String::from_utf8_lossy(&output.stdout), "kubectl kustomize")
}

fn crds_file() -> Vec<Value> {
    let path = repo_root().join("crds/apps.fanout.dev_nodepoolapplications.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    documents(&text, "crds/apps.fanout.dev_nodepoolapplications.yaml")
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(objects, kind);
    assert_eq!(found.len(), 1, "one {kind} expected, found {}", found.len());
    found[0]
}

/// Whether every entry of the map `part` is in the map `whole`.
fn is_subset(part: &Value, whole: &Value) -> bool {
    part.as_object()
        .map(|m| m.iter().all(|(k, v)| whole.get(k) == Some(v)))
        .unwrap_or(true)
}

fn pod_selector(deployment: &Value) -> &Value {
    &deployment["spec"]["selector"]["matchLabels"]
}

#[test]
fn the_chart_is_this_version_of_the_controller() {
    let path = repo_root().join(CHART).join("Chart.yaml");
    let text = std::fs::read_to_string(&path).expect("read Chart.yaml");
    let chart = &documents(&text, "Chart.yaml")[0];
    assert_eq!(chart["apiVersion"], "v2", "{chart}");
    assert_eq!(chart["name"], "nodepool-fanout", "{chart}");
    assert_eq!(chart["version"], "0.1.0", "{chart}");
    assert_eq!(
        chart["appVersion"],
        env!("CARGO_PKG_VERSION"),
        "the chart's appVersion is the package's version (Cargo.toml)"
    );
    let deployment = render_defaults()
        .into_iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    let image = &deployment["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(
        image.as_str().and_then(|i| i.rsplit_once(':')).map(|(_, tag)| tag),
        Some(env!("CARGO_PKG_VERSION")),
        "the default image tag is the appVersion: {image}"
    );
}

#[test]
fn helm_lint_passes() {
    let output = helm(&["lint", "--strict", CHART]);
    assert!(
        output.status.success(),
        "helm lint --strict {CHART}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_default_render_installs_what_deploy_installs() {
    let differences = differences(&deploy_objects(), &render_defaults(), "deploy/");
    differences.assert_none(&format!(
        "helm template {RELEASE} {CHART} --namespace {NAMESPACE} (default values) against deploy/"
    ));
}

#[test]
fn the_chart_installs_the_crd_of_crds() {
    // The chart's crds/ links to the committed CRD: one source, which
    // tests/offline/crd_drift.rs keeps in step with the Rust types.
    let committed = crds_file();
    let rendered: Vec<Value> = of_kind(&render_defaults(), "CustomResourceDefinition")
        .into_iter()
        .cloned()
        .collect();
    let mut diffs = Differences::against("crds/");
    diffs.equal("the CRDs", &json!(committed), &json!(rendered));
    diffs.assert_none("the chart's CRDs against crds/");
}

#[test]
fn the_charts_pod_runs_as_the_images_numeric_non_root_user() {
    let chart = render_defaults();
    assert_runs_as_image_user(&one(&chart, "Deployment")["spec"]["template"]["spec"], "the chart");
}

/// Shard, resources, scheduling, image, flags (notifications among them),
/// a ServiceMonitor and no NetworkPolicy.
fn monitored_shard_values() -> Value {
    json!({
        "replicaCount": 3,
        "image": { "repository": "registry.example/edge/nodepool-fanout", "tag": "9.9.9", "pullPolicy": "Always" },
        "shard": "shard1",
        "watchNamespace": "fleet-a",
        "concurrency": 8,
        "resync": "10m",
        "logFormat": "text",
        "logLevel": "info,nodepool_fanout=debug",
        "noCrossNamespaceRefs": false,
        "eventsAddr": "http://notification-controller.flux-system.svc.cluster.local./",
        "extraArgs": ["--kube-api-qps=100"],
        "extraEnv": [{ "name": "EXTRA", "value": "1" }],
        "resources": {
            "requests": { "cpu": "100m", "memory": "128Mi" },
            "limits": { "cpu": "1", "memory": "512Mi" }
        },
        "nodeSelector": { "kubernetes.io/os": "linux" },
        "tolerations": [{ "key": "dedicated", "operator": "Equal", "value": "control", "effect": "NoSchedule" }],
        "podAnnotations": { "example.com/team": "edge" },
        "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": "node-role.kubernetes.io/control-plane", "operator": "Exists" }
            ] }]
        } } },
        "networkPolicy": { "enabled": false },
        "serviceMonitor": { "enabled": true, "interval": "30s", "labels": { "release": "prometheus" } }
    })
}

/// Applies a render with `kubectl apply --dry-run=server`: the API server
/// validates and admits every object without storing it.
fn server_dry_run(name: &str, objects: &[Value]) {
    // A stream of documents, as `helm template` writes: each JSON, which is YAML.
    let stream: String = objects.iter().map(|o| format!("---\n{o}\n")).collect();
    let file = scratch().join(format!("{name}.yaml"));
    std::fs::write(&file, stream).expect("write the render");
    let output = support::kubectl(&["apply", "--dry-run=server", "-f", &file.to_string_lossy()]);
    let accepted = output.lines().filter(|l| l.ends_with("(server dry run)")).count();
    assert_eq!(accepted, objects.len(), "every object of {name} passes the server's dry run:\n{output}");
}

#[test]
fn the_api_server_accepts_the_render() {
    // The server dry-runs namespaced objects only into namespaces that
    // exist: the release's, of this test's own (deploy/'s namespace is
    // other tests'), and Flux's, which the control plane has.
    let namespace = "helm-chart-dry-run";
    support::kubectl(&["get", "namespace", "flux-system"]);
    let own = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace } });
    let file = scratch().join("namespace.json");
    std::fs::write(&file, own.to_string()).expect("write the namespace");
    let file = file.to_string_lossy().into_owned();
    support::kubectl(&["apply", "-f", &file]);

    server_dry_run("dry-run-defaults", &render(RELEASE, namespace, &json!({})));

    // Non-default values, with the NetworkPolicy back on. The
    // ServiceMonitor is left out: its CRD (the Prometheus Operator's) is
    // not installed on the control plane, so the server knows no such
    // kind; non_default_values_land checks what it selects.
    let mut values = monitored_shard_values();
    values["networkPolicy"]["enabled"] = json!(true);
    let kept: Vec<Value> = render("sharded", namespace, &values)
        .into_iter()
        .filter(|o| o["kind"] != "ServiceMonitor")
        .collect();
    assert_eq!(of_kind(&kept, "Service").len(), 1, "the metrics Service is dry-run too");
    assert_eq!(of_kind(&kept, "NetworkPolicy").len(), 1, "the NetworkPolicy is dry-run too");
    server_dry_run("dry-run-shard", &kept);

    support::kubectl(&["delete", "--wait=false", "-f", &file]);
}
