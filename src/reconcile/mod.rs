//! One reconcile of one application: resolve the chart → observe → plan →
//! apply → report, listed in [`reconcile`]; the caller (the runtime's
//! reconciler) waits for the caches, reads the application, finalizes a
//! deleted one and publishes what the report says.
//!
//! - [`resolve`]: the chart version, its shared HelmChart made sure of,
//!   and the chart read, or why writes wait on it.
//! - [`observe`] reads the watch caches ([`packed`] keeps releases
//!   compressed there), and counts each pool's nodes; which applications
//!   a watch event concerns is said by the runtime's `changes`.
//! - [`plan`] decides, purely, what to write, what to prune and what to
//!   report: each pool's release (built by [`release::build`], its state
//!   read by [`release::state`]), whether a live release drifted
//!   ([`drift`]), which pools the rollout lets through ([`rollout`]),
//!   whether pools share an object ([`isolation`]), what the
//!   revision history records ([`history`]), and how the fleet stands
//!   ([`fleet`]).
//! - [`apply`] carries the plan out ([`apply::carry_out`]) with
//!   server-side apply, prunes or orphans ([`orphan`]) only what the
//!   application owns ([`managed_fields`]), claims a Helm release
//!   ([`apply::claim`]) before a HelmRelease first drives it, and returns what
//!   happened.
//! - [`fleet`] says, once, how the fleet stands from the plan and what
//!   apply did: the status, the Events, the metrics' counts, `get`'s rows
//!   and the console's cells all read its report.
//! - the metric checks the plan says are due are asked last
//!   ([`apply::asks`]), and the next plan judges their answers.
//! - [`steps`] carries each step out for [`reconcile`]; [`ReconcileError`]
//!   says which step failed.
//!
//! Nothing under `plan`, `release`, `drift`, `rollout`, `isolation` or
//! `fleet` touches the network: they take plain data and return plain
//! data.

use std::time::Duration;

use kube::runtime::reflector::ObjectRef;

use crate::api::NodePoolApplication;

pub mod apply;
pub mod drift;
mod error;
pub mod fleet;
pub mod history;
pub mod isolation;
pub mod managed_fields;
pub mod observe;
pub mod orphan;
pub mod packed;
pub mod plan;
pub mod release;
pub mod resolve;
pub mod rollout;
pub mod steps;

pub use error::ReconcileError;
pub use steps::{Asking, Controller, Memory};

/// How soon a plan is made again when a release changed between observe
/// and its write: the change's own watch event comes sooner, unless the
/// runtime sees nothing in it worth a reconcile.
const CHANGED_MEANWHILE_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// How one reconcile ended.
#[derive(Debug)]
pub enum Ended {
    /// Planned, carried out and reported.
    Reconciled(Box<Reconciled>),
    /// Not planned: this many of the application's releases are cut down
    /// in the cache, as another shard's (see [`observe::Observed::cut_down`]).
    /// The caller has them read again.
    ReleasesCutDown(usize),
    /// Not planned: this many releases its last reconcile created are not
    /// in the release cache yet. A plan now would find them missing and
    /// create them again (each a claim, a create refused, a read and a
    /// write of what is there already); the caller looks again soon.
    CreatesUnseen(usize),
    /// Not planned: the input is what the last plan was made from, and
    /// that plan wrote nothing and left the status as it was (see
    /// [`plan::rest`]).
    AtRest(plan::AtRest),
}

/// What one reconcile did, for the controller to publish and to say when
/// to look again.
#[derive(Debug)]
pub struct Reconciled {
    /// The status written, the counts for the metrics, and the Events.
    pub published: fleet::Published,
    /// A hold on every write that source-controller will lift (looked at
    /// again soon, not at the resync).
    pub chart_waits: Option<plan::Hold>,
    /// When the clock alone changes the plan (a soak ends, a deadline passes).
    pub requeue_after: Option<Duration>,
    /// Releases not written because another object holds their name:
    /// the application is looked at again when it goes.
    pub names_taken: Vec<String>,
    /// The step that failed after the status was written, if one did:
    /// the reconcile is retried at the failure backoff.
    pub failed: Option<ReconcileError>,
}

/// One reconcile of an application that is there and not being deleted.
/// Every write comes before the status, so that the status says what
/// failed, whichever step it was.
pub async fn reconcile(c: &Controller<'_>, app: &NodePoolApplication) -> Result<Ended, ReconcileError> {
    let namespace = app.metadata.namespace.as_deref().unwrap_or_default();
    let in_cache = |name: &str| c.caches.releases.get(&ObjectRef::new(name).within(namespace)).is_some();
    if let Some(unseen) = c.memory.creates_unseen(&in_cache) {
        return Ok(Ended::CreatesUnseen(unseen));
    }
    let apis = steps::Apis::of(c.client, app);
    steps::set_finalizers(c, &apis, app).await?;
    let chart = resolve::resolve(&c.charts, app).await;
    let observed = observe::observe(c.caches, app);
    if observed.cut_down > 0 {
        return Ok(Ended::ReleasesCutDown(observed.cut_down));
    }
    let history = c.caches.history_of(app);
    let steps::Planned {
        mut planned,
        owned,
        rest,
    } = match steps::plan(c, app, observed, chart.as_ref(), &history) {
        Ok(planned) => planned,
        Err(at_rest) => return Ok(Ended::AtRest(at_rest)),
    };
    c.memory.planned(planned.waits_on_releases);
    let mut applied = steps::carry_out(c, &apis, app, &mut planned, &owned).await;
    c.memory.created(applied.created());
    let mut failed = applied.failure();
    // What the plan decided of the revision (that it is rolled out, halted
    // or complete) is recorded whatever became of one pool's write: a pool
    // refused for good (a Helm release someone else holds) would otherwise
    // keep every later revision out of the history, and with it the
    // rollback's targets.
    let recorded = steps::write_history(&apis, app, &planned.history).await.err();
    failed = failed.or(recorded);
    if failed.is_none() {
        let rollback = std::mem::take(&mut planned.rollback_charts);
        failed = steps::prune_charts(c, app, chart.as_ref(), &owned, &applied, &rollback).await.err();
    }
    let (published, written) = steps::report(&apis, app, &mut planned, &applied, failed.as_ref()).await?;
    // Answers come in after the report, away from the reconcile, and wake
    // the application: the next plan judges them.
    let asking = steps::ask_checks(c, app, &mut planned);
    // Nothing failed and nothing was written: the next reconcile over the
    // same input would find the same, and need not plan.
    let quiet = failed.is_none()
        && !written
        && applied.done.is_empty()
        && applied.refused.is_empty()
        && applied.changed_meanwhile.is_empty()
        && published.events.is_empty()
        && !asking;
    c.memory.keep_rest(rest.filter(|_| quiet));
    let soon = (!applied.changed_meanwhile.is_empty()).then_some(CHANGED_MEANWHILE_AGAIN_AFTER);
    let requeue_after = soon.into_iter().chain(planned.requeue_after).min();
    Ok(Ended::Reconciled(Box::new(Reconciled {
        published,
        chart_waits: chart.and_then(Result::err).filter(|hold| hold.transient),
        requeue_after,
        names_taken: applied.names_taken(),
        failed,
    })))
}
