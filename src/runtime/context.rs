//! What every part of the running controller shares: its error, the
//! context each reconcile gets, and the limits it paces itself by.

use std::sync::Arc;
use std::time::Duration;

use kube::api::PartialObjectMeta;
use kube::runtime::events::Recorder;
use kube::Client;

use crate::api::NodePoolApplication;
use crate::chart::source::Sources;
use crate::reconcile::apply::SharedCharts;
use crate::reconcile::observe::Caches;
use crate::runtime::api_client;
use crate::runtime::backoff::Backoff;
use crate::runtime::metrics::Metrics;
use crate::runtime::notify::{AddressError, Notifier};
use crate::runtime::server::{Readyz, ServeError};

use super::index::AppIndex;

/// The first wait after a reconcile whose writes wait on the chart; it
/// doubles while the chart keeps them waiting, up to 5 min.
pub(super) const CHART_HOLD_FIRST_RETRY: Duration = Duration::from_secs(3);

/// At most one reconcile per application per window from the events of
/// its pools, nodes, releases and chart (see [`throttle`]): the first at
/// once, the rest folded into one at the window's end. The window is ten
/// times the application's last reconcile, so that events keep it busy a
/// tenth of the time at most (measured: a 1 s window kept a 10,000-pool
/// application replanning on a whole core while helm-controller worked
/// through its releases), between a second, which keeps a small
/// application's roll-up live, and half a minute. A pool entering or
/// leaving the selection does not wait for the window's end (see
/// [`super::throttle::URGENT_WAIT`]).
pub(super) fn wake_window(last_reconcile: Option<Duration>) -> Duration {
    const SHORTEST: Duration = Duration::from_secs(1);
    const LONGEST: Duration = Duration::from_secs(30);
    last_reconcile.map_or(SHORTEST, |took| (took * 10).clamp(SHORTEST, LONGEST))
}

/// Why the controller cannot start, or stops: a flag, the connection, the
/// leadership, a pool API that appeared. A reconcile that fails says its
/// step instead ([`crate::reconcile::ReconcileError`]).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "cannot connect to the Kubernetes API: {0} (is KUBECONFIG set, or is this running in a cluster?)"
    )]
    Connect(#[source] kube::Error),
    #[error(transparent)]
    Pace(api_client::PaceError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error(transparent)]
    EventsAddr(#[from] AddressError),
    #[error("leader election on Lease {namespace}/nodepool-fanout failed: {source}")]
    LeaderElection {
        namespace: String,
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
    #[error("lost the leadership of Lease {0}/nodepool-fanout; exiting so that a standby takes over")]
    LostLeadership(String),
    #[error("the cluster now serves {0}; exiting so that the restart watches it")]
    PoolApiAppeared(&'static str),
    #[error(
        "--watch-label-selector {selector:?} is refused by the API server: {source}; give a label \
         selector such as sharding.fluxcd.io/key=shard1 or !sharding.fluxcd.io/key"
    )]
    WatchLabelSelector {
        selector: String,
        #[source]
        source: kube::Error,
    },
}

impl StartError {
    pub fn category(&self) -> &'static str {
        match self {
            Self::Connect(_) => "ConnectFailed",
            Self::Serve(_) => "ServeFailed",
            Self::LeaderElection { .. } | Self::LostLeadership(_) => "LeaderElection",
            Self::PoolApiAppeared(_) => "PoolApiAppeared",
            Self::WatchLabelSelector { .. } | Self::Pace(_) | Self::EventsAddr(_) => "InvalidFlag",
        }
    }
}

impl Context {
    /// What the chart step of a reconcile reads and writes through.
    pub(super) fn chart_step(&self) -> crate::reconcile::resolve::Charts<'_> {
        crate::reconcile::resolve::Charts {
            client: &self.client,
            sources: &self.sources,
            shared: self.shared_chart,
            no_cross_namespace_refs: self.no_cross_namespace_refs,
        }
    }
}

/// What the controller watches of an application.
pub(super) type AppMeta = PartialObjectMeta<NodePoolApplication>;

pub(super) struct Context {
    pub(super) client: Client,
    /// NodePools and HelmReleases, from their watches.
    pub(super) caches: Caches,
    pub(super) recorder: Recorder,
    /// Sends each Event recorded to Flux's notification-controller too,
    /// with `--events-addr`.
    pub(super) notifier: Option<Notifier>,
    pub(super) resync: Duration,
    pub(super) shared_chart: bool,
    pub(super) no_cross_namespace_refs: bool,
    /// `--rendering-changes`, for the plan.
    pub(super) rendering_changes: crate::reconcile::plan::RenderingChanges,
    pub(super) sources: Sources,
    /// Every HelmChart this controller manages, from its watch.
    pub(super) charts: SharedCharts,
    /// Whether every cache has listed once (see [`readiness`]).
    pub(super) ready: tokio::sync::watch::Receiver<Readiness>,
    /// What `/readyz` answers.
    pub(super) readyz: Arc<Readyz>,
    pub(super) metrics: Arc<Metrics>,
    /// How long an application waits after failures in a row.
    pub(super) backoff: Backoff,
    /// How long an application whose writes wait on the chart waits to
    /// look again, after such reconciles in a row: a source that stays
    /// unready is looked at less and less often (its own events still wake
    /// the application at once).
    pub(super) chart_backoff: Backoff,
    /// When this instance took the lead (or started, without leader
    /// election): rollout deadlines are not counted across two clocks.
    pub(super) leading_since: std::sync::OnceLock<k8s_openapi::jiff::Timestamp>,
    /// Everything kept of each application between reconciles (see
    /// [`AppIndex`]): its events, wake window, memo, backoffs and metric
    /// series, forgotten together.
    pub(super) index: Arc<AppIndex>,
    /// Asks the metric checks' queries and webhook gates, away from the
    /// reconciles (see [`super::asking`]).
    pub(super) asking: super::asking::Asking,
    /// Asks the release watch to list again, for an application that moved
    /// here from another shard (see [`super::shards`]).
    pub(super) relist: Arc<super::shards::Relist>,
    /// This instance's shard (`--watch-label-selector`), when it is one.
    pub(super) shard: Option<String>,
}

/// Where the caches stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readiness {
    Listing,
    Ready,
    /// A watch stopped before its first list: the controller is stopping.
    Stopped(&'static str),
}
