//! The steps [`super::reconcile`] lists, each one call: what each reads
//! of the controller around it ([`Controller`]) and how it is carried out.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use kube::{Api, Client, ResourceExt};

use crate::api::{DeletionPolicy, NodePoolApplication, PoolKind};
use crate::chart::shared::ChartRef;
use crate::reconcile::apply::{self, Applied, SharedCharts};
use crate::reconcile::fleet::{events, Published};
use crate::reconcile::history::{History, HistoryWrites};
use crate::reconcile::observe::{self, helmrelease_resource, Caches};
use crate::reconcile::plan::{AtRest, Hold, Memo, ObservedRelease, Plan, Rest};
use crate::reconcile::resolve::{self, SharedChart};
use crate::reconcile::rollout::analysis::{Analysing, Answers, Records};
use crate::reconcile::ReconcileError;

/// What a reconcile reads and writes through, lent by the controller.
pub struct Controller<'a> {
    pub client: &'a Client,
    /// The watch caches observe reads.
    pub caches: &'a Caches,
    /// How the chart step resolves and makes the shared chart.
    pub charts: resolve::Charts<'a>,
    /// Every shared chart the controller manages, from its watch.
    pub shared_charts: &'a SharedCharts,
    /// Since when this controller's clock has measured rollouts (see
    /// [`crate::reconcile::plan::PlanInput::clock_since`]).
    pub clock_since: Option<Time>,
    /// What the controller keeps of one application between reconciles.
    pub memory: &'a dyn Memory,
    /// Asks the metric checks' queries, away from the reconcile.
    pub asking: &'a dyn Asking,
    /// `--rendering-changes` (see [`crate::reconcile::plan::PlanInput::rendering_changes`]).
    pub rendering_changes: crate::reconcile::plan::RenderingChanges,
}

/// Asks a plan's due checks away from the reconcile, so that no check
/// (a webhook at an address that drops packets) holds a worker another
/// application waits for: the answers are kept for the application, which
/// is woken when they come in, and its next plan judges them.
pub trait Asking: Sync {
    /// Starts a round of `analysing`'s asks for `app`, unless a round of
    /// its own is in flight: whether one is in flight now.
    fn ask(&self, app: &NodePoolApplication, analysing: Analysing) -> bool;
}

/// What the controller keeps of one application between its reconciles,
/// and what it must know mid-reconcile.
pub trait Memory: Sync {
    /// What the last plan of the application found (see [`Memo`]).
    fn memo(&self) -> Option<Arc<Memo>>;
    fn keep_memo(&self, memo: Memo);
    /// What the last plan left at rest, once its reconcile ended with
    /// nothing failed and nothing written (see [`crate::reconcile::plan::rest`]).
    fn rest(&self) -> Option<Rest>;
    /// Kept after [`Memory::keep_memo`], which lets the last one go.
    fn keep_rest(&self, rest: Option<Rest>);
    /// Said before the writes, since a release written now may turn Ready
    /// before they end, and that event must find the rollout waiting on
    /// it: how many verdicts wait on releases.
    fn planned(&self, waits_on_releases: Option<usize>);
    /// What the metric checks of the revision under way answered so far.
    fn answers(&self) -> Option<Arc<Records>>;
    /// The answers let go: no revision is judged now. New ones are kept by
    /// whoever asks them (see [`Asking`]).
    fn let_answers_go(&self);
    /// The releases its last reconcile created.
    fn created(&self, releases: Vec<String>);
    /// How many of the releases its last reconcile created the release
    /// cache does not show yet (`seen` says whether it shows one), while
    /// that is worth waiting for; `None` once it shows them all, or after
    /// a bound (a release created then deleted before the watch brought
    /// it never shows).
    fn creates_unseen(&self, seen: &dyn Fn(&str) -> bool) -> Option<usize>;
}

/// The APIs of the application's namespace the steps write through.
pub(super) struct Apis {
    pub applications: Api<NodePoolApplication>,
    releases: Api<DynamicObject>,
    leases: Api<Lease>,
    records: Api<ControllerRevision>,
}

impl Apis {
    pub(super) fn of(client: &Client, app: &NodePoolApplication) -> Self {
        let namespace = app.namespace().unwrap_or_default();
        Self {
            applications: Api::namespaced(client.clone(), &namespace),
            releases: Api::namespaced_with(client.clone(), &namespace, &helmrelease_resource()),
            leases: Api::namespaced(client.clone(), &namespace),
            records: Api::namespaced(client.clone(), &namespace),
        }
    }
}

/// Our finalizers the application should carry: one to delete its shared
/// charts (and, for sites that are clusters, to see their releases go),
/// one to orphan its releases under `deletionPolicy: Orphan`.
pub fn finalizers(shared_chart: bool, app: &NodePoolApplication) -> Vec<&'static str> {
    let orphan = app.spec.deletion_policy == Some(DeletionPolicy::Orphan);
    let sites = app.spec.pools.kind == PoolKind::ClusterProfile;
    [
        (shared_chart || sites).then_some(apply::FINALIZER),
        orphan.then_some(apply::ORPHAN_FINALIZER),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub(super) async fn set_finalizers(
    c: &Controller<'_>,
    apis: &Apis,
    app: &NodePoolApplication,
) -> Result<(), ReconcileError> {
    let wanted = finalizers(c.charts.shared, app);
    apply::set_finalizers(&apis.applications, app, &wanted)
        .await
        .map_err(ReconcileError::Finalizers)
}

/// The plan over what observe saw, with the chart the resolve step found
/// (or its hold), the controller's clock and the last plan's memo; none
/// when the input is what the last plan, at rest, was made from.
pub(super) fn plan(
    c: &Controller<'_>,
    app: &NodePoolApplication,
    observed: observe::Observed,
    chart: Option<&Result<SharedChart, Hold>>,
    history: &History,
) -> Result<Planned, AtRest> {
    let (chart_ref, chart, hold) = match chart {
        Some(Ok(shared)) => (Some(&shared.chart_ref), Some(shared.chart.as_ref()), None),
        Some(Err(hold)) => (None, None, Some(hold.clone())),
        None => (None, None, None),
    };
    let memo = c.memory.memo();
    let answers = c.memory.answers().unwrap_or_default();
    let answers = answers.as_ref();
    let beyond = observe::Beyond {
        now: Time(k8s_openapi::jiff::Timestamp::now()),
        chart_ref,
        chart,
        hold,
        clock_since: c.clock_since.clone(),
        memo: memo.as_deref(),
        analysis: Some(Answers::Asked(answers)),
        rendering_changes: c.rendering_changes,
    };
    let rest = c.memory.rest();
    let (mut planned, owned) = observed.plan_unless_at_rest(app, history, beyond, rest.as_ref())?;
    let rest = planned.memo.take_rest();
    c.memory.keep_memo(std::mem::take(&mut planned.memo));
    Ok(Planned { planned, owned, rest })
}

/// A plan made, with what it leaves for the next reconcile.
pub(super) struct Planned {
    pub planned: Plan,
    pub owned: Vec<Arc<ObservedRelease>>,
    /// What the plan left at rest, kept only if the reconcile ends with
    /// nothing failed and nothing written.
    pub rest: Option<Rest>,
}

/// The metric checks the plan says are due, handed to be asked (see
/// [`Asking`]): whether a round of them is in flight, whose answers wake
/// the application. Taken from the plan rather than copied: at ten
/// thousand pools under a check, its asks are megabytes.
pub(super) fn ask_checks(c: &Controller<'_>, app: &NodePoolApplication, planned: &mut Plan) -> bool {
    let Some(analysing) = planned.analysis.take().filter(|a| a.judged) else {
        // Answers are read only while a revision is judged: once it
        // completed, or with no checks left, they are let go rather than
        // held until the next revision (megabytes at ten thousand pools).
        c.memory.let_answers_go();
        return false;
    };
    c.asking.ask(app, analysing)
}

pub(super) async fn carry_out(
    c: &Controller<'_>,
    apis: &Apis,
    app: &NodePoolApplication,
    planned: &mut Plan,
    owned: &[Arc<ObservedRelease>],
) -> Applied {
    let target = apply::Target {
        app,
        releases: &apis.releases,
        leases: &apis.leases,
        applications: &apis.applications,
        cached: &c.caches.releases,
        charts: c.shared_charts,
        orphan: app.spec.deletion_policy == Some(DeletionPolicy::Orphan),
    };
    apply::carry_out(&target, planned.take_writes(), owned).await
}

pub(super) async fn write_history(
    apis: &Apis,
    app: &NodePoolApplication,
    writes: &HistoryWrites,
) -> Result<(), ReconcileError> {
    if writes.is_empty() {
        return Ok(());
    }
    apply::write_history(&apis.records, app, writes)
        .await
        .map_err(ReconcileError::History)
}

/// Deletes the application's shared charts no release uses any more. Still
/// in use: the current one (and the chart that resolves its version),
/// those of releases this reconcile left as they were (pools whose config
/// fails, pools the rollout has not reached), and `rollback`: those of
/// the revisions pools may go back to, until the revision under way
/// completes (the plan names them only then).
pub(super) async fn prune_charts(
    c: &Controller<'_>,
    app: &NodePoolApplication,
    chart: Option<&Result<SharedChart, Hold>>,
    owned: &[Arc<ObservedRelease>],
    applied: &Applied,
    rollback: &[ChartRef],
) -> Result<(), ReconcileError> {
    let Some(Ok(current)) = chart else {
        return Ok(());
    };
    let kept: Vec<&ChartRef> = owned
        .iter()
        .filter(|o| !applied.touched.contains(&o.name))
        .filter_map(|o| o.chart_ref.as_ref())
        .chain([&current.chart_ref])
        .chain(current.resolver.as_ref())
        .chain(rollback)
        .collect();
    apply::prune_charts(c.client, c.shared_charts, app, &kept)
        .await
        .map_err(ReconcileError::Charts)
}

/// How the fleet stands once every write of the reconcile is done: the
/// refused writes and a failed step reach the conditions and the counts;
/// the status is written when it changed but for timestamps (and then
/// `true` comes with it).
pub(super) async fn report(
    apis: &Apis,
    app: &NodePoolApplication,
    planned: &mut Plan,
    applied: &Applied,
    failed: Option<&ReconcileError>,
) -> Result<(Published, bool), ReconcileError> {
    let report = &mut planned.report;
    report.writes_refused(&applied.refused);
    report.failed_step = failed.map(|e| (e.step_reason().to_string(), e.to_string()));
    let before = app.status.clone().unwrap_or_default();
    let published = report.publish(&before, &applied.done);
    let written = !events::same_ignoring_timestamps(&before, &published.status);
    if written {
        apply::apply_status(&apis.applications, &app.name_any(), &published.status)
            .await
            .map_err(ReconcileError::Status)?;
    }
    Ok((published, written))
}
