//! What is on record of a revision beyond its pools: which rollout of it
//! is under way, whether it completed, and whether it halted, judged as
//! it is judged now. Each is read from the history and from the
//! application's own status, which is read afresh at every reconcile:
//! either record holds.

use super::PlanInput;
use crate::reconcile::release::build::AppInfo;

/// Whether this rollout of `revision` completed: its history record says
/// so, or, before the record is marked, the status the last reconcile
/// wrote for the application's current spec.
///
/// The status's completion counts only for the rollout it names: a
/// completed revision rolls out again when its pools change, and the
/// status of the rollout before says nothing of that one.
pub(super) fn completed(input: &PlanInput, revision: &str) -> bool {
    let recorded = input.history.is_some_and(|h| h.completed(revision));
    let generation = input.app.metadata.generation;
    let this_rollout = input.history.map(|h| h.rollout_number(revision));
    let reported = input
        .app
        .status
        .as_ref()
        .filter(|s| s.observed_generation == generation)
        .and_then(|s| s.rollout.as_ref())
        .is_some_and(|r| {
            r.revision == revision
                && r.phase == crate::api::RolloutPhase::Complete
                && (r.number.is_none() || this_rollout.is_none() || r.number == this_rollout)
        });
    recorded || reported
}

/// Whether this rollout of `revision` halted (or went back), judged as
/// it is judged now (`judgement`, see `rollout::settings::judged_by`), as
/// the history records it, or as the application's own status reads it
/// for its current spec. The status is a record as binding as the
/// history's, as it is for a completion: the history's may not be written
/// (its write failed, or a release's write failed first) or not yet read
/// back (its watch is behind the write, as after an API server restart),
/// while the application is read afresh at every reconcile. Found by the
/// hour-long fault soak (seed 379907332): the status read `Halted`, the
/// next plan read no record of it, the failed pools' verdicts were stale
/// (their releases had just been resumed), and four pools were written at
/// the halted revision.
///
/// An edit that changes nothing that judges the rollout (`paused`, a
/// window, the selection) lifts no halt: the history's record holds
/// across it (fourth review, item 4).
pub(super) fn halted_before(input: &PlanInput, revision: &str, judgement: &str) -> bool {
    use crate::api::RolloutPhase::{Halted, RolledBack, RollingBack};
    let generation = input.app.metadata.generation;
    let recorded = input.history.is_some_and(|h| h.halted(revision, judgement));
    let reported = (input.app.status.as_ref())
        .filter(|s| generation.is_some() && s.observed_generation == generation)
        .and_then(|s| s.rollout.as_ref())
        .is_some_and(|r| r.revision == revision && matches!(r.phase, Halted | RollingBack | RolledBack));
    recorded || reported
}

/// This rollout's number in the history (see `History::rollout_number`);
/// without the history (a preview), the number the status reports for
/// the revision, if any.
pub(super) fn rollout_number(input: &PlanInput, revision: &str) -> Option<i64> {
    match input.history {
        Some(history) => Some(history.rollout_number(revision)),
        None => {
            let reported = input.app.status.as_ref()?.rollout.as_ref()?;
            reported.number.filter(|_| reported.revision == revision)
        }
    }
}

/// What judges the application's rollout: a halt holds while it stays.
pub(super) fn judged_by(app: &AppInfo) -> String {
    crate::reconcile::rollout::settings::judged_by(app.spec.rollout.as_ref())
}
