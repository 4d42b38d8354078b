//! The rollout's settings, read from `spec.rollout` with Flux's defaults
//! applied and percentages resolved against the pools selected.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::api::{IntOrString, OfflinePools, OnFailure, Rollout, RolloutStrategy};
use crate::reconcile::release::build::FieldError;

use super::analysis::Verdict;

/// Flux's own default wait for a Helm action is 5 minutes; an update gets
/// twice that to be done before it counts as failed.
pub const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(600);

/// A node is marked NotReady 40 s after its last heartbeat
/// (kube-controller-manager's default grace); another minute without a
/// Ready node tells an outage from a flapping link.
pub const DEFAULT_OFFLINE_AFTER: Duration = Duration::from_secs(60);

/// The rollout settings with defaults applied and percentages resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub progressive: bool,
    pub max_unavailable: usize,
    pub max_failures: usize,
    pub min_ready: Duration,
    pub progress_deadline: Duration,
    pub paused: bool,
    pub skip_offline: bool,
    /// How long a pool must be down before it counts as offline.
    pub offline_after: Duration,
    /// The waves (by index, from 0) that require approval and are not
    /// approved for the revision under way: none of their updates starts.
    pub awaiting_approval: BTreeSet<usize>,
    /// What an approval calls each wave's step (by wave index): the step's
    /// name, or its position in `spec.rollout.steps` from 1.
    pub wave_steps: Vec<String>,
    /// The steps approved for the revision under way, as the annotation
    /// names them: an approval asked for keeps them, since an approval
    /// holds every wave after its step, and an annotation that named only
    /// the step awaited now would take back the earlier ones.
    pub approved_steps: Vec<String>,
    /// This rollout's number in the application's history, when known
    /// (see `History::rollout_number`): an approval names it, so that it
    /// lets one rollout of the revision go and never a later one.
    pub rollout_number: Option<i64>,
    /// Progress deadlines count from no earlier than this: see
    /// `PlanInput::clock_since`. The offline rule still reads each write's
    /// own stamp, which only orders it against the pool's nodes.
    pub clock_since: Option<Timestamp>,
    /// `onFailure: Rollback`: a halt takes the pools that took the revision
    /// back to the last revision each was done with.
    pub rollback: bool,
    /// The revision a rollback takes pools back to, for the status: the
    /// newest of those the pools that took this revision were last done with.
    pub back_to: Option<String>,
    /// Why a rollback cannot take some pools back though they were done
    /// with a revision before (its record no longer reads, or was
    /// forgotten), for the status.
    pub cannot_go_back: Vec<String>,
    /// The history records the revision under way as rolled back: it stays
    /// so whatever its pools say now (see [`super::rollback`]).
    pub rolled_back: bool,
    /// The history says the revision halted at the application's current
    /// generation: the halt holds until every pool is done with it,
    /// whatever the pools say now (see [`super::decide`]).
    pub halted_before: bool,
    /// Why this rollout halted, as recorded when it did: what the status
    /// names once the failed pools' own state has moved on.
    pub halted_because: Option<String>,
    /// The revision under way completed (every pool was done with it): it
    /// stays completed. A pool that fails later (a new pool's install, a
    /// done pool turning not Ready) is that pool's failure, reported on
    /// it; it halts nothing and takes no pool back.
    pub completed: bool,
    /// Releases of the revision left as an earlier controller rendered
    /// them (`--rendering-changes=hold`): the status says how many.
    pub held_renders: usize,
    /// The pools share one cluster (they are not sites that are clusters):
    /// the application's first install goes to one pool alone until its
    /// release is judged (see [`super::first_install_alone`]).
    pub first_install_alone: bool,
    /// A release of the application whose pool left the selection before
    /// Helm deployed it on any pool, not yet gone: its install may still
    /// run (a release resumed to be uninstalled, say), and its uninstall
    /// deletes what it created, so during the first install no new pool
    /// installs until it is gone (see [`super::first_install_alone`]).
    pub undeployed_leaving: Option<String>,
    /// The chart version the revision resolves to, on pools of one
    /// cluster: it goes to one pool alone until that pool is done with it
    /// (see [`super::new_chart_alone`]). None for sites that are clusters,
    /// or when the version is not known.
    pub new_chart_alone: Option<String>,
    /// Where each done wave's checks stand (`analysis.waveChecks`), by
    /// wave index: a later wave starts only once they passed, and a
    /// failure halts the revision.
    pub wave_checks: BTreeMap<usize, Verdict>,
    /// Where the `PreRollout` gates stand while no pool has the revision
    /// yet: none when there are none, or once a pool has it.
    pub pre_rollout: Option<Verdict>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            progressive: false,
            max_unavailable: 1,
            max_failures: 0,
            min_ready: Duration::ZERO,
            progress_deadline: DEFAULT_PROGRESS_DEADLINE,
            paused: false,
            skip_offline: true,
            offline_after: DEFAULT_OFFLINE_AFTER,
            awaiting_approval: BTreeSet::new(),
            wave_steps: Vec::new(),
            approved_steps: Vec::new(),
            rollout_number: None,
            clock_since: None,
            rollback: false,
            back_to: None,
            cannot_go_back: Vec::new(),
            rolled_back: false,
            halted_before: false,
            halted_because: None,
            completed: false,
            held_renders: 0,
            first_install_alone: false,
            undeployed_leaving: None,
            new_chart_alone: None,
            wave_checks: BTreeMap::new(),
            pre_rollout: None,
        }
    }
}

impl Settings {
    /// `spec.rollout` over `selected` pools; a percentage is of those.
    pub fn new(spec: Option<&Rollout>, selected: usize) -> Result<Self, FieldError> {
        let Some(spec) = spec else {
            return Ok(Self::default());
        };
        let defaults = Self::default();
        let max_unavailable = match &spec.max_unavailable {
            None => defaults.max_unavailable,
            Some(v) => amount("rollout.maxUnavailable", v, selected)?.max(1),
        };
        let max_failures = match &spec.max_failures {
            None => defaults.max_failures,
            Some(v) => amount("rollout.maxFailures", v, selected)?,
        };
        let duration = |field: &str, text: &Option<String>, default: Duration| match text {
            None => Ok(default),
            Some(text) => parse_duration(text).ok_or_else(|| FieldError {
                field: format!("rollout.{field}"),
                message: format!("{text:?} is not a duration such as 10m or 1h30m"),
            }),
        };
        let progress_deadline =
            duration("progressDeadline", &spec.progress_deadline, defaults.progress_deadline)?;
        let offline_after = duration("offlineAfter", &spec.offline_after, defaults.offline_after)?;
        let min_ready = u64::try_from(spec.min_ready_seconds.unwrap_or(0)).map_err(|_| FieldError {
            field: "rollout.minReadySeconds".into(),
            message: "must not be negative".into(),
        })?;
        Ok(Self {
            progressive: spec.strategy == RolloutStrategy::Progressive,
            max_unavailable,
            max_failures,
            min_ready: Duration::from_secs(min_ready),
            progress_deadline,
            paused: spec.paused.unwrap_or(false),
            skip_offline: spec.offline_pools.unwrap_or_default() == OfflinePools::Skip,
            offline_after,
            rollback: spec.on_failure.unwrap_or_default() == OnFailure::Rollback,
            ..defaults
        })
    }
}

/// What judges a rollout's pools, as a short hash: the settings that
/// say whether a pool failed (`progressDeadline`, `minReadySeconds`,
/// `offlinePools`, `offlineAfter`, `analysis`) and what a failure does
/// (`maxFailures`, `onFailure`). A halt holds until one of them changes or
/// a new revision comes; an edit of anything else (`paused`, `windows`,
/// `steps`, `maxUnavailable`, the selection, `deletionPolicy`) judges
/// nothing afresh, and the known-bad revision stays halted.
pub fn judged_by(spec: Option<&Rollout>) -> String {
    let judging = spec.map(|r| {
        serde_json::json!({
            "progressDeadline": r.progress_deadline,
            "minReadySeconds": r.min_ready_seconds,
            "offlinePools": r.offline_pools,
            "offlineAfter": r.offline_after,
            "analysis": r.analysis,
            "maxFailures": r.max_failures,
            "onFailure": r.on_failure,
        })
    });
    let text = serde_json::to_string(&judging).unwrap_or_default();
    crate::api::naming::hex_prefix(&[&text], 10)
}

/// A count, or a percentage of `of` rounded down.
fn amount(field: &str, value: &IntOrString, of: usize) -> Result<usize, FieldError> {
    let invalid = || FieldError {
        field: field.to_string(),
        message: format!("{value:?} is neither a whole number nor a percentage such as \"25%\""),
    };
    match value {
        IntOrString::Int(n) => usize::try_from(*n).map_err(|_| invalid()),
        IntOrString::String(text) => match text.strip_suffix('%') {
            Some(percent) => {
                let percent: usize = percent.parse().map_err(|_| invalid())?;
                Ok(of * percent.min(100) / 100)
            }
            // "3" reads as 3, as a person means it.
            None => text.parse().map_err(|_| invalid()),
        },
    }
}

/// A Go duration as Flux writes them (`10m`, `1h30m`, `1.5h`, `500ms`).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let parsed: SignedDuration = text.parse().ok()?;
    Duration::try_from(parsed).ok()
}
