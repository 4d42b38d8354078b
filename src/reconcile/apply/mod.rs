//! Apply: carries out what `plan` decided ([`carry_out`]), with
//! server-side apply under one field manager, deletes only what this
//! application owns, and returns what happened.
//!
//! - `execute`: one plan carried out, write by write, each failure kept
//!   as data so one pool's refusal never stops the others;
//! - `release_writes`: the writes of one HelmRelease;
//! - [`asks`]: the metric checks' queries the plan says are due, asked;
//! - `orphaning`: releases left in place under `deletionPolicy: Orphan`;
//! - [`claim`]: the Lease that claims a Helm release before a HelmRelease
//!   first drives it;
//! - `chart`: the shared charts an application makes and prunes;
//! - `application`: the application's own status and finalizers;
//! - `history`: the application's revision records.
//!
//! Nothing here decides: what to write comes from the plan.

mod application;
pub mod asks;
mod chart;
pub mod claim;
mod execute;
mod history;
mod orphaning;
mod release_writes;

pub use application::{apply_status, report_unreadable, set_finalizers, FINALIZER, ORPHAN_FINALIZER};
pub use chart::{ensure_chart, prune_charts, SharedCharts};
pub use execute::{carry_out, Applied, Target};
pub use history::write_history;
pub use orphaning::{orphan_all, orphan_release};
pub use release_writes::{
    delete_observed, mark_ready, set_inert, set_suspended, skip_uninstall, write_release,
};

pub use crate::reconcile::managed_fields::FIELD_MANAGER;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// `object` is `<Kind> <name>`, as in every variant here: releases and
    /// shared HelmCharts go through the same writes.
    #[error(
        "{object} exists and was not created by this application: rename or delete it, or leave this pool out"
    )]
    NameClash { object: String },
    #[error(
        "releaseName: Helm release {helm_release} is claimed by {holder}; two HelmReleases would \
         overwrite each other's installs, so this pool's release drives nothing: give each \
         application's releases their own names (include {{{{app.name}}}} in releaseName) or \
         storageNamespace"
    )]
    HelmReleaseClaimed { helm_release: String, holder: String },
    #[error("cannot claim Helm release {helm_release} (a Lease where it is stored): {source}")]
    Claim {
        helm_release: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot apply {object}: {source}")]
    Apply {
        object: String,
        #[source]
        source: kube::Error,
    },
    /// The write's precondition failed ([`crate::reconcile::plan::DesiredRelease::decided_on`]).
    #[error(
        "{object} changed after this reconcile read it, so the rollout's decision to move it was not \
         written; the next reconcile decides again on what it holds now"
    )]
    ChangedMeanwhile { object: String },
    #[error("cannot delete {object}: {source}")]
    Delete {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update the status of NodePoolApplication {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the watch of shared charts (HelmCharts, OCIRepositories) has stopped, so this application's charts cannot be found; the controller is shutting down")]
    ChartWatchStopped,
    #[error("cannot orphan {object} (deletionPolicy: Orphan): {source}")]
    Orphan {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update the finalizers of NodePoolApplication {name}: {source}")]
    Finalizer {
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl ApplyError {
    /// Whether trying again may succeed: the API server busy, a conflict,
    /// a timeout, no answer at all. Refusals no retry mends (invalid,
    /// forbidden, over quota, a name another object holds) need a person.
    pub fn retriable(&self) -> bool {
        let source = match self {
            Self::NameClash { .. } | Self::HelmReleaseClaimed { .. } => return false,
            Self::ChartWatchStopped | Self::ChangedMeanwhile { .. } => return true,
            Self::Claim { source, .. }
            | Self::Apply { source, .. }
            | Self::Delete { source, .. }
            | Self::Status { source, .. }
            | Self::Orphan { source, .. }
            | Self::Finalizer { source, .. } => source,
        };
        match source {
            kube::Error::Api(status) => matches!(status.code, 408 | 409 | 429) || status.code >= 500,
            _ => true,
        }
    }

    /// A short category for metrics, logs and Event reasons; those of a
    /// refused write are [`crate::reconcile::fleet::REFUSED_WRITE_REASONS`].
    pub fn category(&self) -> &'static str {
        match self {
            Self::NameClash { .. } => "NameClash",
            Self::HelmReleaseClaimed { .. } => "ReleaseNameConflict",
            Self::Claim { .. } | Self::Apply { .. } => "ApplyFailed",
            Self::ChangedMeanwhile { .. } => "ChangedMeanwhile",
            Self::Delete { .. } | Self::ChartWatchStopped => "PruneFailed",
            Self::Status { .. } => "StatusFailed",
            Self::Finalizer { .. } => "FinalizerFailed",
            Self::Orphan { .. } => "OrphanFailed",
        }
    }
}
