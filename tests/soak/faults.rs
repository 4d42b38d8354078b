//! The soak's world and its faults: each drawn from the seed's generator,
//! injected through the API server (or by killing the controller), and
//! said in one line.

mod draw;
mod fault;
mod foreign;
mod heal;
mod inject;
mod query_api;
mod shards;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use rand::RngExt;
use rand_xorshift::XorShiftRng;
use serde_json::{json, Value};

use crate::support::apps::{apply_app, ingress_app};
use crate::support::{ensure_crd, helmrelease_resource, nodepool_resource, RunningController, TestEnv};
use kube::ResourceExt;
use nodepool_fanout::api::naming::{self, LABEL_APPLICATION};
use nodepool_fanout::api::{NodePoolApplication, RolloutPhase};

pub use fault::Fault;
use foreign::create_foreign;
use shards::{set_shard, SHARD_NAMES};

/// The applications, each with its rollout.
const APPS: [(&str, &str); 4] = [
    // Each pool soaks a few seconds before it is done (`minReadySeconds`).
    (
        "halt",
        r#"{ "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "20s", "minReadySeconds": 3 }"#,
    ),
    (
        "back",
        r#"{ "strategy": "Progressive", "maxUnavailable": 2, "onFailure": "Rollback", "offlineAfter": "20s" }"#,
    ),
    ("all", r#"{ "strategy": "AllAtOnce", "offlineAfter": "20s" }"#),
    // Its steps are filled in with the first pools' names (see `gate_steps`).
    ("gate", r#"{ "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "20s" }"#),
];
/// The applications whose Helm releases are stored in a namespace of
/// their own (`helmRelease.storageNamespace`), shared by the two.
const STORED_APART: [&str; 2] = ["back", "all"];
/// The application whose pools soak on a metric check, asked of the
/// soak's own query API (`minReadySeconds` 3).
pub const CHECKED: &str = "halt";
/// The label of a broken pool.
const BROKEN: &str = "soak-broken";
/// The application whose second step needs approval.
const GATE: usize = 3;
/// Helm's wait for each install and upgrade (see `SETTLE_WITHIN`).
pub const HELM_TIMEOUT: &str = "60s";
/// Pools at the start; faults add and remove some.
const POOLS: usize = 4;
/// Pools that stay selected and reachable, whatever the faults.
const IN_PLAY: usize = 3;

/// The parts of the control plane a fault restarts: Flux's two, and the
/// API server itself (every watch, ours and the checker's, starts over).
const COMPONENTS: [&str; 3] = ["helm-controller", "source-controller", "kube-apiserver"];
/// The soak's own query API, which a fault stops too: the checked
/// application's pools soak on unanswered checks meanwhile.
const QUERY_API: &str = "query-api";
/// What a restart fault draws from.
const STOPPED: [&str; 4] = [COMPONENTS[0], COMPONENTS[1], COMPONENTS[2], QUERY_API];

/// Two soaks share the control plane (`make test` runs two seeds): one
/// restart at a time, so neither starts what the other just stopped.
static RESTARTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What the soak has made, and what it has done to it.
pub struct World {
    pub env: TestEnv,
    rng: XorShiftRng,
    /// The controller instances, one per shard (one in all unless
    /// `SHARDS=2`); `None` while one is down.
    controllers: Vec<Option<RunningController>>,
    /// How many times each instance was started, for its log's name.
    started: Vec<usize>,
    /// The shard that serves each application.
    shard_of: Vec<usize>,
    /// Each application's manifest as last applied.
    manifests: Vec<Value>,
    /// The pools made, in order; deleted ones stay, so that indices drawn
    /// from the seed name the same pool in a replay.
    pools: Vec<String>,
    deleted: BTreeSet<String>,
    cut: BTreeSet<String>,
    /// Pools taken out of the selection.
    left: BTreeSet<String>,
    /// Per application, the pools its never-open window names, and those
    /// its always-open one does.
    closed: [BTreeSet<String>; APPS.len()],
    opened: [BTreeSet<String>; APPS.len()],
    /// The halted revisions a reconcile was requested for, after the faults.
    requested: BTreeSet<String>,
    /// Pools labelled broken, until healed.
    broken: BTreeSet<String>,
    /// The gated application's revisions seen, for stale approvals.
    gate_revisions: Vec<String>,
    /// Someone else's HelmReleases made under the name one of our
    /// releases would take; given up (deleted by their owner) when the
    /// faults stop.
    claimants: Vec<String>,
    /// What was wrong with a claimant when it was given up.
    claimants_touched: Vec<String>,
    /// Pools added that are not broken, so far.
    added_whole: usize,
    /// Good changes drawn, so far.
    good_changes: usize,
    /// Per application, its values before its last change, for an undo.
    values_before: Vec<Option<Value>>,
    injected: usize,
    /// Faults injected, by kind.
    by_kind: std::collections::BTreeMap<&'static str, u64>,
    /// The query API the checked application's metric checks ask.
    pub query_api: query_api::QueryApi,
}

impl World {
    /// A namespace, `POOLS` pools of one kwok node each, the controller
    /// (`shards` instances of it, each serving its shard).
    pub async fn new(seed: u64, rng: XorShiftRng, shards: usize) -> Self {
        let mut env = TestEnv::new(&format!("soak{}", seed % 1000)).await;
        ensure_crd(&env.client).await;
        let tag = env.prefix.clone();
        let mut pools = Vec::new();
        for i in 0..POOLS {
            pools.push(env.create_pool(&format!("p{i}"), &[("e2e", &tag), ("region", "east")], 1).await);
        }
        create_foreign(&env).await;
        let shards = shards.clamp(1, SHARD_NAMES.len());
        let mut world = Self {
            env,
            rng,
            controllers: (0..shards).map(|_| None).collect(),
            started: vec![0; shards],
            shard_of: (0..APPS.len()).map(|app| app % shards).collect(),
            manifests: Vec::new(),
            pools,
            deleted: BTreeSet::new(),
            cut: BTreeSet::new(),
            left: BTreeSet::new(),
            closed: Default::default(),
            opened: Default::default(),
            gate_revisions: Vec::new(),
            claimants: Vec::new(),
            claimants_touched: Vec::new(),
            added_whole: 0,
            good_changes: 0,
            values_before: vec![None; APPS.len()],
            broken: BTreeSet::new(),
            requested: BTreeSet::new(),
            injected: 0,
            by_kind: Default::default(),
            query_api: query_api::QueryApi::start().await,
        };
        for shard in 0..shards {
            world.start_controller(shard);
        }
        world
    }

    /// The applications, applied.
    pub async fn install(&mut self) {
        // Two applications keep their Helm releases in a namespace of
        // their own (`storageNamespace`): where the claims on Helm
        // releases live, and where the isolation rule keys them.
        let storage = format!("{}-helm", self.env.namespace);
        let namespace = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": storage } });
        let resource = kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&());
        self.env.create_cluster_object(&resource, namespace).await;
        for (name, rollout) in APPS {
            let rollout: Value = serde_json::from_str(rollout).expect("a rollout in JSON");
            let mut manifest = ingress_app(&self.env, json!({ "rollout": rollout }));
            manifest["metadata"]["name"] = json!(name);
            // Helm's own wait is bounded below the settle bound: an install
            // that a restart left waiting on a watch that never answers
            // fails within it and is requested again, as a person would
            // (Helm's default, 5 minutes, is longer than `SETTLE_WITHIN`).
            manifest["spec"]["helmRelease"] = json!({ "timeout": HELM_TIMEOUT });
            if STORED_APART.contains(&name) {
                manifest["spec"]["helmRelease"]["storageNamespace"] = json!(storage);
            }
            // One IngressClass per application and pool: the applications
            // share the pools, and must not share an object.
            manifest["spec"]["values"]["controller"]["ingressClass"]["name"] =
                json!("{{app.namespace}}-{{app.name}}-{{pool.name}}");
            // A pool labelled broken gets values Helm refuses: a new
            // pool whose install fails, whatever the revision.
            manifest["spec"]["overrides"] = json!([{
                "pools": { "selector": { "matchLabels": { BROKEN: "true" } } },
                "values": { "controller": { "service": { "port": 70000 } } }
            }]);
            if name == CHECKED {
                manifest["spec"]["rollout"]["analysis"] = query_api::analysis(&self.query_api.address);
            }
            if name == APPS[GATE].0 {
                manifest["spec"]["rollout"]["steps"] = gate_steps(&self.pools);
            }
            let app = self.manifests.len();
            set_shard(&mut manifest, self.shard_of[app]);
            apply_app(&self.env, &manifest).await.expect("the application is accepted");
            self.manifests.push(manifest);
        }
    }

    /// A breath between faults, drawn too.
    pub async fn pause(&mut self) {
        let secs = self.rng.random_range(2..8);
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }

    pub fn injected(&self) -> usize {
        self.injected
    }

    /// The faults injected, by kind, as lines of a table.
    pub fn injected_by_kind(&self) -> String {
        let mut lines = format!("{:<28} {:>6}\n", "fault", "count");
        for (kind, n) in &self.by_kind {
            lines.push_str(&format!("{kind:<28} {n:>6}\n"));
        }
        lines
    }

    /// The controller's resident memory now, as its metrics say (the
    /// most any instance holds); `None` while none answers (just restarted).
    pub async fn controller_memory(&self) -> Option<u64> {
        let mut most = None;
        for controller in self.controllers.iter().flatten() {
            let url = format!("http://{}/metrics", controller.metrics_addr);
            let Some(text) = async { reqwest::get(&url).await.ok()?.text().await.ok() }.await else {
                continue;
            };
            let line = text.lines().find(|l| l.starts_with("process_resident_memory_bytes "));
            let bytes = line.and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
            most = most.max(bytes.map(|b| b as u64));
        }
        most
    }

    /// Every application and its releases as the API server serves them now.
    pub async fn applications(&self) -> Vec<(Value, Vec<Value>)> {
        let apps: Api<NodePoolApplication> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let Ok(apps) = apps.list(&ListParams::default()).await else {
            return Vec::new();
        };
        let Ok(all) = releases(&self.env).list(&ListParams::default()).await else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for app in apps.items {
            let uid = app.metadata.uid.clone().unwrap_or_default();
            // Owned by it: the foreign release carries its label, not its ownership.
            let of_app = all
                .items
                .iter()
                .filter(|r| r.owner_references().iter().any(|o| o.uid == uid && o.controller == Some(true)))
                .filter_map(|r| serde_json::to_value(r).ok())
                .collect();
            if let Ok(app) = serde_json::to_value(&app) {
                out.push((app, of_app));
            }
        }
        out
    }
}

async fn apply(env: &TestEnv, manifest: &Value) {
    // A write the API server refuses (a conflict under a restart) is part
    // of the weather: the next fault writes again.
    if let Err(e) = apply_app(env, manifest).await {
        println!("  (not applied: {e})");
    }
}

/// The gated application's steps: a canary, then a step that needs
/// approval; every other pool (added ones too) is of the last wave.
fn gate_steps(pools: &[String]) -> Value {
    json!([
        { "name": "canary", "pools": { "names": [pools[0]] } },
        { "name": "rest", "pools": { "names": [pools[1], pools[2]] }, "requireApproval": true }
    ])
}

/// Writes the gated application's approval annotation, as
/// `nodepool-fanout approve` would.
async fn approve(env: &TestEnv, approval: &str) {
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let patch = json!({ "metadata": { "annotations": { naming::ANNOTATION_APPROVE: approval } } });
    let params = PatchParams {
        field_manager: Some("soak-approver".into()),
        ..PatchParams::default()
    };
    if let Err(e) = apps.patch(APPS[GATE].0, &params, &Patch::Merge(&patch)).await {
        println!("  (not approved: {e})");
    }
}

/// `hack/cluster.sh` on the shared control plane; a failure is the soak's.
async fn cluster(args: &[&str]) {
    let mut command = tokio::process::Command::new(crate::support::repo_root().join("hack/cluster.sh"));
    command.args(args);
    let output = command.output().await.unwrap_or_else(|e| panic!("hack/cluster.sh {args:?}: {e}"));
    assert!(
        output.status.success(),
        "hack/cluster.sh {args:?} failed: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn releases(env: &TestEnv) -> Api<DynamicObject> {
    Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource())
}

/// Hands the node back to kwok, which turns it Ready again.
async fn reconnect(env: &TestEnv, node: &str) {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let managed = json!({ "metadata": { "annotations": { "kwok.x-k8s.io/node": "fake" } } });
    let _ = nodes.patch(node, &PatchParams::default(), &Patch::Merge(&managed)).await;
}
