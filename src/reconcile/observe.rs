//! Observe: reads what `plan` needs from the cluster, and nothing else: the
//! node pools of the application's kind, and the HelmReleases in the
//! application's namespace split into those this application owns and the
//! names of all others.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::api::ApiResource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use crate::api::naming;
use crate::api::{NodePoolApplication, PoolKind, PoolSelection};
use crate::pools::kind::PoolObjects;
use crate::pools::nodes::{self, Membership, NodeCount};
use crate::pools::{self, node_label, Pool};
use crate::reconcile::drift;
use crate::reconcile::managed_fields;
use crate::reconcile::packed::PackedJson;
use crate::reconcile::plan::{HelmReleaseKey, ObservedRelease};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Node;

mod by_name;
mod cached;
mod listed;
mod others;
mod planned;
mod pool_index;
mod release_index;
mod release_meta;
pub mod shallow;
pub use cached::{map_event, CachedPool, CachedRelease, PoolApi, WatchedRelease};
pub use others::{application_owner, owned_by, owner_of, Others, Owners};
pub use planned::Beyond;
pub use pool_index::PoolIndex;
pub use release_index::{ReleaseIndex, ReleaseWriter};
pub use release_meta::ReleaseMeta;
pub use shallow::Shallow;

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error("the watch of {0} stopped before it listed them once; the controller is shutting down")]
    CacheStopped(&'static str),
}

impl ObserveError {
    /// A short category for metrics, logs and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::CacheStopped(_) => "ShuttingDown",
        }
    }
}

/// The HelmRelease API of Flux's helm-controller that every release is written in.
pub fn helmrelease_resource() -> ApiResource {
    ApiResource {
        group: "helm.toolkit.fluxcd.io".into(),
        version: "v2".into(),
        api_version: "helm.toolkit.fluxcd.io/v2".into(),
        kind: "HelmRelease".into(),
        plural: "helmreleases".into(),
    }
}

/// The condition of an application whose kind the cluster does not serve:
/// it asks for the CustomResourceDefinition by name.
pub fn not_served_message(kind: PoolKind) -> String {
    match pools::kind::objects(kind) {
        Some(o) => format!(
            "spec.pools.kind is {kind}, but the cluster serves no {} API ({}): install {}'s {} \
             CustomResourceDefinition; the controller notices it within a minute and restarts to watch it",
            o.kind(),
            o.crd(),
            o.provider(),
            o.kind()
        ),
        None => "spec.pools.kind is NodeLabel but spec.pools.nodeLabel is not set: name the node label whose values are the pools".to_string(),
    }
}

/// What the cluster holds that concerns one application.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The pools it selects, shared with the cache.
    pub pools: Vec<Arc<CachedPool>>,
    /// Why its pools cannot be read: the cluster serves no API of its kind.
    pub unserved: Option<String>,
    /// The releases it owns, shared with the cache.
    pub owned: Vec<Arc<ObservedRelease>>,
    /// HelmReleases in the namespace this application does not own: never
    /// adopted, overwritten or deleted.
    pub others: Others,
    /// Each selected pool's nodes, by pool name: its Ready nodes, or for a
    /// site that is a cluster, its control plane's health as its
    /// ClusterProfile says it. Counted here, once, for the controller,
    /// `get` and the console alike.
    pub nodes: BTreeMap<String, NodeCount>,
    /// How many of its releases the cache holds cut down, as another
    /// shard's ([`CachedRelease::cut_down`]): the application moved to
    /// this instance from another. Planning over them would take its own
    /// releases for someone else's, so it waits for them to be read again.
    pub cut_down: usize,
}

/// The watch caches a reconcile reads instead of listing: the pool objects
/// of every kind the cluster serves, every Node, and every HelmRelease in
/// the namespaces served, each cut down as it enters ([`CachedPool`],
/// [`crate::pools::nodes::strip`], [`CachedRelease`]).
#[derive(Clone)]
pub struct Caches {
    /// By kind; a kind the cluster does not serve has none.
    pub pools: BTreeMap<PoolKind, PoolCache>,
    /// Why each kind of pool object that has no cache has none, as the
    /// conditions of its applications say it.
    pub unserved: BTreeMap<PoolKind, String>,
    pub nodes: Store<Node>,
    pub releases: Store<CachedRelease>,
    /// The releases by application and by Helm release driven: kept by
    /// the cache's writer ([`ReleaseWriter`]), or made once from a cache
    /// filled from a list; `None`, and each observe makes its own (tests).
    pub release_index: Option<Arc<ReleaseIndex>>,
    /// The applications' revision records (see [`crate::reconcile::history`]).
    pub history: Store<ControllerRevision>,
}

impl Caches {
    /// Waits until every watch has listed once, and every index kept
    /// beside a cache holds that list (see [`listed`]): planning over a
    /// cache not yet filled would see no pools and prune every release. From one
    /// task only: kube's `Store::wait_until_ready` wakes only the last of
    /// several tasks waiting at once (one waker in its oneshot channel).
    pub async fn ready(&self) -> Result<(), ObserveError> {
        for (kind, pools) in &self.pools {
            let what = pools::kind::objects(*kind).map_or("pools", |o| o.kind());
            pools.store.wait_until_ready().await.map_err(|_| ObserveError::CacheStopped(what))?;
            // The store is ready before its writer has indexed what it holds.
            if let Some(index) = &pools.index {
                index.listed().await;
            }
        }
        self.nodes
            .wait_until_ready()
            .await
            .map_err(|_| ObserveError::CacheStopped("Nodes"))?;
        self.releases
            .wait_until_ready()
            .await
            .map_err(|_| ObserveError::CacheStopped("HelmReleases"))?;
        if let Some(index) = &self.release_index {
            index.listed().await;
        }
        self.history
            .wait_until_ready()
            .await
            .map_err(|_| ObserveError::CacheStopped("ControllerRevisions"))
    }

    /// The revision records of `app`: those in its namespace it is the
    /// controller owner of.
    pub fn history_of(&self, app: &NodePoolApplication) -> crate::reconcile::history::History {
        let (namespace, uid) = (app.namespace().unwrap_or_default(), app.uid().unwrap_or_default());
        let in_namespace = self
            .history
            .state_filter(|r| r.metadata.namespace.as_deref() == Some(namespace.as_str()));
        crate::reconcile::history::History::of(in_namespace, &uid, &namespace)
    }

    /// The pools of `kind` that `picks` chooses, shared with the cache
    /// (of a namespaced kind, only those in `namespace`: an application
    /// never reaches another namespace's clusters); `None` when the
    /// cluster serves no such kind.
    fn pools(
        &self,
        kind: PoolKind,
        namespace: &str,
        node_label: Option<&str>,
        selection: &PoolSelection,
        picks: impl Fn(&str, &pools::Labels) -> bool,
    ) -> Option<Vec<Arc<CachedPool>>> {
        if kind == PoolKind::NodeLabel {
            let nodes = self.nodes.state();
            let key = node_label?;
            return Some(
                node_label::pools(nodes.iter().map(|n| n.as_ref()), key)
                    .into_iter()
                    .filter(|p| picks(&p.name, &p.labels))
                    .map(|pool| Arc::new(CachedPool::from_pool(pool)))
                    .collect(),
            );
        }
        let cache = self.pools.get(&kind)?;
        let reachable = |p: &Pool| p.namespace.as_deref().is_none_or(|ns| ns == namespace);
        let chosen = |p: &CachedPool| reachable(&p.pool) && picks(&p.pool.name, &p.pool.labels);
        if let Some(found) = cache.narrowed(namespace, selection) {
            return Some(found.into_iter().filter(|p| chosen(p)).collect());
        }
        // Only the pools chosen are taken out of the cache: copying every
        // one out to drop most of them again cost as much as the walk.
        Some(cache.store.state_filter(chosen))
    }
}

/// The watch cache of one kind of pool object, with the API the cluster
/// serves it in: the cache's keys name it.
#[derive(Clone)]
pub struct PoolCache {
    pub api: PoolApi,
    pub store: Store<CachedPool>,
    /// The cache by label, kept by its writer; `None` where nobody keeps
    /// one (then a selection reads every pool).
    pub index: Option<Arc<PoolIndex>>,
}

impl PoolCache {
    /// The pool of that name, if the cache holds one.
    pub fn get(&self, name: &str) -> Option<Arc<CachedPool>> {
        self.store.get(&ObjectRef::new_with(name, self.api.clone()))
    }

    /// The pools `selection` may choose, found without reading the others,
    /// when its selector asks for a label's value and the cache is indexed
    /// (a superset: the caller matches each against the whole selection);
    /// `None` when every pool must be read. Of a namespaced kind, a name is
    /// looked up in `namespace`.
    fn narrowed(&self, namespace: &str, selection: &PoolSelection) -> Option<Vec<Arc<CachedPool>>> {
        let index = self.index.as_ref()?;
        let selector = selection.selector.as_ref().map(pools::Selector::new).transpose().ok()?;
        let mut found = match &selector {
            // The label whose values the fewest pools carry.
            Some(selector) => selector
                .label_values()
                .min_by_key(|(key, values)| index.count(key, values))
                .map(|(key, values)| index.labelled(key, values))?,
            None => Vec::new(),
        };
        for name in &selection.names {
            let at = ObjectRef::new_with(name, self.api.clone());
            let pool = self.store.get(&at).or_else(|| self.store.get(&at.within(namespace)));
            found.extend(pool);
        }
        // A pool both named and labelled is found twice.
        found.sort_by_key(Arc::as_ptr);
        found.dedup_by(|a, b| Arc::ptr_eq(a, b));
        Some(found)
    }
}

/// The objects of one list each, as a looker reads them (`get`): put into
/// caches of the kind the controller's watches fill.
#[derive(Debug, Default)]
pub struct Lists {
    /// The pool objects of each kind the cluster serves, with its API.
    pub pools: BTreeMap<PoolKind, (ApiResource, Vec<kube::api::DynamicObject>)>,
    /// Why each kind of pool object not listed is not.
    pub unserved: BTreeMap<PoolKind, String>,
    pub nodes: Vec<Node>,
    pub releases: Vec<kube::api::DynamicObject>,
    pub history: Vec<ControllerRevision>,
}

impl Caches {
    /// Caches holding what `lists` read, each object cut down as a watch
    /// cuts it down as it enters.
    pub fn of_lists(lists: Lists) -> Self {
        let pools = lists
            .pools
            .into_iter()
            .filter_map(|(kind, (api, objects))| {
                let of = pools::kind::objects(kind)?;
                let cached = objects.into_iter().map(|o| CachedPool::from_object(of, o)).collect();
                let api = PoolApi::new(api);
                let store = listed(cached, api.clone()).as_reader();
                let index = Some(Arc::new(PoolIndex::of(store.state())));
                Some((kind, PoolCache { api, store, index }))
            })
            .collect();
        let releases: Store<CachedRelease> =
            listed(lists.releases.into_iter().map(CachedRelease::from_object).collect(), ()).as_reader();
        Self {
            pools,
            unserved: lists.unserved,
            nodes: listed(lists.nodes, ()).as_reader(),
            release_index: Some(Arc::new(ReleaseIndex::of(releases.state()))),
            releases,
            history: listed(lists.history, ()).as_reader(),
        }
    }
}

/// A cache filled from one list, as a watch's first list fills it: for
/// what plans without watching (tests, benchmarks). The writer takes
/// later events as a watch would bring them.
pub fn listed<K>(objects: Vec<K>, dyntype: K::DynamicType) -> kube::runtime::reflector::store::Writer<K>
where
    K: kube::runtime::reflector::Lookup<DynamicType: Clone + Eq + std::hash::Hash> + Clone + 'static,
{
    use kube::runtime::watcher::Event;
    let mut writer = kube::runtime::reflector::store::Writer::new(dyntype);
    writer.apply_watcher_event(&Event::Init);
    for o in objects {
        writer.apply_watcher_event(&Event::InitApply(o));
    }
    writer.apply_watcher_event(&Event::InitDone);
    writer
}

/// What concerns `app`, read from the caches: no request to the API server.
pub fn observe(caches: &Caches, app: &NodePoolApplication) -> Observed {
    let namespace = app.namespace().unwrap_or_default();
    let uid = app.meta().uid.as_deref();
    // Only the pools the application selects: planning reads no other, and
    // at ten thousand pools a copy of every one for each reconcile under way
    // was most of the controller's memory. A selector that cannot be read
    // picks none; planning reports it before it looks at a pool.
    let selection = app.spec.pools.selection();
    let kind = app.spec.pools.kind;
    let (pools, unserved) = match pools::picker(&selection) {
        Ok(picks) => {
            match caches.pools(kind, &namespace, app.spec.pools.node_label.as_deref(), &selection, picks) {
                Some(pools) => (pools, None),
                None => {
                    let why = caches.unserved.get(&kind).cloned();
                    (Vec::new(), Some(why.unwrap_or_else(|| not_served_message(kind))))
                }
            }
        }
        Err(_) => (Vec::new(), None),
    };
    let (index, kept) = match &caches.release_index {
        Some(index) => (Arc::clone(index), true),
        None => (Arc::new(ReleaseIndex::of(caches.releases.state())), false),
    };
    // Read before the others are: what they are read as is then at least
    // as new as the version says (see `OtherReleases::version`). An index
    // made here from a list, or a pool cache without one, keeps none.
    let others_version = match kind {
        PoolKind::ClusterProfile => (caches.pools.get(&PoolKind::ClusterProfile))
            .and_then(|profiles| profiles.index.as_ref())
            .map(|profiles| (index.version_anywhere(), profiles.version()))
            .map(|versions| {
                std::hash::BuildHasher::hash_one(&foldhash::quality::FixedState::with_seed(0), versions)
            }),
        // Its releases' Helm releases are stored in its namespace, or in
        // the one `helmRelease.storageNamespace` names: a release of any
        // namespace storing in either is counted there.
        _ => {
            let storage = (app.spec.helm_release.as_ref())
                .and_then(|h| h.storage_namespace.as_deref())
                .filter(|s| *s != namespace);
            let versions = (index.version(&namespace), storage.map(|s| index.version(s)));
            Some(std::hash::BuildHasher::hash_one(&foldhash::quality::FixedState::with_seed(0), versions))
        }
    }
    .filter(|_| kept);
    // Its own releases as the cache read them, shared rather than copied
    // or parsed again; the others are looked up, not walked.
    let mut owned = Vec::new();
    let mut cut_down = 0;
    for release in uid.map(|uid| index.owned_by(uid)).unwrap_or_default() {
        if release.metadata.namespace.as_deref() != Some(namespace.as_str()) {
            continue;
        }
        match release.observed.as_ref() {
            Some(observed) => owned.push(Arc::clone(observed)),
            // Ours by owner reference but without our pool label (edited
            // by hand): left alone, among the others, rather than guess
            // its pool; or cut down, as another shard's.
            None => cut_down += usize::from(release.cut_down),
        }
    }
    let mut on_sites = Vec::new();
    if let Some(profiles) = caches
        .pools
        .get(&PoolKind::ClusterProfile)
        .filter(|_| kind == PoolKind::ClusterProfile)
    {
        for release in caches.releases.state_filter(|r| !owned_by(r, uid)) {
            on_sites.extend(same_cluster_drivers(profiles, &release));
        }
    }
    owned.sort_by(|a, b| a.name.cmp(&b.name));
    let nodes = count_nodes(caches, app, &pools);
    Observed {
        pools,
        unserved,
        owned,
        others: Others::new(caches.releases.clone(), index, app, on_sites, others_version),
        nodes,
        cut_down,
    }
}

/// A site that is a cluster is offline when its ClusterProfile says so; a
/// pool of this cluster, when none of its nodes is Ready.
fn count_nodes(
    caches: &Caches,
    app: &NodePoolApplication,
    pools: &[Arc<CachedPool>],
) -> BTreeMap<String, NodeCount> {
    match app.spec.pools.kind {
        PoolKind::ClusterProfile => nodes::count_sites(pools.iter().map(|p| &p.pool)),
        _ => {
            let membership = Membership::of(&app.spec.pools, app.spec.placement.node_label.as_deref());
            nodes::count(caches.nodes.state().iter().map(|n| n.as_ref()), &membership)
        }
    }
}

/// The Helm releases a HelmRelease of another application drives on a
/// site cluster, in any namespace, by each name the cluster inventory
/// gives that cluster (the profile of the release's pool, in the
/// release's namespace): another profile of the same cluster leads there
/// too. None for a release with no pool mark (one written by hand: only
/// its kubeconfig Secret tells its cluster, see `naming::cluster_of`).
fn same_cluster_drivers(
    profiles: &PoolCache,
    release: &Arc<CachedRelease>,
) -> Vec<(HelmReleaseKey, Arc<CachedRelease>)> {
    let Some(key) = release.drives.as_ref() else {
        return Vec::new();
    };
    let meta = &release.metadata;
    // A release of this cluster has no site to be known by.
    let (Some(pool), Some(namespace)) = (release.site_pool.as_deref(), meta.namespace.as_deref()) else {
        return Vec::new();
    };
    let Some(profile) = profiles
        .store
        .get(&ObjectRef::new_with(pool, profiles.api.clone()).within(namespace))
    else {
        return Vec::new();
    };
    profile
        .pool
        .cluster_ids
        .iter()
        .filter_map(|id| naming::same_helm_release_on(key, id))
        .map(|same| (same, Arc::clone(release)))
        .collect()
}

#[cfg(test)]
mod tests;
