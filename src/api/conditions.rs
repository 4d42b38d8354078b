//! The words of an application's status, in one place: the condition types
//! kstatus and Flux read, and the reasons the conditions and each pool's
//! row carry, which `kubectl describe`, Events, alerts and scripts match
//! on. A reason here is part of the API: renaming one breaks its readers.

/// `Ready`: every selected pool's release is ready (`True`), or why not.
pub const READY: &str = "Ready";
/// `Reconciling`: work is under way (kstatus: InProgress).
pub const RECONCILING: &str = "Reconciling";
/// `Stalled`: a person must act (kstatus: Failed).
pub const STALLED: &str = "Stalled";

/// The reasons of the application's conditions.
pub mod reason {
    /// Releases are being written or are converging.
    pub const PROGRESSING: &str = "Progressing";
    /// `spec.suspend`: nothing is written, created or pruned.
    pub const SUSPENDED: &str = "Suspended";
    /// The cluster serves no API for the application's kind of pool.
    pub const POOL_API_MISSING: &str = "PoolApiMissing";
    pub const INVALID_SELECTOR: &str = "InvalidSelector";
    pub const INVALID_ROLLOUT: &str = "InvalidRollout";
    /// The releases together pass the application's budget.
    pub const APPLICATION_TOO_LARGE: &str = "ApplicationTooLarge";
    pub const NO_POOLS_SELECTED: &str = "NoPoolsSelected";
    /// More than half of the application's releases would be pruned at
    /// once, and its `apps.fanout.dev/allow-prune` does not say it is meant.
    pub const PRUNE_HELD: &str = "PruneHeld";
    pub const POOL_NOT_FOUND: &str = "PoolNotFound";
    /// `--no-cross-namespace-refs` and a source in another namespace.
    pub const CROSS_NAMESPACE_REF_FORBIDDEN: &str = "CrossNamespaceRefForbidden";
    pub const CHART_MISSING: &str = "ChartMissing";
    pub const SOURCE_NOT_READY: &str = "SourceNotReady";
    pub const CHART_NOT_READY: &str = "ChartNotReady";
    pub const ROLLOUT_HALTED: &str = "RolloutHalted";
    pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
    /// The rollout halted under `onFailure: Rollback`: the pools that took
    /// the revision go back, or are back, to the last that completed.
    pub const ROLLED_BACK: &str = "RolledBack";
    /// A wave with `requireApproval` waits for an operator's approval.
    pub const AWAITING_APPROVAL: &str = "AwaitingApproval";
    pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
    /// Two pools' releases hold one object.
    pub const SHARED_OBJECT: &str = "SharedObject";
    /// The spec nests deeper than the client reads.
    pub const SPEC_UNREADABLE: &str = "SpecUnreadable";
}

/// The reasons of one pool's row (`status.pools[]`, `nodepool-fanout get`).
pub mod pool_reason {
    /// No node of the pool is Ready.
    pub const POOL_OFFLINE: &str = "PoolOffline";
    /// The pool is down, for less than `rollout.offlineAfter`: its update
    /// waits for it.
    pub const NOT_REACHED: &str = "PoolNotReached";
    /// Every maintenance window of the pool is closed: its update waits.
    pub const OUTSIDE_WINDOW: &str = "OutsideMaintenanceWindow";
    /// The pool's own maintenance window cannot be read: its update waits
    /// until the annotation is fixed.
    pub const INVALID_WINDOW: &str = "InvalidMaintenanceWindow";
    /// A new pool of an application none of whose releases is judged yet:
    /// it waits for the first install, which goes alone.
    pub const FIRST_INSTALL: &str = "WaitingForFirstInstall";
    /// A pool, of pools of one cluster, that waits while a new chart
    /// version goes to one pool alone, until that pool is Ready on it.
    pub const NEW_CHART_FIRST: &str = "WaitingForNewChartVersion";
    /// The pool went offline after it took the current revision.
    pub const OFFLINE_AFTER_UPDATE: &str = "OfflineAfterUpdate";
    /// The pool's values or templates cannot be built.
    pub const INVALID_POOL_CONFIG: &str = "InvalidPoolConfig";
    /// Another HelmRelease drives the Helm release this pool's would.
    pub const RELEASE_NAME_CONFLICT: &str = "ReleaseNameConflict";
    /// A HelmRelease this application does not own holds the name.
    pub const NAME_CONFLICT: &str = "NameConflict";
    /// Read by `get` and the console only: the controller refused the
    /// pool's write, and its status, which lists at most 40 pools, leaves
    /// the pool out; its Events say why.
    pub const REFUSAL_NOT_LISTED: &str = "RefusalNotListed";
    /// Read by `get` and the console only: the pool is not written at the
    /// revision, and the controller refused more pools than its status
    /// lists, so a look cannot tell whether this is one of them.
    pub const PERHAPS_REFUSED: &str = "PerhapsRefused";
    /// An object of the pool's release is held by another release.
    pub const OBJECT_HELD_ELSEWHERE: &str = "ObjectHeldElsewhere";
    /// The pool's metric checks failed for the revision (`rollout.analysis`).
    pub const ANALYSIS_FAILED: &str = "AnalysisFailed";
    /// The pool soaks while its metric checks are asked.
    pub const ANALYSIS_RUNNING: &str = "AnalysisRunning";
    /// The wave before the pool's is done, and its wave checks are being
    /// asked: the pool's update waits for them.
    pub const WAITING_FOR_WAVE_CHECKS: &str = "WaitingForWaveChecks";
    /// No pool has the revision yet, and its `PreRollout` webhook gates
    /// hold it: the pool's write waits for them.
    pub const WAITING_FOR_ROLLOUT_GATES: &str = "WaitingForRolloutGates";
}
