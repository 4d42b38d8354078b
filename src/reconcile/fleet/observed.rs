//! The fleet report of one application for those who only look (`get`,
//! `tree`, the console): the controller's own observe and plan over the
//! same kind of caches (the console's watches, or `get`'s lists put into
//! caches), with nothing written. So each pool reads as the controller's
//! report reads it, its rollout verdict included, whether or not the
//! bounded status lists it.
//!
//! What only the controller can find is taken from the application's
//! status, which lists such pools first: a pool's values that break the
//! chart's schema (a looker does not fetch the chart), a write the API
//! server refused, a chart that holds every write, and where each pool
//! stands with its metric checks (a looker asks no query).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{conditions, ConditionStatus, NodePoolApplication, NodePoolApplicationStatus};
use crate::reconcile::observe::{self, Beyond, Caches};
use crate::reconcile::plan::{Hold, Memo, ObservedRelease, Outcome};
use crate::reconcile::rollout::analysis::{Answers, Verdict};

use super::rows::{self, PoolRow};
use super::{is_refusal, FleetReport, WriteRefused};

/// One application's fleet as a looker sees it.
#[derive(Debug, Clone)]
pub struct Observation {
    pub report: FleetReport,
    /// The releases the application owns, for what a row reads of them
    /// beside the report (the Helm revision, a suspension).
    pub owned: Vec<Arc<ObservedRelease>>,
    /// What this look found, for the next look at the application
    /// ([`observe_with`]).
    pub memo: Memo,
}

impl Observation {
    /// A row per pool, as `get` prints them and the console's cells show them.
    pub fn rows(&self, app: &NodePoolApplication) -> Vec<PoolRow> {
        rows::rows(app, &self.report, &self.owned)
    }
}

/// How `app`'s fleet stands at `now`, from `caches`.
pub fn observe(caches: &Caches, app: &NodePoolApplication, now: Time) -> Observation {
    observe_with(caches, app, now, None)
}

/// [`observe`], building again only the pools that changed since the look
/// that found `memo`: what a console that shows ten thousand pools after
/// each change does.
pub fn observe_with(
    caches: &Caches,
    app: &NodePoolApplication,
    now: Time,
    memo: Option<&Memo>,
) -> Observation {
    let observed = observe::observe(caches, app);
    let history = caches.history_of(app);
    let found = Found::in_status(app);
    // The shared chart of the revision the status reports: its record
    // names it (none when releases carry their own chart).
    let revision = app.status.as_ref().and_then(|s| s.rollout.as_ref()).map(|r| r.revision.as_str());
    let chart_ref = revision.and_then(|r| history.past(r)).and_then(Result::ok).and_then(|p| p.chart_ref);
    let beyond = Beyond {
        now,
        chart_ref: chart_ref.as_ref(),
        chart: None,
        hold: found.hold,
        clock_since: None,
        memo,
        analysis: Some(Answers::Reported(&found.verdicts)),
        // What the controller holds by default; what a report reads of
        // the releases is the same either way but for the held count.
        rendering_changes: crate::reconcile::plan::RenderingChanges::default(),
    };
    let (planned, owned) = observed.plan(app, &history, beyond);
    let mut report = planned.report;
    report.writes_refused(&found.pools);
    // Refusals the status counts and does not list: the pools this look
    // would write that the status leaves out may be those.
    let seen = report.pools.iter().filter(|p| is_refusal(&p.status.reason)).count();
    let unlisted = found.refused.saturating_sub(seen);
    if unlisted > 0 {
        let writes: Vec<&str> = planned
            .pools
            .iter()
            .filter(|p| p.outcome == Outcome::Planned && !found.listed.contains(&p.pool))
            .map(|p| p.pool.as_str())
            .collect();
        report.refusals_unlisted(&writes, unlisted, found.listed.len());
    }
    Observation {
        report,
        owned,
        memo: planned.memo,
    }
}

/// What the controller found that a looker cannot, as the status says it
/// for the application's current generation.
#[derive(Debug, Default)]
struct Found {
    hold: Option<Hold>,
    /// Pools whose values break the chart's schema, and pools whose write
    /// the API server refused.
    pools: Vec<WriteRefused>,
    /// Where each pool the status lists stands with its metric checks.
    verdicts: BTreeMap<String, Verdict>,
    /// How many pools' writes the controller refused, listed or not.
    refused: usize,
    /// The pools the status lists.
    listed: BTreeSet<String>,
}

impl Found {
    fn in_status(app: &NodePoolApplication) -> Self {
        let Some(status) = app.status.as_ref().filter(|s| s.observed_generation == app.metadata.generation)
        else {
            return Self::default();
        };
        let pools = status
            .pools
            .iter()
            .filter(|p| p.ready == ConditionStatus::False)
            // A clash with a release the console does not watch (not
            // ours) is found by the controller alone, too.
            .filter(|p| is_refusal(&p.reason))
            .map(|p| WriteRefused {
                pool: p.pool.clone(),
                reason: p.reason.clone(),
                message: p.message.clone(),
                // A refusal the API server may lift reads Failed; the
                // status says Stalled only through its condition.
                retriable: crate::reconcile::fleet::write_retried(status, &p.reason),
            })
            .collect();
        let verdicts = status
            .pools
            .iter()
            .filter_map(|p| {
                let verdict = match p.reason.as_str() {
                    conditions::pool_reason::ANALYSIS_FAILED => Verdict::Failed(p.message.clone()),
                    conditions::pool_reason::ANALYSIS_RUNNING => Verdict::Asking {
                        next: std::time::Duration::ZERO,
                        message: p.message.clone(),
                    },
                    _ => return None,
                };
                Some((p.pool.clone(), verdict))
            })
            .collect();
        Self {
            hold: hold_in(status),
            pools,
            verdicts,
            refused: usize::try_from(status.refused_pools).unwrap_or_default(),
            listed: status.pools.iter().map(|p| p.pool.clone()).collect(),
        }
    }
}

/// The chart's hold on every write, when the status says one held them:
/// pools wait for the chart, and the condition that says why is Stalled
/// (a person must act) or Reconciling (source-controller will get there).
fn hold_in(status: &NodePoolApplicationStatus) -> Option<Hold> {
    if !status.pools.iter().any(|p| p.reason == conditions::reason::CHART_NOT_READY) {
        return None;
    }
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_ && c.status == "True");
    let (condition, transient) = match condition(conditions::STALLED) {
        Some(stalled) => (stalled, false),
        None => (condition(conditions::RECONCILING)?, true),
    };
    Some(Hold {
        reason: condition.reason.clone(),
        message: condition.message.clone(),
        transient,
    })
}
