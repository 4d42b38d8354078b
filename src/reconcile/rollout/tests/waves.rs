//! Waves: their order, unhealthy pools first, a step that awaits
//! approval, and maintenance windows.
use super::*;

#[test]
fn waves_go_in_order_and_the_last_holds_pools_of_no_step() {
    let fleet = Fleet::new()
        .behind("z-canary", 0, ready())
        .behind("a", 1, ready())
        .behind("b", 1, ready());
    let settings = Settings {
        max_unavailable: 5,
        ..progressive()
    };
    let d = fleet.decide(&settings, 2);
    assert_eq!(written(&d), ["z-canary"], "wave 1 first, whatever the names");
    assert_eq!(d.wave, Some((1, 2)));
    let d = Fleet::new()
        .current("z-canary", 0, ready(), 0)
        .behind("a", 1, ready())
        .behind("b", 1, ready())
        .decide(&settings, 2);
    assert_eq!(written(&d), ["a", "b"]);
    assert_eq!(d.wave, Some((2, 2)));
    // A wave not yet done holds the next, even with room.
    let d = Fleet::new()
        .current("z-canary", 0, status(ReleaseState::Progressing, true, None), 9_999)
        .behind("a", 1, ready())
        .decide(&settings, 2);
    assert!(written(&d).is_empty());
}

#[test]
fn a_tolerated_failure_finishes_its_wave() {
    let settings = Settings {
        max_failures: 1,
        ..progressive()
    };
    let d = Fleet::new()
        .current("canary", 0, status(ReleaseState::Failed, true, None), 9_999)
        .behind("a", 1, ready())
        .decide(&settings, 2);
    assert_eq!(written(&d), ["a"]);
}

#[test]
fn unhealthy_pools_go_first_whatever_their_wave() {
    let d = Fleet::new()
        .behind("a", 0, ready())
        .behind("b", 1, status(ReleaseState::Stalled, true, None))
        .behind("c", 1, status(ReleaseState::Progressing, true, None))
        .decide(&progressive(), 2);
    assert_eq!(written(&d), ["b", "c"], "already unavailable: updating them costs nothing");
    assert_eq!(d.state("a"), Some(PoolRollout::Pending), "and they fill maxUnavailable");
    // A generation Flux has not observed yet is no verdict: it waits its turn.
    let d = Fleet::new()
        .behind("a", 0, ready())
        .behind("c", 1, status(ReleaseState::Progressing, false, None))
        .decide(&progressive(), 2);
    assert_eq!(written(&d), ["a"]);
}

#[test]
fn a_wave_awaiting_approval_starts_no_update_and_holds_the_waves_after_it() {
    let settings = Settings {
        max_unavailable: 3,
        awaiting_approval: [1].into(),
        ..progressive()
    };
    let fleet = || {
        Fleet::new()
            .current("a", 0, ready(), 0)
            .behind("b", 1, ready())
            .behind("c", 1, status(ReleaseState::Failed, true, None))
            .behind("d", 2, ready())
            .add("e", 2, false, Kind::Missing, None)
    };
    let d = fleet().decide(&settings, 3);
    assert_eq!(d.state("b"), Some(PoolRollout::AwaitingApproval));
    assert_eq!(d.state("d"), Some(PoolRollout::Pending), "a later wave is only pending");
    // Unavailable already, and new: nothing to break, as always.
    assert_eq!(written(&d), ["c", "e"]);
    assert_eq!(
        (d.phase, d.awaiting_approval, d.wave),
        (RolloutPhase::AwaitingApproval, Some(1), Some((2, 3)))
    );
    let message = d.status("r1", &settings).message;
    assert!(message.contains("wave 2/3 (step 2) awaits approval of revision r1"), "{message}");
    // While an earlier wave is under way, a later gate changes nothing.
    let d = Fleet::new().behind("a", 0, ready()).behind("b", 1, ready()).decide(&settings, 2);
    assert_eq!(written(&d), ["a"]);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    // Approved (no gate): the wave starts.
    let open = Settings {
        awaiting_approval: BTreeSet::new(),
        ..settings.clone()
    };
    let d = fleet().decide(&open, 3);
    assert_eq!(written(&d), ["b", "c", "e"]);
    // Halted or paused comes first.
    let paused = Settings {
        paused: true,
        ..settings
    };
    assert_eq!(fleet().decide(&paused, 3).phase, RolloutPhase::Paused);
}

#[test]
fn a_pool_outside_its_windows_waits_for_the_next_and_the_rollout_looks_again_then() {
    let d = Fleet::new()
        .behind("closed", 0, ready())
        .window_closed("closed", Some(10_600), false)
        .behind("open", 0, ready())
        .new_pool("new")
        .window_closed("new", Some(10_600), false)
        .decide(&Settings::default(), 1);
    assert_eq!(d.state("closed"), Some(PoolRollout::Waiting));
    assert_eq!(written(&d), ["new", "open"], "a new pool installs at once by default");
    assert_eq!(d.requeue_after, Some(Duration::from_secs(601)));
    let note = d.pools["closed"].note.as_ref().unwrap();
    assert_eq!(note.reason, "OutsideMaintenanceWindow");
    assert!(note.message.contains("the next, at 2030-03-17T20:43:20Z"), "{}", note.message);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    // newPools: Wait holds the install too.
    let d = Fleet::new()
        .new_pool("new")
        .window_closed("new", Some(10_600), true)
        .decide(&Settings::default(), 1);
    assert_eq!(d.state("new"), Some(PoolRollout::Waiting));
    // Progressive: it takes no slot, the next pool of its wave goes, and
    // the next wave waits for it.
    let d = Fleet::new()
        .behind("a", 0, ready())
        .window_closed("a", Some(10_600), false)
        .behind("b", 0, ready())
        .behind("c", 1, ready())
        .decide(&progressive(), 2);
    assert_eq!(written(&d), ["b"]);
    let d = Fleet::new()
        .behind("a", 0, ready())
        .window_closed("a", Some(10_600), false)
        .current("b", 0, ready(), 0)
        .behind("c", 1, ready())
        .decide(&progressive(), 2);
    assert!(written(&d).is_empty(), "{:?}", written(&d));
    // Already on the revision: a window has nothing to hold.
    let d = Fleet::new()
        .current("a", 0, ready(), 0)
        .window_closed("a", Some(10_600), true)
        .decide(&progressive(), 1);
    assert_eq!(d.phase, RolloutPhase::Complete);
}

#[test]
fn a_gate_holds_every_wave_after_it_though_its_own_pools_are_done_or_gone() {
    let settings = Settings {
        max_unavailable: 3,
        awaiting_approval: [1].into(),
        wave_steps: vec!["canary".into(), "gate".into(), "3".into()],
        ..progressive()
    };
    // Wave 1's pools were new and installed at once (done), or left:
    // wave 2 waits for wave 1's approval all the same.
    let fleet = || {
        Fleet::new()
            .current("a", 0, ready(), 0)
            .current("b", 1, ready(), 0)
            .behind("c", 2, ready())
    };
    for d in [
        fleet().decide(&settings, 3),
        Fleet::new().current("a", 0, ready(), 0).behind("c", 2, ready()).decide(&settings, 3),
    ] {
        assert_eq!(d.state("c"), Some(PoolRollout::AwaitingApproval));
        assert!(written(&d).is_empty(), "{:?}", written(&d));
        assert_eq!(
            (d.phase, d.awaiting_approval, d.awaiting_step.as_deref()),
            (RolloutPhase::AwaitingApproval, Some(1), Some("gate"))
        );
    }
    let open = Settings {
        awaiting_approval: BTreeSet::new(),
        ..settings
    };
    assert_eq!(written(&fleet().decide(&open, 3)), ["c"]);
}

/// Fourth review, item 11: a behind pool whose release Flux waits on
/// (`SourceNotReady`: its old chart's source not Ready; `ArtifactFailed`;
/// `DependencyNotReady`) runs its workload as before. It is no pool
/// unavailable already: it waits for its wave's approval and for a slot,
/// and is neither written out of turn nor failed.
#[test]
fn a_pool_flux_waits_on_takes_its_turn_and_is_not_written_ahead_of_an_approval() {
    let waiting = |reason: &str| ReleaseStatus {
        reason: reason.to_string(),
        ..status(ReleaseState::Waiting, true, None)
    };
    for reason in ["SourceNotReady", "ArtifactFailed", "DependencyNotReady"] {
        let fleet = Fleet::new()
            .current("canary", 0, ready(), 0)
            .behind("east", 1, waiting(reason))
            .behind("west", 1, ready());
        let gated = Settings {
            awaiting_approval: [1].into(),
            ..progressive()
        };
        let d = fleet.decide(&gated, 2);
        assert!(written(&d).is_empty(), "{reason}: {:?}", written(&d));
        assert_eq!(d.state("east"), Some(PoolRollout::AwaitingApproval), "{reason}");
        assert!(d.failed.is_empty(), "{reason}");
        // Approved, with one slot: one pool at a time, by name.
        let d = fleet.decide(&progressive(), 2);
        assert_eq!(written(&d), ["east"], "{reason}");
        let busy = Fleet::new()
            .current("canary", 0, status(ReleaseState::Progressing, true, None), 0)
            .behind("east", 0, waiting(reason));
        assert!(written(&busy.decide(&progressive(), 1)).is_empty(), "{reason}: past maxUnavailable");
    }
}
