//! `onFailure: Rollback`: which pools go back, in what order, and that a
//! rolled-back revision stays so.
use super::*;
use proptest::prelude::*;

const TOOK: Stamp = Stamp::Took { can_go_back: true };

fn rolling_back() -> Settings {
    Settings {
        rollback: true,
        back_to: Some("good".into()),
        ..progressive()
    }
}

fn failed() -> ReleaseStatus {
    status(ReleaseState::Failed, true, None)
}

#[test]
fn a_halt_takes_the_pools_that_took_the_revision_back_and_holds_the_rest() {
    let fleet = Fleet::new()
        .current("a", 0, failed(), 9_000)
        .stamped("a", TOOK)
        .behind("b", 1, ready())
        // Left as it was by the revision: it took nothing.
        .current("c", 1, ready(), 100)
        .new_pool("d");
    let d = fleet.decide(&rolling_back(), 2);
    assert_eq!(d.state("a"), Some(PoolRollout::RollBack));
    assert_eq!(d.state("b"), Some(PoolRollout::Halted));
    assert_eq!(d.state("c"), Some(PoolRollout::Done));
    assert_eq!(d.state("d"), Some(PoolRollout::Halted));
    assert_eq!(d.phase, RolloutPhase::RollingBack);
    let status = d.status("bad", &rolling_back());
    assert_eq!(status.rolled_back_to.as_deref(), Some("good"));
    assert_eq!(status.progress, "RollingBack 0/1");
    assert_eq!(status.wave, None, "waves are of the way forward");
    assert!(status.message.contains("halted: 1 failed pool(s) (a)"), "{}", status.message);
    assert!(
        status.message.contains("rolling back to revision good: 0 of 1 pool(s) back (a)"),
        "{}",
        status.message
    );
}

#[test]
fn with_nothing_to_go_back_to_a_halt_stays_a_halt_and_says_why() {
    let fleet = Fleet::new()
        .current("a", 0, failed(), 9_000)
        .stamped("a", Stamp::Took { can_go_back: false })
        .behind("b", 0, ready());
    let settings = Settings {
        back_to: None,
        ..rolling_back()
    };
    let d = fleet.decide(&settings, 1);
    assert_eq!(d.phase, RolloutPhase::Halted, "nothing went back: no rollback is reported");
    assert_eq!(d.state("a"), Some(PoolRollout::Failed));
    assert_eq!(d.state("b"), Some(PoolRollout::Halted));
    let status = d.status("bad", &settings);
    assert_eq!((status.rolled_back_to, status.progress.as_str()), (None, "Halted 0/2 (1 failed)"));
    assert!(
        status.message.contains("onFailure: Rollback could not apply: 1 pool(s)"),
        "{}",
        status.message
    );
    // A failed pool written before releases were stamped: not known
    // where it would go back to, and said so.
    let unstamped = Fleet::new()
        .current("a", 0, failed(), 9_000)
        .behind("b", 0, ready())
        .decide(&settings, 1);
    assert_eq!(unstamped.phase, RolloutPhase::Halted);
    let message = unstamped.status("bad", &settings).message;
    assert!(message.contains("carry no stamp of the revision they took"), "{message}");
    // A record that no longer reads is named.
    let unreadable = Settings {
        cannot_go_back: vec!["the record of revision good does not read: missing field `interval`".into()],
        ..settings.clone()
    };
    let message = fleet.decide(&unreadable, 1).status("bad", &unreadable).message;
    assert!(message.contains("the record of revision good does not read"), "{message}");
    // Halt, the default, never rolls back.
    let halt = Settings {
        rollback: false,
        ..rolling_back()
    };
    assert_eq!(fleet.decide(&halt, 1).phase, RolloutPhase::Halted);
}

#[test]
fn failed_pools_go_back_at_once_the_healthy_last_wave_first_within_max_unavailable() {
    let fleet = Fleet::new()
        .current("a", 0, ready(), 1_000)
        .current("b", 1, ready(), 2_000)
        .current("c", 1, ready(), 2_000)
        .current("d", 2, failed(), 9_000)
        .current("e", 2, failed(), 9_000);
    let fleet = ["a", "b", "c", "d", "e"].iter().fold(fleet, |f, p| f.stamped(p, TOOK));
    let settings = Settings {
        max_failures: 1,
        max_unavailable: 3,
        ..rolling_back()
    };
    let d = fleet.decide(&settings, 3);
    // d and e are unavailable already; one slot is left, for wave 2... then 1, by name.
    assert_eq!(d.state("d"), Some(PoolRollout::RollBack));
    assert_eq!(d.state("e"), Some(PoolRollout::RollBack));
    assert_eq!(d.state("b"), Some(PoolRollout::RollBack));
    assert_eq!(d.state("c"), Some(PoolRollout::RollbackPending));
    assert_eq!(d.state("a"), Some(PoolRollout::RollbackPending));
}

#[test]
fn a_rolled_back_revision_stays_so_and_finishes_when_every_pool_is_back() {
    let fleet = Fleet::new()
        .behind("a", 0, ready())
        .stamped("a", Stamp::RolledBack)
        .behind("b", 0, status(ReleaseState::Progressing, true, None))
        .stamped("b", Stamp::RolledBack)
        .behind("c", 1, ready());
    let d = fleet.decide(&rolling_back(), 2);
    // No failure is left, yet the revision is not rolled out again.
    assert!(d.failed.is_empty());
    assert_eq!(d.state("a"), Some(PoolRollout::RolledBack));
    assert_eq!(d.state("b"), Some(PoolRollout::RollingBack));
    assert_eq!(d.state("c"), Some(PoolRollout::Halted));
    assert_eq!(d.phase, RolloutPhase::RollingBack);
    let back = Fleet::new()
        .behind("a", 0, ready())
        .stamped("a", Stamp::RolledBack)
        .behind("c", 1, ready());
    let d = back.decide(&rolling_back(), 2);
    assert_eq!(d.phase, RolloutPhase::RolledBack);
    assert_eq!(d.status("bad", &rolling_back()).progress, "RolledBack 1/1");
    // The history alone keeps the revision held when no release says it
    // went back any more, and says so as a halt: nothing is back to report.
    let recorded = Settings {
        rolled_back: true,
        ..rolling_back()
    };
    let d = Fleet::new().behind("c", 0, ready()).decide(&recorded, 1);
    assert_eq!((d.phase, d.state("c")), (RolloutPhase::Halted, Some(PoolRollout::Halted)));
}

#[test]
fn an_offline_pool_goes_back_once_reached_and_one_with_nowhere_to_go_stays() {
    let fleet = Fleet::new()
        .current("a", 0, failed(), 9_000)
        .stamped("a", TOOK)
        .current("b", 0, ready(), 1_000)
        .stamped("b", TOOK)
        .down_since("b", 2_000)
        .current("c", 0, failed(), 9_000)
        .stamped("c", Stamp::Took { can_go_back: false });
    let settings = Settings {
        max_failures: 1,
        ..rolling_back()
    };
    let d = fleet.decide(&settings, 1);
    assert_back_and_pending(&d, crate::api::conditions::pool_reason::NOT_REACHED);
    assert_eq!(d.state("c"), Some(PoolRollout::Failed));
    let back = d.rolling_back.as_ref().unwrap();
    assert_eq!((back.pools.len(), back.unreached, back.stranded.clone()), (2, 1, vec!["c".to_string()]));
    let message = d.status("bad", &settings).message;
    assert!(message.contains("1 go back once they are reached again"), "{message}");
    assert!(message.contains("were done with no earlier revision"), "{message}");
    assert!(message.contains("and stay as they are (c)"), "{message}");
}

#[test]
fn a_healthy_pool_goes_back_inside_its_windows_a_failed_one_at_once() {
    let fleet = Fleet::new()
        .current("a", 0, failed(), 9_000)
        .stamped("a", TOOK)
        .window_closed("a", Some(10_600), false)
        .current("b", 0, ready(), 1_000)
        .stamped("b", TOOK)
        .window_closed("b", Some(10_600), false);
    let settings = Settings {
        max_unavailable: 2,
        ..rolling_back()
    };
    let d = fleet.decide(&settings, 1);
    assert_back_and_pending(&d, crate::api::conditions::pool_reason::OUTSIDE_WINDOW);
    assert_eq!(d.phase, RolloutPhase::RollingBack);
    assert_eq!(d.requeue_after, Some(Duration::from_secs(601)), "looks again when the window opens");
}

/// `a` goes back now; `b` waits, for `reason`.
fn assert_back_and_pending(d: &Decision, reason: &str) {
    assert_eq!(d.state("a"), Some(PoolRollout::RollBack));
    assert_eq!(d.state("b"), Some(PoolRollout::RollbackPending));
    assert_eq!(d.pools["b"].note.as_ref().map(|n| n.reason), Some(reason));
}

/// 0 earlier, 1 took (can go back), 2 took (nowhere to go), 3 rolled back.
fn stamp_of(n: u8) -> Stamp {
    match n {
        0 => Stamp::Earlier,
        1 => TOOK,
        2 => Stamp::Took { can_go_back: false },
        _ => Stamp::RolledBack,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn a_rollback_writes_nothing_forward_and_goes_back_in_order(
        fleet in prop::collection::vec((0..3usize, prop::bool::weighted(0.2), 0..4u8, 0..3u8, any::<bool>(), any::<bool>()), 1..12),
        max_unavailable in 1..4usize,
        max_failures in 0..3usize,
        recorded in any::<bool>(),
    ) {
        let names: Vec<String> = (0..fleet.len()).map(|i| format!("p{i:02}")).collect();
        let statuses: Vec<ReleaseStatus> = fleet
            .iter()
            .map(|&(_, _, _, _, ready, latest)| {
                let state = if ready { ReleaseState::Ready } else { ReleaseState::Failed };
                status(state, latest, Some(0))
            })
            .collect();
        let inputs: Vec<PoolInput> = fleet
            .iter()
            .enumerate()
            .map(|(i, &(wave, offline, stamp, kind, _, _))| {
                let stamp = stamp_of(stamp);
                let release = match (stamp, kind) {
                    (Stamp::Took { .. }, _) | (Stamp::Earlier, 2) => Release::Current { status: &statuses[i], written: Some(ts(9_000)), resumed: None },
                    (Stamp::RolledBack, _) | (Stamp::Earlier, 1) => Release::Behind(&statuses[i]),
                    _ => Release::Missing,
                };
                PoolInput {
                    pool: &names[i],
                    wave,
                    offline,
                    offline_since: Some(ts(5_000)),
                    down_since: Some(ts(5_000)),
                    closed: None,
                    window_closes: None,
                    release,
                    stamp,
                    suspended: false,
                    refused_before: false,
                    last_written: None,
                    analysis: None,
                }
            })
            .collect();
        let settings = Settings { max_unavailable, max_failures, rolled_back: recorded, offline_after: Duration::ZERO, ..rolling_back() };
        let d = decide(&settings, &inputs, 3, now());
        let state = |i: usize| d.pools[&names[i]].state;
        let stamp = |i: usize| inputs[i].stamp;
        let healthy = |i: usize| fleet[i].4 && fleet[i].5;
        let applies = recorded
            || inputs.iter().any(|p| p.stamp == Stamp::RolledBack)
            || d.failed.len() > max_failures;
        let back = matches!(d.phase, RolloutPhase::RollingBack | RolloutPhase::RolledBack);
        // A rollback is reported only when a pool goes back or a release
        // says it went back: a history that says so while no release does
        // reads as a halt (docs/rollouts.md: "it never reports a rollback
        // that did not happen").
        let any_back = d.rolling_back.as_ref().is_some_and(|b| !b.pools.is_empty());
        prop_assert_eq!(applies && any_back, back);
        if applies && !back {
            prop_assert_eq!(d.phase, RolloutPhase::Halted);
        }
        if !back {
            return Ok(());
        }
        let mut going_healthy = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let s = state(i);
            // Nothing goes forward while the revision is rolled back.
            prop_assert!(s != PoolRollout::Write);
            if s == PoolRollout::RollBack {
                prop_assert_eq!(stamp(i), TOOK);
                prop_assert!(!input.offline);
                if healthy(i) { going_healthy.push(i); }
            }
            if stamp(i) == TOOK && !input.offline {
                prop_assert!(matches!(s, PoolRollout::RollBack | PoolRollout::RollbackPending));
                // A pool unavailable already never waits for a slot.
                if !healthy(i) { prop_assert_eq!(s, PoolRollout::RollBack); }
            }
            if matches!(stamp(i), Stamp::Earlier | Stamp::Took { can_go_back: false }) {
                prop_assert!(!s.written_back() && s != PoolRollout::RollbackPending);
            }
        }
        let busy = (0..fleet.len()).filter(|&i| matches!(state(i), PoolRollout::RollBack | PoolRollout::RollingBack)).count();
        if let Some(&first) = going_healthy.iter().min_by_key(|&&i| (std::cmp::Reverse(fleet[i].0), &names[i])) {
            let last = *going_healthy.iter().max_by_key(|&&i| (std::cmp::Reverse(fleet[i].0), &names[i])).unwrap();
            // Healthy pools go back within maxUnavailable...
            prop_assert!(busy <= max_unavailable);
            // ...the last wave first, then by name.
            for i in 0..fleet.len() {
                let waits = state(i) == PoolRollout::RollbackPending && !inputs[i].offline;
                if waits {
                    prop_assert!((std::cmp::Reverse(fleet[i].0), &names[i]) > (std::cmp::Reverse(fleet[last].0), &names[last]), "{} waits before {}", names[i], names[first]);
                }
            }
        }
        let going = (0..fleet.len()).any(|i| {
            matches!(state(i), PoolRollout::RollBack | PoolRollout::RollingBack)
                || (state(i) == PoolRollout::RollbackPending && !inputs[i].offline)
        });
        prop_assert_eq!(d.phase == RolloutPhase::RollingBack, going);
    }
}

#[test]
fn a_completed_revision_stays_completed_whatever_fails_on_it_later() {
    // Every pool was done with the revision; then a new pool's install
    // failed and a done pool turned not Ready for its current generation.
    let fleet = Fleet::new()
        .current("a", 0, ready(), 100)
        .stamped("a", TOOK)
        .current("b", 0, failed(), 100)
        .stamped("b", TOOK)
        .current("c", 1, ready(), 100)
        .stamped("c", TOOK)
        .current("new", 1, failed(), 9_000)
        .behind("later", 1, ready());
    let completed = Settings {
        completed: true,
        ..rolling_back()
    };
    let d = fleet.decide(&completed, 2);
    assert_eq!(d.rolling_back, None, "a completed revision is never rolled back");
    for (pool, state) in [
        ("a", PoolRollout::Done),
        ("b", PoolRollout::Failed),
        ("c", PoolRollout::Done),
        ("new", PoolRollout::Failed),
        ("later", PoolRollout::Write),
    ] {
        assert_eq!(d.state(pool), Some(state), "{pool}");
    }
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(d.failed, ["b", "new"]);
    // Under Halt, the default, nothing halts either.
    let halt = Settings {
        completed: true,
        ..progressive()
    };
    assert_eq!(fleet.decide(&halt, 2).state("later"), Some(PoolRollout::Write));
    // Not completed, the same failures halt and roll back.
    let d = fleet.decide(&rolling_back(), 2);
    assert_eq!(d.phase, RolloutPhase::RollingBack);
    assert_eq!(d.state("later"), Some(PoolRollout::Halted));
}

#[test]
fn a_completed_revision_with_a_failed_pool_says_so() {
    let fleet = Fleet::new().current("a", 0, ready(), 100).current("b", 0, failed(), 100);
    let completed = Settings {
        completed: true,
        ..progressive()
    };
    let d = fleet.decide(&completed, 1);
    assert_eq!(d.phase, RolloutPhase::Complete);
    let status = d.status("r1", &completed);
    assert_eq!(status.progress, "Complete 1/2 (1 failed)");
    assert!(status.message.contains("1 pool(s) failed since it completed (b)"), "{}", status.message);
}
