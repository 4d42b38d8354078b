//! What `deploy/` and the image promise each other, checked without a
//! cluster where no cluster can check it: the local control plane has no
//! kubelet to refuse a non-numeric user, and no network plugin to enforce
//! a NetworkPolicy.
//!
//! - The pod runs as the image's user, a numeric one: under `runAsNonRoot`
//!   the kubelet refuses to start a container whose user is a name
//!   ("cannot verify user is non-root").
//! - The NetworkPolicy that opens source-controller's artifact storage to
//!   the controller selects Flux's source-controller pods (as Flux's own
//!   manifests label them), the storage port (as they name it), and, as
//!   the only peers, the controller's pods in the controller's namespace.
//! - The notification-controller address that `deploy/` and the chart
//!   document for `--events-addr` is, by Flux's own manifests, the Service
//!   port that leads to its event server.
use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use support::{assert_runs_as_image_user, repo_root};

fn documents(path: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn object(path: &str, kind: &str) -> Value {
    let docs = documents(&repo_root().join(path));
    let mut found = docs.into_iter().filter(|d| d["kind"] == kind);
    let first = found.next().unwrap_or_else(|| panic!("{path} has no {kind}"));
    assert!(found.next().is_none(), "{path} has more than one {kind}");
    first
}

#[test]
fn the_pod_runs_as_the_images_numeric_non_root_user() {
    let deployment = object("deploy/deployment.yaml", "Deployment");
    assert_runs_as_image_user(&deployment["spec"]["template"]["spec"], "deploy/deployment.yaml");
}

/// Where the Go module of one of the plane's pinned components is, from
/// the module cache the plane's build filled.
fn module_dir(wrapper: &str, module: &str) -> PathBuf {
    let output = Command::new("go")
        .args(["mod", "download", "-json", module])
        .current_dir(repo_root().join("hack/controlplane").join(wrapper))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go could not be run: install Go (see the README's requirements)");
    assert!(
        output.status.success(),
        "go mod download {module}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let info: Value = serde_json::from_slice(&output.stdout).expect("go mod download -json");
    PathBuf::from(info["Dir"].as_str().expect("a module directory"))
}

/// The default of one of a pinned Flux controller's flags (such as
/// source-controller's `--storage-addr`), from the binary's own help.
fn flag_default(controller: &str, flag: &str) -> String {
    let binary = support::controlplane_bin().join(controller);
    let output = Command::new(&binary).arg("--help").output().expect("the controller's --help");
    let help =
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    let line = help
        .lines()
        .find(|l| l.contains(&format!("{flag} ")))
        .unwrap_or_else(|| panic!("{flag} in the help of {controller}"));
    let default = line.split("(default \"").nth(1).and_then(|rest| rest.split('"').next());
    default.unwrap_or_else(|| panic!("no default in {line:?}")).to_string()
}

fn port_of(addr: &str) -> i64 {
    let port = addr.rsplit(':').next().unwrap_or(addr);
    port.parse().unwrap_or_else(|_| panic!("no port in the address {addr:?}"))
}

/// Whether a `matchLabels` selector selects an object with `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let wanted = selector["matchLabels"].as_object().cloned().unwrap_or_default();
    assert!(selector.get("matchExpressions").is_none(), "only matchLabels is checked here: {selector}");
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn the_network_policy_opens_source_controllers_storage_to_the_controller_only() {
    let policy = object("deploy/networkpolicy.yaml", "NetworkPolicy");
    let deployment = object("deploy/deployment.yaml", "Deployment");
    // Flux's own manifest of source-controller, at the pinned version.
    let flux = module_dir("source-controller", "github.com/fluxcd/source-controller");
    let source_controller = documents(&flux.join("config/manager/deployment.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("source-controller's Deployment");
    let sc_pod = &source_controller["spec"]["template"];
    assert_eq!(policy["metadata"]["namespace"], "flux-system", "beside Flux, where its policies are");
    assert!(
        selects(&policy["spec"]["podSelector"], &sc_pod["metadata"]["labels"]),
        "the policy selects source-controller's pods: {} against {}",
        policy["spec"]["podSelector"],
        sc_pod["metadata"]["labels"]
    );
    assert_eq!(
        policy["spec"]["policyTypes"],
        json!(["Ingress"]),
        "it only admits: no egress rule is changed"
    );

    // The port: source-controller serves artifacts on --storage-addr (its
    // manifest leaves the flag at its default, which the binary tells),
    // and its container names that port.
    let container = &sc_pod["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let storage_port: i64 = match args.iter().find_map(|a| a.strip_prefix("--storage-addr=")) {
        Some(addr) => port_of(addr),
        None => port_of(&flag_default("source-controller", "--storage-addr")),
    };
    let named = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["containerPort"] == storage_port)
        .and_then(|p| p["name"].as_str())
        .expect("the storage port is named");
    let rules = policy["spec"]["ingress"].as_array().expect("ingress rules");
    assert_eq!(rules.len(), 1, "one rule: {rules:?}");
    let ports = rules[0]["ports"].as_array().expect("the rule names its ports");
    assert_eq!(ports.len(), 1, "{ports:?}");
    assert!(
        ports[0]["port"] == named || ports[0]["port"] == storage_port,
        "the rule admits the storage port ({named}, {storage_port}), not {}",
        ports[0]["port"]
    );

    // The peers: the controller's pods, in the controller's namespace.
    let peers = rules[0]["from"].as_array().expect("the rule names its peers");
    assert_eq!(peers.len(), 1, "{peers:?}");
    let namespace = deployment["metadata"]["namespace"]
        .as_str()
        .expect("the Deployment names its namespace");
    assert!(
        selects(&peers[0]["namespaceSelector"], &json!({ "kubernetes.io/metadata.name": namespace })),
        "the peer's namespace is the controller's ({namespace}): {}",
        peers[0]
    );
    assert!(
        selects(&peers[0]["podSelector"], &deployment["spec"]["template"]["metadata"]["labels"]),
        "the peer's pods are the controller's: {}",
        peers[0]
    );
    assert!(
        !selects(&peers[0]["podSelector"], &sc_pod["metadata"]["labels"]),
        "the peer selector is not so wide that it admits others"
    );
}

/// What the deploy files and the chart give as `--events-addr` (to turn on,
/// in a comment and a value's description).
const EVENTS_ADDR: &str = "http://notification-controller.flux-system.svc.cluster.local./";

#[test]
fn the_documented_events_address_is_notification_controllers_event_server() {
    for file in ["deploy/deployment.yaml", "charts/nodepool-fanout/values.yaml"] {
        let text = std::fs::read_to_string(repo_root().join(file)).expect("read the file");
        assert!(text.contains(EVENTS_ADDR), "{file} names {EVENTS_ADDR}");
    }
    let url = reqwest::Url::parse(EVENTS_ADDR).expect("a URL");
    let host = url.host_str().expect("a host");
    let (service_name, namespace) = host.split_once('.').expect("<service>.<namespace>.svc…");
    assert_eq!(namespace.split('.').next(), Some("flux-system"), "Flux's namespace");
    assert_eq!(url.port_or_known_default(), Some(80));

    // Flux's own manifests, at the pinned version: the Service of that name
    // on port 80 leads to the container port where the event server
    // listens (--events-addr, left at its default).
    let flux = module_dir("notification-controller", "github.com/fluxcd/notification-controller");
    let service = documents(&flux.join("config/manager/service.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Service" && d["metadata"]["name"] == service_name)
        .unwrap_or_else(|| panic!("notification-controller has no Service {service_name}"));
    let port = service["spec"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .find(|p| p["port"] == 80)
        .expect("the Service serves port 80")
        .clone();
    let deployment = documents(&flux.join("config/manager/deployment.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("notification-controller's Deployment");
    let pod = &deployment["spec"]["template"];
    assert!(selects(
        &json!({ "matchLabels": service["spec"]["selector"] }),
        &pod["metadata"]["labels"]
    ));
    let container = &pod["spec"]["containers"][0];
    let target = container["ports"]
        .as_array()
        .expect("container ports")
        .iter()
        .find(|p| p["name"] == port["targetPort"] || p["containerPort"] == port["targetPort"])
        .unwrap_or_else(|| panic!("no container port {}", port["targetPort"]));
    let args: Vec<&str> = container["args"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let events_port = match args.iter().find_map(|a| a.strip_prefix("--events-addr=")) {
        Some(addr) => port_of(addr),
        None => port_of(&flag_default("notification-controller", "--events-addr")),
    };
    assert_eq!(target["containerPort"], events_port, "port 80 leads to the event server, not {target}");
}
