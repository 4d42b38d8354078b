//! What an application does not own: the releases of its namespace others
//! own or nobody does, and the Helm releases other applications drive on
//! site clusters; and the owner references that tell them apart.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::CachedRelease;
use crate::api::NodePoolApplication;
use crate::reconcile::plan::{HelmReleaseKey, OtherReleases, TakenRelease};

/// The releases of an application's namespace it does not own, as the
/// cache holds them, sorted to be looked up by name and by the Helm release
/// each drives: shared with the cache rather than copied out; and the
/// Helm releases other applications drive on site clusters, by each name
/// of their cluster.
#[derive(Debug, Clone, Default)]
pub struct Others {
    /// Sorted by name.
    releases: Vec<Arc<CachedRelease>>,
    /// Indices into `releases`, sorted by the Helm release each drives, then
    /// oldest first.
    by_helm_release: Vec<usize>,
    /// By a name of the site cluster each installs into
    /// ([`same_cluster_drivers`]), sorted by it, then oldest first; in any
    /// namespace.
    on_sites: Vec<(HelmReleaseKey, Arc<CachedRelease>)>,
    /// The application's namespace: a driver elsewhere is named with its own.
    namespace: String,
}

impl Others {
    pub(super) fn new(
        mut releases: Vec<Arc<CachedRelease>>,
        mut on_sites: Vec<(HelmReleaseKey, Arc<CachedRelease>)>,
        namespace: &str,
    ) -> Self {
        releases.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut by_helm_release: Vec<usize> = (0..releases.len()).collect();
        by_helm_release.sort_by_key(|&i| {
            let release = &releases[i];
            let meta = &release.metadata;
            (release.drives.as_ref(), meta.creation_timestamp.as_ref(), meta.name.as_deref())
        });
        on_sites.sort_by(|(a, x), (b, y)| {
            let (x, y) = (&x.metadata, &y.metadata);
            a.cmp(b)
                .then_with(|| x.creation_timestamp.as_ref().cmp(&y.creation_timestamp.as_ref()))
                .then_with(|| x.name.cmp(&y.name))
        });
        Self {
            releases,
            by_helm_release,
            on_sites,
            namespace: namespace.to_string(),
        }
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
        self.releases
            .binary_search_by(|r| r.metadata.name.as_deref().unwrap_or_default().cmp(name))
            .is_ok()
    }

    fn driving(&self, key: &HelmReleaseKey) -> Option<TakenRelease> {
        let drives = |i: usize| self.releases[i].drives.as_ref();
        let first = self.by_helm_release.partition_point(|&i| drives(i) < Some(key));
        let here = self.by_helm_release.get(first).map(|&i| &self.releases[i]);
        let here = here.filter(|r| r.drives.as_ref() == Some(key));
        let first = self.on_sites.partition_point(|(k, _)| k < key);
        let on_site = self.on_sites.get(first).filter(|(k, _)| k == key).map(|(_, r)| r);
        let when = |r: &CachedRelease| (r.created(), r.metadata.name.clone());
        let older = match (here, on_site) {
            (Some(h), Some(s)) if when(s) < when(h) => Some(s),
            (Some(h), _) => Some(h),
            (None, s) => s,
        };
        older.map(|r| self.taken(r))
    }
}

/// A release's controller owner reference to an application, if it has
/// one: what [`owner_of`], [`owned_by`] and the shards read.
pub fn application_owner(release: &impl Resource) -> Option<&OwnerReference> {
    (release.owner_references().iter())
        .find(|r| r.controller == Some(true) && r.kind == "NodePoolApplication")
}

/// The application a release's controller owner reference names, if any.
pub fn owner_of<K: Resource<DynamicType = ()>>(release: &impl Resource) -> Option<ObjectRef<K>> {
    let namespace = release.meta().namespace.as_deref()?;
    application_owner(release).map(|r| ObjectRef::new(&r.name).within(namespace))
}

/// Ownership is the controller owner reference to this very application
/// (its uid, so a re-created application of the same name owns nothing yet).
pub fn owned_by(release: &impl Resource, uid: Option<&str>) -> bool {
    uid.is_some_and(|uid| application_owner(release).is_some_and(|r| r.uid == uid))
}
