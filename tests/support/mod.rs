//! Test support for the end-to-end tests: the local control plane, a
//! namespace of the test's own, OpenYurt node pools of kwok nodes, and
//! polling helpers.
//!
//! The control plane is the one `hack/cluster.sh up` starts; when
//! `KUBECONFIG` names another cluster's kubeconfig, that cluster is used as
//! it is. A control plane that cannot start fails the test with the
//! component's log tail: end-to-end tests are never skipped.

pub mod apps;
#[allow(dead_code)] // the benches' helpers: no test uses them
pub mod bench;
pub mod browser;
pub mod gitops;
#[allow(dead_code)] // the benches' helpers: no test uses them
pub mod plane_meter;
pub mod prometheus;

mod controller;
mod env;

pub use controller::RunningController;
pub use env::TestEnv;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The label that joins a node to an OpenYurt node pool.
pub const POOL_LABEL: &str = "apps.openyurt.io/nodepool";

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn local_kubeconfig() -> PathBuf {
    repo_root().join("target/local-cluster/kubeconfig")
}

/// Set in a test binary whose tests each run on a control plane of their
/// own (`PrivateCluster`, tests/private_plane/): a helper that would reach
/// the shared plane there fails the test instead.
pub static SHARED_PLANE_REFUSED: AtomicBool = AtomicBool::new(false);

/// Starts the local control plane once per test binary, unless `KUBECONFIG`
/// points at a cluster other than ours, and returns the kubeconfig to use.
fn kubeconfig_path() -> &'static Path {
    assert!(
        !SHARED_PLANE_REFUSED.load(Ordering::SeqCst),
        "this test runs on a control plane of its own: pass its kubeconfig (PrivateCluster::env, ::controller), not the shared plane's"
    );
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let ours = local_kubeconfig();
        if let Some(theirs) = std::env::var_os("KUBECONFIG").map(PathBuf::from) {
            if theirs != ours {
                assert!(
                    theirs.is_file(),
                    "KUBECONFIG={} names no file: unset it to use the local control plane",
                    theirs.display()
                );
                return theirs;
            }
        }
        let output = Command::new(repo_root().join("hack/cluster.sh"))
            .arg("up")
            .output()
            .expect("hack/cluster.sh could not be run");
        assert!(
            output.status.success(),
            "the local control plane did not start (hack/cluster.sh up exited {}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        ours
    })
}

/// A client for the test cluster. Each test makes its own: a client's
/// connections belong to the runtime of the test that made it.
pub async fn client() -> Client {
    client_of(kubeconfig_path()).await
}

/// A client for the cluster of a kubeconfig file.
pub async fn client_of(path: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("cannot read kubeconfig {}: {e}", path.display()));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("invalid kubeconfig {}: {e}", path.display()));
    Client::try_from(config).expect("cannot build a client for the test cluster")
}

/// The kubeconfig file the tests use, for child processes such as the
/// controller binary.
pub fn kubeconfig() -> &'static Path {
    kubeconfig_path()
}

/// The cluster inventory API's ClusterProfile: a site that is a cluster.
pub fn clusterprofile_resource() -> ApiResource {
    ApiResource {
        group: "multicluster.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "multicluster.x-k8s.io/v1alpha1".into(),
        kind: "ClusterProfile".into(),
        plural: "clusterprofiles".into(),
    }
}

pub fn nodepool_resource() -> ApiResource {
    ApiResource {
        group: "apps.openyurt.io".into(),
        version: "v1beta1".into(),
        api_version: "apps.openyurt.io/v1beta1".into(),
        kind: "NodePool".into(),
        plural: "nodepools".into(),
    }
}

/// KubeEdge's NodeGroups.
pub fn nodegroup_resource() -> ApiResource {
    ApiResource {
        group: "apps.kubeedge.io".into(),
        version: "v1alpha1".into(),
        api_version: "apps.kubeedge.io/v1alpha1".into(),
        kind: "NodeGroup".into(),
        plural: "nodegroups".into(),
    }
}

/// SuperEdge's NodeUnits.
pub fn nodeunit_resource() -> ApiResource {
    ApiResource {
        group: "site.superedge.io".into(),
        version: "v1alpha2".into(),
        api_version: "site.superedge.io/v1alpha2".into(),
        kind: "NodeUnit".into(),
        plural: "nodeunits".into(),
    }
}

pub use nodepool_fanout::{chart::source::helmchart_resource, reconcile::observe::helmrelease_resource};

/// A short random suffix, so concurrent tests and repeated runs never share
/// a name.
pub fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let count = {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    };
    format!("{:05x}", (nanos ^ (std::process::id() << 8) ^ count.wrapping_mul(7919)) & 0xfffff)
}

/// Polls `check` until it returns `Some`, failing the test after `timeout`
/// with `what` and the last state `check` described.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(value) => return value,
            Err(state) => state,
        };
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}; last seen: {last}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The local control plane's binaries (kubectl among them), built or cached.
pub fn controlplane_bin() -> PathBuf {
    let output = Command::new(repo_root().join("hack/controlplane/build.sh"))
        .output()
        .expect("hack/controlplane/build.sh could not be run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// Runs kubectl of the local control plane against the test cluster.
pub fn kubectl(args: &[&str]) -> String {
    let output = Command::new(controlplane_bin().join("kubectl"))
        .args(args)
        .env("KUBECONFIG", kubeconfig())
        .current_dir(repo_root())
        .output()
        .expect("kubectl could not be run");
    assert!(
        output.status.success(),
        "kubectl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A kubeconfig acting as a service account, by impersonation from the
/// admin identity, written beside the test logs.
pub fn kubeconfig_as(namespace: &str, service_account: &str) -> PathBuf {
    let mut config = Kubeconfig::read_from(kubeconfig()).expect("read the kubeconfig");
    for user in &mut config.auth_infos {
        if let Some(auth) = user.auth_info.as_mut() {
            auth.impersonate = Some(format!("system:serviceaccount:{namespace}:{service_account}"));
            auth.impersonate_groups = Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ]);
        }
    }
    let dir = repo_root().join("target/e2e-logs");
    std::fs::create_dir_all(&dir).expect("create target/e2e-logs");
    let path = dir.join(format!("{namespace}-{service_account}.kubeconfig"));
    let yaml = serde_saphyr::to_string(&config).expect("serialize the kubeconfig");
    std::fs::write(&path, yaml).expect("write the kubeconfig");
    path
}

/// Waits until exactly `count` pods matching `selector` run in the test's
/// namespace, and returns them.
pub async fn running_pods(env: &TestEnv, selector: &str, count: usize, timeout: Duration) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.namespace);
    wait_for(&format!("{count} Running pods of {selector}"), timeout, || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default().labels(selector)).await.map_err(|e| e.to_string())?;
            let running: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .collect();
            if running.len() == count {
                Ok(running)
            } else {
                Err(format!("{} running", running.len()))
            }
        }
    })
    .await
}

/// The node a pod is bound to.
pub fn node_of(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

/// The status of a condition of `type_` on an object, if it has one.
pub fn condition<'a>(obj: &'a serde_json::Value, type_: &str) -> Option<&'a serde_json::Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(|t| t.as_str()) == Some(type_))
}

/// Installs (or updates) the NodePoolApplication CRD from the Rust types and
/// waits until the API server serves it.
pub async fn ensure_crd(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    use kube::CustomResourceExt;
    let crd = nodepool_fanout::api::NodePoolApplication::crd();
    let name = crd.metadata.name.clone().expect("the CRD has a name");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(&name, &PatchParams::apply("nodepool-fanout-e2e").force(), &Patch::Apply(&crd))
        .await
        .unwrap_or_else(|e| panic!("cannot apply CRD {name}: {e}"));
    wait_for("the NodePoolApplication CRD to be Established", Duration::from_secs(30), || {
        let api = api.clone();
        let name = name.clone();
        async move {
            let crd = api.get(&name).await.map_err(|e| e.to_string())?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                Ok(())
            } else {
                Err("not established".into())
            }
        }
    })
    .await
}

/// `USER` of the image's last stage, as `(uid, gid)`: the pod specs of
/// `deploy/` and of the Helm chart must run as it.
pub fn image_user() -> (i64, i64) {
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).expect("read the Dockerfile");
    let last_stage = dockerfile.rsplit("\nFROM ").next().expect("a FROM line");
    let user = last_stage
        .lines()
        .filter_map(|l| l.trim().strip_prefix("USER "))
        .next_back()
        .expect("the image's last stage sets USER");
    let (uid, gid) = user.trim().split_once(':').unwrap_or((user.trim(), user.trim()));
    let number = |part: &str| {
        part.parse::<i64>().unwrap_or_else(|_| {
            panic!("the image's USER {user:?} is not numeric: the kubelet cannot verify a name is not root")
        })
    };
    (number(uid), number(gid))
}

/// What Flux's kstatus (the library inside kustomize-controller's health
/// checks, built as `kstatus` with the local control plane) reads each
/// object as, in order: Current, InProgress, Failed, Terminating or
/// Unknown.
pub fn kstatus_all(objects: &[serde_json::Value]) -> Vec<String> {
    use std::io::Write;
    use std::process::Stdio;
    let checker = controlplane_bin().join("kstatus");
    let mut child = Command::new(&checker)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", checker.display()));
    let lines: String = objects.iter().map(|o| format!("{o}\n")).collect();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(lines.as_bytes())
        .expect("write the objects");
    let output = child.wait_with_output().expect("kstatus ran");
    assert!(output.status.success(), "kstatus failed: {}", String::from_utf8_lossy(&output.stderr));
    let read: Vec<String> = String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect();
    assert_eq!(read.len(), objects.len(), "one reading per object: {read:?}");
    read
}

/// What kstatus reads one object as.
pub fn kstatus(object: &serde_json::Value) -> String {
    kstatus_all(std::slice::from_ref(object)).remove(0)
}

/// Asserts that a pod spec runs as the image's numeric non-root user, and
/// that no container overrides it: under `runAsNonRoot` the kubelet
/// refuses a user it cannot verify is not root.
pub fn assert_runs_as_image_user(pod: &serde_json::Value, whose: &str) {
    let (uid, gid) = image_user();
    assert_ne!(uid, 0, "the image runs as root");
    let security = &pod["securityContext"];
    assert_eq!(security["runAsNonRoot"], true, "{whose}: {security}");
    assert_eq!(security["runAsUser"], uid, "{whose}: the pod's user is the image's: {security}");
    assert_eq!(security["runAsGroup"], gid, "{whose}: the pod's group is the image's: {security}");
    for container in pod["containers"].as_array().expect("containers") {
        let own = &container["securityContext"];
        for field in ["runAsUser", "runAsGroup", "runAsNonRoot"] {
            assert!(
                own.get(field).is_none_or(|v| v == &security[field]),
                "{whose}: container {} overrides {field}: {own}",
                container["name"]
            );
        }
    }
}
