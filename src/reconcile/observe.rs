//! Observe: reads what `plan` needs from the cluster, and nothing else: the
//! node pools of the application's kind, and the HelmReleases in the
//! application's namespace split into those this application owns and the
//! names of all others.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::api::naming;
use crate::api::{NodePoolApplication, PoolKind};
use crate::pools::kind::PoolObjects;
use crate::pools::{self, node_label, Pool};
use crate::reconcile::drift;
use crate::reconcile::managed_fields;
use crate::reconcile::packed::PackedJson;
use crate::reconcile::plan::{HelmReleaseKey, ObservedRelease, OtherReleases, TakenRelease};
use k8s_openapi::api::core::v1::Node;

pub mod shallow;
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
    pub owned: Vec<ObservedRelease>,
    /// HelmReleases in the namespace this application does not own: never
    /// adopted, overwritten or deleted.
    pub others: Others,
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
}

impl Caches {
    /// Waits until every watch has listed once: planning over a cache not
    /// yet filled would see no pools and prune every release. From one
    /// task only: kube's `Store::wait_until_ready` wakes only the last of
    /// several tasks waiting at once (one waker in its oneshot channel).
    pub async fn ready(&self) -> Result<(), ObserveError> {
        for (kind, pools) in &self.pools {
            let what = pools::kind::objects(*kind).map_or("pools", |o| o.kind());
            pools.store.wait_until_ready().await.map_err(|_| ObserveError::CacheStopped(what))?;
        }
        self.nodes
            .wait_until_ready()
            .await
            .map_err(|_| ObserveError::CacheStopped("Nodes"))?;
        self.releases
            .wait_until_ready()
            .await
            .map_err(|_| ObserveError::CacheStopped("HelmReleases"))
    }

    /// The pools of `kind` that `picks` chooses, shared with the cache;
    /// `None` when the cluster serves no such kind.
    fn pools(
        &self,
        kind: PoolKind,
        node_label: Option<&str>,
        picks: impl Fn(&str, &BTreeMap<String, String>) -> bool,
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
        Some(
            cache
                .store
                .state()
                .into_iter()
                .filter(|p| picks(&p.pool.name, &p.pool.labels))
                .collect(),
        )
    }
}

/// The watch cache of one kind of pool object, with the API the cluster
/// serves it in: the cache's keys name it.
#[derive(Clone)]
pub struct PoolCache {
    pub api: ApiResource,
    pub store: Store<CachedPool>,
}

impl PoolCache {
    /// The pool of that name, if the cache holds one.
    pub fn get(&self, name: &str) -> Option<Arc<CachedPool>> {
        self.store.get(&ObjectRef::new_with(name, self.api.clone()))
    }
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
        Ok(picks) => match caches.pools(kind, app.spec.pools.node_label.as_deref(), picks) {
            Some(pools) => (pools, None),
            None => {
                let why = caches.unserved.get(&kind).cloned();
                (Vec::new(), Some(why.unwrap_or_else(|| not_served_message(kind))))
            }
        },
        Err(_) => (Vec::new(), None),
    };
    let mut owned = Vec::new();
    let mut others = Vec::new();
    for release in caches.releases.state() {
        if release.metadata.namespace.as_deref() != Some(namespace.as_str()) {
            continue;
        }
        // Only its own releases are read, one at a time: the parsed form
        // of a release is several times its text.
        let observed = owned_by(release.as_ref(), uid)
            .then(|| release.planned.value())
            .flatten()
            .and_then(|value| ObservedRelease::from_value(&value));
        match observed {
            Some(observed) => owned.push(ObservedRelease {
                live: Some(release.planned.clone()),
                ..observed
            }),
            // Another's, or ours by owner reference but without our pool
            // label (edited by hand): left alone rather than guess its pool.
            None => others.push(release),
        }
    }
    owned.sort_by(|a, b| a.name.cmp(&b.name));
    Observed {
        pools,
        unserved,
        owned,
        others: Others::new(others),
    }
}

/// The releases of an application's namespace it does not own, as the
/// cache holds them, sorted to be looked up by name and by the Helm release
/// each drives: shared with the cache rather than copied out.
#[derive(Debug, Clone, Default)]
pub struct Others {
    /// Sorted by name.
    releases: Vec<Arc<CachedRelease>>,
    /// Indices into `releases`, sorted by the Helm release each drives, then
    /// oldest first.
    by_helm_release: Vec<usize>,
}

impl Others {
    fn new(mut releases: Vec<Arc<CachedRelease>>) -> Self {
        releases.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut by_helm_release: Vec<usize> = (0..releases.len()).collect();
        by_helm_release.sort_by_key(|&i| {
            let release = &releases[i];
            let meta = &release.metadata;
            (release.drives.as_ref(), meta.creation_timestamp.as_ref(), meta.name.as_deref())
        });
        Self {
            releases,
            by_helm_release,
        }
    }
}

impl OtherReleases for Others {
    fn named(&self, name: &str) -> bool {
        self.releases
            .binary_search_by(|r| r.metadata.name.as_deref().unwrap_or_default().cmp(name))
            .is_ok()
    }

    fn driving(&self, key: &HelmReleaseKey) -> Option<TakenRelease> {
        let drives = |i: usize| self.releases[i].drives.as_ref();
        let first = self.by_helm_release.partition_point(|&i| drives(i) < Some(key));
        let release = &self.releases[*self.by_helm_release.get(first)?];
        (release.drives.as_ref() == Some(key)).then(|| TakenRelease {
            name: release.metadata.name.clone().unwrap_or_default(),
            application: owner_of::<NodePoolApplication>(release.as_ref()).map(|app| app.name),
            created: release.created(),
        })
    }
}

/// A pool object as the cache holds it: the [`Pool`] planning reads (name,
/// labels, annotations and the labels of its nodes), which reconciles
/// borrow rather than copy. The frameworks keep each pool's node list in
/// its spec or status, which grows with the pool. Its own type rather than a cut-down `DynamicObject`, whose cache
/// key would carry the API's five names for every pool.
#[derive(Debug, Clone, Default)]
pub struct CachedPool {
    /// Name, resource version and deletion: the cache key.
    pub metadata: ObjectMeta,
    pub pool: Pool,
}

impl CachedPool {
    pub fn from_object(kind: &PoolObjects, mut pool: DynamicObject) -> Self {
        strip_last_applied(&mut pool.metadata);
        let read = Pool::from_object(kind, &pool);
        let metadata = ObjectMeta {
            name: pool.metadata.name,
            resource_version: pool.metadata.resource_version,
            deletion_timestamp: pool.metadata.deletion_timestamp,
            ..ObjectMeta::default()
        };
        Self { metadata, pool: read }
    }

    /// A pool with no object of its own (a node label's value).
    pub fn from_pool(pool: Pool) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(pool.name.clone()),
                ..ObjectMeta::default()
            },
            pool,
        }
    }
}

/// A pool is of the API the cluster serves for its kind (the controller
/// asks which version at its start): the cache of each kind is made with
/// that API ([`crate::reconcile::changes::Changes::new`]), and its keys
/// say which it is.
impl Resource for CachedPool {
    type DynamicType = ApiResource;
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(api: &ApiResource) -> Cow<'_, str> {
        api.kind.as_str().into()
    }
    fn group(api: &ApiResource) -> Cow<'_, str> {
        api.group.as_str().into()
    }
    fn version(api: &ApiResource) -> Cow<'_, str> {
        api.version.as_str().into()
    }
    fn api_version(api: &ApiResource) -> Cow<'_, str> {
        api.api_version.as_str().into()
    }
    fn plural(api: &ApiResource) -> Cow<'_, str> {
        api.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A HelmRelease as the cache holds it: who it is, and what planning reads
/// of it as packed JSON text (`metadata`, `spec`, and of the `status` only
/// the conditions, generations and chart version). Packed text, because
/// parsed JSON takes several times the room, and at ten thousand pools the
/// cache would be most of the controller's memory; a reconcile parses one
/// release at a time.
#[derive(Debug, Clone)]
pub struct CachedRelease {
    /// Name, namespace, uid, resource version and the controller owner
    /// reference: what the cache and the triggers need.
    pub metadata: ObjectMeta,
    pub planned: PackedJson,
    /// Our fields on it are recorded as an `Update` (it was created by
    /// POST): they are made ours by apply before the next apply (see
    /// [`crate::reconcile::managed_fields`]).
    pub owned_by_update: bool,
    /// The Helm release it drives: read once here, since every
    /// application in the namespace looks it up at each reconcile.
    pub drives: Option<HelmReleaseKey>,
}

impl CachedRelease {
    /// When it was created, as the API server writes it (RFC 3339).
    fn created(&self) -> Option<String> {
        let created = serde_json::to_value(self.metadata.creation_timestamp.as_ref()?).ok()?;
        created.as_str().map(str::to_string)
    }
}

impl CachedRelease {
    pub fn from_object(mut release: DynamicObject) -> Self {
        let owned_by_update =
            release.metadata.managed_fields.iter().flatten().any(managed_fields::is_our_update);
        release.metadata.managed_fields = None;
        strip_last_applied(&mut release.metadata);
        // No application owns it, so planning reads of it only which Helm
        // release it drives (to never drive the same one), not its spec
        // or status. A cluster may hold thousands of such releases.
        let anyones = owner_of::<NodePoolApplication>(&release).is_some();
        // An inert release (see `naming::ANNOTATION_INERT`) drives nothing:
        // the application that holds its Helm release is not refused for it.
        let inert = release.annotations().contains_key(naming::ANNOTATION_INERT);
        if !anyones {
            release.metadata.labels = None;
            release.metadata.annotations = None;
        }
        if let Some(map) = release.data.as_object_mut() {
            map.retain(|key, _| key == "spec" || (anyones && key == "status"));
            // The one part of a release with no bound but the API server's.
            if let Some(values) = map.get_mut("spec").and_then(|s| s.get_mut("values")) {
                *values = drift::kept_values(values.take());
            }
            if let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut).filter(|_| !anyones) {
                spec.retain(|key, _| {
                    matches!(key.as_str(), "releaseName" | "targetNamespace" | "storageNamespace")
                });
            }
            if let Some(status) = map.get_mut("status").and_then(Value::as_object_mut) {
                let version = status.get("history").and_then(|h| h.pointer("/0/chartVersion")).cloned();
                // What the release applied, by id alone: two pools holding
                // one object is how sharing shows (`reconcile::sharing`).
                let inventory: Vec<Value> = status
                    .get("inventory")
                    .and_then(|i| i.get("entries"))
                    .and_then(Value::as_array)
                    .map(|entries| entries.iter().filter_map(|e| e.get("id")).cloned().collect())
                    .unwrap_or_default();
                status.retain(|key, _| {
                    matches!(key.as_str(), "conditions" | "observedGeneration" | "lastAttemptedRevision")
                });
                if let Some(version) = version {
                    status.insert("history".into(), serde_json::json!([{ "chartVersion": version }]));
                }
                if !inventory.is_empty() {
                    status.insert("inventory".into(), Value::Array(inventory));
                }
            }
        }
        let metadata = ObjectMeta {
            name: release.metadata.name.clone(),
            namespace: release.metadata.namespace.clone(),
            uid: release.metadata.uid.clone(),
            resource_version: release.metadata.resource_version.clone(),
            creation_timestamp: release.metadata.creation_timestamp.clone(),
            owner_references: release
                .metadata
                .owner_references
                .as_ref()
                .map(|refs| refs.iter().filter(|r| r.controller == Some(true)).cloned().collect()),
            ..ObjectMeta::default()
        };
        // What planning reads of the metadata, and nothing that changes
        // without it mattering (the resource version, Flux's finalizer).
        let read = ObjectMeta {
            name: release.metadata.name,
            namespace: release.metadata.namespace,
            uid: release.metadata.uid,
            generation: release.metadata.generation,
            creation_timestamp: release.metadata.creation_timestamp,
            labels: release.metadata.labels,
            annotations: release.metadata.annotations,
            owner_references: release.metadata.owner_references,
            ..ObjectMeta::default()
        };
        let mut view = release.data;
        if let Value::Object(map) = &mut view {
            map.insert("metadata".into(), serde_json::to_value(&read).unwrap_or(Value::Null));
        }
        Self {
            metadata,
            drives: naming::helm_release_of(&view).filter(|_| !inert),
            planned: PackedJson::from_value(&view),
            owned_by_update,
        }
    }
}

/// Read field by field ([`Shallow`]): a HelmRelease nested past what
/// serde_json reads (anyone who may create one in a watched namespace can
/// make one) loses the fields too deep to keep, with a warning, instead of
/// failing every list of HelmReleases and so every application. Of a
/// release this controller owns, what is left out is put back by the next
/// apply, as any hand edit is.
impl<'de> Deserialize<'de> for CachedRelease {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let read = Shallow::<DynamicObject>::deserialize(deserializer)?;
        if !read.dropped.is_empty() {
            tracing::warn!(
                release = %read.object.metadata.name.as_deref().unwrap_or_default(),
                namespace = %read.object.metadata.namespace.as_deref().unwrap_or_default(),
                dropped = %read.dropped.join(", "),
                "HelmRelease nests deeper than {} levels: these fields are left out of what the controller reads",
                shallow::MAX_KEPT_DEPTH
            );
        }
        Ok(Self::from_object(read.object))
    }
}

impl Resource for CachedRelease {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "HelmRelease".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "helm.toolkit.fluxcd.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v2".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "helmreleases".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// kubectl's copy of the whole object, which nothing here reads.
fn strip_last_applied(metadata: &mut ObjectMeta) {
    if let Some(annotations) = &mut metadata.annotations {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// The application a release's controller owner reference names, if any.
pub fn owner_of<K: Resource<DynamicType = ()>>(release: &impl Resource) -> Option<ObjectRef<K>> {
    let namespace = release.meta().namespace.as_deref()?;
    release
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == "NodePoolApplication")
        .map(|r| ObjectRef::new(&r.name).within(namespace))
}

/// Ownership is the controller owner reference to this very application
/// (its uid, so a re-created application of the same name owns nothing yet).
pub fn owned_by(release: &impl Resource, uid: Option<&str>) -> bool {
    let Some(uid) = uid else { return false };
    release
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid && r.kind == "NodePoolApplication")
}

#[cfg(test)]
mod tests;
