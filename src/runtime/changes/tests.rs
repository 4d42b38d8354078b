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

#[test]
fn the_pool_index_is_listed_when_the_first_list_is_indexed_not_before() {
    use futures::FutureExt;
    let mut pools = PoolChanges::new(PoolApi::new(nodepools()));
    let index = pools.index();
    pools.observe(watcher::Event::Init);
    pools.observe(watcher::Event::InitApply(nodepool("hz", json!({ "r": "east" }), 1)));
    assert!(index.listed().now_or_never().is_none(), "listed before the list ended");
    pools.observe(watcher::Event::InitDone);
    assert!(index.listed().now_or_never().is_some(), "not listed once the list ended");
    let east = BTreeSet::from(["east".to_string()]);
    assert_eq!(index.labelled("r", &east).len(), 1);
}
