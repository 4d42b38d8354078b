//! Which sites an application fans out to: the kind of pool (or site
//! cluster), which of them, and for site clusters where their kubeconfig is.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::*;

/// The pools an application fans out to: which kind of pool, and which of
/// them.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    cel,
    validation = Rule::new("has(self.selector) || (has(self.names) && size(self.names) > 0)")
        .message("give pool names, a selector, or both"),
    validation = Rule::new("(has(self.kind) && self.kind == 'NodeLabel') == has(self.nodeLabel)")
        .message("nodeLabel is set with kind NodeLabel, and only then: it names the node label whose values are the pools"),
    validation = Rule::new("!has(self.kubeConfig) || (has(self.kind) && self.kind == 'ClusterProfile')")
        .message("kubeConfig is set with kind ClusterProfile, and only then: it names each site cluster's kubeconfig Secret")
)]
#[serde(rename_all = "camelCase")]
pub struct Pools {
    /// What a pool is: an OpenYurt NodePool (the default), a KubeEdge
    /// NodeGroup, a SuperEdge NodeUnit, each value of a node label
    /// (`NodeLabel`, with `nodeLabel`), or a cluster of its own described
    /// by a ClusterProfile in the application's namespace (`ClusterProfile`,
    /// see `kubeConfig`). Fixed once set: the pools of another kind are
    /// other pools, so create another application for them.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message(
        "spec.pools.kind cannot change: the pools of another kind are other pools; create another \
         application for them"
    ))]
    pub kind: PoolKind,

    /// With kind `NodeLabel`: the node label whose every value is a pool,
    /// e.g. `topology.kubernetes.io/zone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    #[x_kube(validation = Rule::new(LABEL_KEY_RULE).message(
        "must be a label key: an optional DNS subdomain prefix of at most 253 characters and '/', then \
         a name of at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with \
         a letter or digit, e.g. topology.kubernetes.io/zone"
    ))]
    pub node_label: Option<String>,

    /// With kind `ClusterProfile`: the Secret in the application's
    /// namespace holding each site cluster's kubeconfig, which its release
    /// names in `spec.kubeConfig.secretRef` for helm-controller to install
    /// with. This controller never reads it. By default
    /// `{{pool.name}}-kubeconfig`, key `value` (Cluster API's convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfigTemplate>,

    /// Pools whose labels match: a pool object's metadata labels, or for
    /// kind `NodeLabel` the labels every node of the pool carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// Pools by name; for kind `NodeLabel`, by label value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "pool_names_schema")]
    pub names: Vec<String>,
}

impl Pools {
    /// Which of the pools of its kind: as an override or a rollout step
    /// selects them.
    pub fn selection(&self) -> PoolSelection {
        PoolSelection {
            selector: self.selector.clone(),
            names: self.names.clone(),
        }
    }
}

/// What a node pool is.
#[derive(
    JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub enum PoolKind {
    /// OpenYurt's `NodePool` (`nodepools.apps.openyurt.io`).
    #[default]
    OpenYurt,
    /// KubeEdge's `NodeGroup` (`nodegroups.apps.kubeedge.io`).
    KubeEdge,
    /// SuperEdge's `NodeUnit` (`nodeunits.site.superedge.io`).
    SuperEdge,
    /// Every value of the node label `spec.pools.nodeLabel`.
    NodeLabel,
    /// A cluster of its own, described by a SIG-Multicluster ClusterProfile
    /// (`clusterprofiles.multicluster.x-k8s.io`) in the application's
    /// namespace; helm-controller installs into it with its kubeconfig.
    ClusterProfile,
}

/// Where each site cluster's kubeconfig is, as a HelmRelease's
/// `spec.kubeConfig`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigTemplate {
    pub secret_ref: SecretKeyTemplate,
}

/// A Secret of the application's namespace, and the key holding the
/// kubeconfig.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(cel)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyTemplate {
    /// The Secret's name; may use templates, e.g. `{{pool.name}}-kubeconfig`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the kubeconfig; by default Flux reads `value`, then
    /// `value.yaml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new("self.matches('^[-._a-zA-Z0-9]+$')").message(
        "must be a Secret key: letters, digits, '-', '_' and '.'"
    ))]
    pub key: Option<String>,
}

impl PoolKind {
    /// What one pool of this kind is called, for messages.
    pub fn pool_noun(&self) -> &'static str {
        match self {
            Self::OpenYurt => "NodePool",
            Self::KubeEdge => "NodeGroup",
            Self::SuperEdge => "NodeUnit",
            Self::NodeLabel => "value of spec.pools.nodeLabel",
            Self::ClusterProfile => "ClusterProfile",
        }
    }
}

impl std::fmt::Display for PoolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OpenYurt => "OpenYurt",
            Self::KubeEdge => "KubeEdge",
            Self::SuperEdge => "SuperEdge",
            Self::NodeLabel => "NodeLabel",
            Self::ClusterProfile => "ClusterProfile",
        })
    }
}

/// A set of node pools: the union of the named pools and those whose labels
/// match the selector.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    cel,
    validation = Rule::new("has(self.selector) || (has(self.names) && size(self.names) > 0)")
        .message("give pool names, a selector, or both")
)]
#[serde(rename_all = "camelCase")]
pub struct PoolSelection {
    /// Pools whose metadata labels match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,

    /// Pools by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "pool_names_schema")]
    pub names: Vec<String>,
}
