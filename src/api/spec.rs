//! The spec of a `NodePoolApplication`: which pools, which chart, each
//! pool's values, how a change rolls out, and where workloads land.

use k8s_openapi::api::core::v1::Toleration;
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chart::{ChartReference, ChartTemplate};
use super::pools::{PoolSelection, Pools};
use super::schema::*;
use super::status::NodePoolApplicationStatus;

mod analysis;
mod rollout;
pub use analysis::{
    Analysis, GateType, LocalSecretReference, MetricCheck, OnEmpty, PrometheusSource, WebhookGate,
};
pub use rollout::{
    MaintenanceWindow, NewPools, OfflinePools, OnFailure, Rollout, RolloutStep, RolloutStrategy,
};

/// Which chart to install on which node pools, and how each pool's release
/// differs. Every selected pool gets one Flux HelmRelease, pinned to its nodes.
// Each printcolumn repeats `type_ = "string"`, which the lint mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(
    cel,
    validation = Rule::new("has(self.chart) != has(self.chartRef)").message(
        "set exactly one of spec.chart (a chart in a HelmRepository, GitRepository or Bucket) and \
         spec.chartRef (an OCIRepository holding the chart), as in a HelmRelease"
    ),
    validation = Rule::new(
        "!has(self.pools.kind) || self.pools.kind != 'ClusterProfile' || !has(self.placement) || \
         (!has(self.placement.nodeLabel) && !has(self.placement.tolerations) && \
          !has(self.placement.valuesPaths) && !has(self.placement.workloads))"
    )
    .message(
        "placement pins a release's pods to its pool's nodes in this cluster; a site of kind \
         ClusterProfile is a cluster of its own, where the release's pods may run on any node: remove \
         spec.placement, or put node selectors in the values"
    )
)]
#[kube(
    group = "apps.fanout.dev",
    version = "v1alpha1",
    kind = "NodePoolApplication",
    namespaced,
    shortname = "npa",
    status = "NodePoolApplicationStatus",
    derive = "PartialEq",
    doc = "Fans a Helm chart out to node pools as one Flux HelmRelease per pool.",
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.ready"),
    printcolumn(name = "Chart", type_ = "string", json_path = ".spec.chart.spec.chart"),
    printcolumn(name = "Version", type_ = "string", json_path = ".status.chartVersion"),
    printcolumn(name = "Rollout", type_ = "string", json_path = ".status.rollout.progress"),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].message"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolApplicationSpec {
    /// Which node pools get a release: the kind of pool, then the union of
    /// `names` and `selector`.
    pub pools: Pools,

    /// The chart every release installs, as in a HelmRelease's `spec.chart`.
    /// Exactly one of `chart` and `chartRef` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<ChartTemplate>,

    /// The chart as an OCI artifact, as in a HelmRelease's `spec.chartRef`:
    /// an `OCIRepository` (with the Helm chart layer selected, as Flux
    /// requires) whose artifact every release installs. Each revision it
    /// resolves to is pinned by digest, so a new chart version rolls out as
    /// `spec.rollout` says, like any other change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_ref: Option<ChartReference>,

    /// How often Flux reconciles each release, e.g. `10m`.
    #[schemars(schema_with = "duration_schema")]
    pub interval: String,

    /// Helm release name; may use templates such as `{{app.name}}-{{pool.name}}`.
    /// Defaults to the HelmRelease's name, which is unique per pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_name: Option<String>,

    /// Namespace the chart is installed into; may use templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespace: Option<String>,

    /// HelmRelease fields copied as they are into every release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_release: Option<HelmReleaseOptions>,

    /// Base values for every pool; strings may use templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub values: Option<Value>,

    /// Values from ConfigMaps or Secrets, as in a HelmRelease; Flux reads them,
    /// this controller never does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_from: Vec<ValuesReference>,

    /// Per-pool changes, applied in order over the base; later ones win.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,

    /// How each release is pinned to its pool's nodes.
    #[serde(default)]
    pub placement: Placement,

    /// Suspends the application, as Flux's `suspend` does an object: the
    /// controller stops acting on it (no release is written, created or
    /// pruned, whatever the pools do) and suspends every release it has, so
    /// that helm-controller stops too. Resuming takes both back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// How a change reaches the pools: all at once (the default), or pool
    /// by pool, each gated on the health of those before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,

    /// What becomes of a release whose pool leaves the selection, and of
    /// every release when the application is deleted: `Delete` (the
    /// default) uninstalls it; `Orphan` leaves it running as a HelmRelease
    /// of its own, no longer managed by this application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeletionPolicy {
    #[default]
    Delete,
    Orphan,
}

/// HelmRelease fields that every release gets unchanged. The action
/// settings are kept opaque so that new Flux fields need no new version of
/// this controller.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    cel,
    validation = Rule::new("!has(self.kubeConfig)").message(
        "kubeConfig is not copied into releases: with spec.pools.kind ClusterProfile each site's \
         release gets its own cluster's kubeconfig from spec.pools.kubeConfig; one kubeConfig for \
         every release would send them all to one cluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct HelmReleaseOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub install: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub upgrade: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub test: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub rollback: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub uninstall: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub drift_detection: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_schema")]
    pub timeout: Option<String>,
    /// The ServiceAccount Flux installs each release as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(DNS1123_SUBDOMAIN_RULE).message(
        "must be a ServiceAccount name: a DNS-1123 subdomain of at most 253 characters, lowercase \
         letters, digits, '-' and '.', starting and ending with a letter or digit"
    ))]
    pub service_account_name: Option<String>,
    /// Other HelmReleases each release waits for; names may use templates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_history: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_client: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Refused (see the rule above): declared so that admission says why,
    /// rather than dropping it silently as an unknown field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub kube_config: Option<Value>,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReference {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A HelmRelease's `valuesFrom` entry; the name may use templates.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ValuesReference {
    pub kind: ValuesKind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValuesKind {
    ConfigMap,
    Secret,
}

/// Changes for some pools, merged over the base values.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Override {
    /// The pools this override applies to.
    pub pools: PoolSelection,
    /// Merged over the values so far; `null` removes a chart default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object_schema")]
    pub values: Option<Value>,
    /// Appended after the base `valuesFrom`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_from: Vec<ValuesReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// How a release is pinned to its pool's nodes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(cel)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Node label whose value names a node's pool, for clusters that label
    /// their nodes themselves. By default the pool's own: OpenYurt's
    /// `apps.openyurt.io/nodepool`, KubeEdge's `apps.kubeedge.io/belonging-to`,
    /// a SuperEdge unit's `setNode.labels` (`<unit>: nodeunits.superedge.io`
    /// unless set), or `spec.pools.nodeLabel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 317))]
    #[x_kube(validation = Rule::new(LABEL_KEY_RULE).message(
        "must be a label key: an optional DNS subdomain prefix of at most 253 characters and '/', then \
         a name of at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with \
         a letter or digit, e.g. apps.openyurt.io/nodepool"
    ))]
    pub node_label: Option<String>,
    /// Added to every workload of the chart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Dotted paths in the values where the pool's nodeSelector also goes,
    /// for charts that read it from their values, e.g. `controller.nodeSelector`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "values_paths_schema")]
    pub values_paths: Vec<String>,
    /// Further kinds whose pods are pinned to the pool, for charts that
    /// render custom workloads (OpenYurt's YurtStaticSet, OpenKruise's
    /// CloneSet, Argo Rollouts' Rollout). Every built-in kind that carries
    /// pods is pinned always: Pod, Deployment, StatefulSet, DaemonSet,
    /// ReplicaSet, ReplicationController, Job and CronJob.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub workloads: Vec<WorkloadKind>,
}

/// A custom kind whose objects carry a pod template.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(cel)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadKind {
    /// As in the objects' `apiVersion`, e.g. `apps.openyurt.io/v1alpha1`.
    #[schemars(length(min = 1, max = 253), extend("pattern" = r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+[a-z0-9]*$"))]
    pub api_version: String,
    /// The kind, e.g. `YurtStaticSet`.
    #[schemars(length(min = 1, max = 63), extend("pattern" = r"^[A-Z][A-Za-z0-9]*$"))]
    pub kind: String,
    /// Dotted path to the pod template (the object whose `spec` is a pod's
    /// spec), `spec.template` unless set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), extend("pattern" = r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+){0,7}$"))]
    #[x_kube(validation = Rule::new("!self.matches('^(apiVersion|kind|metadata)([.]|$)')").message(
        "must lead below the object's apiVersion, kind and metadata, e.g. spec.template"
    ))]
    pub pod_template_path: Option<String>,
}
