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
use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use serde_json::{json, Value};
use support::{assert_runs_as_image_user, repo_root};

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

/// An object's identity: kind, namespace (empty when cluster-scoped), name.
type Key = (String, String, String);

fn key(object: &Value) -> Key {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

fn show(key: &Key) -> String {
    match key.1.as_str() {
        "" => format!("{} {}", key.0, key.2),
        namespace => format!("{} {namespace}/{}", key.0, key.2),
    }
}

fn by_key(objects: &[Value]) -> BTreeMap<Key, Value> {
    let mut map = BTreeMap::new();
    for object in objects {
        let previous = map.insert(key(object), object.clone());
        assert!(previous.is_none(), "{} twice", show(&key(object)));
    }
    map
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(objects, kind);
    assert_eq!(found.len(), 1, "one {kind} expected, found {}", found.len());
    found[0]
}

fn keys_of(value: &Value) -> BTreeSet<String> {
    value.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// Whether every entry of the map `part` is in the map `whole`.
fn is_subset(part: &Value, whole: &Value) -> bool {
    part.as_object()
        .map(|m| m.iter().all(|(k, v)| whole.get(k) == Some(v)))
        .unwrap_or(true)
}

/// The differences found between `deploy/` (or `crds/`) and the chart,
/// each saying where and what.
struct Differences {
    /// What the chart is compared with.
    reference: &'static str,
    found: Vec<String>,
}

impl Differences {
    fn against(reference: &'static str) -> Self {
        Differences {
            reference,
            found: Vec::new(),
        }
    }

    /// Reports the innermost fields that differ, so that a difference deep
    /// in a CRD's schema names its path rather than the whole schema.
    fn equal(&mut self, what: &str, deploy: &Value, chart: &Value) {
        match (deploy, chart) {
            (Value::Object(d), Value::Object(c)) => {
                let names: BTreeSet<&String> = d.keys().chain(c.keys()).collect();
                for name in names {
                    let null = Value::Null;
                    let (dv, cv) = (d.get(name).unwrap_or(&null), c.get(name).unwrap_or(&null));
                    self.equal(&format!("{what}.{name}"), dv, cv);
                }
            }
            (Value::Array(d), Value::Array(c)) if d.len() == c.len() => {
                for (i, (dv, cv)) in d.iter().zip(c).enumerate() {
                    self.equal(&format!("{what}[{i}]"), dv, cv);
                }
            }
            // A number is a number: kustomize writes 86400.0 as 86400.
            (Value::Number(d), Value::Number(c)) if d.as_f64() == c.as_f64() => {}
            _ if deploy != chart => {
                let reference = self.reference;
                self.found.push(format!("{what}: {reference} has {deploy}, the chart {chart}"))
            }
            _ => {}
        }
    }

    fn require(&mut self, what: &str, holds: bool, detail: String) {
        if !holds {
            self.found.push(format!("{what}: {detail}"));
        }
    }

    /// Compares every field of two maps, but those in `skip` (compared by
    /// the caller); fields in `chart_only` may be in the chart alone.
    fn fields(&mut self, what: &str, deploy: &Value, chart: &Value, skip: &[&str], chart_only: &[&str]) {
        let names: BTreeSet<String> = keys_of(deploy).union(&keys_of(chart)).cloned().collect();
        for name in names {
            if skip.contains(&name.as_str()) {
                continue;
            }
            let (d, c) = (deploy.get(&name), chart.get(&name));
            if d.is_none() && chart_only.contains(&name.as_str()) {
                continue;
            }
            self.equal(&format!("{what}.{name}"), d.unwrap_or(&Value::Null), c.unwrap_or(&Value::Null));
        }
    }

    /// Every label and annotation `deploy/` sets, the chart sets alike (it
    /// adds Helm's own).
    fn metadata(&mut self, what: &str, deploy: &Value, chart: &Value) {
        for field in ["labels", "annotations"] {
            self.require(
                &format!("{what}.{field}"),
                is_subset(&deploy[field], &chart[field]),
                format!("{} has {}, the chart {}", self.reference, deploy[field], chart[field]),
            );
        }
    }

    fn assert_none(self, context: &str) {
        assert!(
            self.found.is_empty(),
            "{context}: {} difference(s):\n  - {}",
            self.found.len(),
            self.found.join("\n  - ")
        );
    }
}

fn pod_selector(deployment: &Value) -> &Value {
    &deployment["spec"]["selector"]["matchLabels"]
}

fn compare_deployment(diffs: &mut Differences, what: &str, deploy: &Value, chart: &Value) {
    let (ds, cs) = (&deploy["spec"], &chart["spec"]);
    diffs.fields(&format!("{what}.spec"), ds, cs, &["selector", "template"], &[]);
    diffs.require(
        &format!("{what}.spec.selector"),
        is_subset(pod_selector(deploy), pod_selector(chart)),
        format!("deploy/ selects {}, the chart {}", ds["selector"], cs["selector"]),
    );
    let (dt, ct) = (&ds["template"], &cs["template"]);
    diffs.require(
        &format!("{what}: the chart's selector"),
        is_subset(pod_selector(chart), &ct["metadata"]["labels"]),
        format!("{} does not select its pods {}", cs["selector"], ct["metadata"]["labels"]),
    );
    diffs.metadata(&format!("{what}.spec.template.metadata"), &dt["metadata"], &ct["metadata"]);
    diffs.fields(&format!("{what}.spec.template"), dt, ct, &["metadata", "spec"], &[]);
    // The pod: the chart may add scheduling of its own (by default, away
    // from edge nodes); everything else is deploy/'s.
    let (dp, cp) = (&dt["spec"], &ct["spec"]);
    let pod = format!("{what} pod");
    diffs.fields(&pod, dp, cp, &["containers"], &["affinity"]);
    let containers = |pod: &Value| -> BTreeMap<String, Value> {
        pod["containers"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .map(|c| (c["name"].as_str().unwrap_or("").to_string(), c.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (dcs, ccs) = (containers(dp), containers(cp));
    diffs.equal(
        &format!("{pod}: containers"),
        &json!(dcs.keys().collect::<Vec<_>>()),
        &json!(ccs.keys().collect::<Vec<_>>()),
    );
    for (name, dc) in &dcs {
        let Some(cc) = ccs.get(name) else { continue };
        let container = format!("{pod}: container {name}");
        diffs.fields(&container, dc, cc, &["image"], &["imagePullPolicy"]);
        let repository = |c: &Value| {
            let image = c["image"].as_str().unwrap_or_default().to_string();
            let tagless = image.rsplit_once(':').map(|(r, _)| r.to_string()).unwrap_or(image);
            json!(tagless)
        };
        diffs.equal(&format!("{container}: image repository"), &repository(dc), &repository(cc));
    }
}

/// The NetworkPolicy: the same policy, its peers the chart's own pods (the
/// chart's selector, which also names the release) in the same namespace;
/// one that guards the Deployment's own pods guards the chart's.
fn compare_network_policy(
    diffs: &mut Differences,
    what: &str,
    (deploy, deploy_deployment): (&Value, &Value),
    (chart, chart_deployment): (&Value, &Value),
) {
    let (ds, cs) = (&deploy["spec"], &chart["spec"]);
    if ds["podSelector"]["matchLabels"] == *pod_selector(deploy_deployment) {
        diffs.fields(&format!("{what}.spec"), ds, cs, &["ingress", "podSelector"], &[]);
        diffs.require(
            &format!("{what}.spec.podSelector"),
            cs["podSelector"]["matchLabels"] == *pod_selector(chart_deployment),
            format!("the chart's {} is not its Deployment's pods", cs["podSelector"]),
        );
    } else {
        diffs.fields(&format!("{what}.spec"), ds, cs, &["ingress"], &[]);
    }
    let rules = |spec: &Value| spec["ingress"].as_array().cloned().unwrap_or_default();
    let (dr, cr) = (rules(ds), rules(cs));
    diffs.equal(&format!("{what}: ingress rules"), &json!(dr.len()), &json!(cr.len()));
    for (i, (d, c)) in dr.iter().zip(&cr).enumerate() {
        let rule = format!("{what}.spec.ingress[{i}]");
        diffs.fields(&rule, d, c, &["from"], &[]);
        let peers = |rule: &Value| rule["from"].as_array().cloned().unwrap_or_default();
        let (dp, cp) = (peers(d), peers(c));
        diffs.equal(&format!("{rule}: peers"), &json!(dp.len()), &json!(cp.len()));
        for (j, (dpeer, cpeer)) in dp.iter().zip(&cp).enumerate() {
            let peer = format!("{rule}.from[{j}]");
            diffs.fields(&peer, dpeer, cpeer, &["podSelector"], &[]);
            diffs.require(
                &format!("{peer}.podSelector"),
                dpeer["podSelector"]["matchLabels"] == *pod_selector(deploy_deployment),
                format!("deploy/'s peer {} is not its Deployment's pods", dpeer["podSelector"]),
            );
            diffs.require(
                &format!("{peer}.podSelector"),
                cpeer["podSelector"]["matchLabels"] == *pod_selector(chart_deployment),
                format!("the chart's peer {} is not its Deployment's pods", cpeer["podSelector"]),
            );
        }
    }
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

/// What differs between what `deploy` (a kustomize build) and `chart` (a
/// render) hold.
fn differences(deploy: &[Value], chart: &[Value], reference: &'static str) -> Differences {
    let (deploy_map, chart_map) = (by_key(deploy), by_key(chart));

    // The same objects, by kind, namespace and name; the namespace is made
    // by Helm (--create-namespace) or the HelmRelease.
    let wanted: BTreeSet<&Key> = deploy_map.keys().filter(|k| k.0 != "Namespace").collect();
    let rendered: BTreeSet<&Key> = chart_map.keys().collect();
    let mut diffs = Differences::against(reference);
    for k in wanted.difference(&rendered) {
        diffs.found.push(format!("{reference} has {}, the chart does not", show(k)));
    }
    for k in rendered.difference(&wanted) {
        diffs.found.push(format!("the chart has {}, {reference} does not", show(k)));
    }

    let deploy_deployment = one(deploy, "Deployment");
    let chart_deployment = one(chart, "Deployment");
    for (k, d) in &deploy_map {
        let Some(c) = chart_map.get(k) else { continue };
        let what = show(k);
        diffs.metadata(&format!("{what} metadata"), &d["metadata"], &c["metadata"]);
        match k.0.as_str() {
            "Namespace" => {}
            "Deployment" => compare_deployment(&mut diffs, &what, d, c),
            "PodDisruptionBudget" => {
                diffs.fields(&format!("{what}.spec"), &d["spec"], &c["spec"], &["selector"], &[]);
                diffs.require(
                    &format!("{what}.spec.selector"),
                    c["spec"]["selector"]["matchLabels"] == *pod_selector(chart_deployment),
                    format!("{} is not the Deployment's pods", c["spec"]["selector"]),
                );
            }
            "NetworkPolicy" => {
                compare_network_policy(&mut diffs, &what, (d, deploy_deployment), (c, chart_deployment))
            }
            "Service" => {
                diffs.fields(&format!("{what}.spec"), &d["spec"], &c["spec"], &["selector"], &[]);
                diffs.require(
                    &format!("{what}.spec.selector"),
                    c["spec"]["selector"] == *pod_selector(chart_deployment),
                    format!("{} is not the Deployment's pods", c["spec"]["selector"]),
                );
            }
            // The CRD whole; RBAC rules, aggregation, role references and
            // subjects; and whatever kind deploy/ may gain.
            _ => diffs.fields(&what, d, c, &["metadata"], &[]),
        }
    }
    diffs
}

fn is_console(object: &Value) -> bool {
    object["metadata"]["name"].as_str().is_some_and(|n| n.contains("-console"))
}

#[test]
fn the_console_is_off_by_default_and_renders_what_deploy_console_installs() {
    let defaults = render_defaults();
    assert!(!defaults.iter().any(is_console), "the default render has a console");
    assert!(!deploy_objects().iter().any(is_console), "deploy/ installs a console");

    let read_only = kustomize(&repo_root().join("deploy/console"));
    let chart: Vec<Value> = render(RELEASE, NAMESPACE, &json!({ "console": { "enabled": true } }))
        .into_iter()
        .filter(is_console)
        .collect();
    differences(&read_only, &chart, "deploy/console").assert_none("console.enabled against deploy/console");

    // With the proxy component, as its kustomization says to include it.
    let with_proxy = console_with("proxy");
    let chart: Vec<Value> =
        render(RELEASE, NAMESPACE, &json!({ "console": { "enabled": true, "identity": "proxy" } }))
            .into_iter()
            .filter(is_console)
            .collect();
    differences(&kustomize(&with_proxy), &chart, "deploy/console with proxy/")
        .assert_none("console.identity=proxy against deploy/console with proxy/");
    // Behind the proxy, only the proxy is reachable: the console on the
    // Pod's loopback with no port of its own, the Pod admitting the
    // proxy's port alone.
    let pod = &one(&chart, "Deployment")["spec"]["template"]["spec"];
    let console = &pod["containers"][0];
    assert!(
        console["args"]
            .as_array()
            .is_some_and(|a| a.contains(&json!("--address=127.0.0.1:8090"))),
        "{console}"
    );
    assert!(console.get("ports").is_none(), "the console's own port is open: {console}");
    assert_eq!(pod["containers"][1]["ports"], json!([{ "name": "http", "containerPort": 4180 }]));
    let policy = one(&chart, "NetworkPolicy");
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(policy["spec"]["ingress"], json!([{ "ports": [{ "protocol": "TCP", "port": "http" }] }]));
    assert_eq!(one(&chart, "Service")["spec"]["ports"][0]["targetPort"], "http");

    // Its own identity, never the controller's, and no write but Events.
    let deployment = one(&chart, "Deployment");
    assert_eq!(deployment["spec"]["template"]["spec"]["serviceAccountName"], "nodepool-fanout-console");
    assert_runs_as_image_user(&deployment["spec"]["template"]["spec"], "the console's Deployment");
    let reads = of_kind(&read_only, "ClusterRole");
    assert_eq!(reads.len(), 1);
    for rule in reads[0]["rules"].as_array().expect("rules") {
        let verbs: BTreeSet<&str> =
            rule["verbs"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let resources = &rule["resources"];
        let allowed: BTreeSet<&str> = match resources[0].as_str() {
            Some("events") => ["create", "patch", "list", "watch"].into(),
            Some("selfsubjectreviews") => ["create"].into(),
            _ => ["get", "list", "watch"].into(),
        };
        assert!(verbs.is_subset(&allowed), "the console may {verbs:?} {resources}");
    }
}

/// deploy/console with one of its components, as a kustomization of the
/// user's own includes it.
fn console_with(component: &str) -> std::path::PathBuf {
    let dir = scratch().join(format!("console-{component}"));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    // Kustomize takes only relative paths.
    let depth = dir
        .strip_prefix(repo_root())
        .expect("scratch is in the repository")
        .components()
        .count();
    let console = format!("{}deploy/console", "../".repeat(depth));
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!("resources: [{console}]\ncomponents: [{console}/{component}]\n"),
    )
    .expect("a kustomization");
    dir
}

#[test]
fn the_console_that_signs_people_in_renders_what_deploy_console_oidc_installs() {
    let chart: Vec<Value> =
        render(RELEASE, NAMESPACE, &json!({ "console": { "enabled": true, "identity": "oidc" } }))
            .into_iter()
            .filter(is_console)
            .collect();
    differences(&kustomize(&console_with("oidc")), &chart, "deploy/console with oidc/")
        .assert_none("console.identity=oidc against deploy/console with oidc/");
    // One container, serving its own port, its settings from the Secret;
    // allowed to act as the people it signs in.
    let pod = &one(&chart, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["containers"].as_array().map(Vec::len), Some(1), "{pod}");
    let console = &pod["containers"][0];
    assert_eq!(console["args"], json!(["ui", "--address=0.0.0.0:8090", "--identity=oidc"]));
    assert_eq!(console["envFrom"], json!([{ "secretRef": { "name": "nodepool-fanout-console-oidc" } }]));
    assert_eq!(of_kind(&chart, "ClusterRole").len(), 2, "reads, and impersonation");
    assert!(
        of_kind(&chart, "NetworkPolicy").is_empty(),
        "it signs people in itself: no proxy to guard"
    );

    // The values are the flags, in the API server's words.
    let values = json!({ "console": { "enabled": true, "identity": "oidc", "oidc": {
        "issuerURL": "https://dex.example.test", "clientID": "fleet", "redirectURL": "https://fleet.example.test/auth/callback",
        "usernameClaim": "email", "groupsClaim": "roles", "groupsPrefix": "oidc:", "extraScopes": ["groups", "email"],
        "sessionLifetime": "4h" } } });
    let chart: Vec<Value> = render(RELEASE, NAMESPACE, &values).into_iter().filter(is_console).collect();
    let args = &one(&chart, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"];
    for flag in [
        "--oidc-issuer-url=https://dex.example.test",
        "--oidc-client-id=fleet",
        "--oidc-redirect-url=https://fleet.example.test/auth/callback",
        "--oidc-username-claim=email",
        "--oidc-groups-claim=roles",
        "--oidc-groups-prefix=oidc:",
        "--oidc-extra-scope=groups,email",
        "--session-lifetime=4h",
    ] {
        assert!(args.as_array().is_some_and(|a| a.contains(&json!(flag))), "{flag} in {args}");
    }
    assert!(!args.to_string().contains("username-prefix"), "an empty value is no flag: {args}");
}

#[test]
fn a_console_identity_that_is_not_known_is_refused() {
    let refused =
        template_text(RELEASE, NAMESPACE, &json!({ "console": { "enabled": true, "identity": "kerberos" } }));
    let message = refused.expect_err("rendered an unknown identity");
    assert!(message.contains("console.identity must be none, proxy or oidc"), "{message}");
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

/// The long flags `nodepool-fanout run` accepts, from its own help.
fn run_flags() -> BTreeSet<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_nodepool-fanout"))
        .args(["run", "--help"])
        .output()
        .expect("nodepool-fanout run --help");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

fn container(objects: &[Value]) -> &Value {
    &one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
}

fn args(objects: &[Value]) -> Vec<String> {
    container(objects)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string argument").to_string())
        .collect()
}

fn assert_flags_known(objects: &[Value]) {
    let known = run_flags();
    for arg in args(objects).iter().skip(1) {
        let flag = arg.split('=').next().unwrap_or(arg);
        assert!(known.contains(flag), "`nodepool-fanout run` has no flag {flag} (the chart passes {arg})");
    }
}

fn env_value<'a>(container: &'a Value, name: &str) -> &'a Value {
    container["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == name))
        .map(|e| &e["value"])
        .unwrap_or(&Value::Null)
}

/// Shard, resources, scheduling, image, flags (notifications among them),
/// a ServiceMonitor and no NetworkPolicy.
fn monitored_shard_values() -> Value {
    json!({
        "replicaCount": 3,
        "image": { "repository": "registry.example/edge/nodepool-fanout", "tag": "9.9.9", "pullPolicy": "Always" },
        "shard": "shard1",
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

#[test]
fn non_default_values_land() {
    let defaults = render_defaults();
    assert_flags_known(&defaults);
    let edge_rule = &one(&defaults, "Deployment")["spec"]["template"]["spec"]["affinity"];
    let terms =
        &edge_rule["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    assert_eq!(
        terms,
        &json!([{ "matchExpressions": [
            { "key": "openyurt.io/is-edge-worker", "operator": "NotIn", "values": ["true"] },
            { "key": "node-role.kubernetes.io/edge", "operator": "DoesNotExist" }
        ] }]),
        "by default the controller keeps off OpenYurt's and KubeEdge's edge nodes"
    );

    // A monitored shard, without the NetworkPolicy.
    let objects = render(RELEASE, NAMESPACE, &monitored_shard_values());
    assert_flags_known(&objects);
    assert_eq!(
        args(&objects),
        [
            "run",
            "--log-format=text",
            "--leader-election=true",
            "--no-cross-namespace-refs=false",
            "--watch-label-selector=sharding.fluxcd.io/key=shard1",
            "--concurrent=8",
            "--resync=10m",
            "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
            "--kube-api-qps=100",
        ]
    );
    let deployment = one(&objects, "Deployment");
    let pod = &deployment["spec"]["template"];
    let c = container(&objects);
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(c["image"], "registry.example/edge/nodepool-fanout:9.9.9");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(env_value(c, "RUST_LOG"), "info,nodepool_fanout=debug");
    assert_eq!(env_value(c, "EXTRA"), "1");
    assert_eq!(c["resources"], monitored_shard_values()["resources"]);
    assert_eq!(pod["spec"]["nodeSelector"], json!({ "kubernetes.io/os": "linux" }));
    assert_eq!(pod["spec"]["tolerations"], monitored_shard_values()["tolerations"]);
    assert_eq!(
        pod["spec"]["affinity"],
        monitored_shard_values()["affinity"],
        "the given nodeSelectorTerms replace the default edge rule"
    );
    assert_eq!(pod["metadata"]["annotations"]["example.com/team"], "edge");
    assert_eq!(
        pod["metadata"]["annotations"]["prometheus.io/scrape"], "true",
        "podAnnotations add to the defaults"
    );
    assert!(of_kind(&objects, "NetworkPolicy").is_empty(), "networkPolicy.enabled=false");
    assert_eq!(one(&objects, "PodDisruptionBudget")["spec"]["minAvailable"], 1);

    // The ServiceMonitor scrapes the metrics Service, which serves the pods' metrics port.
    let monitor = one(&objects, "ServiceMonitor");
    let service = one(&objects, "Service");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["namespace"], NAMESPACE);
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert!(
        is_subset(&monitor["spec"]["selector"]["matchLabels"], &service["metadata"]["labels"]),
        "the ServiceMonitor selects the Service: {} against {}",
        monitor["spec"]["selector"],
        service["metadata"]["labels"]
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["interval"], "30s");
    assert_eq!(endpoint["path"], "/metrics");
    let service_port = &service["spec"]["ports"][0];
    assert_eq!(endpoint["port"], service_port["name"], "the endpoint names the Service's port");
    assert_eq!(service["spec"]["selector"], *pod_selector(deployment), "the Service selects the pods");
    let ports = c["ports"].as_array().expect("container ports");
    assert!(
        ports.iter().any(|p| p["name"] == service_port["targetPort"]),
        "the Service targets the container's port: {service_port} against {ports:?}"
    );

    // Another release in another namespace, Flux elsewhere, one replica
    // serving the unsharded rest, scheduled anywhere.
    let values = json!({
        "replicaCount": 1,
        "leaderElection": false,
        "watchLabelSelector": "!sharding.fluxcd.io/key",
        "fluxNamespace": "flux",
        "affinity": null
    });
    let objects = render("edge", "fanout", &values);
    assert_flags_known(&objects);
    assert_eq!(
        args(&objects),
        [
            "run",
            "--log-format=json",
            "--leader-election=false",
            "--no-cross-namespace-refs=true",
            "--watch-label-selector=!sharding.fluxcd.io/key"
        ]
    );
    let deployment = one(&objects, "Deployment");
    assert!(
        deployment["spec"]["template"]["spec"].get("affinity").is_none(),
        "affinity: null drops the edge rule"
    );
    assert!(of_kind(&objects, "PodDisruptionBudget").is_empty(), "no PDB for a single replica");
    assert!(of_kind(&objects, "ServiceMonitor").is_empty() && of_kind(&objects, "Service").is_empty());
    let policy = one(&objects, "NetworkPolicy");
    assert_eq!(policy["metadata"]["namespace"], "flux", "the policy is beside Flux");
    let peer = &policy["spec"]["ingress"][0]["from"][0];
    assert_eq!(peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"], "fanout");
    assert_eq!(peer["podSelector"]["matchLabels"], *pod_selector(deployment));
    let service_account = one(&objects, "ServiceAccount");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        service_account["metadata"]["name"]
    );
    for object in &objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let namespace = &object["metadata"]["namespace"];
        match kind {
            "CustomResourceDefinition" | "ClusterRole" | "ClusterRoleBinding" => {
                assert!(namespace.is_null(), "{kind} is cluster-scoped: {namespace}")
            }
            "NetworkPolicy" => {}
            _ => assert_eq!(
                namespace, "fanout",
                "{kind} {} is in the release's namespace",
                object["metadata"]["name"]
            ),
        }
        if kind.ends_with("Binding") {
            assert_eq!(
                object["subjects"],
                json!([{ "kind": "ServiceAccount", "name": service_account["metadata"]["name"], "namespace": "fanout" }]),
                "{kind} binds the release's ServiceAccount"
            );
        }
        if kind.starts_with("Cluster") {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            assert!(name.starts_with("edge-"), "cluster-wide names are the release's own: {name}");
        }
    }
}

#[test]
fn contradictory_values_are_refused() {
    for (values, expected) in [
        (json!({ "shard": "a", "watchLabelSelector": "x=y" }), "not both"),
        (json!({ "replicaCount": 2, "leaderElection": false }), "needs leaderElection"),
        (json!({ "logFormat": "yaml" }), "logFormat"),
    ] {
        match template_text(RELEASE, NAMESPACE, &values) {
            Ok(_) => panic!("helm template accepted {values}"),
            Err(e) => assert!(e.contains(expected), "{values}: {e}"),
        }
    }
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
