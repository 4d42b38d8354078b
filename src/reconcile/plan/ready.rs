//! When each release was first seen Ready on its latest spec, kept on the
//! release ([`naming::ANNOTATION_READY_AT`]): marked by the first plan that
//! sees it so, taken back by the first that sees it no longer so. Flux's
//! Ready `lastTransitionTime` moves whenever helm-controller rewrites the
//! condition's message while it stays True, which would restart a soak
//! and could turn a pool's proof of an update that kept its site up into
//! a failure (fourth review, item 12).

use k8s_openapi::jiff::Timestamp;

use crate::reconcile::release::state::ReleaseState;
use crate::reconcile::rollout::analysis::{kept, Answers, PoolRecords, Records};

use super::{ObservedRelease, Plan, PlanInput};

/// A mark to make on a release (`at`), or to take back (`None`), with
/// the check failures of the soak it began, if any
/// ([`crate::api::naming::ANNOTATION_CHECK_FAILURES`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyMark {
    pub release: String,
    pub at: Option<String>,
    pub failures: Option<String>,
}

/// The marks `plan` leaves to make: none on a release it writes or prunes
/// (the write's `written-at` outdates any mark, and a mark's write would
/// fail the write's precondition), nor on one being deleted, nor while
/// the application is suspended (suspending is the only write it makes).
pub(super) fn marks(input: &PlanInput, plan: &Plan) -> Vec<ReadyMark> {
    if input.app.spec.suspend == Some(true) {
        return Vec::new();
    }
    let mut written = foldhash::HashSet::with_capacity_and_hasher(plan.apply.len(), Default::default());
    written.extend(
        plan.apply
            .iter()
            .map(|d| d.name.as_str())
            .chain(plan.prune.iter().map(String::as_str)),
    );
    let memory = match input.analysis {
        Some(Answers::Asked(records)) => Some(records),
        _ => None,
    };
    (input.owned.iter())
        .filter(|o| !o.deleting && !written.contains(o.name.as_str()))
        .filter_map(|o| {
            let remembered = memory.and_then(|m| remembered(m, o));
            mark_of(o, remembered, input.now.0)
        })
        .collect()
}

/// What the controller's memory holds of the soak `release` is in: the
/// records of its pool for the revision it carries, since it turned Ready.
fn remembered<'r>(memory: &'r Records, release: &ObservedRelease) -> Option<&'r PoolRecords> {
    let records = memory.get(release.pool.as_deref()?)?;
    let since = release.status.ready_since.as_deref()?.parse::<Timestamp>().ok()?;
    (carries(release, &records.revision) && records.ready_since == Some(since)).then_some(records)
}

/// Whether `release` was written at `revision`, as far as it says: one
/// written before releases were stamped with their revision is told by
/// its soak alone, whose time the records must match to the nanosecond.
fn carries(release: &ObservedRelease, revision: &str) -> bool {
    release.stamps.revision.as_deref().is_none_or(|r| r == revision)
}

/// The check failures `release` keeps of its soak on `revision`, for the
/// memory to start from when it holds nothing of that soak (a restart, a
/// failover, a shard move): `None` when it keeps none, or when the memory
/// holds the soak already.
pub(super) fn kept_failures(
    memory: Option<&Records>,
    release: &ObservedRelease,
    revision: &str,
) -> Option<PoolRecords> {
    let status = &release.status;
    let text = status.checks_recorded.as_deref().filter(|_| status.ready_recorded.is_some())?;
    if !carries(release, revision) || memory.and_then(|m| remembered(m, release)).is_some() {
        return None;
    }
    let since = status.ready_since.as_deref()?.parse::<Timestamp>().ok()?;
    Some(kept::from_annotation(text, revision, since))
}

/// The mark `release` needs now, if any. A release seen Ready for the
/// first time is marked from when Flux says it turned Ready, which is on
/// the API server's clock: kept between its write and now on ours, so
/// that a clock ahead or behind moves no soak outside what we saw.
///
/// The failures the memory holds of the soak are kept with the mark
/// whenever the memory holds one the release does not keep yet.
fn mark_of(release: &ObservedRelease, remembered: Option<&PoolRecords>, now: Timestamp) -> Option<ReadyMark> {
    let status = &release.status;
    let ready = status.state == ReleaseState::Ready && status.observed_latest;
    let mark = |at, failures| {
        Some(ReadyMark {
            release: release.name.clone(),
            at,
            failures,
        })
    };
    let recorded = status.ready_recorded.as_ref();
    let resumed = release.resumed_at.as_ref().and_then(|r| r.time);
    if !ready {
        // A resume writes back what the release held: until Flux has read
        // it, nothing new is known of the release's health, and the mark
        // made before the suspension still holds (fourth review, item 13).
        let marked_before =
            |at: &String| at.parse::<Timestamp>().is_ok_and(|at| resumed.is_some_and(|r| r >= at));
        if !status.observed_latest && recorded.is_some_and(marked_before) {
            return None;
        }
        return recorded.and_then(|_| mark(None, None));
    }
    let kept_text = status.checks_recorded.as_ref().filter(|_| recorded.is_some());
    let kept = kept_text.map(|text| kept::from_annotation(text, "", Timestamp::UNIX_EPOCH));
    let failures = match remembered {
        Some(memory) if kept::behind(kept.as_ref(), memory) => kept::to_annotation(memory),
        _ => kept_text.cloned(),
    };
    match recorded {
        Some(_) if failures.as_ref() == kept_text => None,
        Some(at) => mark(Some(at.clone()), failures),
        None => {
            let flux = status.ready_since.as_deref().and_then(|t| t.parse::<Timestamp>().ok());
            let written = release.written_at.as_ref().and_then(|w| w.time);
            // Marked after a resume, a release soaks from the resume: Flux
            // did not act on it while it was suspended.
            let since = written.max(resumed).map(|w| w.min(now));
            let at = flux.unwrap_or(now).min(now);
            mark(Some(since.map_or(at, |w| at.max(w)).to_string()), failures)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::naming;
    use serde_json::json;

    fn observed(annotations: serde_json::Value, ready: &str, ready_at: &str) -> ObservedRelease {
        let object = json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": { "name": "gw-a", "namespace": "edge", "generation": 2, "annotations": annotations,
                "labels": { naming::LABEL_POOL: "a" } },
            "status": { "observedGeneration": 2, "conditions": [{
                "type": "Ready", "status": ready, "reason": "UpgradeSucceeded", "message": "",
                "observedGeneration": 2, "lastTransitionTime": ready_at }] }
        });
        ObservedRelease::from_value(&object).expect("a release")
    }

    const WRITTEN: &str = "2030-01-01T00:00:00Z";

    #[test]
    fn a_release_first_seen_ready_is_marked_from_when_flux_says_it_turned_ready() {
        let o = observed(json!({ naming::ANNOTATION_WRITTEN_AT: WRITTEN }), "True", "2030-01-01T00:01:00Z");
        let now: Timestamp = "2030-01-01T00:05:00Z".parse().unwrap();
        assert_eq!(mark_of(&o, None, now).and_then(|m| m.at).as_deref(), Some("2030-01-01T00:01:00Z"));
        // Flux's clock ahead of ours: no later than now; behind the write: no earlier than it.
        let o = observed(json!({ naming::ANNOTATION_WRITTEN_AT: WRITTEN }), "True", "2030-01-01T00:09:00Z");
        assert_eq!(mark_of(&o, None, now).and_then(|m| m.at).as_deref(), Some("2030-01-01T00:05:00Z"));
        let o = observed(json!({ naming::ANNOTATION_WRITTEN_AT: WRITTEN }), "True", "2029-12-31T23:00:00Z");
        assert_eq!(mark_of(&o, None, now).and_then(|m| m.at).as_deref(), Some(WRITTEN));
    }

    #[test]
    fn a_marked_release_soaks_from_its_mark_when_flux_moves_the_transition_time() {
        let marked = json!({ naming::ANNOTATION_WRITTEN_AT: WRITTEN, naming::ANNOTATION_READY_AT: "2030-01-01T00:01:00Z" });
        // helm-controller rewrote Ready's message at 00:04: its time moved.
        let o = observed(marked.clone(), "True", "2030-01-01T00:04:00Z");
        assert_eq!(o.status.ready_since.as_deref(), Some("2030-01-01T00:01:00Z"));
        assert_eq!(mark_of(&o, None, "2030-01-01T00:05:00Z".parse().unwrap()), None, "marked once");
        // No longer Ready: the mark is taken back, and Flux's time is read once Ready again.
        let o = observed(marked, "False", "2030-01-01T00:06:00Z");
        assert_eq!(o.status.ready_since, None);
        let unmark = mark_of(&o, None, "2030-01-01T00:06:00Z".parse().unwrap());
        assert_eq!(unmark.map(|m| m.at), Some(None));
    }

    #[test]
    fn a_mark_older_than_the_last_write_says_nothing() {
        let o = observed(
            json!({ naming::ANNOTATION_WRITTEN_AT: "2030-01-02T00:00:00Z", naming::ANNOTATION_READY_AT: "2030-01-01T00:01:00Z" }),
            "True",
            "2030-01-02T00:02:00Z",
        );
        assert_eq!(o.status.ready_recorded, None);
        assert_eq!(o.status.ready_since.as_deref(), Some("2030-01-02T00:02:00Z"));
        let now = "2030-01-02T00:03:00Z".parse().unwrap();
        assert_eq!(mark_of(&o, None, now).and_then(|m| m.at).as_deref(), Some("2030-01-02T00:02:00Z"));
    }

    /// A resume writes back what the release held: the mark made before
    /// the suspension stands while Flux has yet to read the resume, and a
    /// release first marked after a resume soaks from the resume, as Flux
    /// did nothing with it while it was suspended.
    #[test]
    fn a_resume_keeps_the_mark_before_it_and_a_mark_after_it_is_no_earlier_than_the_resume() {
        let now = "2030-01-02T00:03:00Z".parse().unwrap();
        let resumed = "2030-01-02T00:00:00Z";
        let mut o = observed(
            json!({ naming::ANNOTATION_WRITTEN_AT: WRITTEN, naming::ANNOTATION_READY_AT: "2030-01-01T00:01:00Z",
                    naming::ANNOTATION_RESUMED_AT: resumed }),
            "True",
            "2030-01-01T00:01:00Z",
        );
        std::sync::Arc::make_mut(&mut o.status).state = ReleaseState::Progressing;
        std::sync::Arc::make_mut(&mut o.status).observed_latest = false;
        assert_eq!(mark_of(&o, None, now), None, "kept until Flux has read the resume");
        // Without the resume, a release Flux has yet to read is no longer known Ready.
        o.resumed_at = None;
        assert_eq!(mark_of(&o, None, now).map(|m| m.at), Some(None));
        let o = observed(
            json!({ naming::ANNOTATION_WRITTEN_AT: WRITTEN, naming::ANNOTATION_RESUMED_AT: resumed }),
            "True",
            "2030-01-01T00:01:00Z",
        );
        assert_eq!(mark_of(&o, None, now).and_then(|m| m.at).as_deref(), Some(resumed));
    }
}
