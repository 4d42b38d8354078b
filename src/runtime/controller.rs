//! The controller: watches NodePoolApplications, the HelmReleases they own
//! and the NodePools, and reconciles each application as observe → plan →
//! apply → status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt, TryStreamExt};
use kube::api::{ApiResource, DynamicObject, ListParams, PartialObjectMeta};
use kube::runtime::controller::Config as ControllerConfig;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, reflector, ObjectRef};
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::Api;
use tracing::{info, warn};

use k8s_openapi::api::core::v1::Node;

use crate::api::naming;
use crate::api::PoolKind;
use crate::chart::shared::{self as shared_chart};
use crate::chart::source::{helmchart_resource, ocirepository_resource, Sources};
use crate::pools::kind::{self as pool_kinds, PoolObjects};
use crate::pools::{nodes, Pool};
use crate::reconcile::apply::SharedCharts;
use crate::reconcile::changes::{NodeChanges, PoolChanges};
use crate::reconcile::observe::{self, CachedPool, Caches, Shallow};
use crate::runtime::api_errors;
use crate::runtime::backoff::Backoff;
use crate::runtime::options::RunArgs;
use crate::runtime::telemetry::{self, Metrics};
use crate::runtime::throttle;

pub use super::context::Error;
use super::context::*;
use super::leader::lead;
use super::reconciler::*;
use super::watches::*;

/// How often the controller asks whether the cluster now serves a kind of
/// pool it did not serve at the start.
const POOL_API_POLL: Duration = Duration::from_secs(30);

pub async fn run(args: RunArgs) -> Result<(), Error> {
    let metrics = Arc::new(Metrics::default());
    telemetry::serve(args.metrics_addr, metrics.clone()).await?;
    let pace = api_errors::Pace {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
    };
    let client = api_errors::client(metrics.clone(), pace).await.map_err(|e| match e {
        api_errors::ClientError::Pace(e) => Error::Pace(e),
        api_errors::ClientError::Kube(e) => Error::Connect(e),
    })?;
    // The kinds of pool the cluster serves now. An application of a kind
    // it does not serve is told so in its status; `unserved` watches for
    // the kind to appear.
    let mut pool_apis = Vec::new();
    let mut unserved_kinds = Vec::new();
    let mut unserved = BTreeMap::new();
    for kind in pool_kinds::OBJECT_KINDS {
        let Some(objects) = pool_kinds::objects(kind) else {
            continue;
        };
        match observe::pool_resource(&client, objects).await {
            Ok(resource) => {
                info!(%kind, version = %resource.api_version, "watching {}s", objects.kind());
                pool_apis.push((kind, objects, resource));
            }
            Err(e) => {
                warn!(%kind, "not watching {}s: {e}", objects.kind());
                unserved.insert(kind, observe::unserved_message(kind, &e));
                unserved_kinds.push(objects);
            }
        }
    }

    // Applications are watched by their metadata alone and read in full by
    // each reconcile: a spec this client cannot decode then fails that one
    // application instead of every list and watch of them all.
    // Read field by field (see `Shallow`), so that one application nested
    // too deep to read fails only its own reconcile, not every list.
    let apps: Api<Shallow<AppMeta>> = match &args.watch_namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    // Every release in the namespaces served, not only ours: planning must
    // know the names and Helm releases others hold, to never take them.
    let releases: Api<observe::CachedRelease> = match &args.watch_namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    // A shard's selector, checked by the API server itself before any watch
    // would retry it forever.
    if let Some(selector) = &args.watch_label_selector {
        apps.list_metadata(&ListParams::default().labels(selector).limit(1))
            .await
            .map_err(|source| Error::WatchLabelSelector {
                selector: selector.clone(),
                source,
            })?;
        info!(%selector, "reconciling only the applications this selector matches");
    }
    let charts: Api<DynamicObject> = Api::all_with(client.clone(), &helmchart_resource());
    let pinned: Api<DynamicObject> = Api::all_with(client.clone(), &ocirepository_resource());

    let chart_writer = reflector::store::Writer::new(helmchart_resource());
    let pinned_writer = reflector::store::Writer::new(ocirepository_resource());
    let chart_store = SharedCharts {
        helmcharts: chart_writer.as_reader(),
        ocirepositories: pinned_writer.as_reader(),
    };
    let node_api: Api<Node> = Api::all(client.clone());
    // Pools and nodes: each cache is kept by the tracker that turns its
    // events into changes.
    let pool_changes: Vec<(PoolKind, &'static dyn PoolObjects, ApiResource, PoolChanges)> = pool_apis
        .into_iter()
        .map(|(kind, objects, resource)| (kind, objects, resource, PoolChanges::default()))
        .collect();
    let mut node_changes = NodeChanges::default();
    let node_store = node_changes.cache();
    let (release_store, release_writer) = reflector::store();
    let caches = Caches {
        pools: pool_changes.iter().map(|(kind, _, _, changes)| (*kind, changes.cache())).collect(),
        nodes: node_store.clone(),
        unserved,
        releases: release_store,
    };
    let reporter = Reporter {
        controller: "nodepool-fanout".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ready = readiness(caches.clone(), chart_store.clone(), node_store.clone(), metrics.clone());
    let context = Arc::new(Context {
        client: client.clone(),
        caches,
        recorder: Recorder::new(client.clone(), reporter),
        resync: args.resync,
        shared_chart: args.shared_chart,
        no_cross_namespace_refs: args.no_cross_namespace_refs,
        sources: Sources::new(client.clone()),
        charts: chart_store,
        nodes: node_store,
        ready,
        metrics,
        backoff: Backoff::default(),
        holds: Backoff::starting_at(CHART_HOLD_FIRST_RETRY),
        leading_since: std::sync::OnceLock::new(),
        selections: Arc::default(),
        reconcile_times: Arc::default(),
    });

    // A standby says so until it leads; without leader election this
    // instance is the leader.
    context.metrics.set_leader(!args.leader_election);
    // A standby is ready: it serves nothing until it leads, and a rollout
    // of the Deployment must not wait on it. The leader is ready once its
    // caches have listed (see `readiness`).
    let serving = |ready: bool| context.metrics.ready.store(ready, std::sync::atomic::Ordering::Relaxed);
    serving(args.leader_election);
    let (leadership, lease_task) = match args.leader_election {
        true => {
            let (channel, task) = lead(&client, &args.leader_election_namespace).await?;
            (Some(channel), Some(task))
        }
        false => (None, None),
    };
    serving(matches!(*context.ready.borrow(), Readiness::Ready));
    context.metrics.set_leader(true);
    let _ = context.leading_since.set(k8s_openapi::jiff::Timestamp::now());
    // Losing the Lease stops the controller gracefully; `run` then fails so
    // the process restarts as a standby.
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lost_leadership = {
        let lost = lost.clone();
        async move {
            let Some(mut channel) = leadership else {
                return std::future::pending::<()>().await;
            };
            while channel.changed().await.is_ok() && *channel.borrow_and_update() {}
            lost.store(true, std::sync::atomic::Ordering::Relaxed);
            warn!("lost the leadership; stopping");
        }
    };

    // Wakes from pools, nodes, releases and charts are throttled per
    // application below, not debounced here: kube's debounce restarts at
    // every trigger, so a steady trickle of release events would hold an
    // application's reconcile (and its resync) off until the trickle stops.
    let config = ControllerConfig::default().concurrency(args.concurrent);
    let (store, writer) = reflector::store();
    let shard = args.watch_label_selector.as_deref();
    let app_config = watcher::Config::default().any_semantic();
    let app_config = match shard {
        Some(selector) => app_config.labels(selector),
        None => app_config,
    };
    let app_events = reflector(writer, watcher(apps, app_config).map_ok(|e| map_event(e, |app| app.object)));
    let controller = Controller::for_stream(changed_apps(app_events), store.clone()).with_config(config);
    // Shared charts are watched whatever their shard label: an application
    // moved here from another shard left charts labelled for that one, and
    // only this instance, which serves it now, can prune them (or release
    // them when it is deleted). Events of charts whose application another
    // instance serves wake nothing below.
    let managed_by = format!("{}={}", naming::LABEL_MANAGED_BY, naming::MANAGER);
    // A release's change wakes the application that owns it, if this
    // instance serves it; others' releases are only remembered.
    let release_triggers = {
        let served = store.clone();
        let release_events = reflector(release_writer, watcher(releases, paged_releases()));
        changed("HelmReleases", release_events, release_fingerprint, FirstList::Quiet).filter_map(
            move |release| {
                let app = observe::owner_of::<AppMeta>(&release).filter(|app| served.get(app).is_some());
                std::future::ready(app)
            },
        )
    };
    // A pool event wakes only the applications of its kind whose selection
    // the pool enters, leaves or is in, and only when its name, labels or
    // annotations changed or it came or went: not status churn.
    let pool_triggers = pool_changes.into_iter().map(|(kind, objects, resource, mut changes)| {
        let api: Api<Shallow<DynamicObject>> = Api::all_with(client.clone(), &resource);
        let events = watcher(api, paged())
            .map_ok(move |event| map_event(event, |read| CachedPool::from_object(objects, read.object)));
        let (store, selections) = (store.clone(), context.selections.clone());
        let mut first_list = FirstList::Quiet;
        retrying(objects.kind(), events)
            .flat_map(move |event| {
                let quiet = first_list.holds(&event);
                let changed = changes.observe(event);
                let selections = selections.read().unwrap_or_else(|e| e.into_inner());
                let apps: Vec<ObjectRef<AppMeta>> = match quiet {
                    true => Vec::new(),
                    false => store
                        .state()
                        .iter()
                        .map(|app| ObjectRef::from_obj(app.as_ref()))
                        .filter(|app| match selections.get(app) {
                            // Not yet read: it must look for itself.
                            None => true,
                            Some(i) => i.kind == kind && changed.iter().any(|c| c.concerns(&i.selection)),
                        })
                        .collect(),
                };
                futures::stream::iter(apps)
            })
            .boxed()
    });
    // A shared HelmChart's artifact turning ready lets its application's
    // releases be written at once rather than at the next poll.
    let chart_triggers = [
        (
            "HelmCharts",
            reflector(chart_writer, watcher(charts, watcher::Config::default().labels(&managed_by))).boxed(),
        ),
        (
            "OCIRepositories",
            reflector(pinned_writer, watcher(pinned, watcher::Config::default().labels(&managed_by))).boxed(),
        ),
    ]
    .map(|(what, chart_events)| {
        let served = store.clone();
        let mut first_list = FirstList::Quiet;
        retrying(what, chart_events)
            .filter_map(move |event| {
                let app = match first_list.holds(&event) {
                    true => None,
                    false => match event {
                        watcher::Event::Apply(chart)
                        | watcher::Event::InitApply(chart)
                        | watcher::Event::Delete(chart) => shared_chart::owner_of::<AppMeta>(&chart),
                        watcher::Event::Init | watcher::Event::InitDone => None,
                    },
                };
                // Charts are watched in every namespace: only applications
                // this instance serves are woken.
                std::future::ready(app.filter(|app| served.get(app).is_some()))
            })
            .boxed()
    });
    // A user's OCIRepository resolving a new revision (a tag pushed, a
    // semver range moving on) is a change to roll out now, not at the next
    // resync: it wakes the applications whose chartRef names it. Only
    // metadata is watched; every status write changes the resource version.
    let source_triggers = {
        let (served, selections) = (store.clone(), context.selections.clone());
        let sources: Api<PartialObjectMeta<DynamicObject>> =
            Api::all_with(client.clone(), &ocirepository_resource());
        let mut first_list = FirstList::Quiet;
        retrying("OCIRepositories (sources)", watcher(sources, paged())).flat_map(move |event| {
            let quiet = first_list.holds(&event);
            let source = match (quiet, &event) {
                (false, watcher::Event::Apply(o) | watcher::Event::Delete(o)) => {
                    o.metadata.namespace.clone().zip(o.metadata.name.clone())
                }
                _ => None,
            };
            let selections = selections.read().unwrap_or_else(|e| e.into_inner());
            let apps: Vec<ObjectRef<AppMeta>> = match source {
                None => Vec::new(),
                Some(source) => selections
                    .iter()
                    .filter(|(app, interest)| {
                        interest.chart_source.as_ref() == Some(&source) && served.get(app).is_some()
                    })
                    .map(|(app, _)| app.clone())
                    .collect(),
            };
            futures::stream::iter(apps)
        })
    };
    // A node joining, leaving or going offline changes what the
    // applications selecting its pool may write. Heartbeats rewrite a
    // Node's status all the time; only its labels and readiness matter
    // here, so only a change of those wakes anything, and only the
    // applications that select the pool it leaves or joins.
    let node_events = watcher(node_api, paged()).modify(|node| *node = nodes::strip(std::mem::take(node)));
    let node_triggers = {
        let (store, selections, pools) =
            (store.clone(), context.selections.clone(), context.caches.pools.clone());
        let mut first_list = FirstList::Quiet;
        retrying("Nodes", node_events).flat_map(move |event| {
            let quiet = first_list.holds(&event);
            let changed = node_changes.observe(event);
            let selections = selections.read().unwrap_or_else(|e| e.into_inner());
            let apps: Vec<ObjectRef<AppMeta>> = match quiet || changed.is_empty() {
                true => Vec::new(),
                false => store
                    .state()
                    .iter()
                    .map(|app| ObjectRef::from_obj(app.as_ref()))
                    .filter(|app| {
                        let Some(interest) = selections.get(app) else {
                            return true;
                        };
                        let pool = |name: &str| match pools.get(&interest.kind) {
                            Some(pools) => pools.get(&ObjectRef::new(name)).map(|p| p.pool.clone()),
                            // A node label's value: a pool as soon as one
                            // node carries it; its labels are not known
                            // here, so a selector takes it as matching.
                            None if interest.kind == PoolKind::NodeLabel => Some(Pool::named(name)),
                            None => None,
                        };
                        let selection = match interest.kind {
                            PoolKind::NodeLabel if interest.selection.selector.is_some() => {
                                return changed.iter().any(|c| !c.pools(&interest.membership).is_empty())
                            }
                            _ => &interest.selection,
                        };
                        changed.iter().any(|c| c.concerns(&interest.membership, selection, pool))
                    })
                    .collect(),
            };
            futures::stream::iter(apps)
        })
    };
    let wakes = futures::stream::select_all(
        [
            release_triggers.boxed(),
            node_triggers.boxed(),
            source_triggers.boxed(),
        ]
        .into_iter()
        .chain(chart_triggers)
        .chain(pool_triggers),
    );
    let times = context.reconcile_times.clone();
    let window = move |app: &ObjectRef<AppMeta>| {
        wake_window(times.lock().unwrap_or_else(|e| e.into_inner()).get(app).copied())
    };
    // A kind of pool installed after the start: the controller stops, and
    // its restart watches the new kind (kube's Controller takes its watches
    // once, when it starts).
    let appeared: Arc<std::sync::OnceLock<&'static str>> = Arc::default();
    let (tell, told) = tokio::sync::oneshot::channel::<()>();
    if !unserved_kinds.is_empty() {
        let (client, appeared) = (client.clone(), appeared.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(POOL_API_POLL).await;
                for objects in &unserved_kinds {
                    if observe::pool_resource(&client, *objects).await.is_ok() {
                        warn!(
                            crd = objects.crd(),
                            "the cluster now serves {}s; restarting to watch them",
                            objects.kind()
                        );
                        let _ = appeared.set(objects.crd());
                        let _ = tell.send(());
                        return;
                    }
                }
            }
        });
    }
    let pool_api_appeared = async move {
        if told.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let stop = futures::future::select(Box::pin(lost_leadership), Box::pin(pool_api_appeared)).map(|_| ());
    // Stopping: on SIGTERM or SIGINT, a lost Lease or a pool API appearing.
    // Reconciles under way get SHUTDOWN_GRACE to finish; then the process
    // goes whatever they wait on (a cache that cannot list, an API server
    // that does not answer), well inside a pod's 30 s grace period.
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        futures::future::select(Box::pin(signalled()), Box::pin(stop)).await;
        let _ = stopping.send(true);
    });
    let stop_requested = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let running = controller
        .reconcile_on(throttle::per_key(wakes, window))
        .graceful_shutdown_on(stop_requested(stopped.clone()))
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((app, _)) => tracing::debug!(app = %app, "reconciled"),
                Err(e) => warn!(error = %e, "reconcile failed"),
            }
        });
    let overdue = stop_requested(stopped).then(|()| tokio::time::sleep(SHUTDOWN_GRACE));
    tokio::select! {
        () = running => info!("stopped"),
        () = overdue => warn!(grace = ?SHUTDOWN_GRACE, "reconciles under way did not finish in time; stopping anyway"),
    }
    if let Some(task) = lease_task {
        // Dropping the channel's last receiver (with the controller above)
        // makes the Lease's task release it, so a standby takes over now
        // rather than when the Lease expires.
        match tokio::time::timeout(Duration::from_secs(5), task).await {
            Ok(Ok(Ok(_))) => info!("released the leadership"),
            Ok(Ok(Err(e))) => warn!(error = %e, "cannot release the leadership"),
            Ok(Err(e)) => warn!(error = %e, "cannot release the leadership"),
            Err(_) => warn!("releasing the leadership took more than 5 s; it expires on its own"),
        }
    }
    if let Some(crd) = appeared.get() {
        return Err(Error::PoolApiAppeared(crd));
    }
    match lost.load(std::sync::atomic::Ordering::Relaxed) {
        true => Err(Error::LostLeadership(args.leader_election_namespace.clone())),
        false => Ok(()),
    }
}

/// How long reconciles under way may take to finish once the controller
/// is told to stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// SIGTERM (as the kubelet stops a pod) or SIGINT (Ctrl-C).
async fn signalled() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => info!("SIGTERM: stopping"),
                _ = tokio::signal::ctrl_c() => info!("SIGINT: stopping"),
            }
        }
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGTERM; stopping on SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn events() -> Vec<watcher::Event<u8>> {
        use watcher::Event::*;
        vec![
            Init,
            InitApply(1),
            InitDone,
            Apply(2),
            Delete(2),
            Init,
            InitApply(1),
            InitDone,
        ]
    }

    #[test]
    fn a_quiet_first_list_wakes_nothing_and_later_relists_do() {
        let mut first = FirstList::Quiet;
        let quiet: Vec<bool> = events().iter().map(|e| first.holds(e)).collect();
        assert_eq!(quiet, [true, true, true, false, false, false, false, false]);
    }

    #[test]
    fn the_wake_window_is_ten_reconciles_long_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(wake_window(None), ms(1000));
        assert_eq!(wake_window(Some(ms(5))), ms(1000));
        assert_eq!(wake_window(Some(ms(100))), ms(1000));
        assert_eq!(wake_window(Some(ms(1500))), ms(15_000));
        assert_eq!(wake_window(Some(ms(90_000))), ms(30_000));
    }

    #[test]
    fn a_first_list_that_counts_is_never_quiet() {
        let mut first = FirstList::Counts;
        assert!(events().iter().all(|e| !first.holds(e)));
    }
}
