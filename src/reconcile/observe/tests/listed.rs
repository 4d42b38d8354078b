//! A reconcile starts once the indexes beside the caches hold the first
//! list, not only the caches: kube's store is ready before its writer
//! has indexed what it holds.

use futures::FutureExt;
use kube::runtime::watcher;

use super::*;

#[test]
fn the_caches_are_ready_only_once_their_indexes_hold_the_first_list() {
    let pools = nodepools(vec![nodepool("hz", json!({ "region": "east" }))]);
    // The stores are listed; their indexes, as the controller's writers
    // make them, hold nothing yet.
    let pool_index = Arc::new(PoolIndex::default());
    let release_index = Arc::new(ReleaseIndex::default());
    let caches = Caches {
        pools: BTreeMap::from([(
            PoolKind::OpenYurt,
            PoolCache {
                index: Some(Arc::clone(&pool_index)),
                ..pools
            },
        )]),
        release_index: Some(Arc::clone(&release_index)),
        nodes: store(Vec::new()),
        unserved: BTreeMap::new(),
        history: store(Vec::new()),
        releases: store(vec![CachedRelease::from_object(release("gw-hz", "edge", Some("u1")))]),
    };
    assert!(caches.ready().now_or_never().is_none(), "ready while the pool index is empty");

    pool_index.rebuild(caches.pools[&PoolKind::OpenYurt].store.state());
    assert!(caches.ready().now_or_never().is_none(), "ready while the release index is empty");

    let mut writer = ReleaseWriter::default();
    for event in [
        watcher::Event::Init,
        watcher::Event::InitApply(CachedRelease::from_object(release("gw-hz", "edge", Some("u1")))),
    ] {
        writer.apply_watcher_event(&event);
    }
    assert!(writer.index().listed().now_or_never().is_none(), "listed before the list ended");
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let caches = Caches {
        releases: writer.store(),
        release_index: Some(writer.index()),
        ..caches
    };
    assert!(matches!(caches.ready().now_or_never(), Some(Ok(()))), "ready once both hold the list");
    // And what a reconcile then reads: the pool by its label, the release as its own.
    let observed = observe(&caches, &app_selecting_east("u1"));
    assert_eq!(observed.pools.iter().map(|p| p.pool.name.as_str()).collect::<Vec<_>>(), ["hz"]);
    assert_eq!(observed.owned.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["gw-hz"]);
}

/// An application in `edge` choosing the pools labelled `region: east`.
fn app_selecting_east(uid: &str) -> NodePoolApplication {
    let mut app = app(uid);
    app.spec.pools =
        serde_json::from_value(json!({ "selector": { "matchLabels": { "region": "east" } } })).unwrap();
    app
}
