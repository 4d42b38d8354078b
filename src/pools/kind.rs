//! The kinds of pool that are objects of their own, as a table: which API
//! serves their pools, and how the nodes of a pool are marked. Pools that
//! are only a node label have no object and live in
//! [`super::node_label`]. Imports nothing of its siblings.

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use serde_json::Value;

use crate::api::PoolKind;

/// A kind of pool that is an object of its own, served by a framework's
/// CustomResourceDefinition: one row of the table below.
#[derive(Debug, PartialEq, Eq)]
pub struct PoolObjects {
    /// The API group the pools are served in, e.g. `apps.openyurt.io`.
    pub group: &'static str,
    /// The kind of the pool objects, e.g. `NodePool`.
    pub kind: &'static str,
    /// The CustomResourceDefinition to install when the cluster serves no
    /// such kind, e.g. `nodepools.apps.openyurt.io`.
    pub crd: &'static str,
    /// Who installs it, for the condition that asks for it.
    pub provider: &'static str,
    /// How the framework's own controller marks the nodes of a pool.
    pub marks: NodeMark,
    /// Whether the pool objects live in namespaces: an application then
    /// selects only those of its own namespace.
    pub namespaced: bool,
}

/// How a framework marks the nodes of a pool (see
/// [`super::nodes::Membership`], which this becomes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeMark {
    /// This label's value names the pool.
    Label(&'static str),
    /// The label named after the pool has this value.
    Marker(&'static str),
    /// No node of this cluster: the site is a cluster of its own.
    OwnCluster,
}

/// The node label OpenYurt's yurt-manager puts on every node of a pool.
pub const OPENYURT_NODE_LABEL: &str = "apps.openyurt.io/nodepool";

/// The node label KubeEdge puts on every node of a group.
pub const KUBEEDGE_NODE_LABEL: &str = "apps.kubeedge.io/belonging-to";

/// The value of the label `<unit>` that SuperEdge's site-manager puts on
/// every node of a unit.
pub const SUPEREDGE_NODE_LABEL_VALUE: &str = "nodeunits.superedge.io";

/// OpenYurt's `NodePool` (`nodepools.apps.openyurt.io`): yurt-manager
/// labels every node of a pool `apps.openyurt.io/nodepool=<pool>`.
pub static OPENYURT: PoolObjects = PoolObjects {
    group: "apps.openyurt.io",
    kind: "NodePool",
    crd: "nodepools.apps.openyurt.io",
    provider: "OpenYurt",
    marks: NodeMark::Label(OPENYURT_NODE_LABEL),
    namespaced: false,
};

/// KubeEdge's `NodeGroup` (`nodegroups.apps.kubeedge.io`, v1alpha1): its
/// members are `spec.nodes` and the nodes `spec.matchLabels` selects, and
/// KubeEdge's controller labels each of them
/// `apps.kubeedge.io/belonging-to=<group>`.
pub static KUBEEDGE: PoolObjects = PoolObjects {
    group: "apps.kubeedge.io",
    kind: "NodeGroup",
    crd: "nodegroups.apps.kubeedge.io",
    provider: "KubeEdge",
    marks: NodeMark::Label(KUBEEDGE_NODE_LABEL),
    namespaced: false,
};

/// SuperEdge's `NodeUnit` (`nodeunits.site.superedge.io`, v1alpha2): its
/// members are `spec.nodes` and the nodes `spec.selector` selects.
/// SuperEdge's site-manager adds `<unit>: nodeunits.superedge.io` to the
/// unit's `spec.setNode.labels` (beside any the unit sets) and puts those
/// labels on every member node, so that label marks a unit's nodes
/// whatever else the unit sets.
pub static SUPEREDGE: PoolObjects = PoolObjects {
    group: "site.superedge.io",
    kind: "NodeUnit",
    crd: "nodeunits.site.superedge.io",
    provider: "SuperEdge",
    marks: NodeMark::Marker(SUPEREDGE_NODE_LABEL_VALUE),
    namespaced: false,
};

/// SIG-Multicluster's `ClusterProfile` (`clusterprofiles.multicluster.x-k8s.io`),
/// the cluster inventory API: each profile describes a cluster of its own,
/// in the namespace of the cluster manager that publishes it (OCM, Fleet,
/// Karmada, Clusternet…). Its health is its `ControlPlaneHealthy` condition.
pub static CLUSTER_PROFILE: PoolObjects = PoolObjects {
    group: "multicluster.x-k8s.io",
    kind: "ClusterProfile",
    crd: "clusterprofiles.multicluster.x-k8s.io",
    provider: "SIG-Multicluster",
    marks: NodeMark::OwnCluster,
    namespaced: true,
};

impl PoolObjects {
    pub fn group(&self) -> &'static str {
        self.group
    }
    pub fn kind(&self) -> &'static str {
        self.kind
    }
    pub fn crd(&self) -> &'static str {
        self.crd
    }
    pub fn provider(&self) -> &'static str {
        self.provider
    }
}

/// The kind's pool objects, or `None` for pools that are a node label.
pub fn objects(kind: PoolKind) -> Option<&'static PoolObjects> {
    match kind {
        PoolKind::OpenYurt => Some(&OPENYURT),
        PoolKind::KubeEdge => Some(&KUBEEDGE),
        PoolKind::SuperEdge => Some(&SUPEREDGE),
        PoolKind::ClusterProfile => Some(&CLUSTER_PROFILE),
        PoolKind::NodeLabel => None,
    }
}

/// The kinds whose pools are objects, in a fixed order.
pub const OBJECT_KINDS: [PoolKind; 4] = [
    PoolKind::OpenYurt,
    PoolKind::KubeEdge,
    PoolKind::SuperEdge,
    PoolKind::ClusterProfile,
];

/// Which kind a manifest is, from its `apiVersion` group and `kind`.
pub fn kind_of(object: &Value) -> Option<PoolKind> {
    let group = object.get("apiVersion")?.as_str()?.split('/').next()?;
    let kind = object.get("kind")?.as_str()?;
    OBJECT_KINDS
        .into_iter()
        .find(|k| objects(*k).is_some_and(|o| o.group() == group && o.kind() == kind))
}

/// The name, labels and annotations planning reads of a pool object.
pub fn read_meta(metadata: &ObjectMeta) -> (String, BTreeMap<String, String>, BTreeMap<String, String>) {
    (
        metadata.name.clone().unwrap_or_default(),
        metadata.labels.clone().unwrap_or_default(),
        metadata.annotations.clone().unwrap_or_default(),
    )
}
