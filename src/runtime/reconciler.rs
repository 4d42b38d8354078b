//! One reconcile of one application, as the controller runs it: wait for
//! the caches, observe, plan, apply, write the status and the Events;
//! finalize a deleted application; report one the client cannot read.

use std::sync::Arc;
use std::time::Duration;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use tracing::warn;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions;
use crate::api::{DeletionPolicy, NodePoolApplication, PoolKind};
use crate::chart::shared::ChartRef;
use crate::reconcile::apply;
use crate::reconcile::fleet::{events as transitions, FleetCounts, Transition};
use crate::reconcile::history;
use crate::reconcile::observe::{self, helmrelease_resource, ObserveError};
use crate::reconcile::plan::{self, Hold, ObservedRelease, Plan, PlanInput};
use crate::reconcile::resolve::{self, SharedChart};
use crate::runtime::metrics::PoolCounts;

use super::context::*;
use super::index::Interest;

pub(super) async fn reconcile(meta: Arc<AppMeta>, ctx: Arc<Context>) -> Result<Action, Error> {
    use tracing::Instrument;
    let span = crate::runtime::logs::reconcile_span(&meta.namespace().unwrap_or_default(), &meta.name_any());
    reconcile_logged(meta, ctx).instrument(span).await
}

async fn reconcile_logged(meta: Arc<AppMeta>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut ready = ctx.ready.clone();
    match ready.wait_for(|r| *r != Readiness::Listing).await.map(|r| *r) {
        Ok(Readiness::Ready) => {}
        Ok(Readiness::Stopped(watch)) => return Err(ObserveError::CacheStopped(watch).into()),
        Ok(Readiness::Listing) | Err(_) => return Err(ObserveError::CacheStopped("the caches").into()),
    }
    let start = std::time::Instant::now();
    let name = meta.name_any();
    let namespace = meta.namespace().unwrap_or_default();
    let apps: Api<NodePoolApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = match apps.get_opt(&name).await {
        Ok(Some(app)) => {
            ctx.index.read(ObjectRef::from_obj(meta.as_ref()), Interest::of(&app, &namespace));
            reconcile_app(Arc::new(app), &ctx).await
        }
        Ok(None) => {
            ctx.index.forget(&ObjectRef::from_obj(meta.as_ref()));
            Ok(Action::await_change())
        }
        Err(kube::Error::SerdeError(e)) => unreadable(&meta, &e, &ctx).await,
        Err(source) => Err(Error::Read {
            namespace,
            name,
            source,
        }),
    };
    // Deleted, waiting or done: any end without error ends the streak.
    let app_ref = ObjectRef::from_obj(meta.as_ref());
    ctx.index.settle(&app_ref, result.is_ok());
    let outcome = match &result {
        Ok(_) => "success",
        Err(e) => e.category(),
    };
    ctx.metrics.observe_reconcile(outcome, start.elapsed());
    // A reconcile that found the application gone leaves no series behind.
    ctx.index.reconciled(&app_ref, start.elapsed());
    result
}

/// One reconcile of an application that is there: resolve the chart →
/// observe → plan → apply → report.
pub(super) async fn reconcile_app(app: Arc<NodePoolApplication>, ctx: &Context) -> Result<Action, Error> {
    let namespace = app.namespace().unwrap_or_default();
    let apps: Api<NodePoolApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    if app.meta().deletion_timestamp.is_some() {
        if let Some(wait) = delete_site_releases(ctx, &app).await? {
            return Ok(Action::requeue(wait));
        }
        return finalize(ctx, &apps, app.as_ref()).await;
    }
    apply::set_finalizers(&apps, app.as_ref(), &finalizers(ctx, &app)).await?;
    let chart = resolve::resolve(&ctx.chart_step(), &app).await;
    let observed = observe::observe(&ctx.caches, &app);
    let recorded = ctx.caches.history_of(&app);
    let (mut planned, owned) = plan_observed(ctx, &app, observed, chart.as_ref(), &recorded);
    // Before the writes: a release written now may turn Ready before they
    // end, and that event must find the rollout waiting on it.
    let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&namespace);
    ctx.index.planned(&app_ref, planned.waits_on_releases);
    let history = std::mem::take(&mut planned.history);
    let releases: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &helmrelease_resource());
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &namespace);
    let target = apply::Target {
        app: &app,
        releases: &releases,
        leases: &leases,
        applications: &apps,
        cached: &ctx.caches.releases,
        charts: &ctx.charts,
        orphan: app.spec.deletion_policy == Some(DeletionPolicy::Orphan),
    };
    let mut applied = apply::carry_out(&target, planned.take_writes(), &owned).await;
    ctx.index.names_taken(&app_ref, applied.names_taken());
    report(ctx, &apps, &app, &mut planned, &applied).await?;
    if applied.first_error.is_none() && !history.is_empty() {
        let records = Api::namespaced(ctx.client.clone(), &namespace);
        applied.first_error = apply::write_history(&records, &app, &history).await.err();
    }
    if applied.first_error.is_none() {
        // Under `onFailure: Rollback`, the charts of the revisions the
        // pools may go back to are kept until the revision under way
        // completes (the plan names them only then).
        let kept = &planned.rollback_charts;
        applied.first_error =
            prune_unused_charts(ctx, &app, chart.as_ref(), &owned, &applied, kept).await.err();
    }
    if let Some(e) = applied.first_error {
        return Err(e.into());
    }
    Ok(next_reconcile(ctx, &app, &chart, &planned))
}

/// How often an application being deleted looks at its site releases'
/// uninstalls when nothing else wakes it.
const UNINSTALL_RECHECK: Duration = Duration::from_secs(30);

/// Before an application being deleted goes, its releases into site
/// clusters go, rather than by the garbage collector once it is gone: a
/// release whose site does not answer would stay Terminating with no one
/// to see it. Deleted here, they are watched until gone, and one whose
/// uninstall has waited on its site for `rollout.offlineAfter` is let go
/// without it, with an Event ([`plan::uninstalls`], the rule that a
/// pruned release follows too). How long to wait, while any remains.
/// Releases the application orphans are not touched.
async fn delete_site_releases(ctx: &Context, app: &NodePoolApplication) -> Result<Option<Duration>, Error> {
    if app.finalizers().iter().any(|f| f == apply::ORPHAN_FINALIZER) {
        return Ok(None);
    }
    let namespace = app.namespace().unwrap_or_default();
    let uid = app.uid();
    let site_releases: Vec<Arc<ObservedRelease>> = (ctx.caches.releases.state().iter())
        .filter(|r| r.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .filter(|r| observe::owned_by(r.as_ref(), uid.as_deref()))
        .filter_map(|r| r.observed.clone())
        .filter(|o| o.cluster.is_some())
        .collect();
    if site_releases.is_empty() {
        return Ok(None);
    }
    let releases: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &helmrelease_resource());
    for release in site_releases.iter().filter(|r| !r.deleting) {
        let uid = release.uid.as_deref().unwrap_or_default();
        apply::delete_observed(&releases, "HelmRelease", &release.name, uid).await?;
    }
    let after = crate::reconcile::rollout::Settings::new(app.spec.rollout.as_ref(), 0)
        .map_or(crate::reconcile::rollout::DEFAULT_OFFLINE_AFTER, |s| s.offline_after);
    let now = k8s_openapi::jiff::Timestamp::now();
    let (skipped, due) = plan::uninstalls(site_releases.iter().map(Arc::as_ref), after, now);
    let mut happened = Vec::new();
    for skip in skipped {
        let uid = site_releases.iter().find(|r| r.name == skip.release).and_then(|r| r.uid.as_deref());
        apply::skip_uninstall(&releases, &skip, uid).await?;
        happened.push(Transition::uninstall_skipped(&skip.pool, &skip.release, &skip.since, skip.after));
    }
    publish(ctx, app, None, &happened).await;
    Ok(Some(due.map_or(UNINSTALL_RECHECK, |d| d.min(UNINSTALL_RECHECK))))
}

/// Our finalizers the application should carry: one to delete its shared
/// charts (and, for sites that are clusters, to see their releases go:
/// see [`delete_site_releases`]), one to orphan its releases under
/// `deletionPolicy: Orphan`.
fn finalizers(ctx: &Context, app: &NodePoolApplication) -> Vec<&'static str> {
    let orphan = app.spec.deletion_policy == Some(DeletionPolicy::Orphan);
    let sites = app.spec.pools.kind == PoolKind::ClusterProfile;
    [
        (ctx.shared_chart || sites).then_some(apply::FINALIZER),
        orphan.then_some(apply::ORPHAN_FINALIZER),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The plan over what observe saw, and the owned releases back from the
/// plan's input: at thousands of pools a copy of every release held would
/// be most of the reconcile's memory. The pools are not read again: they
/// go before the writes.
fn plan_observed(
    ctx: &Context,
    app: &NodePoolApplication,
    observed: observe::Observed,
    chart: Option<&Result<SharedChart, Hold>>,
    history: &history::History,
) -> (Plan, Vec<Arc<ObservedRelease>>) {
    let (chart_ref, chart, hold) = match chart {
        Some(Ok(shared)) => (Some(&shared.chart_ref), Some(shared.chart.as_ref()), None),
        Some(Err(hold)) => (None, None, Some(hold.clone())),
        None => (None, None, None),
    };
    let uid = app.metadata.uid.clone().unwrap_or_default();
    let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&app.namespace().unwrap_or_default());
    let memo = ctx.index.memo(&app_ref, &uid);
    let input = PlanInput {
        memo: memo.as_deref(),
        first_install_alone: true,
        app,
        pools: &observed.pools.iter().map(|p| &p.pool).collect::<Vec<_>>(),
        nodes: Some(&observed.nodes),
        owned: observed.owned,
        others: &observed.others,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
        chart_ref,
        chart,
        hold,
        unserved: observed.unserved.as_deref(),
        clock_since: ctx.leading_since.get().map(|t| Time(*t)),
        history: Some(history),
    };
    let mut planned = plan::plan(&input);
    ctx.index.keep_memo(&app_ref, &uid, std::mem::take(&mut planned.memo));
    let PlanInput { owned, .. } = input;
    (planned, owned)
}

/// Says how the fleet stands once the plan is carried out: the status
/// (written only when it changed but for timestamps), the metrics and the
/// Events. Refused writes reach the conditions and the counts, not only
/// the pool's line.
async fn report(
    ctx: &Context,
    apps: &Api<NodePoolApplication>,
    app: &NodePoolApplication,
    planned: &mut Plan,
    applied: &apply::Applied,
) -> Result<(), Error> {
    let (namespace, name) = (app.namespace().unwrap_or_default(), app.name_any());
    let old_status = app.status.clone().unwrap_or_default();
    planned.report.writes_refused(&applied.refused);
    let published = planned.report.publish(&old_status, &applied.done);
    let new_status = &published.status;
    let FleetCounts {
        selected,
        ready,
        offline,
    } = published.counts;
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let app_ref = ObjectRef::<AppMeta>::new(&name).within(&namespace);
    ctx.index.set_pools(
        &app_ref,
        PoolCounts {
            selected: count(selected),
            ready: count(ready),
            offline: count(offline),
        },
    );
    let ready = new_status
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::READY)
        .map(|c| c.status.as_str());
    ctx.index
        .set_info(&app_ref, ready.unwrap_or("Unknown"), app.spec.suspend == Some(true));
    if !transitions::same_ignoring_timestamps(&old_status, new_status) {
        apply::apply_status(apps, &name, new_status).await?;
    }
    let revision = new_status.rollout.as_ref().map(|r| r.revision.as_str());
    publish(ctx, app, revision, &published.events).await;
    Ok(())
}

/// Deletes the application's shared charts no release uses any more. Still
/// in use: the current one (and the chart that resolves its version), and
/// those of releases this reconcile left as they were (pools whose config
/// fails, pools the rollout has not reached), and `rollback`: the last
/// complete revision's, while a rollback may go back to it.
async fn prune_unused_charts(
    ctx: &Context,
    app: &NodePoolApplication,
    chart: Option<&Result<SharedChart, Hold>>,
    owned: &[Arc<ObservedRelease>],
    applied: &apply::Applied,
    rollback: &[ChartRef],
) -> Result<(), apply::ApplyError> {
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
    apply::prune_charts(&ctx.client, &ctx.charts, app, &kept).await
}

/// When to look again. Waiting for source-controller: soon rather than at
/// resync, then less and less often while it keeps waiting (the chart's
/// own events wake the application at once). Otherwise at the resync, or
/// sooner when a soak ends or a progress deadline passes, which change the
/// plan by the clock alone.
fn next_reconcile(
    ctx: &Context,
    app: &NodePoolApplication,
    chart: &Option<Result<SharedChart, Hold>>,
    planned: &Plan,
) -> Action {
    let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&app.namespace().unwrap_or_default());
    if let Some(Err(hold)) = chart {
        if hold.transient {
            let wait = ctx.chart_backoff.wait(ctx.index.chart_waited(&app_ref));
            tracing::debug!(app = %app.name_any(), reason = %hold.reason, retry_in = ?wait, "waiting for the chart");
            return Action::requeue(wait);
        }
    }
    ctx.index.chart_ready(&app_ref);
    Action::requeue(planned.requeue_after.map_or(ctx.resync, |after| after.min(ctx.resync)))
}

/// An application being deleted. The garbage collector removes the
/// releases through their owner references, unless the orphan finalizer
/// (`deletionPolicy: Orphan` when the spec was last read) says they stay:
/// then they are orphaned first. The shared HelmCharts, beyond the
/// collector's reach, go here, wherever they are, before the finalizers
/// are released.
pub(super) async fn finalize(
    ctx: &Context,
    apps: &Api<NodePoolApplication>,
    app: &impl Resource,
) -> Result<Action, Error> {
    let has = |name: &str| app.finalizers().iter().any(|f| f == name);
    if has(apply::ORPHAN_FINALIZER) {
        apply::orphan_all(&ctx.client, &ctx.charts, app).await?;
    }
    if has(apply::FINALIZER) {
        apply::prune_charts(&ctx.client, &ctx.charts, app, &[]).await?;
    }
    if has(apply::FINALIZER) || has(apply::ORPHAN_FINALIZER) {
        apply::set_finalizers(apps, app, &[]).await?;
    }
    // Nothing of it is kept: the watch's delete event, which follows, may
    // never come to this instance (another shard's by then, say).
    let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&app.namespace().unwrap_or_default());
    ctx.index.forget(&app_ref);
    Ok(Action::await_change())
}

/// An application whose spec the client cannot decode: values nested
/// deeper than serde_json's 128 levels, which the API server accepts. It is
/// reported on the application (conditions and an Event); its releases are
/// left as they are, and deleting it still releases its shared HelmCharts.
pub(super) async fn unreadable(
    meta: &AppMeta,
    error: &serde_json::Error,
    ctx: &Context,
) -> Result<Action, Error> {
    let name = meta.name_any();
    let namespace = meta.namespace().unwrap_or_default();
    let apps: Api<NodePoolApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    if meta.metadata.deletion_timestamp.is_some() {
        return finalize(ctx, &apps, meta).await;
    }
    let message = format!(
        "the spec cannot be read ({error}); values may nest at most {} levels: flatten them",
        crate::values::merge::MAX_DEPTH
    );
    warn!(app = %name, %namespace, %message, "unreadable application");
    apply::report_unreadable(&apps, meta, conditions::reason::SPEC_UNREADABLE, &message).await?;
    let event = Event {
        type_: EventType::Warning,
        reason: conditions::reason::SPEC_UNREADABLE.into(),
        note: Some(transitions::fit_note(message)),
        action: "Read".into(),
        secondary: None,
    };
    let reference = meta.object_ref(&());
    let involved = with_resource_version(&reference, meta.resource_version());
    if let Err(e) = ctx.recorder.publish(&event, &reference).await {
        warn!(error = %e, "cannot publish event");
    }
    if let Some(notifier) = &ctx.notifier {
        let happened = Transition {
            warning: true,
            reason: event.reason,
            action: "Read",
            message: event.note.unwrap_or_default(),
            release: None,
            pool: None,
        };
        notifier.notify(&involved, &happened, None);
    }
    // A fix is a new generation, which the watch delivers.
    Ok(Action::await_change())
}

/// Records each Event on the application, and sends it to Flux's
/// notification-controller when there is one, as Flux's own recorder does.
pub(super) async fn publish(
    ctx: &Context,
    app: &NodePoolApplication,
    revision: Option<&str>,
    happened: &[Transition],
) {
    let reference = app.object_ref(&());
    let involved = with_resource_version(&reference, app.resource_version());
    for t in happened {
        let event = Event {
            type_: if t.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: t.reason.clone(),
            note: Some(t.message.clone()),
            action: t.action.to_string(),
            secondary: t.release.as_ref().map(|name| ObjectReference {
                api_version: Some("helm.toolkit.fluxcd.io/v2".into()),
                kind: Some("HelmRelease".into()),
                name: Some(name.clone()),
                namespace: app.namespace(),
                ..ObjectReference::default()
            }),
        };
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            warn!(error = %e, reason = %t.reason, "cannot publish event");
        }
        if let Some(notifier) = &ctx.notifier {
            notifier.notify(&involved, t, revision);
        }
    }
}

/// The object a notification is about, with the version it was read at,
/// as Flux's controllers name theirs. The Events keep kube's reference
/// without it, which keeps each repeated Event one series.
fn with_resource_version(reference: &ObjectReference, version: Option<String>) -> ObjectReference {
    ObjectReference {
        resource_version: version,
        ..reference.clone()
    }
}

/// A write the plan counted on failed: the pool's status says so.
/// Exponential backoff with jitter, from 1 s up to 5 min, per application.
pub(super) fn error_policy(app: Arc<AppMeta>, error: &Error, ctx: Arc<Context>) -> Action {
    let base = ctx.backoff.wait(ctx.index.failed(&ObjectRef::from_obj(app.as_ref())));
    let jitter = Duration::from_millis(fastrand::u64(0..1000));
    warn!(app = %app.name_any(), category = error.category(), error = %error, retry_in = ?base + jitter, "reconcile failed");
    Action::requeue(base + jitter)
}
