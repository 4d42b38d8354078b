//! A plan at rest, and the next reconcile that need not plan at all.
//!
//! A plan is at rest when it writes nothing (no release, prune,
//! suspension, history record or check to ask), judges no metric check,
//! and reports the status the application already has. Planning is a
//! pure function of its input, so the next plan over the same input
//! finds the same, but for the clock: what the clock alone would change
//! (a soak that ends, a grace or a deadline that runs out, a window that
//! opens) the plan already names as `requeue_after`. So a plan at rest
//! leaves, in its memo, a digest of everything it was made from and the
//! time it holds until (that, or five minutes at most); a reconcile whose
//! input has the same digest before then ends without planning
//! ([`at_rest`]).
//!
//! The digest is taken over the whole input, every pool and every
//! release the application owns, not over what the watches said had
//! changed: a resync stays a check of the caches in full, at the cost of
//! reading each pool once (a few milliseconds at ten thousand pools),
//! not of planning it. The releases the application does not own enter
//! it as a version their index keeps (of the namespace; of every
//! namespace and every profile for sites that are clusters, whose
//! drivers may live anywhere). What the digest cannot take in makes it
//! none, and every plan is then made whole: a release read without its
//! `resourceVersion`, or others read from an index made from a list.
//!
//! A property test plans random sequences of events and clock steps both
//! ways, and finds that whenever a reconcile ends here, the plan from
//! scratch is at rest too, with the same status.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::{Plan, PlanInput};
use crate::reconcile::fleet::events;

/// The longest a rest holds, whatever the plan foresees: what the clock
/// changes that no rule names as `requeue_after` (none is known; the
/// property test below looks for one) is found within this, not never.
/// A plan this often costs nothing worth counting.
pub const AT_MOST: Duration = Duration::from_secs(5 * 60);

/// What a plan at rest leaves for the next reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rest {
    /// The digest of the plan's input ([`digest`]).
    inputs: u64,
    /// Until when the clock changes nothing: when the plan asked to be
    /// made again, or [`AT_MOST`] after it was made.
    until: Timestamp,
}

impl Rest {
    /// Until when the clock changes nothing.
    pub fn until(&self) -> Timestamp {
        self.until
    }
}

/// A reconcile that need not plan: its input is what the last plan, at
/// rest, was made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtRest {
    /// When the clock would change the plan, or the rest ends: the time
    /// left of the last plan's `requeue_after`, [`AT_MOST`] at most.
    pub requeue_after: Duration,
}

/// Whether `input` is what the plan that left `rest` was made from, and
/// the clock has not reached the time that plan asked to be made again.
pub fn at_rest(input: &PlanInput, rest: &Rest) -> Option<AtRest> {
    let now = input.now.0;
    if rest.until <= now {
        return None;
    }
    let left = Duration::try_from(rest.until.duration_since(now)).unwrap_or_default();
    (digest(input)? == rest.inputs).then_some(AtRest { requeue_after: left })
}

/// What `plan`, made from `input`, leaves for the next reconcile when it
/// is at rest; `None` when it is not.
pub(super) fn of(input: &PlanInput, plan: &Plan) -> Option<Rest> {
    let writes = !plan.apply.is_empty()
        || !plan.prune.is_empty()
        || !plan.suspend.is_empty()
        || !plan.resume.is_empty()
        || !plan.inert.is_empty()
        || !plan.uninstall_skipped.is_empty()
        || !plan.ready_marks.is_empty()
        || !plan.history.is_empty();
    let checks = (plan.analysis.as_ref()).is_some_and(|a| a.judged || !a.asks.is_empty());
    let stopped = plan.blocked.is_some() || input.hold.is_some() || input.unserved.is_some();
    if writes || checks || stopped {
        return None;
    }
    let before = input.app.status.clone().unwrap_or_default();
    if !events::same_ignoring_timestamps(&before, &plan.status()) {
        return None;
    }
    // The rollout asks to be woken a second after the moment it waits
    // for, so that the look finds it passed: the rest ends at the moment.
    let after = plan.requeue_after.map(|after| after.saturating_sub(Duration::from_secs(1)));
    let after = after.map_or(AT_MOST, |after| after.min(AT_MOST));
    let until = input.now.0.checked_add(after).ok()?;
    Some(Rest {
        inputs: digest(input)?,
        until,
    })
}

/// Everything a plan reads, as one number, hashed as the memo's keys are
/// ([`super::memo::inputs_hasher`]). Each field of [`PlanInput`] is named, so
/// that a field added to it does not compile until it is taken in or said
/// to be left out here. `None` when some part cannot be taken in.
fn digest(input: &PlanInput) -> Option<u64> {
    let PlanInput {
        app,
        pools,
        nodes,
        owned,
        others,
        // Left out: the clock is what `Rest::until` is for.
        now: _,
        chart_ref,
        chart,
        hold,
        unserved,
        clock_since,
        history,
        // Left out: what a plan keeps for the next changes no decision.
        memo: _,
        first_install_alone,
        rendering_changes,
        // Left out: a plan at rest judged no check (see `of`); whether the
        // next would is decided by the application, its status and its
        // history, all taken in.
        analysis: _,
    } = input;
    let mut hasher = super::memo::inputs_hasher();
    // The whole application: spec, annotations (Flux's requests, the
    // approvals), generation and the status the rollout reads back.
    serde_json::to_vec(app).ok()?.hash(&mut hasher);
    pools.len().hash(&mut hasher);
    for pool in pools.iter() {
        pool.hash(&mut hasher);
    }
    nodes.map(|n| n.len()).hash(&mut hasher);
    for counted in nodes.iter().flat_map(|n| n.iter()) {
        counted.hash(&mut hasher);
    }
    owned.len().hash(&mut hasher);
    for release in owned {
        // Anything read of a release is read from the object of this
        // version.
        (&release.name, release.resource_version.as_deref()?).hash(&mut hasher);
    }
    others.version()?.hash(&mut hasher);
    chart_ref.hash(&mut hasher);
    chart
        .map(|c| (&c.name, &c.version, serde_json::to_string(&(&c.values, &c.schema)).unwrap_or_default()))
        .hash(&mut hasher);
    hold.hash(&mut hasher);
    unserved.hash(&mut hasher);
    clock_since.as_ref().map(|t| t.0).hash(&mut hasher);
    history.map(|h| &h.recorded).hash(&mut hasher);
    first_install_alone.hash(&mut hasher);
    rendering_changes.hash(&mut hasher);
    Some(hasher.finish())
}
