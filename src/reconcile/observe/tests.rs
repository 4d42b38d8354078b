//! Unit tests of `observe`.

use std::collections::BTreeMap;

use super::*;
use crate::pools::kind::OPENYURT;
use crate::reconcile::observe::cached::kept_view;
use crate::reconcile::plan::OtherReleases;
use kube::api::DynamicObject;
use serde_json::{json, Value};

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

fn app(uid: &str) -> NodePoolApplication {
    serde_json::from_value(json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "gw", "namespace": "edge", "uid": uid },
        "spec": {
            "pools": { "names": ["hz"] }, "interval": "10m",
            "chart": { "spec": { "chart": "c", "sourceRef": { "kind": "HelmRepository", "name": "r" } } }
        }
    }))
    .unwrap()
}

fn release(name: &str, namespace: &str, owner_uid: Option<&str>) -> DynamicObject {
    let owners = owner_uid
        .map(|uid| {
            json!([{ "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
                         "name": "gw", "uid": uid, "controller": true }])
        })
        .unwrap_or(json!([]));
    object(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {
            "name": name, "namespace": namespace, "generation": 2, "ownerReferences": owners,
            "labels": { "apps.fanout.dev/pool": "hz" },
            "annotations": { "kubectl.kubernetes.io/last-applied-configuration": "{…}" },
            "managedFields": [{ "manager": "nodepool-fanout", "operation": "Apply" }]
        },
        "spec": { "interval": "10m", "values": { "replicas": 2 } },
        "status": {
            "observedGeneration": 2,
            "conditions": [{ "type": "Ready", "status": "True", "reason": "UpgradeSucceeded",
                             "observedGeneration": 2, "message": "ok" }],
            "history": [{ "chartVersion": "1.1.0", "digest": "sha256:…", "testHooks": {} },
                        { "chartVersion": "1.0.0" }],
            "lastAttemptedValuesChecksum": "…", "storageNamespace": "edge",
            "inventory": { "entries": [
                { "id": "_gw_networking.k8s.io_IngressClass", "v": "v1" },
                { "id": "edge_gw__ConfigMap", "v": "v1" }
            ] }
        }
    }))
}

fn store<K: kube::runtime::reflector::Lookup<DynamicType = ()> + Clone + 'static>(
    objects: Vec<K>,
) -> Store<K> {
    store_of(objects, ())
}

fn store_of<K>(objects: Vec<K>, api: K::DynamicType) -> Store<K>
where
    K: kube::runtime::reflector::Lookup<DynamicType: Clone + Eq + std::hash::Hash> + Clone + 'static,
{
    listed(objects, api).as_reader()
}

/// OpenYurt's NodePools, cached as the controller caches them.
fn nodepools(pools: Vec<CachedPool>) -> PoolCache {
    let api = PoolApi::new(ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("apps.openyurt.io", "v1beta2", "NodePool"),
        "nodepools",
    ));
    indexed(store_of(pools, api.clone()), api)
}

/// A NodePool named `name` with `labels`, cut down as it enters the cache.
fn nodepool(name: &str, labels: Value) -> CachedPool {
    CachedPool::from_object(
        &OPENYURT,
        object(json!({
            "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
            "metadata": { "name": name, "labels": labels }
        })),
    )
}

/// A pool cache with its label index, as the controller's writer keeps it.
fn indexed(store: Store<CachedPool>, api: PoolApi) -> PoolCache {
    let index = Some(Arc::new(PoolIndex::of(store.state())));
    PoolCache { store, api, index }
}

#[test]
fn a_pool_cache_is_keyed_by_the_api_it_was_read_from() {
    let pool = CachedPool::from_object(
        &OPENYURT,
        object(json!({ "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
                       "metadata": { "name": "hz" } })),
    );
    let cache = nodepools(vec![pool]);
    assert_eq!(cache.get("hz").map(|p| p.pool.name.clone()).as_deref(), Some("hz"));
    assert!(cache.get("sh").is_none());
    let key = ObjectRef::from_obj_with(cache.get("hz").unwrap().as_ref(), cache.api.clone());
    assert_eq!((key.dyntype.kind.as_str(), key.dyntype.group.as_str()), ("NodePool", "apps.openyurt.io"));
    // A NodeGroup of the same name is another object, in another cache.
    let groups = PoolApi::new(ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("apps.kubeedge.io", "v1alpha1", "NodeGroup"),
        "nodegroups",
    ));
    assert!(cache.store.get(&ObjectRef::new_with("hz", groups)).is_none());
}

#[test]
fn a_cached_release_keeps_what_planning_reads() {
    let full = release("gw-hz", "edge", Some("u1"));
    // As the watch decodes it from the API server's answer.
    let cached: CachedRelease = serde_json::from_value(serde_json::to_value(&full).unwrap()).unwrap();
    let owner = cached.metadata.owner_references.as_ref().map(|o| o.as_slice());
    assert_eq!(owner.map(|o| (o.len(), o[0].uid.as_str())), Some((1, "u1")));
    // Its cache key is its name and namespace, with no copy of the rest.
    let key = ObjectRef::from_obj(&cached);
    assert_eq!((key.name.as_str(), key.namespace.as_deref()), ("gw-hz", Some("edge")));
    assert_eq!((key.extra.resource_version, key.extra.uid), (None, None));
    let text = kept_view(full.clone());
    assert_eq!(text["spec"], full.data["spec"]);
    assert!(text.pointer("/metadata/managedFields").is_none());
    assert!(text.pointer("/metadata/annotations").unwrap().as_object().unwrap().is_empty());
    assert_eq!(text["status"]["history"], json!([{ "chartVersion": "1.1.0" }]));
    assert!(text["status"].get("lastAttemptedValuesChecksum").is_none());
    let read = ObservedRelease::from_value(&text).unwrap();
    let mut whole = serde_json::to_value(&full).unwrap();
    whole["metadata"]["annotations"] = json!({});
    assert_eq!(read, ObservedRelease::from_value(&whole).unwrap());
    assert_eq!(read.status.chart_version.as_deref(), Some("1.1.0"));
    // The inventory by id alone: what finding shared objects reads.
    assert_eq!(
        text["status"]["inventory"],
        json!(["_gw_networking.k8s.io_IngressClass", "edge_gw__ConfigMap"])
    );
    assert_eq!(read.inventory, ["_gw_networking.k8s.io_IngressClass", "edge_gw__ConfigMap"]);
}

#[test]
fn a_release_no_application_owns_is_cached_as_the_helm_release_it_drives() {
    let mut full = release("theirs", "edge", None);
    full.data["spec"]["releaseName"] = json!("gateway");
    full.data["spec"]["storageNamespace"] = json!("helm");
    let cached = CachedRelease::from_object(full.clone());
    let text = kept_view(full.clone());
    assert_eq!(text["spec"], json!({ "releaseName": "gateway", "storageNamespace": "helm" }));
    assert!(text.get("status").is_none());
    assert!(text.pointer("/metadata/labels").is_none());
    assert!(cached.observed.is_none(), "nothing of it is planned or compared");
    let whole = serde_json::to_value(&full).unwrap();
    assert_eq!(naming::helm_release_of(&text), naming::helm_release_of(&whole));
    assert_eq!(cached.drives, Some(("helm".to_string(), "gateway".to_string())));
    // Made inert (another application holds that Helm release), it drives
    // nothing: the holder is not refused for it.
    full.metadata.annotations = Some([(naming::ANNOTATION_INERT.to_string(), "claimed".to_string())].into());
    assert_eq!(CachedRelease::from_object(full).drives, None);
}

/// A HelmRelease written by hand that installs into a site cluster drives
/// a Helm release there, not on this cluster: the cache keeps where.
#[test]
fn a_release_no_application_owns_into_a_site_cluster_is_cached_as_the_helm_release_it_drives_there() {
    let mut full = release("theirs", "edge", None);
    full.data["spec"]["releaseName"] = json!("gateway");
    full.data["spec"]["kubeConfig"] = json!({ "secretRef": { "name": "store-1-kubeconfig" } });
    let cached = CachedRelease::from_object(full.clone());
    let whole = serde_json::to_value(&full).unwrap();
    assert_eq!(cached.drives, naming::helm_release_of(&whole));
    let mut into_hub = whole.clone();
    into_hub["spec"].as_object_mut().unwrap().remove("kubeConfig");
    assert_ne!(cached.drives, naming::helm_release_of(&into_hub), "not a release of this cluster");
}

#[test]
fn a_cached_pool_keeps_its_name_labels_and_annotations() {
    let pool = object(json!({
        "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
        "metadata": { "name": "hz", "labels": { "r": "east" }, "annotations": { "a": "b" }, "uid": "x" },
        "spec": { "type": "Edge" }, "status": { "nodes": ["n1", "n2"], "readyNodeNum": 2 }
    }));
    let cached = CachedPool::from_object(&OPENYURT, pool.clone());
    assert_eq!(cached.pool, Pool::from_object(&OPENYURT, &pool));
    // Its cache key is its name: nothing of the object's metadata is
    // copied into it but that.
    let key = ObjectRef::from_obj_with(&cached, PoolApi::new(ApiResource::erase::<Node>(&())));
    assert_eq!((key.name.as_str(), key.namespace.as_deref()), ("hz", None));
    assert_eq!((key.extra.resource_version, key.extra.uid), (None, None));
}

#[test]
fn of_two_others_driving_one_helm_release_the_older_is_named() {
    let drives_gateway = |name: &str, created: &str| {
        let mut release = release(name, "edge", None);
        release.data["spec"]["releaseName"] = json!("gateway");
        release.metadata.creation_timestamp = Some(serde_json::from_value(json!(created)).unwrap());
        CachedRelease::from_object(release)
    };
    let caches = Caches {
        release_index: None,
        pools: BTreeMap::from([(PoolKind::OpenYurt, nodepools(Vec::new()))]),
        nodes: store(Vec::new()),
        unserved: BTreeMap::new(),
        history: store(Vec::new()),
        releases: store(vec![
            drives_gateway("b-new", "2026-02-01T00:00:00Z"),
            drives_gateway("a-newer", "2026-03-01T00:00:00Z"),
            drives_gateway("c-old", "2026-01-01T00:00:00Z"),
        ]),
    };
    let observed = observe(&caches, &app("u1"));
    let by = observed.others.driving(&("edge".into(), "gateway".into())).expect("taken");
    assert_eq!(by.name, "c-old");
    assert_eq!(by.created.as_deref(), Some("2026-01-01T00:00:00Z"));
}

#[test]
fn observes_from_the_caches_split_by_owner_and_namespace() {
    let releases: Vec<CachedRelease> = [
        release("gw-hz", "edge", Some("u1")),
        release("gw-sh", "edge", Some("old-uid")),
        release("theirs", "edge", None),
        release("gw-hz", "elsewhere", Some("u1")),
    ]
    .into_iter()
    .map(CachedRelease::from_object)
    .collect();
    let pool = nodepool;
    let caches = Caches {
        release_index: None,
        pools: BTreeMap::from([(
            PoolKind::OpenYurt,
            nodepools(vec![
                pool("hz", json!({})),
                pool("sh", json!({ "tier": "edge" })),
                pool("bj", json!({ "tier": "core" })),
            ]),
        )]),
        nodes: store(Vec::new()),
        unserved: BTreeMap::new(),
        history: store(Vec::new()),
        releases: store(releases),
    };
    let observed = observe(&caches, &app("u1"));
    // Only the pools the application selects are copied out.
    assert_eq!(observed.pools.iter().map(|p| p.pool.name.as_str()).collect::<Vec<_>>(), ["hz"]);
    let mut by_label = app("u1");
    by_label.spec.pools.selector =
        Some(serde_json::from_value(json!({ "matchLabels": { "tier": "edge" } })).unwrap());
    let mut names: Vec<String> =
        observe(&caches, &by_label).pools.iter().map(|p| p.pool.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["hz", "sh"]);
    let mut unreadable = app("u1");
    unreadable.spec.pools.selector = Some(
        serde_json::from_value(json!({ "matchExpressions": [{ "key": "tier", "operator": "Near" }] }))
            .unwrap(),
    );
    assert!(observe(&caches, &unreadable).pools.is_empty(), "planning reports the selector");
    assert_eq!(observed.owned.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["gw-hz"]);
    assert_eq!(observed.owned[0].spec_hash, None);
    assert!(observed.owned[0].live.is_some(), "drift is compared with what the cache holds");
    // An earlier application's release of the same name is not ours.
    let others = &observed.others;
    assert!(others.named("gw-sh") && others.named("theirs"));
    assert!(!others.named("gw-hz") && !others.named("nothing"));
    let theirs = others.driving(&("edge".into(), "theirs".into())).expect("theirs drives edge/theirs");
    assert_eq!((theirs.name.as_str(), theirs.application), ("theirs", None));
    let sh = others.driving(&("edge".into(), "gw-sh".into())).expect("gw-sh drives edge/gw-sh");
    assert_eq!(sh.application.as_deref(), Some("gw"));
    assert_eq!(others.driving(&("edge".into(), "gw-hz".into())), None, "gw-hz is ours");
    assert_eq!(
        owner_of::<NodePoolApplication>(&release("gw-hz", "edge", Some("u1"))),
        Some(ObjectRef::new("gw").within("edge"))
    );
    assert_eq!(owner_of::<NodePoolApplication>(&release("theirs", "edge", None)), None);
}

#[test]
fn an_application_sees_only_the_cluster_profiles_of_its_own_namespace() {
    use crate::pools::kind::CLUSTER_PROFILE;
    let profile = |namespace: &str, name: &str| {
        CachedPool::from_object(
            &CLUSTER_PROFILE,
            object(json!({
                "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
                "metadata": { "name": name, "namespace": namespace, "labels": { "tier": "store" } }
            })),
        )
    };
    let api = PoolApi::new(ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ClusterProfile"),
        "clusterprofiles",
    ));
    let profiles = vec![
        profile("edge", "store-1"),
        profile("edge", "store-2"),
        // Another tenant's clusters, one of them of the same name.
        profile("other", "store-1"),
        profile("other", "store-9"),
    ];
    let caches = Caches {
        release_index: None,
        pools: BTreeMap::from([(PoolKind::ClusterProfile, indexed(store_of(profiles, api.clone()), api))]),
        nodes: store(Vec::new()),
        unserved: BTreeMap::new(),
        history: store(Vec::new()),
        releases: store(Vec::new()),
    };
    let mut sites = app("u1");
    sites.spec.pools.kind = PoolKind::ClusterProfile;
    sites.spec.pools.names = Vec::new();
    sites.spec.pools.selector =
        Some(serde_json::from_value(json!({ "matchLabels": { "tier": "store" } })).unwrap());
    let mut seen: Vec<(Option<String>, String)> = observe(&caches, &sites)
        .pools
        .iter()
        .map(|p| (p.pool.namespace.clone(), p.pool.name.clone()))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (Some("edge".into()), "store-1".into()),
            (Some("edge".into()), "store-2".into())
        ],
        "both namespaces' store-1 are cached, each under its own key; only its own are selected"
    );
    let mut named = sites.clone();
    named.spec.pools.selector = None;
    named.spec.pools.names = vec!["store-9".into()];
    assert!(observe(&caches, &named).pools.is_empty(), "a name in another namespace is not reached");
}

/// One cluster published in two tenants' namespaces (as OCM publishes a
/// profile in every namespace bound to the cluster's set): the release
/// another application keeps there, through its own kubeconfig Secret, is
/// found by the cluster's names, and named with its namespace.
#[test]
fn a_release_into_the_same_site_cluster_from_another_namespace_is_found_by_the_clusters_names() {
    use crate::pools::kind::CLUSTER_PROFILE;
    let profile = |namespace: &str| {
        CachedPool::from_object(
            &CLUSTER_PROFILE,
            object(json!({
                "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
                "metadata": { "name": "store-1", "namespace": namespace,
                              "labels": { "x-k8s.io/cluster-manager": "open-cluster-management" } },
                "spec": { "clusterManager": { "name": "open-cluster-management" } }
            })),
        )
    };
    let api = PoolApi::new(ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", "ClusterProfile"),
        "clusterprofiles",
    ));
    let mut theirs = release("b-store-1", "tenant-b", Some("u2"));
    theirs.metadata.labels = Some([("apps.fanout.dev/pool".to_string(), "store-1".to_string())].into());
    theirs.data["spec"] = json!({ "releaseName": "gateway", "storageNamespace": "ingress",
        "kubeConfig": { "secretRef": { "name": "store-1-admin" } } });
    let caches = Caches {
        release_index: None,
        pools: BTreeMap::from([(
            PoolKind::ClusterProfile,
            indexed(store_of(vec![profile("edge"), profile("tenant-b")], api.clone()), api),
        )]),
        nodes: store(Vec::new()),
        unserved: BTreeMap::new(),
        history: store(Vec::new()),
        releases: store(vec![CachedRelease::from_object(theirs.clone())]),
    };
    let mut sites = app("u1");
    sites.spec.pools.kind = PoolKind::ClusterProfile;
    sites.spec.pools.names = vec!["store-1".into()];
    // Cut down, as another shard's application's release is, it is found the same.
    let mut cut = CachedRelease::from_object(theirs);
    cut.cut_down();
    let of_another_shard = Caches {
        release_index: None,
        releases: store(vec![cut]),
        ..caches.clone()
    };
    let observed = observe(&of_another_shard, &sites);
    let same = naming::same_helm_release_on(
        &naming::helm_release_on("Secret edge/store-1-kubeconfig", "ingress", "gateway"),
        &observed.pools[0].pool.cluster_ids[0],
    );
    assert_eq!(observed.others.driving(&same.unwrap()).map(|by| by.name), Some("b-store-1".into()));
    let observed = observe(&caches, &sites);
    let ours = &observed.pools[0].pool;
    let cluster = &ours.cluster_ids[0];
    let mine = naming::helm_release_on("Secret edge/store-1-kubeconfig", "ingress", "gateway");
    assert_eq!(observed.others.driving(&mine), None, "by the Secret alone, another cluster");
    let same = naming::same_helm_release_on(&mine, cluster).unwrap();
    let by = observed.others.driving(&same).expect("the same cluster, by its profile");
    assert_eq!(
        (by.name.as_str(), by.namespace.as_deref(), by.application.as_deref()),
        ("b-store-1", Some("tenant-b"), Some("gw"))
    );
    assert!(!observed.others.named("b-store-1"), "names are of the application's namespace only");
}

#[test]
fn a_release_of_another_shards_application_is_cut_down_to_what_others_read_of_it() {
    let mut whole = release("gw-hz", "edge", Some("u9"));
    whole.data["spec"]["releaseName"] = json!("gateway");
    let kept = CachedRelease::from_object(whole.clone());
    let mut cut = CachedRelease::from_object(whole);
    cut.cut_down();
    assert!(cut.cut_down && cut.observed.is_none() && kept.observed.is_some());
    assert_eq!((&cut.drives, &cut.metadata), (&kept.drives, &kept.metadata));
    assert_eq!(cut.drives, Some(("edge".into(), "gateway".into())));
    assert_eq!(cut.print, 0, "nothing of its view is kept");
    assert_ne!(kept.print, 0);

    let caches = Caches {
        release_index: None,
        pools: BTreeMap::from([(PoolKind::OpenYurt, nodepools(Vec::new()))]),
        nodes: store(Vec::new()),
        unserved: BTreeMap::new(),
        history: store(Vec::new()),
        releases: store(vec![cut]),
    };
    // Another application of the namespace finds its name and its Helm
    // release taken, as it would the whole release.
    let observed = observe(&caches, &app("u1"));
    assert!(observed.owned.is_empty() && observed.others.named("gw-hz"));
    let by = observed.others.driving(&("edge".into(), "gateway".into())).expect("taken");
    assert_eq!((by.name.as_str(), by.application.as_deref()), ("gw-hz", Some("gw")));
    // Its own application, moved to this instance, finds it cut down.
    assert_eq!(observe(&caches, &app("u9")).cut_down, 1);
    assert_eq!(observed.cut_down, 0);
}

#[test]
fn observe_reads_a_kept_index_as_it_reads_the_cache() {
    let mut hand_edited = release("gw-edited", "edge", Some("u1"));
    hand_edited.metadata.labels = None;
    let mut cut = CachedRelease::from_object(release("gw-cut", "edge", Some("u1")));
    cut.cut_down();
    let releases = vec![
        CachedRelease::from_object(release("gw-hz", "edge", Some("u1"))),
        CachedRelease::from_object(release("gw-sh", "edge", Some("old-uid"))),
        CachedRelease::from_object(release("theirs", "edge", None)),
        CachedRelease::from_object(release("gw-hz", "elsewhere", Some("u1"))),
        CachedRelease::from_object(hand_edited),
        cut,
    ];
    let mut writer = ReleaseWriter::default();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Init);
    for release in releases.clone() {
        writer.apply_watcher_event(&kube::runtime::watcher::Event::InitApply(release));
    }
    writer.apply_watcher_event(&kube::runtime::watcher::Event::InitDone);
    let caches = |release_index| Caches {
        release_index,
        pools: BTreeMap::from([(PoolKind::OpenYurt, nodepools(Vec::new()))]),
        nodes: store(Vec::new()),
        unserved: BTreeMap::new(),
        history: store(Vec::new()),
        releases: writer.store(),
    };
    let kept = observe(&caches(Some(writer.index())), &app("u1"));
    let made = observe(&caches(None), &app("u1"));
    for observed in [&kept, &made] {
        assert_eq!(observed.owned.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["gw-hz"]);
        assert_eq!(observed.cut_down, 1);
        let others = &observed.others;
        for name in ["gw-sh", "theirs", "gw-edited", "gw-cut"] {
            assert!(others.named(name), "{name} is another's, or left alone");
        }
        assert!(!others.named("gw-hz"));
        assert_eq!(others.driving(&("edge".into(), "gw-hz".into())), None, "gw-hz is its own");
        let edited = others
            .driving(&("edge".into(), "gw-edited".into()))
            .expect("left alone, still a driver");
        assert_eq!(edited.name, "gw-edited");
    }
}

mod beside_others;
mod kept_status;
mod listed;
mod owners;
