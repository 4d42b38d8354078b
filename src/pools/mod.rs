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

/// A pool's labels, sorted by key: a vector, since every shard caches
/// every pool of the cluster, and a map's first node has room for eleven.
pub type Labels = litemap::LiteMap<String, String>;

/// A pool's annotations, kept as its labels are, and for the same reason.
pub type Annotations = litemap::LiteMap<String, String>;

/// What the planner needs to know about a node pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pool {
    pub name: String,
    /// The namespace of a pool of a namespaced kind (a ClusterProfile):
    /// an application selects only those of its own.
    pub namespace: Option<String>,
    pub labels: Labels,
    pub annotations: Annotations,
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

    /// Its labels as a map of their own, for what keeps them apart from
    /// the pool.
    pub fn label_map(&self) -> BTreeMap<String, String> {
        self.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Its annotations as a map of their own, as its labels.
    pub fn annotation_map(&self) -> BTreeMap<String, String> {
        self.annotations.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
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
            labels: labels.into_iter().collect(),
            annotations: annotations.into_iter().collect(),
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
            labels: labels.into_iter().collect(),
            annotations: annotations.into_iter().collect(),
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

    /// Each of its requirements that a label have one of some values
    /// (`matchLabels`, `In`): every pool it matches carries one of them, so
    /// an index of the pools by label finds them without reading the rest.
    pub fn label_values(&self) -> impl Iterator<Item = (&str, &BTreeSet<String>)> {
        self.requirements.iter().filter_map(|r| match r {
            Requirement::In(key, values) => Some((key.as_str(), values)),
            _ => None,
        })
    }

    pub fn matches(&self, labels: &Labels) -> bool {
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
pub fn picker(selection: &PoolSelection) -> Result<impl Fn(&str, &Labels) -> bool + '_, SelectorError> {
    let selector = selection.selector.as_ref().map(Selector::new).transpose()?;
    // Looked up once per cached pool: a list of a thousand names scanned
    // for each of ten thousand pools would be ten million comparisons.
    let names: BTreeSet<&str> = selection.names.iter().map(String::as_str).collect();
    Ok(move |name: &str, labels: &Labels| {
        names.contains(name) || selector.as_ref().is_some_and(|s| s.matches(labels))
    })
}

#[cfg(test)]
mod tests;
