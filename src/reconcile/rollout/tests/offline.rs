//! Pools offline or out of reach: skipped, waited for, counted as failed
//! when they went down after their update, or kept in their slot.
use super::*;

#[test]
fn offline_pools_are_skipped_and_count_for_nothing() {
    let d = Fleet::new()
        .offline("down", status(ReleaseState::Failed, true, None))
        .behind("up", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    assert_eq!(written(&d), ["up"], "an offline pool blocks nothing");
    assert_eq!(d.total, 1);
    assert!(d.failed.is_empty());
    // Once the others are done, the rollout awaits the offline pool still
    // behind: not complete until it catches up (fourth review, item 2).
    let d = Fleet::new()
        .offline("down", ready())
        .current("up", 0, ready(), 0)
        .decide(&progressive(), 1);
    assert_eq!((d.phase, d.offline_behind), (RolloutPhase::AwaitingOffline, 1));
    // An offline pool that took the revision and was done before it went
    // down is no pool behind.
    let d = Fleet::new()
        .add("down", 0, true, Kind::Current(0, Some(0)), Some(ready()))
        .down_since("down", 60)
        .current("up", 0, ready(), 0)
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    assert_eq!(d.phase, RolloutPhase::Complete);
    // An offline pool's timed-out upgrade is not a failure either, when it
    // was offline before the update was written (at second 0).
    let d = Fleet::new()
        .add("down", 0, true, Kind::Current(0, Some(0)), Some(status(ReleaseState::Failed, true, None)))
        .down_since("down", -60)
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    assert_ne!(d.phase, RolloutPhase::Halted);
    // New and offline: nothing installed until a node is Ready.
    let d = Fleet::new()
        .add("down", 0, true, Kind::Missing, None)
        .decide(&Settings::default(), 1);
    assert!(written(&d).is_empty());
}

#[test]
fn include_writes_offline_pools() {
    let settings = Settings {
        skip_offline: false,
        ..Settings::default()
    };
    let d = Fleet::new().offline("down", ready()).decide(&settings, 1);
    assert_eq!(written(&d), ["down"]);
}

#[test]
fn a_pool_that_goes_offline_after_its_update_counts_as_failed() {
    // "down" got the revision at second 9,000 and lost its nodes at 9,100,
    // while "next" waits its turn: the rollout halts there.
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Progressing, false, None), 9_000)
        .down_since("down", 9_100)
        .behind("next", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Failed));
    assert_eq!(d.failed, ["down"]);
    assert_eq!(d.phase, RolloutPhase::Halted);
    assert_eq!(d.state("next"), Some(PoolRollout::Halted), "no further pool is touched");
    let failure = d.pools["down"].note.as_ref().unwrap();
    assert_eq!(failure.reason, "OfflineAfterUpdate");
    // Ready only after it went down is no proof either (Helm's wait on
    // pods that were up a moment longer).
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Ready, true, Some(9_200)), 9_000)
        .down_since("down", 9_100)
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Failed));
    assert!(failure.message.contains("after its update at"), "{}", failure.message);
    // It frees no slot either: with two allowed, one more starts, not two.
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Ready, true, Some(9_050)), 9_000)
        .down_since("down", 9_100)
        .behind("b", 0, ready())
        .behind("c", 0, ready())
        .decide(
            &Settings {
                max_failures: 1,
                max_unavailable: 2,
                min_ready: Duration::from_secs(60),
                ..progressive()
            },
            1,
        );
    assert_eq!(
        d.state("down"),
        Some(PoolRollout::Failed),
        "Ready for 50 s of minReadySeconds 60: not done"
    );
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(written(&d), ["b", "c"], "a failed pool is not busy; the budget allows one failure");
}

#[test]
fn a_pool_offline_before_its_update_or_long_after_keeps_being_skipped() {
    let cases = [
        // Offline since before the revision was written to it.
        (status(ReleaseState::Progressing, false, None), 9_000, Some(8_000)),
        // Done with the revision (Ready, minReadySeconds 0), then went down.
        (status(ReleaseState::Ready, true, Some(9_010)), 9_000, Some(9_700)),
        // No time known for when it went down.
        (status(ReleaseState::Progressing, false, None), 9_000, None),
    ];
    for (i, (s, written_at, down)) in cases.into_iter().enumerate() {
        let mut fleet = Fleet::new().current("down", 0, s, written_at).behind("next", 0, ready());
        match down {
            Some(since) => fleet = fleet.down_since("down", since),
            None => fleet.pools[0].2 = true,
        }
        let d = fleet.decide(&progressive(), 1);
        assert_eq!(d.state("down"), Some(PoolRollout::Offline), "case {i}");
        assert_eq!(written(&d), ["next"], "case {i}: an offline pool blocks nothing");
    }
    // Offline on the previous revision: skipped, as before.
    let d = Fleet::new()
        .behind("down", 0, status(ReleaseState::Failed, true, None))
        .down_since("down", 9_900)
        .behind("next", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    assert_eq!(written(&d), ["next"]);
}

#[test]
fn a_pool_down_for_less_than_offline_after_is_waited_for_not_skipped_or_failed() {
    // Down 30 s ago, of a minute's grace: its update waits, the others go.
    let d = Fleet::new()
        .behind("flapping", 0, ready())
        .down_since("flapping", 9_970)
        .behind("steady", 0, ready())
        .decide(&Settings::default(), 1);
    assert_eq!(d.state("flapping"), Some(PoolRollout::Waiting));
    assert_eq!(written(&d), ["steady"]);
    assert_eq!(d.total, 2, "still counted");
    assert_eq!(d.phase, RolloutPhase::Progressing, "not complete without it");
    assert_eq!(d.requeue_after, Some(Duration::from_secs(31)), "looks again when the grace ends");
    let note = d.pools["flapping"].note.as_ref().unwrap();
    assert_eq!(note.reason, "PoolNotReached");
    assert!(note.message.contains("counts as offline from 2030-03-17T20:33:50Z"), "{}", note.message);
    // Progressive: it holds its wave (the next does not start) without
    // taking a slot of maxUnavailable.
    let settings = Settings {
        max_unavailable: 1,
        ..progressive()
    };
    let d = Fleet::new()
        .behind("a-flapping", 0, ready())
        .down_since("a-flapping", 9_990)
        .behind("b", 0, ready())
        .behind("c-next-wave", 1, ready())
        .decide(&settings, 2);
    assert_eq!(written(&d), ["b"]);
    assert_eq!(d.wave, Some((1, 2)));
    let d = Fleet::new()
        .behind("a-flapping", 0, ready())
        .down_since("a-flapping", 9_990)
        .current("b", 0, ready(), 0)
        .behind("c-next-wave", 1, ready())
        .decide(&settings, 2);
    assert!(written(&d).is_empty(), "the next wave waits for it: {:?}", written(&d));
    assert_eq!(d.wave, Some((1, 2)));
    // Updated just before it went down: not failed within the grace.
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Progressing, false, None), 9_950)
        .down_since("down", 9_960)
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Updating));
    assert!(d.failed.is_empty());
    // Past the grace: offline, and failed if the update took it down.
    let late = Settings {
        offline_after: Duration::from_secs(30),
        ..progressive()
    };
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Progressing, false, None), 9_950)
        .down_since("down", 9_960)
        .decide(&late, 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Failed));
    let d = Fleet::new().behind("down", 0, ready()).down_since("down", 9_960).decide(&late, 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    // offlineAfter 0s: offline at once, as before the grace existed.
    let at_once = Settings {
        offline_after: Duration::ZERO,
        ..Settings::default()
    };
    let d = Fleet::new().behind("down", 0, ready()).down_since("down", 9_999).decide(&at_once, 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    // A new pool down briefly is not installed onto NotReady nodes yet.
    let d = Fleet::new()
        .add("new", 0, true, Kind::Missing, None)
        .down_since("new", 9_990)
        .decide(&Settings::default(), 1);
    assert_eq!(d.state("new"), Some(PoolRollout::Waiting));
}

#[test]
fn a_pool_written_at_the_revision_went_down_after_it_whatever_its_nodes_clock_says() {
    // The pool's node reports NotReady at 8,990 by its own clock, which
    // lags: the write at 9,000 was made while the controller saw it up.
    let fleet = || {
        Fleet::new()
            .current("down", 0, status(ReleaseState::Progressing, false, None), 9_000)
            .down_since("down", 8_990)
            .behind("next", 0, ready())
    };
    let took = fleet().stamped("down", Stamp::Took { can_go_back: false }).decide(&progressive(), 1);
    assert_eq!(took.state("down"), Some(PoolRollout::Failed));
    assert_eq!(took.state("next"), Some(PoolRollout::Halted), "the change does not walk on");
    // A release this revision did not write is judged by the node's time.
    let earlier = fleet().decide(&progressive(), 1);
    assert_eq!(earlier.state("down"), Some(PoolRollout::Offline));
}

#[test]
fn a_pool_that_goes_out_of_reach_while_updating_keeps_its_slot() {
    let settings = Settings {
        max_unavailable: 1,
        max_failures: 1,
        offline_after: Duration::from_secs(30),
        ..progressive()
    };
    // "site" took the revision, then its cluster went out of reach (no
    // time known on its nodes' clock) before it was Ready.
    let d = Fleet::new()
        .current("site", 0, status(ReleaseState::Progressing, false, None), 9_800)
        .add("b", 0, false, Kind::Behind(0), Some(ready()))
        .unreached_since("site", 9_850)
        .decide(&settings, 1);
    assert_eq!(d.state("site"), Some(PoolRollout::Offline));
    assert_eq!(written(&d), Vec::<&str>::new(), "its slot is still taken");
    assert_eq!(d.state("b"), Some(PoolRollout::Pending));
    // Done before it went down: it frees its slot.
    let d = Fleet::new()
        .current("site", 0, status(ReleaseState::Ready, true, Some(9_810)), 9_800)
        .add("b", 0, false, Kind::Behind(0), Some(ready()))
        .unreached_since("site", 9_850)
        .decide(&settings, 1);
    assert_eq!(written(&d), ["b"]);
}

/// Fourth review, item 2 (soak seed 41): R halted on b; b recovered; c
/// and d are offline past offlineAfter and behind. R never reads
/// `Complete` behind them, the halt holds while they are behind, and when
/// they return none is written.
#[test]
fn a_halt_holds_for_offline_pools_behind_and_a_returning_one_is_not_written() {
    let halted_before = Settings {
        halted_before: true,
        ..progressive()
    };
    let offline = Fleet::new()
        .current("a", 0, ready(), 0)
        .current("b", 0, ready(), 0)
        .offline("c", ready())
        .offline("d", ready());
    let d = offline.decide(&halted_before, 1);
    assert_eq!(d.phase, RolloutPhase::Halted);
    let back = Fleet::new()
        .current("a", 0, ready(), 0)
        .current("b", 0, ready(), 0)
        .behind("c", 0, ready())
        .offline("d", ready());
    let d = back.decide(&halted_before, 1);
    assert_eq!(d.phase, RolloutPhase::Halted);
    assert!(written(&d).is_empty(), "{:?}", written(&d));
    // Without a halt: the returning pool takes the revision, and when it
    // fails on it the rollout halts, and the one still behind is held.
    let d = back.decide(&progressive(), 1);
    assert_eq!(written(&d), ["c"]);
    let failing = Fleet::new()
        .current("a", 0, ready(), 0)
        .current("b", 0, ready(), 0)
        .current("c", 0, status(ReleaseState::Failed, true, None), 0)
        .behind("d", 0, ready());
    let d = failing.decide(&progressive(), 1);
    assert_eq!(d.phase, RolloutPhase::Halted);
    assert!(written(&d).is_empty(), "{:?}", written(&d));
}
