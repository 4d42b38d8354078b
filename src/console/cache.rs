//! The fleet as the cluster holds it, kept in watch caches: the
//! applications, their HelmReleases, the Nodes and the pool objects (for
//! their labels, and a site cluster's health). A page is built from the
//! caches, never from a list per page load, and every change the caches
//! see is counted on [`Source::changes`], which the live pages follow.
//!
//! Each application's pools are its fleet report as `nodepool-fanout get`
//! builds it from the same objects ([`get::rows_counted`]), with the
//! rollout's own `offlineAfter`, so that the console, the CLI and the
//! status never disagree.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;
use tokio::sync::watch;

use super::view::{AppView, EventView, PoolDetail};
use super::{Source, SourceError};
use crate::api::{naming, NodePoolApplication, PoolKind};
use crate::cli::get;
use crate::pools::{kind, nodes, Pool};
use crate::reconcile::observe::{self, helmrelease_resource};

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
    releases: Store<DynamicObject>,
    nodes: Store<Node>,
    pool_objects: BTreeMap<PoolKind, Store<DynamicObject>>,
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

/// A release concerns the application its label names (the watch takes
/// only labelled ones).
fn of_release(release: &DynamicObject) -> Concern {
    match release.labels().get(naming::LABEL_APPLICATION) {
        Some(app) => Concern::App(app_key(&release.namespace().unwrap_or_default(), app)),
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
        let (apps, releases): (Api<NodePoolApplication>, Api<DynamicObject>) = match namespace.as_deref() {
            Some(ns) => (
                Api::namespaced(client.clone(), ns),
                Api::namespaced_with(client.clone(), ns, &helmrelease_resource()),
            ),
            None => (Api::all(client.clone()), Api::all_with(client.clone(), &helmrelease_resource())),
        };
        let managed = watcher::Config::default().labels(naming::LABEL_APPLICATION);
        let mut pool_objects = BTreeMap::new();
        for kind in POOL_KINDS {
            if let Some(resource) = readable_pool_kind(&client, kind).await {
                let api = Api::all_with(client.clone(), &resource);
                let Some(objects) = kind::objects(kind) else {
                    continue;
                };
                let of_pool = move |o: &DynamicObject| Concern::Pool(kind, Pool::from_object(objects, o));
                let store =
                    watching.cache("pool objects", api, watcher::Config::default(), resource, of_pool);
                pool_objects.insert(kind, store);
            }
        }
        let events: Api<CoreEvent> = match namespace.as_deref() {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        Arc::new(Self {
            events: release_events(events),
            apps: watching.cache(
                "NodePoolApplications",
                apps,
                watcher::Config::default(),
                (),
                of_application,
            ),
            releases: watching.cache("HelmReleases", releases, managed, helmrelease_resource(), of_release),
            nodes: watching.cache("Nodes", Api::all(client), watcher::Config::default(), (), of_node),
            pool_objects,
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
            for store in self.pool_objects.values() {
                let _ = store.wait_until_ready().await;
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
        let nodes = self.nodes.state();
        let mut releases: HashMap<String, Vec<Value>> = HashMap::new();
        for release in self.releases.state() {
            if let (Some(owner), Ok(value)) = (owner_uid(&release), serde_json::to_value(&*release)) {
                releases.entry(owner.to_string()).or_default().push(value);
            }
        }
        let mut apps = self.apps.state();
        apps.sort_by_key(|a| (a.namespace(), a.name_any()));
        apps.iter()
            .map(|app| {
                let owned = app.uid().and_then(|uid| releases.remove(&uid)).unwrap_or_default();
                self.view_with(app, &owned, &nodes, now)
            })
            .collect()
    }

    /// The HelmReleases `app` owns, as JSON.
    fn owned_releases(&self, app: &NodePoolApplication) -> Vec<Value> {
        let uid = app.uid();
        self.releases
            .state()
            .iter()
            .filter(|r| observe::owned_by(r.as_ref(), uid.as_deref()))
            .filter_map(|r| serde_json::to_value(&**r).ok())
            .collect()
    }

    fn view(&self, app: &NodePoolApplication, owned: &[Value], now: Timestamp) -> AppView {
        self.view_with(app, owned, &self.nodes.state(), now)
    }

    /// One application's view, from its releases and the Nodes.
    fn view_with(
        &self,
        app: &NodePoolApplication,
        owned: &[Value],
        nodes: &[Arc<Node>],
        now: Timestamp,
    ) -> AppView {
        let objects = self.pool_objects_of(app);
        let counts = match app.spec.pools.kind {
            PoolKind::ClusterProfile => nodes::count_sites(&sites(&objects)),
            _ => get::node_counts(app, nodes.iter().map(|n| n.as_ref())),
        };
        let rows = get::rows_counted(app, owned, &counts, now);
        let labels = objects.iter().map(|o| (o.name_any(), o.labels().clone())).collect();
        AppView::of(app, rows, &labels)
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
                    Some(objects) => {
                        let pools = by_name.get_or_insert_with(|| {
                            (self.pool_objects_of(app).iter())
                                .map(|o| Pool::from_object(objects, o))
                                .map(|p| (p.name.clone(), p))
                                .collect()
                        });
                        pools.get(name).is_some_and(|p| picks(&p.name, &p.labels))
                    }
                })
            }),
        })
    }

    fn pool_objects_of(&self, app: &NodePoolApplication) -> Vec<Arc<DynamicObject>> {
        let Some(store) = self.pool_objects.get(&app.spec.pools.kind) else {
            return Vec::new();
        };
        let namespace = app.namespace();
        store
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
                Some(objects) => {
                    (self.pool_objects_of(app).iter()).map(|o| Pool::from_object(objects, o)).collect()
                }
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
            Ok(self
                .apps
                .get(&key)
                .map(|app| self.view(&app, &self.owned_releases(&app), Timestamp::now())))
        })
    }

    fn pool_detail<'a>(
        &'a self,
        namespace: &'a str,
        release: &'a str,
    ) -> BoxFuture<'a, Result<PoolDetail, SourceError>> {
        Box::pin(async move {
            let key = ObjectRef::new_with(release, helmrelease_resource()).within(namespace);
            let mut detail = self
                .releases
                .get(&key)
                .and_then(|r| serde_json::to_value(&*r).ok())
                .map(|r| PoolDetail::of_release(&r))
                .unwrap_or_default();
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
        api: Api<K>,
        config: watcher::Config,
        dyntype: K::DynamicType,
        concern: impl Fn(&K) -> Concern + Send + 'static,
    ) -> Store<K>
    where
        K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Clone + Eq + std::hash::Hash + Send + Sync,
    {
        let writer = reflector::store::Writer::new(dyntype);
        let store = writer.as_reader();
        let changes = self.changes.clone();
        let versions = self.versions.clone();
        let errors = self.errors.clone();
        let events = reflector::reflector(writer, watcher(api, config));
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

/// The uid of the application that is the release's controller owner, by
/// the rule the controller owns releases by ([`observe::owned_by`]).
fn owner_uid(release: &DynamicObject) -> Option<&str> {
    release
        .owner_references()
        .iter()
        .find(|r| observe::owned_by(release, Some(&r.uid)))
        .map(|r| r.uid.as_str())
}

/// The site clusters among `objects` (ClusterProfiles).
fn sites(objects: &[Arc<DynamicObject>]) -> Vec<Pool> {
    objects.iter().map(|p| Pool::from_object(&kind::CLUSTER_PROFILE, p)).collect()
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
        let mut pool_writer = reflector::store::Writer::<DynamicObject>::new(objects_resource());
        for (name, tag) in pools {
            let pool: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
                "metadata": { "name": name, "labels": { "team": tag } }
            }))
            .unwrap();
            pool_writer.apply_watcher_event(&watcher::Event::Apply(pool));
        }
        CacheSource {
            apps: apps_store,
            events: reflector::store::<CoreEvent>().0,
            releases: reflector::store::Writer::<DynamicObject>::new(helmrelease_resource()).as_reader(),
            nodes: reflector::store::<Node>().0,
            pool_objects: BTreeMap::from([(PoolKind::OpenYurt, pool_writer.as_reader())]),
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
    fn a_release_concerns_the_application_its_label_names() {
        let release: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": { "name": "gw-hz", "namespace": "edge", "labels": { naming::LABEL_APPLICATION: "gw" } }
        }))
        .unwrap();
        assert_eq!(of_release(&release), Concern::App("edge/gw".into()));
    }
}
