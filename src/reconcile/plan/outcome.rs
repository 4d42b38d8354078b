//! What a plan says: each selected pool's outcome, the writes that carry
//! it out, and the status it reports.

use std::time::Duration;

use serde_json::Value;

use crate::api::{naming, NodePoolApplicationStatus};
use crate::reconcile::fleet::FleetReport;
use crate::reconcile::rollout::PoolRollout;

use super::guards::helm_release_taken_message;
use super::{HelmReleaseKey, Manifest, Stamps, TakenRelease};

/// A HelmRelease to create or update (server-side apply of [`DesiredRelease::object`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredRelease {
    pub name: String,
    pub pool: String,
    /// The release as built, without the time of writing.
    pub manifest: Manifest,
    /// The `written-at` stamp the write carries, from which the rollout
    /// counts the release's progress deadline: now, or, for a release put
    /// back as it was, the time of its real write.
    pub written_at: String,
    /// The `resumed-at` stamp it carries, if any: now for a release
    /// resumed with the application, the one it carries for a write that
    /// puts back what it holds, none for a write that moves it.
    pub resumed_at: Option<String>,
    pub spec_hash: String,
    /// The revision it is written at, and where it would go back to.
    pub stamps: Stamps,
    /// Set when the release already carries this spec hash but no longer
    /// holds what we wrote (a hand edit): the first field found changed.
    pub drift: Option<String>,
    /// The release carries this spec hash and was suspended with the
    /// application, which is resumed: written again whole, as it was, not
    /// as a step of the rollout.
    pub resumed: bool,
    /// The Helm release to claim before the write ([`crate::reconcile::apply::claim`]):
    /// set when the write makes the release drive a Helm release it did
    /// not drive (a new release, a new releaseName), or when the release
    /// was made inert because another application held it.
    pub claim: Option<HelmReleaseKey>,
    /// The Helm release it drove until now, when the write moves it to
    /// another: its claim is let go once the write is done.
    pub drove: Option<HelmReleaseKey>,
    /// The release was made inert ([`naming::ANNOTATION_INERT`]): the
    /// write, once the claim is ours, takes that back.
    pub lift_inert: bool,
    /// The write gives the release another spec than the one it carries
    /// (its spec hash differs): a step of the rollout, even when it also
    /// wakes an inert release.
    pub moves: bool,
    /// The `resourceVersion` of the release the rollout decided to move,
    /// written as the apply's precondition. Its decision read that
    /// release's health (one Flux finds unavailable starts at once, taking
    /// no slot of `maxUnavailable`), so a release that changed since it
    /// was observed is not written; the next reconcile decides on what it
    /// holds then. Without it, a release that turned Ready while the
    /// reconcile ran was taken down as if it were down already (found by
    /// the fault soak, seed 170355536). None for a new release and for a
    /// write that puts back what the release holds.
    pub decided_on: Option<String>,
}

impl DesiredRelease {
    /// What to write: the release as built, stamped with its time of writing.
    pub fn object(&self) -> Value {
        let mut object = self.manifest.value();
        object["metadata"]["annotations"][naming::ANNOTATION_WRITTEN_AT] =
            Value::String(self.written_at.clone());
        if let Some(resumed_at) = &self.resumed_at {
            object["metadata"]["annotations"][naming::ANNOTATION_RESUMED_AT] =
                Value::String(resumed_at.clone());
        }
        self.stamps.write(&mut object);
        object
    }

    /// Whether the write puts back the revision the release carries (a hand
    /// edit undone, a resumed release written whole, an inert one woken)
    /// rather than moving it to a new one: it goes whatever the rollout,
    /// which only ever moves pools between revisions.
    pub fn restores(&self) -> bool {
        self.drift.is_some() || self.resumed || (self.lift_inert && !self.moves)
    }
}

/// What happens to one selected pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its release is in `apply`.
    Planned,
    /// Its release already has this spec.
    Unchanged,
    /// Its config cannot be built; its release, if any, is left alone.
    Failed { field: String, message: String },
    /// The release name is taken by a HelmRelease this application does not own.
    Conflict { name: String },
    /// The Helm release (`<storage namespace>/<release name>`) it would
    /// drive is driven by an older HelmRelease this application does not
    /// own: two HelmReleases would overwrite each other's installs.
    HelmReleaseTaken { helm_release: String, by: TakenRelease },
    /// Would be applied, but the chart is not usable yet (see [`super::Hold`]).
    Held,
    /// Would be applied, but the application is suspended: nothing is
    /// written, created or pruned until it is resumed.
    Suspended,
    /// Its release differs, or it has none, but the rollout holds it back
    /// (its turn has not come, the rollout is paused or halted, or the pool
    /// is offline): its release, if any, is left as it is.
    Deferred(PoolRollout),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolOutcome {
    pub pool: String,
    /// The HelmRelease's object name.
    pub release: String,
    pub outcome: Outcome,
}

impl std::fmt::Display for PoolOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.outcome {
            Outcome::Planned => {
                write!(f, "pool {:?}: HelmRelease {} will be applied", self.pool, self.release)
            }
            Outcome::Unchanged => {
                write!(f, "pool {:?}: HelmRelease {} is up to date", self.pool, self.release)
            }
            Outcome::Failed { field, message } => write!(f, "pool {:?}: {field}: {message}", self.pool),
            Outcome::Held => write!(f, "pool {:?}: waiting for the chart", self.pool),
            Outcome::Suspended => {
                write!(f, "pool {:?}: left as it is: the application is suspended", self.pool)
            }
            Outcome::Deferred(state) => {
                write!(f, "pool {:?}: left as it is by the rollout ({})", self.pool, state.as_str())
            }
            Outcome::HelmReleaseTaken { .. } => {
                write!(f, "pool {:?}: {}", self.pool, helm_release_taken_message(&self.outcome))
            }
            Outcome::Conflict { name } => write!(
                f,
                "pool {:?}: HelmRelease {name} already exists and is not owned by this application; \
                 delete or rename it",
                self.pool
            ),
        }
    }
}

/// The plan for one reconcile.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub apply: Vec<DesiredRelease>,
    /// Names of owned releases that already match.
    pub unchanged: Vec<String>,
    /// Names of owned releases whose pool is no longer selected.
    pub prune: Vec<String>,
    /// One per selected pool, sorted by pool name.
    pub pools: Vec<PoolOutcome>,
    /// Pools named in the spec that do not exist.
    pub missing_pools: Vec<String>,
    /// Why nothing was planned at all, when something stopped it.
    pub blocked: Option<String>,
    /// How the fleet stands as planned; after the writes,
    /// [`FleetReport::after_writes`] says how it stands.
    pub report: FleetReport,
    /// When to look again though nothing changes but the clock: a pool's
    /// soak ends or its progress deadline passes.
    pub requeue_after: Option<Duration>,
    /// The rollout holds changes back until releases under way turn Ready
    /// or fail: how many such verdicts are worth a reconcile soon (see
    /// [`crate::reconcile::rollout::Decision::waits_on_releases`]).
    pub waits_on_releases: Option<usize>,
    /// Releases to suspend with the application (`spec.suspend: true`):
    /// the only write a suspended application makes.
    pub suspend: Vec<String>,
    /// Releases suspended with the application, which is resumed: their
    /// suspension is taken back before anything else is written.
    pub resume: Vec<String>,
    /// Releases to make inert, with why: each would drive a Helm release
    /// another application's HelmRelease drives (see
    /// [`crate::api::naming::ANNOTATION_INERT`]).
    pub inert: Vec<(String, String)>,
    /// What this plan found, for the next plan of the application
    /// ([`PlanInput::memo`](super::PlanInput)).
    pub memo: super::Memo,
    /// The shared charts of the revisions the pools that took the revision
    /// under way may go back to: kept until it completes, since a rollback
    /// may need them after every release has left them.
    pub rollback_charts: Vec<crate::chart::shared::ChartRef>,
    /// Releases of pools that left, being deleted, whose site has not
    /// answered for `rollout.offlineAfter`: let go without their uninstall.
    pub uninstall_skipped: Vec<UninstallSkipped>,
    /// How long until the next such release is due to be let go.
    pub uninstall_wait: Option<Duration>,
    /// What to write to the application's revision history for the
    /// revision under way ([`crate::reconcile::history::plan`]).
    pub history: crate::reconcile::history::HistoryWrites,
    /// The revision's metric checks and those due now, for the runtime
    /// to ask (see [`crate::reconcile::rollout::analysis`]).
    pub analysis: Option<crate::reconcile::rollout::analysis::Analysing>,
    /// Releases to mark as first seen Ready on their latest spec, or
    /// whose mark to take back ([`crate::api::naming::ANNOTATION_READY_AT`]).
    pub ready_marks: Vec<super::ReadyMark>,
}

/// A release being deleted, let go without its uninstall: the site it
/// installs into has not answered since `since`, longer than `after`.
/// helm-controller would retry the uninstall for ever, the release would
/// stay Terminating, and so would the deletion of its namespace; what Helm
/// installed on the site stays there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UninstallSkipped {
    pub pool: String,
    pub release: String,
    pub since: k8s_openapi::jiff::Timestamp,
    pub after: Duration,
}

impl Plan {
    /// A plan that writes nothing yet, with the pools named in the spec
    /// that do not exist.
    pub(super) fn new(missing_pools: Vec<String>) -> Self {
        Self {
            apply: Vec::new(),
            unchanged: Vec::new(),
            prune: Vec::new(),
            pools: Vec::new(),
            missing_pools,
            blocked: None,
            report: FleetReport::default(),
            requeue_after: None,
            waits_on_releases: None,
            suspend: Vec::new(),
            resume: Vec::new(),
            inert: Vec::new(),
            memo: super::Memo::default(),
            rollback_charts: Vec::new(),
            uninstall_skipped: Vec::new(),
            uninstall_wait: None,
            history: Default::default(),
            analysis: None,
            ready_marks: Vec::new(),
        }
    }

    /// The status as planned, before any write is refused: what
    /// [`FleetReport::status`] says of [`Plan::report`].
    pub fn status(&self) -> NodePoolApplicationStatus {
        self.report.status()
    }

    /// The writes, taken out of the plan to be carried out: the rest (the
    /// pools' outcomes, the status) stays for the report.
    pub fn take_writes(&mut self) -> Writes {
        Writes {
            resume: std::mem::take(&mut self.resume),
            suspend: std::mem::take(&mut self.suspend),
            inert: std::mem::take(&mut self.inert),
            apply: std::mem::take(&mut self.apply),
            prune: std::mem::take(&mut self.prune),
            skip_uninstall: std::mem::take(&mut self.uninstall_skipped),
            ready_marks: std::mem::take(&mut self.ready_marks),
        }
    }

    /// Whether any pool failed, conflicted, or the plan was blocked.
    pub fn has_errors(&self) -> bool {
        self.blocked.is_some()
            || self.pools.iter().any(|p| {
                matches!(
                    p.outcome,
                    Outcome::Failed { .. } | Outcome::Conflict { .. } | Outcome::HelmReleaseTaken { .. }
                )
            })
    }
}

/// What carrying a plan out writes, in the order it goes: suspensions
/// taken back or made, releases made inert, releases written, releases
/// pruned (see [`crate::reconcile::apply::carry_out`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Writes {
    pub resume: Vec<String>,
    pub suspend: Vec<String>,
    pub inert: Vec<(String, String)>,
    pub apply: Vec<DesiredRelease>,
    pub prune: Vec<String>,
    pub skip_uninstall: Vec<UninstallSkipped>,
    /// Made last: a mark's write would fail a release write's precondition.
    pub ready_marks: Vec<super::ReadyMark>,
}
