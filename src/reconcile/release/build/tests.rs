use super::*;
use crate::api::Placement;

#[test]
fn hash_ignores_key_order() {
    let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,{"q":2,"p":3}],"x":null}}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"a":{"x":null,"y":[1,{"p":3,"q":2}]},"b":1}"#).unwrap();
    assert_eq!(spec_hash(&a, &json!({})), spec_hash(&b, &json!({})));
    assert_ne!(spec_hash(&a, &json!({})), spec_hash(&a, &json!({ "l": "v" })));
}

#[test]
fn hash_is_stable() {
    // A change here rewrites every release once after an upgrade.
    assert_eq!(spec_hash(&json!({ "interval": "10m" }), &json!({})), "a0cd0b68163fc982");
}

#[test]
fn canonical_json_sorts_nested_keys() {
    let mut out = String::new();
    canonical(&json!({ "b": [true, "s\"q"], "a": { "d": 1.5, "c": null } }), &mut out);
    assert_eq!(out, r#"{"a":{"c":null,"d":1.5},"b":[true,"s\"q"]}"#);
}

#[test]
fn placement_without_tolerations_sets_only_the_node_selector() {
    let renderers = post_renderers(&Placement::default(), &Pool::named("hz")).unwrap();
    let patch = renderers[0]["kustomize"]["patches"][0]["patch"].as_str().unwrap();
    let body: Value = serde_saphyr::from_str(patch).unwrap();
    assert_eq!(
        body["spec"]["template"]["spec"],
        json!({ "nodeSelector": { "apps.openyurt.io/nodepool": "hz" } })
    );
}

/// Each patch as (target, where its pod spec sits in the patch body).
fn patches(placement: &Placement) -> Vec<(Value, Value)> {
    let renderers = post_renderers(placement, &Pool::named("hz")).unwrap();
    let list = renderers[0]["kustomize"]["patches"].as_array().unwrap().clone();
    list.into_iter()
        .map(|p| (p["target"].clone(), serde_saphyr::from_str(p["patch"].as_str().unwrap()).unwrap()))
        .collect()
}

#[test]
fn every_built_in_kind_that_carries_pods_is_pinned() {
    let selector = json!({ "nodeSelector": { "apps.openyurt.io/nodepool": "hz" } });
    let found = patches(&Placement::default());
    let spec_at = |kind: &str| {
        let (target, body): &(Value, Value) = found
            .iter()
            .find(|(t, _)| {
                t["kind"].as_str().is_some_and(|k| {
                    k == kind || k.contains(&format!("|{kind}")) || k.contains(&format!("({kind}|"))
                })
            })
            .unwrap_or_else(|| panic!("no patch for {kind}: {found:?}"));
        let pointer = match kind {
            "Pod" => "/spec",
            "CronJob" => "/spec/jobTemplate/spec/template/spec",
            _ => "/spec/template/spec",
        };
        (target.clone(), body.pointer(pointer).cloned())
    };
    for kind in [
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CronJob",
        "ReplicationController",
        "Pod",
    ] {
        let (target, spec) = spec_at(kind);
        assert_eq!(spec.as_ref(), Some(&selector), "{kind}: {target}");
    }
    // Core kinds are matched in the core group's version only.
    assert_eq!(spec_at("Pod").0, json!({ "version": "v1", "kind": "Pod" }));
}

#[test]
fn a_custom_workload_is_pinned_at_its_pod_template() {
    let placement: Placement = serde_json::from_value(json!({ "workloads": [
        { "apiVersion": "apps.openyurt.io/v1alpha1", "kind": "YurtStaticSet" },
        { "apiVersion": "example.dev/v1", "kind": "Edge", "podTemplatePath": "spec.workload.template" },
        { "apiVersion": "v1", "kind": "Thing" }
    ] }))
    .unwrap();
    let found = patches(&placement);
    let (target, body) = &found[found.len() - 3];
    assert_eq!(
        target,
        &json!({ "group": "apps.openyurt.io", "version": "v1alpha1", "kind": "YurtStaticSet" })
    );
    assert_eq!(body["apiVersion"], "apps.openyurt.io/v1alpha1");
    assert_eq!(
        body.pointer("/spec/template/spec/nodeSelector/apps.openyurt.io~1nodepool"),
        Some(&json!("hz"))
    );
    let (_, body) = &found[found.len() - 2];
    assert_eq!(
        body.pointer("/spec/workload/template/spec/nodeSelector/apps.openyurt.io~1nodepool"),
        Some(&json!("hz"))
    );
    let (target, _) = &found[found.len() - 1];
    assert_eq!(target, &json!({ "group": "", "version": "v1", "kind": "Thing" }));

    let bad: Placement = serde_json::from_value(json!({ "workloads": [
        { "apiVersion": "v1", "kind": "Thing", "podTemplatePath": "metadata.template" }
    ] }))
    .unwrap();
    let error = post_renderers(&bad, &Pool::named("hz")).unwrap_err();
    assert_eq!(error.field, "placement.workloads[0].podTemplatePath");
}
