//! Who a cached release is: the part of its metadata the cache, planning
//! and the triggers read, without the rest of an `ObjectMeta`.

use std::borrow::Cow;
use std::hash::{Hash, Hasher};

use internment::ArcIntern;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::runtime::reflector::Lookup;

use super::CachedRelease;

/// A cached release's name, namespace, uid, age and controller owner
/// reference: the fields of its `ObjectMeta` anything reads of it once it
/// is cached, under the same names. Planning reads the rest from its
/// packed view, and the resource version of a release an application owns
/// from its [`super::ObservedRelease`]. An `ObjectMeta` is fifteen fields, about
/// 330 bytes, nearly all empty here, and every instance caches every
/// release of the namespaces it serves, other shards' too.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReleaseMeta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub creation_timestamp: Option<Time>,
    /// Its controller owner reference alone, if it has one: one copy for
    /// all the releases that name the same owner ([`ControllerOwner`]).
    pub owner_references: Option<ControllerOwner>,
}

/// A controller owner reference, held once however many cached releases
/// carry it: every release of an application names the same one, and
/// each copy was five allocations, 240 bytes a release (a quarter of what
/// a shard holds of another shard's release). Interned by the `internment`
/// crate, which lets the one copy go with the last release that holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ControllerOwner(ArcIntern<Owner>);

impl ControllerOwner {
    pub fn new(owner: OwnerReference) -> Self {
        Self(ArcIntern::new(Owner(owner)))
    }

    /// As the object carries it: a list of the one owner reference.
    pub fn as_slice(&self) -> &[OwnerReference] {
        std::slice::from_ref(&self.0 .0)
    }
}

/// An owner reference compared and hashed field by field, as interning
/// needs (k8s-openapi's type is `PartialEq` alone).
#[derive(Debug, PartialEq)]
pub struct Owner(OwnerReference);

impl Eq for Owner {}

impl Hash for Owner {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let OwnerReference {
            api_version,
            block_owner_deletion,
            controller,
            kind,
            name,
            uid,
        } = &self.0;
        (api_version, block_owner_deletion, controller, kind, name, uid).hash(state);
    }
}

/// What is kept of a release's metadata as it enters the cache, whether
/// whole or cut down: its controller owner reference alone of its owners.
impl From<&ObjectMeta> for ReleaseMeta {
    fn from(meta: &ObjectMeta) -> Self {
        Self {
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            creation_timestamp: meta.creation_timestamp.clone(),
            owner_references: (meta.owner_references.iter().flatten())
                .find(|r| r.controller == Some(true))
                .map(|owner| ControllerOwner::new(owner.clone())),
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
