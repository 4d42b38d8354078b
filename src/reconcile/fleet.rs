//! How one application's fleet stands, said once: each selected pool's
//! row, the counts, the conditions and the bounded pool list, from the
//! plan and what carrying it out did. The application's status, its
//! Events and its metrics ([`FleetReport::publish`]), `nodepool-fanout
//! get` and the console all read it here, so that they cannot disagree.
//!
//! - [`status`] rolls the pools up into conditions (kstatus), counts and
//!   the bounded pool list;
//! - [`events`] says which changes are worth an Event;
//! - [`observed`] makes the report for those who only look (`get`, the
//!   console), by the controller's own observe and plan;
//! - [`rows`] says the report one line per pool.
//!
//! Pure: nothing here touches the network.

pub mod events;
pub mod observed;
pub mod rows;
pub mod status;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::conditions;
use crate::api::{naming, NodePoolApplication, NodePoolApplicationStatus, RolloutStatus};
use crate::pools::nodes::{Counted, NodeCount};
use crate::reconcile::release::state::{ReleaseState, ReleaseStatus};

pub use events::Transition;
pub use observed::Observation;
pub use rows::PoolRow;
pub(crate) use status::{cut, quote_pool};
pub use status::{PoolReport, RollupInput};

/// How one application's fleet stands: what its status, Events, metrics
/// and `get` are computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetReport {
    /// One per selected pool, sorted by pool name.
    pub pools: Vec<PoolReport>,
    /// Pools named in the spec that do not exist.
    pub missing: Vec<String>,
    /// A problem that stopped all planning, a person must act: (reason, message).
    pub blocker: Option<(String, String)>,
    /// What every write waits on, that is expected to pass without a
    /// person (the chart's source not ready yet): (reason, message).
    pub held: Option<(String, String)>,
    pub generation: Option<i64>,
    /// The conditions before, whose transition times are kept.
    pub previous: Vec<Condition>,
    pub now: Time,
    /// The rollout of the current revision, when planning got that far.
    pub rollout: Option<RolloutStatus>,
    /// `spec.suspend`, with the plan carried through.
    pub suspended: bool,
    /// Flux's request annotations handled.
    pub handled: Handled,
    /// A step of the reconcile that failed after the plan (a write of the
    /// history, a prune of the charts), retried at the failure backoff:
    /// (reason, message).
    pub failed_step: Option<(String, String)>,
    /// Why the rollout halts, when it does and something fails now (see
    /// `rollout::Decision::halt_cause`): what the history records.
    pub halt_cause: Option<String>,
}

/// The Flux requests (`reconcile.fluxcd.io/requestedAt`, `forceAt`,
/// `resetAt`) a reconcile handled, as Flux records them in the status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Handled {
    pub reconcile_at: Option<String>,
    pub force_at: Option<String>,
    pub reset_at: Option<String>,
}

impl Handled {
    /// Whatever the plan made of them, as Flux records a request.
    pub fn of(app: &NodePoolApplication) -> Self {
        let annotation = |key| app.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned();
        Self {
            reconcile_at: annotation(naming::ANNOTATION_REQUESTED_AT),
            force_at: annotation(naming::ANNOTATION_FORCE_AT),
            reset_at: annotation(naming::ANNOTATION_RESET_AT),
        }
    }
}

/// The pools counted as the metrics publish them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetCounts {
    pub selected: usize,
    pub ready: usize,
    pub offline: usize,
}

/// The reasons a pool's status gives when the API server refused its
/// release's write ([`WriteRefused::reason`], from `ApplyError::category`).
pub const REFUSED_WRITE_REASONS: [&str; 3] = ["ApplyFailed", "NameClash", "ReleaseNameConflict"];

/// Whether a pool's reason says the controller refused its write, which
/// only the controller finds: its values break the chart's schema, its
/// release's name is another object's, or the API server refused it.
pub fn is_refusal(reason: &str) -> bool {
    [
        conditions::pool_reason::INVALID_POOL_CONFIG,
        conditions::pool_reason::NAME_CONFLICT,
        conditions::pool_reason::REFUSAL_NOT_LISTED,
    ]
    .contains(&reason)
        || REFUSED_WRITE_REASONS.contains(&reason)
}

/// Whether the status says a pool's last write failed in a way a retry
/// may mend (`ApplyFailed` while the application is not `Stalled` for it:
/// a conflict, a timeout, the API server busy or restarting), rather than
/// refused for good, which needs a person. The status keeps the reason
/// alone; the application's `Stalled` condition tells the two apart.
pub fn write_retried(status: &crate::api::NodePoolApplicationStatus, reason: &str) -> bool {
    let stalled = status
        .conditions
        .iter()
        .any(|c| c.type_ == conditions::STALLED && c.status == "True" && c.reason == reason);
    reason == "ApplyFailed" && !stalled
}

/// A pool whose release the API server refused to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRefused {
    pub pool: String,
    pub reason: String,
    pub message: String,
    /// Whether a retry may succeed (a conflict, a timeout, the server
    /// busy), rather than needing a person (invalid, forbidden, over quota).
    pub retriable: bool,
}

/// One thing carrying out a plan did, or failed to do, to one release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// Suspended with the application, or resumed with it.
    Suspended {
        release: String,
        suspended: bool,
    },
    /// Written: created, or updated; `drift` names the first field a hand
    /// edit had changed, when the write put it back.
    Written {
        pool: String,
        release: String,
        existed: bool,
        drift: Option<String>,
    },
    /// The API server refused the write (see [`WriteRefused`]).
    WriteFailed {
        pool: String,
        release: String,
        reason: &'static str,
        message: String,
    },
    Pruned {
        pool: String,
        release: String,
    },
    Orphaned {
        pool: String,
        release: String,
    },
    /// Being deleted, let go without its uninstall: its site has not
    /// answered since `since`, longer than `after`.
    UninstallSkipped {
        pool: String,
        release: String,
        since: k8s_openapi::jiff::Timestamp,
        after: std::time::Duration,
    },
}

/// Empty, until a plan rolls its pools up.
impl Default for FleetReport {
    fn default() -> Self {
        Self {
            pools: Vec::new(),
            missing: Vec::new(),
            blocker: None,
            held: None,
            generation: None,
            previous: Vec::new(),
            now: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            rollout: None,
            suspended: false,
            handled: Handled::default(),
            failed_step: None,
            halt_cause: None,
        }
    }
}

impl FleetReport {
    /// The application's status: conditions, counts, the bounded pool
    /// list, the rollout, suspension said where kstatus looks, and the
    /// requests handled.
    pub fn status(&self) -> NodePoolApplicationStatus {
        let mut status = status::rollup(&RollupInput {
            pools: &self.pools,
            missing: &self.missing,
            blocker: self.blocker.clone(),
            held: self.held.clone(),
            generation: self.generation,
            previous: &self.previous,
            now: &self.now,
            rollout: self.rollout.clone(),
            failed_step: self.failed_step.clone(),
        });
        if self.suspended {
            report_suspended(&mut status);
        }
        status.last_handled_reconcile_at = self.handled.reconcile_at.clone();
        status.last_handled_force_at = self.handled.force_at.clone();
        status.last_handled_reset_at = self.handled.reset_at.clone();
        status
    }

    /// The report once the writes are done: `refused` are the pools whose
    /// write the API server refused. Their state reaches the conditions
    /// and the counts, so a refusal no retry mends reads Stalled to
    /// kstatus rather than InProgress.
    pub fn after_writes(&self, refused: &[WriteRefused]) -> Self {
        let mut report = self.clone();
        report.writes_refused(refused);
        report
    }

    /// [`FleetReport::after_writes`] in place: the reconciler's way, which
    /// copies no pool's report (ten thousand of them, at every reconcile).
    /// Each refused pool's write failed: Stalled when no retry can succeed
    /// (a person must act), Failed while retries may.
    pub fn writes_refused(&mut self, refused: &[WriteRefused]) {
        if refused.is_empty() {
            return;
        }
        // Found by name through one index: with the API server down, every
        // pool's write is refused, and a search for each was quadratic.
        let at: std::collections::HashMap<&str, usize> =
            self.pools.iter().enumerate().map(|(i, p)| (p.pool.as_str(), i)).collect();
        let found: Vec<(usize, &WriteRefused)> =
            refused.iter().filter_map(|r| Some((*at.get(r.pool.as_str())?, r))).collect();
        for (i, r) in found {
            let status = std::sync::Arc::make_mut(&mut self.pools[i].status);
            status.state = match r.retriable {
                false => ReleaseState::Stalled,
                true => ReleaseState::Failed,
            };
            status.reason = r.reason.clone();
            status.message = r.message.clone();
        }
    }

    /// What a looker reads of the pools it would write (`writes`, none of
    /// them listed in the status) when the status counts `unlisted`
    /// refusals it does not list (it lists `listed` pools): the controller
    /// wrote none of these pools and refused `unlisted` of them. When they
    /// are as many, each is one (Stalled); else each may be (Unknown), and
    /// which cannot be told from here.
    pub fn refusals_unlisted(&mut self, writes: &[&str], unlisted: usize, listed: usize) {
        let (state, reason, message) = if writes.len() == unlisted {
            (
                ReleaseState::Stalled,
                conditions::pool_reason::REFUSAL_NOT_LISTED,
                format!(
                    "the controller refused this pool's write; its status lists {listed} pools and leaves \
                     out {unlisted} refusals, this one among them: the application's Events say why"
                ),
            )
        } else {
            (
                ReleaseState::Unknown,
                conditions::pool_reason::PERHAPS_REFUSED,
                format!(
                    "not written at this revision: either the write is still to come, or it is one of the \
                     {unlisted} the controller refused that its status (which lists {listed} pools) leaves \
                     out; the application's Events say which"
                ),
            )
        };
        let writes: std::collections::HashSet<&str> = writes.iter().copied().collect();
        for pool in self.pools.iter_mut().filter(|p| writes.contains(p.pool.as_str())) {
            let status = std::sync::Arc::make_mut(&mut pool.status);
            status.state = state;
            status.reason = reason.to_string();
            status.message.clone_from(&message);
        }
    }

    /// An Event for each pool the plan refused that `status` leaves out.
    /// Such a pool has no earlier entry to compare with, so each plan that
    /// refuses it says so (the reconciler plans only when something
    /// changed, and Events of one reason and message form one series);
    /// without this a refusal past the 40 pools listed would be said
    /// nowhere. Refused writes have theirs from what the write did.
    fn refusals_left_out(&self, status: &NodePoolApplicationStatus) -> Vec<events::Transition> {
        let planned_refusals = [
            conditions::pool_reason::INVALID_POOL_CONFIG,
            conditions::pool_reason::NAME_CONFLICT,
            conditions::pool_reason::RELEASE_NAME_CONFLICT,
        ];
        if status.pools.len() == self.pools.len() {
            return Vec::new();
        }
        let listed: std::collections::HashSet<&str> = status.pools.iter().map(|p| p.pool.as_str()).collect();
        self.pools
            .iter()
            .filter(|p| {
                planned_refusals.contains(&p.status.reason.as_str()) && !listed.contains(p.pool.as_str())
            })
            .filter_map(|p| events::pool_transition(&status::pool_status(p)))
            .collect()
    }

    /// The pools selected, Ready and offline, counted as the status counts them.
    pub fn counts(&self) -> FleetCounts {
        let with = |state| self.pools.iter().filter(|p| p.status.state == state).count();
        FleetCounts {
            selected: self.pools.len(),
            ready: with(ReleaseState::Ready),
            offline: with(ReleaseState::Offline),
        }
    }

    /// What a reconcile publishes of the report, the status rolled up once
    /// for all of it: the status, the counts for the metrics, and the
    /// Events from the status `before` and what carrying out the plan did
    /// (each write, then each pool whose state changed, frequent reasons
    /// folded into one Event each).
    pub fn publish(&self, before: &NodePoolApplicationStatus, done: &[Done]) -> Published {
        let status = self.status();
        let mut happened: Vec<Transition> = done.iter().map(Transition::of).collect();
        happened.extend(events::between(before, &status));
        happened.extend(self.refusals_left_out(&status));
        Published {
            events: events::condense(happened),
            counts: self.counts(),
            status,
        }
    }
}

/// See [`FleetReport::publish`].
#[derive(Debug, Clone)]
pub struct Published {
    pub status: NodePoolApplicationStatus,
    pub counts: FleetCounts,
    pub events: Vec<Transition>,
}

/// A suspended application says so where `kubectl get npa` and kstatus
/// look: Ready's reason and message; nothing is in progress.
fn report_suspended(status: &mut NodePoolApplicationStatus) {
    status.conditions.retain(|c| c.type_ != conditions::RECONCILING);
    if let Some(ready) = status.conditions.iter_mut().find(|c| c.type_ == conditions::READY) {
        ready.reason = conditions::reason::SUSPENDED.to_string();
        ready.message = format!(
            "suspended (spec.suspend): no release is written, created or pruned, and every release is \
             suspended; {}",
            ready.message
        );
    }
}

/// An offline pool, skipped by the rollout: whatever Flux last said of its
/// release (a timed-out upgrade, most likely) is no verdict on the chart.
pub fn offline_status(mut status: ReleaseStatus, nodes: NodeCount, has_release: bool) -> ReleaseStatus {
    status.state = ReleaseState::Offline;
    status.reason = conditions::pool_reason::POOL_OFFLINE.to_string();
    let since = nodes.changed.map(|t| format!(" since {t}")).unwrap_or_default();
    let healthy = crate::pools::nodes::CONTROL_PLANE_HEALTHY;
    status.message = match (nodes.of, has_release) {
        (Counted::ControlPlane, true) => format!(
            "the site cluster's ClusterProfile says its control plane is not healthy \
             ({healthy}){since}: its release is left as it is until it is, then brought to the \
             current revision"
        ),
        (Counted::ControlPlane, false) => format!(
            "the site cluster's ClusterProfile says its control plane is not healthy \
             ({healthy}){since}: installed once it is"
        ),
        (Counted::Connection, _) => format!(
            "helm-controller cannot reach the site cluster{since} ({}): its release is left as it \
             is until it can, then brought to the current revision",
            status.message
        ),
        (Counted::Nodes, true) => format!(
            "no node of the pool is Ready ({nodes}){since}: its release is left as it is until one \
             is, then brought to the current revision"
        ),
        (Counted::Nodes, false) => {
            format!("no node of the pool is Ready ({nodes}){since}: installed once one is")
        }
    };
    status
}

#[cfg(test)]
mod tests;
