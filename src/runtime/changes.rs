//! Which watch events matter to planning, and to which applications.
//!
//! OpenYurt rewrites a NodePool's status whenever a node's readiness
//! changes (KubeEdge and SuperEdge their groups' and units'), and every kubelet rewrites its Node's status every few seconds.
//! Planning reads only a pool's name, labels and annotations, and of a node
//! its labels and whether it is Ready. So a watch event is a [`Change`]
//! only when what planning reads of the object changed, or the object came
//! or went; and a change concerns only the applications whose pools it
//! touches, before or after.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::runtime::watcher;
use kube::ResourceExt;

use crate::api::PoolSelection;
use crate::pools::nodes::{self, Membership};
use crate::pools::{self, Pool};
use crate::reconcile::observe::{CachedPool, PoolIndex};

/// What planning reads of one kind of watched object, by object name.
pub trait Planned: Clone + PartialEq {
    /// The object as its watch cache holds it.
    type Object: Lookup<DynamicType: Clone + Eq + std::hash::Hash> + Clone + 'static;
    /// What is kept beside the cache, by its writer.
    type Index: KeptIndex<Self::Object> + Default;
    fn read(object: &Self::Object) -> (String, Self);
}

/// An index of a watch cache, kept by the cache's one writer: each event
/// moves an object from the version the cache held to the one it holds.
pub trait KeptIndex<K> {
    /// Whether there is anything to keep (a kind with no index reads no
    /// versions for it).
    const KEPT: bool = true;
    fn replace(&self, old: Option<&Arc<K>>, new: Option<&Arc<K>>);
    /// Made again from what the cache holds after it listed.
    fn rebuild(&self, all: Vec<Arc<K>>);
}

/// No index.
impl<K> KeptIndex<K> for () {
    const KEPT: bool = false;
    fn replace(&self, _: Option<&Arc<K>>, _: Option<&Arc<K>>) {}
    fn rebuild(&self, _: Vec<Arc<K>>) {}
}

impl KeptIndex<CachedPool> for PoolIndex {
    fn replace(&self, old: Option<&Arc<CachedPool>>, new: Option<&Arc<CachedPool>>) {
        PoolIndex::replace(self, old, new);
    }
    fn rebuild(&self, all: Vec<Arc<CachedPool>>) {
        PoolIndex::rebuild(self, all);
    }
}

impl Planned for Pool {
    type Object = CachedPool;
    /// Selections by label are answered from it (see [`PoolIndex`]).
    type Index = PoolIndex;
    /// Keyed `<namespace>/<name>` for a namespaced kind, where two
    /// namespaces may each have a pool of one name.
    fn read(object: &CachedPool) -> (String, Self) {
        let key = match &object.pool.namespace {
            Some(namespace) => format!("{namespace}/{}", object.pool.name),
            None => object.pool.name.clone(),
        };
        (key, object.pool.clone())
    }
}

/// What planning reads of a Node: the pool labels, and readiness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub labels: BTreeMap<String, String>,
    pub ready: bool,
}

impl Planned for NodeView {
    type Object = Node;
    type Index = ();
    fn read(node: &Node) -> (String, Self) {
        let view = NodeView {
            labels: node.labels().clone(),
            ready: nodes::is_ready(node),
        };
        (node.name_any(), view)
    }
}

/// An object as planning read it before an event, and as it reads it
/// after; `None` where it did not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change<V> {
    pub before: Option<V>,
    pub after: Option<V>,
}

impl Change<Pool> {
    /// Whether an application selecting `selection` must look again.
    /// A selector that cannot be read concerns every change: the
    /// application reports it at its next reconcile either way.
    pub fn concerns(&self, selection: &PoolSelection) -> bool {
        [&self.before, &self.after]
            .into_iter()
            .flatten()
            .any(|pool| pools::contains(selection, pool).unwrap_or(true))
    }

    /// Whether an application of `namespace` can see the pool at all: a
    /// pool of a namespaced kind is only its own namespace's.
    pub fn within(&self, namespace: &str) -> bool {
        [&self.before, &self.after]
            .into_iter()
            .flatten()
            .any(|pool| pool.namespace.as_deref().is_none_or(|ns| ns == namespace))
    }
}

impl Change<NodeView> {
    /// The pools whose nodes the change counts differently: those the node
    /// left or joined, or all of its pools when it came, went or turned
    /// Ready or not.
    pub fn pools<'a>(&'a self, membership: &'a Membership) -> BTreeSet<&'a str> {
        let of = |node: &'a Option<NodeView>| -> BTreeSet<&'a str> {
            node.as_ref().map(|n| membership.pools(&n.labels).collect()).unwrap_or_default()
        };
        let (before, after) = (of(&self.before), of(&self.after));
        match (&self.before, &self.after) {
            (Some(b), Some(a)) if b.ready == a.ready => {
                before.symmetric_difference(&after).copied().collect()
            }
            _ => before.union(&after).copied().collect(),
        }
    }

    /// Whether an application whose nodes are told apart by `membership`
    /// and that selects `selection` must look again: a pool the node left
    /// or joined is one it selects. `pool` finds a pool by name; a pool
    /// that does not exist is selected by nobody.
    pub fn concerns(
        &self,
        membership: &Membership,
        selection: &PoolSelection,
        pool: impl Fn(&str) -> Option<Pool>,
    ) -> bool {
        self.pools(membership)
            .into_iter()
            .filter_map(pool)
            .any(|p| pools::contains(selection, &p).unwrap_or(true))
    }
}

/// Pool objects of one kind: their cache, and their changes.
pub type PoolChanges = Changes<Pool>;
/// Nodes: their cache, and their changes.
pub type NodeChanges = Changes<NodeView>;

/// Keeps the watch cache of one kind of object and turns its watch events
/// into [`Change`]s. What an object was before an event is read from the
/// cache before the event is applied to it, so no second copy of every
/// object is kept: at ten thousand pools that copy was megabytes.
pub struct Changes<V: Planned> {
    /// What the objects' cache keys say they are.
    api: <V::Object as Lookup>::DynamicType,
    writer: Writer<V::Object>,
    cache: Store<V::Object>,
    index: Arc<V::Index>,
    /// The objects seen since a re-list began, to find those deleted while
    /// the watch was down. (The cache keeps its old contents until the
    /// re-list is done.)
    relisting: Option<HashSet<String>>,
}

impl<V: Planned> Default for Changes<V>
where
    <V::Object as Lookup>::DynamicType: Default,
{
    fn default() -> Self {
        Self::new(Default::default())
    }
}

impl<V: Planned> Changes<V> {
    /// The changes of objects of one API (`api`: what their cache keys say
    /// they are).
    pub fn new(api: <V::Object as Lookup>::DynamicType) -> Self {
        let writer = Writer::new(api.clone());
        Self {
            api,
            cache: writer.as_reader(),
            writer,
            index: Arc::default(),
            relisting: None,
        }
    }

    /// What the objects' cache keys say they are.
    pub fn api(&self) -> <V::Object as Lookup>::DynamicType {
        self.api.clone()
    }

    /// The cache this tracker fills: what reconciles read.
    pub fn cache(&self) -> Store<V::Object> {
        self.cache.clone()
    }

    /// The index it keeps beside the cache.
    pub fn index(&self) -> Arc<V::Index> {
        Arc::clone(&self.index)
    }

    /// Applies `event` to the cache and its index, and says what changed
    /// for planning.
    pub fn observe(&mut self, event: watcher::Event<V::Object>) -> Vec<Change<V>> {
        let changes = self.changes(&event);
        let key = match &event {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) if V::Index::KEPT => {
                Some(ObjectRef::from_obj_with(o, self.api.clone()))
            }
            _ => None,
        };
        let old = key.as_ref().and_then(|key| self.cache.get(key));
        self.writer.apply_watcher_event(&event);
        match &event {
            watcher::Event::Apply(_) => {
                let new = key.and_then(|key| self.cache.get(&key));
                self.index.replace(old.as_ref(), new.as_ref());
            }
            watcher::Event::Delete(_) => self.index.replace(old.as_ref(), None),
            // The cache swaps in what the list brought only now.
            watcher::Event::InitDone if V::Index::KEPT => self.index.rebuild(self.cache.state()),
            _ => {}
        }
        changes
    }

    fn changes(&mut self, event: &watcher::Event<V::Object>) -> Vec<Change<V>> {
        match event {
            watcher::Event::Init => {
                self.relisting = Some(HashSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(object) => {
                let (name, view) = V::read(object);
                let change = self.change(object, view);
                self.relisting.get_or_insert_default().insert(name);
                change.into_iter().collect()
            }
            watcher::Event::InitDone => {
                let seen = self.relisting.take().unwrap_or_default();
                self.cache
                    .state()
                    .iter()
                    .map(|object| V::read(object))
                    .filter(|(name, _)| !seen.contains(name))
                    .map(|(_, before)| Change {
                        before: Some(before),
                        after: None,
                    })
                    .collect()
            }
            watcher::Event::Apply(object) => {
                let (_, view) = V::read(object);
                self.change(object, view).into_iter().collect()
            }
            watcher::Event::Delete(object) => {
                let before = self.before(object).or_else(|| Some(V::read(object).1));
                vec![Change { before, after: None }]
            }
        }
    }

    fn before(&self, object: &V::Object) -> Option<V> {
        self.cache
            .get(&ObjectRef::from_obj_with(object, self.api.clone()))
            .map(|cached| V::read(&cached).1)
    }

    fn change(&self, object: &V::Object, view: V) -> Option<Change<V>> {
        match self.before(object) {
            // Status churn: nothing planning reads changed.
            Some(before) if before == view => None,
            before => Some(Change {
                before,
                after: Some(view),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
