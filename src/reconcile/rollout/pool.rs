//! One pool as the rollout reads it (its release, where it stands, what
//! holds it) and the verdict the rollout gives it.

use k8s_openapi::jiff::Timestamp;

use crate::reconcile::release::state::ReleaseStatus;

use super::{analysis, Stamp};

/// A selected pool's release, measured against the current revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release<'a> {
    /// No release yet.
    Missing,
    /// A release of another revision.
    Behind(&'a ReleaseStatus),
    /// A release of the current revision, written at `written` when
    /// known, and `resumed` with its application since, if it was: its
    /// progress deadline runs from the later of the two.
    Current {
        status: &'a ReleaseStatus,
        written: Option<Timestamp>,
        resumed: Option<Timestamp>,
    },
}

/// Whence a release's progress deadline runs: its write, or its resume
/// since, whichever came later. None for a release with no known write:
/// one written before the stamp, long judged.
pub(super) fn deadline_from(written: Option<Timestamp>, resumed: Option<Timestamp>) -> Option<Timestamp> {
    written.map(|w| resumed.map_or(w, |r| w.max(r)))
}

/// One selected pool, as the rollout sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolInput<'a> {
    pub pool: &'a str,
    /// Its wave: the index of the first step that selects it, or the number
    /// of steps when none does.
    pub wave: usize,
    pub offline: bool,
    /// When an offline pool's last node stopped being Ready, when known:
    /// the moment an update may have taken it down.
    pub offline_since: Option<Timestamp>,
    /// When an offline pool went down, whatever the cause (its nodes, its
    /// site's control plane, the connection to it), for `offlineAfter`.
    /// Unknown, the pool is offline at once.
    pub down_since: Option<Timestamp>,
    /// Set when no maintenance window of the pool is open.
    pub closed: Option<Closed>,
    /// When the first of its open windows closes, for a pool the rollout
    /// has yet to reach (its release missing or behind): held from then.
    pub window_closes: Option<Timestamp>,
    pub release: Release<'a>,
    /// What its release was written at, for a rollback.
    pub stamp: Stamp,
    /// Its release is, or is written, suspended (`spec.suspend`: the
    /// template's, an override's, or our mark's): Helm does nothing with
    /// it, so it is no install under way (see [`first_install_alone`]).
    pub suspended: bool,
    /// The API server refused the last write of its release (the status
    /// says so): it neither goes first nor waits for the first install,
    /// so one pool's bad override holds no install back.
    pub refused_before: bool,
    /// When its release was last written by us, at whatever revision
    /// (its written-at stamp), when known: a release behind that Flux
    /// has not judged since is an update under way (see [`pick`]).
    pub last_written: Option<Timestamp>,
    /// Where its metric checks stand, when the revision has checks and
    /// its release is Ready on it (see [`analysis`]).
    pub analysis: Option<analysis::Verdict>,
}

/// Every maintenance window of a pool is closed, or its own cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// When one next opens, if any ever does.
    pub opens: Option<Timestamp>,
    /// Whether a pool with no release waits too (`newPools: Wait`).
    pub holds_installs: bool,
    /// Why the pool's own window cannot be read: its updates wait until it
    /// can, rather than go at a time the pool may have ruled out.
    pub unreadable: Option<String>,
}

/// Where one pool stands, and whether its release is written now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PoolRollout {
    /// Its release is written now.
    Write,
    /// On the revision, not yet Ready.
    Updating,
    /// On the revision and Ready, for less than minReadySeconds.
    Soaking,
    /// On the revision, Ready for minReadySeconds.
    Done,
    /// On the revision, and failed.
    Failed,
    /// Behind; its turn has not come.
    Pending,
    /// Behind; held while the rollout is paused.
    Paused,
    /// Behind or new; held while the rollout is halted.
    Halted,
    /// Behind or new; its turn may have come, but it waits for the pool
    /// itself (see [`PoolDecision::note`]).
    Waiting,
    /// Behind; its wave waits for an operator's approval.
    AwaitingApproval,
    /// Nodes, none Ready: left as it is.
    Offline,
    /// Took the failed revision; its release goes back now.
    RollBack,
    /// Took the failed revision; it goes back when a slot frees, or when
    /// it is reached again.
    RollbackPending,
    /// Gone back, not yet Ready.
    RollingBack,
    /// Gone back, and Ready.
    RolledBack,
}

impl PoolRollout {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write | Self::Updating => "Updating",
            Self::Soaking => "Soaking",
            Self::Done => "Done",
            Self::Failed => "Failed",
            Self::Pending => "Pending",
            Self::Paused => "Paused",
            Self::Halted => "Halted",
            Self::Waiting => "Waiting",
            Self::AwaitingApproval => "AwaitingApproval",
            Self::Offline => "Offline",
            Self::RollBack | Self::RollingBack => "RollingBack",
            Self::RollbackPending => "RollbackPending",
            Self::RolledBack => "RolledBack",
        }
    }

    /// Whether the pool's release went back from the current revision,
    /// or will once this reconcile writes it.
    pub fn written_back(self) -> bool {
        matches!(self, Self::RollBack | Self::RollingBack | Self::RolledBack)
    }

    /// Whether the pool's release carries the current revision, or will
    /// once this reconcile writes it.
    pub fn up_to_date(self) -> bool {
        matches!(self, Self::Write | Self::Updating | Self::Soaking | Self::Done | Self::Failed)
    }
}

/// The verdict on one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolDecision {
    pub state: PoolRollout,
    /// Failed: why, when Flux does not say so itself. Waiting: what for.
    pub note: Option<Note>,
}

/// What the rollout says of a pool where Flux says nothing: why it
/// failed, or what it waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// `ProgressDeadlineExceeded`, `OfflineAfterUpdate` or `NodesNotReady`.
    pub reason: &'static str,
    pub message: String,
}

impl PoolDecision {
    pub(super) fn of(state: PoolRollout) -> Self {
        Self { state, note: None }
    }

    pub(super) fn noted(state: PoolRollout, reason: &'static str, message: String) -> Self {
        Self {
            state,
            note: Some(Note { reason, message }),
        }
    }

    pub(super) fn failed(reason: &'static str, message: String) -> Self {
        Self::noted(PoolRollout::Failed, reason, message)
    }
}
