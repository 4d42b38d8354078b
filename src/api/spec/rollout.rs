//! How a change rolls out: the strategy, its limits, its waves and their
//! approvals, and the maintenance windows.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::analysis::Analysis;
use super::IntOrString;
use crate::api::pools::PoolSelection;
use crate::api::schema::*;

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
    validation = Rule::new(
        "!has(self.analysis) || (has(self.strategy) && self.strategy == 'Progressive')"
    )
    .message("analysis needs strategy: Progressive (a rollout of every pool at once waits for no check)"),
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

    /// Metric checks each updated pool must pass over its soak before it
    /// counts as done (see `Analysis`). Progressive rollouts only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<Analysis>,
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
    /// approves this step for the rollout under way: `nodepool-fanout
    /// approve`, or the annotation `apps.fanout.dev/approve:
    /// <revision>@<number>/<step>` (`status.rollout.revision` and
    /// `status.rollout.number`; several steps separated by commas). An
    /// approval names one rollout of the revision, so a later change, and
    /// the same change undone and redone, waits again; and the step, so it
    /// lets no other step go however the waves are numbered when pools
    /// come and go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_approval: Option<bool>,
}
