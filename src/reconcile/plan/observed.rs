//! What planning reads of the HelmReleases in the application's namespace:
//! the releases it owns, as observed, and the others, asked after by name
//! and by the Helm release they drive.

use crate::api::conditions;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::*;
use crate::reconcile::release::state;

/// A Helm release as Helm stores it: (storage namespace, release name).
pub type HelmReleaseKey = (String, String);

/// The HelmReleases of the application's namespace it does not own, as
/// planning asks after them: one pool at a time, so that a cache of
/// thousands need not be copied out for every reconcile.
pub trait OtherReleases: std::fmt::Debug + Sync {
    /// Whether one of them has this name.
    fn named(&self, name: &str) -> bool;
    /// The one that drives this Helm release, if any; of several, the one
    /// that came first.
    fn driving(&self, key: &HelmReleaseKey) -> Option<TakenRelease>;
    /// A number that changes whenever either answer could: so that a plan
    /// that found nothing to do can be known to find the same again (see
    /// [`super::rest`]). `None` when no such number is kept: every plan is
    /// then made whole.
    fn version(&self) -> Option<u64>;
}

/// Other HelmReleases listed out: where no cache holds them (`render`,
/// tests).
#[derive(Debug, Clone, Default)]
pub struct ListedReleases {
    pub names: BTreeSet<String>,
    pub taken: BTreeMap<HelmReleaseKey, TakenRelease>,
}

impl OtherReleases for ListedReleases {
    fn named(&self, name: &str) -> bool {
        self.names.contains(name)
    }
    fn driving(&self, key: &HelmReleaseKey) -> Option<TakenRelease> {
        self.taken.get(key).cloned()
    }
    /// Of the list itself: small, and read whole.
    fn version(&self) -> Option<u64> {
        let hasher = foldhash::quality::FixedState::with_seed(0);
        Some(std::hash::BuildHasher::hash_one(&hasher, (&self.names, &self.taken)))
    }
}

/// A HelmRelease this application does not own, as a driver of a Helm release.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TakenRelease {
    /// The HelmRelease's name.
    pub name: String,
    /// Its namespace, when it is not the application's: a profile of the
    /// same site cluster in another namespace led it there.
    pub namespace: Option<String>,
    /// The NodePoolApplication that owns it, if one does.
    pub application: Option<String>,
    /// Its creation time (RFC 3339, as the API server writes it): of two
    /// HelmReleases driving one Helm release, the older keeps it.
    pub created: Option<String>,
}

pub(super) fn created_of(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// An existing HelmRelease this application owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRelease {
    pub name: String,
    /// Deletes carry it as a precondition, so only the observed object goes.
    pub uid: Option<String>,
    pub pool: Option<String>,
    /// Its `metadata.resourceVersion`: which version of the object was
    /// read (see [`super::memo`]).
    pub resource_version: Option<String>,
    pub spec_hash: Option<String>,
    pub generation: Option<i64>,
    pub status: std::sync::Arc<ReleaseStatus>,
    /// The shared HelmChart it points at, if any.
    pub chart_ref: Option<ChartRef>,
    /// The Helm release it drives.
    pub helm_release: Option<HelmReleaseKey>,
    pub created: Option<String>,
    /// When this controller last wrote it.
    pub written_at: Option<WrittenAt>,
    /// When it was last resumed with its application, if it was since
    /// the last write that moved it ([`naming::ANNOTATION_RESUMED_AT`]).
    pub resumed_at: Option<WrittenAt>,
    /// What it was written at, for a rollback.
    pub stamps: Stamps,
    /// What it holds now as packed JSON text (at least its labels,
    /// annotations and spec), to find hand edits; `None` when not read
    /// (then only the spec hash is compared). Shared with the watch
    /// cache, and parsed only to compare, so that thousands of observed
    /// releases stay small.
    pub live: Option<PackedJson>,
    /// Suspended with its application: it carries our suspend mark.
    pub suspended_with_app: bool,
    /// Made inert: another application holds the Helm release it drives.
    pub inert: bool,
    /// `spec.suspend: true`, whoever set it: Helm does nothing with it.
    pub suspended: bool,
    /// The Helm release's revision, as `helm history` numbers it (the
    /// latest of the release's `status.history`): what `get` shows.
    pub helm_revision: Option<i64>,
    /// The ids of the objects helm-controller applied for it
    /// (`status.inventory`), to find objects two pools share.
    pub inventory: Vec<String>,
    /// Since when helm-controller cannot reach the site cluster it
    /// installs into (see [`state::unreachable_since`]).
    pub unreachable_since: Option<k8s_openapi::jiff::Timestamp>,
    /// The cluster it installs into when not this one
    /// ([`naming::cluster_of`]): objects in two clusters are two objects.
    pub cluster: Option<String>,
    /// It is being deleted: helm-controller uninstalls it before it goes.
    pub deleting: bool,
    /// Since when its uninstall has waited on a site cluster that does
    /// not answer (see [`state::uninstall_blocked_since`]).
    pub uninstall_blocked_since: Option<k8s_openapi::jiff::Timestamp>,
}

impl ObservedRelease {
    /// Reads a HelmRelease as the API server lists it; `None` when it does
    /// not say which pool it is for (edited by hand), so that it is left alone.
    pub fn from_value(object: &Value) -> Option<Self> {
        let metadata = object.get("metadata")?;
        let text = |map: &str, key: &str| metadata.get(map)?.get(key)?.as_str().map(str::to_string);
        Some(Self {
            name: metadata.get("name")?.as_str()?.to_string(),
            uid: metadata.get("uid").and_then(Value::as_str).map(str::to_string),
            pool: Some(
                text("annotations", naming::ANNOTATION_POOL_NAME)
                    .or_else(|| text("labels", naming::LABEL_POOL))?,
            ),
            spec_hash: text("annotations", naming::ANNOTATION_SPEC_HASH),
            resource_version: metadata.get("resourceVersion").and_then(Value::as_str).map(str::to_string),
            generation: metadata.get("generation").and_then(Value::as_i64),
            status: state::classify(object).into(),
            chart_ref: chart_ref_of(object),
            helm_release: naming::helm_release_of(object),
            created: created_of(object),
            written_at: text("annotations", naming::ANNOTATION_WRITTEN_AT).map(WrittenAt::from),
            resumed_at: text("annotations", naming::ANNOTATION_RESUMED_AT).map(WrittenAt::from),
            stamps: Stamps::read(metadata),
            // The caller adds the text it read the release from.
            live: None,
            suspended_with_app: text("annotations", naming::ANNOTATION_SUSPENDED_WITH_APPLICATION).is_some(),
            inert: text("annotations", naming::ANNOTATION_INERT).is_some(),
            suspended: object.pointer("/spec/suspend") == Some(&Value::Bool(true)),
            helm_revision: object.pointer("/status/history/0/version").and_then(Value::as_i64),
            inventory: inventory_of(object),
            unreachable_since: state::unreachable_since(object),
            cluster: naming::cluster_of(object),
            deleting: metadata.get("deletionTimestamp").is_some_and(|t| !t.is_null()),
            uninstall_blocked_since: state::uninstall_blocked_since(object),
        })
    }
}

/// A release's `written-at` stamp: the text it carries (put back as it is
/// when a write keeps its time) and the time that text reads as, read once
/// as the release enters the cache rather than at every plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenAt {
    pub text: String,
    /// `None` when the text is no RFC 3339 time (edited by hand): then no
    /// progress deadline runs from it.
    pub time: Option<k8s_openapi::jiff::Timestamp>,
}

impl From<String> for WrittenAt {
    fn from(text: String) -> Self {
        Self {
            time: text.parse().ok(),
            text,
        }
    }
}

impl From<&str> for WrittenAt {
    fn from(text: &str) -> Self {
        Self::from(text.to_string())
    }
}

/// The owned releases whose pools reach into a sibling's instance, as they
/// are to be read: a release that holds an object another pool's release
/// holds too fails (`SharedObject`), and one Helm would not install
/// because a sibling holds an object says which pool does
/// (`ObjectHeldElsewhere`). Only releases Flux has reconciled at their
/// current generation are judged: until then the inventory may be of a
/// spec already replaced (a fix on its way).
pub fn isolation_failures<'a>(owned: impl IntoIterator<Item = &'a ObservedRelease>) -> Vec<ObservedRelease> {
    // Only releases into one cluster can share an object: each site
    // cluster has its own.
    let mut by_cluster: BTreeMap<Option<&str>, Vec<&ObservedRelease>> = BTreeMap::new();
    for o in owned {
        by_cluster.entry(o.cluster.as_deref()).or_default().push(o);
    }
    by_cluster.into_values().flat_map(|releases| failures_within(&releases)).collect()
}

/// [`isolation_failures`] among releases into one cluster.
fn failures_within(owned: &[&ObservedRelease]) -> Vec<ObservedRelease> {
    let shared = isolation::shared_objects(
        owned.iter().filter_map(|o| Some((o.pool.as_deref()?, o.inventory.as_slice()))),
    );
    // Read once, not once a refused pool: a whole fleet may be refused;
    // and only when one is, since a healthy fleet needs none of it.
    let pools_by_release = std::cell::OnceCell::new();
    let pool_of = |release: &str| {
        let pools_by_release: &BTreeMap<&str, &str> = pools_by_release.get_or_init(|| {
            owned
                .iter()
                .filter_map(|o| Some((o.helm_release.as_ref()?.1.as_str(), o.pool.as_deref()?)))
                .collect()
        });
        pools_by_release.get(release).map(|pool| pool.to_string())
    };
    let judged = owned.iter().copied().filter(|o| o.status.observed_latest);
    judged
        .filter_map(|o| {
            let failing = matches!(o.status.state, ReleaseState::Failed | ReleaseState::Stalled);
            let (state, reason, message) =
                match o.pool.as_deref().and_then(|p| isolation::sharing_message(p, &shared)) {
                    Some(message) => (ReleaseState::Failed, conditions::reason::SHARED_OBJECT, message),
                    None if failing => {
                        let message = isolation::refusal_message(&o.status.message, pool_of)?;
                        (o.status.state, conditions::pool_reason::OBJECT_HELD_ELSEWHERE, message)
                    }
                    None => return None,
                };
            let status = ReleaseStatus {
                state,
                reason: reason.to_string(),
                message,
                ..ReleaseStatus::clone(&o.status)
            };
            Some(ObservedRelease {
                status: status.into(),
                ..o.clone()
            })
        })
        .collect()
}

/// The ids of a release's inventory: `status.inventory.entries[].id` as
/// helm-controller writes it, or the bare list of ids the watch cache keeps.
fn inventory_of(object: &Value) -> Vec<String> {
    let inventory = object.pointer("/status/inventory");
    let entries = inventory.and_then(|i| i.get("entries")).or(inventory).and_then(Value::as_array);
    let id = |entry: &Value| entry.get("id").unwrap_or(entry).as_str().map(str::to_string);
    entries.map(|e| e.iter().filter_map(id).collect()).unwrap_or_default()
}

/// The HelmChart a release points at with `chartRef`; its namespace
/// defaults to the release's own, as Flux reads it.
pub(super) fn chart_ref_of(object: &Value) -> Option<ChartRef> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let kind = ChartKind::of(text("/spec/chartRef/kind")?)?;
    Some(ChartRef {
        kind,
        name: text("/spec/chartRef/name")?.to_string(),
        namespace: text("/spec/chartRef/namespace").or(text("/metadata/namespace"))?.to_string(),
    })
}

/// A HelmRelease as packed JSON text ([`PackedJson`]). Parsed JSON takes
/// several times the room, and a first fan-out holds one per pool: ten
/// thousand of them parsed would be most of the controller's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest(PackedJson);

impl Manifest {
    pub fn new(object: &Value) -> Self {
        Self(PackedJson::from_value(object))
    }

    /// The object, parsed.
    pub fn value(&self) -> Value {
        // Packed by `new` from a Value: always valid JSON.
        self.0.value().unwrap_or(Value::Null)
    }
}
