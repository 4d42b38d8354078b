//! The controller: watches NodePoolApplications, the HelmReleases they own
//! and the NodePools, and reconciles each application as observe → plan →
//! apply → status.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::{DynamicObject, ListParams, PartialObjectMeta};
use kube::runtime::controller::{Action, Config as ControllerConfig};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, reflector, ObjectRef};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{watcher, Controller, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{info, warn};

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::naming;
use crate::api::{
    ConditionStatus, DeletionPolicy, NodePoolApplication, NodePoolApplicationStatus, PoolSelection,
};
use crate::chart::schema::Chart;
use crate::chart::shared::{self as shared_chart, ChartRef};
use crate::chart::source::{helmchart_resource, SourceError, Sources};
use crate::pools::nodes;
use crate::reconcile::apply::{self, ApplyError};
use crate::reconcile::changes::{NodeChanges, PoolChanges};
use crate::reconcile::observe::{self, helmrelease_resource, CachedPool, Caches, ObserveError};
use crate::reconcile::plan::{self, DesiredRelease, Hold, PlanInput};
use crate::runtime::api_errors;
use crate::runtime::backoff::Backoff;
use crate::runtime::events::{self as transitions, Transition};
use crate::runtime::options::RunArgs;
use crate::runtime::telemetry::{self, Metrics, ServeError};
use crate::runtime::throttle;

/// HelmReleases written at once per reconcile.
const APPLY_CONCURRENCY: usize = 16;

/// At most one reconcile per application per window from the events of
/// its pools, nodes, releases and chart (see [`throttle`]): the first at
/// once, the rest folded into one at the window's end. The window is ten
/// times the application's last reconcile, so that events keep it busy a
/// tenth of the time at most (measured: a 1 s window kept a 10,000-pool
/// application replanning on a whole core while helm-controller worked
/// through its releases), between a second, which keeps a small
/// application's roll-up live, and half a minute.
fn wake_window(last_reconcile: Option<Duration>) -> Duration {
    const SHORTEST: Duration = Duration::from_secs(1);
    const LONGEST: Duration = Duration::from_secs(30);
    last_reconcile.map_or(SHORTEST, |took| (took * 10).clamp(SHORTEST, LONGEST))
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot connect to the Kubernetes API: {0} (is KUBECONFIG set, or is this running in a cluster?)"
    )]
    Connect(#[source] kube::Error),
    #[error("cannot read NodePoolApplication {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Pace(api_errors::PaceError),
    #[error(transparent)]
    Observe(#[from] ObserveError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("leader election on Lease {namespace}/nodepool-fanout failed: {source}")]
    LeaderElection {
        namespace: String,
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
    #[error("lost the leadership of Lease {0}/nodepool-fanout; exiting so that a standby takes over")]
    LostLeadership(String),
    #[error(
        "--watch-label-selector {selector:?} is refused by the API server: {source}; give a label \
         selector such as sharding.fluxcd.io/key=shard1 or !sharding.fluxcd.io/key"
    )]
    WatchLabelSelector {
        selector: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    pub fn category(&self) -> &'static str {
        match self {
            Self::Connect(_) => "ConnectFailed",
            Self::Read { .. } => "ApiError",
            Self::Observe(e) => e.category(),
            Self::Apply(e) => e.category(),
            Self::Serve(_) => "ServeFailed",
            Self::LeaderElection { .. } | Self::LostLeadership(_) => "LeaderElection",
            Self::WatchLabelSelector { .. } | Self::Pace(_) => "InvalidFlag",
        }
    }
}

struct Context {
    client: Client,
    /// NodePools and HelmReleases, from their watches.
    caches: Caches,
    recorder: Recorder,
    resync: Duration,
    shared_chart: bool,
    no_cross_namespace_refs: bool,
    sources: Sources,
    /// Every HelmChart this controller manages, from its watch.
    charts: reflector::Store<DynamicObject>,
    /// Every Node, cut down to its labels and Ready condition.
    nodes: reflector::Store<Node>,
    /// Whether every cache has listed once (see [`readiness`]).
    ready: tokio::sync::watch::Receiver<Readiness>,
    metrics: Arc<Metrics>,
    /// Consecutive failures per application, for exponential backoff.
    backoff: Backoff<ObjectRef<AppMeta>>,
    /// Each application's pool selection and node label, as its last
    /// reconcile read them: the index from a NodePool or Node change to
    /// the applications it concerns.
    selections: Arc<std::sync::RwLock<HashMap<ObjectRef<AppMeta>, Interest>>>,
    /// How long each application's last reconcile took: its wake window.
    reconcile_times: Arc<std::sync::Mutex<HashMap<ObjectRef<AppMeta>, Duration>>>,
}

/// What of an application decides which pool and node events concern it.
#[derive(Debug, Clone)]
struct Interest {
    selection: PoolSelection,
    /// The node label naming a node's pool (`spec.placement.nodeLabel`).
    node_label: String,
}

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
    let nodepools = observe::nodepool_resource(&client).await?;
    info!(nodepool_version = %nodepools.api_version, "using NodePools");
    metrics.ready.store(true, std::sync::atomic::Ordering::Relaxed);

    // Applications are watched by their metadata alone and read in full by
    // each reconcile: a spec this client cannot decode then fails that one
    // application instead of every list and watch of them all.
    let apps: Api<AppMeta> = match &args.watch_namespace {
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
    let pool_api: Api<DynamicObject> = Api::all_with(client.clone(), &nodepools);
    let charts: Api<DynamicObject> = Api::all_with(client.clone(), &helmchart_resource());

    let chart_writer = reflector::store::Writer::new(helmchart_resource());
    let chart_store = chart_writer.as_reader();
    let node_api: Api<Node> = Api::all(client.clone());
    // Pools and nodes: each cache is kept by the tracker that turns its
    // events into changes.
    let mut pool_changes = PoolChanges::default();
    let mut node_changes = NodeChanges::default();
    let node_store = node_changes.cache();
    let (release_store, release_writer) = reflector::store();
    let caches = Caches {
        pools: pool_changes.cache(),
        releases: release_store,
    };
    let reporter = Reporter {
        controller: "nodepool-fanout".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ready = readiness(caches.clone(), chart_store.clone(), node_store.clone());
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
        selections: Arc::default(),
        reconcile_times: Arc::default(),
    });

    let leadership = match args.leader_election {
        true => Some(lead(&client, &args.leader_election_namespace).await?),
        false => None,
    };
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
    let app_events = reflector(writer, watcher(apps, app_config));
    let controller = Controller::for_stream(changed_apps(app_events), store.clone()).with_config(config);
    // What this instance made carries its applications' shard label.
    let managed_by = match shard {
        Some(selector) => format!("{}={},{selector}", naming::LABEL_MANAGED_BY, naming::MANAGER),
        None => format!("{}={}", naming::LABEL_MANAGED_BY, naming::MANAGER),
    };
    // A release's change wakes the application that owns it, if this
    // instance serves it; others' releases are only remembered.
    let release_triggers = {
        let served = store.clone();
        let release_events = reflector(release_writer, watcher(releases, paged()));
        changed("HelmReleases", release_events, release_fingerprint, FirstList::Quiet).filter_map(
            move |release| {
                let app = observe::owner_of::<AppMeta>(&release).filter(|app| served.get(app).is_some());
                std::future::ready(app)
            },
        )
    };
    // A NodePool event wakes only the applications whose selection the
    // pool enters, leaves or is in, and only when its name, labels or
    // annotations changed or it came or went: not status churn.
    let pool_events = watcher(pool_api, paged()).map_ok(|event| map_event(event, CachedPool::from_object));
    let pool_triggers = {
        let (store, selections) = (store.clone(), context.selections.clone());
        let mut first_list = FirstList::Quiet;
        retrying("NodePools", pool_events).flat_map(move |event| {
            let quiet = first_list.holds(&event);
            let changed = pool_changes.observe(event);
            let selections = selections.read().unwrap_or_else(|e| e.into_inner());
            let apps: Vec<ObjectRef<AppMeta>> = match quiet {
                true => Vec::new(),
                false => store
                    .state()
                    .iter()
                    .map(|app| ObjectRef::from_obj(app.as_ref()))
                    .filter(|app| {
                        // Not yet read: it must look for itself.
                        let interest = selections.get(app);
                        changed.iter().any(|c| interest.is_none_or(|i| c.concerns(&i.selection)))
                    })
                    .collect(),
            };
            futures::stream::iter(apps)
        })
    };
    // A shared HelmChart's artifact turning ready lets its application's
    // releases be written at once rather than at the next poll.
    let chart_triggers = {
        let served = store.clone();
        let chart_events =
            reflector(chart_writer, watcher(charts, watcher::Config::default().labels(&managed_by)));
        let mut first_list = FirstList::Quiet;
        retrying("HelmCharts", chart_events).filter_map(move |event| {
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
                        let pool = |name: &str| pools.get(&ObjectRef::new(name)).map(|p| p.pool.clone());
                        changed.iter().any(|c| c.concerns(&interest.node_label, &interest.selection, pool))
                    })
                    .collect(),
            };
            futures::stream::iter(apps)
        })
    };
    let wakes = futures::stream::select_all([
        release_triggers.boxed(),
        pool_triggers.boxed(),
        node_triggers.boxed(),
        chart_triggers.boxed(),
    ]);
    let times = context.reconcile_times.clone();
    let window = move |app: &ObjectRef<AppMeta>| {
        wake_window(times.lock().unwrap_or_else(|e| e.into_inner()).get(app).copied())
    };
    controller
        .reconcile_on(throttle::per_key(wakes, window))
        .shutdown_on_signal()
        .graceful_shutdown_on(lost_leadership)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((app, _)) => tracing::debug!(app = %app, "reconciled"),
                Err(e) => warn!(error = %e, "reconcile failed"),
            }
        })
        .await;
    info!("stopped");
    match lost.load(std::sync::atomic::Ordering::Relaxed) {
        true => Err(Error::LostLeadership(args.leader_election_namespace.clone())),
        false => Ok(()),
    }
}

/// The watch of a kind that may count thousands of objects (releases,
/// pools, nodes): listed 500 at a time. A list at any resource version
/// (`resourceVersion=0`) is answered from the API server's cache in one
/// piece whatever the page size asked (checked on Kubernetes 1.36), so a
/// restart at 10,000 pools read every release's text into memory at once
/// before caching any. A paged list reads the latest state, page by page,
/// as client-go's pager does.
fn paged() -> watcher::Config {
    watcher::Config::default().page_size(500)
}

/// A watch event with its object converted, as it enters a cache.
fn map_event<A, B>(event: watcher::Event<A>, convert: impl Fn(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(convert(object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(convert(object)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(object) => watcher::Event::InitApply(convert(object)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
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
fn retrying<K, S>(watch: &'static str, events: S) -> impl Stream<Item = watcher::Event<K>> + Send
where
    K: Resource + Clone + Send + 'static,
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

/// Waits until this replica holds the Lease; the returned channel says
/// whether it still does.
async fn lead(client: &Client, namespace: &str) -> Result<tokio::sync::watch::Receiver<bool>, Error> {
    let identity =
        std::env::var("POD_NAME").unwrap_or_else(|_| format!("nodepool-fanout-{}", std::process::id()));
    let failed = |source| Error::LeaderElection {
        namespace: namespace.to_string(),
        source,
    };
    // A 15 s lease renewed well before expiry: a standby takes over within
    // about 15 s of the leader's death.
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), "nodepool-fanout")
        .with_namespace(namespace)
        .with_identity(&identity)
        .with_duration(15)
        .with_grace(5)
        .with_field_manager(crate::reconcile::apply::FIELD_MANAGER)
        .build()
        .await
        .map_err(failed)?;
    let (mut channel, _task) = manager.watch().await;
    info!(%identity, lease = %format!("{namespace}/nodepool-fanout"), "waiting for the leadership");
    while !*channel.borrow_and_update() {
        if channel.changed().await.is_err() {
            return Err(Error::LostLeadership(namespace.to_string()));
        }
    }
    info!(%identity, "leading");
    Ok(channel)
}

/// The applications whose watch events can change what their reconcile
/// does. Our own status writes come back as watch events too, and a
/// reconcile that wakes itself loops: only a change of what a person or a
/// GitOps tool sets (see [`app_fingerprint`]) and a deletion pass.
fn changed_apps<S>(events: S) -> impl Stream<Item = Result<AppMeta, watcher::Error>> + Send
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
enum FirstList {
    Counts,
    Quiet,
    /// The first list ended; every event counts.
    Done,
}

impl FirstList {
    /// Whether `event` is quiet: part of the first list of a watch whose
    /// first list is.
    fn holds<K>(&mut self, event: &watcher::Event<K>) -> bool {
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
fn changed<K, S>(
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
/// its finalizer or stamping a reconcile time changes nothing of it.
fn release_fingerprint(release: &observe::CachedRelease) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    release.metadata.uid.hash(&mut hasher);
    release.planned.hash(&mut hasher);
    hasher.finish()
}

/// What of an application's metadata can change what its reconcile does:
/// which object it is (its uid), its spec (the generation), labels,
/// annotations, finalizers and deletion. Not its status, which the
/// reconcile itself writes.
fn app_fingerprint(app: &AppMeta) -> u64 {
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

/// Where the caches stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readiness {
    Listing,
    Ready,
    /// A watch stopped before its first list: the controller is stopping.
    Stopped(&'static str),
}

/// Every cache a reconcile reads, listed once. One task waits on the
/// stores and tells every reconcile: kube's `Store::wait_until_ready` wakes
/// only the last of several tasks waiting at once, and the others would
/// hang (measured: three of a hundred applications created together never
/// reconciled).
fn readiness(
    caches: Caches,
    charts: reflector::Store<DynamicObject>,
    nodes: reflector::Store<Node>,
) -> tokio::sync::watch::Receiver<Readiness> {
    let (tell, ready) = tokio::sync::watch::channel(Readiness::Listing);
    tokio::spawn(async move {
        let state = match caches.ready().await {
            Err(ObserveError::CacheStopped(watch)) => Readiness::Stopped(watch),
            Err(_) => Readiness::Stopped("NodePools"),
            Ok(()) if charts.wait_until_ready().await.is_err() => Readiness::Stopped("HelmCharts"),
            Ok(()) if nodes.wait_until_ready().await.is_err() => Readiness::Stopped("Nodes"),
            Ok(()) => Readiness::Ready,
        };
        info!(?state, "caches listed");
        let _ = tell.send(state);
    });
    ready
}

/// What the controller watches of an application.
type AppMeta = PartialObjectMeta<NodePoolApplication>;

async fn reconcile(meta: Arc<AppMeta>, ctx: Arc<Context>) -> Result<Action, Error> {
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
                selection: app.spec.pools.clone(),
                node_label: app.spec.placement.node_label.clone(),
            };
            ctx.selections
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(ObjectRef::from_obj(meta.as_ref()), interest);
            reconcile_app(Arc::new(app), &ctx).await
        }
        Ok(None) => {
            ctx.metrics.forget(&namespace, &name);
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

async fn reconcile_app(app: Arc<NodePoolApplication>, ctx: &Context) -> Result<Action, Error> {
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
        Some(Ok((r, chart))) => (Some(r), Some(chart.as_ref()), None),
        Some(Err(hold)) => (None, None, Some(hold.clone())),
        None => (None, None, None),
    };
    let node_counts =
        nodes::count(ctx.nodes.state().iter().map(|n| n.as_ref()), &app.spec.placement.node_label);
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
    };
    let planned = plan::plan(&input);
    // What was observed, back from the plan's input: at thousands of pools
    // a copy of every release held would be most of the reconcile's memory.
    // The pools are not read again: they go before the writes.
    let PlanInput { owned, .. } = input;
    drop(observed.pools);
    let mut new_status = planned.status;

    let releases: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &helmrelease_resource());
    let mut happened = Vec::new();
    let mut first_error = None;
    // Releases are independent objects: writing them in parallel keeps a
    // fan-out to hundreds of pools close to the API server's own pace.
    let owned_names: HashSet<&str> = owned.iter().map(|o| o.name.as_str()).collect();
    // Each write's future is made only when a slot frees (an unstarted
    // future already takes its whole size), and each desired release is
    // dropped once written: at ten thousand pools, holding either for the
    // whole fan-out was tens of megabytes.
    let releases = &releases;
    let results: Vec<_> = futures::stream::iter(planned.apply)
        .map(|desired| {
            let exists = owned_names.contains(desired.name.as_str());
            let owned_by_update = exists
                && ctx
                    .caches
                    .releases
                    .get(&ObjectRef::new(&desired.name).within(&namespace))
                    .is_some_and(|cached| cached.owned_by_update);
            async move {
                let object = desired.object.value();
                let result =
                    apply::write_release(releases, &desired.name, object, exists, owned_by_update).await;
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
    for (release, pool, drift, exists, result) in results {
        match result {
            Ok(()) => happened.push(match &drift {
                Some(field) => Transition::drift_corrected(&pool, &release, field),
                None => Transition::applied(&pool, &release, exists),
            }),
            Err(e) => {
                // One pool's failure does not stop the others.
                warn!(app = %name, pool = %pool, error = %e, "apply failed");
                mark_failed(&mut new_status, &pool, e.category(), &e.to_string());
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
        match done {
            Ok(()) if orphan => happened.push(Transition::orphaned(pool, &release.name)),
            Ok(()) => happened.push(Transition::pruned(pool, &release.name)),
            Err(e) => {
                warn!(app = %name, release = %release.name, error = %e, "prune failed");
                first_error.get_or_insert(e);
            }
        }
    }

    let old_status = app.status.clone().unwrap_or_default();
    happened.extend(transitions::between(&old_status, &new_status));
    ctx.metrics.set_pools(
        &namespace,
        &name,
        i64::from(new_status.selected_pools),
        i64::from(new_status.ready_pools),
    );
    if !transitions::same_ignoring_timestamps(&old_status, &new_status) {
        apply::apply_status(&apps, &name, &new_status).await?;
    }
    publish(ctx, &app, &transitions::condense(happened)).await;

    if first_error.is_none() {
        if let Some(current) = chart_ref {
            // Charts still in use: the current one, and those of releases
            // left as they were (pools whose config fails).
            let kept: Vec<&ChartRef> = owned
                .iter()
                .filter(|o| !written.contains(o.name.as_str()) && !pruned.contains(o.name.as_str()))
                .filter_map(|o| o.chart_ref.as_ref())
                .chain([current])
                .collect();
            if let Err(e) = apply::prune_charts(&ctx.client, &ctx.charts, app.as_ref(), &kept).await {
                first_error = Some(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e.into());
    }
    if let Some(hold) = hold.filter(|h| h.transient) {
        // Waiting for source-controller: look again soon rather than at resync.
        tracing::debug!(app = %name, reason = %hold.reason, "waiting for the chart");
        return Ok(Action::requeue(Duration::from_secs(3)));
    }
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
async fn finalize(
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
async fn unreadable(meta: &AppMeta, error: &serde_json::Error, ctx: &Context) -> Result<Action, Error> {
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

/// Resolves the chart version, makes sure the shared HelmChart of that
/// version exists, and reads its artifact; or says why writes must wait.
async fn shared_chart(ctx: &Context, app: &NodePoolApplication) -> Result<(ChartRef, Arc<Chart>), Hold> {
    let name = app.name_any();
    let namespace = app.namespace().unwrap_or_default();
    let hold = |e: SourceError| Hold {
        reason: e.reason().to_string(),
        message: e.to_string(),
        transient: !e.needs_user(),
    };
    let spec = &app.spec;
    let version = if shared_chart::needs_resolution(spec) {
        ctx.sources.resolve_version(&spec.chart.spec, &namespace).await.map_err(hold)?
    } else {
        spec.chart.spec.version.clone().unwrap_or_else(|| "*".into())
    };
    let chart_ref = shared_chart::chart_ref(spec, &name, &namespace, &version);
    let shard = app.labels().get(naming::LABEL_SHARD).map(String::as_str);
    let desired = shared_chart::with_shard(
        shared_chart::helmchart(spec, &name, &namespace, &version, &chart_ref),
        shard,
    );
    let helmchart = apply::ensure_chart(&ctx.client, &chart_ref, &desired).await.map_err(|e| Hold {
        reason: e.category().to_string(),
        message: e.to_string(),
        transient: true,
    })?;
    let chart = ctx.sources.chart(&helmchart).await.map_err(hold)?;
    Ok((chart_ref, chart))
}

async fn publish(ctx: &Context, app: &NodePoolApplication, happened: &[Transition]) {
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
fn mark_failed(status: &mut NodePoolApplicationStatus, pool: &str, reason: &str, message: &str) {
    if let Some(p) = status.pools.iter_mut().find(|p| p.pool == pool) {
        p.ready = ConditionStatus::False;
        p.reason = reason.to_string();
        p.message = message.to_string();
    }
}

/// Exponential backoff with jitter, from 1 s up to 5 min, per application.
fn error_policy(app: Arc<AppMeta>, error: &Error, ctx: Arc<Context>) -> Action {
    let base = ctx.backoff.failed(ObjectRef::from_obj(app.as_ref()));
    let jitter = Duration::from_millis(fastrand::u64(0..1000));
    warn!(app = %app.name_any(), category = error.category(), error = %error, retry_in = ?base + jitter, "reconcile failed");
    Action::requeue(base + jitter)
}

#[cfg(test)]
mod tests {
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
