//! The status of a `NodePoolApplication`: kstatus conditions, counts of
//! pools by state, the rollout's progress, and the pools worth a look.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::schema::*;

/// Observed state, kept compatible with kstatus (Ready, Reconciling, Stalled).
// An application not yet reconciled has no status, which kstatus reads as
// Current: a Flux Kustomization with `wait: true` would pass its health
// check before a single release exists. The API server fills this default
// in on every read of such an object, as for Flux's own kinds, so kstatus
// sees generation 1 against observed -1 and waits.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[schemars(extend("default" = {"observedGeneration": -1}))]
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
    /// Selected pools whose write the controller refused: values that
    /// break the chart's schema, a name another object holds, a write the
    /// API server refused. Counted whether or not `pools` lists them, so
    /// that `get` and the console can tell a refusal the list leaves out
    /// from a write still to come.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_pools: i32,
    /// Every selected pool counted by the state of its release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_counts: Option<PoolCounts>,
    /// Pools whose nodes are all NotReady.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub offline_pools: i32,
    /// Where the current revision has got to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// The last `reconcile.fluxcd.io/requestedAt` token handled, as Flux's
    /// objects record it (`flux reconcile` and `kubectl annotate` read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    /// The last `reconcile.fluxcd.io/forceAt` token passed on to the releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_force_at: Option<String>,
    /// The last `reconcile.fluxcd.io/resetAt` token passed on to the releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reset_at: Option<String>,
}

pub(super) fn is_zero(n: &i32) -> bool {
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
    /// This rollout of the revision: its number in the application's
    /// history (`nodepool-fanout history`). A revision that comes back (a
    /// change undone, then redone) is rolled out again under a new number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<i64>,
    /// While a wave awaits approval: the step an approval names to let it
    /// go (the step's name, or its position in `spec.rollout.steps` from
    /// 1), as in `apps.fanout.dev/approve: <revision>@<number>/<step>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_step: Option<String>,
    /// The last revision whose rollout completed: this one once it is
    /// complete (`nodepool-fanout history` lists them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_complete_revision: Option<String>,
    /// Under `onFailure: Rollback`, once this revision halted: the revision
    /// its pools went back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back_to: Option<String>,
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
    /// A wave waits for an operator's approval.
    AwaitingApproval,
    Halted,
    /// Halted under `onFailure: Rollback`: the pools that took this
    /// revision go back to the last one that completed on them.
    RollingBack,
    /// Halted under `onFailure: Rollback`, and every pool that took this
    /// revision is back; it stays so until the spec changes.
    RolledBack,
    /// Every pool reached is done with this revision, and offline pools
    /// are still behind on it: they take it when they come back, and one
    /// that fails on it halts the others still behind. Not complete: no
    /// `lastCompleteRevision`, and halts still apply. The application is
    /// Ready, as it is with offline pools skipped.
    AwaitingOffline,
    Complete,
}

impl RolloutPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Progressing => "Progressing",
            Self::Paused => "Paused",
            Self::AwaitingApproval => "AwaitingApproval",
            Self::Halted => "Halted",
            Self::RollingBack => "RollingBack",
            Self::RolledBack => "RolledBack",
            Self::AwaitingOffline => "AwaitingOffline",
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
    /// Failed, Pending (its turn has not come), Paused, Halted, Offline,
    /// or, under `onFailure: Rollback`, RollbackPending, RollingBack and
    /// RolledBack.
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

pub(super) fn pool_statuses_schema(generator: &mut SchemaGenerator) -> Schema {
    list_map::<PoolStatus>(generator, "pool")
}
