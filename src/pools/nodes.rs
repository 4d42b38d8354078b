//! Each pool's nodes, from the Nodes themselves: how many there are and how
//! many are Ready. Read from the labels that mark a pool's nodes and the
//! Ready condition alone, so it serves every kind of pool alike (OpenYurt,
//! KubeEdge and SuperEdge each count ready nodes in their own status, each
//! in its own way, and a node label has no status at all).

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;

use crate::api::Pools;
use crate::pools::kind;

/// A pool's nodes; for a site that is a cluster, its control plane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NodeCount {
    pub ready: u32,
    pub total: u32,
    /// The latest Ready transition of any of its nodes: for an offline
    /// pool, when its last node stopped being Ready.
    pub changed: Option<Timestamp>,
    /// What was counted.
    pub of: Counted,
}

/// What a [`NodeCount`] counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Counted {
    /// The pool's nodes in this cluster.
    #[default]
    Nodes,
    /// A site cluster's control plane, one, Ready when its ClusterProfile's
    /// `ControlPlaneHealthy` condition says so ([`SiteHealth`]).
    ControlPlane,
    /// A site cluster helm-controller cannot reach (connection refused, a
    /// timeout), as its release's Ready condition says: none Ready.
    Connection,
}

/// The condition of a ClusterProfile that says whether the cluster's
/// control plane is healthy (SIG-Multicluster's cluster inventory API).
pub const CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";

/// A site cluster's health as its ClusterProfile says it. Only whether it
/// is healthy and since when: a cluster manager may rewrite the message
/// every few seconds, and that is no change to plan on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SiteHealth {
    /// `ControlPlaneHealthy` is True; False and Unknown are not healthy.
    pub healthy: bool,
    pub since: Option<Timestamp>,
}

impl SiteHealth {
    /// From a ClusterProfile's `status.conditions`; `None` when it has no
    /// `ControlPlaneHealthy` condition (its manager does not say).
    pub fn of_profile(object: &serde_json::Value) -> Option<Self> {
        let conditions = object.pointer("/status/conditions")?.as_array()?;
        let condition = conditions.iter().find(|c| c["type"] == CONTROL_PLANE_HEALTHY)?;
        Some(Self {
            healthy: condition["status"] == "True",
            since: condition["lastTransitionTime"].as_str().and_then(|t| t.parse().ok()),
        })
    }

    /// The site counted as one control plane, Ready when healthy.
    pub fn count(self) -> NodeCount {
        NodeCount {
            ready: u32::from(self.healthy),
            total: 1,
            changed: self.since,
            of: Counted::ControlPlane,
        }
    }
}

impl NodeCount {
    /// Nodes, none of them Ready: the site is cut off, or down. Helm's
    /// wait there times out and would look like a broken chart.
    pub fn offline(self) -> bool {
        self.total > 0 && self.ready == 0
    }
}

impl std::fmt::Display for NodeCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.of, self.ready > 0) {
            (Counted::ControlPlane, true) => f.write_str("control plane healthy"),
            (Counted::ControlPlane, false) => f.write_str("control plane not healthy"),
            (Counted::Connection, _) => f.write_str("unreachable"),
            (Counted::Nodes, _) => write!(f, "{}/{}", self.ready, self.total),
        }
    }
}

/// The site clusters' health by name, counted as [`count`] counts pools'
/// nodes: a site whose profile says nothing of its health is left out
/// (never offline by the profile's word).
pub fn count_sites<'a>(
    sites: impl IntoIterator<Item = &'a crate::pools::Pool>,
) -> BTreeMap<String, NodeCount> {
    sites.into_iter().filter_map(|p| Some((p.name.clone(), p.health?.count()))).collect()
}

/// Whether a node's Ready condition is True. A node the node controller
/// has not heard from turns Unknown: that is not Ready either.
pub fn is_ready(node: &Node) -> bool {
    ready_condition(node).is_some_and(|c| c.status == "True")
}

fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")
}

/// How a node's labels name the pools it belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Membership {
    /// The value of this label names the pool: OpenYurt's
    /// `apps.openyurt.io/nodepool`, KubeEdge's `apps.kubeedge.io/belonging-to`,
    /// a `NodeLabel` application's label, or `placement.nodeLabel`.
    /// Borrowed where it is a kind's own: every cached pool holds one, and
    /// a copy each was 32 bytes a pool.
    Label(Cow<'static, str>),
    /// Every label with this value is named after a pool: SuperEdge marks a
    /// unit's nodes `<unit>: nodeunits.superedge.io`.
    Marker(&'static str),
    /// The site is a cluster of its own: no node here belongs to it. (A
    /// pool made without a kind marks no node either.)
    #[default]
    OwnCluster,
}

impl kind::PoolObjects {
    /// How the framework's own controller labels the nodes of a pool.
    pub fn membership(&self) -> Membership {
        match self.marks {
            kind::NodeMark::Label(label) => Membership::Label(Cow::Borrowed(label)),
            kind::NodeMark::Marker(value) => Membership::Marker(value),
            kind::NodeMark::OwnCluster => Membership::OwnCluster,
        }
    }
}

impl Membership {
    /// How the nodes of an application's pools are told apart: its own
    /// `placement.nodeLabel` where it names one, else its kind's.
    pub fn of(pools: &Pools, placement_label: Option<&str>) -> Self {
        match (placement_label, kind::objects(pools.kind)) {
            (Some(label), _) => Self::Label(Cow::Owned(label.to_string())),
            (None, Some(objects)) => objects.membership(),
            (None, None) => Self::Label(Cow::Owned(pools.node_label.clone().unwrap_or_default())),
        }
    }

    /// The labels that mark the nodes of the pool `name`.
    pub fn selector(&self, name: &str) -> BTreeMap<String, String> {
        match self {
            Self::Label(label) => BTreeMap::from([(label.to_string(), name.to_string())]),
            Self::Marker(value) => BTreeMap::from([(name.to_string(), value.to_string())]),
            Self::OwnCluster => BTreeMap::new(),
        }
    }

    /// The pools a node of these labels belongs to.
    pub fn pools<'a>(
        &'a self,
        labels: &'a BTreeMap<String, String>,
    ) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        match self {
            Self::Label(label) => Box::new(labels.get(label.as_ref()).map(String::as_str).into_iter()),
            Self::Marker(value) => {
                let value: &'static str = value;
                Box::new(labels.iter().filter(move |(_, v)| v.as_str() == value).map(|(k, _)| k.as_str()))
            }
            Self::OwnCluster => Box::new(std::iter::empty()),
        }
    }
}

/// Counts nodes by the pools they belong to.
pub fn count<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    membership: &Membership,
) -> BTreeMap<String, NodeCount> {
    let mut pools: BTreeMap<String, NodeCount> = BTreeMap::new();
    let no_labels = BTreeMap::new();
    for node in nodes {
        let labels = node.metadata.labels.as_ref().unwrap_or(&no_labels);
        for pool in membership.pools(labels) {
            count_node(pools.entry(pool.to_string()).or_default(), node);
        }
    }
    pools
}

fn count_node(entry: &mut NodeCount, node: &Node) {
    entry.total += 1;
    entry.ready += u32::from(is_ready(node));
    let changed = ready_condition(node).and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0);
    entry.changed = entry.changed.max(changed);
}

/// A Node cut down to what [`count`] reads, before it enters the cache:
/// its name, labels and Ready condition. A Node's status carries images,
/// addresses and capacity, many kilobytes each, across thousands of nodes.
pub fn strip(node: Node) -> Node {
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == "Ready")
        .map(|c| NodeCondition {
            type_: c.type_,
            status: c.status,
            last_transition_time: c.last_transition_time,
            ..NodeCondition::default()
        })
        .collect::<Vec<_>>();
    Node {
        metadata: ObjectMeta {
            name: node.metadata.name,
            labels: node.metadata.labels,
            resource_version: node.metadata.resource_version,
            uid: node.metadata.uid,
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(NodeStatus {
            conditions: Some(ready),
            ..NodeStatus::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pools::kind;
    use serde_json::json;

    fn node(name: &str, pool: Option<&str>, ready: Option<&str>) -> Node {
        let labels = pool.map(|p| json!({ "apps.openyurt.io/nodepool": p })).unwrap_or(json!({}));
        let conditions = ready
            .map(|s| {
                let since = format!("2030-01-01T00:0{}:00Z", name.len() % 10);
                json!([{ "type": "MemoryPressure", "status": "False" },
                       { "type": "Ready", "status": s, "lastTransitionTime": since, "message": "kubelet is posting" }])
            })
            .unwrap_or(json!([]));
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": labels, "annotations": { "big": "x".repeat(100) } },
            "spec": { "podCIDR": "10.0.0.0/24" },
            "status": { "conditions": conditions, "images": [{ "names": ["a"], "sizeBytes": 1 }] }
        }))
        .unwrap()
    }

    #[test]
    fn counts_ready_and_total_per_pool() {
        let nodes = [
            node("a1", Some("a"), Some("True")),
            node("a2", Some("a"), Some("False")),
            node("b1", Some("b"), Some("Unknown")),
            node("b2", Some("b"), None),
            node("stray", None, Some("True")),
        ];
        let counts = count(&nodes, &yurt());
        assert_eq!(counts.len(), 2, "a node of no pool counts nowhere");
        assert_eq!((counts["a"].ready, counts["a"].total), (1, 2));
        assert_eq!((counts["b"].ready, counts["b"].total), (0, 2));
        // b2 reports no condition; b1 ("b1", 2 characters) turned Unknown at minute 2.
        assert_eq!(counts["b"].changed.map(|t| t.to_string()).as_deref(), Some("2030-01-01T00:02:00Z"));
        assert!(!counts["a"].offline());
        assert!(counts["b"].offline(), "Unknown is not Ready");
        assert!(!NodeCount::default().offline(), "an empty pool is not offline");
        assert_eq!(counts["a"].to_string(), "1/2");
    }

    #[test]
    fn the_label_is_the_pool_kinds_own() {
        let mut n = node("x", None, Some("True"));
        n.metadata.labels = Some([("site".to_string(), "s1".to_string())].into());
        let site = Membership::Label("site".into());
        assert_eq!((count([&n], &site)["s1"].ready, count([&n], &site)["s1"].total), (1, 1));
        assert!(count([&n], &yurt()).is_empty());
    }

    #[test]
    fn superedge_nodes_are_counted_in_every_unit_that_marks_them() {
        let mut n = node("x", None, Some("True"));
        n.metadata.labels = Some(
            [
                ("u1".to_string(), kind::SUPEREDGE_NODE_LABEL_VALUE.to_string()),
                ("u2".to_string(), kind::SUPEREDGE_NODE_LABEL_VALUE.to_string()),
                ("zone".to_string(), "a".to_string()),
            ]
            .into(),
        );
        let units = Membership::Marker(kind::SUPEREDGE_NODE_LABEL_VALUE);
        assert_eq!(count([&n], &units).keys().collect::<Vec<_>>(), ["u1", "u2"]);
    }

    #[test]
    fn membership_follows_the_kind_unless_placement_names_a_label() {
        let pools = |v: serde_json::Value| -> Pools { serde_json::from_value(v).unwrap() };
        let yurt_pools = pools(serde_json::json!({ "names": ["a"] }));
        assert_eq!(Membership::of(&yurt_pools, None), yurt());
        assert_eq!(Membership::of(&yurt_pools, Some("site")), Membership::Label("site".into()));
        let edge = pools(serde_json::json!({ "kind": "KubeEdge", "names": ["a"] }));
        assert_eq!(Membership::of(&edge, None), Membership::Label(kind::KUBEEDGE_NODE_LABEL.into()));
        let units = pools(serde_json::json!({ "kind": "SuperEdge", "names": ["a"] }));
        assert_eq!(Membership::of(&units, None), Membership::Marker(kind::SUPEREDGE_NODE_LABEL_VALUE));
        let zones = pools(serde_json::json!({ "kind": "NodeLabel", "nodeLabel": "zone", "names": ["a"] }));
        assert_eq!(Membership::of(&zones, None), Membership::Label("zone".into()));
    }

    fn yurt() -> Membership {
        Membership::Label(kind::OPENYURT_NODE_LABEL.into())
    }

    #[test]
    fn stripping_keeps_what_counting_reads_and_nothing_else() {
        for ready in ["True", "False"] {
            let full = node("a1", Some("a"), Some(ready));
            let stripped = strip(full.clone());
            assert_eq!(count([&stripped], &yurt()), count([&full], &yurt()));
            assert!(stripped.spec.is_none());
            assert!(stripped.metadata.annotations.is_none());
            let status = stripped.status.unwrap();
            assert!(status.images.is_none());
            let conditions = status.conditions.unwrap();
            assert_eq!(conditions.len(), 1);
            assert!(conditions[0].last_transition_time.is_some(), "since when is kept");
            assert!(conditions[0].message.is_none());
        }
    }

    #[test]
    fn a_cluster_profile_says_whether_its_control_plane_is_healthy() {
        let profile = |status: &str| {
            serde_json::json!({ "status": { "conditions": [
                { "type": "Joined", "status": "True" },
                { "type": "ControlPlaneHealthy", "status": status, "lastTransitionTime": "2030-01-01T00:00:00Z" }
            ] } })
        };
        let healthy = SiteHealth::of_profile(&profile("True")).unwrap();
        assert!(healthy.healthy);
        assert_eq!(healthy.since, Some("2030-01-01T00:00:00Z".parse().unwrap()));
        for not in ["False", "Unknown"] {
            let health = SiteHealth::of_profile(&profile(not)).unwrap();
            assert!(!health.healthy, "{not}");
            assert!(health.count().offline(), "{not}");
            assert_eq!(health.count().to_string(), "control plane not healthy");
        }
        assert!(!healthy.count().offline());
        assert_eq!(healthy.count().to_string(), "control plane healthy");
        // A manager that says nothing of health: never offline by its word.
        assert_eq!(SiteHealth::of_profile(&serde_json::json!({ "status": {} })), None);
        assert_eq!(SiteHealth::of_profile(&serde_json::json!({})), None);
    }
}
