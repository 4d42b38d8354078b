//! Unit tests of `plan`.

use super::*;
use crate::api::{ConditionStatus, RolloutPhase};
use serde_json::json;

fn app(spec: Value) -> NodePoolApplication {
    let mut base = json!({
        "pools": { "selector": { "matchLabels": { "region": "east" } } },
        "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0",
            "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } },
        "interval": "10m",
        "values": { "controller": { "replicas": 1, "ingressClass": { "name": "{{pool.name}}" } } },
        "placement": { "valuesPaths": ["controller.nodeSelector"] }
    });
    for (k, v) in spec.as_object().unwrap() {
        base[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "gw", "namespace": "edge", "uid": "uid-1", "generation": 3 },
        "spec": base
    }))
    .unwrap()
}

fn pool(name: &str, region: &str) -> Pool {
    Pool {
        name: name.into(),
        labels: [("region".to_string(), region.to_string())].into(),
        annotations: Default::default(),
    }
}

fn pools() -> Vec<Pool> {
    vec![
        pool("hangzhou", "east"),
        pool("shanghai", "east"),
        pool("beijing", "north"),
    ]
}

fn now() -> Time {
    Time("2030-01-01T00:00:00Z".parse().unwrap())
}

fn run(app: &NodePoolApplication, pools: &[Pool], owned: Vec<ObservedRelease>, foreign: &[&str]) -> Plan {
    plan(&PlanInput {
        nodes: None,
        app,
        pools: &pools.iter().collect::<Vec<_>>(),
        owned,
        others: &ListedReleases {
            names: foreign.iter().map(|s| s.to_string()).collect(),
            taken: BTreeMap::new(),
        },
        now: now(),
        chart_ref: None,
        chart: None,
        hold: None,
    })
}

fn desired(plan: &Plan, pool: &str) -> Value {
    plan.apply
        .iter()
        .find(|d| d.pool == pool)
        .unwrap_or_else(|| panic!("{pool} not applied: {plan:#?}"))
        .object
        .value()
}

fn outcome<'a>(plan: &'a Plan, pool: &str) -> &'a Outcome {
    &plan.pools.iter().find(|p| p.pool == pool).unwrap().outcome
}

fn applied_pools(plan: &Plan) -> Vec<&str> {
    plan.apply.iter().map(|d| d.pool.as_str()).collect()
}

fn ready_release(name: &str, pool: &str, hash: &str) -> ObservedRelease {
    ObservedRelease {
        name: name.into(),
        uid: None,
        pool: Some(pool.into()),
        spec_hash: Some(hash.into()),
        generation: Some(1),
        status: ReleaseStatus {
            state: ReleaseState::Ready,
            reason: "UpgradeSucceeded".into(),
            message: "ok".into(),
            chart_version: Some("1.0.0".into()),
            observed_latest: true,
            ready_since: None,
        },
        chart_ref: None,
        helm_release: None,
        created: None,
        written_at: None,
        live: None,
    }
}

#[test]
fn selection_is_the_union_of_names_and_selector() {
    let a = app(
        json!({ "pools": { "names": ["beijing"], "selector": { "matchLabels": { "region": "east" } } } }),
    );
    let plan = run(&a, &pools(), vec![], &[]);
    assert_eq!(applied_pools(&plan), ["beijing", "hangzhou", "shanghai"]);
    assert_eq!(plan.status.ready, "0/3");
}

#[test]
fn helm_release_object_shape() {
    let plan = run(&app(json!({})), &pools(), vec![], &[]);
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
fn values_are_templated_per_pool_with_node_selector() {
    let plan = run(&app(json!({})), &pools(), vec![], &[]);
    for pool in ["hangzhou", "shanghai"] {
        assert_eq!(
            desired(&plan, pool)["spec"]["values"],
            json!({ "controller": { "replicas": 1, "ingressClass": { "name": pool },
                        "nodeSelector": { "apps.openyurt.io/nodepool": pool } } })
        );
    }
}

#[test]
fn node_selector_goes_to_every_values_path_with_a_custom_label() {
    let a = app(json!({ "placement": { "nodeLabel": "example.com/pool",
            "valuesPaths": ["controller.nodeSelector", "admission.nodeSelector"] } }));
    let values = desired(&run(&a, &pools(), vec![], &[]), "hangzhou")["spec"]["values"].clone();
    assert_eq!(values["controller"]["nodeSelector"], json!({ "example.com/pool": "hangzhou" }));
    assert_eq!(values["admission"]["nodeSelector"], json!({ "example.com/pool": "hangzhou" }));
}

#[test]
fn overrides_apply_in_order_later_wins() {
    let a = app(json!({ "overrides": [
            { "pools": { "names": ["hangzhou"] }, "values": { "controller": { "replicas": 2, "a": 1 } } },
            { "pools": { "selector": { "matchLabels": { "region": "east" } } }, "values": { "controller": { "replicas": 3 } } },
            { "pools": { "names": ["shanghai"] }, "values": { "controller": { "replicas": 4 } } }
        ] }));
    let plan = run(&a, &pools(), vec![], &[]);
    let hz = &desired(&plan, "hangzhou")["spec"]["values"]["controller"];
    assert_eq!((hz["replicas"].clone(), hz["a"].clone()), (json!(3), json!(1)));
    assert_eq!(desired(&plan, "shanghai")["spec"]["values"]["controller"]["replicas"], 4);
}

#[test]
fn null_in_an_override_is_kept_for_helm() {
    let a = app(json!({ "overrides": [
            { "pools": { "names": ["hangzhou"] }, "values": { "controller": { "ingressClass": null } } }
        ] }));
    let plan = run(&a, &pools(), vec![], &[]);
    assert_eq!(desired(&plan, "hangzhou")["spec"]["values"]["controller"]["ingressClass"], Value::Null);
    assert_eq!(
        desired(&plan, "shanghai")["spec"]["values"]["controller"]["ingressClass"]["name"],
        "shanghai"
    );
}

#[test]
fn values_from_keeps_references_in_order_and_renders_names() {
    let a = app(json!({
        "valuesFrom": [{ "kind": "ConfigMap", "name": "common" }],
        "overrides": [
            { "pools": { "names": ["hangzhou"] }, "valuesFrom": [{ "kind": "Secret", "name": "creds-{{pool.name}}", "valuesKey": "v" }] },
            { "pools": { "names": ["shanghai"] }, "valuesFrom": [{ "kind": "Secret", "name": "other" }] }
        ]
    }));
    let plan = run(&a, &pools(), vec![], &[]);
    assert_eq!(
        desired(&plan, "hangzhou")["spec"]["valuesFrom"],
        json!([{ "kind": "ConfigMap", "name": "common" }, { "kind": "Secret", "name": "creds-hangzhou", "valuesKey": "v" }])
    );
}

#[test]
fn suspend_from_app_and_overrides() {
    let a = app(json!({ "suspend": true, "overrides": [
            { "pools": { "names": ["shanghai"] }, "suspend": false }
        ] }));
    let plan = run(&a, &pools(), vec![], &[]);
    assert_eq!(desired(&plan, "hangzhou")["spec"]["suspend"], true);
    assert_eq!(desired(&plan, "shanghai")["spec"]["suspend"], false);
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
    let spec = desired(&run(&a, &pools(), vec![], &[]), "hangzhou")["spec"].clone();
    assert_eq!(spec["install"], json!({ "remediation": { "retries": 3 }, "createNamespace": true }));
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
    let spec = desired(&run(&a, &pools(), vec![], &[]), "hangzhou")["spec"].clone();
    assert_eq!(spec["releaseName"], "gw-hangzhou");
    assert_eq!(spec["targetNamespace"], "edge-east");
}

#[test]
fn invalid_rendered_names_fail_the_pool() {
    let long = ["{{pool.name}}"; 7].join("-");
    let a = app(json!({ "releaseName": long }));
    let plan = run(&a, &pools(), vec![], &[]);
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!("{plan:#?}")
    };
    assert_eq!(field, "releaseName");
    assert!(message.contains("at most 53"), "{message}");
    let a = app(json!({ "targetNamespace": "Edge.{{pool.name}}" }));
    let plan = run(&a, &pools(), vec![], &[]);
    assert!(
        matches!(outcome(&plan, "hangzhou"), Outcome::Failed { field, .. } if field == "targetNamespace")
    );
}

#[test]
fn duplicate_release_names_fail_both_pools() {
    let a = app(json!({ "releaseName": "{{app.name}}-{{pool.labels.region}}" }));
    let plan = run(&a, &pools(), vec![], &[]);
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
    let plan = run(&a, &ps, owned, &[]);
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
    let stalled = plan.status.conditions.iter().find(|c| c.type_ == "Stalled").unwrap();
    assert_eq!(stalled.reason, "InvalidPoolConfig");
}

#[test]
fn values_too_deep_fail_only_the_pools_they_apply_to() {
    let mut deep = json!("x");
    for _ in 0..crate::values::merge::MAX_DEPTH {
        deep = json!({ "a": deep });
    }
    let just_enough = deep.clone();
    let too_deep = json!({ "a": deep });
    let a = app(json!({ "overrides": [
            { "pools": { "names": ["hangzhou"] }, "values": just_enough },
            { "pools": { "names": ["shanghai"] }, "values": too_deep }
        ] }));
    let plan = run(&a, &pools(), vec![], &[]);
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
    let Outcome::Failed { field, message } = outcome(&plan, "shanghai") else {
        panic!("{plan:#?}")
    };
    assert_eq!(field, "overrides[1].values");
    assert_eq!(message, "values nest 65 levels deep, more than the 64 allowed; flatten them");
}

#[test]
fn bad_values_path_fails_the_pool_naming_the_path() {
    let a = app(json!({ "values": { "controller": "off" } }));
    let plan = run(&a, &pools(), vec![], &[]);
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!()
    };
    assert_eq!(field, "placement.valuesPaths[0]");
    assert!(message.contains("\"controller.nodeSelector\""), "{message}");
}

#[test]
fn foreign_name_is_a_conflict_never_applied_or_pruned() {
    let taken = naming::release_name("gw", "hangzhou");
    let plan = run(&app(json!({})), &pools(), vec![], &[&taken]);
    assert_eq!(outcome(&plan, "hangzhou"), &Outcome::Conflict { name: taken.clone() });
    assert_eq!(applied_pools(&plan), ["shanghai"]);
    assert!(plan.prune.is_empty());
    assert_eq!(plan.status.pools[0].reason, "NameConflict");
}

#[test]
fn deselected_pools_are_pruned() {
    let gone = naming::release_name("gw", "beijing");
    let renamed = "gw-old-name".to_string();
    let owned = vec![
        ready_release(&gone, "beijing", "h"),
        ready_release(&renamed, "hangzhou", "h"),
    ];
    let plan = run(&app(json!({})), &pools(), owned, &[]);
    assert_eq!(plan.prune, [gone, renamed]);
    assert_eq!(plan.status.selected_pools, 2);
}

#[test]
fn matching_hashes_are_a_no_op() {
    let a = app(json!({}));
    let first = run(&a, &pools(), vec![], &[]);
    let owned: Vec<_> = first.apply.iter().map(|d| ready_release(&d.name, &d.pool, &d.spec_hash)).collect();
    let second = run(&a, &pools(), owned, &[]);
    assert!(second.apply.is_empty(), "{second:#?}");
    assert_eq!(second.unchanged.len(), 2);
    assert!(second.pools.iter().all(|p| p.outcome == Outcome::Unchanged));
    assert_eq!(second.status.ready, "2/2");
    let ready = second.status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Succeeded"));
    assert_eq!(second.status.chart_version.as_deref(), Some("1.0.0"));
}

fn with_chart(a: &NodePoolApplication, owned: Vec<ObservedRelease>, chart: &Chart) -> Plan {
    plan(&PlanInput {
        nodes: None,
        app: a,
        pools: &pools().iter().collect::<Vec<_>>(),
        owned,
        others: &ListedReleases::default(),
        now: now(),
        chart_ref: None,
        chart: Some(chart),
        hold: None,
    })
}

#[test]
fn values_are_checked_against_the_schema_only_when_they_change() {
    let chart = Chart {
        name: "ingress-gateway".into(),
        version: "1.0.0".into(),
        values: json!({}),
        schema: Some(json!({ "type": "object", "properties": { "controller": { "type": "object",
                "properties": { "replicas": { "type": "integer", "maximum": 2 } } } } })),
    };
    let bad = app(json!({ "overrides": [ { "pools": { "names": ["shanghai"] },
            "values": { "controller": { "replicas": 9 } } } ] }));
    let first = with_chart(&bad, vec![], &chart);
    assert_eq!(applied_pools(&first), ["hangzhou"], "the pool breaking the schema is not written");
    let Outcome::Failed { field, message } = outcome(&first, "shanghai") else {
        panic!("{first:#?}")
    };
    assert_eq!(field, "values");
    assert!(message.contains("/controller/replicas") && message.contains("maximum"), "{message}");

    // A release already written with this very spec was checked then: the
    // check is not repeated on every reconcile.
    let written: Vec<_> = run(&bad, &pools(), vec![], &[])
        .apply
        .iter()
        .map(|d| ready_release(&d.name, &d.pool, &d.spec_hash))
        .collect();
    let again = with_chart(&bad, written, &chart);
    assert!(again.pools.iter().all(|p| p.outcome == Outcome::Unchanged), "{again:#?}");
}

#[test]
fn a_changed_hash_is_applied_again() {
    let a = app(json!({}));
    let name = naming::release_name("gw", "hangzhou");
    let plan = run(&a, &pools(), vec![ready_release(&name, "hangzhou", "stale")], &[]);
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
    assert_eq!(plan.status.pools[0].reason, "Progressing");
    assert_eq!(plan.status.pools[0].message, "updating the HelmRelease");
}

#[test]
fn hashes_differ_per_pool_and_follow_the_spec() {
    let plan = run(&app(json!({})), &pools(), vec![], &[]);
    assert_ne!(plan.apply[0].spec_hash, plan.apply[1].spec_hash);
    let again = run(&app(json!({ "interval": "5m" })), &pools(), vec![], &[]);
    assert_ne!(plan.apply[0].spec_hash, again.apply[0].spec_hash);
    assert_eq!(plan.apply[0].spec_hash.len(), 16);
    let same = run(&app(json!({})), &pools(), vec![], &[]);
    assert_eq!(plan.apply, same.apply);
}

#[test]
fn post_renderer_pins_every_workload_kind() {
    let a = app(
        json!({ "placement": { "tolerations": [{ "key": "edge", "operator": "Exists", "effect": "NoSchedule" }] } }),
    );
    let hr = desired(&run(&a, &pools(), vec![], &[]), "hangzhou").clone();
    let patches = hr["spec"]["postRenderers"][0]["kustomize"]["patches"].as_array().unwrap().clone();
    let targets: Vec<_> = patches.iter().map(|p| p["target"].clone()).collect();
    assert_eq!(
        targets,
        [
            json!({ "group": "apps", "kind": "(Deployment|StatefulSet|DaemonSet)" }),
            json!({ "group": "batch", "kind": "Job" }),
            json!({ "group": "batch", "kind": "CronJob" })
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
    assert!(parsed.iter().all(|p| p["metadata"]["name"].is_string()));
}

#[test]
fn the_shard_label_is_passed_on_to_every_release() {
    let mut a = app(json!({}));
    let plan = run(&a, &pools(), vec![], &[]);
    assert!(desired(&plan, "hangzhou")["metadata"]["labels"]
        .get("sharding.fluxcd.io/key")
        .is_none());
    a.metadata.labels = Some([("sharding.fluxcd.io/key".to_string(), "shard1".to_string())].into());
    let sharded = run(&a, &pools(), vec![], &[]);
    for d in &sharded.apply {
        assert_eq!(d.object.value()["metadata"]["labels"]["sharding.fluxcd.io/key"], "shard1");
    }
}

#[test]
fn no_uid_means_no_owner_reference() {
    let mut a = app(json!({}));
    a.metadata.uid = None;
    let plan = run(&a, &pools(), vec![], &[]);
    assert!(desired(&plan, "hangzhou")["metadata"].get("ownerReferences").is_none());
}

#[test]
fn invalid_selector_blocks_everything() {
    let a =
        app(json!({ "pools": { "selector": { "matchExpressions": [{ "key": "k", "operator": "Near" }] } } }));
    let owned = vec![ready_release("anything", "hangzhou", "h")];
    let plan = run(&a, &pools(), owned, &[]);
    assert!(plan.apply.is_empty() && plan.prune.is_empty() && plan.pools.is_empty());
    assert!(plan.blocked.as_deref().unwrap().starts_with("pools: selector: operator \"Near\""));
    let stalled = plan.status.conditions.iter().find(|c| c.type_ == "Stalled").unwrap();
    assert_eq!(stalled.reason, "InvalidSelector");
}

#[test]
fn invalid_override_selector_blocks_everything() {
    let a = app(
        json!({ "overrides": [{ "pools": { "selector": { "matchExpressions": [{ "key": "k", "operator": "In" }] } } }] }),
    );
    let plan = run(&a, &pools(), vec![], &[]);
    assert!(plan.apply.is_empty());
    assert!(plan.blocked.as_deref().unwrap().starts_with("overrides[0].pools: "), "{:?}", plan.blocked);
}

#[test]
fn missing_named_pools_are_reported() {
    let a = app(json!({ "pools": { "names": ["hangzhou", "atlantis"] } }));
    let plan = run(&a, &pools(), vec![], &[]);
    assert_eq!(plan.missing_pools, ["atlantis"]);
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
}

#[test]
fn status_rolls_up_observed_states() {
    let a = app(json!({}));
    let first = run(&a, &pools(), vec![], &[]);
    let mut owned: Vec<_> =
        first.apply.iter().map(|d| ready_release(&d.name, &d.pool, &d.spec_hash)).collect();
    owned[1].status.state = ReleaseState::Failed;
    owned[1].status.reason = "InstallFailed".into();
    let plan = run(&a, &pools(), owned, &[]);
    let s = &plan.status;
    assert_eq!((s.selected_pools, s.ready_pools, s.ready.as_str()), (2, 1, "1/2"));
    assert_eq!(s.observed_generation, Some(3));
    assert_eq!(s.pools.len(), 2);
    assert_eq!(s.pools[0].ready, ConditionStatus::True);
    assert_eq!(s.pools[1].ready, ConditionStatus::False);
    let ready = s.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "InstallFailed");
    assert_eq!(ready.last_transition_time, now());
}

#[test]
fn observed_release_reads_annotations_and_status() {
    let object = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": "gw-hz-1", "generation": 2,
            "labels": { "apps.fanout.dev/pool": "hz-label" },
            "annotations": { "apps.fanout.dev/pool-name": "hz", "apps.fanout.dev/spec-hash": "abc" } },
        "status": { "observedGeneration": 2, "conditions": [{ "type": "Ready", "status": "True", "reason": "InstallSucceeded", "message": "" }] }
    });
    let dynamic: kube::api::DynamicObject = serde_json::from_value(object.clone()).unwrap();
    let o = ObservedRelease::from_value(&serde_json::to_value(&dynamic).unwrap()).unwrap();
    assert_eq!(
        (o.name.as_str(), o.pool.as_deref(), o.spec_hash.as_deref()),
        ("gw-hz-1", Some("hz"), Some("abc"))
    );
    assert_eq!(o.generation, Some(2));
    assert_eq!(o.status.state, ReleaseState::Ready);
    assert_eq!(ObservedRelease::from_value(&object), Some(o));
}

#[test]
fn observed_release_falls_back_to_the_pool_label() {
    let object = json!({ "metadata": { "name": "r", "labels": { "apps.fanout.dev/pool": "hz" } } });
    assert_eq!(ObservedRelease::from_value(&object).unwrap().pool.as_deref(), Some("hz"));
    assert_eq!(ObservedRelease::from_value(&json!({ "metadata": { "name": "r" } })), None);
}

#[test]
fn a_string_rendering_past_its_limit_fails_that_pool_naming_field_and_limit() {
    let mut pools = pools();
    pools[1].annotations.insert("notes".into(), "n".repeat(100_000));
    let a = app(json!({ "overrides": [{ "pools": { "names": ["shanghai"] },
            "values": { "notes": "{{pool.annotations.notes}}".repeat(10) } }] }));
    let plan = run(&a, &pools, vec![], &[]);
    let Outcome::Failed { field, message } = outcome(&plan, "shanghai") else {
        panic!("{:?}", outcome(&plan, "shanghai"))
    };
    assert_eq!(field, "overrides[0].values.notes");
    assert!(message.starts_with("renders to more than 256 KiB, the limit for one string"), "{message}");
    // The other pools go on.
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
    let reported = plan.status.pools.iter().find(|p| p.pool == "shanghai").unwrap();
    assert_eq!(reported.reason, "InvalidPoolConfig");
}

#[test]
fn a_release_rendering_past_its_limit_fails_naming_the_field_that_passed_it() {
    // Each string fits (200 tags of a 253-character name, 50,600
    // bytes); together they pass the release's limit.
    let values: serde_json::Map<String, Value> =
        (0..24).map(|i| (format!("k{i:02}"), json!("{{app.name}}".repeat(200)))).collect();
    let mut a = app(json!({ "values": values }));
    a.metadata.name = Some("a".repeat(253));
    let plan = run(&a, &pools(), vec![], &[]);
    for pool in ["hangzhou", "shanghai"] {
        let Outcome::Failed { field, message } = outcome(&plan, pool) else {
            panic!("{:?}", outcome(&plan, pool))
        };
        assert_eq!(field, "values.k20", "the 21st string passes 1 MiB");
        assert!(message.contains("more than 1024 KiB"), "{message}");
        assert!(message.contains("the limit for one release"), "{message}");
    }
    assert!(plan.apply.is_empty());
}

#[test]
fn plain_strings_count_towards_the_release_limit_too() {
    let one_pool = |values: Value| {
        let mut a = app(json!({ "values": values }));
        a.spec.pools.selector = None;
        a.spec.pools.names = vec!["hangzhou".into()];
        a
    };
    let a = one_pool(json!({ "big": "x".repeat(600 * 1024), "bigger": "y".repeat(600 * 1024) }));
    let plan = run(&a, &pools(), vec![], &[]);
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!("{:?}", outcome(&plan, "hangzhou"))
    };
    assert_eq!(field, "values.bigger");
    assert!(message.contains("the limit for one release"), "{message}");
    // Below the limit, the same text is written as it is.
    let plan = run(&one_pool(json!({ "big": "x".repeat(600 * 1024) })), &pools(), vec![], &[]);
    let written = desired(&plan, "hangzhou")["spec"]["values"]["big"].as_str().map(str::len);
    assert_eq!(written, Some(600 * 1024));
}

#[test]
fn the_hostile_spec_of_the_review_is_refused_for_every_pool() {
    // A 253-character name and one value holding `{{app.name}}` 20,000
    // times: 240 KB of spec that rendered to 5 MB a pool.
    let mut a = app(json!({ "values": { "blowup": "{{app.name}}".repeat(20_000) } }));
    a.metadata.name = Some("a".repeat(253));
    let plan = run(&a, &pools(), vec![], &[]);
    assert!(plan.apply.is_empty());
    for pool in ["hangzhou", "shanghai"] {
        let Outcome::Failed { field, message } = outcome(&plan, pool) else {
            panic!("{:?}", outcome(&plan, pool))
        };
        assert_eq!(field, "values.blowup");
        assert!(message.contains("holds 20000 `{{`, more than the 256"), "{message}");
    }
}

fn needs_password() -> Chart {
    Chart {
        name: "db".into(),
        version: "1.0.0".into(),
        values: json!({ "replicas": 1 }),
        schema: Some(json!({
            "type": "object",
            "required": ["password"],
            "additionalProperties": false,
            "properties": {
                "password": { "type": "string", "minLength": 8 },
                "replicas": { "type": "integer" },
                "nodeSelector": { "type": "object" }
            }
        })),
    }
}

#[test]
fn a_required_key_a_secret_supplies_is_not_a_failure() {
    let from_secret = json!([{ "kind": "Secret", "name": "db-credentials" }]);
    let a = app(json!({ "values": { "replicas": 2 }, "valuesFrom": from_secret,
            "placement": { "valuesPaths": [] } }));
    let plan = with_chart(&a, vec![], &needs_password());
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"], "{:?}", plan.pools);
    // Without valuesFrom the same values are refused, naming the key.
    let a = app(json!({ "values": { "replicas": 2 }, "placement": { "valuesPaths": [] } }));
    let plan = with_chart(&a, vec![], &needs_password());
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!("{:?}", outcome(&plan, "hangzhou"))
    };
    assert_eq!(field, "values");
    assert!(message.contains("password") && message.contains("required"), "{message}");
}

#[test]
fn with_values_from_a_wrong_type_or_forbidden_key_inline_still_fails() {
    let from_secret = json!([{ "kind": "Secret", "name": "db-credentials" }]);
    for (values, rule) in [
        (json!({ "replicas": "two" }), "type"),
        (json!({ "password": "short" }), "minLength"),
        (json!({ "colour": "blue" }), "additionalProperties"),
    ] {
        let a = app(json!({ "values": values, "valuesFrom": from_secret,
                "placement": { "valuesPaths": [] } }));
        let plan = with_chart(&a, vec![], &needs_password());
        let Outcome::Failed { message, .. } = outcome(&plan, "shanghai") else {
            panic!("{values}: {:?}", outcome(&plan, "shanghai"))
        };
        assert!(message.contains(&format!("({rule})")), "{values}: {message}");
        assert!(!message.contains("(required)"), "the missing password is not reported: {message}");
    }
}

#[test]
fn a_target_path_may_set_a_value_the_inline_values_get_wrong() {
    // Flux sets a targetPath value over everything, the inline values included.
    let token = json!([{ "kind": "Secret", "name": "db", "valuesKey": "pw", "targetPath": "password" }]);
    let a = app(json!({ "values": { "password": "short" }, "valuesFrom": token,
            "placement": { "valuesPaths": [] } }));
    assert_eq!(applied_pools(&with_chart(&a, vec![], &needs_password())), ["hangzhou", "shanghai"]);
}

fn with_taken(app: &NodePoolApplication, owned: Vec<ObservedRelease>, taken: &[(&str, &str, &str)]) -> Plan {
    plan(&PlanInput {
        nodes: None,
        app,
        pools: &pools().iter().collect::<Vec<_>>(),
        owned,
        others: &ListedReleases {
            names: taken.iter().map(|(hr, ..)| hr.to_string()).collect(),
            taken: taken
                .iter()
                .map(|(hr, release, created)| {
                    (
                        ("edge".to_string(), release.to_string()),
                        TakenRelease {
                            name: hr.to_string(),
                            application: Some("other".into()),
                            created: Some(created.to_string()),
                        },
                    )
                })
                .collect(),
        },
        now: now(),
        chart_ref: None,
        chart: None,
        hold: None,
    })
}

#[test]
fn a_helm_release_another_application_drives_is_refused_naming_it() {
    // Both applications render releaseName {{pool.name}}, in one namespace.
    let a = app(json!({ "releaseName": "{{pool.name}}" }));
    let plan = with_taken(&a, vec![], &[("other-hangzhou-1234", "hangzhou", "2030-01-01T00:00:00Z")]);
    let Outcome::HelmReleaseTaken { helm_release, by } = outcome(&plan, "hangzhou") else {
        panic!("{:?}", outcome(&plan, "hangzhou"))
    };
    assert_eq!(helm_release, "edge/hangzhou");
    assert_eq!(by.application.as_deref(), Some("other"));
    assert_eq!(applied_pools(&plan), ["shanghai"], "the other pools go on");
    let reported = plan.status.pools.iter().find(|p| p.pool == "hangzhou").unwrap();
    assert_eq!(reported.reason, "ReleaseNameConflict");
    assert!(reported
        .message
        .contains("HelmRelease other-hangzhou-1234 of NodePoolApplication other"));
    assert!(plan.has_errors());
    let stalled = plan.status.conditions.iter().find(|c| c.type_ == "Stalled").unwrap();
    assert_eq!(stalled.status, "True");
}

#[test]
fn the_older_of_two_releases_driving_one_helm_release_keeps_it_and_neither_is_deleted() {
    let a = app(json!({ "releaseName": "{{pool.name}}" }));
    let mine = naming::release_name("gw", "hangzhou");
    let mut observed = ready_release(&mine, "hangzhou", "old-hash");
    observed.helm_release = Some(("edge".into(), "hangzhou".into()));
    observed.created = Some("2030-01-01T00:00:00Z".into());
    // Ours is older: it goes on being written.
    let later = [("other-hangzhou-1234", "hangzhou", "2030-01-02T00:00:00Z")];
    let plan = with_taken(&a, vec![observed.clone()], &later);
    assert_eq!(outcome(&plan, "hangzhou"), &Outcome::Planned);
    // Ours is newer: refused, and kept, not pruned (its deletion would
    // uninstall the Helm release both drive).
    let earlier = [("other-hangzhou-1234", "hangzhou", "2029-12-31T00:00:00Z")];
    let plan = with_taken(&a, vec![observed], &earlier);
    assert!(matches!(outcome(&plan, "hangzhou"), Outcome::HelmReleaseTaken { .. }));
    assert!(plan.prune.is_empty(), "{:?}", plan.prune);
    assert!(!applied_pools(&plan).contains(&"hangzhou"));
}

#[test]
fn distinct_helm_releases_do_not_clash() {
    // The default release names include the application's name.
    let plan =
        with_taken(&app(json!({})), vec![], &[("other-hangzhou-1234", "hangzhou", "2030-01-01T00:00:00Z")]);
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
}

#[test]
fn a_selection_matching_nothing_prunes_nothing_and_stalls() {
    // A typo in the selector: every site would be uninstalled.
    let a = app(json!({ "pools": { "selector": { "matchLabels": { "regoin": "east" } } } }));
    let hz = naming::release_name("gw", "hangzhou");
    let sh = naming::release_name("gw", "shanghai");
    let owned = vec![
        ready_release(&hz, "hangzhou", "h1"),
        ready_release(&sh, "shanghai", "h2"),
    ];
    let plan = run(&a, &pools(), owned, &[]);
    assert!(plan.prune.is_empty(), "{:?}", plan.prune);
    assert!(plan.apply.is_empty());
    let stalled = plan.status.conditions.iter().find(|c| c.type_ == "Stalled").unwrap();
    assert_eq!(stalled.reason, "NoPoolsSelected");
    assert!(
        stalled.message.contains(r#"selector {"matchLabels":{"regoin":"east"}}"#),
        "{}",
        stalled.message
    );
    assert!(stalled.message.contains("2 HelmRelease(s)"), "{}", stalled.message);
    // The releases left in place are still reported as they are.
    let reported: Vec<&str> = plan.status.pools.iter().map(|p| p.pool.as_str()).collect();
    assert_eq!(reported, ["hangzhou", "shanghai"]);
    assert_eq!(plan.status.ready, "2/2");
    assert!(plan.has_errors());
}

#[test]
fn named_pools_that_all_vanished_prune_nothing_either() {
    let a = app(json!({ "pools": { "names": ["atlantis"] } }));
    let hz = naming::release_name("gw", "hangzhou");
    let plan = run(&a, &pools(), vec![ready_release(&hz, "hangzhou", "h1")], &[]);
    assert!(plan.prune.is_empty());
    let stalled = plan.status.conditions.iter().find(|c| c.type_ == "Stalled").unwrap();
    assert!(stalled.message.contains("names [atlantis]"), "{}", stalled.message);
}

#[test]
fn a_selection_matching_nothing_with_nothing_to_protect_is_not_stalled() {
    let a = app(json!({ "pools": { "selector": { "matchLabels": { "region": "mars" } } } }));
    let plan = run(&a, &pools(), vec![], &[]);
    assert!(plan.blocked.is_none());
    assert!(
        plan.status.conditions.iter().all(|c| c.type_ != "Stalled"),
        "{:?}",
        plan.status.conditions
    );
}

#[test]
fn one_pool_left_in_the_selection_still_prunes_the_others() {
    // Only a selection of nothing is taken for a typo.
    let a = app(json!({ "pools": { "names": ["hangzhou"] } }));
    let sh = naming::release_name("gw", "shanghai");
    let plan = run(&a, &pools(), vec![ready_release(&sh, "shanghai", "h2")], &[]);
    assert_eq!(plan.prune, [sh]);
}

// The rollout, as plan carries it out.

/// Five pools in region east, each with a Ready release of `hash` (or
/// of the current spec when `hash` is None), by pool name.
fn fleet() -> Vec<Pool> {
    ["p1", "p2", "p3", "p4", "p5"].iter().map(|n| pool(n, "east")).collect()
}

fn releases_of(a: &NodePoolApplication, pools: &[Pool], stale: &[&str]) -> Vec<ObservedRelease> {
    let first = run(a, pools, vec![], &[]);
    first
        .apply
        .iter()
        .map(|d| {
            let hash = if stale.contains(&d.pool.as_str()) {
                "old"
            } else {
                d.spec_hash.as_str()
            };
            ready_release(&d.name, &d.pool, hash)
        })
        .collect()
}

fn with_nodes(
    a: &NodePoolApplication,
    pools: &[Pool],
    owned: Vec<ObservedRelease>,
    nodes: &BTreeMap<String, NodeCount>,
) -> Plan {
    plan(&PlanInput {
        nodes: Some(nodes),
        app: a,
        pools: &pools.iter().collect::<Vec<_>>(),
        owned,
        others: &ListedReleases::default(),
        now: now(),
        chart_ref: None,
        chart: None,
        hold: None,
    })
}

fn condition<'a>(
    plan: &'a Plan,
    kind: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    plan.status.conditions.iter().find(|c| c.type_ == kind)
}

fn progressive(extra: Value) -> NodePoolApplication {
    let mut rollout = json!({ "strategy": "Progressive" });
    for (k, v) in extra.as_object().unwrap() {
        rollout[k] = v.clone();
    }
    app(json!({ "rollout": rollout }))
}

#[test]
fn a_progressive_change_writes_one_pool_and_leaves_the_rest_as_they_are() {
    let a = progressive(json!({}));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let plan = run(&a, &fleet(), owned, &[]);
    assert_eq!(applied_pools(&plan), ["p1"]);
    assert_eq!(
        plan.apply[0].object.value()["metadata"]["annotations"]["apps.fanout.dev/written-at"],
        "2030-01-01T00:00:00Z"
    );
    assert_eq!(outcome(&plan, "p2"), &Outcome::Deferred(PoolRollout::Pending));
    assert!(plan.prune.is_empty());
    let rollout = plan.status.rollout.as_ref().unwrap();
    assert_eq!(
        (rollout.phase, rollout.updated, rollout.done, rollout.total),
        (RolloutPhase::Progressing, 1, 0, 5)
    );
    assert_eq!(rollout.progress, "Progressing 0/5");
    let p2 = plan.status.pools.iter().find(|p| p.pool == "p2").unwrap();
    assert_eq!((p2.ready, p2.up_to_date, p2.rollout.as_str()), (ConditionStatus::True, false, "Pending"));
    let p1 = plan.status.pools.iter().find(|p| p.pool == "p1").unwrap();
    assert_eq!((p1.up_to_date, p1.rollout.as_str()), (true, "Updating"));
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "Progressing"));
    assert!(condition(&plan, "Reconciling").is_some());
    assert!(condition(&plan, "Stalled").is_none());
}

#[test]
fn a_pool_done_lets_the_next_start_and_all_done_is_ready() {
    let a = progressive(json!({}));
    let owned = releases_of(&a, &fleet(), &["p3", "p4", "p5"]);
    let plan = run(&a, &fleet(), owned, &[]);
    assert_eq!(applied_pools(&plan), ["p3"]);
    assert_eq!(plan.status.rollout.as_ref().unwrap().done, 2);
    let owned = releases_of(&a, &fleet(), &[]);
    let plan = run(&a, &fleet(), owned, &[]);
    assert!(plan.apply.is_empty());
    assert_eq!(plan.status.rollout.as_ref().unwrap().progress, "Complete 5/5");
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Succeeded"));
    assert!(condition(&plan, "Reconciling").is_none());
}

#[test]
fn a_failed_pool_halts_the_rollout_naming_it_with_fluxs_message() {
    let a = progressive(json!({}));
    let mut owned = releases_of(&a, &fleet(), &["p2", "p3", "p4", "p5"]);
    owned[0].status = ReleaseStatus {
        state: ReleaseState::Stalled,
        reason: "UpgradeFailed".into(),
        message: "Service \"gw\" is invalid: spec.ports[0].port: Invalid value: 70000".into(),
        chart_version: Some("1.0.0".into()),
        observed_latest: true,
        ready_since: None,
    };
    let plan = run(&a, &fleet(), owned, &[]);
    assert!(plan.apply.is_empty(), "no further pool is touched");
    assert!(plan.prune.is_empty());
    for p in ["p2", "p3", "p4", "p5"] {
        assert_eq!(outcome(&plan, p), &Outcome::Deferred(PoolRollout::Halted));
    }
    let stalled = condition(&plan, "Stalled").unwrap();
    assert_eq!(stalled.reason, "RolloutHalted");
    assert!(
        stalled.message.contains("pool \"p1\": UpgradeFailed") && stalled.message.contains("70000"),
        "{}",
        stalled.message
    );
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "RolloutHalted"));
    assert!(ready.message.contains("70000"), "{}", ready.message);
    assert!(condition(&plan, "Reconciling").is_none());
    assert_eq!(plan.status.rollout.as_ref().unwrap().progress, "Halted 0/5 (1 failed)");
}

#[test]
fn the_progress_deadline_fails_a_pool_in_the_status_too() {
    let a = progressive(json!({ "progressDeadline": "5m" }));
    let mut owned = releases_of(&a, &fleet(), &["p2"]);
    owned[0].status.state = ReleaseState::Progressing;
    owned[0].written_at = Some("2029-12-31T23:54:00Z".into());
    let plan = run(&a, &fleet(), owned, &[]);
    let p1 = plan.status.pools.iter().find(|p| p.pool == "p1").unwrap();
    assert_eq!(
        (p1.ready, p1.reason.as_str(), p1.rollout.as_str()),
        (ConditionStatus::False, "ProgressDeadlineExceeded", "Failed")
    );
    assert!(p1.message.contains("progressDeadline (5m)"), "{}", p1.message);
    assert_eq!(condition(&plan, "Stalled").unwrap().reason, "RolloutHalted");
    // Before the deadline: updating, and a look again when it passes.
    let mut owned = releases_of(&a, &fleet(), &["p2"]);
    owned[0].status.state = ReleaseState::Progressing;
    owned[0].written_at = Some("2029-12-31T23:58:00Z".into());
    let plan = run(&a, &fleet(), owned, &[]);
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(181)));
    assert!(plan.apply.is_empty());
}

#[test]
fn steps_set_the_waves() {
    let a = progressive(json!({ "maxUnavailable": 2, "steps": [{ "pools": { "names": ["p5"] } }] }));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let plan = run(&a, &fleet(), owned, &[]);
    assert_eq!(applied_pools(&plan), ["p5"], "the canary first, alone in its wave");
    assert_eq!(plan.status.rollout.as_ref().unwrap().wave.as_deref(), Some("1/2"));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4"]);
    let plan = run(&a, &fleet(), owned, &[]);
    assert_eq!(applied_pools(&plan), ["p1", "p2"]);
    assert_eq!(plan.status.rollout.as_ref().unwrap().wave.as_deref(), Some("2/2"));
}

#[test]
fn a_step_selector_that_cannot_be_read_blocks_everything() {
    let a = progressive(json!({ "steps": [{ "pools": { "selector": {
            "matchExpressions": [{ "key": "k", "operator": "Near" }] } } }] }));
    let plan = run(&a, &fleet(), vec![], &[]);
    assert!(plan.apply.is_empty());
    assert!(plan.blocked.as_deref().unwrap().contains("rollout.steps[0].pools"), "{:?}", plan.blocked);
}

#[test]
fn bad_rollout_settings_block_everything_naming_the_field() {
    let a = progressive(json!({ "progressDeadline": "a while" }));
    let plan = run(&a, &fleet(), vec![], &[]);
    assert!(plan.apply.is_empty());
    assert_eq!(condition(&plan, "Stalled").unwrap().reason, "InvalidRollout");
    assert!(plan.blocked.as_deref().unwrap().contains("rollout.progressDeadline"));
}

#[test]
fn pausing_is_no_new_revision() {
    let running = progressive(json!({}));
    let paused = progressive(json!({ "paused": true }));
    let revision = |a: &NodePoolApplication| run(a, &fleet(), vec![], &[]).status.rollout.unwrap().revision;
    assert_eq!(revision(&running), revision(&paused));
    assert_ne!(revision(&running), revision(&app(json!({ "interval": "5m" }))));
    let owned = releases_of(&paused, &fleet(), &["p1", "p2"]);
    let plan = run(&paused, &fleet(), owned, &[]);
    assert!(plan.apply.is_empty());
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "RolloutPaused"));
    assert!(condition(&plan, "Stalled").is_none(), "a pause is the owner's choice, not a failure");
}

#[test]
fn an_offline_pool_is_left_alone_reported_apart_and_waited_for_by_nobody() {
    let a = progressive(json!({}));
    let nodes: BTreeMap<String, NodeCount> = [
        (
            "p1".to_string(),
            NodeCount {
                ready: 0,
                total: 2,
                changed: Some("2029-12-31T23:00:00Z".parse().unwrap()),
            },
        ),
        (
            "p2".to_string(),
            NodeCount {
                ready: 2,
                total: 3,
                changed: None,
            },
        ),
    ]
    .into();
    let owned = releases_of(&a, &fleet(), &["p1", "p2"]);
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert_eq!(applied_pools(&plan), ["p2"], "p1 is offline: p2 goes instead");
    assert_eq!(outcome(&plan, "p1"), &Outcome::Deferred(PoolRollout::Offline));
    let p1 = plan.status.pools.iter().find(|p| p.pool == "p1").unwrap();
    assert_eq!((p1.offline, p1.nodes.as_deref(), p1.reason.as_str()), (true, Some("0/2"), "PoolOffline"));
    assert_eq!(p1.offline_since.as_deref(), Some("2029-12-31T23:00:00Z"));
    assert!(p1.message.contains("since 2029-12-31T23:00:00Z"), "{}", p1.message);
    let p2 = plan.status.pools.iter().find(|p| p.pool == "p2").unwrap();
    assert_eq!((p2.offline, p2.nodes.as_deref()), (false, Some("2/3")));
    assert_eq!(plan.status.offline_pools, 1);
    // The rest done: Ready, the offline pool counted apart.
    let owned = releases_of(&a, &fleet(), &["p1"]);
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert!(plan.apply.is_empty());
    assert_eq!(plan.status.ready, "4/5 (1 offline)");
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!(ready.status.as_str(), "True", "{}", ready.message);
    assert!(ready.message.contains("1 offline (p1)"), "{}", ready.message);
    // Its nodes back: it catches up.
    let back: BTreeMap<String, NodeCount> = [(
        "p1".to_string(),
        NodeCount {
            ready: 1,
            total: 2,
            changed: None,
        },
    )]
    .into();
    let owned = releases_of(&a, &fleet(), &["p1"]);
    assert_eq!(applied_pools(&with_nodes(&a, &fleet(), owned, &back)), ["p1"]);
}

#[test]
fn an_offline_pools_failed_upgrade_is_not_the_charts_failure() {
    let a = progressive(json!({}));
    let nodes: BTreeMap<String, NodeCount> = [(
        "p1".to_string(),
        NodeCount {
            ready: 0,
            total: 1,
            changed: None,
        },
    )]
    .into();
    let mut owned = releases_of(&a, &fleet(), &["p2"]);
    owned[0].status.state = ReleaseState::Failed;
    owned[0].status.reason = "UpgradeFailed".into();
    owned[0].status.message = "context deadline exceeded".into();
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert_eq!(applied_pools(&plan), ["p2"]);
    assert!(condition(&plan, "Stalled").is_none());
    let p1 = plan.status.pools.iter().find(|p| p.pool == "p1").unwrap();
    assert_eq!(p1.reason, "PoolOffline");
}

#[test]
fn all_at_once_still_writes_everything_and_reports_the_rollout() {
    let a = app(json!({}));
    let owned = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let plan = run(&a, &fleet(), owned, &[]);
    assert_eq!(plan.apply.len(), 5);
    assert_eq!(plan.status.rollout.as_ref().unwrap().progress, "Progressing 0/5");
}

// Drift: what the release holds, not only our annotation.

/// Releases as the API server would hold them after our writes of
/// `a`: live fields included, and what the server adds.
fn at_rest(a: &NodePoolApplication) -> Vec<ObservedRelease> {
    run(a, &fleet(), vec![], &[])
        .apply
        .iter()
        .map(|d| {
            let mut o = ready_release(&d.name, &d.pool, &d.spec_hash);
            let mut live = d.object.value();
            live["spec"]["chart"]["spec"]["reconcileStrategy"] = json!("ChartVersion");
            live["status"] = json!({ "observedGeneration": 1 });
            live["metadata"]["annotations"]["apps.fanout.dev/written-at"] = json!("2029-01-01T00:00:00Z");
            o.live = Some(PackedJson::from_value(&live));
            o.written_at = Some("2029-01-01T00:00:00Z".into());
            o
        })
        .collect()
}

#[test]
fn a_release_at_rest_is_not_written() {
    let a = app(json!({}));
    let plan = run(&a, &fleet(), at_rest(&a), &[]);
    assert!(plan.apply.is_empty(), "{:?}", plan.apply);
}

#[test]
fn a_hand_edit_is_written_back_naming_the_field_whatever_the_rollout() {
    for a in [app(json!({})), progressive(json!({ "paused": true }))] {
        let mut owned = at_rest(&a);
        let mut live: Value = owned[2].live.as_ref().unwrap().value().unwrap();
        live["spec"]["values"]["controller"]["replicas"] = json!(9);
        owned[2].live = Some(PackedJson::from_value(&live));
        let plan = run(&a, &fleet(), owned, &[]);
        assert_eq!(applied_pools(&plan), ["p3"]);
        assert_eq!(plan.apply[0].drift.as_deref(), Some("spec.values.controller.replicas"));
        assert_eq!(
            plan.apply[0].object.value()["metadata"]["annotations"]["apps.fanout.dev/written-at"],
            "2029-01-01T00:00:00Z",
            "the write time stays that of the revision"
        );
        assert_eq!(outcome(&plan, "p3"), &Outcome::Planned);
    }
}
