//! What one reconcile of an application should do: which HelmReleases to
//! write, which to delete, and what to report. Pure, so every rule here is
//! tested without a cluster; the controller only carries the plan out.
//!
//! Safety rules: a pool whose config fails is neither written nor pruned
//! (its running release stays as it was); a name held by a HelmRelease this
//! application does not own is never touched; an invalid selector stops the
//! whole plan, since it cannot say which pools are wanted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use crate::api::naming;
use crate::api::{NodePoolApplication, NodePoolApplicationStatus};
use crate::chart::schema::Chart;
use crate::chart::shared::ChartRef;
use crate::pools::nodes::NodeCount;
use crate::pools::{self, Pool};
use crate::reconcile::drift;
use crate::reconcile::packed::PackedJson;
use crate::reconcile::release::{self, AppInfo, BuiltRelease, FieldError};
use crate::reconcile::release_state::{self, ReleaseState, ReleaseStatus};
use crate::reconcile::rollout::{self, PoolRollout};
use crate::reconcile::status::{self, PoolReport, RollupInput};
use crate::values::template::Renderer;

/// Everything a plan is computed from.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// With metadata name, namespace, uid and generation as the API server set them.
    pub app: &'a NodePoolApplication,
    pub pools: &'a [&'a Pool],
    /// Each pool's nodes, by pool name; `None` when nodes were not looked
    /// at (then no pool counts as offline).
    pub nodes: Option<&'a BTreeMap<String, NodeCount>>,
    /// HelmReleases whose controller owner reference is this application.
    pub owned: Vec<ObservedRelease>,
    /// The namespace's HelmReleases this application does not own: a pool
    /// whose release would take the name of one, or drive the Helm release
    /// one drives, is refused.
    pub others: &'a dyn OtherReleases,
    /// Stamped on conditions that change status.
    pub now: Time,
    /// The shared HelmChart the releases point at, if the controller made one.
    pub chart_ref: Option<&'a ChartRef>,
    /// The chart itself, for checking each pool's values against its schema.
    pub chart: Option<&'a Chart>,
    /// Why the chart cannot be used yet: nothing is written or pruned.
    pub hold: Option<Hold>,
}

/// A chart problem that holds every write back: an unresolvable version, a
/// missing source (`transient: false`, the user must act), or an artifact
/// source-controller has not produced yet (`transient: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub reason: String,
    pub message: String,
    pub transient: bool,
}

/// A Helm release as Helm stores it: (storage namespace, release name).
pub type HelmReleaseKey = (String, String);

/// The HelmReleases of the application's namespace it does not own, as
/// planning asks after them: one pool at a time, so that a cache of
/// thousands need not be copied out for every reconcile.
pub trait OtherReleases: std::fmt::Debug + Sync {
    /// Whether one of them has this name.
    fn named(&self, name: &str) -> bool;
    /// The one that drives this Helm release, if any; of several, the one
    /// that came first.
    fn driving(&self, key: &HelmReleaseKey) -> Option<TakenRelease>;
}

/// Other HelmReleases listed out: where no cache holds them (`render`,
/// tests).
#[derive(Debug, Clone, Default)]
pub struct ListedReleases {
    pub names: BTreeSet<String>,
    pub taken: BTreeMap<HelmReleaseKey, TakenRelease>,
}

impl OtherReleases for ListedReleases {
    fn named(&self, name: &str) -> bool {
        self.names.contains(name)
    }
    fn driving(&self, key: &HelmReleaseKey) -> Option<TakenRelease> {
        self.taken.get(key).cloned()
    }
}

/// A HelmRelease this application does not own, as a driver of a Helm release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenRelease {
    /// The HelmRelease's name.
    pub name: String,
    /// The NodePoolApplication that owns it, if one does.
    pub application: Option<String>,
    /// Its creation time (RFC 3339, as the API server writes it): of two
    /// HelmReleases driving one Helm release, the older keeps it.
    pub created: Option<String>,
}

fn created_of(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// An existing HelmRelease this application owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRelease {
    pub name: String,
    /// Deletes carry it as a precondition, so only the observed object goes.
    pub uid: Option<String>,
    pub pool: Option<String>,
    pub spec_hash: Option<String>,
    pub generation: Option<i64>,
    pub status: ReleaseStatus,
    /// The shared HelmChart it points at, if any.
    pub chart_ref: Option<ChartRef>,
    /// The Helm release it drives.
    pub helm_release: Option<HelmReleaseKey>,
    pub created: Option<String>,
    /// When this controller last wrote it (RFC 3339).
    pub written_at: Option<String>,
    /// What it holds now as packed JSON text (at least its labels,
    /// annotations and spec), to find hand edits; `None` when not read
    /// (then only the spec hash is compared). Shared with the watch
    /// cache, and parsed only to compare, so that thousands of observed
    /// releases stay small.
    pub live: Option<PackedJson>,
}

impl ObservedRelease {
    /// Reads a HelmRelease as the API server lists it; `None` when it does
    /// not say which pool it is for (edited by hand), so that it is left alone.
    pub fn from_value(object: &Value) -> Option<Self> {
        let metadata = object.get("metadata")?;
        let text = |map: &str, key: &str| metadata.get(map)?.get(key)?.as_str().map(str::to_string);
        Some(Self {
            name: metadata.get("name")?.as_str()?.to_string(),
            uid: metadata.get("uid").and_then(Value::as_str).map(str::to_string),
            pool: Some(
                text("annotations", naming::ANNOTATION_POOL_NAME)
                    .or_else(|| text("labels", naming::LABEL_POOL))?,
            ),
            spec_hash: text("annotations", naming::ANNOTATION_SPEC_HASH),
            generation: metadata.get("generation").and_then(Value::as_i64),
            status: release_state::classify(object),
            chart_ref: chart_ref_of(object),
            helm_release: naming::helm_release_of(object),
            created: created_of(object),
            written_at: text("annotations", naming::ANNOTATION_WRITTEN_AT),
            // The caller adds the text it read the release from.
            live: None,
        })
    }
}

/// The HelmChart a release points at with `chartRef`; its namespace
/// defaults to the release's own, as Flux reads it.
fn chart_ref_of(object: &Value) -> Option<ChartRef> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    if text("/spec/chartRef/kind") != Some("HelmChart") {
        return None;
    }
    Some(ChartRef {
        name: text("/spec/chartRef/name")?.to_string(),
        namespace: text("/spec/chartRef/namespace").or(text("/metadata/namespace"))?.to_string(),
    })
}

/// A HelmRelease as packed JSON text ([`PackedJson`]). Parsed JSON takes
/// several times the room, and a first fan-out holds one per pool: ten
/// thousand of them parsed would be most of the controller's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest(PackedJson);

impl Manifest {
    pub fn new(object: &Value) -> Self {
        Self(PackedJson::from_value(object))
    }

    /// The object, parsed.
    pub fn value(&self) -> Value {
        // Packed by `new` from a Value: always valid JSON.
        self.0.value().unwrap_or(Value::Null)
    }
}

/// A HelmRelease to create or update (server-side apply of `object`).
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredRelease {
    pub name: String,
    pub pool: String,
    pub object: Manifest,
    pub spec_hash: String,
    /// Set when the release already carries this spec hash but no longer
    /// holds what we wrote (a hand edit): the first field found changed.
    pub drift: Option<String>,
}

/// What happens to one selected pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its release is in `apply`.
    Planned,
    /// Its release already has this spec.
    Unchanged,
    /// Its config cannot be built; its release, if any, is left alone.
    Failed { field: String, message: String },
    /// The release name is taken by a HelmRelease this application does not own.
    Conflict { name: String },
    /// The Helm release (`<storage namespace>/<release name>`) it would
    /// drive is driven by an older HelmRelease this application does not
    /// own: two HelmReleases would overwrite each other's installs.
    HelmReleaseTaken { helm_release: String, by: TakenRelease },
    /// Would be applied, but the chart is not usable yet (see [`Hold`]).
    Held,
    /// Its release differs, or it has none, but the rollout holds it back
    /// (its turn has not come, the rollout is paused or halted, or the pool
    /// is offline): its release, if any, is left as it is.
    Deferred(PoolRollout),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolOutcome {
    pub pool: String,
    /// The HelmRelease's object name.
    pub release: String,
    pub outcome: Outcome,
}

impl std::fmt::Display for PoolOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.outcome {
            Outcome::Planned => {
                write!(f, "pool {:?}: HelmRelease {} will be applied", self.pool, self.release)
            }
            Outcome::Unchanged => {
                write!(f, "pool {:?}: HelmRelease {} is up to date", self.pool, self.release)
            }
            Outcome::Failed { field, message } => write!(f, "pool {:?}: {field}: {message}", self.pool),
            Outcome::Held => write!(f, "pool {:?}: waiting for the chart", self.pool),
            Outcome::Deferred(state) => {
                write!(f, "pool {:?}: left as it is by the rollout ({})", self.pool, state.as_str())
            }
            Outcome::HelmReleaseTaken { .. } => {
                write!(f, "pool {:?}: {}", self.pool, helm_release_taken_message(&self.outcome))
            }
            Outcome::Conflict { name } => write!(
                f,
                "pool {:?}: HelmRelease {name} already exists and is not owned by this application; \
                 delete or rename it",
                self.pool
            ),
        }
    }
}

/// The plan for one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub apply: Vec<DesiredRelease>,
    /// Names of owned releases that already match.
    pub unchanged: Vec<String>,
    /// Names of owned releases whose pool is no longer selected.
    pub prune: Vec<String>,
    /// One per selected pool, sorted by pool name.
    pub pools: Vec<PoolOutcome>,
    /// Pools named in the spec that do not exist.
    pub missing_pools: Vec<String>,
    /// Why nothing was planned at all, when something stopped it.
    pub blocked: Option<String>,
    pub status: NodePoolApplicationStatus,
    /// When to look again though nothing changes but the clock: a pool's
    /// soak ends or its progress deadline passes.
    pub requeue_after: Option<Duration>,
}

impl Plan {
    /// Whether any pool failed, conflicted, or the plan was blocked.
    pub fn has_errors(&self) -> bool {
        self.blocked.is_some()
            || self.pools.iter().any(|p| {
                matches!(
                    p.outcome,
                    Outcome::Failed { .. } | Outcome::Conflict { .. } | Outcome::HelmReleaseTaken { .. }
                )
            })
    }
}

pub fn plan(input: &PlanInput) -> Plan {
    let app = app_info(input);
    let selected = match check_selectors(input, &app) {
        Ok(selected) => selected,
        Err((reason, message)) => return blocked(input, reason, message),
    };
    if selected.pools.is_empty() && !input.owned.is_empty() {
        return nothing_selected(input, &app);
    }
    let settings = match rollout::Settings::new(app.spec.rollout.as_ref(), selected.pools.len()) {
        Ok(settings) => settings,
        Err(e) => return blocked(input, "InvalidRollout".to_string(), e.to_string()),
    };
    let renderer = Renderer::new();
    let owned: BTreeMap<&str, &ObservedRelease> = input.owned.iter().map(|o| (o.name.as_str(), o)).collect();
    let mut built: BTreeMap<String, Result<Built, FieldError>> = BTreeMap::new();
    let mut outcomes = Vec::new();
    for pool in &selected.pools {
        let name = naming::release_name(app.name, &pool.name);
        if input.others.named(&name) {
            outcomes.push(PoolOutcome {
                pool: pool.name.clone(),
                release: name.clone(),
                outcome: Outcome::Conflict { name },
            });
        } else {
            let written = owned.get(name.as_str()).and_then(|o| o.spec_hash.as_deref());
            let result = release::build(&app, pool, &renderer, written)
                .map(|b| Built::new(b, owned.get(name.as_str())));
            built.insert(pool.name.clone(), result);
        }
    }
    fail_duplicate_release_names(&mut built);
    let mut plan = Plan {
        apply: Vec::new(),
        unchanged: Vec::new(),
        prune: Vec::new(),
        pools: outcomes,
        missing_pools: selected.missing.clone(),
        blocked: None,
        status: NodePoolApplicationStatus::default(),
        requeue_after: None,
    };
    for (pool, result) in built {
        if let Some(outcome) = result.as_ref().ok().and_then(|b| helm_release_taken(input, &owned, b)) {
            let release = naming::release_name(app.name, &pool);
            plan.pools.push(PoolOutcome {
                pool,
                release,
                outcome,
            });
            continue;
        }
        place(&mut plan, &owned, pool, result, app.name);
    }
    plan.pools.sort_by(|a, b| a.pool.cmp(&b.pool));
    let decision = schedule(input, &mut plan, &owned, &settings, &selected.pools);
    plan.requeue_after = decision.requeue_after;
    let wanted: BTreeSet<&str> = plan.pools.iter().map(|p| p.release.as_str()).collect();
    plan.prune = input
        .owned
        .iter()
        .map(|o| o.name.clone())
        .filter(|n| !wanted.contains(n.as_str()))
        .collect();
    let blocker = input.hold.as_ref().and_then(|hold| hold_writes(&mut plan, hold));
    let rollout = Scheduled {
        decision: &decision,
        status: decision.status(&revision(&app), &settings),
    };
    plan.status = roll_up(input, &plan, &owned, blocker, Some(rollout));
    plan
}

/// The rollout's verdict and its status, for the roll-up.
struct Scheduled<'a> {
    decision: &'a rollout::Decision,
    status: crate::api::RolloutStatus,
}

/// What every pool's release would be now: the spec (its rollout settings
/// aside: pausing is no new revision) and the chart it resolved to.
fn revision(app: &AppInfo) -> String {
    let mut spec = app.spec.clone();
    spec.rollout = None;
    let text = serde_json::to_string(&spec).unwrap_or_default();
    let chart = app.chart_ref.map(|c| c.name.as_str()).unwrap_or_default();
    naming::hex_prefix(&[&text, chart], 10)
}

/// Lets the rollout decide which planned writes go out now. A write it
/// holds back becomes [`Outcome::Deferred`]: that pool's release stays as
/// it is. A write that goes is stamped with the time, from which its
/// progress deadline runs.
fn schedule(
    input: &PlanInput,
    plan: &mut Plan,
    owned: &BTreeMap<&str, &ObservedRelease>,
    settings: &rollout::Settings,
    selected: &[&Pool],
) -> rollout::Decision {
    let steps = input.app.spec.rollout.as_ref().map(|r| r.steps.as_slice()).unwrap_or_default();
    // A step's selector was checked with the others: an error matches nothing.
    let step_of = |pool: &Pool| {
        steps
            .iter()
            .position(|s| pools::contains(&s.pools, pool).unwrap_or(false))
            .unwrap_or(steps.len())
    };
    let by_name: BTreeMap<&str, &Pool> = selected.iter().map(|p| (p.name.as_str(), *p)).collect();
    let waves: BTreeSet<usize> = selected.iter().map(|p| step_of(p)).collect();
    let wave_of = |pool: &Pool| waves.iter().position(|w| *w == step_of(pool)).unwrap_or_default();
    // A hand-edited release already carries the revision: it is put back
    // whatever the rollout, which only ever moves pools between revisions.
    let applying: BTreeSet<&str> =
        plan.apply.iter().filter(|d| d.drift.is_none()).map(|d| d.pool.as_str()).collect();
    let written_at = |o: &ObservedRelease| {
        o.written_at.as_deref().and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
    };
    let inputs: Vec<rollout::PoolInput> = plan
        .pools
        .iter()
        .filter(|p| matches!(p.outcome, Outcome::Planned | Outcome::Unchanged))
        .filter_map(|p| {
            let pool = by_name.get(p.pool.as_str())?;
            let observed = owned.get(p.release.as_str());
            let release = match (observed, applying.contains(p.pool.as_str())) {
                (None, _) => rollout::Release::Missing,
                (Some(o), true) => rollout::Release::Behind(&o.status),
                (Some(o), false) => rollout::Release::Current {
                    status: &o.status,
                    written: written_at(o),
                },
            };
            Some(rollout::PoolInput {
                pool: &p.pool,
                wave: wave_of(pool),
                offline: input.nodes.and_then(|n| n.get(&p.pool)).is_some_and(|n| n.offline()),
                release,
            })
        })
        .collect();
    let decision = rollout::decide(settings, &inputs, waves.len(), input.now.0);
    let now = input.now.0.to_string();
    plan.apply.retain_mut(|d| {
        let stamp = match (&d.drift, decision.state(&d.pool)) {
            // Put back as it was, its deadline running from its real write.
            (Some(_), _) => {
                owned.get(d.name.as_str()).and_then(|o| o.written_at.clone()).unwrap_or(now.clone())
            }
            (None, Some(PoolRollout::Write) | None) => now.clone(),
            (None, Some(_)) => return false,
        };
        let mut object = d.object.value();
        object["metadata"]["annotations"][naming::ANNOTATION_WRITTEN_AT] = Value::String(stamp);
        d.object = Manifest::new(&object);
        true
    });
    let drifted: BTreeSet<&str> =
        plan.apply.iter().filter(|d| d.drift.is_some()).map(|d| d.pool.as_str()).collect();
    for p in plan.pools.iter_mut().filter(|p| p.outcome == Outcome::Planned) {
        match decision.state(&p.pool) {
            _ if drifted.contains(p.pool.as_str()) => {}
            Some(PoolRollout::Write) | None => {}
            Some(state) => p.outcome = Outcome::Deferred(state),
        }
    }
    decision
}

/// Turns every write of the plan into a held pool; returns the blocker the
/// status reports when the user must act.
fn hold_writes(plan: &mut Plan, hold: &Hold) -> Option<(String, String)> {
    plan.apply.clear();
    plan.prune.clear();
    for p in plan.pools.iter_mut().filter(|p| p.outcome == Outcome::Planned) {
        p.outcome = Outcome::Held;
    }
    (!hold.transient).then(|| (hold.reason.clone(), hold.message.clone()))
}

fn app_info<'a>(input: &PlanInput<'a>) -> AppInfo<'a> {
    let app = input.app;
    AppInfo {
        name: app.metadata.name.as_deref().unwrap_or_default(),
        namespace: app.metadata.namespace.as_deref().unwrap_or_default(),
        uid: app.metadata.uid.as_deref(),
        spec: &app.spec,
        chart_ref: input.chart_ref,
        chart: input.chart,
        shard: app
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(naming::LABEL_SHARD))
            .map(String::as_str),
    }
}

/// Selects the pools, and checks every override's selector up front: one
/// that cannot be evaluated would make every pool's values uncertain.
fn check_selectors<'a>(
    input: &PlanInput<'a>,
    app: &AppInfo,
) -> Result<pools::Selected<'a>, (String, String)> {
    let invalid =
        |field: String, e: pools::SelectorError| ("InvalidSelector".to_string(), format!("{field}: {e}"));
    let selected = pools::select(&app.spec.pools, input.pools.iter().copied())
        .map_err(|e| invalid("pools".into(), e))?;
    for (i, o) in app.spec.overrides.iter().enumerate() {
        if let Some(selector) = &o.pools.selector {
            pools::Selector::new(selector).map_err(|e| invalid(format!("overrides[{i}].pools"), e))?;
        }
    }
    let steps = app.spec.rollout.as_ref().map(|r| r.steps.as_slice()).unwrap_or_default();
    for (i, step) in steps.iter().enumerate() {
        if let Some(selector) = &step.pools.selector {
            pools::Selector::new(selector).map_err(|e| invalid(format!("rollout.steps[{i}].pools"), e))?;
        }
    }
    Ok(selected)
}

fn blocked(input: &PlanInput, reason: String, message: String) -> Plan {
    let mut plan = Plan {
        apply: Vec::new(),
        unchanged: Vec::new(),
        prune: Vec::new(),
        pools: Vec::new(),
        missing_pools: Vec::new(),
        blocked: Some(message.clone()),
        status: NodePoolApplicationStatus::default(),
        requeue_after: None,
    };
    plan.status = roll_up(input, &plan, &BTreeMap::new(), Some((reason, message)), None);
    plan
}

/// A release that would drive a Helm release another HelmRelease already
/// drives is refused, unless this application's own release of that pool
/// drove it first (the older of the two keeps it; names break a tie). The
/// refused pool's existing release, if any, is left as it is: deleting it
/// would uninstall the Helm release both drive.
fn helm_release_taken(
    input: &PlanInput,
    owned: &BTreeMap<&str, &ObservedRelease>,
    built: &Built,
) -> Option<Outcome> {
    let key = built.helm_release.clone()?;
    let by = input.others.driving(&key)?;
    let ours = owned.get(built.name.as_str()).filter(|o| o.helm_release.as_ref() == Some(&key));
    let first = |created: &Option<String>, name: &str| {
        (created.clone().unwrap_or_else(|| "~".into()), name.to_string())
    };
    if ours.is_some_and(|o| first(&o.created, &o.name) < first(&by.created, &by.name)) {
        return None;
    }
    Some(Outcome::HelmReleaseTaken {
        helm_release: format!("{}/{}", key.0, key.1),
        by,
    })
}

fn helm_release_taken_message(outcome: &Outcome) -> String {
    let Outcome::HelmReleaseTaken { helm_release, by } = outcome else {
        return String::new();
    };
    let owner = match &by.application {
        Some(app) => format!(" of NodePoolApplication {app}"),
        None => String::new(),
    };
    format!(
        "releaseName: Helm release {helm_release} is already driven by HelmRelease {}{owner}; two \
         HelmReleases would overwrite each other's installs: give each application's releases \
         their own names (include {{{{app.name}}}} in releaseName) or storageNamespace",
        by.name
    )
}

/// A selection that matches no pool while releases exist is far likelier a
/// typo (a misspelt label, a renamed key) than a wish to uninstall every
/// site: nothing is pruned, the existing releases are reported as they
/// are, and the application is Stalled until a person acts. Deleting the
/// application is how every release is removed.
fn nothing_selected(input: &PlanInput, app: &AppInfo) -> Plan {
    let owned: BTreeMap<&str, &ObservedRelease> = input.owned.iter().map(|o| (o.name.as_str(), o)).collect();
    let mut plan = Plan {
        apply: Vec::new(),
        unchanged: input.owned.iter().map(|o| o.name.clone()).collect(),
        prune: Vec::new(),
        pools: input
            .owned
            .iter()
            .map(|o| PoolOutcome {
                pool: o.pool.clone().unwrap_or_default(),
                release: o.name.clone(),
                outcome: Outcome::Unchanged,
            })
            .collect(),
        missing_pools: Vec::new(),
        blocked: None,
        status: NodePoolApplicationStatus::default(),
        requeue_after: None,
    };
    plan.pools.sort_by(|a, b| a.pool.cmp(&b.pool));
    let message = format!(
        "spec.pools ({}) matches no NodePool, yet this application has {} HelmRelease(s); nothing is \
         pruned: fix spec.pools, or delete the application to remove every release",
        describe_selection(&app.spec.pools),
        input.owned.len()
    );
    plan.blocked = Some(message.clone());
    plan.status = roll_up(input, &plan, &owned, Some(("NoPoolsSelected".to_string(), message)), None);
    plan
}

/// `names [a, b], selector {"matchLabels":{"region":"east"}}`, as the user wrote it.
fn describe_selection(selection: &crate::api::PoolSelection) -> String {
    let mut parts = Vec::new();
    if !selection.names.is_empty() {
        parts.push(format!("names [{}]", selection.names.join(", ")));
    }
    if let Some(selector) = &selection.selector {
        let text = serde_json::to_string(selector).unwrap_or_else(|e| format!("<unprintable: {e}>"));
        parts.push(format!("selector {text}"));
    }
    parts.join(", ")
}

/// Two pools installing the same Helm release would overwrite each other.
fn fail_duplicate_release_names(built: &mut BTreeMap<String, Result<Built, FieldError>>) {
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (pool, result) in built.iter() {
        if let Ok(release) = result {
            by_name.entry(release.release_name.clone()).or_default().push(pool.clone());
        }
    }
    for (release_name, pools) in by_name.into_iter().filter(|(_, pools)| pools.len() > 1) {
        let message = format!(
            "renders to {release_name:?} for pools {}; include {{{{pool.name}}}} so each pool's release is unique",
            pools.join(", ")
        );
        for pool in pools {
            built.insert(
                pool,
                Err(FieldError {
                    field: "releaseName".into(),
                    message: message.clone(),
                }),
            );
        }
    }
}

/// One pool's release as built, read for what planning needs while its
/// parsed form is at hand, then kept as text.
struct Built {
    name: String,
    release_name: String,
    spec_hash: String,
    /// What to write; `None` when the release holds it already (its spec
    /// hash, and no field of ours edited): a resync of thousands of pools
    /// then keeps no manifest, where it used to keep all of them until the
    /// last pool was built.
    object: Option<Manifest>,
    /// The Helm release it would drive.
    helm_release: Option<HelmReleaseKey>,
    /// The first field the existing release no longer holds, if the
    /// release carries this very spec hash.
    drift: Option<String>,
}

impl Built {
    fn new(built: BuiltRelease, observed: Option<&&ObservedRelease>) -> Self {
        let drift = observed
            .filter(|o| o.spec_hash.as_deref() == Some(built.spec_hash.as_str()))
            .and_then(|o| o.live.as_ref())
            .and_then(PackedJson::value)
            .and_then(|live| drift::first_difference(&built.object, &live));
        let same_hash = observed.and_then(|o| o.spec_hash.as_deref()) == Some(built.spec_hash.as_str());
        Self {
            helm_release: naming::helm_release_of(&built.object),
            object: (!same_hash || drift.is_some()).then(|| Manifest::new(&built.object)),
            name: built.name,
            release_name: built.release_name,
            spec_hash: built.spec_hash,
            drift,
        }
    }
}

fn place(
    plan: &mut Plan,
    owned: &BTreeMap<&str, &ObservedRelease>,
    pool: String,
    result: Result<Built, FieldError>,
    app: &str,
) {
    let release = naming::release_name(app, &pool);
    let outcome = match result {
        Err(FieldError { field, message }) => Outcome::Failed { field, message },
        Ok(built) => {
            let observed = owned.get(built.name.as_str());
            let same_hash = observed.and_then(|o| o.spec_hash.as_deref()) == Some(&built.spec_hash);
            match built.object {
                None => {
                    plan.unchanged.push(built.name);
                    Outcome::Unchanged
                }
                Some(object) => {
                    plan.apply.push(DesiredRelease {
                        name: built.name,
                        pool: pool.clone(),
                        object,
                        spec_hash: built.spec_hash,
                        drift: built.drift.filter(|_| same_hash),
                    });
                    Outcome::Planned
                }
            }
        }
    };
    plan.pools.push(PoolOutcome {
        pool,
        release,
        outcome,
    });
}

fn roll_up(
    input: &PlanInput,
    plan: &Plan,
    owned: &BTreeMap<&str, &ObservedRelease>,
    blocker: Option<(String, String)>,
    rollout: Option<Scheduled>,
) -> NodePoolApplicationStatus {
    let decision = rollout.as_ref().map(|r| r.decision);
    let reports: Vec<PoolReport> = plan
        .pools
        .iter()
        .map(|p| {
            let verdict = decision.and_then(|d| d.pools.get(&p.pool));
            let rollout = verdict.map(|v| match &p.outcome {
                Outcome::Deferred(state) => *state,
                // Its turn came, but the chart holds every write.
                Outcome::Held => PoolRollout::Pending,
                _ => v.state,
            });
            let mut status = pool_status(p, owned.get(p.release.as_str()).copied());
            if let Some(why) = verdict.and_then(|v| v.deadline_passed.as_ref()) {
                status.state = ReleaseState::Failed;
                status.reason = "ProgressDeadlineExceeded".to_string();
                status.message = why.clone();
            }
            let nodes = input.nodes.and_then(|n| n.get(&p.pool)).copied();
            if rollout == Some(PoolRollout::Offline) {
                status =
                    offline_status(status, nodes.unwrap_or_default(), owned.contains_key(p.release.as_str()));
            }
            PoolReport {
                pool: p.pool.clone(),
                helm_release: p.release.clone(),
                status,
                rollout,
                nodes,
            }
        })
        .collect();
    let previous = input.app.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    status::rollup(&RollupInput {
        pools: &reports,
        missing: &plan.missing_pools,
        blocker,
        generation: input.app.metadata.generation,
        previous,
        now: &input.now,
        rollout: rollout.map(|r| r.status),
    })
}

/// An offline pool, skipped by the rollout: whatever Flux last said of its
/// release (a timed-out upgrade, most likely) is no verdict on the chart.
fn offline_status(mut status: ReleaseStatus, nodes: NodeCount, has_release: bool) -> ReleaseStatus {
    status.state = ReleaseState::Offline;
    status.reason = "PoolOffline".to_string();
    let since = nodes.changed.map(|t| format!(" since {t}")).unwrap_or_default();
    status.message = match has_release {
        true => format!(
            "no node of the pool is Ready ({nodes}){since}: its release is left as it is until one \
             is, then brought to the current revision"
        ),
        false => format!("no node of the pool is Ready ({nodes}){since}: installed once one is"),
    };
    status
}

fn pool_status(outcome: &PoolOutcome, observed: Option<&ObservedRelease>) -> ReleaseStatus {
    let chart_version = observed.and_then(|o| o.status.chart_version.clone());
    let make = |state, reason: &str, message: String| ReleaseStatus {
        state,
        reason: reason.to_string(),
        message,
        chart_version: chart_version.clone(),
        observed_latest: false,
        ready_since: None,
    };
    match (&outcome.outcome, observed) {
        (Outcome::Unchanged | Outcome::Deferred(_), Some(o)) => o.status.clone(),
        (Outcome::Unchanged | Outcome::Planned, None) => {
            make(ReleaseState::Progressing, "Progressing", "creating the HelmRelease".into())
        }
        (Outcome::Deferred(state), None) => make(
            ReleaseState::Waiting,
            state.as_str(),
            format!("not installed yet: the rollout is {}", state.as_str().to_lowercase()),
        ),
        (Outcome::Planned, Some(_)) => {
            make(ReleaseState::Progressing, "Progressing", "updating the HelmRelease".into())
        }
        (Outcome::Held, Some(o)) if o.status.state == ReleaseState::Ready => {
            make(ReleaseState::Waiting, "ChartNotReady", "waiting for the chart before updating".into())
        }
        (Outcome::Held, _) => make(ReleaseState::Waiting, "ChartNotReady", "waiting for the chart".into()),
        (Outcome::Failed { field, message }, _) => {
            make(ReleaseState::Stalled, "InvalidPoolConfig", format!("{field}: {message}"))
        }
        (taken @ Outcome::HelmReleaseTaken { .. }, _) => {
            make(ReleaseState::Stalled, "ReleaseNameConflict", helm_release_taken_message(taken))
        }
        (Outcome::Conflict { name }, _) => make(
            ReleaseState::Stalled,
            "NameConflict",
            format!("HelmRelease {name} exists and is not owned by this application; delete or rename it"),
        ),
    }
}

#[cfg(test)]
mod tests;
