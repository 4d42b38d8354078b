//! The `NodePoolApplication` custom resource.
//!
//! Field names follow Flux's `HelmRelease` wherever the meaning is the same,
//! so that users who know Flux can read and write this resource without a
//! second vocabulary.

pub mod naming;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The node label OpenYurt puts on every node of a pool.
pub const DEFAULT_NODE_LABEL: &str = "apps.openyurt.io/nodepool";

/// Which chart to install on which node pools, and how each pool's release
/// differs. Every selected pool gets one Flux HelmRelease, pinned to its nodes.
// Each printcolumn repeats `type_ = "string"`, which the lint mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "apps.fanout.dev",
    version = "v1alpha1",
    kind = "NodePoolApplication",
    namespaced,
    shortname = "npa",
    status = "NodePoolApplicationStatus",
    derive = "PartialEq",
    doc = "Fans a Helm chart out to OpenYurt node pools as one Flux HelmRelease per pool.",
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
    /// Which node pools get a release: the union of `names` and `selector`.
    pub pools: PoolSelection,

    /// The chart every release installs, as in a HelmRelease's `spec.chart`.
    pub chart: ChartTemplate,

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

    /// Suspends every release of this application (Flux stops acting on them).
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

/// How a change to the application reaches its pools. A pool with no
/// release yet is installed at once (it has nothing to break); pools whose
/// release differs follow the strategy.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    cel,
    validation = Rule::new(
        "!has(self.maxUnavailable) || string(self.maxUnavailable).matches('^([1-9][0-9]{0,5}|[0-9]{1,3}%)$')"
    )
    .message("maxUnavailable must be a whole number of at least 1, or a percentage such as \"25%\""),
    validation = Rule::new(
        "!has(self.maxFailures) || string(self.maxFailures).matches('^([0-9]{1,6}|[0-9]{1,3}%)$')"
    )
    .message("maxFailures must be a whole number of at least 0, or a percentage such as \"10%\""),
)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    #[serde(default)]
    pub strategy: RolloutStrategy,

    /// Pools updated and not yet done at once: a number, or a percentage of
    /// the selected pools rounded down (at least one). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "int_or_percent_schema")]
    pub max_unavailable: Option<IntOrString>,

    /// Ordered waves; the pools of no step form the last wave. A pool in
    /// several steps belongs to the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<RolloutStep>,

    /// How long an updated pool must stay Ready to count as done. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub min_ready_seconds: Option<i64>,

    /// An updated pool not done this long after its release was written
    /// counts as failed, e.g. `10m` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_schema")]
    pub progress_deadline: Option<String>,

    /// Failed pools tolerated before the rollout halts: a number, or a
    /// percentage of the selected pools rounded down. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "int_or_percent_schema")]
    pub max_failures: Option<IntOrString>,

    /// No further pool starts updating; pools already updating finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,

    /// Whether pools whose nodes are all NotReady are updated. Default Skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_pools: Option<OfflinePools>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RolloutStrategy {
    /// Every pool is written at once.
    #[default]
    AllAtOnce,
    /// Pools are updated wave by wave, at most `maxUnavailable` at once,
    /// halting past `maxFailures`.
    Progressive,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OfflinePools {
    /// An offline pool's release is left as it is until a node is Ready again.
    #[default]
    Skip,
    /// Offline pools are written like the others.
    Include,
}

/// One wave of a progressive rollout.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStep {
    pub pools: PoolSelection,
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

/// The `spec.chart` of a HelmRelease.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChartTemplate {
    pub spec: ChartSpec,
}

/// Flux's `HelmChartTemplateSpec`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChartSpec {
    /// Chart name in a HelmRepository, or path in a GitRepository or Bucket.
    #[schemars(length(min = 1))]
    pub chart: String,

    /// Semver range; `*` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "*"))]
    pub version: Option<String>,

    pub source_ref: SourceReference,

    /// How often Flux checks the source for a new chart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_schema")]
    pub interval: Option<String>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_strategy: Option<ReconcileStrategy>,

    /// Values files in the chart, merged in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_files: Vec<String>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_missing_values_files: Option<bool>,
}

/// Where Flux gets the chart.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SourceReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    pub kind: SourceKind,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Defaults to the namespace of the application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    HelmRepository,
    GitRepository,
    Bucket,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileStrategy {
    ChartVersion,
    Revision,
}

/// HelmRelease fields that every release gets unchanged. The action
/// settings are kept opaque so that new Flux fields need no new version of
/// this controller.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(cel)]
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
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(cel)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Node label that names a node's pool.
    #[serde(default = "default_node_label")]
    #[schemars(length(max = 317))]
    #[x_kube(validation = Rule::new(LABEL_KEY_RULE).message(
        "must be a label key: an optional DNS subdomain prefix of at most 253 characters and '/', then \
         a name of at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with \
         a letter or digit, e.g. apps.openyurt.io/nodepool"
    ))]
    pub node_label: String,
    /// Added to every workload of the chart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Dotted paths in the values where the pool's nodeSelector also goes,
    /// for charts that read it from their values, e.g. `controller.nodeSelector`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "values_paths_schema")]
    pub values_paths: Vec<String>,
}

impl Default for Placement {
    fn default() -> Self {
        Self {
            node_label: default_node_label(),
            tolerations: Vec::new(),
            values_paths: Vec::new(),
        }
    }
}

fn default_node_label() -> String {
    DEFAULT_NODE_LABEL.to_string()
}

/// Observed state, kept compatible with kstatus (Ready, Reconciling, Stalled).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolApplicationStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub selected_pools: i32,
    #[serde(default)]
    pub ready_pools: i32,
    /// Ready pools out of selected pools, e.g. `2/3`.
    #[serde(default)]
    pub ready: String,
    /// The chart version the releases run; several are listed while they differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "pool_statuses_schema")]
    pub pools: Vec<PoolStatus>,
    /// Selected pools left out of `pools`, which lists at most 40: those
    /// not ready first. The HelmReleases' own status holds the rest.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted_pools: i32,
    /// Every selected pool counted by the state of its release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_counts: Option<PoolCounts>,
    /// Pools whose nodes are all NotReady.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offline_pools: i32,
    /// Where the current revision has got to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// Selected pools by the state of their release; states with none are left out.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolCounts {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ready: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub progressing: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waiting: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stalled: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown: i32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offline: i32,
}

/// The progress of the current revision over the pools.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// What every pool's release would be now, as a short hash of the
    /// application's spec and the chart it resolved to.
    pub revision: String,
    pub phase: RolloutPhase,
    /// Pools whose release carries the revision.
    pub updated: i32,
    /// Updated pools that are Ready and have stayed so for minReadySeconds.
    pub done: i32,
    /// Updated pools that failed.
    #[serde(default)]
    pub failed: i32,
    /// Pools the rollout covers: the selected pools, offline ones aside.
    pub total: i32,
    /// The wave under way, e.g. `2/3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    /// For the printer column: the phase and done out of total, e.g. `Progressing 3/10`.
    pub progress: String,
    #[serde(default)]
    pub message: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RolloutPhase {
    #[default]
    Progressing,
    Paused,
    Halted,
    Complete,
}

impl RolloutPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Progressing => "Progressing",
            Self::Paused => "Paused",
            Self::Halted => "Halted",
            Self::Complete => "Complete",
        }
    }
}

/// The state of one pool's release.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    pub pool: String,
    pub helm_release: String,
    pub ready: ConditionStatus,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_version: Option<String>,
    /// Whether the release's status describes its latest spec.
    #[serde(default)]
    pub observed_latest: bool,
    /// Whether the release carries the current revision.
    #[serde(default)]
    pub up_to_date: bool,
    /// Where the pool stands in the rollout: Done, Soaking, Updating,
    /// Failed, Pending (its turn has not come), Paused, Halted or Offline.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rollout: String,
    /// Ready nodes out of the pool's nodes, e.g. `2/3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<String>,
    /// Whether the pool has nodes and none of them is Ready.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offline: bool,
    /// When an offline pool's last node stopped being Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_since: Option<String>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    #[default]
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// Why the CRD could not be written out.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("cannot write the CustomResourceDefinition as YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
}

/// The CustomResourceDefinition as YAML, ready for `kubectl apply -f -`.
pub fn crds_yaml() -> Result<String, CrdError> {
    Ok(serde_saphyr::to_string(&NodePoolApplication::crd())?)
}

const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$";
const DNS1123_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// CEL rules rather than bare patterns, so that a refusal says what is
/// wanted instead of quoting a regular expression. `[.]` stands for a dot:
/// no escaping through Rust, CEL and RE2.
const DNS1123_SUBDOMAIN_RULE: &str =
    "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')";
/// A label key, as Kubernetes validates it (`IsQualifiedName`): an optional
/// DNS-1123 subdomain prefix of at most 253 characters and `/`, then a name
/// of at most 63.
const LABEL_KEY_RULE: &str =
    "self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?\
     [A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && !self.matches('^[^/]{254,}/')";

fn duration_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "pattern": DURATION_PATTERN })
}

/// An integer or a percentage string, as Kubernetes' own `maxUnavailable`.
fn int_or_percent_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-int-or-string": true, "nullable": true })
}

fn optional_duration_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "nullable": true, "pattern": DURATION_PATTERN })
}

// Helm values are free-form; the apiserver must keep every field the user wrote.
fn opaque_object_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", "nullable": true, "x-kubernetes-preserve-unknown-fields": true })
}

fn pool_names_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 1000,
        "items": { "type": "string", "maxLength": 253, "pattern": DNS1123_SUBDOMAIN }
    })
}

fn values_paths_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "maxItems": 32,
        "items": { "type": "string", "maxLength": 253, "pattern": r"^[^.]+(\.[^.]+)*$" }
    })
}

// A list-map lets server-side apply merge conditions by type, as for core types.
fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    list_map::<Condition>(generator, "type")
}

fn pool_statuses_schema(generator: &mut SchemaGenerator) -> Schema {
    list_map::<PoolStatus>(generator, "pool")
}

fn list_map<T: schemars::JsonSchema>(generator: &mut SchemaGenerator, key: &str) -> Schema {
    let item = generator.subschema_for::<T>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key]
    })
}

#[cfg(test)]
mod tests;
