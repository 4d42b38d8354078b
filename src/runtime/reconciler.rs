//! One reconcile of one application, as the controller runs it: wait for
//! the caches, observe, plan, apply, write the status and the Events;
//! finalize a deleted application; report one the client cannot read.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use tracing::warn;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::naming;
use crate::api::{ChartReference, DeletionPolicy, NodePoolApplication};
use crate::chart::schema::Chart;
use crate::chart::shared::{self as shared_chart, ChartRef};
use crate::chart::source::{artifact_of, oci_revision, Resolved, SourceError};
use crate::chart::version;
use crate::pools::nodes::{self, Membership};
use crate::reconcile::apply::{self};
use crate::reconcile::claim::{self, Claim, ClaimApis};
use crate::reconcile::observe::{self, helmrelease_resource, ObserveError};
use crate::reconcile::plan::{self, DesiredRelease, Hold, PlanInput, WriteRefused};
use crate::runtime::events::{self as transitions, Transition};

use super::context::*;
use crate::runtime::telemetry::PoolCounts;

/// Writes one release, claiming first the Helm release it starts to drive
/// (see [`claim`]). A claim another application holds refuses the write,
/// and makes the existing release, if any, inert.
async fn write_claimed(
    claims: &ClaimApis<'_>,
    app: &NodePoolApplication,
    desired: &DesiredRelease,
    uid: Option<&str>,
    exists: bool,
    owned_by_update: bool,
) -> Result<(), apply::ApplyError> {
    if let Some(key) = &desired.claim {
        if let Claim::HeldBy(holder) = claim::claim(claims, key, app, &desired.name).await? {
            let refused = apply::ApplyError::HelmReleaseClaimed {
                helm_release: format!("{}/{}", key.0, key.1),
                holder,
            };
            if exists && !desired.lift_inert {
                apply::set_inert(claims.releases, &desired.name, uid, Some(&refused.to_string())).await?;
            }
            return Err(refused);
        }
    }
    let object = desired.object.value();
    apply::write_release(claims.releases, &desired.name, object, exists, owned_by_update).await?;
    if desired.lift_inert {
        apply::set_inert(claims.releases, &desired.name, uid, None).await?;
    }
    if let Some(drove) = &desired.drove {
        claim::release(claims.leases, &app.uid().unwrap_or_default(), &desired.name, Some(drove)).await?;
    }
    Ok(())
}

/// Whether the application is still there to be measured (a reconcile of
/// one that is gone leaves no series behind).
fn known_before(ctx: &Context, meta: &AppMeta) -> bool {
    ctx.selections
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(&ObjectRef::from_obj(meta))
}

pub(super) async fn reconcile(meta: Arc<AppMeta>, ctx: Arc<Context>) -> Result<Action, Error> {
    use tracing::Instrument;
    let span =
        crate::runtime::telemetry::reconcile_span(&meta.namespace().unwrap_or_default(), &meta.name_any());
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
            let interest = Interest {
                kind: app.spec.pools.kind,
                selection: app.spec.pools.selection(),
                membership: Membership::of(&app.spec.pools, app.spec.placement.node_label.as_deref()),
                chart_source: app.spec.chart_ref.as_ref().map(|r| {
                    let source_namespace = r.namespace.clone().unwrap_or_else(|| namespace.clone());
                    (source_namespace, r.name.clone())
                }),
            };
            ctx.selections
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(ObjectRef::from_obj(meta.as_ref()), interest);
            reconcile_app(Arc::new(app), &ctx).await
        }
        Ok(None) => {
            ctx.metrics.forget(&namespace, &name);
            ctx.holds.reset(&ObjectRef::from_obj(meta.as_ref()));
            ctx.selections
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&ObjectRef::from_obj(meta.as_ref()));
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
    ctx.backoff.settle(&app_ref, &result);
    let outcome = match &result {
        Ok(_) => "success",
        Err(e) => e.category(),
    };
    ctx.metrics.observe_reconcile(outcome, start.elapsed());
    if known_before(&ctx, &meta) {
        let (namespace, name) = (meta.namespace().unwrap_or_default(), meta.name_any());
        ctx.metrics.observe_object(&namespace, &name, start.elapsed());
    }
    let known = ctx.selections.read().unwrap_or_else(|e| e.into_inner()).contains_key(&app_ref);
    let mut times = ctx.reconcile_times.lock().unwrap_or_else(|e| e.into_inner());
    match known {
        true => times.insert(app_ref, start.elapsed()),
        // Gone: forgotten.
        false => times.remove(&app_ref),
    };
    drop(times);
    result
}

pub(super) async fn reconcile_app(app: Arc<NodePoolApplication>, ctx: &Context) -> Result<Action, Error> {
    let name = app.name_any();
    let namespace = app.namespace().unwrap_or_default();
    let apps: Api<NodePoolApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    if app.meta().deletion_timestamp.is_some() {
        return finalize(ctx, &apps, app.as_ref()).await;
    }
    let orphan = app.spec.deletion_policy == Some(DeletionPolicy::Orphan);
    let finalizers: Vec<&str> = [
        ctx.shared_chart.then_some(apply::FINALIZER),
        orphan.then_some(apply::ORPHAN_FINALIZER),
    ]
    .into_iter()
    .flatten()
    .collect();
    apply::set_finalizers(&apps, app.as_ref(), &finalizers).await?;
    let observed = observe::observe(&ctx.caches, &app);
    let refused = ctx
        .no_cross_namespace_refs
        .then(|| shared_chart::cross_namespace_reference(&app.spec, &namespace))
        .flatten();
    let shared = match (refused, ctx.shared_chart) {
        (Some(message), _) => Some(Err(Hold {
            reason: "CrossNamespaceRefForbidden".into(),
            message,
            transient: false,
        })),
        (None, true) => Some(shared_chart(ctx, &app).await),
        (None, false) => None,
    };
    let (chart_ref, chart, hold) = match &shared {
        Some(Ok(shared)) => (Some(&shared.chart_ref), Some(shared.chart.as_ref()), None),
        Some(Err(hold)) => (None, None, Some(hold.clone())),
        None => (None, None, None),
    };
    let resolver = shared.as_ref().and_then(|s| s.as_ref().ok()).and_then(|s| s.resolver.as_ref());
    let membership = Membership::of(&app.spec.pools, app.spec.placement.node_label.as_deref());
    let node_counts = nodes::count(ctx.nodes.state().iter().map(|n| n.as_ref()), &membership);
    let input = PlanInput {
        app: &app,
        pools: &observed.pools.iter().map(|p| &p.pool).collect::<Vec<_>>(),
        nodes: Some(&node_counts),
        owned: observed.owned,
        others: &observed.others,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
        chart_ref,
        chart,
        hold: hold.clone(),
        unserved: observed.unserved.as_deref(),
        clock_since: ctx.leading_since.get().map(|t| Time(*t)),
    };
    let mut planned = plan::plan(&input);
    // What was observed, back from the plan's input: at thousands of pools
    // a copy of every release held would be most of the reconcile's memory.
    // The pools are not read again: they go before the writes.
    let PlanInput { owned, .. } = input;
    drop(observed.pools);

    let releases: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &helmrelease_resource());
    let mut happened = Vec::new();
    let mut first_error = None;
    // Resumed: the suspension taken back before anything else is written;
    // suspended: the releases suspended, the only write made.
    let uid_of = |name: &str| owned.iter().find(|o| o.name == name).and_then(|o| o.uid.clone());
    let switches: Vec<(String, bool)> = std::mem::take(&mut planned.resume)
        .into_iter()
        .map(|name| (name, false))
        .chain(std::mem::take(&mut planned.suspend).into_iter().map(|name| (name, true)))
        .collect();
    let switched: Vec<_> = futures::stream::iter(switches)
        .map(|(release, suspend)| {
            let uid = uid_of(&release);
            let releases = &releases;
            async move {
                let result = apply::set_suspended(releases, &release, uid.as_deref(), suspend).await;
                (release, suspend, result)
            }
        })
        .buffer_unordered(APPLY_CONCURRENCY)
        .collect()
        .await;
    for (release, suspend, result) in switched {
        match result {
            Ok(()) => happened.push(Transition::suspended(&release, suspend)),
            Err(e) => {
                warn!(app = %name, release = %release, error = %e, "cannot suspend or resume the release");
                first_error.get_or_insert(e);
            }
        }
    }
    // Releases another application's release took the Helm release from.
    for (release, message) in std::mem::take(&mut planned.inert) {
        let uid = uid_of(&release);
        if let Err(e) = apply::set_inert(&releases, &release, uid.as_deref(), Some(&message)).await {
            warn!(app = %name, release = %release, error = %e, "cannot make the release inert");
            first_error.get_or_insert(e);
        }
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &namespace);
    let claims = ClaimApis {
        leases: &leases,
        applications: &apps,
        releases: &releases,
    };
    // Releases are independent objects: writing them in parallel keeps a
    // fan-out to hundreds of pools close to the API server's own pace.
    let owned_names: HashSet<&str> = owned.iter().map(|o| o.name.as_str()).collect();
    // Each write's future is made only when a slot frees (an unstarted
    // future already takes its whole size), and each desired release is
    // dropped once written: at ten thousand pools, holding either for the
    // whole fan-out was tens of megabytes.
    let releases = &releases;
    let results: Vec<_> = futures::stream::iter(std::mem::take(&mut planned.apply))
        .map(|desired| {
            let exists = owned_names.contains(desired.name.as_str());
            let owned_by_update = exists
                && ctx
                    .caches
                    .releases
                    .get(&ObjectRef::new(&desired.name).within(&namespace))
                    .is_some_and(|cached| cached.owned_by_update);
            let uid = uid_of(&desired.name);
            let (claims, app) = (&claims, app.as_ref());
            async move {
                let result =
                    write_claimed(claims, app, &desired, uid.as_deref(), exists, owned_by_update).await;
                let DesiredRelease {
                    name, pool, drift, ..
                } = desired;
                (name, pool, drift, exists, result)
            }
        })
        .buffer_unordered(APPLY_CONCURRENCY)
        .collect()
        .await;
    // Names written, for the charts still in use below.
    let mut written: HashSet<String> = HashSet::with_capacity(results.len());
    let mut refused = Vec::new();
    for (release, pool, drift, exists, result) in results {
        match result {
            Ok(()) => happened.push(match &drift {
                Some(field) => Transition::drift_corrected(&pool, &release, field),
                None => Transition::applied(&pool, &release, exists),
            }),
            Err(e) => {
                // One pool's failure does not stop the others.
                warn!(app = %name, pool = %pool, error = %e, "apply failed");
                refused.push(WriteRefused {
                    pool: pool.clone(),
                    reason: e.category().to_string(),
                    message: e.to_string(),
                    retriable: e.retriable(),
                });
                happened.push(Transition::apply_failed(&pool, &release, e.category(), &e.to_string()));
                first_error.get_or_insert(e);
            }
        }
        written.insert(release);
    }
    let pruned: HashSet<&str> = planned.prune.iter().map(String::as_str).collect();
    for release in owned.iter().filter(|o| pruned.contains(o.name.as_str())) {
        let pool = release.pool.as_deref().unwrap_or_default();
        let uid = release.uid.as_deref().unwrap_or_default();
        let done = match orphan {
            true => apply::orphan_release(releases, &ctx.charts, &release.name, app.as_ref()).await,
            false => apply::delete_observed(releases, "HelmRelease", &release.name, uid).await,
        };
        // Gone or no longer ours: what it drove is free for others.
        let app_uid = app.uid().unwrap_or_default();
        let done = match done {
            Ok(()) => claim::release(&leases, &app_uid, &release.name, None).await,
            failed => failed,
        };
        match done {
            Ok(()) if orphan => happened.push(Transition::orphaned(pool, &release.name)),
            Ok(()) => happened.push(Transition::pruned(pool, &release.name)),
            Err(e) => {
                warn!(app = %name, release = %release.name, error = %e, "prune failed");
                first_error.get_or_insert(e);
            }
        }
    }

    // Refused writes reach the conditions and the counts, not only the
    // pool's line.
    let new_status = planned.status_after_writes(&refused);
    let old_status = app.status.clone().unwrap_or_default();
    happened.extend(transitions::between(&old_status, &new_status));
    ctx.metrics.set_pools(
        &namespace,
        &name,
        PoolCounts {
            selected: i64::from(new_status.selected_pools),
            ready: i64::from(new_status.ready_pools),
            offline: i64::from(new_status.offline_pools),
        },
    );
    let ready = new_status.conditions.iter().find(|c| c.type_ == "Ready").map(|c| c.status.as_str());
    ctx.metrics
        .set_info(&namespace, &name, ready.unwrap_or("Unknown"), app.spec.suspend == Some(true));
    if !transitions::same_ignoring_timestamps(&old_status, &new_status) {
        apply::apply_status(&apps, &name, &new_status).await?;
    }
    publish(ctx, &app, &transitions::condense(happened)).await;

    if first_error.is_none() {
        if let Some(current) = chart_ref {
            // Charts still in use: the current one (and the chart that
            // resolves its version), and those of releases left as they
            // were (pools whose config fails).
            let kept: Vec<&ChartRef> = owned
                .iter()
                .filter(|o| !written.contains(o.name.as_str()) && !pruned.contains(o.name.as_str()))
                .filter_map(|o| o.chart_ref.as_ref())
                .chain([current])
                .chain(resolver)
                .collect();
            if let Err(e) = apply::prune_charts(&ctx.client, &ctx.charts, app.as_ref(), &kept).await {
                first_error = Some(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e.into());
    }
    let app_ref = ObjectRef::<AppMeta>::new(&name).within(&namespace);
    if let Some(hold) = hold.filter(|h| h.transient) {
        // Waiting for source-controller: look again soon rather than at
        // resync, then less and less often while it keeps waiting (the
        // chart's own events wake the application at once).
        let wait = ctx.holds.failed(app_ref);
        tracing::debug!(app = %name, reason = %hold.reason, retry_in = ?wait, "waiting for the chart");
        return Ok(Action::requeue(wait));
    }
    ctx.holds.reset(&app_ref);
    // A soak ending or a progress deadline passing changes the plan by the
    // clock alone.
    Ok(Action::requeue(planned.requeue_after.map_or(ctx.resync, |after| after.min(ctx.resync))))
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
    ctx.metrics.forget(&app.namespace().unwrap_or_default(), &app.name_any());
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
    apply::report_unreadable(&apps, meta, "SpecUnreadable", &message).await?;
    let event = Event {
        type_: EventType::Warning,
        reason: "SpecUnreadable".into(),
        note: Some(transitions::fit_note(message)),
        action: "Read".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &meta.object_ref(&())).await {
        warn!(error = %e, "cannot publish event");
    }
    // A fix is a new generation, which the watch delivers.
    Ok(Action::await_change())
}

/// The shared HelmChart of the version an application resolves to, its
/// chart, and, for an OCI HelmRepository, the HelmChart that resolves it.
pub(super) struct SharedChart {
    pub(super) chart_ref: ChartRef,
    pub(super) chart: Arc<Chart>,
    pub(super) resolver: Option<ChartRef>,
}

/// Resolves the chart version, makes sure the shared HelmChart of that
/// version exists, and reads its artifact; or says why writes must wait.
pub(super) async fn shared_chart(ctx: &Context, app: &NodePoolApplication) -> Result<SharedChart, Hold> {
    let name = app.name_any();
    let namespace = app.namespace().unwrap_or_default();
    let spec = &app.spec;
    let shard = app.labels().get(naming::LABEL_SHARD).map(String::as_str);
    let chart_spec = match (&spec.chart, &spec.chart_ref) {
        (Some(chart), _) => &chart.spec,
        (None, Some(reference)) => return pinned_oci_chart(ctx, app, reference, shard).await,
        (None, None) => {
            return Err(Hold {
                reason: "ChartMissing".into(),
                message: "neither spec.chart nor spec.chartRef is set: set one, as in a HelmRelease".into(),
                transient: false,
            })
        }
    };
    let wanted = chart_spec.version.clone().filter(|v| !v.is_empty()).unwrap_or_else(|| "*".into());
    let mut resolver = None;
    let version = match shared_chart::needs_resolution(spec) {
        false => chart_spec.version.clone().unwrap_or_else(|| "*".into()),
        true => match ctx.sources.resolve_version(chart_spec, &namespace).await.map_err(hold)? {
            Resolved::Version(version) => version,
            Resolved::InRegistry if version::is_exact(&wanted) => wanted,
            Resolved::InRegistry => {
                let by = shared_chart::resolver_ref(spec, &name, &namespace, &wanted);
                let desired = shared_chart::with_shard(
                    shared_chart::helmchart(spec, &name, &namespace, &wanted, &by),
                    shard,
                );
                let helmchart = ensure_chart(ctx, &by, &desired).await?;
                // Its artifact, ready and of its latest spec, says which
                // tag the range resolved to.
                artifact_of(&helmchart, "HelmChart").map_err(hold)?;
                let version = shared_chart::artifact_version(&helmchart).ok_or_else(|| Hold {
                    reason: "SourceNotReady".into(),
                    message: format!(
                        "HelmChart {}/{} has an artifact with no revision; waiting for source-controller",
                        by.namespace, by.name
                    ),
                    transient: true,
                })?;
                resolver = Some(by);
                version
            }
        },
    };
    let chart_ref = shared_chart::chart_ref(spec, &name, &namespace, &version);
    let desired = shared_chart::with_shard(
        shared_chart::helmchart(spec, &name, &namespace, &version, &chart_ref),
        shard,
    );
    let helmchart = ensure_chart(ctx, &chart_ref, &desired).await?;
    let chart = ctx.sources.chart(&helmchart).await.map_err(hold)?;
    Ok(SharedChart {
        chart_ref,
        chart,
        resolver,
    })
}

/// For a `spec.chartRef`: the user's OCIRepository's current artifact,
/// pinned by digest in an OCIRepository of the application's, and the
/// chart in it. Each revision the user's resolves to gets its own pinned
/// copy, so the releases move to it as the rollout lets them.
async fn pinned_oci_chart(
    ctx: &Context,
    app: &NodePoolApplication,
    reference: &ChartReference,
    shard: Option<&str>,
) -> Result<SharedChart, Hold> {
    let name = app.name_any();
    let namespace = app.namespace().unwrap_or_default();
    let source = ctx.sources.oci_source(reference, &namespace).await.map_err(hold)?;
    let (tag, digest) = oci_revision(&source).ok_or_else(|| Hold {
        reason: "SourceNotReady".into(),
        message: format!(
            "OCIRepository {}/{} has an artifact with no digest in its revision; waiting for source-controller",
            shared_chart::source_namespace(&app.spec, &namespace),
            reference.name
        ),
        transient: true,
    })?;
    let chart_ref = shared_chart::chart_ref(&app.spec, &name, &namespace, &format!("{tag}@{digest}"));
    let desired = shared_chart::with_shard(
        shared_chart::pinned_ocirepository(&name, &namespace, &source, &digest, &chart_ref),
        shard,
    );
    let pinned = ensure_chart(ctx, &chart_ref, &desired).await?;
    let chart = ctx.sources.chart(&pinned).await.map_err(hold)?;
    Ok(SharedChart {
        chart_ref,
        chart,
        resolver: None,
    })
}

/// A chart source that is not ready says why the writes wait: until
/// source-controller gets there, or until a person fixes the source.
fn hold(e: SourceError) -> Hold {
    Hold {
        reason: e.reason().to_string(),
        message: e.to_string(),
        transient: !e.needs_user(),
    }
}

/// Creates or updates one of the application's shared charts.
async fn ensure_chart(
    ctx: &Context,
    chart: &ChartRef,
    desired: &serde_json::Value,
) -> Result<serde_json::Value, Hold> {
    // A refusal no retry mends (a name another object holds, forbidden,
    // invalid) needs a person: Stalled, not retried every few seconds.
    apply::ensure_chart(&ctx.client, chart, desired).await.map_err(|e| Hold {
        reason: e.category().to_string(),
        message: e.to_string(),
        transient: e.retriable(),
    })
}

pub(super) async fn publish(ctx: &Context, app: &NodePoolApplication, happened: &[Transition]) {
    let reference = app.object_ref(&());
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
    }
}

/// A write the plan counted on failed: the pool's status says so.
/// Exponential backoff with jitter, from 1 s up to 5 min, per application.
pub(super) fn error_policy(app: Arc<AppMeta>, error: &Error, ctx: Arc<Context>) -> Action {
    let base = ctx.backoff.failed(ObjectRef::from_obj(app.as_ref()));
    let jitter = Duration::from_millis(fastrand::u64(0..1000));
    warn!(app = %app.name_any(), category = error.category(), error = %error, retry_in = ?base + jitter, "reconcile failed");
    Action::requeue(base + jitter)
}
