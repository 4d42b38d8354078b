//! Node pools, of every kind, and which of them an application selects.
//!
//! A pool is an OpenYurt NodePool, a KubeEdge NodeGroup, a SuperEdge
//! NodeUnit (a row each of the table in [`kind`]), or a value of a node
//! label ([`node_label`]). Planning reads every kind as one [`Pool`]: a
//! name, labels to select and template by, and the labels that mark its
//! nodes. [`nodes`] counts each pool's Ready nodes from the Nodes
//! themselves. Pure: nothing here touches the network.
//!
//! Selection matches a pool object's own metadata labels, the ones `kubectl
//! label nodepool` sets, not the labels the framework copies onto its nodes,
//! which say nothing about which applications the pool wants.

pub mod cluster_id;
pub mod kind;
pub mod node_label;
pub mod nodes;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::DynamicObject;
use serde_json::Value;

use crate::api::PoolSelection;
use kind::PoolObjects;

/// What the planner needs to know about a node pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pool {
    pub name: String,
    /// The namespace of a pool of a namespaced kind (a ClusterProfile):
    /// an application selects only those of its own.
    pub namespace: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// How its kind marks the pool's nodes: with its name, what every
    /// node of the pool carries ([`Pool::node_selector`]). Kept rather than
    /// the selector itself, which at ten thousand pools was a map of its
    /// own for each, a tenth of the pools' cache.
    pub marks: nodes::Membership,
    /// A site cluster's health, as its ClusterProfile says it; `None` for
    /// a pool of this cluster, or a profile that says nothing of it.
    pub health: Option<nodes::SiteHealth>,
    /// The names the cluster inventory API gives a site cluster, each
    /// enough to know it in any namespace ([`cluster_id::of_profile`]);
    /// empty for a pool of this cluster.
    pub cluster_ids: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PoolError {
    #[error("a {kind} has no metadata.name; give every pool a name")]
    MissingName { kind: &'static str },
    #[error("{kind} {pool:?}: metadata.{field} must map strings to strings")]
    BadMap {
        kind: &'static str,
        pool: String,
        field: &'static str,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectorError {
    #[error("selector: operator {operator:?} for key {key:?} is not one of In, NotIn, Exists, DoesNotExist")]
    UnknownOperator { key: String, operator: String },
    #[error("selector: operator {operator} for key {key:?} needs at least one value")]
    MissingValues { key: String, operator: String },
    #[error("selector: operator {operator} for key {key:?} takes no values; remove them")]
    UnexpectedValues { key: String, operator: String },
}

impl Pool {
    /// An OpenYurt pool of the given name with no labels, for tests and
    /// callers that know only the name.
    pub fn named(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            marks: kind::OPENYURT.membership(),
            name,
            ..Self::default()
        }
    }

    /// The labels every node of the pool carries: the nodeSelector its
    /// release gets, and how its nodes are counted.
    pub fn node_selector(&self) -> BTreeMap<String, String> {
        self.marks.selector(&self.name)
    }

    /// The labels that pin a workload to the pool's nodes: `{label: name}`
    /// where the application names its own node label
    /// (`placement.nodeLabel`), else the labels the pool's kind puts on its
    /// nodes.
    pub fn placed_by(&self, node_label: Option<&str>) -> BTreeMap<String, String> {
        match node_label {
            Some(label) => BTreeMap::from([(label.to_string(), self.name.clone())]),
            None => self.node_selector(),
        }
    }

    /// Reads a pool object listed from the API server, where names and
    /// label maps are already checked.
    pub fn from_object(kind: &PoolObjects, object: &DynamicObject) -> Self {
        let (name, labels, annotations) = kind::read_meta(&object.metadata);
        Self {
            marks: kind.membership(),
            namespace: object.metadata.namespace.clone().filter(|_| kind.namespaced),
            health: nodes::SiteHealth::of_profile(&object.data),
            cluster_ids: cluster_ids(kind, &name, &labels, &object.data),
            name,
            labels,
            annotations,
        }
    }

    /// Reads a pool manifest from a file, where anything may be missing.
    pub fn from_value(kind: &PoolObjects, object: &Value) -> Result<Self, PoolError> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or(PoolError::MissingName { kind: kind.kind() })?
            .to_string();
        let labels = string_map(kind, object, &name, "labels")?;
        let annotations = string_map(kind, object, &name, "annotations")?;
        let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str);
        Ok(Self {
            marks: kind.membership(),
            namespace: namespace.filter(|_| kind.namespaced).map(str::to_string),
            health: nodes::SiteHealth::of_profile(object),
            cluster_ids: cluster_ids(kind, &name, &labels, object),
            name,
            labels,
            annotations,
        })
    }
}

/// A pool's [`Pool::cluster_ids`]: those of a site cluster's profile.
fn cluster_ids(
    kind: &PoolObjects,
    name: &str,
    labels: &BTreeMap<String, String>,
    object: &Value,
) -> Vec<String> {
    if kind.marks != kind::NodeMark::OwnCluster {
        return Vec::new();
    }
    cluster_id::of_profile(name, labels, object)
}

fn string_map(
    kind: &PoolObjects,
    object: &Value,
    pool: &str,
    field: &'static str,
) -> Result<BTreeMap<String, String>, PoolError> {
    let bad = || PoolError::BadMap {
        kind: kind.kind(),
        pool: pool.to_string(),
        field,
    };
    match object.get("metadata").and_then(|m| m.get(field)) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// A label selector checked once, so matching cannot fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Selector {
    /// Checks a Kubernetes label selector. An empty selector matches every
    /// pool, as it does for the API server.
    pub fn new(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements: Vec<Requirement> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::In(k.clone(), BTreeSet::from([v.clone()])))
            .collect();
        for expression in selector.match_expressions.iter().flatten() {
            requirements.push(requirement(expression)?);
        }
        Ok(Self { requirements })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, values) => labels.get(k).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(k, values) => labels.get(k).is_none_or(|v| !values.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

fn requirement(expression: &LabelSelectorRequirement) -> Result<Requirement, SelectorError> {
    let key = expression.key.clone();
    let operator = expression.operator.clone();
    let values: BTreeSet<String> = expression.values.iter().flatten().cloned().collect();
    let needs_values = matches!(operator.as_str(), "In" | "NotIn");
    match (needs_values, values.is_empty()) {
        (true, true) => return Err(SelectorError::MissingValues { key, operator }),
        (false, false) if matches!(operator.as_str(), "Exists" | "DoesNotExist") => {
            return Err(SelectorError::UnexpectedValues { key, operator })
        }
        _ => {}
    }
    match operator.as_str() {
        "In" => Ok(Requirement::In(key, values)),
        "NotIn" => Ok(Requirement::NotIn(key, values)),
        "Exists" => Ok(Requirement::Exists(key)),
        "DoesNotExist" => Ok(Requirement::DoesNotExist(key)),
        _ => Err(SelectorError::UnknownOperator { key, operator }),
    }
}

/// The pools a selection picks, and the names it lists that no pool has.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Selected<'a> {
    /// Sorted by name, each pool once.
    pub pools: Vec<&'a Pool>,
    /// Listed in `names` but not found; a pool may appear later, so this is
    /// reported, not fatal.
    pub missing: Vec<String>,
}

/// The union of the named pools and the pools the selector matches.
pub fn select<'a>(
    selection: &PoolSelection,
    pools: impl IntoIterator<Item = &'a Pool>,
) -> Result<Selected<'a>, SelectorError> {
    let selector = selection.selector.as_ref().map(Selector::new).transpose()?;
    // Sorted and searched rather than put in two ordered maps: one sort of
    // references, where ten thousand map inserts, twice, were a twentieth
    // of a resync. Of two pools of one name, the later one counts, as a map
    // would keep it.
    let mut all: Vec<&Pool> = pools.into_iter().collect();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all.dedup_by(|later, kept| {
        let same = later.name == kept.name;
        if same {
            *kept = *later;
        }
        same
    });
    let named: BTreeSet<&str> = selection.names.iter().map(String::as_str).collect();
    let missing = named
        .iter()
        .filter(|name| all.binary_search_by(|p| p.name.as_str().cmp(name)).is_err())
        .map(|name| name.to_string())
        .collect();
    let chosen = all
        .into_iter()
        .filter(|p| {
            named.contains(p.name.as_str()) || selector.as_ref().is_some_and(|s| s.matches(&p.labels))
        })
        .collect();
    Ok(Selected {
        pools: chosen,
        missing,
    })
}

/// Whether a pool is in a selection; used for overrides, where an invalid
/// selector has already been reported.
pub fn contains(selection: &PoolSelection, pool: &Pool) -> Result<bool, SelectorError> {
    Ok(picker(selection)?(&pool.name, &pool.labels))
}

/// Whether a pool of the given name and labels is one `selection` picks,
/// as [`contains`] says, with the selector checked once for a whole cache
/// of pools.
pub fn picker(
    selection: &PoolSelection,
) -> Result<impl Fn(&str, &BTreeMap<String, String>) -> bool + '_, SelectorError> {
    let selector = selection.selector.as_ref().map(Selector::new).transpose()?;
    // Looked up once per cached pool: a list of a thousand names scanned
    // for each of ten thousand pools would be ten million comparisons.
    let names: BTreeSet<&str> = selection.names.iter().map(String::as_str).collect();
    Ok(move |name: &str, labels: &BTreeMap<String, String>| {
        names.contains(name) || selector.as_ref().is_some_and(|s| s.matches(labels))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PoolKind;
    use serde_json::json;

    fn pool(name: &str, labels: &[(&str, &str)]) -> Pool {
        Pool {
            name: name.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            annotations: BTreeMap::new(),
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
        assert_eq!(p.labels, BTreeMap::from([("region".into(), "east".into())]));
        assert_eq!(p.annotations, BTreeMap::from([("a".into(), "b".into())]));
        assert_eq!(p.node_selector(), BTreeMap::from([(kind::OPENYURT_NODE_LABEL.into(), "hz".into())]));
    }

    #[test]
    fn each_kind_marks_its_nodes_its_own_way() {
        let group = json!({ "metadata": { "name": "g1", "labels": { "region": "east" } }, "spec": { "nodes": ["n1"] } });
        let p = Pool::from_value(&kind::KUBEEDGE, &group).unwrap();
        assert_eq!(p.node_selector(), BTreeMap::from([(kind::KUBEEDGE_NODE_LABEL.into(), "g1".into())]));
        let unit =
            json!({ "metadata": { "name": "u1" }, "spec": { "setNode": { "labels": { "site": "1" } } } });
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
        assert_eq!((p.name.as_str(), p.labels["region"].as_str()), ("hz", "east"));
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
        let in_ = json!({ "matchExpressions": [{ "key": "region", "operator": "In", "values": ["north", "east"] }] });
        assert_eq!(matching(in_), ["beijing", "hangzhou", "shanghai"]);
        // NotIn also matches pools without the key, as Kubernetes does.
        let not_in =
            json!({ "matchExpressions": [{ "key": "tier", "operator": "NotIn", "values": ["core"] }] });
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
}
