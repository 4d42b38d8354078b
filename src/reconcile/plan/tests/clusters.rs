//! Sites that are clusters: each release installs into its own cluster
//! through the kubeconfig Secret its site names, and nothing pins its pods.

use super::*;
use crate::api::naming;

/// An application over the site clusters of `region: east`, without a
/// placement (admission refuses one for sites that are clusters).
fn sites(extra: Value) -> NodePoolApplication {
    let mut app = app(json!({
        "pools": { "kind": "ClusterProfile", "selector": { "matchLabels": { "region": "east" } } }
    }));
    app.spec.placement = Default::default();
    for (k, v) in extra.as_object().unwrap() {
        match k.as_str() {
            "kubeConfig" => app.spec.pools.kube_config = Some(serde_json::from_value(v.clone()).unwrap()),
            other => panic!("no such field in this helper: {other}"),
        }
    }
    app
}

/// ClusterProfiles of the application's namespace.
fn clusters() -> Vec<Pool> {
    pools()
        .into_iter()
        .map(|p| Pool {
            namespace: Some("edge".into()),
            marks: crate::pools::nodes::Membership::OwnCluster,
            ..p
        })
        .collect()
}

#[test]
fn each_site_cluster_gets_a_release_naming_its_own_kubeconfig() {
    let a = sites(json!({}));
    let plan = Scenario::of(&a).over(&clusters()).plan();
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
    for pool in ["hangzhou", "shanghai"] {
        let release = desired(&plan, pool);
        assert_eq!(
            release["spec"]["kubeConfig"],
            json!({ "secretRef": { "name": format!("{pool}-kubeconfig") } }),
            "Cluster API's convention, Flux's default key"
        );
        // Its pods run anywhere in its own cluster: nothing pins them.
        assert!(release["spec"].get("postRenderers").is_none(), "{release:#}");
        assert!(release["spec"]["values"]["controller"].get("nodeSelector").is_none(), "{release:#}");
        // Templates read the site as they read a pool.
        assert_eq!(release["spec"]["values"]["controller"]["ingressClass"]["name"], pool);
    }
}

#[test]
fn the_kubeconfig_secret_may_be_named_by_a_template_and_a_key() {
    let a = sites(
        json!({ "kubeConfig": { "secretRef": { "name": "{{pool.labels.region}}-{{pool.name}}", "key": "value.yaml" } } }),
    );
    let plan = Scenario::of(&a).over(&clusters()).plan();
    assert_eq!(
        desired(&plan, "hangzhou")["spec"]["kubeConfig"],
        json!({ "secretRef": { "name": "east-hangzhou", "key": "value.yaml" } })
    );
}

#[test]
fn a_kubeconfig_name_that_is_no_secret_name_fails_that_site_naming_the_field() {
    let a = sites(json!({ "kubeConfig": { "secretRef": { "name": "{{pool.name}}_Admin" } } }));
    let plan = Scenario::of(&a).over(&clusters()).plan();
    match outcome(&plan, "hangzhou") {
        Outcome::Failed { field, message } => {
            assert_eq!(field, "pools.kubeConfig.secretRef.name");
            assert!(message.contains("\"hangzhou_Admin\""), "{message}");
        }
        other => panic!("expected a failed site, got {other:?}"),
    }
    assert!(plan.apply.is_empty(), "every site fails alike: {:?}", applied_pools(&plan));
}

#[test]
fn a_pool_applications_releases_keep_their_placement_and_no_kubeconfig() {
    let a = app(json!({}));
    let plan = Scenario::of(&a).over(&pools()).plan();
    let release = desired(&plan, "hangzhou");
    assert!(release["spec"].get("kubeConfig").is_none(), "{release:#}");
    assert!(release["spec"]["postRenderers"].is_array(), "{release:#}");
}

/// The sites' health as observe counts it from their ClusterProfiles:
/// `down` says its control plane is not healthy, since 23:00.
fn health(down: &str) -> BTreeMap<String, NodeCount> {
    let sites: Vec<Pool> = clusters()
        .into_iter()
        .map(|p| {
            let status = if p.name == down { "False" } else { "True" };
            let profile = json!({ "status": { "conditions": [{ "type": "ControlPlaneHealthy",
                "status": status, "lastTransitionTime": "2029-12-31T23:00:00Z" }] } });
            Pool {
                health: crate::pools::nodes::SiteHealth::of_profile(&profile),
                ..p
            }
        })
        .collect();
    crate::pools::nodes::count_sites(&sites)
}

#[test]
fn a_site_whose_control_plane_is_not_healthy_is_offline_not_failed() {
    let a = sites(json!({}));
    let counts = health("shanghai");
    let plan = Scenario::of(&a).over(&clusters()).with_nodes(&counts).plan();
    // Not installed there until it is healthy; the other site goes on.
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
    assert_eq!(outcome(&plan, "shanghai"), &Outcome::Deferred(PoolRollout::Offline));
    let status = plan.status();
    let shanghai = status.pools.iter().find(|p| p.pool == "shanghai").unwrap();
    assert!(shanghai.offline && shanghai.reason == "PoolOffline", "{shanghai:?}");
    assert!(shanghai.message.contains("control plane is not healthy"), "{}", shanghai.message);
    assert_eq!(shanghai.offline_since.as_deref(), Some("2029-12-31T23:00:00Z"));
    assert_eq!(shanghai.nodes.as_deref(), Some("control plane not healthy"));
    assert_eq!(status.offline_pools, 1);
    assert!(status.pools.iter().all(|p| p.reason != "InstallFailed"));
}

#[test]
fn a_site_helm_controller_cannot_reach_is_offline_and_the_others_go_on() {
    let a = sites(json!({}));
    let first = Scenario::of(&a).over(&clusters()).plan();
    // Both installed once; then shanghai's API server stops answering and
    // a change comes.
    let mut owned: Vec<ObservedRelease> = first
        .apply
        .iter()
        .map(|d| {
            let mut live = d.object();
            live["status"] = json!({ "observedGeneration": 1, "conditions": [{ "type": "Ready",
                "status": "True", "reason": "InstallSucceeded", "message": "ok", "observedGeneration": 1,
                "lastTransitionTime": "2029-12-31T22:00:00Z" }] });
            live["metadata"]["generation"] = json!(1);
            ObservedRelease::from_value(&live).unwrap()
        })
        .collect();
    let refused = "Could not determine release state: failed to retrieve last release from storage: \
                   query: failed to query with labels: Get \"https://127.0.0.1:16753/api/v1/namespaces/\
                   edge/secrets\": dial tcp 127.0.0.1:16753: connect: connection refused";
    for o in owned.iter_mut().filter(|o| o.pool.as_deref() == Some("shanghai")) {
        std::sync::Arc::make_mut(&mut o.status).state = ReleaseState::Failed;
        std::sync::Arc::make_mut(&mut o.status).reason = "StateError".into();
        std::sync::Arc::make_mut(&mut o.status).message = refused.into();
        o.unreachable_since = Some("2029-12-31T23:30:00Z".parse().unwrap());
    }
    let mut changed = a.clone();
    changed.spec.values = Some(json!({ "controller": { "replicas": 2 } }));
    let plan = Scenario::of(&changed).over(&clusters()).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["hangzhou"], "the reachable site gets the change");
    assert_eq!(outcome(&plan, "shanghai"), &Outcome::Deferred(PoolRollout::Offline));
    let status = plan.status();
    let shanghai = status.pools.iter().find(|p| p.pool == "shanghai").unwrap();
    assert!(shanghai.offline, "offline, not failed: {shanghai:?}");
    assert_eq!(shanghai.reason, "PoolOffline");
    assert!(shanghai.message.contains("cannot reach the site cluster"), "{}", shanghai.message);
    assert!(shanghai.message.contains("connection refused"), "Flux's words kept: {}", shanghai.message);
    assert_eq!(shanghai.nodes.as_deref(), Some("unreachable"));
    assert_eq!(shanghai.offline_since.as_deref(), Some("2029-12-31T23:30:00Z"));
    assert!(condition(&plan, "Stalled").is_none(), "nobody must act: {:?}", status.conditions);
}

#[test]
fn a_site_release_keeps_its_helm_records_in_its_target_namespace_unless_told() {
    let mut a = sites(json!({}));
    a.spec.target_namespace = Some("ingress-{{pool.name}}".into());
    let plan = Scenario::of(&a).over(&clusters()).plan();
    let spec = &desired(&plan, "hangzhou")["spec"];
    assert_eq!(
        (&spec["targetNamespace"], &spec["storageNamespace"]),
        (&json!("ingress-hangzhou"), &json!("ingress-hangzhou"))
    );
    a.spec.helm_release = Some(serde_json::from_value(json!({ "storageNamespace": "helm" })).unwrap());
    let plan = Scenario::of(&a).over(&clusters()).plan();
    assert_eq!(desired(&plan, "hangzhou")["spec"]["storageNamespace"], "helm", "the application's own");
    // A pool of this cluster keeps Flux's default.
    let mut pools_app = app(json!({}));
    pools_app.spec.target_namespace = Some("ingress".into());
    let plan = Scenario::of(&pools_app).over(&pools()).plan();
    assert!(desired(&plan, "hangzhou")["spec"].get("storageNamespace").is_none());
}

#[test]
fn sites_are_each_their_own_cluster_for_names_and_objects() {
    // One Helm release name at every site: each is its own cluster's.
    let mut a = sites(json!({}));
    a.spec.release_name = Some("gateway".into());
    let first = Scenario::of(&a).over(&clusters()).plan();
    assert_eq!(applied_pools(&first), ["hangzhou", "shanghai"], "no duplicate: {:?}", first.pools);
    let keys: Vec<_> = first.apply.iter().map(|d| naming::helm_release_of(&d.object()).unwrap()).collect();
    assert_eq!(keys[0].1, keys[1].1);
    assert_ne!(keys[0], keys[1], "stored in two clusters");
    // Both install their IngressClass `gateway`: two objects, in two clusters.
    let owned: Vec<ObservedRelease> = first
        .apply
        .iter()
        .map(|d| {
            let mut live = d.object();
            live["metadata"]["generation"] = json!(1);
            live["status"] = json!({ "observedGeneration": 1,
                "conditions": [{ "type": "Ready", "status": "True", "reason": "InstallSucceeded",
                                 "message": "ok", "observedGeneration": 1 }],
                "inventory": { "entries": [{ "id": "_gateway_networking.k8s.io_IngressClass", "v": "v1" }] } });
            ObservedRelease::from_value(&live).unwrap()
        })
        .collect();
    assert!(isolation_failures(&owned).is_empty(), "{:?}", isolation_failures(&owned));
    let plan = Scenario::of(&a).over(&clusters()).owning(owned.clone()).plan();
    assert_eq!(plan.status().ready, "2/2");
    // Two pools of this cluster holding it do share it.
    let mut here = owned;
    for o in &mut here {
        o.cluster = None;
    }
    assert_eq!(isolation_failures(&here).len(), 2);
}

#[test]
fn a_site_found_unreachable_after_its_write_never_got_it_and_is_not_failed() {
    let a = sites(json!({}));
    let first = Scenario::of(&a).over(&clusters()).plan();
    // Written at 23:00; helm-controller then found shanghai unreachable at
    // 23:01, trying that very write: Helm never ran, so no update took the
    // site down.
    let owned: Vec<ObservedRelease> = first
        .apply
        .iter()
        .map(|d| {
            let mut live = d.object();
            live["metadata"]["annotations"]["apps.fanout.dev/written-at"] = json!("2029-12-31T23:00:00Z");
            live["metadata"]["generation"] = json!(2);
            let (status, reason, message) = match d.pool.as_str() {
                "shanghai" => ("False", "StateError", "Could not determine release state: Get \"https://127.0.0.1:16753/api\": dial tcp 127.0.0.1:16753: connect: connection refused"),
                _ => ("True", "UpgradeSucceeded", "ok"),
            };
            live["status"] = json!({ "observedGeneration": 2, "conditions": [{ "type": "Ready",
                "status": status, "reason": reason, "message": message, "observedGeneration": 2,
                "lastTransitionTime": "2029-12-31T23:01:00Z" }] });
            ObservedRelease::from_value(&live).unwrap()
        })
        .collect();
    let plan = Scenario::of(&a).over(&clusters()).owning(owned).plan();
    let status = plan.status();
    let shanghai = status.pools.iter().find(|p| p.pool == "shanghai").unwrap();
    assert_eq!((shanghai.reason.as_str(), shanghai.offline), ("PoolOffline", true), "{shanghai:?}");
    assert_eq!(shanghai.rollout, "Offline");
    assert_eq!(status.ready, "1/2 (1 offline)");
    assert!(condition(&plan, "Stalled").is_none());
}

/// One cluster under two names: another tenant's application, in another
/// namespace, drives `gateway` on the cluster hangzhou's profile describes
/// (its own profile of that cluster, published by the same manager in its
/// namespace, led it there through its own kubeconfig Secret).
#[test]
fn a_site_whose_cluster_another_application_drives_under_another_name_is_refused_naming_it() {
    let manager = "cluster hangzhou of manager open-cluster-management";
    let sites_known: Vec<Pool> = clusters()
        .into_iter()
        .map(|p| Pool {
            cluster_ids: vec![format!("cluster {} of manager open-cluster-management", p.name)],
            ..p
        })
        .collect();
    let mut a = sites(json!({}));
    a.spec.release_name = Some("gateway".into());
    a.spec.target_namespace = Some("ingress".into());
    let mut scenario = Scenario::of(&a).over(&sites_known);
    scenario.others.taken.insert(
        naming::helm_release_on(manager, "ingress", "gateway"),
        TakenRelease {
            name: "tenant-b-gateway".into(),
            namespace: Some("tenant-b".into()),
            application: Some("gateway-b".into()),
            created: Some("2029-12-01T00:00:00Z".into()),
        },
    );
    let plan = scenario.plan();
    assert_eq!(applied_pools(&plan), ["shanghai"], "the other site goes on");
    let reported = plan.status().pools.iter().find(|p| p.pool == "hangzhou").unwrap().clone();
    assert_eq!(reported.reason, "ReleaseNameConflict");
    assert!(
        reported.message.contains(
            "Helm release ingress/gateway in the site cluster of Secret edge/hangzhou-kubeconfig is already \
             driven by HelmRelease tenant-b/tenant-b-gateway of NodePoolApplication gateway-b"
        ),
        "{}",
        reported.message
    );
}

/// Two profiles of one cluster in the application's namespace (two
/// managers publish one each): one releaseName would install it twice
/// there, through two Secrets.
#[test]
fn two_sites_that_are_one_cluster_with_one_release_name_both_fail_naming_the_cluster() {
    let one_cluster: Vec<Pool> = clusters()
        .into_iter()
        .map(|p| Pool {
            cluster_ids: vec![
                format!("cluster of {}", p.name),
                "cluster at https://store-1.example:6443".into(),
            ],
            ..p
        })
        .collect();
    let mut a = sites(json!({}));
    a.spec.release_name = Some("gateway".into());
    let plan = Scenario::of(&a).over(&one_cluster).plan();
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    for pool in ["hangzhou", "shanghai"] {
        match outcome(&plan, pool) {
            Outcome::Failed { field, message } => {
                assert_eq!(field, "releaseName");
                assert!(message.contains("hangzhou, shanghai"), "{message}");
                assert!(message.contains("cluster at https://store-1.example:6443"), "{message}");
            }
            other => panic!("{pool}: expected a failed site, got {other:?}"),
        }
    }
    // Named per pool, they are two Helm releases on that cluster.
    a.spec.release_name = Some("gateway-{{pool.name}}".into());
    let plan = Scenario::of(&a).over(&one_cluster).plan();
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
}

/// A site release of a pool that left, being deleted; `blocked` is since
/// when its uninstall has waited on a site that does not answer.
fn leaving(pool: &str, blocked: Option<&str>) -> ObservedRelease {
    ObservedRelease {
        cluster: Some(format!("edge/{pool}")),
        deleting: true,
        uninstall_blocked_since: blocked.map(|t| t.parse().unwrap()),
        ..ready_release(&naming::release_name("gw", pool), pool, "h")
    }
}

#[test]
fn a_leaving_release_whose_site_has_not_answered_for_offline_after_is_let_go_without_its_uninstall() {
    let a = sites(json!({}));
    let gone = leaving("beijing", Some("2029-12-31T23:58:00Z"));
    let soon = leaving("wuhan", Some("2029-12-31T23:59:30Z"));
    let uninstalling = leaving("xian", None);
    let not_yet_deleted = ObservedRelease {
        cluster: Some("edge/chengdu".into()),
        ..ready_release(&naming::release_name("gw", "chengdu"), "chengdu", "h")
    };
    let owned = vec![gone.clone(), soon, uninstalling, not_yet_deleted.clone()];
    let plan = Scenario::of(&a).over(&clusters()).owning(owned).plan();
    assert_eq!(
        plan.uninstall_skipped,
        [UninstallSkipped {
            pool: "beijing".into(),
            release: gone.name.clone(),
            since: "2029-12-31T23:58:00Z".parse().unwrap(),
            after: Duration::from_secs(60),
        }]
    );
    // Deleted already: not deleted again (nor reported pruned again).
    assert_eq!(plan.prune, [not_yet_deleted.name]);
    // Wuhan's is due in 30 s.
    assert_eq!(plan.uninstall_wait, Some(Duration::from_secs(30)));
    assert!(
        plan.requeue_after.is_some_and(|r| r <= Duration::from_secs(30)),
        "{:?}",
        plan.requeue_after
    );
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
}

#[test]
fn a_site_that_answers_again_within_offline_after_gets_its_uninstall() {
    let mut a = sites(json!({}));
    a.spec.rollout = Some(serde_json::from_value(json!({ "offlineAfter": "5m" })).unwrap());
    let owned = vec![leaving("beijing", Some("2029-12-31T23:58:00Z"))];
    let plan = Scenario::of(&a).over(&clusters()).owning(owned).plan();
    assert!(plan.uninstall_skipped.is_empty(), "{:?}", plan.uninstall_skipped);
    assert_eq!(plan.uninstall_wait, Some(Duration::from_secs(180)));
}

#[test]
fn a_selected_pool_whose_release_is_being_deleted_is_never_let_go() {
    let a = sites(json!({}));
    let owned = vec![leaving("hangzhou", Some("2029-12-31T23:00:00Z"))];
    let plan = Scenario::of(&a).over(&clusters()).owning(owned).plan();
    assert!(plan.uninstall_skipped.is_empty(), "{:?}", plan.uninstall_skipped);
    assert!(plan.prune.is_empty());
}
