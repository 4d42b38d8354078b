//! What an instance reads beside other shards' sites: pools found by
//! label, and other shards' releases cut down as they are read.

use super::*;

/// A release of another shard's application, read cut down from the
/// start, is what reading it whole then cutting it down makes of it, for
/// releases of every shape others read: plain, renamed, installing into a
/// site cluster (by its pool's label or annotation), inert, without a
/// pool, without a controller owner among its owners.
#[test]
fn a_release_cut_down_as_it_arrives_is_the_release_read_whole_then_cut_down() {
    let plain = release("gw-hz", "edge", Some("u1"));
    let mut renamed = plain.clone();
    renamed.data["spec"]["releaseName"] = json!("gateway");
    renamed.data["spec"]["targetNamespace"] = json!("ingress");
    renamed.data["spec"]["storageNamespace"] = json!("ingress");
    let mut on_site = plain.clone();
    on_site.data["spec"]["kubeConfig"] = json!({ "secretRef": { "name": "store-1-kubeconfig" } });
    let mut by_annotation = on_site.clone();
    by_annotation.metadata.labels = None;
    by_annotation.metadata.annotations =
        Some([(naming::ANNOTATION_POOL_NAME.to_string(), "store-1".to_string())].into());
    let mut inert = on_site.clone();
    inert.metadata.annotations = Some([(naming::ANNOTATION_INERT.to_string(), "taken".to_string())].into());
    let mut no_pool = on_site.clone();
    no_pool.metadata.labels = None;
    let mut two_owners = plain.clone();
    let controller = two_owners.metadata.owner_references.clone().unwrap_or_default();
    let mut other = controller[0].clone();
    (other.controller, other.uid) = (None, "u7".into());
    two_owners.metadata.owner_references = Some(vec![other, controller[0].clone()]);
    for (what, release) in [
        ("plain", plain),
        ("renamed", renamed),
        ("on a site", on_site),
        ("by annotation", by_annotation),
        ("inert", inert),
        ("no pool", no_pool),
        ("two owners", two_owners),
    ] {
        let mut whole = CachedRelease::from_object(release.clone());
        whole.cut_down();
        let arrived = CachedRelease::of_another_shard(release);
        assert_eq!(format!("{arrived:?}"), format!("{whole:?}"), "{what}");
    }
    // What the comparison reads differs between the shapes.
    let site = |r: &CachedRelease| r.site_pool.clone();
    let on_site = release("gw-hz", "edge", Some("u1"));
    let mut on_site_too = on_site.clone();
    on_site_too.data["spec"]["kubeConfig"] = json!({ "secretRef": { "name": "store-1-kubeconfig" } });
    assert_eq!(site(&CachedRelease::of_another_shard(on_site)), None);
    assert_eq!(site(&CachedRelease::of_another_shard(on_site_too)).as_deref(), Some("hz"));
}

/// A selection answered from the label index chooses what a walk of the
/// whole cache chooses, whatever the selector asks: a label's values
/// (from the rarest of two), a name beside them, a label absent, nothing
/// the index can narrow by (then it walks), a value no pool has.
#[test]
fn pools_found_by_label_are_the_pools_a_walk_finds() {
    let pool = nodepool;
    let pools = vec![
        pool("hz", json!({ "region": "east", "tier": "edge" })),
        pool("sh", json!({ "region": "east", "tier": "core" })),
        pool("bj", json!({ "region": "north", "tier": "edge" })),
        pool("wh", json!({ "region": "west" })),
        pool("xa", json!({})),
    ];
    let walked = nodepools(pools.clone());
    let walked = PoolCache {
        index: None,
        ..walked
    };
    let caches = |cache: PoolCache| Caches {
        release_index: None,
        pools: BTreeMap::from([(PoolKind::OpenYurt, cache)]),
        nodes: store(Vec::new()),
        unserved: BTreeMap::new(),
        history: store(Vec::new()),
        releases: store(Vec::new()),
    };
    let (indexed, walked) = (caches(nodepools(pools)), caches(walked));
    let selections = [
        json!({ "selector": { "matchLabels": { "region": "east" } } }),
        json!({ "selector": { "matchLabels": { "region": "east", "tier": "edge" } } }),
        json!({ "selector": { "matchExpressions": [
            { "key": "region", "operator": "In", "values": ["east", "west"] },
            { "key": "tier", "operator": "NotIn", "values": ["core"] } ] } }),
        json!({ "names": ["xa", "hz", "atlantis"], "selector": { "matchLabels": { "tier": "edge" } } }),
        json!({ "names": ["xa", "wh"] }),
        json!({ "selector": { "matchExpressions": [{ "key": "tier", "operator": "DoesNotExist" }] } }),
        json!({ "selector": {} }),
        json!({ "selector": { "matchLabels": { "region": "south" } } }),
    ];
    let names = |caches: &Caches, selection: &PoolSelection| {
        let picks = pools::picker(selection).unwrap();
        let found = caches.pools(PoolKind::OpenYurt, "edge", None, selection, picks).unwrap();
        let mut names: Vec<String> = found.iter().map(|p| p.pool.name.clone()).collect();
        names.sort();
        names
    };
    let mut chosen = Vec::new();
    for selection in selections {
        let selection: PoolSelection = serde_json::from_value(selection).unwrap();
        let by_index = names(&indexed, &selection);
        assert_eq!(by_index, names(&walked, &selection), "{selection:?}");
        chosen.push(by_index.join(","));
    }
    // What each chose, so that a walk and an index that both found
    // nothing would not pass.
    assert_eq!(
        chosen,
        [
            "hz,sh",
            "hz",
            "hz,wh",
            "bj,hz,xa",
            "wh,xa",
            "wh,xa",
            "bj,hz,sh,wh,xa",
            ""
        ]
    );
}
