//! The soak's world and its faults: each drawn from the seed's generator,
//! injected through the API server (or by killing the controller), and
//! said in one line.

mod draw;
mod foreign;
mod heal;
mod inject;
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

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL, then a new process at once: of the one instance, or of
    /// the one serving `shard` (`SHARDS=2`).
    KillController {
        shard: Option<usize>,
    },
    /// The application moved to the other shard, by its
    /// `sharding.fluxcd.io/key` label (`SHARDS=2`).
    MoveShard {
        app: usize,
        to: usize,
    },
    /// A new revision every pool can take; with `window`, made in the
    /// same write that closes that pool's window (see `World::draw`).
    GoodChange {
        app: usize,
        level: u32,
        window: Option<usize>,
    },
    /// A new revision Helm refuses (a Service port out of range).
    BadChange {
        app: usize,
    },
    /// The application's last change of its values undone: its values as
    /// they were before it. Undone twice, a change is redone: a revision
    /// that comes back is rolled out afresh (docs/rollouts.md).
    Undo {
        app: usize,
    },
    Suspend {
        app: usize,
        suspended: bool,
    },
    Pause {
        app: usize,
        paused: bool,
    },
    /// A pool added; a `broken` one is labelled so that every
    /// application's override gives it values Helm refuses. Where
    /// `claimed` names an application, someone else made a HelmRelease
    /// under the name that application's release of the pool would take,
    /// before the pool came.
    AddPool {
        broken: bool,
        claimed: Option<usize>,
    },
    DeletePool {
        pool: usize,
    },
    /// The pool leaves the selection (`leaves`) or comes back to it.
    Relabel {
        pool: usize,
        leaves: bool,
    },
    /// A pool's node cut off, or handed back to kwok.
    CutNode {
        pool: usize,
        cut: bool,
    },
    /// A release's values changed by hand, under another field manager.
    HandEdit {
        release: usize,
    },
    /// A release deleted by hand.
    DeleteRelease {
        release: usize,
    },
    /// A maintenance window of the application that never opens
    /// (`closed`) now names the pool, or one always open does instead.
    Window {
        app: usize,
        pool: usize,
        closed: bool,
    },
    /// The gated application's step `rest` approved, for the revision
    /// under way or (`stale`) for one before it.
    Approve {
        stale: bool,
    },
    /// A part of the control plane stopped for `down`, then started again.
    Restart {
        component: &'static str,
        down: Duration,
    },
}

impl Fault {
    /// Its kind, as the summary counts faults.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::KillController { .. } => "controller killed",
            Self::MoveShard { .. } => "application moved to another shard",
            Self::GoodChange { window: None, .. } => "good change",
            Self::GoodChange { window: Some(_), .. } => "good change, a window closed",
            Self::BadChange { .. } => "bad change",
            Self::Undo { .. } => "change undone (or redone)",
            Self::Suspend { .. } => "suspend/resume",
            Self::Pause { .. } => "pause/resume",
            Self::AddPool { broken: true, .. } => "broken pool added",
            Self::AddPool { claimed: Some(_), .. } => "pool added, its name taken",
            Self::AddPool { .. } => "pool added",
            Self::DeletePool { .. } => "pool deleted",
            Self::Relabel { .. } => "pool relabelled",
            Self::CutNode { .. } => "node cut/reconnected",
            Self::Window { .. } => "window closed/opened",
            Self::HandEdit { .. } => "release edited by hand",
            Self::DeleteRelease { .. } => "release deleted by hand",
            Self::Approve { stale: false } => "approval",
            Self::Approve { stale: true } => "stale approval",
            Self::Restart { component, .. } => match *component {
                "helm-controller" => "helm-controller restarted",
                "source-controller" => "source-controller restarted",
                _ => "kube-apiserver restarted",
            },
        }
    }
}

/// The parts of the control plane a fault restarts: Flux's two, and the
/// API server itself (every watch, ours and the checker's, starts over).
const COMPONENTS: [&str; 3] = ["helm-controller", "source-controller", "kube-apiserver"];

/// Two soaks share the control plane (`make test` runs two seeds): one
/// restart at a time, so neither starts what the other just stopped.
static RESTARTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let app = |i: &usize| APPS[*i % APPS.len()].0;
        match self {
            Self::KillController { shard: None } => write!(f, "controller SIGKILLed and restarted"),
            Self::KillController { shard: Some(s) } => {
                write!(f, "controller of shard {} SIGKILLed and restarted", SHARD_NAMES[*s])
            }
            Self::MoveShard { app: a, to } => write!(f, "{}: moved to shard {}", app(a), SHARD_NAMES[*to]),
            Self::GoodChange {
                app: a,
                level,
                window: None,
            } => write!(f, "{}: a good change (log level v{level})", app(a)),
            Self::GoodChange {
                app: a,
                level,
                window: Some(pool),
            } => write!(
                f,
                "{}: a good change (log level v{level}), with pool #{pool}'s window closed in the same write",
                app(a)
            ),
            Self::BadChange { app: a } => write!(f, "{}: a change Helm refuses (port 70000)", app(a)),
            Self::Undo { app: a } => write!(f, "{}: its last change of values undone", app(a)),
            Self::Suspend { app: a, suspended } => write!(f, "{}: suspend: {suspended}", app(a)),
            Self::Pause { app: a, paused } => write!(f, "{}: rollout.paused: {paused}", app(a)),
            Self::AddPool { broken: true, .. } => write!(f, "a broken pool added (its override: port 70000)"),
            Self::AddPool { claimed: Some(a), .. } => {
                write!(f, "a pool added, whose {} release's name someone else's HelmRelease took", app(a))
            }
            Self::AddPool { .. } => write!(f, "a pool added"),
            Self::DeletePool { pool } => write!(f, "pool #{pool} deleted"),
            Self::Relabel { pool, leaves: true } => write!(f, "pool #{pool} leaves the selection"),
            Self::Relabel { pool, leaves: false } => write!(f, "pool #{pool} comes back to the selection"),
            Self::CutNode { pool, cut: true } => write!(f, "pool #{pool}'s node cut off"),
            Self::CutNode { pool, cut: false } => write!(f, "pool #{pool}'s node reconnected"),
            Self::HandEdit { release } => write!(f, "release #{release} edited by hand"),
            Self::DeleteRelease { release } => write!(f, "release #{release} deleted by hand"),
            Self::Window {
                app: a,
                pool,
                closed: true,
            } => {
                write!(f, "{}: pool #{pool}'s window closed (a window that never opens)", app(a))
            }
            Self::Window {
                app: a,
                pool,
                closed: false,
            } => {
                write!(f, "{}: pool #{pool}'s window opened (a window always open)", app(a))
            }
            Self::Approve { stale: false } => {
                write!(f, "gate: step rest approved for the revision under way")
            }
            Self::Approve { stale: true } => write!(f, "gate: step rest approved for an earlier revision"),
            Self::Restart { component, down } => {
                write!(f, "{component} stopped for {} s and started again", down.as_secs())
            }
        }
    }
}

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
        };
        for shard in 0..shards {
            world.start_controller(shard);
        }
        world
    }

    /// The applications, applied.
    pub async fn install(&mut self) {
        for (name, rollout) in APPS {
            let rollout: Value = serde_json::from_str(rollout).expect("a rollout in JSON");
            let mut manifest = ingress_app(&self.env, json!({ "rollout": rollout }));
            manifest["metadata"]["name"] = json!(name);
            // Helm's own wait is bounded below the settle bound: an install
            // that a restart left waiting on a watch that never answers
            // fails within it and is requested again, as a person would
            // (Helm's default, 5 minutes, is longer than `SETTLE_WITHIN`).
            manifest["spec"]["helmRelease"] = json!({ "timeout": HELM_TIMEOUT });
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
