//! Plan: each pool's values: templated, placed on the values paths,
//! overridden in order, from references, and too deep.
use super::*;

#[test]
fn values_are_templated_per_pool_with_node_selector() {
    let plan = Scenario::of(&app(json!({}))).over(&pools()).plan();
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
    let values = desired(&Scenario::of(&a).over(&pools()).plan(), "hangzhou")["spec"]["values"].clone();
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
    let plan = Scenario::of(&a).over(&pools()).plan();
    let hz = &desired(&plan, "hangzhou")["spec"]["values"]["controller"];
    assert_eq!((hz["replicas"].clone(), hz["a"].clone()), (json!(3), json!(1)));
    assert_eq!(desired(&plan, "shanghai")["spec"]["values"]["controller"]["replicas"], 4);
}

#[test]
fn null_in_an_override_is_kept_for_helm() {
    let a = app(json!({ "overrides": [
            { "pools": { "names": ["hangzhou"] }, "values": { "controller": { "ingressClass": null } } }
        ] }));
    let plan = Scenario::of(&a).over(&pools()).plan();
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
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert_eq!(
        desired(&plan, "hangzhou")["spec"]["valuesFrom"],
        json!([{ "kind": "ConfigMap", "name": "common" }, { "kind": "Secret", "name": "creds-hangzhou", "valuesKey": "v" }])
    );
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
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
    let Outcome::Failed { field, message } = outcome(&plan, "shanghai") else {
        panic!("{plan:#?}")
    };
    assert_eq!(field, "overrides[1].values");
    assert_eq!(message, "values nest 65 levels deep, more than the 64 allowed; flatten them");
}

#[test]
fn a_values_path_that_nests_the_values_too_deep_fails_the_pool() {
    // Admission takes 16 segments at most; past it (a CRD installed by
    // hand, an older one), the values written must still read back.
    let long: Vec<String> = (0..124).map(|i| format!("k{i}")).collect();
    let a = app(json!({ "placement": { "valuesPaths": [long.join(".")] } }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!("{plan:#?}")
    };
    assert_eq!(field, "placement.valuesPaths[0]");
    assert!(message.contains("more than the 64 allowed"), "{message}");
}

#[test]
fn bad_values_path_fails_the_pool_naming_the_path() {
    let a = app(json!({ "values": { "controller": "off" } }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!()
    };
    assert_eq!(field, "placement.valuesPaths[0]");
    assert!(message.contains("\"controller.nodeSelector\""), "{message}");
}
