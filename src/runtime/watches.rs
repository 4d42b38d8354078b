//! The watches that feed the caches: paged lists, each watch retrying on
//! its own schedule, and only the events that change what a reconcile
//! would do passed on as triggers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, reflector, ObjectRef};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use tracing::{info, warn};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Node;

use super::changes::{NodeChanges, PoolChanges};
use crate::api::{naming, PoolKind};
use crate::chart::source::{helmchart_resource, ocirepository_resource};
use crate::pools::kind::PoolObjects;
use crate::pools::nodes;
use crate::reconcile::apply::SharedCharts;
use crate::reconcile::history;
use crate::reconcile::observe::{self, CachedPool, Caches, ObserveError, PoolApi, Shallow};
use crate::runtime::options::RunArgs;

use super::context::*;
use super::shards;
use super::throttle::Wake;
use super::triggers;

/// The watch of a kind that may count thousands of objects (releases,
/// pools, nodes): listed 500 at a time. A list at any resource version
/// (`resourceVersion=0`) is answered from the API server's cache in one
/// piece whatever the page size asked (checked on Kubernetes 1.36), so a
/// restart at 10,000 pools read every release's text into memory at once
/// before caching any. A paged list reads the latest state, page by page,
/// as client-go's pager does.
pub(super) fn paged() -> watcher::Config {
    watcher::Config::default().page_size(500)
}

/// HelmReleases in smaller pages: one may carry up to 1.5 MiB (the API
/// server's limit on an object; anyone who may create one in a watched
/// namespace decides its size), and a page is held whole while it is read,
/// so 500 of them would be most of a gigabyte. 50 bound a page to 75 MiB
/// and make a list of 10,000 releases 200 requests.
pub(super) fn paged_releases() -> watcher::Config {
    watcher::Config::default().page_size(50)
}

/// A watch's events, each watch retrying on its own schedule, errors
/// logged and dropped.
///
/// kube's Controller merges its watches into one stream under one backoff,
/// so a single failing watch (every watch, once the API server comes back
/// from an outage and answers `410 Gone`) pauses all the others for up to
/// 30 s per error, and the pauses add up to minutes. Here each watch backs
/// off alone (250 ms doubling to 5 s, as quick as client-go's reflector is
/// to re-list) and its errors are logged and end there, so the controller's
/// shared backoff never fires.
pub(super) fn retrying<K, S>(watch: &'static str, events: S) -> impl Stream<Item = watcher::Event<K>> + Send
where
    K: Clone + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let schedule = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(5))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    let backoff =
        ResetTimerBackoff::new(watcher::ExponentialBackoff::from(schedule), Duration::from_secs(30));
    events.backoff(backoff).filter_map(move |event| async move {
        match event {
            Ok(event) => Some(event),
            Err(error) => {
                warn!(watch, %error, "watch failed; retrying");
                None
            }
        }
    })
}

/// The applications whose watch events can change what their reconcile
/// does. Our own status writes come back as watch events too, and a
/// reconcile that wakes itself loops: only a change of what a person or a
/// GitOps tool sets (see [`app_fingerprint`]) and a deletion pass.
pub(super) fn changed_apps<S>(events: S) -> impl Stream<Item = Result<AppMeta, watcher::Error>> + Send
where
    S: Stream<Item = Result<watcher::Event<AppMeta>, watcher::Error>> + Send + 'static,
{
    // The first list is every application's first reconcile.
    changed("NodePoolApplications", events, app_fingerprint, FirstList::Counts).map(Ok)
}

/// Whether a watch's first list wakes anything. Every application is
/// reconciled once when its own watch first lists it, and that reconcile
/// waits until every cache is listed, so the other watches' first lists
/// need not wake it again (at a restart with 10,000 releases, they would
/// each reconcile it once or twice more for nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FirstList {
    Counts,
    Quiet,
    /// The first list ended; every event counts.
    Done,
}

impl FirstList {
    /// Whether `event` is quiet: part of the first list of a watch whose
    /// first list is.
    pub(super) fn holds<K>(&mut self, event: &watcher::Event<K>) -> bool {
        let quiet = *self == FirstList::Quiet;
        match event {
            watcher::Event::InitDone => {
                *self = FirstList::Done;
                quiet
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => quiet,
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => false,
        }
    }
}

/// The objects of a watch whose `fingerprint` changed, or that went; the
/// watch retried on its own schedule (see [`retrying`]).
pub(super) fn changed<K, S>(
    watch: &'static str,
    events: S,
    fingerprint: fn(&K) -> u64,
    mut first_list: FirstList,
) -> impl Stream<Item = K> + Send
where
    K: Resource + Clone + Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let mut seen: HashMap<ObjectRef<K>, u64> = HashMap::new();
    retrying(watch, events).flat_map(move |event| {
        let quiet = first_list.holds(&event);
        let passed = match event {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                let print = fingerprint(&object);
                let changed = seen.insert(ObjectRef::from_obj(&object), print) != Some(print);
                changed.then_some(object)
            }
            watcher::Event::Delete(object) => {
                seen.remove(&ObjectRef::from_obj(&object));
                Some(object)
            }
            watcher::Event::Init | watcher::Event::InitDone => None,
        };
        futures::stream::iter(passed.filter(|_| !quiet))
    })
}

/// What planning reads of a release, as the cache holds it: Flux adding
/// its finalizer or stamping a reconcile time changes nothing of it. Of a
/// release cut down ([`observe::CachedRelease::cut_down`]), which keeps
/// no digest of it, that is its owner and the Helm release it drives.
pub(super) fn release_fingerprint(release: &observe::CachedRelease) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    release.metadata.uid.hash(&mut hasher);
    release.print.hash(&mut hasher);
    release.drives.hash(&mut hasher);
    release.site_pool.hash(&mut hasher);
    observe::application_owner(release).map(|owner| &owner.uid).hash(&mut hasher);
    hasher.finish()
}

/// What of an application's metadata can change what its reconcile does:
/// which object it is (its uid), its spec (the generation), labels,
/// annotations, finalizers and deletion. Not its status, which the
/// reconcile itself writes.
pub(super) fn app_fingerprint(app: &AppMeta) -> u64 {
    use std::hash::{Hash, Hasher};
    let meta = &app.metadata;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    meta.uid.hash(&mut hasher);
    meta.generation.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp.as_ref().map(|t| t.0.as_second()).hash(&mut hasher);
    hasher.finish()
}

/// Every cache a reconcile reads, listed once. One task waits on the
/// stores and tells every reconcile: kube's `Store::wait_until_ready` wakes
/// only the last of several tasks waiting at once, and the others would
/// hang (measured: three of a hundred applications created together never
/// reconciled).
pub(super) fn readiness(
    caches: Caches,
    charts: SharedCharts,
    nodes: reflector::Store<Node>,
    readyz: std::sync::Arc<crate::runtime::server::Readyz>,
) -> tokio::sync::watch::Receiver<Readiness> {
    let (tell, ready) = tokio::sync::watch::channel(Readiness::Listing);
    tokio::spawn(async move {
        let state = match caches.ready().await {
            Err(ObserveError::CacheStopped(watch)) => Readiness::Stopped(watch),
            Ok(()) if charts.helmcharts.wait_until_ready().await.is_err() => Readiness::Stopped("HelmCharts"),
            Ok(()) if charts.ocirepositories.wait_until_ready().await.is_err() => {
                Readiness::Stopped("OCIRepositories")
            }
            Ok(()) if nodes.wait_until_ready().await.is_err() => Readiness::Stopped("Nodes"),
            Ok(()) => Readiness::Ready,
        };
        info!(?state, "caches listed");
        // /readyz says ready only now: a watch that cannot list (an object
        // it cannot read, an API server that refuses it) keeps it unready.
        readyz.set(state == Readiness::Ready);
        let _ = tell.send(state);
    });
    ready
}

/// Every watch but the applications': the APIs to watch and the caches
/// they fill, before the streams start.
pub(super) struct Watches {
    releases: Api<observe::WatchedRelease>,
    release_writer: observe::ReleaseWriter,
    /// The applications' revision records, by our label.
    history: (Api<ControllerRevision>, reflector::store::Writer<ControllerRevision>),
    history_store: reflector::Store<ControllerRevision>,
    helmcharts: (Api<DynamicObject>, reflector::store::Writer<DynamicObject>),
    pinned: (Api<DynamicObject>, reflector::store::Writer<DynamicObject>),
    nodes: NodeChanges,
    /// Pools: each cache is kept by the tracker that turns its events into
    /// changes.
    pools: Vec<(PoolKind, &'static PoolObjects, ApiResource, PoolChanges)>,
    /// The namespace served, where namespaced pools are read (see
    /// [`super::pool_apis::watched_namespace`]); none for every one.
    pool_namespace: Option<String>,
}

impl Watches {
    pub(super) fn new(
        client: &Client,
        args: &RunArgs,
        pools: impl Iterator<Item = (PoolKind, &'static PoolObjects, ApiResource)>,
    ) -> Self {
        // Every release in the namespaces served, not only ours: planning
        // must know the names and Helm releases others hold, to never take
        // them (those of other shards' applications are cut down, see
        // `shards`).
        let releases = match &args.watch_namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let release_writer = observe::ReleaseWriter::default();
        let history_api = match &args.watch_namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let (history_store, history_writer) = reflector::store();
        let charts = |resource: ApiResource| {
            (Api::all_with(client.clone(), &resource), reflector::store::Writer::new(resource))
        };
        Watches {
            releases,
            release_writer,
            history: (history_api, history_writer),
            history_store,
            helmcharts: charts(helmchart_resource()),
            pinned: charts(ocirepository_resource()),
            nodes: NodeChanges::default(),
            pools: pools
                .map(|(kind, objects, resource)| {
                    (kind, objects, resource.clone(), PoolChanges::new(PoolApi::new(resource)))
                })
                .collect(),
            pool_namespace: args.watch_namespace.clone(),
        }
    }

    /// The caches a reconcile observes; `unserved` says why the kinds of
    /// pool not watched are not.
    pub(super) fn caches(&self, unserved: BTreeMap<PoolKind, String>) -> Caches {
        Caches {
            pools: self
                .pools
                .iter()
                .map(|(kind, _, _, changes)| {
                    let cache = observe::PoolCache {
                        api: changes.api(),
                        store: changes.cache(),
                        index: Some(changes.index()),
                    };
                    (*kind, cache)
                })
                .collect(),
            nodes: self.nodes.cache(),
            unserved,
            releases: self.release_writer.store(),
            release_index: Some(self.release_writer.index()),
            history: self.history_store.clone(),
        }
    }

    /// The caches of the shared charts we manage.
    pub(super) fn charts(&self) -> SharedCharts {
        SharedCharts {
            helmcharts: self.helmcharts.1.as_reader(),
            ocirepositories: self.pinned.1.as_reader(),
        }
    }

    /// Starts the watches: the applications their events concern, one
    /// stream for all (see [`triggers`]). A pool entering or leaving an
    /// application's selection wakes it urgently, and so do enough of its
    /// releases reaching a verdict while its rollout waits on them (see
    /// [`triggers::releases`]); every other event is folded into its wake
    /// window (see [`throttle`]).
    /// `served_listed` turns true once the applications served have listed.
    pub(super) fn wakes(
        self,
        client: &Client,
        (served, served_listed): (&reflector::Store<AppMeta>, tokio::sync::watch::Receiver<bool>),
        context: &Context,
    ) -> BoxStream<'static, Wake<ObjectRef<AppMeta>>> {
        // Shared charts are watched whatever their shard label: an
        // application moved here from another shard left charts labelled
        // for that one, and only this instance, which serves it now, can
        // prune them (or release them when it is deleted).
        let managed_by = format!("{}={}", naming::LABEL_MANAGED_BY, naming::MANAGER);
        let chart_wakes = |what, kind, (api, writer): (Api<DynamicObject>, _)| {
            let events = reflector(writer, watcher(api, watcher::Config::default().labels(&managed_by)));
            triggers::shared_charts((what, kind), events, served.clone(), context.index.clone())
        };
        // Users' OCIRepositories, by their metadata alone: every status
        // write changes the resource version.
        let sources: Api<PartialObjectMeta<DynamicObject>> =
            Api::all_with(client.clone(), &ocirepository_resource());
        let nodes: Api<Node> = Api::all(client.clone());
        let node_events = watcher(nodes, paged()).modify(|node| *node = nodes::strip(std::mem::take(node)));
        let served_releases = (served.clone(), served_listed);
        let releases = shards::releases(self.releases, served_releases, Arc::clone(&context.relist));
        // The cache's own writer keeps its index with it (kube's
        // `reflector`, with that writer).
        let mut release_writer = self.release_writer;
        let release_events = releases.inspect_ok(move |event| release_writer.apply_watcher_event(event));
        // Records wake nothing: the reconcile that writes one reads it back.
        let (history, history_writer) = self.history;
        let records = watcher(history, watcher::Config::default().labels(history::LABEL_REVISION));
        let records = retrying("ControllerRevisions", reflector(history_writer, records))
            .filter_map(|_| futures::future::ready(None))
            .boxed();
        let mut urgent = Vec::new();
        let wakes = vec![
            records,
            chart_wakes("HelmCharts", "HelmChart", self.helmcharts),
            chart_wakes("OCIRepositories", "OCIRepository", self.pinned),
            triggers::chart_sources(watcher(sources, paged()), served.clone(), context.index.clone()),
            triggers::nodes(
                node_events,
                self.nodes,
                served.clone(),
                context.index.clone(),
                context.caches.pools.clone(),
            ),
        ];
        for (kind, objects, resource, changes) in self.pools {
            let api: Api<Shallow<DynamicObject>> =
                match super::pool_apis::watched_namespace(objects, self.pool_namespace.as_deref()) {
                    Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
                    None => Api::all_with(client.clone(), &resource),
                };
            let events = watcher(api, paged()).map_ok(move |event| {
                observe::map_event(event, |read| CachedPool::from_object(objects, read.object))
            });
            let index = context.index.clone();
            urgent.push(triggers::pools(kind, objects.kind(), events, changes, served.clone(), index));
        }
        let folded = futures::stream::select_all(wakes).map(Wake::folded);
        let urgent = futures::stream::select_all(urgent).map(Wake::urgent);
        let releases = triggers::releases(release_events, served.clone(), context.index.clone());
        futures::stream::select_all([folded.boxed(), urgent.boxed(), releases]).boxed()
    }
}
