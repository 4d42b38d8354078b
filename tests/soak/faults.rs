//! The soak's world and its faults: each drawn from the seed's generator,
//! injected through the API server (or by killing the controller), and
//! said in one line.

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

/// The applications, each with its rollout.
const APPS: [(&str, &str); 4] = [
    ("halt", r#"{ "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "20s" }"#),
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
/// Pools at the start; faults add and remove some.
const POOLS: usize = 4;
/// Pools that stay selected and reachable, whatever the faults.
const IN_PLAY: usize = 3;

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL, then a new process at once.
    KillController,
    /// A new revision every pool can take.
    GoodChange {
        app: usize,
        level: u32,
    },
    /// A new revision Helm refuses (a Service port out of range).
    BadChange {
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
            Self::KillController => "controller killed",
            Self::GoodChange { .. } => "good change",
            Self::BadChange { .. } => "bad change",
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
            Self::KillController => write!(f, "controller SIGKILLed and restarted"),
            Self::GoodChange { app: a, level } => write!(f, "{}: a good change (log level v{level})", app(a)),
            Self::BadChange { app: a } => write!(f, "{}: a change Helm refuses (port 70000)", app(a)),
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
    controller: Option<RunningController>,
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
    injected: usize,
    /// Faults injected, by kind.
    by_kind: std::collections::BTreeMap<&'static str, u64>,
}

impl World {
    /// A namespace, `POOLS` pools of one kwok node each, the controller.
    pub async fn new(seed: u64, rng: XorShiftRng) -> Self {
        let mut env = TestEnv::new(&format!("soak{}", seed % 1000)).await;
        ensure_crd(&env.client).await;
        let tag = env.prefix.clone();
        let mut pools = Vec::new();
        for i in 0..POOLS {
            pools.push(env.create_pool(&format!("p{i}"), &[("e2e", &tag), ("region", "east")], 1).await);
        }
        create_foreign(&env).await;
        let controller = Some(RunningController::start(&env.namespace));
        Self {
            env,
            rng,
            controller,
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
            broken: BTreeSet::new(),
            requested: BTreeSet::new(),
            injected: 0,
            by_kind: Default::default(),
        }
    }

    /// The applications, applied.
    pub async fn install(&mut self) {
        for (name, rollout) in APPS {
            let rollout: Value = serde_json::from_str(rollout).expect("a rollout in JSON");
            let mut manifest = ingress_app(&self.env, json!({ "rollout": rollout }));
            manifest["metadata"]["name"] = json!(name);
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
            apply_app(&self.env, &manifest).await.expect("the application is accepted");
            self.manifests.push(manifest);
        }
    }

    /// The next fault, from the seed's generator.
    ///
    /// The fleet hovers around its size: a pool is deleted only while more
    /// than `POOLS` exist, and taken out of the selection or cut off only
    /// while more than `IN_PLAY` are selected and reachable. A soak whose
    /// pools dwindle to one tests nothing a rollout does between pools.
    pub fn draw(&mut self) -> Fault {
        let app = self.rng.random_range(0..APPS.len());
        let live: Vec<usize> =
            (0..self.pools.len()).filter(|&i| !self.deleted.contains(&self.pools[i])).collect();
        let pool = match live.is_empty() {
            true => 0,
            false => live[self.rng.random_range(0..live.len())],
        };
        let name = self.pools.get(pool).cloned().unwrap_or_default();
        let in_play = (live.iter().map(|&i| &self.pools[i]))
            .filter(|p| !self.left.contains(*p) && !self.cut.contains(*p))
            .count();
        let release = self.rng.random_range(0..64);
        if live.is_empty() {
            return self.add_pool(false);
        }
        match self.rng.random_range(0..100) {
            0..8 => Fault::KillController,
            8..26 => Fault::GoodChange {
                app,
                level: self.rng.random_range(0..1000),
            },
            26..34 => Fault::BadChange { app },
            34..40 => Fault::Suspend {
                app,
                suspended: self.manifests[app]["spec"]["suspend"] != true,
            },
            40..46 => Fault::Pause {
                app,
                paused: self.manifests[app]["spec"]["rollout"]["paused"] != true,
            },
            46..54 => {
                let broken = self.rng.random_bool(0.3);
                self.add_pool(broken)
            }
            54..58 if live.len() > POOLS => Fault::DeletePool { pool },
            54..58 => self.add_pool(false),
            58..66 => Fault::Relabel {
                pool,
                leaves: !self.left.contains(&name) && in_play > IN_PLAY,
            },
            66..75 => Fault::CutNode {
                pool,
                cut: !self.cut.contains(&name) && in_play > IN_PLAY,
            },
            75..80 => Fault::Window {
                app,
                pool,
                closed: !self.closed[app].contains(&name),
            },
            80..86 => Fault::HandEdit { release },
            86..90 => Fault::DeleteRelease { release },
            90..95 => Fault::Approve {
                stale: self.rng.random_bool(0.3),
            },
            _ => Fault::Restart {
                component: COMPONENTS[self.rng.random_range(0..COMPONENTS.len())],
                down: Duration::from_secs(self.rng.random_range(1..15)),
            },
        }
    }

    /// A pool added. Every second pool added whole finds the name of one
    /// application's release taken (each application in turn): decided by
    /// the count, not drawn, so that the seeds' draws stay as they were.
    fn add_pool(&mut self, broken: bool) -> Fault {
        let claimed = match broken {
            true => None,
            false => {
                self.added_whole += 1;
                self.added_whole.is_multiple_of(2).then_some(self.added_whole / 2 % APPS.len())
            }
        };
        Fault::AddPool { broken, claimed }
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

    pub async fn inject(&mut self, fault: &Fault) {
        self.injected += 1;
        *self.by_kind.entry(fault.kind()).or_default() += 1;
        let env = &self.env;
        match fault {
            Fault::KillController => {
                drop(self.controller.take());
                self.controller = Some(RunningController::start(&env.namespace));
            }
            Fault::GoodChange { app, level } => {
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["values"]["controller"]["config"]["log-level"] = json!(format!("v{level}"));
                if let Some(controller) = manifest["spec"]["values"]["controller"].as_object_mut() {
                    controller.remove("service");
                }
                apply(env, manifest).await;
            }
            Fault::BadChange { app } => {
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["values"]["controller"]["service"] = json!({ "port": 70000 });
                apply(env, manifest).await;
            }
            Fault::Suspend { app, suspended } => {
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["suspend"] = json!(suspended);
                apply(env, manifest).await;
            }
            Fault::Pause { app, paused } => {
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["rollout"]["paused"] = json!(paused);
                apply(env, manifest).await;
            }
            Fault::AddPool { broken, claimed } => {
                // Not while the other seed's soak has the API server down:
                // making a pool and its node is no fault of its own, and
                // the support code that makes them stops at a refusal.
                let _one_at_a_time = RESTARTS.lock().await;
                let tag = env.prefix.clone();
                let short = format!("p{}", self.pools.len());
                if let Some(app) = claimed {
                    let name = naming::release_name(APPS[*app].0, &env.pool_name(&short));
                    if create_claimant(env, &name).await {
                        self.claimants.push(name);
                    }
                }
                let mut labels = vec![("e2e", tag.as_str()), ("region", "east")];
                if *broken {
                    labels.push((BROKEN, "true"));
                }
                let name = self.env.create_pool(&short, &labels, 1).await;
                if *broken {
                    self.broken.insert(name.clone());
                }
                self.pools.push(name);
            }
            Fault::DeletePool { pool } => {
                let name = self.pools[*pool].clone();
                let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
                let _ = pools.delete(&name, &DeleteParams::default()).await;
                self.left.remove(&name);
                self.cut.remove(&name);
                self.deleted.insert(name);
            }
            Fault::Relabel { pool, leaves } => {
                let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
                let label = match leaves {
                    true => Value::Null,
                    false => json!(env.prefix),
                };
                let patch = json!({ "metadata": { "labels": { "e2e": label } } });
                let name = self.pools[*pool].clone();
                let _ = pools.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await;
                match leaves {
                    true => self.left.insert(name),
                    false => self.left.remove(&name),
                };
            }
            Fault::CutNode { pool, cut } => {
                // Listing the pool's nodes stops at a refusal too.
                let _one_at_a_time = RESTARTS.lock().await;
                let name = self.pools[*pool].clone();
                for node in env.nodes_of(&name).await {
                    match cut {
                        true => cut_off(env, &node).await,
                        false => reconnect(env, &node).await,
                    }
                }
                match cut {
                    true => self.cut.insert(name),
                    false => self.cut.remove(&name),
                };
            }
            Fault::HandEdit { release } => {
                if let Some(name) = nth_release(env, *release).await {
                    let patch = json!({ "spec": { "values": { "controller": { "config": { "log-level": "by-hand" } } } } });
                    let params = PatchParams {
                        field_manager: Some("soak-hand".into()),
                        ..PatchParams::default()
                    };
                    let _ = releases(env).patch(&name, &params, &Patch::Merge(&patch)).await;
                }
            }
            Fault::DeleteRelease { release } => {
                if let Some(name) = nth_release(env, *release).await {
                    let _ = releases(env).delete(&name, &DeleteParams::default()).await;
                }
            }
            Fault::Window { app, pool, closed } => {
                let name = self.pools[*pool].clone();
                match closed {
                    true => {
                        self.closed[*app].insert(name.clone());
                        self.opened[*app].remove(&name);
                    }
                    false => {
                        self.closed[*app].remove(&name);
                        self.opened[*app].insert(name);
                    }
                }
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["rollout"]["windows"] = windows(&self.closed[*app], &self.opened[*app]);
                apply(env, manifest).await;
            }
            Fault::Approve { stale } => {
                let revision = self.gate_revision().await;
                if let Some(r) = revision.clone().filter(|r| !self.gate_revisions.contains(r)) {
                    self.gate_revisions.push(r);
                }
                let approved = match stale {
                    false => revision,
                    true => self.gate_revisions.iter().rev().find(|r| Some(*r) != revision.as_ref()).cloned(),
                };
                let approved = approved.unwrap_or_else(|| "0000000000".into());
                approve(env, &format!("{approved}/rest")).await;
            }
            Fault::Restart { component, down } => {
                let _one_at_a_time = RESTARTS.lock().await;
                cluster(&["stop", component]).await;
                tokio::time::sleep(*down).await;
                cluster(&["start", component]).await;
            }
        }
    }

    /// The revision the gated application's status names now.
    async fn gate_revision(&self) -> Option<String> {
        let apps: Api<NodePoolApplication> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let app = apps.get(APPS[GATE].0).await.ok()?;
        Some(app.status?.rollout?.revision).filter(|r| !r.is_empty())
    }

    /// What a person does for a rollout awaiting approval: approves the
    /// step it waits on, for its revision.
    pub async fn approve_what_awaits(&self) {
        let apps: Api<NodePoolApplication> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let Ok(app) = apps.get(APPS[GATE].0).await else {
            return;
        };
        let Some(rollout) = app.status.and_then(|s| s.rollout) else {
            return;
        };
        if let Some(step) = rollout.awaiting_step {
            approve(&self.env, &format!("{}/{step}", rollout.revision)).await;
        }
    }

    /// What a person does for a rollout halted or rolled back once the
    /// faults stopped (a node cut during the healing revision's update
    /// halts it, and a halt holds): requests a reconcile, which is a new
    /// revision, once per halted revision. Returns what was requested.
    pub async fn request_what_halted(&mut self) -> Vec<String> {
        let apps: Api<NodePoolApplication> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let Ok(list) = apps.list(&ListParams::default()).await else {
            return Vec::new();
        };
        let mut requested = Vec::new();
        for app in list.items {
            let name = app.metadata.name.clone().unwrap_or_default();
            let generation = app.metadata.generation;
            // Of the spec as it is now: not a halt of the revision the healing replaced.
            let Some(status) = app.status.filter(|s| s.observed_generation == generation) else {
                continue;
            };
            let Some(rollout) = status.rollout else { continue };
            let halted = matches!(rollout.phase, RolloutPhase::Halted | RolloutPhase::RolledBack);
            if !halted || !self.requested.insert(rollout.revision.clone()) {
                continue;
            }
            let token = Timestamp::now().to_string();
            let patch = json!({ "metadata": { "annotations": { naming::ANNOTATION_REQUESTED_AT: token } } });
            let params = PatchParams {
                field_manager: Some("soak-operator".into()),
                ..PatchParams::default()
            };
            if apps.patch(&name, &params, &Patch::Merge(&patch)).await.is_ok() {
                requested.push(format!("{name} (revision {} {:?})", rollout.revision, rollout.phase));
            }
        }
        requested
    }

    /// The controller's resident memory now, as its metrics say; `None`
    /// while it does not answer (just restarted).
    pub async fn controller_memory(&self) -> Option<u64> {
        let controller = self.controller.as_ref()?;
        let url = format!("http://{}/metrics", controller.metrics_addr);
        let text = reqwest::get(&url).await.ok()?.text().await.ok()?;
        let line = text.lines().find(|l| l.starts_with("process_resident_memory_bytes "))?;
        line.rsplit(' ').next()?.parse::<f64>().ok().map(|b| b as u64)
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

    /// Faults stop: every part of the control plane running, every node
    /// reconnected, every application resumed with a new good revision
    /// (one halted or rolled back by an innocent fault, a node cut during
    /// its update, stays so by design until a new revision), the
    /// controller running.
    pub async fn heal(&mut self) {
        {
            // The other seed's soak may still be restarting parts.
            let _one_at_a_time = RESTARTS.lock().await;
            for component in COMPONENTS {
                cluster(&["start", component]).await;
            }
            for pool in self.cut.clone() {
                for node in self.env.nodes_of(&pool).await {
                    reconnect(&self.env, &node).await;
                }
            }
        }
        self.cut.clear();
        let pools: Api<DynamicObject> = Api::all_with(self.env.client.clone(), &nodepool_resource());
        let mended = json!({ "metadata": { "labels": { BROKEN: null } } });
        for pool in std::mem::take(&mut self.broken) {
            let _ = pools.patch(&pool, &PatchParams::default(), &Patch::Merge(&mended)).await;
        }
        // Their owner gives the names up: our releases may take them now.
        for claimant in std::mem::take(&mut self.claimants) {
            if let Some(what) = touched(&self.env, &claimant).await {
                self.claimants_touched.push(what);
            }
            let _ = releases(&self.env).delete(&claimant, &DeleteParams::default()).await;
        }
        self.closed = Default::default();
        self.opened = Default::default();
        for manifest in &mut self.manifests {
            manifest["spec"]["suspend"] = json!(false);
            if let Some(rollout) = manifest["spec"]["rollout"].as_object_mut() {
                rollout.remove("windows");
            }
            manifest["spec"]["rollout"]["paused"] = json!(false);
            if let Some(controller) = manifest["spec"]["values"]["controller"].as_object_mut() {
                controller.remove("service");
            }
            manifest["spec"]["values"]["controller"]["config"]["log-level"] = json!("healed");
            apply(&self.env, manifest).await;
        }
        if self.controller.is_none() {
            self.controller = Some(RunningController::start(&self.env.namespace));
        }
    }

    /// The namespace and pools removed, with the controller still running
    /// so that the applications' finalizers go.
    pub async fn finish(self) {
        let controller = self.controller;
        self.env.cleanup().await;
        drop(controller);
    }
}

async fn apply(env: &TestEnv, manifest: &Value) {
    // A write the API server refuses (a conflict under a restart) is part
    // of the weather: the next fault writes again.
    if let Err(e) = apply_app(env, manifest).await {
        println!("  (not applied: {e})");
    }
}

/// A HelmRelease of someone else's in the soak's namespace, labelled as
/// if it were the first application's (copied labels are common) but owned
/// by none, and suspended so that Flux leaves it be: nothing of ours may
/// write or delete it (docs/isolation.md, "Bad input and ownership").
const FOREIGN: &str = "someone-elses";

async fn create_foreign(env: &TestEnv) {
    let labels = json!({ LABEL_APPLICATION: APPS[0].0, naming::LABEL_POOL: "elsewhere" });
    create_someone_elses(env, FOREIGN, labels)
        .await
        .expect("the foreign HelmRelease is created");
}

/// Someone else's HelmRelease under `name`, which one of our releases
/// would take: owned by none, suspended so that Flux leaves it be.
/// Whether it was made.
async fn create_claimant(env: &TestEnv, name: &str) -> bool {
    // Refused under a restart: part of the weather, and nothing to judge.
    match create_someone_elses(env, name, json!({})).await {
        Ok(()) => true,
        Err(e) => {
            println!("  (claimant not made: {e})");
            false
        }
    }
}

/// A HelmRelease of someone else's: owned by no application, written by
/// their own field manager, suspended so that Flux leaves it be.
async fn create_someone_elses(env: &TestEnv, name: &str, labels: Value) -> Result<(), kube::Error> {
    let theirs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": name, "namespace": env.namespace, "labels": labels },
        "spec": { "interval": "1h", "suspend": true, "chart": { "spec": { "chart": "someone-elses",
            "sourceRef": { "kind": "HelmRepository", "name": "someone-elses" } } } }
    }))
    .expect("a HelmRelease in JSON");
    let params = PostParams {
        field_manager: Some("someone-else".into()),
        ..PostParams::default()
    };
    releases(env).create(&params, &theirs).await.map(|_| ())
}

impl World {
    /// What is wrong with someone else's releases now, if anything (the
    /// foreign one, and the claimants not yet given up): gone, rewritten,
    /// or written by one of our field managers.
    pub async fn foreign_touched(&self) -> Option<String> {
        if let Some(what) = self.claimants_touched.first() {
            return Some(what.clone());
        }
        for name in std::iter::once(FOREIGN).chain(self.claimants.iter().map(String::as_str)) {
            if let Some(what) = touched(&self.env, name).await {
                return Some(what);
            }
        }
        None
    }
}

/// What is wrong with someone else's HelmRelease `name`, if anything.
async fn touched(env: &TestEnv, name: &str) -> Option<String> {
    let what = format!("HelmRelease {}/{name}, owned by no application", env.namespace);
    let foreign = match releases(env).get_opt(name).await {
        Ok(Some(foreign)) => foreign,
        Ok(None) => return Some(format!("{what}, was deleted")),
        // The API server restarting: no answer is no verdict.
        Err(_) => return None,
    };
    if foreign.metadata.generation != Some(1) {
        return Some(format!("{what}, was rewritten (generation {:?})", foreign.metadata.generation));
    }
    if !foreign.owner_references().is_empty() {
        return Some(format!("{what}, was adopted"));
    }
    let ours: Vec<String> = (foreign.metadata.managed_fields.iter().flatten())
        .filter_map(|m| m.manager.clone())
        .filter(|m| m.starts_with(naming::MANAGER))
        .collect();
    (!ours.is_empty()).then(|| format!("{what}, was written by {}", ours.join(", ")))
}

/// The gated application's steps: a canary, then a step that needs
/// approval; every other pool (added ones too) is of the last wave.
fn gate_steps(pools: &[String]) -> Value {
    json!([
        { "name": "canary", "pools": { "names": [pools[0]] } },
        { "name": "rest", "pools": { "names": [pools[1], pools[2]] }, "requireApproval": true }
    ])
}

/// An application's windows: one that never opens (February 29th, in
/// 2028 next) for the pools `closed` names, one always open for those
/// `opened` names.
fn windows(closed: &BTreeSet<String>, opened: &BTreeSet<String>) -> Value {
    let window = |schedule: &str, pools: &BTreeSet<String>| json!({ "schedule": schedule, "duration": "1m", "pools": { "names": pools } });
    let mut windows = Vec::new();
    if !closed.is_empty() {
        windows.push(window("0 0 29 2 *", closed));
    }
    if !opened.is_empty() {
        windows.push(window("* * * * *", opened));
    }
    json!(windows)
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

/// The `n`th HelmRelease of the namespace (modulo how many there are), by name.
async fn nth_release(env: &TestEnv, n: usize) -> Option<String> {
    let list = releases(env).list(&ListParams::default()).await.ok()?;
    // Ours only: the foreign release is the soak's witness, never its target.
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter(|r| !r.owner_references().is_empty())
        .filter_map(|r| r.metadata.name)
        .collect();
    names.sort();
    (!names.is_empty()).then(|| names[n % names.len()].clone())
}

/// Cuts a kwok node off as a lost link would: kwok stops answering for it
/// and its Ready condition turns False.
async fn cut_off(env: &TestEnv, node: &str) {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let unmanaged = json!({ "metadata": { "annotations": { "kwok.x-k8s.io/node": null } } });
    let _ = nodes.patch(node, &PatchParams::default(), &Patch::Merge(&unmanaged)).await;
    let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let not_ready = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "False", "reason": "NodeStatusUnknown", "message": "link down (soak)",
        "lastTransitionTime": now
    }] } });
    let _ = nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&not_ready))
        .await;
}

/// Hands the node back to kwok, which turns it Ready again.
async fn reconnect(env: &TestEnv, node: &str) {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let managed = json!({ "metadata": { "annotations": { "kwok.x-k8s.io/node": "fake" } } });
    let _ = nodes.patch(node, &PatchParams::default(), &Patch::Merge(&managed)).await;
}
