//! Why a reconcile failed, by the step that failed: the log, the metrics
//! and the retry say which part of the reconcile to look at, and each
//! step's error keeps the object and the API server's answer.

use crate::reconcile::apply::ApplyError;
use crate::reconcile::observe::ObserveError;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Before the reconcile: the watches never listed once.
    #[error(transparent)]
    Caches(#[from] ObserveError),
    /// Before the reconcile: the application itself could not be read.
    #[error("cannot read NodePoolApplication {namespace}/{name}: {source}")]
    Read {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("setting the application's finalizers: {0}")]
    Finalizers(#[source] ApplyError),
    /// Some of the plan's writes and deletes failed; each pool's is in the
    /// status, and the rest were carried out.
    #[error("carrying out the plan: {failed} of its writes and deletes failed, the first: {first}")]
    Releases {
        failed: usize,
        #[source]
        first: ApplyError,
    },
    #[error("writing the revision history: {0}")]
    History(#[source] ApplyError),
    #[error("deleting shared charts no release uses: {0}")]
    Charts(#[source] ApplyError),
    #[error("writing the status: {0}")]
    Status(#[source] ApplyError),
    /// The application is being deleted: orphaning its releases, deleting
    /// its charts or its site releases, or releasing its finalizers.
    #[error("finalizing the deleted application: {0}")]
    Finalize(#[source] ApplyError),
}

impl ReconcileError {
    /// A short category for metrics, logs and Event reasons: the failed
    /// step's own (`ApplyFailed`, `StatusFailed`, ...).
    pub fn category(&self) -> &'static str {
        match self {
            Self::Caches(e) => e.category(),
            Self::Read { .. } => "ApiError",
            Self::Finalizers(e)
            | Self::Releases { first: e, .. }
            | Self::History(e)
            | Self::Charts(e)
            | Self::Status(e)
            | Self::Finalize(e) => e.category(),
        }
    }

    /// The step that failed, as the status names it (`Reconciling`'s
    /// reason while it is retried).
    pub fn step_reason(&self) -> &'static str {
        match self {
            Self::Caches(_) | Self::Read { .. } => "ReadFailed",
            Self::Finalizers(_) => "FinalizerFailed",
            Self::Releases { .. } => "WriteFailed",
            Self::History(_) => "HistoryWriteFailed",
            Self::Charts(_) => "ChartPruneFailed",
            Self::Status(_) => "StatusFailed",
            Self::Finalize(_) => "FinalizeFailed",
        }
    }
}
