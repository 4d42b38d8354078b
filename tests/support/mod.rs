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

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::json;

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

/// One test's world: a namespace and the node pools and nodes it made.
/// `cleanup` removes all of it; a failed test leaves it for inspection
/// until `make cluster-down`.
pub struct TestEnv {
    pub client: Client,
    pub namespace: String,
    /// Prefix of every cluster-scoped name this test makes.
    pub prefix: String,
    pools: Vec<String>,
    nodes: Vec<String>,
    /// Other cluster-scoped objects it made (NodeGroups, NodeUnits).
    objects: Vec<(ApiResource, String)>,
}

impl TestEnv {
    pub async fn new(test: &str) -> Self {
        Self::with_client(test, client().await).await
    }

    /// As `new`, on the cluster of another kubeconfig (a private control
    /// plane's).
    #[allow(dead_code)] // the private planes' binary's, not the shared plane's
    pub async fn on(test: &str, kubeconfig: &Path) -> Self {
        Self::with_client(test, client_of(kubeconfig).await).await
    }

    async fn with_client(test: &str, client: Client) -> Self {
        let prefix = format!("{test}-{}", unique_suffix());
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": { "name": prefix, "labels": { "nodepool-fanout.test/e2e": "true" } }
        }))
        .expect("namespace manifest");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("cannot create namespace {prefix}: {e}"));
        TestEnv {
            client,
            namespace: prefix.clone(),
            prefix,
            pools: Vec::new(),
            nodes: Vec::new(),
            objects: Vec::new(),
        }
    }

    /// The full name of a pool of this test: `<prefix>-<short>`.
    pub fn pool_name(&self, short: &str) -> String {
        format!("{}-{short}", self.prefix)
    }

    /// Creates an OpenYurt NodePool with the given labels and `nodes` kwok
    /// nodes joined to it, and returns the pool's full name.
    pub async fn create_pool(&mut self, short: &str, labels: &[(&str, &str)], nodes: usize) -> String {
        let name = self.pool_name(short);
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        let pool: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apps.openyurt.io/v1beta1",
            "kind": "NodePool",
            "metadata": { "name": name, "labels": labels },
            "spec": { "type": "Edge" }
        }))
        .expect("node pool manifest");
        let pools: Api<DynamicObject> = Api::all_with(self.client.clone(), &nodepool_resource());
        pools
            .create(&PostParams::default(), &pool)
            .await
            .unwrap_or_else(|e| panic!("cannot create node pool {name}: {e}"));
        self.pools.push(name.clone());
        for i in 0..nodes {
            self.create_node(&format!("{name}-node-{i}"), &name).await;
        }
        name
    }

    /// Creates one OpenYurt pool per region, of one kwok node each, named
    /// after the region and labelled `e2e=<prefix>` and `region=<region>`
    /// (what `apps::ingress_app` selects and templates), and returns their
    /// full names.
    pub async fn create_region_pools(&mut self, regions: &[&str]) -> Vec<String> {
        let tag = self.prefix.clone();
        let mut names = Vec::new();
        for region in regions {
            names.push(self.create_pool(region, &[("e2e", &tag), ("region", region)], 1).await);
        }
        names
    }

    /// Creates a kwok node in an OpenYurt pool: kwok turns it Ready and
    /// runs the pods bound to it.
    pub async fn create_node(&mut self, node: &str, pool: &str) {
        self.create_labelled_node(node, &[(POOL_LABEL, pool)]).await;
    }

    /// Creates a kwok node with these labels besides kwok's own. Where a
    /// framework's controller would label a pool's nodes (yurt-manager,
    /// KubeEdge's controller manager, SuperEdge's site-manager), the test
    /// gives the node that label itself, as kwok plays the kubelet.
    pub async fn create_labelled_node(&mut self, node: &str, labels: &[(&str, &str)]) {
        let mut all: BTreeMap<&str, &str> = BTreeMap::from([
            ("kubernetes.io/hostname", node),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("type", "kwok"),
        ]);
        all.extend(labels.iter().copied());
        let manifest: Node = serde_json::from_value(json!({
            "metadata": {
                "name": node,
                "annotations": { "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0" },
                "labels": all
            }
        }))
        .expect("node manifest");
        let api: Api<Node> = Api::all(self.client.clone());
        api.create(&PostParams::default(), &manifest)
            .await
            .unwrap_or_else(|e| panic!("cannot create node {node}: {e}"));
        self.nodes.push(node.to_string());
    }

    /// Names of the nodes of an OpenYurt pool, as the API server lists them.
    pub async fn nodes_of(&self, pool: &str) -> Vec<String> {
        self.nodes_labelled(&format!("{POOL_LABEL}={pool}")).await
    }

    /// Names of the nodes a label selector matches.
    pub async fn nodes_labelled(&self, selector: &str) -> Vec<String> {
        let api: Api<Node> = Api::all(self.client.clone());
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap_or_else(|e| panic!("cannot list nodes {selector}: {e}"));
        list.items.into_iter().filter_map(|n| n.metadata.name).collect()
    }

    /// Creates a cluster-scoped object (a NodeGroup, a NodeUnit) that
    /// `cleanup` deletes.
    pub async fn create_cluster_object(&mut self, resource: &ApiResource, manifest: serde_json::Value) {
        let object: DynamicObject = serde_json::from_value(manifest).expect("object manifest");
        let name = object.metadata.name.clone().expect("the object has a name");
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("cannot create {} {name}: {e}", resource.kind));
        self.objects.push((resource.clone(), name));
    }

    /// Removes the namespace, pools and nodes this test made. The nodes go
    /// last: kwok must still be running the pods when Helm uninstalls them,
    /// or they hang in Terminating.
    pub async fn cleanup(self) {
        let dp = DeleteParams::default();
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let _ = namespaces.delete(&self.namespace, &dp).await;
        let pools: Api<DynamicObject> = Api::all_with(self.client.clone(), &nodepool_resource());
        for p in &self.pools {
            let _ = pools.delete(p, &dp).await;
        }
        for (resource, name) in &self.objects {
            let _ = Api::<DynamicObject>::all_with(self.client.clone(), resource).delete(name, &dp).await;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match namespaces.get_opt(&self.namespace).await {
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(500)).await,
                _ => break,
            }
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        for n in &self.nodes {
            let _ = nodes.delete(n, &dp).await;
        }
    }
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

/// The controller binary, running against the test cluster and watching only
/// one test's namespace; killed when dropped. Its log is
/// `target/e2e-logs/<namespace>.log`.
pub struct RunningController {
    child: std::process::Child,
    pub log: PathBuf,
    /// Where it serves /metrics, /healthz and /readyz.
    pub metrics_addr: std::net::SocketAddr,
    /// Run under `CONTROLLER_WRAPPER`, in a process group of its own.
    wrapped: bool,
}

impl RunningController {
    pub fn start(namespace: &str) -> Self {
        Self::start_with(namespace, &[])
    }

    /// As `start`, with further flags for `nodepool-fanout run`.
    pub fn start_with(namespace: &str, flags: &[&str]) -> Self {
        Self::start_as(namespace, flags, kubeconfig())
    }

    /// As `start_with`, with the identity of another kubeconfig.
    pub fn start_as(namespace: &str, flags: &[&str], kubeconfig: &Path) -> Self {
        Self::start_full(namespace, flags, kubeconfig, &[])
    }

    /// As `start_with`, with further environment variables (POD_NAME…).
    pub fn start_env(namespace: &str, flags: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_full(namespace, flags, kubeconfig(), env)
    }

    fn start_full(namespace: &str, flags: &[&str], kubeconfig: &Path, env: &[(&str, &str)]) -> Self {
        let dir = repo_root().join("target/e2e-logs");
        std::fs::create_dir_all(&dir).expect("cannot create target/e2e-logs");
        let suffix = env
            .iter()
            .find(|(k, _)| *k == "POD_NAME")
            .map(|(_, v)| format!("-{v}"))
            .unwrap_or_default();
        let log = dir.join(format!("{namespace}{suffix}.log"));
        let file = std::fs::File::create(&log).expect("cannot create the controller's log file");
        // Many controllers run at once, one per test: each on a free port.
        let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port");
        use std::os::unix::process::CommandExt;
        let binary = env!("CARGO_BIN_EXE_nodepool-fanout");
        // `CONTROLLER_WRAPPER="heaptrack -o target/profile"` runs the
        // controller under a profiler; the process figures read from /proc
        // are then the wrapper's.
        let wrapper = std::env::var("CONTROLLER_WRAPPER").unwrap_or_default();
        let mut words = wrapper.split_whitespace();
        let wrapped = !wrapper.trim().is_empty();
        let mut command = match words.next() {
            Some(program) => {
                let mut command = Command::new(program);
                command.args(words).arg(binary).process_group(0);
                command
            }
            None => Command::new(binary),
        };
        // The fixture repositories live in flux-system, shared by every
        // test's namespace as one team shares them: cross-namespace
        // references are allowed unless a test says otherwise.
        let tenancy = ["--no-cross-namespace-refs=false"];
        let tenancy = match flags.iter().any(|f| f.starts_with("--no-cross-namespace-refs")) {
            true => &tenancy[..0],
            false => &tenancy[..],
        };
        let child = command
            .args(["run", "--watch-namespace", namespace])
            .args(["--metrics-addr", &metrics_addr.to_string()])
            .args(tenancy)
            .args(flags)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,nodepool_fanout=debug")
            .envs(env.iter().copied())
            .stdout(file.try_clone().expect("log file handle"))
            .stderr(file)
            .spawn()
            .expect("cannot start the nodepool-fanout binary");
        RunningController {
            child,
            log,
            metrics_addr,
            wrapped,
        }
    }

    /// The controller's log so far, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl RunningController {
    /// Whether the process is still alive: it has neither exited nor been
    /// restarted.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The controller's /metrics, in the text exposition format.
    pub async fn scrape(&self) -> String {
        let url = format!("http://{}/metrics", self.metrics_addr);
        let response = reqwest::get(&url).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert!(response.status().is_success(), "GET {url}: {}", response.status());
        response.text().await.unwrap_or_else(|e| panic!("GET {url}: {e}"))
    }

    /// A counter of the controller's metrics, summed over the series
    /// `filter` keeps.
    pub async fn counter(&self, name: &str, filter: impl Fn(&str) -> bool) -> u64 {
        self.scrape()
            .await
            .lines()
            .filter(|l| l.starts_with(name) && filter(l))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// The controller's reconciles so far.
    pub async fn reconciles(&self) -> u64 {
        self.counter("nodepool_fanout_reconciles_total", |_| true).await
    }

    /// Waits until no reconcile happened for `still`, and returns the
    /// count; fails after five minutes of reconciles that never stop (a
    /// reconcile that wakes itself).
    pub async fn quiet(&self, still: Duration) -> u64 {
        let start = Instant::now();
        let mut last = self.reconciles().await;
        loop {
            tokio::time::sleep(still).await;
            let now = self.reconciles().await;
            if now == last {
                return now;
            }
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "reconciles never stop: {} in the last {still:?}\n{}",
                now - last,
                self.log_tail()
            );
            last = now;
        }
    }

    /// The process id, to read its memory and CPU time from /proc.
    #[allow(dead_code)] // read by benches/scale.rs, by no test
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crashing node would: no lease release, no clean-up.
    pub fn kill(&mut self) {
        if self.wrapped {
            // The controller is the wrapper's child: a signal to the group
            // reaches it, and the wrapper then writes out what it recorded.
            let _ = Command::new("kill").args(["-TERM", "--", &format!("-{}", self.child.id())]).status();
        } else {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl RunningController {
    /// Sends SIGTERM, as the kubelet stops a pod, and waits up to `within`
    /// for the process to exit; returns how long it took, or `None` if it
    /// is still running (then it is killed).
    pub fn terminate(&mut self, within: Duration) -> Option<Duration> {
        let start = std::time::Instant::now();
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        while start.elapsed() < within {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill();
        None
    }

    /// The HTTP status of `/readyz`.
    pub async fn readyz(&self) -> u16 {
        let url = format!("http://{}/readyz", self.metrics_addr);
        match reqwest::get(&url).await {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        }
    }
}

impl Drop for RunningController {
    fn drop(&mut self) {
        self.kill();
    }
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
