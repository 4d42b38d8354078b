//! The rollout's settings for the revision a plan rolls out: the spec's,
//! with what the history, the application's status, its releases and the
//! clock say of that revision (a halt or a completion on record, the
//! rollout under way and its approvals, where its pools may go back to,
//! the check failures its releases kept).

use std::sync::Arc;

use super::recorded::{completed, halted_before, judged_by, rollout_number};
use super::rewrite::Rewrites;
use super::{ready, rollback, schedule, PlanInput};
use crate::api::naming;
use crate::pools::Pool;
use crate::reconcile::plan::ObservedRelease;
use crate::reconcile::release::build::AppInfo;
use crate::reconcile::release::state::ReleaseState;
use crate::reconcile::rollout::{self, analysis::Answers};

/// The rollout's settings for this revision, with where the pools that
/// took it may go back to.
pub(super) fn rollout_of(
    input: &PlanInput,
    app: &AppInfo,
    selected: &[&Pool],
    revision: &str,
    rewrites: &Rewrites,
) -> Result<(rollout::Settings, rollback::Targets), String> {
    // A completed revision whose pools change rolls out again: its next
    // rollout, judged afresh (see `rewrite`).
    let completed = completed(input, revision);
    let again = rewrites.again && completed;
    let settings = rollout::Settings {
        completed: completed && !again,
        held_renders: rewrites.held,
        ..rollout_settings(input, app, selected, revision)?
    };
    // Where the pools that took the revision may go back to: read only
    // while a rollback may come.
    let rollback_may_come = settings.progressive && settings.rollback && !settings.completed;
    let targets = rollback::Targets::of(
        input.history,
        input.owned.iter().map(Arc::as_ref),
        revision,
        rollback_may_come,
    );
    let rollout_number = rollout_number(input, revision).map(|n| n + i64::from(again));
    let key = rollout_number.map(|n| naming::rollout_key(revision, n));
    let settings = rollout::Settings {
        back_to: targets.newest(input.history),
        cannot_go_back: targets.unreadable(),
        approved_steps: schedule::approved_steps(input.app, key.as_deref())
            .into_iter()
            .map(str::to_string)
            .collect(),
        rollout_number,
        ..settings
    };
    Ok((settings, targets))
}

/// The application's rollout settings for this revision, with what the
/// history and the clock say of it; the message says why they are invalid.
fn rollout_settings(
    input: &PlanInput,
    app: &AppInfo,
    selected: &[&Pool],
    revision: &str,
) -> Result<rollout::Settings, String> {
    let settings =
        rollout::Settings::new(app.spec.rollout.as_ref(), selected.len()).map_err(|e| e.to_string())?;
    // The pools share one cluster, so objects whose names do not vary by
    // pool too, and the controller plans (not a preview).
    let one_cluster =
        input.first_install_alone && app.spec.pools.kind != crate::api::PoolKind::ClusterProfile;
    Ok(rollout::Settings {
        clock_since: input.clock_since.as_ref().map(|t| t.0),
        rolled_back: input.history.is_some_and(|h| h.rolled_back(revision)),
        halted_before: halted_before(input, revision, &judged_by(app)),
        halted_because: input.history.and_then(|h| h.halted_because(revision)).map(String::from),
        first_install_alone: one_cluster,
        undeployed_leaving: one_cluster.then(|| undeployed_leaving(input, selected)).flatten(),
        new_chart_alone: input.chart.map(|c| c.version.clone()).filter(|_| one_cluster),
        ..settings
    })
}

/// A release of a pool that left the selection (pruned now, or being
/// deleted) that Helm never deployed nor found Ready, on this cluster:
/// while it exists, the first install may still be its own (found by the
/// fault soak, seed 6021: a pool left while its application was
/// suspended mid-install, and the resume that lets helm-controller
/// uninstall it let a new pool install beside it). An inert one drives
/// nothing. One the prune guard holds (most of the fleet leaving at once)
/// is not on its way out, and holds nothing: it stays, and so do its
/// objects, as they would beside any install.
fn undeployed_leaving(input: &PlanInput, selected: &[&Pool]) -> Option<String> {
    // Once any release deployed, nothing is looked for: the set of the
    // selection is built only while the first install lasts.
    let installed =
        |o: &Arc<ObservedRelease>| o.status.deployed_before || o.status.state == ReleaseState::Ready;
    if input.owned.iter().any(installed) {
        return None;
    }
    let selected: foldhash::HashSet<&str> = selected.iter().map(|p| p.name.as_str()).collect();
    let leaving: Vec<&Arc<ObservedRelease>> = (input.owned.iter())
        .filter(|o| o.pool.as_deref().is_some_and(|p| !selected.contains(p)))
        .collect();
    let pruned = super::guards::prune_held(input, leaving.len()).is_none();
    (leaving.into_iter())
        .filter(|o| o.cluster.is_none() && !o.inert && (pruned || o.deleting))
        .map(|o| o.name.clone())
        .next()
}

/// The check failures releases keep of soaks on `revision` that the
/// memory holds nothing of, by pool (see [`rollout::analysis::Analysing::kept`]).
pub(super) fn kept_failures(
    input: &PlanInput,
    revision: &str,
) -> Vec<(String, rollout::analysis::PoolRecords)> {
    let Some(Answers::Asked(memory)) = input.analysis else {
        return Vec::new();
    };
    (input.owned.iter())
        .filter_map(|o| Some((o.pool.clone()?, ready::kept_failures(Some(memory), o, revision)?)))
        .collect()
}
