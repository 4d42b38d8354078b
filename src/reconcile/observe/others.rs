//! What an application does not own: the releases of its namespace others
//! own or nobody does, and the Helm releases other applications drive on
//! site clusters; and the owner references that tell them apart.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::{CachedRelease, ReleaseIndex};
use crate::api::NodePoolApplication;
use crate::reconcile::plan::{HelmReleaseKey, OtherReleases, TakenRelease};

/// The releases of an application's namespace it does not own (another
/// application's, nobody's, or its own edited past our pool mark), as the
/// cache and its index hold them: looked up by name and by the Helm
/// release each drives, one pool at a time, never walked; and the Helm
/// releases other applications drive on site clusters, by each name of
/// their cluster.
#[derive(Debug, Clone, Default)]
pub struct Others {
    /// The cache, for a look-up by name; none, for no releases at all.
    releases: Option<Store<CachedRelease>>,
    index: Arc<ReleaseIndex>,
    /// The application whose own releases are not among them.
    uid: Option<String>,
    /// By a name of the site cluster each installs into
    /// ([`same_cluster_drivers`]), sorted by it, then oldest first; in any
    /// namespace.
    on_sites: Vec<(HelmReleaseKey, Arc<CachedRelease>)>,
    /// The application's namespace: a driver elsewhere is named with its own.
    namespace: String,
    /// The index's version of the namespace when it was read or, for
    /// sites that are clusters, whose drivers may be in any namespace,
    /// that of every release and every profile (see
    /// [`OtherReleases::version`]); none when the index was made from a list.
    version: Option<u64>,
}

impl Others {
    /// `version`: of the index and, for sites that are clusters, of the
    /// profiles, read before `on_sites` was (see [`OtherReleases::version`]).
    pub(super) fn new(
        releases: Store<CachedRelease>,
        index: Arc<ReleaseIndex>,
        app: &NodePoolApplication,
        mut on_sites: Vec<(HelmReleaseKey, Arc<CachedRelease>)>,
        version: Option<u64>,
    ) -> Self {
        on_sites.sort_by(|(a, x), (b, y)| {
            let (x, y) = (&x.metadata, &y.metadata);
            a.cmp(b)
                .then_with(|| x.creation_timestamp.as_ref().cmp(&y.creation_timestamp.as_ref()))
                .then_with(|| x.name.cmp(&y.name))
        });
        let namespace = app.namespace().unwrap_or_default();
        Self {
            releases: Some(releases),
            version,
            index,
            uid: app.uid(),
            on_sites,
            namespace,
        }
    }

    /// Whether `release` is not one the application plans: another's, or
    /// its own without our pool mark (left alone rather than guess its pool).
    fn not_its_own(&self, release: &CachedRelease) -> bool {
        !(owned_by(release, self.uid.as_deref()) && release.observed.is_some())
    }

    fn taken(&self, release: &CachedRelease) -> TakenRelease {
        TakenRelease {
            name: release.metadata.name.clone().unwrap_or_default(),
            namespace: release.metadata.namespace.clone().filter(|ns| *ns != self.namespace),
            application: owner_of::<NodePoolApplication>(release).map(|app| app.name),
            created: release.created(),
        }
    }
}

impl OtherReleases for Others {
    fn named(&self, name: &str) -> bool {
        let Some(releases) = &self.releases else {
            return false;
        };
        (releases.get(&ObjectRef::new(name).within(&self.namespace))).is_some_and(|r| self.not_its_own(&r))
    }

    fn driving(&self, key: &HelmReleaseKey) -> Option<TakenRelease> {
        // In any namespace: a HelmRelease elsewhere with the same
        // storageNamespace and release name drives the same Helm release.
        let here = self.index.first_driving(key, |r| self.not_its_own(r));
        let first = self.on_sites.partition_point(|(k, _)| k < key);
        let on_site = self.on_sites.get(first).filter(|(k, _)| k == key).map(|(_, r)| r);
        let when = |r: &CachedRelease| (r.created(), r.metadata.name.clone());
        let older = match (here.as_ref(), on_site) {
            (Some(h), Some(s)) if when(s) < when(h) => Some(s),
            (Some(h), _) => Some(h),
            (None, s) => s,
        };
        older.map(|r| self.taken(r))
    }

    fn version(&self) -> Option<u64> {
        self.version
    }
}

/// What carries owner references: an object as the API serves it, or a
/// release as the cache holds it ([`super::ReleaseMeta`]).
pub trait Owners {
    fn owners(&self) -> &[OwnerReference];
    fn namespace_of(&self) -> Option<&str>;
}

impl<K: Resource> Owners for K {
    fn owners(&self) -> &[OwnerReference] {
        self.owner_references()
    }
    fn namespace_of(&self) -> Option<&str> {
        self.meta().namespace.as_deref()
    }
}

impl Owners for CachedRelease {
    fn owners(&self) -> &[OwnerReference] {
        (self.metadata.owner_references.as_ref())
            .map(|owner| owner.as_slice())
            .unwrap_or_default()
    }
    fn namespace_of(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }
}

/// A release's controller owner reference to an application, if it has
/// one: what [`owner_of`], [`owned_by`] and the shards read.
pub fn application_owner(release: &impl Owners) -> Option<&OwnerReference> {
    (release.owners().iter()).find(|r| r.controller == Some(true) && r.kind == "NodePoolApplication")
}

/// The application a release's controller owner reference names, if any.
pub fn owner_of<K: Resource<DynamicType = ()>>(release: &impl Owners) -> Option<ObjectRef<K>> {
    let namespace = release.namespace_of()?;
    application_owner(release).map(|r| ObjectRef::new(&r.name).within(namespace))
}

/// Ownership is the controller owner reference to this very application
/// (its uid, so a re-created application of the same name owns nothing yet).
pub fn owned_by(release: &impl Owners, uid: Option<&str>) -> bool {
    uid.is_some_and(|uid| application_owner(release).is_some_and(|r| r.uid == uid))
}
