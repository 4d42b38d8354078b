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

use crate::api::conditions;
use crate::api::naming;
use crate::api::{NodePoolApplication, NodePoolApplicationStatus};
use crate::chart::schema::Chart;
use crate::chart::shared::{ChartKind, ChartRef};
use crate::pools::nodes::NodeCount;
use crate::pools::{self, Pool};
use crate::reconcile::drift;
use crate::reconcile::packed::PackedJson;
use crate::reconcile::release::{self, AppInfo, BuiltRelease, FieldError};
use crate::reconcile::release_state::{self, ReleaseState, ReleaseStatus};
use crate::reconcile::rollout::{self, PoolRollout};
use crate::reconcile::sharing;
use crate::reconcile::status::{PoolReport, Rollup};
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
    /// Why the pools of the application's kind cannot be read (the cluster
    /// serves no such API): nothing is written or pruned.
    pub unserved: Option<&'a str>,
    /// Since when this controller's clock has measured the rollout: the
    /// time it took the lead. A `written-at` stamp older than this was
    /// made by another replica's clock (or this one's before a restart),
    /// so a progress deadline is counted from here instead: a failover to
    /// a replica whose clock runs ahead cannot fail updating pools early,
    /// and at worst a deadline runs longer by the failover's time.
    pub clock_since: Option<Time>,
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

mod guards;
mod observed;
mod report;

use guards::{
    blocked, check_selectors, fail_duplicate_release_names, helm_release_taken, helm_release_taken_message,
    nothing_selected,
};
pub use observed::{
    isolation_failures, HelmReleaseKey, ListedReleases, Manifest, ObservedRelease, OtherReleases,
    TakenRelease,
};
use report::roll_up;

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
    /// The release carries this spec hash and was suspended with the
    /// application, which is resumed: written again whole, as it was, not
    /// as a step of the rollout.
    pub resumed: bool,
    /// The Helm release to claim before the write ([`crate::reconcile::claim`]):
    /// set when the write makes the release drive a Helm release it did
    /// not drive (a new release, a new releaseName), or when the release
    /// was made inert because another application held it.
    pub claim: Option<HelmReleaseKey>,
    /// The Helm release it drove until now, when the write moves it to
    /// another: its claim is let go once the write is done.
    pub drove: Option<HelmReleaseKey>,
    /// The release was made inert ([`naming::ANNOTATION_INERT`]): the
    /// write, once the claim is ours, takes that back.
    pub lift_inert: bool,
}

impl DesiredRelease {
    /// Whether the write puts back the revision the release carries (a hand
    /// edit undone, a resumed release written whole, an inert one woken)
    /// rather than moving it to a new one: it goes whatever the rollout,
    /// which only ever moves pools between revisions.
    pub fn restores(&self) -> bool {
        self.drift.is_some() || self.resumed || self.lift_inert
    }
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
    /// Would be applied, but the application is suspended: nothing is
    /// written, created or pruned until it is resumed.
    Suspended,
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
            Outcome::Suspended => {
                write!(f, "pool {:?}: left as it is: the application is suspended", self.pool)
            }
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
    /// What `status` was rolled up from, to roll it up again after the
    /// writes ([`Plan::status_after_writes`]).
    pub rollup: Rollup,
    /// `spec.suspend`: the status says so.
    pub suspended: bool,
    /// When to look again though nothing changes but the clock: a pool's
    /// soak ends or its progress deadline passes.
    pub requeue_after: Option<Duration>,
    /// Releases to suspend with the application (`spec.suspend: true`):
    /// the only write a suspended application makes.
    pub suspend: Vec<String>,
    /// Releases suspended with the application, which is resumed: their
    /// suspension is taken back before anything else is written.
    pub resume: Vec<String>,
    /// Releases to make inert, with why: each would drive a Helm release
    /// another application's HelmRelease drives (see
    /// [`crate::api::naming::ANNOTATION_INERT`]).
    pub inert: Vec<(String, String)>,
}

impl Plan {
    /// The status once the writes are done: `refused` are the pools whose
    /// write the API server refused. Their state reaches the conditions
    /// and the counts, so a refusal no retry mends reads Stalled to
    /// kstatus rather than InProgress.
    pub fn status_after_writes(&self, refused: &[WriteRefused]) -> NodePoolApplicationStatus {
        if refused.is_empty() {
            return self.status.clone();
        }
        let mut rollup = self.rollup.clone();
        for r in refused {
            rollup.write_failed(&r.pool, &r.reason, &r.message, !r.retriable);
        }
        let mut status = stated(&rollup, self.suspended);
        status.last_handled_reconcile_at = self.status.last_handled_reconcile_at.clone();
        status.last_handled_force_at = self.status.last_handled_force_at.clone();
        status.last_handled_reset_at = self.status.last_handled_reset_at.clone();
        status
    }

    /// The writes, taken out of the plan to be carried out: the rest (the
    /// pools' outcomes, the status) stays for the report.
    pub fn take_writes(&mut self) -> Writes {
        Writes {
            resume: std::mem::take(&mut self.resume),
            suspend: std::mem::take(&mut self.suspend),
            inert: std::mem::take(&mut self.inert),
            apply: std::mem::take(&mut self.apply),
            prune: std::mem::take(&mut self.prune),
        }
    }

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

/// What carrying a plan out writes, in the order it goes: suspensions
/// taken back or made, releases made inert, releases written, releases
/// pruned (see [`crate::reconcile::apply::carry_out`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Writes {
    pub resume: Vec<String>,
    pub suspend: Vec<String>,
    pub inert: Vec<(String, String)>,
    pub apply: Vec<DesiredRelease>,
    pub prune: Vec<String>,
}

/// A pool whose release the API server refused to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRefused {
    pub pool: String,
    pub reason: String,
    pub message: String,
    /// Whether a retry may succeed (a conflict, a timeout, the server
    /// busy), rather than needing a person (invalid, forbidden, over quota).
    pub retriable: bool,
}

/// The status rolled up, suspension said where kstatus looks.
fn stated(rollup: &Rollup, suspended: bool) -> NodePoolApplicationStatus {
    let mut status = rollup.status();
    if suspended {
        report_suspended(&mut status);
    }
    status
}

/// Flux's request annotations the application carries, in a fixed order.
fn requests(app: &NodePoolApplication) -> Vec<(&str, &str)> {
    let annotations = app.metadata.annotations.as_ref();
    naming::FLUX_REQUESTS
        .iter()
        .filter_map(|key| annotations.and_then(|a| a.get(*key)).map(|token| (*key, token.as_str())))
        .collect()
}

pub fn plan(input: &PlanInput) -> Plan {
    let mut plan = plan_releases(input);
    // Handled whatever the plan made of it, as Flux records a request.
    let annotation = |key| input.app.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    plan.status.last_handled_reconcile_at = annotation(naming::ANNOTATION_REQUESTED_AT);
    plan.status.last_handled_force_at = annotation(naming::ANNOTATION_FORCE_AT);
    plan.status.last_handled_reset_at = annotation(naming::ANNOTATION_RESET_AT);
    // Whatever else stops the plan, the releases follow the application's
    // suspension (see `suspend_or_resume`).
    let marked = |o: &&ObservedRelease| o.suspended_with_app;
    match input.app.spec.suspend == Some(true) {
        true => plan.suspend = input.owned.iter().filter(|o| !marked(o)).map(|o| o.name.clone()).collect(),
        false => plan.resume = input.owned.iter().filter(marked).map(|o| o.name.clone()).collect(),
    }
    plan
}

fn plan_releases(input: &PlanInput) -> Plan {
    let requests = requests(input.app);
    let app = app_info(input, &requests);
    if let Some(message) = input.unserved {
        return blocked(input, conditions::reason::POOL_API_MISSING.to_string(), message.to_string());
    }
    let selected = match check_selectors(input, &app) {
        Ok(selected) => selected,
        Err((reason, message)) => return blocked(input, reason, message),
    };
    if selected.pools.is_empty() && !input.owned.is_empty() {
        return nothing_selected(input, &app);
    }
    let settings = match rollout::Settings::new(app.spec.rollout.as_ref(), selected.pools.len()) {
        Ok(settings) => rollout::Settings {
            clock_since: input.clock_since.as_ref().map(|t| t.0),
            ..settings
        },
        Err(e) => return blocked(input, conditions::reason::INVALID_ROLLOUT.to_string(), e.to_string()),
    };
    let renderer = Renderer::new();
    // Pools that share an object read as failed, for the rollout and the
    // roll-up alike: later entries of the map win.
    let isolation = observed::isolation_failures(&input.owned);
    let owned: BTreeMap<&str, &ObservedRelease> =
        input.owned.iter().chain(&isolation).map(|o| (o.name.as_str(), o)).collect();
    let mut built: BTreeMap<String, Result<Built, FieldError>> = BTreeMap::new();
    let mut outcomes = Vec::new();
    let mut total = 0usize;
    for (count, pool) in selected.pools.iter().enumerate() {
        let name = naming::release_name(app.name, &pool.name);
        if input.others.named(&name) {
            outcomes.push(PoolOutcome {
                pool: pool.name.clone(),
                release: name.clone(),
                outcome: Outcome::Conflict { name },
            });
        } else {
            let written = owned.get(name.as_str()).and_then(|o| o.spec_hash.as_deref());
            let result = release::build(&app, pool, &renderer, written);
            total += result.as_ref().map_or(0, |b| b.size);
            if total > release::MAX_APPLICATION_BYTES {
                return blocked(
                    input,
                    conditions::reason::APPLICATION_TOO_LARGE.to_string(),
                    too_large(count + 1, selected.pools.len()),
                );
            }
            built.insert(pool.name.clone(), result.map(|b| Built::new(b, owned.get(name.as_str()))));
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
        rollup: Rollup::default(),
        suspended: false,
        requeue_after: None,
        suspend: Vec::new(),
        resume: Vec::new(),
        inert: Vec::new(),
    };
    for (pool, result) in built {
        if let Some(outcome) = result.as_ref().ok().and_then(|b| helm_release_taken(input, &owned, b)) {
            let release = naming::release_name(app.name, &pool);
            // Its own release, if it drives that Helm release, would fight
            // the other's installs (an upgrade of helm-controller's
            // alternates between the two): it drives nothing from now on.
            let key = result.as_ref().ok().and_then(|b| b.helm_release.as_ref());
            if owned
                .get(release.as_str())
                .is_some_and(|o| !o.inert && o.helm_release.is_some() && o.helm_release.as_ref() == key)
            {
                plan.inert.push((release.clone(), helm_release_taken_message(&outcome)));
            }
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
    let suspended = suspend_or_resume(input, &mut plan);
    let rollout = Scheduled {
        decision: &decision,
        status: decision.status(&revision(&app), &settings),
    };
    plan.rollup = roll_up(input, &plan, &owned, blocker, Some(rollout));
    plan.suspended = suspended;
    plan.status = stated(&plan.rollup, suspended);
    plan
}

/// Why an application whose releases pass its budget is refused whole:
/// the first `built` of `selected` pools passed it.
fn too_large(built: usize, selected: usize) -> String {
    format!(
        "the HelmReleases of this application pass {} MiB together (the first {built} of its \
         {selected} pools did), the most one application may hold; nothing is written or pruned \
         until they fit: render less per pool (values shared by every pool belong in the chart's \
         values.yaml or a valuesFrom ConfigMap), or split the pools between applications",
        release::MAX_APPLICATION_BYTES / (1024 * 1024)
    )
}

/// With `spec.suspend: true` the application stops acting, as Flux's
/// suspend stops a controller acting on an object: no release is written,
/// created or pruned (a pool that leaves keeps its release, a pool that
/// joins gets none), and each release it has is suspended too, so that
/// helm-controller stops acting on it as well. Resumed, the suspension it
/// put on its releases is taken back first. Returns whether it is suspended.
fn suspend_or_resume(input: &PlanInput, plan: &mut Plan) -> bool {
    let suspended = input.app.spec.suspend == Some(true);
    if suspended {
        plan.apply.clear();
        plan.prune.clear();
        for p in plan
            .pools
            .iter_mut()
            .filter(|p| matches!(p.outcome, Outcome::Planned | Outcome::Deferred(_)))
        {
            p.outcome = Outcome::Suspended;
        }
    }
    plan.requeue_after = plan.requeue_after.filter(|_| !suspended);
    suspended
}

/// A suspended application says so where `kubectl get npa` and kstatus
/// look: Ready's reason and message; nothing is in progress.
fn report_suspended(status: &mut NodePoolApplicationStatus) {
    status.conditions.retain(|c| c.type_ != conditions::RECONCILING);
    if let Some(ready) = status.conditions.iter_mut().find(|c| c.type_ == conditions::READY) {
        ready.reason = conditions::reason::SUSPENDED.to_string();
        ready.message = format!(
            "suspended (spec.suspend): no release is written, created or pruned, and every release is \
             suspended; {}",
            ready.message
        );
    }
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
    // A Flux request passed on is a new revision too: after a halt, a
    // request (with `resetAt`, say) starts the rollout again, failed pools
    // first, as a fix would.
    let requests: Vec<String> = app.requests.iter().map(|(k, v)| format!("{k}={v}")).collect();
    match requests.is_empty() {
        true => naming::hex_prefix(&[&text, chart], 10),
        false => naming::hex_prefix(&[&text, chart, &requests.join(",")], 10),
    }
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
    let applying: BTreeSet<&str> =
        plan.apply.iter().filter(|d| !d.restores()).map(|d| d.pool.as_str()).collect();
    let resuming: BTreeSet<&str> = plan.apply.iter().filter(|d| d.resumed).map(|d| d.pool.as_str()).collect();
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
            let nodes = input.nodes.and_then(|n| n.get(&p.pool)).copied();
            let release = match (observed, applying.contains(p.pool.as_str())) {
                (None, _) => rollout::Release::Missing,
                (Some(o), true) => rollout::Release::Behind(&o.status),
                // Resumed now: its clock starts again with this write.
                (Some(o), false) if resuming.contains(p.pool.as_str()) => rollout::Release::Current {
                    status: &o.status,
                    written: Some(input.now.0),
                },
                // Suspended, Flux does not act on it: no deadline runs.
                (Some(o), false) if o.suspended_with_app => rollout::Release::Current {
                    status: &o.status,
                    written: None,
                },
                (Some(o), false) => rollout::Release::Current {
                    status: &o.status,
                    written: written_at(o),
                },
            };
            Some(rollout::PoolInput {
                pool: &p.pool,
                wave: wave_of(pool),
                offline: nodes.is_some_and(|n| n.offline()),
                offline_since: nodes.and_then(|n| n.changed),
                release,
            })
        })
        .collect();
    let decision = rollout::decide(settings, &inputs, waves.len(), input.now.0);
    let now = input.now.0.to_string();
    plan.apply.retain_mut(|d| {
        let stamp = match decision.state(&d.pool) {
            // Put back as it was (or woken from inert), its deadline
            // running from its real write.
            _ if d.drift.is_some() || d.lift_inert => {
                owned.get(d.name.as_str()).and_then(|o| o.written_at.clone()).unwrap_or(now.clone())
            }
            _ if d.resumed => now.clone(),
            Some(PoolRollout::Write) | None => now.clone(),
            Some(_) => return false,
        };
        let mut object = d.object.value();
        object["metadata"]["annotations"][naming::ANNOTATION_WRITTEN_AT] = Value::String(stamp);
        d.object = Manifest::new(&object);
        true
    });
    let restored: BTreeSet<&str> =
        plan.apply.iter().filter(|d| d.restores()).map(|d| d.pool.as_str()).collect();
    for p in plan.pools.iter_mut().filter(|p| p.outcome == Outcome::Planned) {
        match decision.state(&p.pool) {
            _ if restored.contains(p.pool.as_str()) => {}
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

fn app_info<'a>(input: &PlanInput<'a>, requests: &'a [(&'a str, &'a str)]) -> AppInfo<'a> {
    let app = input.app;
    AppInfo {
        requests,
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
    /// What the existing release drives, when it drives another.
    drove: Option<HelmReleaseKey>,
    /// The existing release drives nothing (see `ANNOTATION_INERT`).
    inert: bool,
    /// Whether a claim is made before the write.
    claims: bool,
    /// Carries this spec hash, and was suspended with the application.
    resumed: bool,
}

impl Built {
    fn new(built: BuiltRelease, observed: Option<&&ObservedRelease>) -> Self {
        let drift = observed
            .filter(|o| o.spec_hash.as_deref() == Some(built.spec_hash.as_str()))
            .and_then(|o| o.live.as_ref())
            .and_then(PackedJson::value)
            .and_then(|live| drift::first_difference(&built.object, &live));
        // Resumed, a release gets our spec again whole: suspending may have
        // taken `spec.suspend` from us (an override's), and resuming drops it.
        let same_hash = observed.filter(|o| !o.suspended_with_app).and_then(|o| o.spec_hash.as_deref())
            == Some(built.spec_hash.as_str());
        let resumed = observed.is_some_and(|o| {
            o.suspended_with_app && o.spec_hash.as_deref() == Some(built.spec_hash.as_str())
        });
        let helm_release = naming::helm_release_of(&built.object);
        let inert = observed.is_some_and(|o| o.inert);
        let drove = observed
            .and_then(|o| o.helm_release.clone())
            .filter(|d| Some(d) != helm_release.as_ref());
        Self {
            resumed,
            claims: observed.is_none() || drove.is_some() || inert,
            drove,
            inert,
            helm_release,
            object: (!same_hash || drift.is_some() || inert).then(|| Manifest::new(&built.object)),
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
                        resumed: built.resumed,
                        claim: built.helm_release.filter(|_| built.claims),
                        drove: built.drove,
                        lift_inert: built.inert,
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

#[cfg(test)]
mod tests;
