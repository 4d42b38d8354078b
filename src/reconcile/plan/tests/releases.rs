//! Plan: building each pool's release: values, overrides, names, placement.

mod charts;
mod hashes;
mod values;

use super::*;

#[test]
fn selection_is_the_union_of_names_and_selector() {
    let a = app(
        json!({ "pools": { "names": ["beijing"], "selector": { "matchLabels": { "region": "east" } } } }),
    );
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert_eq!(applied_pools(&plan), ["beijing", "hangzhou", "shanghai"]);
    assert_eq!(plan.status().ready, "0/3");
}

#[test]
fn helm_release_object_shape() {
    let plan = Scenario::of(&app(json!({}))).over(&pools()).plan();
    let hr = desired(&plan, "hangzhou");
    let name = naming::release_name("gw", "hangzhou");
    assert_eq!(hr["apiVersion"], "helm.toolkit.fluxcd.io/v2");
    assert_eq!(hr["kind"], "HelmRelease");
    assert_eq!(hr["metadata"]["name"], name);
    assert_eq!(hr["metadata"]["namespace"], "edge");
    assert_eq!(
        hr["metadata"]["labels"],
        json!({ "apps.fanout.dev/application": "gw", "apps.fanout.dev/pool": "hangzhou",
                    "app.kubernetes.io/managed-by": "nodepool-fanout" })
    );
    assert_eq!(hr["metadata"]["annotations"]["apps.fanout.dev/pool-name"], "hangzhou");
    assert_eq!(
        hr["metadata"]["annotations"]["apps.fanout.dev/spec-hash"],
        plan.apply[0].spec_hash.as_str()
    );
    assert_eq!(
        hr["metadata"]["ownerReferences"],
        json!([{ "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication", "name": "gw",
                     "uid": "uid-1", "controller": true, "blockOwnerDeletion": true }])
    );
    let spec = &hr["spec"];
    assert_eq!(spec["releaseName"], name);
    assert_eq!(spec["interval"], "10m");
    assert_eq!(
        spec["chart"]["spec"],
        json!({ "chart": "ingress-gateway", "version": "1.0.0",
                    "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } })
    );
    assert!(spec.get("targetNamespace").is_none() && spec.get("suspend").is_none());
}

#[test]
fn an_override_suspends_its_pools_release() {
    let a = app(json!({ "overrides": [ { "pools": { "names": ["shanghai"] }, "suspend": true } ] }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(desired(&plan, "hangzhou")["spec"].get("suspend").is_none());
    assert_eq!(desired(&plan, "shanghai")["spec"]["suspend"], true);
}

#[test]
fn helm_release_options_pass_through() {
    let a = app(json!({ "helmRelease": {
            "install": { "remediation": { "retries": 3 }, "createNamespace": true },
            "upgrade": { "cleanupOnFail": true }, "driftDetection": { "mode": "enabled" },
            "timeout": "5m", "maxHistory": 2, "serviceAccountName": "deployer", "storageNamespace": "edge",
            "persistentClient": false, "suspend": true,
            "dependsOn": [{ "name": "crds-{{pool.name}}", "namespace": "edge" }]
        } }));
    let spec = desired(&Scenario::of(&a).over(&pools()).plan(), "hangzhou")["spec"].clone();
    assert_eq!(
        spec["install"],
        json!({ "remediation": { "retries": 3 }, "createNamespace": true, "disableTakeOwnership": true })
    );
    assert_eq!(spec["upgrade"]["cleanupOnFail"], true);
    assert_eq!(spec["driftDetection"]["mode"], "enabled");
    assert_eq!((spec["timeout"].clone(), spec["maxHistory"].clone()), (json!("5m"), json!(2)));
    assert_eq!(spec["serviceAccountName"], "deployer");
    assert_eq!(spec["storageNamespace"], "edge");
    assert_eq!(spec["persistentClient"], false);
    assert_eq!(spec["suspend"], true);
    assert_eq!(spec["dependsOn"], json!([{ "name": "crds-hangzhou", "namespace": "edge" }]));
}

#[test]
fn release_name_and_target_namespace_templates() {
    let a = app(
        json!({ "releaseName": "{{app.name}}-{{pool.name}}", "targetNamespace": "edge-{{pool.labels.region}}" }),
    );
    let spec = desired(&Scenario::of(&a).over(&pools()).plan(), "hangzhou")["spec"].clone();
    assert_eq!(spec["releaseName"], "gw-hangzhou");
    assert_eq!(spec["targetNamespace"], "edge-east");
}

#[test]
fn invalid_rendered_names_fail_the_pool() {
    let long = ["{{pool.name}}"; 7].join("-");
    let a = app(json!({ "releaseName": long }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!("{plan:#?}")
    };
    assert_eq!(field, "releaseName");
    assert!(message.contains("at most 53"), "{message}");
    let a = app(json!({ "targetNamespace": "Edge.{{pool.name}}" }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(
        matches!(outcome(&plan, "hangzhou"), Outcome::Failed { field, .. } if field == "targetNamespace")
    );
}

#[test]
fn duplicate_release_names_fail_both_pools() {
    let a = app(json!({ "releaseName": "{{app.name}}-{{pool.labels.region}}" }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    for pool in ["hangzhou", "shanghai"] {
        let Outcome::Failed { field, message } = outcome(&plan, pool) else {
            panic!("{plan:#?}")
        };
        assert_eq!(field, "releaseName");
        assert!(message.contains("\"gw-east\" for pools hangzhou, shanghai"), "{message}");
    }
    assert!(plan.apply.is_empty());
    assert!(plan.has_errors());
}

#[test]
fn one_bad_pool_does_not_stop_the_others() {
    let mut ps = pools();
    ps[0].labels.insert("zone".into(), "a".into());
    let a = app(json!({ "overrides": [
            { "pools": { "selector": {} }, "values": { "x": "ok" } },
            { "pools": { "selector": {} }, "values": { "controller": { "image": "{{pool.labels.zone}}" } } }
        ] }));
    let owned = vec![ready_release(
        &naming::release_name("gw", "shanghai"),
        "shanghai",
        "old",
    )];
    let plan = Scenario::of(&a).over(&ps).owning(owned).plan();
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
    let failed = plan.pools.iter().find(|p| p.pool == "shanghai").unwrap();
    let Outcome::Failed { field, message } = &failed.outcome else {
        panic!("{plan:#?}")
    };
    assert_eq!(field, "overrides[1].values.controller.image");
    assert!(message.starts_with("unknown variable pool.labels.zone"), "{message}");
    assert!(failed
        .to_string()
        .starts_with("pool \"shanghai\": overrides[1].values.controller.image: unknown variable"));
    assert!(plan.prune.is_empty(), "a failed pool's release must stay");
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert_eq!(stalled.reason, "InvalidPoolConfig");
}

#[test]
fn foreign_name_is_a_conflict_never_applied_or_pruned() {
    let taken = naming::release_name("gw", "hangzhou");
    let plan = Scenario::of(&app(json!({}))).over(&pools()).beside(&[&taken]).plan();
    assert_eq!(outcome(&plan, "hangzhou"), &Outcome::Conflict { name: taken.clone() });
    assert_eq!(applied_pools(&plan), ["shanghai"]);
    assert!(plan.prune.is_empty());
    assert_eq!(plan.status().pools[0].reason, "NameConflict");
}

#[test]
fn deselected_pools_are_pruned() {
    let gone = naming::release_name("gw", "beijing");
    let renamed = "gw-old-name".to_string();
    let owned = vec![
        ready_release(&gone, "beijing", "h"),
        ready_release(&renamed, "hangzhou", "h"),
    ];
    let plan = Scenario::of(&app(json!({}))).over(&pools()).owning(owned).plan();
    assert_eq!(plan.prune, [gone, renamed]);
    assert_eq!(plan.status().selected_pools, 2);
}

pub(super) fn with_chart(a: &NodePoolApplication, owned: Vec<ObservedRelease>, chart: &Chart) -> Plan {
    plan(&PlanInput {
        history: None,
        nodes: None,
        app: a,
        pools: &pools().iter().collect::<Vec<_>>(),
        owned: owned.into_iter().map(Arc::new).collect(),
        others: &ListedReleases::default(),
        now: now(),
        chart_ref: None,
        chart: Some(chart),
        hold: None,
        unserved: None,
        clock_since: None,
        memo: None,
        first_install_alone: false,
        analysis: None,
        rendering_changes: Default::default(),
    })
}

#[test]
fn post_renderer_pins_every_workload_kind() {
    let a = app(
        json!({ "placement": { "tolerations": [{ "key": "edge", "operator": "Exists", "effect": "NoSchedule" }] } }),
    );
    let hr = desired(&Scenario::of(&a).over(&pools()).plan(), "hangzhou").clone();
    let patches = hr["spec"]["postRenderers"][0]["kustomize"]["patches"].as_array().unwrap().clone();
    let targets: Vec<_> = patches.iter().map(|p| p["target"].clone()).collect();
    assert_eq!(
        targets,
        [
            json!({ "group": "apps", "kind": "(Deployment|StatefulSet|DaemonSet|ReplicaSet)" }),
            json!({ "group": "batch", "kind": "Job" }),
            json!({ "group": "batch", "kind": "CronJob" }),
            json!({ "version": "v1", "kind": "ReplicationController" }),
            json!({ "version": "v1", "kind": "Pod" })
        ]
    );
    let parsed: Vec<Value> = patches
        .iter()
        .map(|p| serde_saphyr::from_str(p["patch"].as_str().unwrap()).unwrap())
        .collect();
    let pod = json!({ "nodeSelector": { "apps.openyurt.io/nodepool": "hangzhou" },
            "tolerations": [{ "key": "edge", "operator": "Exists", "effect": "NoSchedule" }] });
    assert_eq!(parsed[0]["spec"]["template"]["spec"], pod);
    assert_eq!(parsed[0]["kind"], "Deployment");
    assert_eq!(parsed[1]["spec"]["template"]["spec"], pod);
    assert_eq!(parsed[1]["apiVersion"], "batch/v1");
    assert_eq!(parsed[2]["spec"]["jobTemplate"]["spec"]["template"]["spec"], pod);
    assert_eq!(parsed[3]["spec"]["template"]["spec"], pod);
    // Bare Pods, Helm's test hooks among them.
    assert_eq!(parsed[4]["spec"], pod);
    assert!(parsed.iter().all(|p| p["metadata"]["name"].is_string()));
}

#[test]
fn the_shard_label_is_passed_on_to_every_release() {
    let mut a = app(json!({}));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(desired(&plan, "hangzhou")["metadata"]["labels"]
        .get("sharding.fluxcd.io/key")
        .is_none());
    a.metadata.labels = Some([("sharding.fluxcd.io/key".to_string(), "shard1".to_string())].into());
    let sharded = Scenario::of(&a).over(&pools()).plan();
    for d in &sharded.apply {
        assert_eq!(d.object()["metadata"]["labels"]["sharding.fluxcd.io/key"], "shard1");
    }
}

#[test]
fn no_uid_means_no_owner_reference() {
    let mut a = app(json!({}));
    a.metadata.uid = None;
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(desired(&plan, "hangzhou")["metadata"].get("ownerReferences").is_none());
}

#[test]
fn releases_refuse_to_take_over_objects_unless_the_application_allows_it() {
    // helm-controller takes existing objects over by default: a sibling's
    // fixed-name object would pass silently from pool to pool.
    let plain = desired(&Scenario::of(&app(json!({}))).over(&pools()).plan(), "hangzhou")["spec"].clone();
    for action in ["install", "upgrade"] {
        assert_eq!(plain[action], json!({ "disableTakeOwnership": true }), "{action}");
    }
    // Set explicitly, the application's word stands, for the action it names.
    let a = app(json!({ "helmRelease": { "install": { "disableTakeOwnership": false } } }));
    let spec = desired(&Scenario::of(&a).over(&pools()).plan(), "hangzhou")["spec"].clone();
    assert_eq!(spec["install"]["disableTakeOwnership"], false);
    assert_eq!(spec["upgrade"]["disableTakeOwnership"], true);
}

#[test]
fn the_controller_installs_a_new_application_on_one_pool_first_and_sites_all_at_once() {
    let a = app(json!({}));
    let plan = Scenario::of(&a).over(&pools()).planned_by_the_controller().plan();
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
    assert_eq!(outcome(&plan, "shanghai"), &Outcome::Deferred(PoolRollout::Waiting));
    let status = plan.status();
    let shanghai = status.pools.iter().find(|p| p.pool == "shanghai").unwrap();
    assert_eq!(shanghai.reason, "WaitingForFirstInstall");
    assert!(shanghai.message.contains("\"hangzhou\""), "{}", shanghai.message);
    // The first judged, the others go.
    let first = &plan.apply[0];
    let owned = vec![ready_release(&first.name, &first.pool, &first.spec_hash)];
    let next = Scenario::of(&a).over(&pools()).owning(owned).planned_by_the_controller().plan();
    assert_eq!(applied_pools(&next), ["shanghai"]);
    // The first pool's write was refused for good (its status says so,
    // and the application is Stalled for it): it holds no install back,
    // and is written again with the others.
    let mut refused = a.clone();
    refused.status = Some(crate::api::NodePoolApplicationStatus {
        pools: vec![crate::api::PoolStatus {
            pool: "hangzhou".into(),
            reason: "ApplyFailed".into(),
            ..Default::default()
        }],
        conditions: vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: crate::api::conditions::STALLED.into(),
            status: "True".into(),
            reason: "ApplyFailed".into(),
            message: "the API server refused the write".into(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        }],
        ..Default::default()
    });
    let plan = Scenario::of(&refused).over(&pools()).planned_by_the_controller().plan();
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
    // A write a retry may mend (the API server restarting: not Stalled) is
    // no refusal: the first pool goes alone again, as before its failure.
    let mut retried = refused.clone();
    retried.status.as_mut().unwrap().conditions.clear();
    let plan = Scenario::of(&retried).over(&pools()).planned_by_the_controller().plan();
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
    // Releases the template suspends install nothing: all written at once.
    let suspended = app(json!({ "helmRelease": { "suspend": true } }));
    let plan = Scenario::of(&suspended).over(&pools()).planned_by_the_controller().plan();
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
    // Sites that are clusters share no object: every site at once.
    let mut sites = app(json!({ "pools": { "kind": "ClusterProfile", "names": ["hangzhou", "shanghai"] } }));
    sites.spec.placement = Default::default();
    let clusters: Vec<Pool> = pools()
        .into_iter()
        .map(|p| Pool {
            namespace: Some("edge".into()),
            ..p
        })
        .collect();
    let plan = Scenario::of(&sites).over(&clusters).planned_by_the_controller().plan();
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
}

/// A selection that drops most of the fleet at once (a label misspelt in
/// a selector) prunes nothing and says what to do, until an annotation
/// says it is meant (fourth review, item 5).
#[test]
fn a_prune_of_most_of_the_fleet_at_once_is_held_until_it_is_allowed() {
    let leaving = ["p1", "p2", "p3"].map(|p| naming::release_name("gw", p));
    let mut owned: Vec<_> = leaving
        .iter()
        .zip(["p1", "p2", "p3"])
        .map(|(r, p)| ready_release(r, p, "h"))
        .collect();
    owned.push(ready_release(&naming::release_name("gw", "shanghai"), "shanghai", "h"));
    let a = app(json!({}));
    let plan = Scenario::of(&a).over(&pools()).owning(owned.clone()).plan();
    assert!(plan.prune.is_empty(), "{:?}", plan.prune);
    let status = plan.status();
    let stalled = status.conditions.iter().find(|c| c.type_ == "Stalled").expect("Stalled");
    assert_eq!(stalled.reason, "PruneHeld");
    for said in [
        "3 of this application's 4 HelmRelease(s)",
        "apps.fanout.dev/allow-prune=3",
        "spec.pools",
    ] {
        assert!(stalled.message.contains(said), "{said} in {}", stalled.message);
    }
    assert!(!plan.apply.is_empty(), "the selected pools are still written: {:?}", applied_pools(&plan));

    let mut allowed = a.clone();
    allowed.metadata.annotations =
        Some([(naming::ANNOTATION_ALLOW_PRUNE.to_string(), "3".to_string())].into());
    let plan = Scenario::of(&allowed).over(&pools()).owning(owned.clone()).plan();
    assert_eq!(plan.prune.len(), 3, "allowed");
    assert!(plan.status().conditions.iter().all(|c| c.reason != "PruneHeld"));

    // Half of the fleet, or one release alone, goes without asking.
    let plan = Scenario::of(&a).over(&pools()).owning(owned[1..].to_vec()).plan();
    assert!(plan.prune.is_empty(), "2 of 3 is held");
    let plan = Scenario::of(&a).over(&pools()).owning(owned[2..].to_vec()).plan();
    assert_eq!(plan.prune.len(), 1, "1 of 2 goes");
}
