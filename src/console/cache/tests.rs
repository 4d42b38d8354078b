use super::changes::{Changed, MOST_KEPT};
use super::*;

#[test]
fn a_change_names_its_application_and_keeps_nodes_and_pools_as_they_were_and_are() {
    let mut versions = Versions::default();
    versions.record(Concern::App(app_key("edge", "gw")), 1);
    versions.record(Concern::App(app_key("edge", "broker")), 2);
    let apps = |changed: Option<Changed>| changed.map(|c| c.apps.into_iter().collect::<Vec<_>>());
    assert_eq!(apps(versions.since(0)), Some(vec!["edge/broker".to_string(), "edge/gw".to_string()]));
    assert_eq!(apps(versions.since(1)), Some(vec!["edge/broker".to_string()]));
    assert_eq!(apps(versions.since(2)), Some(Vec::new()), "nothing since");
    // A node relabelled from one pool to another: both, as it was and is.
    let labels = |pool: &str| BTreeMap::from([("apps.openyurt.io/nodepool".to_string(), pool.to_string())]);
    versions.record(Concern::Node("n1".into(), labels("hz")), 3);
    versions.record(Concern::Node("n1".into(), labels("sh")), 4);
    let changed = versions.since(3).unwrap();
    assert_eq!(changed.members, vec![Member::Node(vec![labels("hz"), labels("sh")])]);
    // A stream further behind than what is kept: everything.
    for at in 5..5 + MOST_KEPT as u64 {
        versions.record(Concern::Node("n2".into(), labels("hz")), at);
    }
    assert!(versions.since(3).is_none(), "forgotten: everything");
    assert!(versions.since(5).is_some());
    versions.record(Concern::Everything, 5000);
    assert!(versions.since(4999).is_none(), "a relist: everything");
    assert!(versions.since(5000).is_some());
}

/// Caches holding `apps` and the NodePools `pools` (name, labels).
fn caches(apps: &[(&str, &str)], pools: &[(&str, &str)]) -> CacheSource {
    let (apps_store, mut app_writer) = reflector::store::<NodePoolApplication>();
    for (name, tag) in apps {
        let app: NodePoolApplication = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": name, "namespace": "edge" },
            "spec": { "interval": "10m", "pools": { "selector": { "matchLabels": { "team": tag } } },
                      "chart": { "spec": { "chart": "gw", "sourceRef": { "kind": "HelmRepository", "name": "c" } } } }
        }))
        .unwrap();
        app_writer.apply_watcher_event(&watcher::Event::Apply(app));
    }
    let mut pool_writer = reflector::store::Writer::<CachedPool>::new(PoolApi::new(objects_resource()));
    for (name, tag) in pools {
        let pool: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
            "metadata": { "name": name, "labels": { "team": tag } }
        }))
        .unwrap();
        let pool = CachedPool::from_object(&kind::OPENYURT, pool);
        pool_writer.apply_watcher_event(&watcher::Event::Apply(pool));
    }
    let nodepools = PoolCache {
        api: PoolApi::new(objects_resource()),
        store: pool_writer.as_reader(),
        index: None,
    };
    CacheSource {
        apps: apps_store,
        events: reflector::store::<CoreEvent>().0,
        releases: reflector::store::<CachedRelease>().0,
        nodes: reflector::store::<Node>().0,
        pool_objects: BTreeMap::from([(PoolKind::OpenYurt, nodepools)]),
        history: reflector::store::<ControllerRevision>().0,
        client: None,
        memos: Mutex::default(),
        changes: watch::channel(0).0,
        versions: Arc::default(),
        errors: Arc::default(),
    }
}

fn objects_resource() -> ApiResource {
    ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("apps.openyurt.io", "v1beta1", "NodePool"))
}

#[test]
fn a_node_or_pool_change_names_only_the_applications_that_select_its_pool() {
    let source = caches(&[("gw", "a"), ("broker", "b")], &[("hz", "a"), ("sh", "b"), ("bj", "c")]);
    let node = |pool: &str| {
        let labels = BTreeMap::from([("apps.openyurt.io/nodepool".to_string(), pool.to_string())]);
        Concern::Node(format!("{pool}-0"), labels)
    };
    let pool = |name: &str, tag: &str| {
        Concern::Pool(
            PoolKind::OpenYurt,
            Pool {
                labels: crate::pools::Labels::from_iter([("team".into(), tag.into())]),
                ..Pool::named(name)
            },
        )
    };
    let record = |concern: Concern, at: u64| source.versions.lock().unwrap().record(concern, at);
    record(node("hz"), 1);
    assert_eq!(source.changed_since(0), Some(vec!["edge/gw".to_string()]), "hz is gw's");
    record(node("bj"), 2);
    assert_eq!(source.changed_since(1), Some(Vec::new()), "bj is nobody's: no page fetches itself");
    record(pool("bj", "c"), 3);
    record(pool("bj", "b"), 4);
    assert_eq!(source.changed_since(3), Some(vec!["edge/broker".to_string()]), "bj joins broker's");
    record(pool("bj", "c"), 5);
    assert_eq!(
        source.changed_since(4),
        Some(vec!["edge/broker".to_string()]),
        "and leaves it: broker's too"
    );
}

#[test]
fn a_release_concerns_the_application_that_owns_it() {
    let release: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": "gw-hz", "namespace": "edge", "labels": { naming::LABEL_APPLICATION: "gw" },
            "ownerReferences": [{ "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
                "name": "gw", "uid": "u1", "controller": true }] }
    }))
    .unwrap();
    assert_eq!(of_owned(&CachedRelease::from_object(release)), Concern::App("edge/gw".into()));
    let foreign: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": "gw-hz", "namespace": "edge", "labels": { naming::LABEL_APPLICATION: "gw" } }
    }))
    .unwrap();
    assert_eq!(of_owned(&CachedRelease::from_object(foreign)), Concern::Everything);
}
