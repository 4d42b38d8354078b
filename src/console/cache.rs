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
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use super::view::{AppView, EventView, PoolDetail};
use super::{Source, SourceError};
use crate::api::{naming, NodePoolApplication, PoolKind};
use crate::pools::{kind, nodes, Pool};
use crate::reconcile::fleet::observed;
use crate::reconcile::observe::{
    helmrelease_resource, map_event, CachedPool, CachedRelease, Caches, PoolApi, PoolCache, ReleaseIndex,
    WatchedRelease,
};
use crate::reconcile::plan::Memo;
use k8s_openapi::api::apps::v1::ControllerRevision;

mod changes;
use changes::{app_key, of_application, of_node, of_owned, Concern, Member, Versions, MOST_NAMED};

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
        let (apps, releases): (Api<NodePoolApplication>, Api<WatchedRelease>) = match namespace.as_deref() {
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
                let events = watcher(api, watcher::Config::default())
                    .map_ok(move |event| map_event(event, |o| CachedPool::from_object(objects, o)));
                let of_pool = move |o: &CachedPool| Concern::Pool(kind, o.pool.clone());
                let api = PoolApi::new(resource);
                let store = watching.cache("pool objects", events, api.clone(), of_pool);
                // No index: the console reads a page of applications at a time.
                pool_objects.insert(
                    kind,
                    PoolCache {
                        api,
                        store,
                        index: None,
                    },
                );
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
            releases: watching.cache(
                "HelmReleases",
                watcher(releases, managed.clone())
                    .map_ok(|event| map_event(event, |release| CachedRelease::from_object(release.0))),
                (),
                of_owned,
            ),
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
        // The memos of applications gone go with them.
        if let Ok(mut memos) = self.memos.lock() {
            let there: BTreeSet<String> = apps
                .iter()
                .map(|a| app_key(&a.namespace().unwrap_or_default(), &a.name_any()))
                .collect();
            memos.retain(|key, _| there.contains(key));
        }
        apps.iter().map(|app| self.view(&caches, app, now)).collect()
    }

    /// The caches as the controller's observe reads them.
    fn caches(&self) -> Caches {
        Caches {
            pools: self.pool_objects.clone(),
            unserved: BTreeMap::new(),
            nodes: self.nodes.clone(),
            releases: self.releases.clone(),
            // Indexed once for every application these caches serve (a
            // page of them), not once per application observed.
            release_index: Some(Arc::new(ReleaseIndex::of(self.releases.state()))),
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
            .map(|o| (o.pool.name.clone(), o.pool.label_map()))
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
                    None => picks(name, &crate::pools::Labels::new()),
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
            .filter(|o| o.pool.namespace.is_none() || o.pool.namespace == namespace)
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
        K: reflector::Lookup + Clone + std::fmt::Debug + Send + Sync + 'static,
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
    let resource = crate::runtime::pool_resource(client, kind::objects(kind)?, None).await.ok()?;
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
mod tests;
