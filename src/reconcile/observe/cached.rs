//! The objects as the watch caches hold them: cut down as they enter to
//! what planning reads, so that ten thousand pools and releases stay small.

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::runtime::reflector::Lookup;
use kube::runtime::watcher;
use kube::Resource;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::*;
use crate::reconcile::fleet;

/// A pool object as the cache holds it: the [`Pool`] planning reads (name,
/// labels, annotations and the labels of its nodes), which reconciles
/// borrow rather than copy. The frameworks keep each pool's node list in
/// its spec or status, which grows with the pool. Its own type rather than
/// a cut-down `DynamicObject`, whose cache key would carry the API's five
/// names for every pool; and without an `ObjectMeta`, whose fifteen fields
/// took 330 bytes a pool to hold a name the pool holds already: the cache
/// knows it by [`Lookup`], not [`Resource`], and every instance caches
/// every pool of the cluster, whichever shard selects it.
#[derive(Debug, Clone, Default)]
pub struct CachedPool {
    pub pool: Pool,
}

impl CachedPool {
    pub fn from_object(kind: &PoolObjects, mut pool: DynamicObject) -> Self {
        strip_last_applied(&mut pool.metadata);
        Self {
            pool: Pool::from_object(kind, &pool),
        }
    }

    /// A pool with no object of its own (a node label's value).
    pub fn from_pool(pool: Pool) -> Self {
        Self { pool }
    }
}

/// The API of one kind of pool object, as its cache's keys carry it:
/// shared rather than copied, since every key holds one (five names,
/// about 250 bytes a pool when each key had its own).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolApi(Arc<ApiResource>);

impl PoolApi {
    pub fn new(api: ApiResource) -> Self {
        Self(Arc::new(api))
    }
}

impl std::ops::Deref for PoolApi {
    type Target = ApiResource;
    fn deref(&self) -> &ApiResource {
        &self.0
    }
}

/// A pool is of the API the cluster serves for its kind (the controller
/// asks which version at its start): the cache of each kind is made with
/// that API (the runtime's `changes::Changes::new`), and its keys
/// say which it is. A key is the pool's name and, of a namespaced kind,
/// namespace: no resource version or uid, which a key would copy and
/// nothing reads.
impl Lookup for CachedPool {
    type DynamicType = PoolApi;

    fn kind(api: &PoolApi) -> Cow<'_, str> {
        api.kind.as_str().into()
    }
    fn group(api: &PoolApi) -> Cow<'_, str> {
        api.group.as_str().into()
    }
    fn version(api: &PoolApi) -> Cow<'_, str> {
        api.version.as_str().into()
    }
    fn api_version(api: &PoolApi) -> Cow<'_, str> {
        api.api_version.as_str().into()
    }
    fn plural(api: &PoolApi) -> Cow<'_, str> {
        api.plural.as_str().into()
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(self.pool.name.as_str().into())
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.pool.namespace.as_deref().map(Cow::Borrowed)
    }
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// A HelmRelease as the cache holds it: who it is, what planning reads of
/// it, read once as it enters the cache ([`ObservedRelease`]), and of a
/// release planning compares with what it would write, the fields it
/// compares as packed JSON text ([`crate::reconcile::drift::compared_part`]).
/// Packed text, because parsed JSON takes several times the room, and at
/// ten thousand pools the cache would be most of the controller's memory.
#[derive(Debug, Clone)]
pub struct CachedRelease {
    /// Name, namespace, uid, resource version and the controller owner
    /// reference: what the cache and the triggers need.
    pub metadata: ReleaseMeta,
    /// A digest of all planning reads of it (its metadata, spec and the
    /// status kept), for the watch to pass on only the events that change
    /// it; 0 for a release cut down, of which only what is kept beside
    /// is read.
    pub print: u64,
    /// Our fields on it are recorded as an `Update` (it was created by
    /// POST): they are made ours by apply before the next apply (see
    /// [`crate::reconcile::managed_fields`]).
    pub owned_by_update: bool,
    /// The Helm release it drives: read once here, since every
    /// application in the namespace looks it up at each reconcile.
    pub drives: Option<HelmReleaseKey>,
    /// A release some application owns, as planning reads it: read once
    /// as it enters the cache rather than unpacked and read again at every
    /// reconcile (at ten thousand pools that was most of a resync's work).
    /// `None` for a release of no application, or one without our pool
    /// mark (edited by hand), which is left alone, and for one cut down
    /// ([`CachedRelease::cut_down`]).
    pub observed: Option<Arc<ObservedRelease>>,
    /// Its pool, when it installs into a site cluster: which other
    /// applications' releases drive a Helm release there
    /// (`same_cluster_drivers`) is read from it, of any application's.
    pub site_pool: Option<String>,
    /// Cut down to what other applications read of it: its application is
    /// served by another instance ([`CachedRelease::cut_down`]).
    pub cut_down: bool,
}

impl CachedRelease {
    /// When it was created, as the API server writes it (RFC 3339).
    pub(super) fn created(&self) -> Option<String> {
        let created = serde_json::to_value(self.metadata.creation_timestamp.as_ref()?).ok()?;
        created.as_str().map(str::to_string)
    }
}

/// A release as planning reads it ([`kept_view`]), with what is read of
/// it beside.
struct Kept {
    metadata: ReleaseMeta,
    /// Read by planning of a release some application owns
    /// ([`ObservedRelease::resource_version`]), and by nothing of one cut
    /// down: not kept in its [`ReleaseMeta`].
    resource_version: Option<String>,
    /// Its metadata, spec and the status planning reads, as JSON.
    view: Value,
    owned_by_update: bool,
    /// Some application owns it.
    anyones: bool,
    inert: bool,
}

impl CachedRelease {
    pub fn from_object(release: DynamicObject) -> Self {
        let Kept {
            metadata,
            resource_version,
            view,
            owned_by_update,
            anyones,
            inert,
        } = kept(release);
        let print = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            view.to_string().hash(&mut hasher);
            hasher.finish()
        };
        let observed = ObservedRelease::from_value(&view).filter(|_| anyones).map(|observed| {
            Arc::new(ObservedRelease {
                live: Some(PackedJson::from_value(&drift::compared_part(&view))),
                resource_version: resource_version.clone(),
                ..observed
            })
        });
        let site_pool = (observed.as_deref()).filter(|o| o.cluster.is_some()).and_then(|o| o.pool.clone());
        Self {
            metadata,
            drives: naming::helm_release_of(&view).filter(|_| !inert),
            print,
            owned_by_update,
            observed,
            site_pool,
            cut_down: false,
        }
    }
}

/// Of Helm's history of a release, what planning reads: the latest
/// release (its chart version, revision and status), and the latest that
/// Helm deployed when that is an earlier one, for whether Helm ever
/// deployed the release (see `ReleaseStatus::deployed_before`). Without
/// the status, every release read as never deployed, and a pool joining
/// a fleet whose update Helm had yet to take waited for ever behind the
/// first install (seen live with helm-controller down).
fn kept_history(history: &[Value]) -> Vec<Value> {
    let snapshot = |entry: &Value| {
        let mut kept = serde_json::Map::new();
        for key in ["chartVersion", "version", "status"] {
            if let Some(value) = entry.get(key) {
                kept.insert(key.into(), value.clone());
            }
        }
        Value::Object(kept)
    };
    let deployed = |entry: &&Value| {
        crate::reconcile::release::state::DEPLOYED_STATUSES
            .contains(&entry["status"].as_str().unwrap_or_default())
    };
    let mut kept: Vec<Value> = history.first().map(snapshot).into_iter().collect();
    if !history.first().is_some_and(|latest| deployed(&latest)) {
        kept.extend(history.iter().find(deployed).map(snapshot));
    }
    kept.retain(|entry| entry.as_object().is_some_and(|e| !e.is_empty()));
    kept
}

/// What planning reads of a release, as JSON: its metadata but for what
/// changes without mattering (the resource version, Flux's finalizer),
/// its spec, and of its status the conditions read, Helm's releases
/// planning reads (see [`kept_history`]) and the inventory's ids. Of a release no application owns,
/// only which Helm release it drives.
#[cfg(test)]
pub(crate) fn kept_view(release: DynamicObject) -> Value {
    kept(release).view
}

fn kept(mut release: DynamicObject) -> Kept {
    let owned_by_update = release.metadata.managed_fields.iter().flatten().any(managed_fields::is_our_update);
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
        if !anyones {
            keep_what_others_read(map);
        }
        // The one part of a release with no bound but the API server's.
        if let Some(values) = map.get_mut("spec").and_then(|s| s.get_mut("values")) {
            *values = drift::kept_values(values.take());
        }
        if let Some(status) = map.get_mut("status").and_then(Value::as_object_mut) {
            let history = status.get("history").and_then(Value::as_array).map(|h| kept_history(h));
            // What the release applied, by id alone: two pools holding
            // one object is how sharing shows (`reconcile::isolation`).
            let inventory: Vec<Value> = status
                .get("inventory")
                .and_then(|i| i.get("entries"))
                .and_then(Value::as_array)
                .map(|entries| entries.iter().filter_map(|e| e.get("id")).cloned().collect())
                .unwrap_or_default();
            status.retain(|key, _| {
                matches!(key.as_str(), "conditions" | "observedGeneration" | "lastAttemptedRevision")
            });
            if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
                keep_conditions_read(conditions);
            }
            if let Some(history) = history.filter(|h| !h.is_empty()) {
                status.insert("history".into(), Value::Array(history));
            }
            if !inventory.is_empty() {
                status.insert("inventory".into(), Value::Array(inventory));
            }
        }
    }
    let metadata = ReleaseMeta::from(&release.metadata);
    // What planning reads of the metadata, and nothing that changes
    // without it mattering (the resource version, Flux's finalizer).
    let read = ObjectMeta {
        name: release.metadata.name,
        namespace: release.metadata.namespace,
        uid: release.metadata.uid,
        generation: release.metadata.generation,
        creation_timestamp: release.metadata.creation_timestamp,
        // Set once: a release being deleted is let go when its site
        // does not answer (`release::state::uninstall_blocked_since`).
        deletion_timestamp: release.metadata.deletion_timestamp,
        labels: release.metadata.labels,
        annotations: release.metadata.annotations,
        owner_references: release.metadata.owner_references,
        ..ObjectMeta::default()
    };
    let mut view = release.data;
    if let Value::Object(map) = &mut view {
        map.insert("metadata".into(), serde_json::to_value(&read).unwrap_or(Value::Null));
    }
    Kept {
        metadata,
        resource_version: release.metadata.resource_version,
        view,
        owned_by_update,
        anyones,
        inert,
    }
}

impl CachedRelease {
    /// Cuts an application's release down to what other applications
    /// read of it: its name, owner and age, and the Helm release it
    /// drives ([`CachedRelease::drives`], read as it entered the cache).
    /// That is all they read (never to take its name or its Helm
    /// release), and all this instance needs of a release whose
    /// application another shard serves: the whole release, with Flux's
    /// status, is several times the room, for every release of every
    /// other shard. Its digest goes too: its fingerprint
    /// ([`crate::runtime`]'s) reads what `drives` says.
    pub fn cut_down(&mut self) {
        if self.cut_down {
            return;
        }
        self.print = 0;
        self.observed = None;
        self.owned_by_update = false;
        self.cut_down = true;
    }
}

/// The conditions planning reads of a release
/// ([`crate::reconcile::release::state::classify`]), as it reads them: of
/// Ready, Stalled and Reconciling, the status, reason, generation,
/// transition time and the message, cut to the head and tail the
/// application's status shows of it. Not Released, TestSuccess or
/// Remediated, whose messages repeat Ready's: Helm's errors run to
/// kilobytes, and the cache holds one for every pool.
fn keep_conditions_read(conditions: &mut Vec<Value>) {
    use crate::reconcile::release::state::READ_CONDITIONS;
    conditions
        .retain(|c| c.get("type").and_then(Value::as_str).is_some_and(|t| READ_CONDITIONS.contains(&t)));
    for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
        condition.retain(|key, _| {
            matches!(
                key.as_str(),
                "type" | "status" | "reason" | "message" | "observedGeneration" | "lastTransitionTime"
            )
        });
        if let Some(Value::String(message)) = condition.get_mut("message") {
            if message.len() > fleet::status::MAX_LISTED_MESSAGE {
                *message = fleet::status::cut(message, fleet::status::MAX_LISTED_MESSAGE);
            }
        }
    }
}

/// What is kept of a release as others read it: its spec's fields that
/// say which Helm release it drives, with the cluster it installs into
/// (`kubeConfig`): a release of one name in a site cluster is another
/// than on this one. Not its status, nor the rest of its spec.
fn keep_what_others_read(map: &mut serde_json::Map<String, Value>) {
    map.retain(|key, _| key == "spec" || key == "metadata");
    if let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) {
        spec.retain(|key, _| {
            matches!(key.as_str(), "releaseName" | "targetNamespace" | "storageNamespace" | "kubeConfig")
        });
    }
}

/// A HelmRelease as its watch brings it, before the cache keeps what it
/// needs of it: whole ([`CachedRelease::from_object`]) for an application
/// this instance serves, cut down from the start
/// ([`CachedRelease::of_another_shard`]) for one another shard serves.
#[derive(Debug, Clone)]
pub struct WatchedRelease(pub DynamicObject);

/// Read field by field ([`Shallow`]): a HelmRelease nested past what
/// serde_json reads (anyone who may create one in a watched namespace can
/// make one) loses the fields too deep to keep, with a warning, instead of
/// failing every list of HelmReleases and so every application. Of a
/// release this controller owns, what is left out is put back by the next
/// apply, as any hand edit is.
impl<'de> Deserialize<'de> for WatchedRelease {
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
        Ok(Self(read.object))
    }
}

/// Whole, as [`WatchedRelease`] reads it.
impl<'de> Deserialize<'de> for CachedRelease {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        WatchedRelease::deserialize(deserializer).map(|read| Self::from_object(read.0))
    }
}

impl CachedRelease {
    /// What [`CachedRelease::from_object`] then [`CachedRelease::cut_down`]
    /// make of a release some application owns, without the rest: its
    /// status classified, its values and view packed, all to be dropped.
    /// With ten shards in one namespace, nine in ten of a watch's events
    /// are other shards' releases (each of helm-controller's status writes
    /// among them), so that work was most of what a shard did for the
    /// others.
    pub fn of_another_shard(mut release: DynamicObject) -> Self {
        let inert = release.annotations().contains_key(naming::ANNOTATION_INERT);
        let annotations = release.metadata.annotations.take().unwrap_or_default();
        let labels = release.metadata.labels.take().unwrap_or_default();
        let pool = (annotations.get(naming::ANNOTATION_POOL_NAME))
            .or_else(|| labels.get(naming::LABEL_POOL))
            .cloned();
        if let Some(map) = release.data.as_object_mut() {
            keep_what_others_read(map);
        }
        let mut view = release.data;
        if let Value::Object(map) = &mut view {
            let who = serde_json::json!({
                "name": release.metadata.name,
                "namespace": release.metadata.namespace,
            });
            map.insert("metadata".into(), who);
        }
        // Its pool, where it installs into a site cluster, as the whole
        // release says it (`ObservedRelease::pool` of a release with a name).
        let site_pool =
            pool.filter(|_| release.metadata.name.is_some() && naming::cluster_of(&view).is_some());
        let metadata = ReleaseMeta::from(&release.metadata);
        Self {
            metadata,
            drives: naming::helm_release_of(&view).filter(|_| !inert),
            print: 0,
            owned_by_update: false,
            observed: None,
            site_pool,
            cut_down: true,
        }
    }
}

impl Resource for WatchedRelease {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        <CachedRelease as Lookup>::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        <CachedRelease as Lookup>::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        <CachedRelease as Lookup>::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        <CachedRelease as Lookup>::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// A watch event with its object converted, as it enters a cache.
pub fn map_event<A, B>(event: watcher::Event<A>, convert: impl Fn(A) -> B) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(object) => watcher::Event::Apply(convert(object)),
        watcher::Event::Delete(object) => watcher::Event::Delete(convert(object)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(object) => watcher::Event::InitApply(convert(object)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// kubectl's copy of the whole object, which nothing here reads.
fn strip_last_applied(metadata: &mut ObjectMeta) {
    if let Some(annotations) = &mut metadata.annotations {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}
