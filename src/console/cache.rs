//! The fleet as the cluster holds it, kept in watch caches: the
//! applications, their HelmReleases, the Nodes and the pool objects (for
//! their labels, and a site cluster's health). A page is built from the
//! caches, never from a list per page load, and every change the caches
//! see is counted on [`Source::changes`], which the live pages follow.
//!
//! Each application's pools are its fleet report, made by the controller's
//! own observe and plan over caches of the kind the controller keeps
//! ([`observed::observe`]), as `nodepool-fanout get` makes it from lists,
//! so that the console, the CLI and the status never disagree.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::watch;

use super::view::{AppView, EventView, PoolDetail};
use super::{Source, SourceError};
use crate::api::{naming, NodePoolApplication, PoolKind};
use crate::pools::{kind, nodes, Pool};
use crate::reconcile::fleet::observed;
use crate::reconcile::observe::{self, helmrelease_resource, CachedPool, CachedRelease, Caches, PoolCache};
use crate::reconcile::plan::Memo;
use k8s_openapi::api::apps::v1::ControllerRevision;

/// The most Events a pool's page shows.
const MAX_EVENTS: usize = 20;

/// How long a page waits for the caches' first list before it says so.
const FIRST_LIST: Duration = Duration::from_secs(20);

/// The pool kinds whose objects are watched when the cluster serves them.
const POOL_KINDS: [PoolKind; 4] = [
    PoolKind::OpenYurt,
    PoolKind::KubeEdge,
    PoolKind::SuperEdge,
    PoolKind::ClusterProfile,
];

/// Watch caches of one cluster, for the applications of one namespace or
/// of all.
pub struct CacheSource {
    apps: Store<NodePoolApplication>,
    /// The Events of HelmReleases, for a pool's page: one watch, not a
    /// list per page load (each open pool page listed them every few
    /// seconds). They move no page: a release's Events come with changes
    /// to the release, which do.
    events: Store<CoreEvent>,
    /// The HelmReleases of applications, as the controller's cache holds
    /// them: the fleet report is made from the same objects.
    releases: Store<CachedRelease>,
    nodes: Store<Node>,
    /// The pool objects of each kind the cluster serves and the console
    /// may read.
    pool_objects: BTreeMap<PoolKind, PoolCache>,
    /// The applications' revision records, for the rollout's verdicts.
    history: Store<ControllerRevision>,
    /// A pool's page reads its release whole (its Helm history), once per
    /// page, rather than the cache keeping every release whole.
    client: Option<Client>,
    /// What each application's last report found, so that the next builds
    /// only the pools that changed (see [`Memo`]): by `namespace/name`,
    /// with the uid it was found for.
    memos: Mutex<HashMap<String, (String, Arc<Memo>)>>,
    changes: watch::Sender<u64>,
    /// What each change concerned, for the live pages.
    versions: Arc<Mutex<Versions>>,
    /// Each watch's last error, cleared when it lists again.
    errors: Arc<Mutex<BTreeMap<&'static str, String>>>,
}

/// The most applications an event names; past it, it says everything.
const MOST_NAMED: usize = 64;

/// The most Node and pool changes kept to say which applications they
/// concern; a stream further behind is told everything changed.
const MOST_KEPT: usize = 1024;

/// The change count at each application's last change, the recent Node
/// and pool object changes (each with its labels before and after, since a
/// node relabelled leaves one pool for another), and the count at the last
/// change that may concern any (a relist).
#[derive(Debug, Default)]
struct Versions {
    apps: HashMap<String, u64>,
    /// (count, a pool kind or none for a Node, the labels it had or has,
    /// and for a pool, the pool).
    members: std::collections::VecDeque<(u64, Member)>,
    labels: HashMap<(Option<PoolKind>, String), BTreeMap<String, String>>,
    /// The count before the oldest member kept.
    forgotten: u64,
    everything: u64,
}

/// A Node or a pool object that changed, as it was and as it is.
#[derive(Debug, Clone, PartialEq)]
enum Member {
    Node(Vec<BTreeMap<String, String>>),
    Pool(PoolKind, Vec<Pool>),
}

/// What changed since a count: applications by name, and the Nodes and
/// pools whose applications are yet to be found.
#[derive(Debug, Default, PartialEq)]
struct Changed {
    apps: BTreeSet<String>,
    members: Vec<Member>,
}

impl Versions {
    fn record(&mut self, concern: Concern, at: u64) {
        let member = match concern {
            Concern::App(key) => {
                self.apps.insert(key, at);
                return;
            }
            Concern::Everything => {
                self.everything = at;
                return;
            }
            Concern::Node(name, labels) => {
                let was = self.labels.insert((None, name), labels.clone());
                Member::Node(was.into_iter().chain([labels]).collect())
            }
            Concern::Pool(kind, pool) => {
                let was = self.labels.insert((Some(kind), pool.name.clone()), pool.labels.clone());
                let before = was.map(|labels| Pool {
                    labels,
                    ..pool.clone()
                });
                Member::Pool(kind, before.into_iter().chain([pool]).collect())
            }
        };
        self.members.push_back((at, member));
        while self.members.len() > MOST_KEPT {
            if let Some((at, _)) = self.members.pop_front() {
                self.forgotten = at;
            }
        }
    }

    /// What changed after the count `since`; `None` for everything.
    fn since(&self, since: u64) -> Option<Changed> {
        if self.everything > since || self.forgotten > since {
            return None;
        }
        let apps = self.apps.iter().filter(|(_, at)| **at > since).map(|(key, _)| key.clone()).collect();
        let members = self.members.iter().filter(|(at, _)| *at > since).map(|(_, m)| m.clone()).collect();
        Some(Changed { apps, members })
    }
}

/// What one watch event may change on the console's pages.
#[derive(Debug, Clone, PartialEq)]
enum Concern {
    /// The pages of one application (`namespace/name`), and the landing page.
    App(String),
    /// A Node, with its labels: the pages of the applications whose pools
    /// it belongs to.
    Node(String, BTreeMap<String, String>),
    /// A pool object: the pages of the applications of its kind that
    /// select it.
    Pool(PoolKind, Pool),
    Everything,
}

/// An application's key on the live pages.
fn app_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn of_application(app: &NodePoolApplication) -> Concern {
    Concern::App(app_key(&app.namespace().unwrap_or_default(), &app.name_any()))
}

/// A release, or a revision record, concerns the application that is its
/// controller owner.
fn of_owned(object: &impl Resource) -> Concern {
    match observe::owner_of::<NodePoolApplication>(object) {
        Some(app) => Concern::App(app_key(app.namespace.as_deref().unwrap_or_default(), &app.name)),
        None => Concern::Everything,
    }
}

fn of_node(node: &Node) -> Concern {
    Concern::Node(node.name_any(), node.labels().clone())
}

impl CacheSource {
    /// Starts the watches with `client`'s identity; they run as long as
    /// the process does.
    pub async fn start(client: Client, namespace: Option<String>) -> Arc<Self> {
        let (changes, _) = watch::channel(0);
        let errors = Arc::new(Mutex::new(BTreeMap::new()));
        let versions = Arc::new(Mutex::new(Versions::default()));
        let watching = Watching {
            changes: changes.clone(),
            versions: versions.clone(),
            errors: errors.clone(),
        };
        let (apps, releases): (Api<NodePoolApplication>, Api<CachedRelease>) = match namespace.as_deref() {
            Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), ns)),
            None => (Api::all(client.clone()), Api::all(client.clone())),
        };
        let managed = watcher::Config::default().labels(naming::LABEL_APPLICATION);
        let mut pool_objects = BTreeMap::new();
        for kind in POOL_KINDS {
            if let Some(resource) = readable_pool_kind(&client, kind).await {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                let Some(objects) = kind::objects(kind) else {
                    continue;
                };
                // Cut down as the controller's cache cuts them down.
                let events = watcher(api, watcher::Config::default()).map_ok(move |event| match event {
                    watcher::Event::Apply(o) => watcher::Event::Apply(CachedPool::from_object(objects, o)),
                    watcher::Event::Delete(o) => watcher::Event::Delete(CachedPool::from_object(objects, o)),
                    watcher::Event::InitApply(o) => {
                        watcher::Event::InitApply(CachedPool::from_object(objects, o))
                    }
                    watcher::Event::Init => watcher::Event::Init,
                    watcher::Event::InitDone => watcher::Event::InitDone,
                });
                let of_pool = move |o: &CachedPool| Concern::Pool(kind, o.pool.clone());
                let store = watching.cache("pool objects", events, resource.clone(), of_pool);
                pool_objects.insert(kind, PoolCache { api: resource, store });
            }
        }
        let history: Api<ControllerRevision> = match namespace.as_deref() {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let events: Api<CoreEvent> = match namespace.as_deref() {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        Arc::new(Self {
            events: release_events(events),
            apps: watching.cache(
                "NodePoolApplications",
                watcher(apps, watcher::Config::default()),
                (),
                of_application,
            ),
            releases: watching.cache("HelmReleases", watcher(releases, managed.clone()), (), of_owned),
            history: watching.cache("ControllerRevisions", watcher(history, managed), (), of_owned),
            nodes: watching.cache(
                "Nodes",
                watcher(Api::all(client.clone()), watcher::Config::default()),
                (),
                of_node,
            ),
            pool_objects,
            client: Some(client),
            memos: Mutex::default(),
            changes,
            versions,
            errors,
        })
    }

    async fn listed(&self) -> Result<(), SourceError> {
        let all = async {
            let _ = self.apps.wait_until_ready().await;
            let _ = self.releases.wait_until_ready().await;
            let _ = self.nodes.wait_until_ready().await;
            // Not the revision records: a person who may not read them
            // still sees the fleet, without what only the history says.
            for pools in self.pool_objects.values() {
                let _ = pools.store.wait_until_ready().await;
            }
        };
        if tokio::time::timeout(FIRST_LIST, all).await.is_ok() {
            return Ok(());
        }
        let errors = self.errors.lock().map(|e| e.clone()).unwrap_or_default();
        match errors.get("NodePoolApplications") {
            Some(e) if e.contains("404") => Err(SourceError::NoApplications),
            _ => Err(SourceError::NotListed(
                errors.iter().map(|(what, e)| format!("{what}: {e}")).collect::<Vec<_>>().join("; "),
            )),
        }
    }

    /// Every application as its caches hold it, at `now`.
    fn views(&self, now: Timestamp) -> Vec<AppView> {
        let caches = self.caches();
        let mut apps = self.apps.state();
        apps.sort_by_key(|a| (a.namespace(), a.name_any()));
        apps.iter().map(|app| self.view(&caches, app, now)).collect()
    }

    /// The caches as the controller's observe reads them.
    fn caches(&self) -> Caches {
        Caches {
            pools: self.pool_objects.clone(),
            unserved: BTreeMap::new(),
            nodes: self.nodes.clone(),
            releases: self.releases.clone(),
            history: self.history.clone(),
        }
    }

    /// One application's view: its fleet report, as the controller's
    /// observe and plan make it from the same caches, and each pool's labels.
    fn view(&self, caches: &Caches, app: &NodePoolApplication, now: Timestamp) -> AppView {
        let key = app_key(&app.namespace().unwrap_or_default(), &app.name_any());
        let uid = app.uid().unwrap_or_default();
        let memo = (self.memos.lock().ok())
            .and_then(|memos| memos.get(&key).filter(|(of, _)| *of == uid).map(|(_, m)| Arc::clone(m)));
        let observation = observed::observe_with(
            caches,
            app,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
            memo.as_deref(),
        );
        if let Ok(mut memos) = self.memos.lock() {
            memos.insert(key, (uid, Arc::new(observation.memo.clone())));
        }
        let labels = (self.pool_objects_of(app).iter())
            .map(|o| (o.pool.name.clone(), o.pool.labels.clone()))
            .collect();
        AppView::of(app, &observation.report.status(), observation.rows(app), &labels)
    }

    /// The release's latest Events, newest first, as the Events cache
    /// holds them (none while it has not listed, or may not).
    fn events_of(&self, namespace: &str, release: &str) -> Vec<EventView> {
        let mut shown: Vec<EventView> = (self.events.state().iter())
            .filter(|e| {
                e.metadata.namespace.as_deref() == Some(namespace)
                    && e.involved_object.name.as_deref() == Some(release)
            })
            .map(|e| EventView {
                type_: e.type_.clone().unwrap_or_default(),
                reason: e.reason.clone().unwrap_or_default(),
                message: e.message.clone().unwrap_or_default(),
                last: (e.last_timestamp.as_ref().map(|t| t.0.to_string()))
                    .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
                    .unwrap_or_default(),
                count: e.count.unwrap_or(1),
            })
            .collect();
        shown.sort_by(|a, b| b.last.cmp(&a.last));
        shown.truncate(MAX_EVENTS);
        shown
    }

    /// The application's pool objects: those of its kind, in its
    /// namespace when the kind is namespaced.
    /// Whether any of `members` (Nodes and pools, as they were and are)
    /// is, or is of, a pool `app` selects.
    fn concerns(&self, app: &NodePoolApplication, members: &[Member]) -> bool {
        let selection = app.spec.pools.selection();
        let Ok(picks) = crate::pools::picker(&selection) else {
            return true;
        };
        let membership = nodes::Membership::of(&app.spec.pools, app.spec.placement.node_label.as_deref());
        let kind = app.spec.pools.kind;
        // The app's pools by name, looked up once, and only for a Node.
        let mut by_name: Option<HashMap<String, Pool>> = None;
        members.iter().any(|member| match member {
            Member::Pool(of, pools) => *of == kind && pools.iter().any(|p| picks(&p.name, &p.labels)),
            Member::Node(labels) => labels.iter().any(|labels| {
                membership.pools(labels).any(|name| match kind::objects(kind) {
                    // A pool that is a node label's value has no labels of its own.
                    None => picks(name, &BTreeMap::new()),
                    Some(_) => {
                        let pools = by_name.get_or_insert_with(|| {
                            (self.pool_objects_of(app).iter())
                                .map(|o| (o.pool.name.clone(), o.pool.clone()))
                                .collect()
                        });
                        pools.get(name).is_some_and(|p| picks(&p.name, &p.labels))
                    }
                })
            }),
        })
    }

    fn pool_objects_of(&self, app: &NodePoolApplication) -> Vec<Arc<CachedPool>> {
        let Some(pools) = self.pool_objects.get(&app.spec.pools.kind) else {
            return Vec::new();
        };
        let namespace = app.namespace();
        pools
            .store
            .state()
            .into_iter()
            .filter(|o| o.metadata.namespace.is_none() || o.metadata.namespace == namespace)
            .collect()
    }
}

impl Source for CacheSource {
    fn applications(&self) -> BoxFuture<'_, Result<Vec<AppView>, SourceError>> {
        Box::pin(async move {
            self.listed().await?;
            Ok(self.views(Timestamp::now()))
        })
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn object<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<NodePoolApplication>, SourceError>> {
        Box::pin(async move {
            self.listed().await?;
            let key = ObjectRef::new(name).within(namespace);
            Ok(self.apps.get(&key).map(|app| (*app).clone()))
        })
    }

    fn pools_of<'a>(&'a self, app: &'a NodePoolApplication) -> BoxFuture<'a, Result<Vec<Pool>, SourceError>> {
        Box::pin(async move {
            self.listed().await?;
            Ok(match kind::objects(app.spec.pools.kind) {
                Some(_) => (self.pool_objects_of(app).iter()).map(|o| o.pool.clone()).collect(),
                None => {
                    let nodes = self.nodes.state();
                    let key = app.spec.pools.node_label.as_deref().unwrap_or_default();
                    crate::pools::node_label::pools(nodes.iter().map(|n| n.as_ref()), key)
                }
            })
        })
    }

    fn changed_since(&self, since: u64) -> Option<Vec<String>> {
        let changed = self.versions.lock().ok()?.since(since)?;
        let mut named = changed.apps;
        if !changed.members.is_empty() {
            for app in self.apps.state() {
                let key = app_key(&app.namespace().unwrap_or_default(), &app.name_any());
                if !named.contains(&key) && self.concerns(&app, &changed.members) {
                    named.insert(key);
                }
            }
        }
        (named.len() <= MOST_NAMED).then(|| named.into_iter().collect())
    }

    fn application<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<AppView>, SourceError>> {
        Box::pin(async move {
            self.listed().await?;
            let key = ObjectRef::new(name).within(namespace);
            Ok(self.apps.get(&key).map(|app| self.view(&self.caches(), &app, Timestamp::now())))
        })
    }

    fn pool_detail<'a>(
        &'a self,
        namespace: &'a str,
        release: &'a str,
    ) -> BoxFuture<'a, Result<PoolDetail, SourceError>> {
        Box::pin(async move {
            let mut detail = match &self.client {
                Some(client) => {
                    let releases: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), namespace, &helmrelease_resource());
                    let read = releases.get_opt(release).await.ok().flatten();
                    (read.and_then(|r| serde_json::to_value(r).ok()).as_ref())
                        .map(PoolDetail::of_release)
                        .unwrap_or_default()
                }
                None => PoolDetail::default(),
            };
            detail.events = self.events_of(namespace, release);
            Ok(detail)
        })
    }
}

/// What each cache reports to: the change count, what each change
/// concerned, and its errors.
struct Watching {
    changes: watch::Sender<u64>,
    versions: Arc<Mutex<Versions>>,
    errors: Arc<Mutex<BTreeMap<&'static str, String>>>,
}

impl Watching {
    /// A cache of `api`, kept by a task of its own that counts each change
    /// and records what it concerned.
    fn cache<K>(
        &self,
        what: &'static str,
        events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
        dyntype: K::DynamicType,
        concern: impl Fn(&K) -> Concern + Send + 'static,
    ) -> Store<K>
    where
        K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
    {
        let writer = reflector::store::Writer::new(dyntype);
        let store = writer.as_reader();
        let changes = self.changes.clone();
        let versions = self.versions.clone();
        let errors = self.errors.clone();
        // A watch refused (a person whose RBAC does not reach it) retries
        // at kube's default backoff, not in a tight loop.
        let events = reflector::reflector(writer, events.default_backoff());
        tokio::spawn(events.for_each(move |event| {
            match event {
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                Ok(event) => {
                    if let Ok(mut errors) = errors.lock() {
                        errors.remove(what);
                    }
                    let concerned = match &event {
                        watcher::Event::Apply(object) | watcher::Event::Delete(object) => concern(object),
                        _ => Concern::Everything,
                    };
                    // Counted and recorded under the count's own lock, so
                    // a stream that reads the count reads its record too.
                    changes.send_modify(|n| {
                        *n += 1;
                        if let Ok(mut versions) = versions.lock() {
                            versions.record(concerned, *n);
                        }
                    });
                }
                Err(e) => {
                    tracing::debug!(error = %e, what, "the console's watch failed; it retries");
                    if let Ok(mut errors) = errors.lock() {
                        errors.insert(what, e.to_string());
                    }
                }
            }
            futures::future::ready(())
        }));
        store
    }
}

/// A cache of the Events of HelmReleases, kept lean: what a pool's page
/// shows, without managed fields or annotations.
fn release_events(api: Api<CoreEvent>) -> Store<CoreEvent> {
    let writer = reflector::store::Writer::default();
    let store = writer.as_reader();
    let config = watcher::Config::default().fields("involvedObject.kind=HelmRelease");
    let lean = watcher(api, config).default_backoff().modify(|e: &mut CoreEvent| {
        e.metadata.managed_fields = None;
        e.metadata.annotations = None;
    });
    tokio::spawn(reflector::reflector(writer, lean).for_each(|event| {
        if let Err(e) = event {
            tracing::debug!(error = %e, "the console's watch of Events failed; it retries");
        }
        futures::future::ready(())
    }));
    store
}

/// The kind's pool objects' resource, when the cluster serves it and the
/// user may list it; none otherwise, and the grid has no labels to group
/// by.
async fn readable_pool_kind(client: &Client, kind: PoolKind) -> Option<ApiResource> {
    let resource = crate::runtime::pool_resource(client, kind::objects(kind)?).await.ok()?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Some(resource),
        Err(e) => {
            tracing::debug!(error = %e, ?kind, "pool objects not readable: the grid has no labels to group by");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_names_its_application_and_keeps_nodes_and_pools_as_they_were_and_are() {
        let mut versions = Versions::default();
        versions.record(Concern::App(app_key("edge", "gw")), 1);
        versions.record(Concern::App(app_key("edge", "broker")), 2);
        let apps = |changed: Option<Changed>| changed.map(|c| c.apps.into_iter().collect::<Vec<_>>());
        assert_eq!(apps(versions.since(0)), Some(vec!["edge/broker".to_string(), "edge/gw".to_string()]));
        assert_eq!(apps(versions.since(1)), Some(vec!["edge/broker".to_string()]));
        assert_eq!(apps(versions.since(2)), Some(Vec::new()), "nothing since");
        // A node relabelled from one pool to another: both, as it was and is.
        let labels =
            |pool: &str| BTreeMap::from([("apps.openyurt.io/nodepool".to_string(), pool.to_string())]);
        versions.record(Concern::Node("n1".into(), labels("hz")), 3);
        versions.record(Concern::Node("n1".into(), labels("sh")), 4);
        let changed = versions.since(3).unwrap();
        assert_eq!(changed.members, vec![Member::Node(vec![labels("hz"), labels("sh")])]);
        // A stream further behind than what is kept: everything.
        for at in 5..5 + MOST_KEPT as u64 {
            versions.record(Concern::Node("n2".into(), labels("hz")), at);
        }
        assert!(versions.since(3).is_none(), "forgotten: everything");
        assert!(versions.since(5).is_some());
        versions.record(Concern::Everything, 5000);
        assert!(versions.since(4999).is_none(), "a relist: everything");
        assert!(versions.since(5000).is_some());
    }

    /// Caches holding `apps` and the NodePools `pools` (name, labels).
    fn caches(apps: &[(&str, &str)], pools: &[(&str, &str)]) -> CacheSource {
        let (apps_store, mut app_writer) = reflector::store::<NodePoolApplication>();
        for (name, tag) in apps {
            let app: NodePoolApplication = serde_json::from_value(serde_json::json!({
                "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
                "metadata": { "name": name, "namespace": "edge" },
                "spec": { "interval": "10m", "pools": { "selector": { "matchLabels": { "team": tag } } },
                          "chart": { "spec": { "chart": "gw", "sourceRef": { "kind": "HelmRepository", "name": "c" } } } }
            }))
            .unwrap();
            app_writer.apply_watcher_event(&watcher::Event::Apply(app));
        }
        let mut pool_writer = reflector::store::Writer::<CachedPool>::new(objects_resource());
        for (name, tag) in pools {
            let pool: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
                "metadata": { "name": name, "labels": { "team": tag } }
            }))
            .unwrap();
            let pool = CachedPool::from_object(&kind::OPENYURT, pool);
            pool_writer.apply_watcher_event(&watcher::Event::Apply(pool));
        }
        let nodepools = PoolCache {
            api: objects_resource(),
            store: pool_writer.as_reader(),
        };
        CacheSource {
            apps: apps_store,
            events: reflector::store::<CoreEvent>().0,
            releases: reflector::store::<CachedRelease>().0,
            nodes: reflector::store::<Node>().0,
            pool_objects: BTreeMap::from([(PoolKind::OpenYurt, nodepools)]),
            history: reflector::store::<ControllerRevision>().0,
            client: None,
            memos: Mutex::default(),
            changes: watch::channel(0).0,
            versions: Arc::default(),
            errors: Arc::default(),
        }
    }

    fn objects_resource() -> ApiResource {
        ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("apps.openyurt.io", "v1beta1", "NodePool"))
    }

    #[test]
    fn a_node_or_pool_change_names_only_the_applications_that_select_its_pool() {
        let source = caches(&[("gw", "a"), ("broker", "b")], &[("hz", "a"), ("sh", "b"), ("bj", "c")]);
        let node = |pool: &str| {
            let labels = BTreeMap::from([("apps.openyurt.io/nodepool".to_string(), pool.to_string())]);
            Concern::Node(format!("{pool}-0"), labels)
        };
        let pool = |name: &str, tag: &str| {
            Concern::Pool(
                PoolKind::OpenYurt,
                Pool {
                    labels: BTreeMap::from([("team".into(), tag.into())]),
                    ..Pool::named(name)
                },
            )
        };
        let record = |concern: Concern, at: u64| source.versions.lock().unwrap().record(concern, at);
        record(node("hz"), 1);
        assert_eq!(source.changed_since(0), Some(vec!["edge/gw".to_string()]), "hz is gw's");
        record(node("bj"), 2);
        assert_eq!(source.changed_since(1), Some(Vec::new()), "bj is nobody's: no page fetches itself");
        record(pool("bj", "c"), 3);
        record(pool("bj", "b"), 4);
        assert_eq!(source.changed_since(3), Some(vec!["edge/broker".to_string()]), "bj joins broker's");
        record(pool("bj", "c"), 5);
        assert_eq!(
            source.changed_since(4),
            Some(vec!["edge/broker".to_string()]),
            "and leaves it: broker's too"
        );
    }

    #[test]
    fn a_release_concerns_the_application_that_owns_it() {
        let release: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": { "name": "gw-hz", "namespace": "edge", "labels": { naming::LABEL_APPLICATION: "gw" },
                "ownerReferences": [{ "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
                    "name": "gw", "uid": "u1", "controller": true }] }
        }))
        .unwrap();
        assert_eq!(of_owned(&CachedRelease::from_object(release)), Concern::App("edge/gw".into()));
        let foreign: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": { "name": "gw-hz", "namespace": "edge", "labels": { naming::LABEL_APPLICATION: "gw" } }
        }))
        .unwrap();
        assert_eq!(of_owned(&CachedRelease::from_object(foreign)), Concern::Everything);
    }
}
