//! What one reconcile of an application should do: which HelmReleases to
//! write, which to delete, and what to report. Pure, so every rule here is
//! tested without a cluster; the controller only carries the plan out.
//!
//! Safety rules: a pool whose config fails is neither written nor pruned
//! (its running release stays as it was); a name held by a HelmRelease this
//! application does not own is never touched; an invalid selector stops the
//! whole plan, since it cannot say which pools are wanted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions;
use crate::api::naming;
use crate::api::NodePoolApplication;
use crate::chart::schema::Chart;
use crate::chart::shared::{ChartKind, ChartRef};
use crate::pools::nodes::NodeCount;
use crate::pools::{self, Pool};
use crate::reconcile::fleet::{self, FleetReport, Handled, PoolReport};
use crate::reconcile::history::{self, HistoryWrites};
pub use crate::reconcile::history::{History, PastRevision};
use crate::reconcile::isolation;
use crate::reconcile::packed::PackedJson;
use crate::reconcile::release::build::{AppInfo, FieldError};
use crate::reconcile::release::state::{ReleaseState, ReleaseStatus};
use crate::reconcile::rollout::analysis::{Analysing, Answers, Checks};
use crate::reconcile::rollout::{self, PoolRollout};

/// Everything a plan is computed from.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// With metadata name, namespace, uid and generation as the API server set them.
    pub app: &'a NodePoolApplication,
    pub pools: &'a [&'a Pool],
    /// Each pool's nodes, by pool name; `None` when nodes were not looked
    /// at (then no pool counts as offline).
    pub nodes: Option<&'a BTreeMap<String, NodeCount>>,
    /// HelmReleases whose controller owner reference is this application,
    /// shared with the watch cache that read them.
    pub owned: Vec<Arc<ObservedRelease>>,
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
    /// The application's revision history, for a rollback; `None` when
    /// it was not read (then nothing is rolled back).
    pub history: Option<&'a History>,
    /// What the last plan of this application found ([`Plan::memo`]): the
    /// pools it need not build again. `None` builds every pool.
    pub memo: Option<&'a Memo>,
    /// The application's first install on pools of one cluster goes to one
    /// pool alone until it is judged (see `rollout::first_install_alone`):
    /// what the controller does. Off, every new pool is written at once,
    /// as a preview of the fleet once installed shows it.
    pub first_install_alone: bool,
    /// What the revision's metric checks answered so far, by pool (kept
    /// by the runtime, which asks them), or what the status says of them;
    /// `None` judges no check (a preview of the releases).
    pub analysis: Option<Answers<'a>>,
    /// What becomes of a release whose revision and pool are as they were
    /// and that this controller renders otherwise (`--rendering-changes`).
    pub rendering_changes: RenderingChanges,
}

/// The application's releases by name, for lookups by name alone:
/// hashed, since at ten thousand pools an ordered map's string compares
/// were a tenth of a resync.
pub(super) type Owned<'a> = foldhash::HashMap<&'a str, &'a ObservedRelease>;

/// A chart problem that holds every write back: an unresolvable version, a
/// missing source (`transient: false`, the user must act), or an artifact
/// source-controller has not produced yet (`transient: true`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hold {
    pub reason: String,
    pub message: String,
    pub transient: bool,
}

mod build;
mod guards;
pub mod memo;
mod observed;
mod outcome;
mod ready;
mod recorded;
mod report;
pub mod rest;
mod rewrite;
mod rollback;
mod schedule;
mod settings;

pub use crate::reconcile::fleet::WriteRefused;
use build::{app_info, Built};
use guards::{blocked, check_selectors, helm_release_taken_message, nothing_selected};
pub use memo::Memo;
pub use observed::{
    isolation_failures, HelmReleaseKey, ListedReleases, Manifest, ObservedRelease, OtherReleases,
    TakenRelease, WrittenAt,
};
pub use outcome::{DesiredRelease, Outcome, Plan, PoolOutcome, UninstallSkipped, Writes};
pub use ready::ReadyMark;
use recorded::judged_by;
use report::roll_up;
pub use rest::{at_rest, AtRest, Rest};
pub use rewrite::RenderingChanges;
pub use rollback::stamps::Stamps;
use settings::{kept_failures, rollout_of};

/// Flux's request annotations the application carries, in a fixed order.
pub fn requests(app: &NodePoolApplication) -> Vec<(&str, &str)> {
    let annotations = app.metadata.annotations.as_ref();
    naming::FLUX_REQUESTS
        .iter()
        .filter_map(|key| annotations.and_then(|a| a.get(*key)).map(|token| (*key, token.as_str())))
        .collect()
}

pub fn plan(input: &PlanInput) -> Plan {
    let mut plan = plan_releases(input);
    plan.report.handled = Handled::of(input.app);
    // Whatever else stops the plan, the releases follow the application's
    // suspension (see `Outcome::Suspended`).
    let marked = |o: &&Arc<ObservedRelease>| o.suspended_with_app;
    match input.app.spec.suspend == Some(true) {
        true => plan.suspend = input.owned.iter().filter(|o| !marked(o)).map(|o| o.name.clone()).collect(),
        false => plan.resume = input.owned.iter().filter(marked).map(|o| o.name.clone()).collect(),
    }
    plan.ready_marks = ready::marks(input, &plan);
    let rest = rest::of(input, &plan);
    plan.memo.set_rest(rest);
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
    let revision = revision(&app);
    // Pools that share an object read as failed, for the rollout and the
    // roll-up alike: later entries of the map win.
    let isolation = observed::isolation_failures(input.owned.iter().map(Arc::as_ref));
    let mut owned = Owned::with_capacity_and_hasher(input.owned.len(), Default::default());
    owned.extend(input.owned.iter().map(Arc::as_ref).chain(&isolation).map(|o| (o.name.as_str(), o)));
    let mut candidates = match build::candidates(input, &app, &owned, &selected.pools) {
        Ok(built) => built,
        Err(message) => {
            return blocked(input, conditions::reason::APPLICATION_TOO_LARGE.to_string(), message)
        }
    };
    let rewrites =
        rewrite::rewrites(&mut candidates.pools, &owned, &revision, app.shard, input.rendering_changes);
    let (settings, targets) = match rollout_of(input, &app, &selected.pools, &revision, &rewrites) {
        Ok(rollout) => rollout,
        Err(message) => return blocked(input, conditions::reason::INVALID_ROLLOUT.to_string(), message),
    };
    let reach = reach(input, &owned);
    let reach = reach.as_ref().or(input.nodes);
    let checks = match app
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.analysis.as_ref())
        .map(Checks::new)
        .transpose()
    {
        Ok(checks) => checks,
        Err(e) => return blocked(input, conditions::reason::INVALID_ROLLOUT.to_string(), e.to_string()),
    };
    let windows = app.spec.rollout.as_ref().map(|r| r.windows.as_slice()).unwrap_or_default();
    let windows = match rollout::window::of_spec(windows) {
        Ok(windows) => windows,
        Err(e) => return blocked(input, conditions::reason::INVALID_ROLLOUT.to_string(), e.to_string()),
    };
    let own_windows = selected
        .pools
        .iter()
        .filter_map(|p| p.annotations.get(naming::ANNOTATION_MAINTENANCE_WINDOW).map(String::as_str));
    let windows = rollout::window::Gates::new(&windows, own_windows, input.now.0);
    let scheduled = schedule::Scheduling {
        settings: &settings,
        revision: &revision,
        selected: &selected.pools,
        reach,
        windows: &windows,
        targets: &targets,
        // A revision that completed is judged no more (see `Settings::completed`).
        checks: checks.as_ref().filter(|_| settings.progressive && !settings.completed),
    };
    let judged = scheduled.checks.is_some();
    let (decision, asks) = schedule::decide(input, &owned, &scheduled, &candidates.pools);
    let suspended = input.app.spec.suspend == Some(true);
    let mut plan = Plan::new(selected.missing.clone());
    plan.inert = candidates.inert;
    plan.memo = candidates.memo;
    let deciding = schedule::Deciding {
        input,
        app: &app,
        owned: &owned,
        decision: &decision,
        revision: &revision,
        targets: &targets,
        min_ready: settings.min_ready,
        rollout_number: settings.rollout_number,
    };
    deciding.outcomes(candidates.pools, &mut plan);
    plan.rollback_charts = targets.charts();
    plan.analysis =
        checks.map(|checks| Analysing::of(checks, &revision, asks, judged, kept_failures(input, &revision)));
    // Nothing is pruned while the chart holds the writes or the
    // application is suspended (see `Outcome::Suspended`).
    let prune_held = match input.hold.is_none() && !suspended {
        true => prune_leaving(input, &mut plan, settings.offline_after),
        false => None,
    };
    plan.requeue_after = earliest(decision.requeue_after.filter(|_| !suspended), plan.uninstall_wait);
    plan.waits_on_releases = decision
        .waits_on_releases(settings.max_unavailable)
        .filter(|_| !suspended && input.hold.is_none());
    let blocker = blocker(input).or(prune_held);
    let rollout = Scheduled {
        decision: &decision,
        status: decision.status(&revision, &settings),
    };
    plan.report = FleetReport {
        suspended,
        ..roll_up(input, &plan, &owned, blocker, Some(rollout), reach)
    };
    plan.history = history_writes(input, &app, &mut plan.report);
    plan
}

/// The sooner of two requeues, either of which may be none.
fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The reason and message of what stops the application: a hold a
/// person must lift.
fn blocker(input: &PlanInput) -> Option<(String, String)> {
    input
        .hold
        .as_ref()
        .filter(|hold| !hold.transient)
        .map(|hold| (hold.reason.clone(), hold.message.clone()))
}

/// The owned releases no pool wants any more: pruned, or, when already
/// being deleted, waited on until their uninstall ends or is skipped. A
/// prune of most of the fleet at once is held instead (see
/// [`guards::prune_held`]): why, when it is.
fn prune_leaving(input: &PlanInput, plan: &mut Plan, offline_after: Duration) -> Option<(String, String)> {
    let mut wanted = foldhash::HashSet::with_capacity_and_hasher(plan.pools.len(), Default::default());
    wanted.extend(plan.pools.iter().map(|p| p.release.as_str()));
    let leaving = input.owned.iter().filter(|o| !wanted.contains(o.name.as_str()));
    let (deleting, prune): (Vec<_>, Vec<_>) = leaving.partition(|o| o.deleting);
    let waiting = uninstalls(deleting.into_iter().map(Arc::as_ref), offline_after, input.now.0);
    (plan.uninstall_skipped, plan.uninstall_wait) = waiting;
    // A release renamed (a new releaseName) is replaced, its pool still
    // selected: only releases of pools that left count towards the guard.
    let mut selected = foldhash::HashSet::with_capacity_and_hasher(plan.pools.len(), Default::default());
    selected.extend(plan.pools.iter().map(|p| p.pool.as_str()));
    let left = prune
        .iter()
        .filter(|o| o.pool.as_deref().is_none_or(|p| !selected.contains(p)))
        .count();
    let held = guards::prune_held(input, left);
    if held.is_none() {
        plan.prune = prune.into_iter().map(|o| o.name.clone()).collect();
    }
    held
}

/// The history's writes for the revision the plan rolls out, and the last
/// revision that completed, from its records, into the rollout's report.
fn history_writes(input: &PlanInput, app: &AppInfo, report: &mut FleetReport) -> HistoryWrites {
    let (Some(history), Some(rollout)) = (input.history, report.rollout.as_mut()) else {
        return HistoryWrites::default();
    };
    let current = history::Current {
        revision: &rollout.revision,
        phase: rollout.phase,
        chart_version: input.chart.map(|c| c.version.as_str()),
        judgement: &judged_by(app),
        because: report.halt_cause.as_deref(),
        number: rollout.number,
    };
    rollout.last_complete_revision = history::last_complete(&history.recorded, current).map(String::from);
    // Until the chart resolves, the revision lacks its chart version: it
    // is no revision anyone rolls out, and recording it would list one.
    if input.hold.is_some() {
        return HistoryWrites::default();
    }
    let limit = app.spec.rollout.as_ref().and_then(|r| r.revision_history_limit);
    let limit = limit
        .and_then(|l| usize::try_from(l).ok())
        .unwrap_or(history::DEFAULT_REVISION_HISTORY_LIMIT);
    // What the revision is: the spec it hashes (the rollout settings aside)
    // and the chart it resolved to.
    let data = || {
        let requests: serde_json::Map<String, serde_json::Value> =
            app.requests.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
        serde_json::json!({
            "spec": revision_spec(app.spec),
            "requests": requests,
            "chart": input.chart_ref.map(|c| serde_json::json!({
                "kind": c.kind.as_str(),
                "name": c.name,
                "namespace": c.namespace,
            })),
        })
    };
    let name = input.app.metadata.name.as_deref().unwrap_or_default();
    history::plan(name, current, &history.recorded, limit, data)
}

/// Of the releases being deleted, those whose uninstall has waited on a
/// site that does not answer for `after` (the application's
/// `rollout.offlineAfter`): let go without it; and how long until the
/// next of the others is due. A site that answers again within `after`
/// gets its uninstall; one that is gone for good no longer holds the
/// release, or its application's deletion, Terminating for ever.
pub fn uninstalls<'a>(
    deleting: impl IntoIterator<Item = &'a ObservedRelease>,
    after: Duration,
    now: k8s_openapi::jiff::Timestamp,
) -> (Vec<UninstallSkipped>, Option<Duration>) {
    let mut skipped = Vec::new();
    let mut wait: Option<Duration> = None;
    for release in deleting.into_iter().filter(|r| r.deleting) {
        let Some(since) = release.uninstall_blocked_since else {
            continue;
        };
        match since.checked_add(after).map(|due| due.duration_since(now)) {
            Ok(left) if left.is_positive() => {
                let left = Duration::try_from(left).unwrap_or_default();
                wait = Some(wait.map_or(left, |w| w.min(left)));
            }
            _ => skipped.push(UninstallSkipped {
                pool: release.pool.clone().unwrap_or_default(),
                release: release.name.clone(),
                since,
                after,
            }),
        }
    }
    (skipped, wait)
}

/// Whether each pool is reached: its nodes as observe counted them and,
/// for a site that is a cluster, helm-controller's word that it cannot
/// reach it (its release's Ready message, see
/// [`crate::reconcile::release::state::unreachable_since`]) where its ClusterProfile does not
/// already say it is down. `None` when there is nothing to add to what
/// observe counted.
fn reach(input: &PlanInput, owned: &Owned) -> Option<BTreeMap<String, NodeCount>> {
    if input.app.spec.pools.kind != crate::api::PoolKind::ClusterProfile {
        return None;
    }
    let cut_off: Vec<(&str, k8s_openapi::jiff::Timestamp)> = owned
        .values()
        .filter_map(|o| Some((o.pool.as_deref()?, o.unreachable_since?)))
        .collect();
    if cut_off.is_empty() {
        return None;
    }
    let mut reach = input.nodes.cloned().unwrap_or_default();
    for (pool, since) in cut_off {
        let known = reach.get(pool).copied();
        if known.is_none_or(|n| !n.offline()) {
            let unreachable = NodeCount {
                ready: 0,
                total: 1,
                changed: Some(since),
                of: crate::pools::nodes::Counted::Connection,
            };
            reach.insert(pool.to_string(), unreachable);
        }
    }
    Some(reach)
}

/// The part of a spec a revision is made of: what the releases are built
/// from. Not the rollout settings (pausing is no new revision), nor which
/// pools are selected, what becomes of a release whose pool leaves, or
/// the application's suspension: none of them changes a release, and a
/// new revision whose releases are those of the last would send them to
/// the canary again and ask for every approval anew. The revision's hash
/// and its history record are both made from this.
pub fn revision_spec(spec: &crate::api::NodePoolApplicationSpec) -> crate::api::NodePoolApplicationSpec {
    crate::api::NodePoolApplicationSpec {
        rollout: None,
        pools: crate::api::Pools {
            names: Vec::new(),
            selector: None,
            ..spec.pools.clone()
        },
        deletion_policy: None,
        suspend: None,
        ..spec.clone()
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
    let text = serde_json::to_string(&revision_spec(app.spec)).unwrap_or_default();
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

#[cfg(test)]
mod tests;
