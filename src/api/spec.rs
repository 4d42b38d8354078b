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
    validation = Rule::new(
        "!has(self.onFailure) || self.onFailure != 'Rollback' || (has(self.strategy) && self.strategy == 'Progressive')"
    )
    .message("onFailure: Rollback needs strategy: Progressive (a rollout of every pool at once never halts)"),
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
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(
        "self.all(s, !has(s.name) || self.exists_one(t, has(t.name) && t.name == s.name))"
    )
    .message("step names must be unique: an approval names the step it lets go"))]
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

    /// What a halt does: `Halt` (the default) leaves every pool as it is;
    /// `Rollback` also takes the pools that took the failed revision back
    /// to the last revision that completed on them, last wave first,
    /// within `maxUnavailable`. The application then stays `RolledBack`
    /// (kstatus: Stalled) until its spec changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,

    /// Whether pools whose nodes are all NotReady are updated. Default Skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_pools: Option<OfflinePools>,

    /// How long a pool's nodes (or a site's connection) must be down before
    /// the pool counts as offline, e.g. `1m` (the default) or `0s`. Until
    /// then it is treated as online: an update to it waits for it, and it
    /// neither is skipped nor counts as failed, so a flapping link moves no
    /// pool in or out of the rollout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_schema")]
    pub offline_after: Option<String>,

    /// When updates may reach the pools a window selects: only while one of
    /// the windows that apply to a pool is open. A pool may also carry its
    /// own window, as the annotation `apps.fanout.dev/maintenance-window`
    /// (JSON: `{"schedule": "0 2 * * *", "duration": "3h", "timeZone":
    /// "America/Chicago"}`), which applies to every application. A pool no
    /// window applies to is updated whenever its turn comes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub windows: Vec<MaintenanceWindow>,

    /// How many revisions the history keeps (ControllerRevisions owned by
    /// the application, listed by `nodepool-fanout history`); the current
    /// one and the last that completed are always kept. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub revision_history_limit: Option<i32>,
}

/// A maintenance window: open at each time `schedule` names, in
/// `timeZone`, for `duration`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(cel)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// When the window opens, as a cron schedule read as Vixie cron reads
    /// it: five fields (minute, hour, day of month, month, day of week),
    /// e.g. `0 22 * * 1-5`, or a macro such as `@daily`. A day matches
    /// when its day of month or its weekday does if neither field starts
    /// with `*`, and when both do otherwise.
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(
        validation = Rule::new(SCHEDULE_RULE).message(
            "must be five fields (minute, hour, day of month, month, day of week) as Vixie cron reads \
             them, e.g. \"0 22 * * 1-5\", or one of @yearly, @annually, @monthly, @weekly, @daily, \
             @midnight and @hourly; seconds, years and a time zone (give timeZone) are not read"
        ),
        validation = Rule::new(SCHEDULE_FIRES_RULE).message(
            "never fires: February has no 30th or 31st, and April, June, September and November \
             have no 31st"
        ),
    )]
    pub schedule: String,

    /// How long it stays open, e.g. `4h`: at least a minute.
    #[schemars(schema_with = "duration_schema")]
    pub duration: String,

    /// The IANA time zone the schedule is read in, e.g. `Europe/Berlin`.
    /// Default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub time_zone: Option<String>,

    /// The pools it applies to; every selected pool when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<PoolSelection>,

    /// Whether a pool with no release yet waits for the window too, or is
    /// installed at once (the default: it has nothing to break).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_pools: Option<NewPools>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NewPools {
    /// Installed at once, whatever the window.
    #[default]
    Install,
    /// Installed only while the window is open.
    Wait,
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

/// What a halted rollout does with the pools that took the failed revision.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// They stay as they are, until a new revision.
    #[default]
    Halt,
    /// They go back to the last revision that completed on them.
    Rollback,
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
    /// What an approval calls the step (`<revision>/<name>`); without a
    /// name, an approval calls it by its position in `steps`, from 1. A
    /// name starts with a letter, so it is never taken for a position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')").message(
        "a step's name is a DNS label that starts with a letter, such as canary or east-2"
    ))]
    pub name: Option<String>,

    pub pools: PoolSelection,

    /// The wave waits, once the waves before it are done, until an operator
    /// approves this step for the revision under way: `nodepool-fanout
    /// approve`, or the annotation `apps.fanout.dev/approve:
    /// <revision>/<step>` (several steps separated by commas). An approval
    /// names the revision, so a later change waits again, and the step, so
    /// it lets no other step go however the waves are numbered when pools
    /// come and go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_approval: Option<bool>,
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
