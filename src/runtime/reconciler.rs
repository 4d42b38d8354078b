//! One reconcile of one application, as the controller runs it: wait for
//! the caches, read the application, let [`reconcile::reconcile`] carry
//! its steps out, and publish the report (metrics and Events); finalize a
//! deleted application; report one the client cannot read.

use std::sync::Arc;
use std::time::Duration;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use tracing::{info, warn};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions;
use crate::api::NodePoolApplication;
use crate::reconcile::apply;
use crate::reconcile::fleet::{FleetCounts, FleetReport, Published, Transition};
use crate::reconcile::observe::{self, helmrelease_resource, ObserveError};
use crate::reconcile::plan::{self, ObservedRelease};
use crate::reconcile::{self, ReconcileError};
use crate::runtime::metrics::PoolCounts;

use super::context::*;
use super::index::Interest;
use super::woken::Timer;

pub(super) async fn reconcile(meta: Arc<AppMeta>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    use tracing::Instrument;
    let span = crate::runtime::logs::reconcile_span(&meta.namespace().unwrap_or_default(), &meta.name_any());
    reconcile_logged(meta, ctx).instrument(span).await
}

async fn reconcile_logged(meta: Arc<AppMeta>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let mut ready = ctx.ready.clone();
    match ready.wait_for(|r| *r != Readiness::Listing).await.map(|r| *r) {
        Ok(Readiness::Ready) => {}
        Ok(Readiness::Stopped(watch)) => return Err(ObserveError::CacheStopped(watch).into()),
        Ok(Readiness::Listing) | Err(_) => return Err(ObserveError::CacheStopped("the caches").into()),
    }
    let start = std::time::Instant::now();
    let woken = ctx.index.take_woken(&ObjectRef::from_obj(meta.as_ref()));
    tracing::debug!(woken_by = %woken, "reconciling");
    ctx.metrics.observe_wakes(&woken.causes());
    let name = meta.name_any();
    let namespace = meta.namespace().unwrap_or_default();
    let apps: Api<NodePoolApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = match super::shards::read_if_served(&apps, &name, ctx.shard.as_deref()).await {
        Ok(Some(app)) => {
            ctx.index.read(ObjectRef::from_obj(meta.as_ref()), Interest::of(&app, &namespace));
            reconcile_app(Arc::new(app), &ctx).await
        }
        Ok(None) => {
            ctx.index.forget(&ObjectRef::from_obj(meta.as_ref()));
            Ok(Action::await_change())
        }
        Err(kube::Error::SerdeError(e)) => unreadable(&meta, &e, &ctx).await,
        Err(source) => Err(ReconcileError::Read {
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

/// One reconcile of an application that is there: deleted, it is
/// finalized; otherwise [`reconcile::reconcile`] lists the steps, and what
/// it reports is published here.
pub(super) async fn reconcile_app(
    app: Arc<NodePoolApplication>,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
    let namespace = app.namespace().unwrap_or_default();
    let apps: Api<NodePoolApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    if app.meta().deletion_timestamp.is_some() {
        if let Some(wait) = delete_site_releases(ctx, &app).await? {
            let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&namespace);
            ctx.index.timer(&app_ref, Timer::Uninstall);
            return Ok(Action::requeue(wait));
        }
        return finalize(ctx, &apps, app.as_ref()).await;
    }
    let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&namespace);
    let memory = Remembered {
        index: &ctx.index,
        app: &app_ref,
        uid: app.metadata.uid.clone().unwrap_or_default(),
    };
    let controller = reconcile::Controller {
        client: &ctx.client,
        caches: &ctx.caches,
        charts: ctx.chart_step(),
        shared_charts: &ctx.charts,
        clock_since: ctx.leading_since.get().map(|t| Time(*t)),
        memory: &memory,
        asking: &ctx.asking,
        rendering_changes: ctx.rendering_changes,
    };
    let mut reconciled = match reconcile::reconcile(&controller, &app).await? {
        reconcile::Ended::Reconciled(reconciled) => *reconciled,
        // Moved here from another shard: its releases are cut down in the
        // cache until the release watch lists them again, now that this
        // instance serves it.
        reconcile::Ended::ReleasesCutDown(releases) => {
            let asked = ctx.relist.request();
            info!(app = %app.name_any(), %namespace, releases, asked,
                "served here now, moved from another shard: reading its releases again before planning");
            ctx.index.timer(&app_ref, Timer::Relist);
            return Ok(Action::requeue(RELISTED_AGAIN_AFTER));
        }
        reconcile::Ended::AtRest(at_rest) => {
            tracing::debug!(
                requeue_after = ?at_rest.requeue_after,
                "at rest: the input is what the last plan, which wrote nothing, was made from; not planned again"
            );
            ctx.metrics.at_rest.inc();
            return Ok(after_plan(ctx, &app_ref, Some(at_rest.requeue_after)));
        }
        reconcile::Ended::CreatesUnseen(releases) => {
            tracing::debug!(
                releases,
                "waiting for the release cache to show the releases the last reconcile created"
            );
            ctx.index.timer(&app_ref, Timer::CreatesUnseen);
            return Ok(Action::requeue(CREATES_LOOKED_FOR_AFTER));
        }
    };
    ctx.index.names_taken(&app_ref, std::mem::take(&mut reconciled.names_taken));
    publish_report(ctx, &app, &reconciled.published).await;
    if let Some(e) = reconciled.failed {
        return Err(e);
    }
    Ok(next_reconcile(ctx, &app, &reconciled))
}

/// The runtime's index, as a reconcile's memory of its application.
struct Remembered<'a> {
    index: &'a super::index::AppIndex,
    app: &'a ObjectRef<AppMeta>,
    uid: String,
}

impl reconcile::Memory for Remembered<'_> {
    fn memo(&self) -> Option<Arc<crate::reconcile::plan::Memo>> {
        self.index.memo(self.app, &self.uid)
    }
    fn keep_memo(&self, memo: crate::reconcile::plan::Memo) {
        self.index.keep_memo(self.app, &self.uid, memo);
    }
    fn rest(&self) -> Option<crate::reconcile::plan::Rest> {
        self.index.rest(self.app, &self.uid)
    }
    fn keep_rest(&self, rest: Option<crate::reconcile::plan::Rest>) {
        self.index.keep_rest(self.app, rest);
    }
    fn planned(&self, waits_on_releases: Option<usize>) {
        self.index.planned(self.app, waits_on_releases);
    }
    fn answers(&self) -> Option<Arc<crate::reconcile::rollout::analysis::Records>> {
        self.index.answers(self.app, &self.uid)
    }
    fn let_answers_go(&self) {
        self.index.take_answers(self.app, &self.uid);
    }
    fn created(&self, releases: Vec<String>) {
        self.index.created(self.app, releases);
    }
    fn creates_unseen(&self, seen: &dyn Fn(&str) -> bool) -> Option<usize> {
        self.index.creates_unseen(self.app, seen)
    }
}

/// Publishes what the report says: the metrics' counts, the application's
/// info series, and the Events.
async fn publish_report(ctx: &Context, app: &NodePoolApplication, published: &Published) {
    let FleetCounts {
        selected,
        ready,
        offline,
    } = published.counts;
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&app.namespace().unwrap_or_default());
    ctx.index.set_pools(
        &app_ref,
        PoolCounts {
            selected: count(selected),
            ready: count(ready),
            offline: count(offline),
        },
    );
    let status = &published.status;
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::READY)
        .map(|c| c.status.as_str());
    ctx.index
        .set_info(&app_ref, ready.unwrap_or("Unknown"), app.spec.suspend == Some(true));
    let revision = status.rollout.as_ref().map(|r| r.revision.as_str());
    publish(ctx, app, revision, &published.events).await;
}

/// How often an application being deleted looks at its site releases'
/// uninstalls when nothing else wakes it.
const UNINSTALL_RECHECK: Duration = Duration::from_secs(30);

/// How soon an application moved here from another shard is looked at
/// again while the release watch lists its releases anew (its releases'
/// own events wake it sooner, once they are in whole).
const RELISTED_AGAIN_AFTER: Duration = Duration::from_secs(5);

/// How soon an application whose last creates the cache does not show
/// yet is looked at again (see [`reconcile::Ended::CreatesUnseen`]).
const CREATES_LOOKED_FOR_AFTER: Duration = Duration::from_millis(500);

/// Before an application being deleted goes, its releases into site
/// clusters go, rather than by the garbage collector once it is gone: a
/// release whose site does not answer would stay Terminating with no one
/// to see it. Deleted here, they are watched until gone, and one whose
/// uninstall has waited on its site for `rollout.offlineAfter` is let go
/// without it, with an Event ([`plan::uninstalls`], the rule that a
/// pruned release follows too). How long to wait, while any remains.
/// Releases the application orphans are not touched.
async fn delete_site_releases(
    ctx: &Context,
    app: &NodePoolApplication,
) -> Result<Option<Duration>, ReconcileError> {
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
        (apply::delete_observed(&releases, "HelmRelease", &release.name, uid).await)
            .map_err(ReconcileError::Finalize)?;
    }
    let after = crate::reconcile::rollout::Settings::new(app.spec.rollout.as_ref(), 0)
        .map_or(crate::reconcile::rollout::DEFAULT_OFFLINE_AFTER, |s| s.offline_after);
    let now = k8s_openapi::jiff::Timestamp::now();
    let (skipped, due) = plan::uninstalls(site_releases.iter().map(Arc::as_ref), after, now);
    let mut happened = Vec::new();
    for skip in skipped {
        let uid = site_releases.iter().find(|r| r.name == skip.release).and_then(|r| r.uid.as_deref());
        (apply::skip_uninstall(&releases, &skip, uid).await).map_err(ReconcileError::Finalize)?;
        happened.push(Transition::uninstall_skipped(&skip.pool, &skip.release, &skip.since, skip.after));
    }
    publish(ctx, app, None, &happened).await;
    Ok(Some(due.map_or(UNINSTALL_RECHECK, |d| d.min(UNINSTALL_RECHECK))))
}

/// When to look again. Waiting for source-controller: soon rather than at
/// resync, then less and less often while it keeps waiting (the chart's
/// own events wake the application at once). Otherwise at the resync, or
/// sooner when a soak ends or a progress deadline passes, which change the
/// plan by the clock alone.
fn next_reconcile(ctx: &Context, app: &NodePoolApplication, reconciled: &reconcile::Reconciled) -> Action {
    let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&app.namespace().unwrap_or_default());
    if let Some(hold) = &reconciled.chart_waits {
        let wait = ctx.chart_backoff.wait(ctx.index.chart_waited(&app_ref));
        tracing::debug!(app = %app.name_any(), reason = %hold.reason, retry_in = ?wait, "waiting for the chart");
        ctx.index.timer(&app_ref, Timer::ChartWait);
        return Action::requeue(wait);
    }
    after_plan(ctx, &app_ref, reconciled.requeue_after)
}

/// The next reconcile of an application whose chart holds nothing back:
/// when the clock changes its plan (`requeue_after`), if that comes
/// before the resync.
fn after_plan(ctx: &Context, app_ref: &ObjectRef<AppMeta>, requeue_after: Option<Duration>) -> Action {
    ctx.index.chart_ready(app_ref);
    let (after, timer) = match requeue_after.filter(|after| *after < ctx.resync) {
        Some(after) => (after, Timer::Plan),
        None => (ctx.resync, Timer::Resync),
    };
    ctx.index.timer(app_ref, timer);
    Action::requeue(after)
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
) -> Result<Action, ReconcileError> {
    let has = |name: &str| app.finalizers().iter().any(|f| f == name);
    if has(apply::ORPHAN_FINALIZER) {
        (apply::orphan_all(&ctx.client, &ctx.charts, app).await).map_err(ReconcileError::Finalize)?;
    }
    if has(apply::FINALIZER) {
        (apply::prune_charts(&ctx.client, &ctx.charts, app, &[]).await).map_err(ReconcileError::Finalize)?;
    }
    if has(apply::FINALIZER) || has(apply::ORPHAN_FINALIZER) {
        (apply::set_finalizers(apps, app, &[]).await).map_err(ReconcileError::Finalize)?;
    }
    // Nothing of it is kept: the watch's delete event, which follows, may
    // never come to this instance (another shard's by then, say).
    let app_ref = ObjectRef::<AppMeta>::new(&app.name_any()).within(&app.namespace().unwrap_or_default());
    ctx.index.forget(&app_ref);
    Ok(Action::await_change())
}

/// An application whose spec the client cannot decode: values nested
/// deeper than serde_json's 128 levels, which the API server accepts. It is
/// reported as a fleet report whose blocker says so (conditions by merge
/// patch, so the last known pools stay, and an Event); its releases are
/// left as they are, and deleting it still releases its shared HelmCharts.
pub(super) async fn unreadable(
    meta: &AppMeta,
    error: &serde_json::Error,
    ctx: &Context,
) -> Result<Action, ReconcileError> {
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
    let report = FleetReport {
        blocker: Some((conditions::reason::SPEC_UNREADABLE.to_string(), message.clone())),
        generation: meta.metadata.generation,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
        ..FleetReport::default()
    };
    (apply::report_unreadable(&apps, meta, &report.status()).await).map_err(ReconcileError::Status)?;
    publish(ctx, meta, None, &[Transition::unreadable(&message)]).await;
    // A fix is a new generation, which the watch delivers.
    Ok(Action::await_change())
}

/// Records each Event on the application, and sends it to Flux's
/// notification-controller when there is one, as Flux's own recorder does.
pub(super) async fn publish(
    ctx: &Context,
    app: &(impl Resource<DynamicType = ()> + Sync),
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
pub(super) fn error_policy(app: Arc<AppMeta>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let app_ref = ObjectRef::from_obj(app.as_ref());
    let base = ctx.backoff.wait(ctx.index.failed(&app_ref));
    ctx.index.timer(&app_ref, Timer::Retry);
    let jitter = Duration::from_millis(fastrand::u64(0..1000));
    warn!(app = %app.name_any(), category = error.category(), error = %error, retry_in = ?base + jitter, "reconcile failed");
    Action::requeue(base + jitter)
}
