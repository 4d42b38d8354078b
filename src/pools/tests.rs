use super::*;
use crate::api::PoolKind;
use serde_json::json;

fn pool(name: &str, labels: &[(&str, &str)]) -> Pool {
    Pool {
        name: name.into(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        annotations: Default::default(),
        marks: nodes::Membership::OwnCluster,
        namespace: None,
        health: None,
        cluster_ids: Vec::new(),
    }
}

fn fixture() -> Vec<Pool> {
    vec![
        pool("shanghai", &[("region", "east"), ("tier", "edge")]),
        pool("hangzhou", &[("region", "east")]),
        pool("beijing", &[("region", "north"), ("tier", "core")]),
    ]
}

fn selector(value: serde_json::Value) -> LabelSelector {
    serde_json::from_value(value).unwrap()
}

fn names(selected: &Selected) -> Vec<String> {
    selected.pools.iter().map(|p| p.name.clone()).collect()
}

fn selection(names: &[&str], sel: Option<serde_json::Value>) -> PoolSelection {
    PoolSelection {
        names: names.iter().map(|s| s.to_string()).collect(),
        selector: sel.map(selector),
    }
}

fn matching(sel: serde_json::Value) -> Vec<String> {
    let pools = fixture();
    names(&select(&selection(&[], Some(sel)), &pools).unwrap())
}

#[test]
fn from_object_reads_name_labels_and_annotations() {
    let object = json!({
        "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
        "metadata": { "name": "hz", "labels": { "region": "east" }, "annotations": { "a": "b" } },
        "spec": { "type": "Edge", "labels": { "node-only": "x" } }
    });
    let p = Pool::from_value(&kind::OPENYURT, &object).unwrap();
    assert_eq!(p.name, "hz");
    assert_eq!(p.label_map(), BTreeMap::from([("region".into(), "east".into())]));
    assert_eq!(p.annotation_map(), BTreeMap::from([("a".into(), "b".into())]));
    assert_eq!(p.node_selector(), BTreeMap::from([(kind::OPENYURT_NODE_LABEL.into(), "hz".into())]));
}

#[test]
fn each_kind_marks_its_nodes_its_own_way() {
    let group =
        json!({ "metadata": { "name": "g1", "labels": { "region": "east" } }, "spec": { "nodes": ["n1"] } });
    let p = Pool::from_value(&kind::KUBEEDGE, &group).unwrap();
    assert_eq!(p.node_selector(), BTreeMap::from([(kind::KUBEEDGE_NODE_LABEL.into(), "g1".into())]));
    let unit = json!({ "metadata": { "name": "u1" }, "spec": { "setNode": { "labels": { "site": "1" } } } });
    let p = Pool::from_value(&kind::SUPEREDGE, &unit).unwrap();
    assert_eq!(
        p.node_selector(),
        BTreeMap::from([("u1".into(), kind::SUPEREDGE_NODE_LABEL_VALUE.into())])
    );
    // An application naming its own node label pins by it instead.
    assert_eq!(p.placed_by(Some("site")), BTreeMap::from([("site".into(), "u1".into())]));
    assert_eq!(p.placed_by(None), p.node_selector());
}

#[test]
fn manifests_are_told_apart_by_group_and_kind() {
    let of = |api: &str, kind: &str| kind::kind_of(&json!({ "apiVersion": api, "kind": kind }));
    assert_eq!(of("apps.openyurt.io/v1beta2", "NodePool"), Some(PoolKind::OpenYurt));
    assert_eq!(of("apps.kubeedge.io/v1alpha1", "NodeGroup"), Some(PoolKind::KubeEdge));
    assert_eq!(of("site.superedge.io/v1alpha2", "NodeUnit"), Some(PoolKind::SuperEdge));
    assert_eq!(of("superedge.io/v1", "NodeGroup"), None, "SuperEdge's NodeGroup is not KubeEdge's");
    assert_eq!(of("v1", "Node"), None);
}

#[test]
fn from_object_reads_a_listed_node_pool() {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
        "metadata": { "name": "hz", "labels": { "region": "east" } }
    }))
    .unwrap();
    let p = Pool::from_object(&kind::OPENYURT, &object);
    assert_eq!((p.name.as_str(), p.labels.get("region").unwrap().as_str()), ("hz", "east"));
    assert!(p.annotations.is_empty());
}

#[test]
fn from_object_without_labels_has_empty_maps() {
    let p = Pool::from_value(&kind::OPENYURT, &json!({ "metadata": { "name": "hz" } })).unwrap();
    assert!(p.labels.is_empty() && p.annotations.is_empty());
}

#[test]
fn from_object_rejects_missing_name_and_bad_maps() {
    assert_eq!(
        Pool::from_value(&kind::KUBEEDGE, &json!({ "metadata": {} })),
        Err(PoolError::MissingName { kind: "NodeGroup" })
    );
    let bad = json!({ "metadata": { "name": "hz", "labels": { "n": 1 } } });
    let err = Pool::from_value(&kind::OPENYURT, &bad).unwrap_err();
    assert_eq!(err.to_string(), "NodePool \"hz\": metadata.labels must map strings to strings");
}

#[test]
fn names_only_are_sorted_and_deduplicated() {
    let pools = fixture();
    let s = select(&selection(&["shanghai", "beijing", "shanghai"], None), &pools).unwrap();
    assert_eq!(names(&s), ["beijing", "shanghai"]);
    assert!(s.missing.is_empty());
}

#[test]
fn missing_names_are_reported_not_fatal() {
    let pools = fixture();
    let s = select(&selection(&["hangzhou", "wuhan", "atlantis"], None), &pools).unwrap();
    assert_eq!(names(&s), ["hangzhou"]);
    assert_eq!(s.missing, ["atlantis", "wuhan"]);
}

#[test]
fn names_and_selector_are_a_union() {
    let pools = fixture();
    let sel = json!({ "matchLabels": { "region": "east" } });
    let s = select(&selection(&["beijing", "hangzhou"], Some(sel)), &pools).unwrap();
    assert_eq!(names(&s), ["beijing", "hangzhou", "shanghai"]);
}

#[test]
fn empty_selector_matches_everything() {
    assert_eq!(matching(json!({})), ["beijing", "hangzhou", "shanghai"]);
}

#[test]
fn match_labels_need_every_pair() {
    assert_eq!(matching(json!({ "matchLabels": { "region": "east", "tier": "edge" } })), ["shanghai"]);
    assert!(matching(json!({ "matchLabels": { "region": "west" } })).is_empty());
}

#[test]
fn in_and_not_in() {
    let in_ =
        json!({ "matchExpressions": [{ "key": "region", "operator": "In", "values": ["north", "east"] }] });
    assert_eq!(matching(in_), ["beijing", "hangzhou", "shanghai"]);
    // NotIn also matches pools without the key, as Kubernetes does.
    let not_in = json!({ "matchExpressions": [{ "key": "tier", "operator": "NotIn", "values": ["core"] }] });
    assert_eq!(matching(not_in), ["hangzhou", "shanghai"]);
}

#[test]
fn exists_and_does_not_exist() {
    let exists = json!({ "matchExpressions": [{ "key": "tier", "operator": "Exists" }] });
    assert_eq!(matching(exists), ["beijing", "shanghai"]);
    let absent = json!({ "matchExpressions": [{ "key": "tier", "operator": "DoesNotExist" }] });
    assert_eq!(matching(absent), ["hangzhou"]);
}

#[test]
fn labels_and_expressions_combine_with_and() {
    let sel = json!({
        "matchLabels": { "region": "east" },
        "matchExpressions": [{ "key": "tier", "operator": "Exists" }]
    });
    assert_eq!(matching(sel), ["shanghai"]);
}

#[test]
fn bad_operator_is_an_error() {
    let pools = fixture();
    let sel = json!({ "matchExpressions": [{ "key": "tier", "operator": "Gt", "values": ["1"] }] });
    let err = select(&selection(&[], Some(sel)), &pools).unwrap_err();
    assert_eq!(
        err,
        SelectorError::UnknownOperator {
            key: "tier".into(),
            operator: "Gt".into()
        }
    );
    assert!(err.to_string().contains("In, NotIn, Exists, DoesNotExist"));
}

#[test]
fn in_without_values_is_an_error() {
    let sel = selector(json!({ "matchExpressions": [{ "key": "k", "operator": "In", "values": [] }] }));
    assert_eq!(
        Selector::new(&sel),
        Err(SelectorError::MissingValues {
            key: "k".into(),
            operator: "In".into()
        })
    );
    let sel = selector(json!({ "matchExpressions": [{ "key": "k", "operator": "NotIn" }] }));
    assert!(matches!(Selector::new(&sel), Err(SelectorError::MissingValues { .. })));
}

#[test]
fn exists_with_values_is_an_error() {
    let sel =
        selector(json!({ "matchExpressions": [{ "key": "k", "operator": "Exists", "values": ["v"] }] }));
    let err = Selector::new(&sel).unwrap_err();
    assert_eq!(
        err,
        SelectorError::UnexpectedValues {
            key: "k".into(),
            operator: "Exists".into()
        }
    );
    assert!(err.to_string().contains("remove them"));
}

#[test]
fn keys_with_prefixes_and_dots_match_exactly() {
    let pools = vec![
        pool("a", &[("topology.kubernetes.io/region", "cn-east")]),
        pool("b", &[]),
    ];
    let sel = json!({ "matchLabels": { "topology.kubernetes.io/region": "cn-east" } });
    let s = select(&selection(&[], Some(sel)), &pools).unwrap();
    assert_eq!(names(&s), ["a"]);
}

#[test]
fn contains_checks_names_then_selector() {
    let pools = fixture();
    let by_name = selection(&["beijing"], None);
    assert!(contains(&by_name, &pools[2]).unwrap());
    assert!(!contains(&by_name, &pools[0]).unwrap());
    let by_label = selection(&[], Some(json!({ "matchLabels": { "tier": "edge" } })));
    assert!(contains(&by_label, &pools[0]).unwrap());
    assert!(!contains(&by_label, &pools[1]).unwrap());
    let bad = selection(&[], Some(json!({ "matchExpressions": [{ "key": "k", "operator": "Nope" }] })));
    assert!(contains(&bad, &pools[0]).is_err());
}

#[test]
fn no_pools_selects_nothing() {
    let s = select(&selection(&[], Some(json!({}))), &[]).unwrap();
    assert!(s.pools.is_empty() && s.missing.is_empty());
}
