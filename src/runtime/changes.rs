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
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use crate::api::PoolSelection;
use crate::pools::nodes::{self, Membership};
use crate::pools::{self, Pool};
use crate::reconcile::observe::{CachedPool, PoolIndex};

/// What planning reads of one kind of watched object, by object name.
pub trait Planned: Clone + PartialEq {
    /// The object as its watch cache holds it.
    type Object: Resource<DynamicType: Clone + Eq + std::hash::Hash> + Clone + 'static;
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
    api: <V::Object as Resource>::DynamicType,
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
    <V::Object as Resource>::DynamicType: Default,
{
    fn default() -> Self {
        Self::new(Default::default())
    }
}

impl<V: Planned> Changes<V> {
    /// The changes of objects of one API (`api`: what their cache keys say
    /// they are).
    pub fn new(api: <V::Object as Resource>::DynamicType) -> Self {
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
    pub fn api(&self) -> <V::Object as Resource>::DynamicType {
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
mod tests {
    use super::*;
    use crate::reconcile::observe::PoolApi;
    use serde_json::json;

    /// As the pool watch delivers it: a NodePool cut down as it enters.
    fn nodepools() -> kube::api::ApiResource {
        kube::api::ApiResource {
            group: "apps.openyurt.io".into(),
            version: "v1beta2".into(),
            api_version: "apps.openyurt.io/v1beta2".into(),
            kind: "NodePool".into(),
            plural: "nodepools".into(),
        }
    }

    fn nodepool(name: &str, labels: serde_json::Value, ready_nodes: u32) -> CachedPool {
        CachedPool::from_object(
            &crate::pools::kind::OPENYURT,
            serde_json::from_value(json!({
                "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
                "metadata": { "name": name, "labels": labels },
                "status": { "readyNodeNum": ready_nodes }
            }))
            .unwrap(),
        )
    }

    fn selection(value: serde_json::Value) -> PoolSelection {
        serde_json::from_value(value).unwrap()
    }

    fn names(changes: &[Change<Pool>]) -> Vec<String> {
        changes
            .iter()
            .map(|c| c.after.as_ref().or(c.before.as_ref()).map(|p| p.name.clone()).unwrap_or_default())
            .collect()
    }

    #[test]
    fn status_churn_is_no_change_and_a_label_is() {
        let mut pools = PoolChanges::new(PoolApi::new(nodepools()));
        assert_eq!(
            names(&pools.observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "east" }), 1)))),
            ["hz"]
        );
        assert!(pools
            .observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "east" }), 0)))
            .is_empty());
        let changed = pools.observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "west" }), 0)));
        assert_eq!(changed[0].before.as_ref().unwrap().labels.get("r").unwrap(), "east");
        assert_eq!(changed[0].after.as_ref().unwrap().labels.get("r").unwrap(), "west");
    }

    #[test]
    fn a_cluster_profile_concerns_only_its_own_namespace() {
        let profiles = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ClusterProfile"),
            "clusterprofiles",
        );
        let profile = |namespace: &str| {
            CachedPool::from_object(
                &crate::pools::kind::CLUSTER_PROFILE,
                serde_json::from_value(json!({
                    "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
                    "metadata": { "name": "store-1", "namespace": namespace, "labels": { "tier": "store" } }
                }))
                .unwrap(),
            )
        };
        let mut pools = PoolChanges::new(PoolApi::new(profiles));
        // Two namespaces' profiles of one name are two objects.
        assert_eq!(names(&pools.observe(watcher::Event::Apply(profile("edge")))), ["store-1"]);
        let other = pools.observe(watcher::Event::Apply(profile("other")));
        assert_eq!(other.len(), 1);
        assert!(other[0].before.is_none(), "not mistaken for edge's: {other:?}");
        assert!(other[0].within("other") && !other[0].within("edge"));
        // A node pool is every namespace's.
        let pool = Change {
            before: None,
            after: Some(nodepool("hz", json!({}), 1).pool),
        };
        assert!(pool.within("edge") && pool.within("other"));
    }

    #[test]
    fn a_deletion_is_a_change_even_unseen_before() {
        let mut pools = PoolChanges::new(PoolApi::new(nodepools()));
        let gone = pools.observe(watcher::Event::Delete(nodepool("hz", json!({ "r": "east" }), 1)));
        assert_eq!(
            gone,
            vec![Change {
                before: Some(nodepool("hz", json!({ "r": "east" }), 1).pool),
                after: None
            }]
        );
    }

    #[test]
    fn a_relist_reports_what_changed_and_what_vanished_meanwhile() {
        let mut pools = PoolChanges::new(PoolApi::new(nodepools()));
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(nodepool("a", json!({}), 1)),
            watcher::Event::InitApply(nodepool("b", json!({}), 1)),
            watcher::Event::InitDone,
        ] {
            pools.observe(event);
        }
        // The watch drops; meanwhile b is deleted and a relabelled.
        let mut changes = Vec::new();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(nodepool("a", json!({ "r": "east" }), 0)),
            watcher::Event::InitDone,
        ] {
            changes.extend(pools.observe(event));
        }
        assert_eq!(names(&changes), ["a", "b"]);
        assert!(changes[1].after.is_none(), "b is gone");
        // At rest, a re-list is no change at all.
        let mut again = Vec::new();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(nodepool("a", json!({ "r": "east" }), 3)),
            watcher::Event::InitDone,
        ] {
            again.extend(pools.observe(event));
        }
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn a_change_concerns_the_applications_the_pool_enters_leaves_or_is_in() {
        let mut pools = PoolChanges::new(PoolApi::new(nodepools()));
        pools.observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "east" }), 1)));
        let moved = pools
            .observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "west" }), 1)))
            .remove(0);
        let east = selection(json!({ "selector": { "matchLabels": { "r": "east" } } }));
        let west = selection(json!({ "selector": { "matchLabels": { "r": "west" } } }));
        let north = selection(json!({ "selector": { "matchLabels": { "r": "north" } } }));
        let by_name = selection(json!({ "names": ["hz"] }));
        let other_name = selection(json!({ "names": ["sh"] }));
        assert!(moved.concerns(&east), "it left");
        assert!(moved.concerns(&west), "it entered");
        assert!(moved.concerns(&by_name), "it is in");
        assert!(!moved.concerns(&north));
        assert!(!moved.concerns(&other_name));
        let unreadable =
            selection(json!({ "selector": { "matchExpressions": [{ "key": "r", "operator": "Near" }] } }));
        assert!(moved.concerns(&unreadable));
    }

    fn node(name: &str, pool: Option<&str>, ready: bool) -> Node {
        let labels = pool.map(|p| json!({ "apps.openyurt.io/nodepool": p, "kubernetes.io/os": "linux" }));
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": labels.unwrap_or(json!({})) },
            "status": {
                "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }],
                "allocatable": { "cpu": "1" }
            }
        }))
        .unwrap()
    }

    fn yurt() -> Membership {
        Membership::Label("apps.openyurt.io/nodepool".into())
    }

    fn listed(pools: BTreeSet<&str>) -> Vec<&str> {
        pools.into_iter().collect()
    }

    #[test]
    fn a_node_heartbeat_is_no_change_and_readiness_is() {
        let mut nodes = NodeChanges::default();
        assert_eq!(nodes.observe(watcher::Event::Apply(node("n1", Some("hz"), true))).len(), 1);
        let mut heartbeat = node("n1", Some("hz"), true);
        heartbeat.status.as_mut().unwrap().allocatable = None;
        assert!(nodes.observe(watcher::Event::Apply(heartbeat)).is_empty());
        let down = nodes.observe(watcher::Event::Apply(node("n1", Some("hz"), false)));
        assert_eq!(down.len(), 1);
        assert_eq!(listed(down[0].pools(&yurt())), ["hz"]);
        let gone = nodes.observe(watcher::Event::Delete(node("n1", Some("hz"), false)));
        assert_eq!(listed(gone[0].pools(&yurt())), ["hz"]);
        assert!(gone[0].after.is_none());
    }

    #[test]
    fn a_node_moving_concerns_the_pools_it_left_and_joined_only() {
        let mut nodes = NodeChanges::default();
        nodes.observe(watcher::Event::Apply(node("n1", Some("hz"), true)));
        let moved = nodes.observe(watcher::Event::Apply(node("n1", Some("sh"), true))).remove(0);
        assert_eq!(listed(moved.pools(&yurt())), ["hz", "sh"]);
        let site = Membership::Label("site".into());
        assert!(moved.pools(&site).is_empty(), "another placement label: no pool of it changed");
        let existing = |name: &str| {
            ["hz", "sh", "bj"]
                .contains(&name)
                .then(|| nodepool(name, json!({ "r": "east" }), 1).pool)
        };
        let by_name = |names: serde_json::Value| selection(json!({ "names": names }));
        assert!(moved.concerns(&yurt(), &by_name(json!(["hz"])), existing), "it left hz");
        assert!(moved.concerns(&yurt(), &by_name(json!(["sh"])), existing), "it joined sh");
        assert!(!moved.concerns(&yurt(), &by_name(json!(["bj"])), existing), "bj saw nothing");
        assert!(!moved.concerns(&site, &by_name(json!(["hz"])), existing));
        let east = selection(json!({ "selector": { "matchLabels": { "r": "east" } } }));
        let none = |_: &str| None;
        assert!(!moved.concerns(&yurt(), &east, none), "a pool with no NodePool is nobody's");
        // A node gaining an unrelated label changes no pool.
        let mut relabelled = node("n1", Some("sh"), true);
        relabelled.metadata.labels.as_mut().unwrap().insert("disk".into(), "ssd".into());
        let change = nodes.observe(watcher::Event::Apply(relabelled)).remove(0);
        assert!(change.pools(&yurt()).is_empty(), "{change:?}");
    }

    /// One step of a pool watch: a pool `p<name>` applied with labels
    /// `region=r<region>` (none for `None`) and `tier=t<tier>`, deleted, or
    /// a re-list that keeps the pools `keep` says.
    #[derive(Debug, Clone)]
    enum Step {
        Apply { name: u8, region: Option<u8>, tier: u8 },
        Delete { name: u8 },
        Relist { keep: Vec<bool> },
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..6u8, proptest::option::of(0..3u8), 0..2u8)
                .prop_map(|(name, region, tier)| Step::Apply { name, region, tier }),
            2 => (0..6u8).prop_map(|name| Step::Delete { name }),
            1 => proptest::collection::vec(any::<bool>(), 6).prop_map(|keep| Step::Relist { keep }),
        ]
    }

    fn labelled(name: u8, region: Option<u8>, tier: u8) -> CachedPool {
        let mut labels = json!({ "tier": format!("t{tier}") });
        if let Some(region) = region {
            labels["region"] = json!(format!("r{region}"));
        }
        nodepool(&format!("p{name}"), labels, 1)
    }

    proptest::proptest! {
        /// The label index the writer keeps answers as one made at once
        /// from the cache, through applies, deletes and re-lists that drop
        /// pools deleted while the watch was down.
        #[test]
        fn the_kept_pool_index_answers_as_one_made_from_the_cache(
            steps in proptest::collection::vec(step(), 1..40)
        ) {
            let mut pools = PoolChanges::new(PoolApi::new(nodepools()));
            pools.observe(watcher::Event::Init);
            pools.observe(watcher::Event::InitDone);
            for step in steps {
                match step {
                    Step::Apply { name, region, tier } => {
                        pools.observe(watcher::Event::Apply(labelled(name, region, tier)));
                    }
                    Step::Delete { name } => {
                        pools.observe(watcher::Event::Delete(labelled(name, None, 0)));
                    }
                    Step::Relist { keep } => {
                        let kept: Vec<CachedPool> = (pools.cache().state().iter())
                            .filter(|p| {
                                let at = p.pool.name[1..].parse::<usize>().unwrap_or_default();
                                keep.get(at).copied().unwrap_or(true)
                            })
                            .map(|p| p.as_ref().clone())
                            .collect();
                        pools.observe(watcher::Event::Init);
                        for pool in kept {
                            pools.observe(watcher::Event::InitApply(pool));
                        }
                        pools.observe(watcher::Event::InitDone);
                    }
                }
                let fresh = PoolIndex::of(pools.cache().state());
                let kept = pools.index();
                let names = |found: Vec<Arc<CachedPool>>| {
                    let mut names: Vec<String> = found.iter().map(|p| p.pool.name.clone()).collect();
                    names.sort();
                    names
                };
                for (key, values) in [("region", ["r0", "r1", "r2"].as_slice()), ("tier", &["t0", "t1"])] {
                    for value in values {
                        let one = BTreeSet::from([value.to_string()]);
                        proptest::prop_assert_eq!(
                            names(kept.labelled(key, &one)),
                            names(fresh.labelled(key, &one)),
                            "{}={}", key, value
                        );
                    }
                }
            }
        }
    }
}
