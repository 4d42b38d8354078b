//! Failed pools: `maxFailures`, the progress deadline, a halt and what
//! ends it, and the status that names them.
use super::*;

#[test]
fn a_flux_failure_halts_at_max_failures_zero() {
    for state in [ReleaseState::Failed, ReleaseState::Stalled] {
        let d = Fleet::new()
            .current("a", 0, status(state, true, None), 9_990)
            .behind("b", 0, ready())
            .new_pool("c")
            .decide(&progressive(), 1);
        assert_eq!(d.phase, RolloutPhase::Halted, "{state:?}");
        assert_eq!(d.failed, ["a"]);
        assert_eq!(d.state("b"), Some(PoolRollout::Halted));
        assert_eq!(d.state("c"), Some(PoolRollout::Halted), "a new pool is not given a bad revision");
        assert!(written(&d).is_empty());
    }
}

#[test]
fn a_failure_of_an_older_generation_is_not_counted() {
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Stalled, false, None), 9_990)
        .behind("b", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert_ne!(d.phase, RolloutPhase::Halted);
}

#[test]
fn failures_up_to_max_failures_are_tolerated() {
    let settings = Settings {
        max_failures: 1,
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Failed, true, None), 9_990)
        .behind("b", 0, ready())
        .decide(&settings, 1);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(written(&d), ["b"], "a failed pool does not hold a place among the unavailable");
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Failed, true, None), 9_990)
        .current("b", 0, status(ReleaseState::Stalled, true, None), 9_990)
        .behind("c", 0, ready())
        .decide(&settings, 1);
    assert_eq!(d.phase, RolloutPhase::Halted);
    assert_eq!(d.failed, ["a", "b"]);
}

#[test]
fn the_progress_deadline_fails_a_pool_and_says_why() {
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 10_000 - 600)
        .behind("b", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Failed));
    let failure = d.pools["a"].note.as_ref().unwrap();
    assert_eq!(failure.reason, "ProgressDeadlineExceeded");
    let why = failure.message.as_str();
    assert!(why.contains("progressDeadline (10m)"), "{why}");
    // The time of the update, not the time since: the status holding
    // it must not change from one reconcile to the next.
    assert!(why.contains("of its update at 20"), "{why}");
    assert!(!why.contains("ago") && !why.contains("after its update"), "{why}");
    assert_eq!(d.phase, RolloutPhase::Halted);
    // Before the deadline: look again when it passes.
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Waiting, true, None), 10_000 - 500)
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert_eq!(d.requeue_after, Some(Duration::from_secs(101)));
}

#[test]
fn a_deadline_is_not_counted_across_two_clocks() {
    // Written 10 min ago by the previous leader's clock, a minute before
    // this replica took the lead: counted from the lead, not failed.
    let settings = Settings {
        clock_since: Some(ts(10_000 - 60)),
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 10_000 - 600)
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert_eq!(d.requeue_after, Some(Duration::from_secs(541)));
    // Written after the lead, by this clock: counted from the write.
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 10_000 - 30)
        .decide(&settings, 1);
    assert_eq!(d.requeue_after, Some(Duration::from_secs(571)));
    // A whole deadline past the lead fails it as ever.
    let settings = Settings {
        clock_since: Some(ts(10_000 - 600)),
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 10_000 - 900)
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Failed));
}

#[test]
fn a_new_revision_supersedes_a_halted_one() {
    // The failed pool carries the old revision now: it is behind,
    // unhealthy, and goes first; the failure no longer counts.
    let d = Fleet::new()
        .behind("a", 0, status(ReleaseState::Stalled, true, None))
        .behind("b", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(written(&d), ["a"]);
    assert!(d.failed.is_empty());
}

#[test]
fn the_status_names_failed_pools_and_the_wave() {
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Failed, true, None), 9_999)
        .behind("b", 1, ready())
        .decide(&progressive(), 2);
    let s = d.status("rev1", &progressive());
    assert_eq!(s.phase, RolloutPhase::Halted);
    assert_eq!(s.progress, "Halted 0/2 (1 failed)");
    assert!(s.message.contains("(a)") && s.message.contains("maxFailures 0"), "{}", s.message);
    let d = five_behind().decide(&progressive(), 1);
    assert_eq!(d.status("r", &progressive()).message, "0 of 5 pools done, 1 updated");
}

/// Found by the fault soak (seed 41): a halted revision's failed pool left
/// the selection (or recovered), no pool failed any more, and the revision
/// walked on. The history's halt holds it while any pool is to be written.
#[test]
fn a_recorded_halt_holds_though_no_pool_fails_now() {
    let halted_before = Settings {
        halted_before: true,
        ..progressive()
    };
    let fleet = Fleet::new()
        .current("recovered", 0, ready(), 9_000)
        .behind("next", 0, ready())
        .new_pool("new");
    let d = fleet.decide(&halted_before, 1);
    assert_eq!(d.phase, RolloutPhase::Halted);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(d.state("next"), Some(PoolRollout::Halted));
    assert_eq!(d.state("new"), Some(PoolRollout::Halted), "the revision is known bad");
    let message = d.status("r", &halted_before).message;
    assert!(message.contains("halted earlier") && message.contains("request a reconcile"), "{message}");
    // Without the record, the same fleet goes on.
    assert_eq!(written(&fleet.decide(&progressive(), 1)), ["new", "next"]);
    // Every pool done with the revision: nothing is held, it is complete.
    let done = Fleet::new().current("a", 0, ready(), 9_000).current("b", 0, ready(), 9_000);
    assert_eq!(done.decide(&halted_before, 1).phase, RolloutPhase::Complete);
}

/// Found by the fault soak (seed 636492862): the failed pool left the
/// selection while two others soaked. The revision read `Progressing`
/// (nothing was to be written), which wiped the status's record of the
/// halt, and pools added next installed at the halted revision. A halted
/// revision stays `Halted` until every pool is done with it.
#[test]
fn a_recorded_halt_holds_while_pools_still_soak_or_update_and_completes_once_all_are_done() {
    let unrecorded = Settings {
        min_ready: Duration::from_secs(3),
        ..progressive()
    };
    let halted_before = Settings {
        halted_before: true,
        ..unrecorded.clone()
    };
    let soaking = status(ReleaseState::Ready, true, Some(9_999));
    let updating = status(ReleaseState::Progressing, true, None);
    for (what, fleet) in [
        ("soaking", Fleet::new().current("a", 0, soaking, 9_990).current("b", 0, ready(), 9_000)),
        ("updating", Fleet::new().current("a", 0, updating, 9_990).current("b", 0, ready(), 9_000)),
    ] {
        let d = fleet.decide(&halted_before, 1);
        assert_eq!(d.phase, RolloutPhase::Halted, "{what}");
        assert!(written(&d).is_empty(), "{what}: {:?}", d.pools);
        // Without the record, the same fleet is under way.
        assert_eq!(fleet.decide(&unrecorded, 1).phase, RolloutPhase::Progressing, "{what}");
        let with_new = fleet.new_pool("c").decide(&halted_before, 1);
        assert_eq!(with_new.phase, RolloutPhase::Halted, "{what}");
        assert_eq!(with_new.state("c"), Some(PoolRollout::Halted), "{what}: the revision is known bad");
    }
    let done = Fleet::new().current("a", 0, ready(), 9_000).current("b", 0, ready(), 9_000);
    assert_eq!(done.decide(&halted_before, 1).phase, RolloutPhase::Complete);
}
