//! Who a cached release is: the part of its metadata the cache, planning
//! and the triggers read, without the rest of an `ObjectMeta`.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::runtime::reflector::Lookup;

use super::CachedRelease;

/// A cached release's name, namespace, uid, resource version, age and
/// controller owner reference: the fields of its `ObjectMeta` anything
/// reads of it once it is cached (planning reads the rest from its packed
/// view), under the same names. An `ObjectMeta` is fifteen fields, about
/// 330 bytes, nearly all empty here, and every instance caches every
/// release of the namespaces it serves, other shards' too.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReleaseMeta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub creation_timestamp: Option<Time>,
    /// Its controller owner reference alone, if it has one.
    pub owner_references: Option<Vec<OwnerReference>>,
}

/// What is kept of a release's metadata as it enters the cache, whether
/// whole or cut down: its controller owner reference alone of its owners.
impl From<&ObjectMeta> for ReleaseMeta {
    fn from(meta: &ObjectMeta) -> Self {
        Self {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            creation_timestamp: meta.creation_timestamp.clone(),
            owner_references: (meta.owner_references.as_ref())
                .map(|refs| refs.iter().filter(|r| r.controller == Some(true)).cloned().collect()),
        }
    }
}

/// A release is known to its cache by its name and namespace: its cache
/// key copies neither its resource version nor its uid, which nothing
/// reads from a key.
impl Lookup for CachedRelease {
    type DynamicType = ();

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
    fn name(&self) -> Option<Cow<'_, str>> {
        self.metadata.name.as_deref().map(Cow::Borrowed)
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        self.metadata.namespace.as_deref().map(Cow::Borrowed)
    }
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}
