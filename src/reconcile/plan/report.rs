//! From the plan to the application's status: each pool's state as the
//! roll-up reads it, offline pools told apart from failed ones.

use crate::api::conditions;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;

pub(super) fn roll_up(
    input: &PlanInput,
    plan: &Plan,
    owned: &Owned,
    blocker: Option<(String, String)>,
    rollout: Option<Scheduled>,
    reach: Option<&BTreeMap<String, NodeCount>>,
) -> FleetReport {
    let mut decisions = rollout.as_ref().map(|r| r.decision.in_order());
    let reports: Vec<PoolReport> = plan
        .pools
        .iter()
        .map(|p| {
            let verdict = decisions.as_mut().and_then(|d| d.get(&p.pool));
            let rollout = verdict.map(|v| match &p.outcome {
                Outcome::Deferred(state) => *state,
                // Its turn came, but the chart holds every write.
                Outcome::Held | Outcome::Suspended => PoolRollout::Pending,
                _ => v.state,
            });
            let mut status = pool_status(p, owned.get(p.release.as_str()).copied());
            if let Some((state, note)) = verdict.and_then(|v| Some((v.state, v.note.as_ref()?))) {
                // A failure the rollout finds is the pool's state; what a
                // pool waits for is said beside its release's own state.
                let status = Arc::make_mut(&mut status);
                if state == PoolRollout::Failed {
                    status.state = ReleaseState::Failed;
                }
                status.reason = note.reason.to_string();
                status.message = note.message.clone();
            }
            let nodes = reach.and_then(|n| n.get(&p.pool)).copied();
            if rollout == Some(PoolRollout::Offline) {
                status = Arc::new(fleet::offline_status(
                    Arc::unwrap_or_clone(status),
                    nodes.unwrap_or_default(),
                    owned.contains_key(p.release.as_str()),
                ));
            }
            PoolReport {
                pool: p.pool.clone(),
                helm_release: p.release.clone(),
                status,
                rollout,
                nodes,
            }
        })
        .collect();
    let previous = input.app.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    // A hold no person need lift, with writes waiting on it, is what the
    // application waits on; one a person must lift is the blocker already.
    let held = input
        .hold
        .as_ref()
        .filter(|h| h.transient && plan.pools.iter().any(|p| p.outcome == Outcome::Held))
        .map(|h| (h.reason.clone(), h.message.clone()));
    FleetReport {
        pools: reports,
        missing: plan.missing_pools.clone(),
        blocker,
        held,
        generation: input.app.metadata.generation,
        previous,
        now: input.now.clone(),
        halt_cause: rollout.as_ref().and_then(|r| r.decision.halt_cause.clone()),
        rollout: rollout.map(|r| r.status),
        ..FleetReport::default()
    }
}

/// Shared with the observed release where the pool's state is its
/// release's own: at rest, every pool's, and then no pool's status is copied.
pub(super) fn pool_status(outcome: &PoolOutcome, observed: Option<&ObservedRelease>) -> Arc<ReleaseStatus> {
    let chart_version = observed.and_then(|o| o.status.chart_version.clone());
    let make = |state, reason: &str, message: String| ReleaseStatus {
        state,
        reason: reason.to_string(),
        message,
        chart_version: chart_version.clone(),
        observed_latest: false,
        ready_since: None,
        ready_recorded: None,
        checks_recorded: None,
        deployed_before: observed.is_some_and(|o| o.status.deployed_before),
        deployed_version: observed.and_then(|o| o.status.deployed_version.clone()),
    };
    let status = match (&outcome.outcome, observed) {
        (Outcome::Unchanged | Outcome::Deferred(_) | Outcome::Suspended, Some(o)) => {
            return Arc::clone(&o.status)
        }
        (Outcome::Suspended, None) => {
            make(ReleaseState::Waiting, "Suspended", "not installed: the application is suspended".into())
        }
        (Outcome::Unchanged | Outcome::Planned, None) => {
            make(ReleaseState::Progressing, "Progressing", "creating the HelmRelease".into())
        }
        (Outcome::Deferred(state), None) => make(
            ReleaseState::Waiting,
            state.as_str(),
            format!("not installed yet: the rollout is {}", state.as_str().to_lowercase()),
        ),
        (Outcome::Planned, Some(_)) => {
            make(ReleaseState::Progressing, "Progressing", "updating the HelmRelease".into())
        }
        (Outcome::Held, Some(o)) if o.status.state == ReleaseState::Ready => make(
            ReleaseState::Waiting,
            conditions::reason::CHART_NOT_READY,
            "waiting for the chart before updating".into(),
        ),
        (Outcome::Held, _) => {
            make(ReleaseState::Waiting, conditions::reason::CHART_NOT_READY, "waiting for the chart".into())
        }
        (Outcome::Failed { field, message }, _) => make(
            ReleaseState::Stalled,
            conditions::pool_reason::INVALID_POOL_CONFIG,
            format!("{field}: {message}"),
        ),
        (taken @ Outcome::HelmReleaseTaken { .. }, _) => make(
            ReleaseState::Stalled,
            conditions::pool_reason::RELEASE_NAME_CONFLICT,
            helm_release_taken_message(taken),
        ),
        (Outcome::Conflict { name }, _) => make(
            ReleaseState::Stalled,
            conditions::pool_reason::NAME_CONFLICT,
            format!("HelmRelease {name} exists and is not owned by this application; delete or rename it"),
        ),
    };
    Arc::new(status)
}
