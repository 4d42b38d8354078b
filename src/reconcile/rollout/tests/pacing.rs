//! Pools one after another: the slots `maxUnavailable` gives, the order,
//! readiness and `minReadySeconds` before the next, new pools, and a
//! paused rollout.
use super::*;

#[test]
fn all_at_once_writes_every_pool() {
    let d = five_behind().new_pool("f").decide(&Settings::default(), 1);
    assert_eq!(written(&d), ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(d.updated, 6);
}

#[test]
fn progressive_starts_one_pool_in_name_order() {
    let d = five_behind().decide(&progressive(), 1);
    assert_eq!(written(&d), ["a"]);
    assert_eq!(d.state("b"), Some(PoolRollout::Pending));
    assert_eq!((d.updated, d.done, d.total), (1, 0, 5));
    assert_eq!(d.phase, RolloutPhase::Progressing);
}

#[test]
fn max_unavailable_caps_pools_updating_at_once() {
    let settings = Settings {
        max_unavailable: 2,
        ..progressive()
    };
    let d = five_behind().decide(&settings, 1);
    assert_eq!(written(&d), ["a", "b"]);
    // One still updating: one more starts.
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 9_990)
        .behind("b", 0, ready())
        .behind("c", 0, ready())
        .decide(&settings, 1);
    assert_eq!(written(&d), ["b"]);
    assert_eq!(d.state("c"), Some(PoolRollout::Pending));
}

#[test]
fn a_decision_waits_on_releases_only_while_updates_wait_for_a_slot() {
    let a_under_way_b_behind = || {
        Fleet::new()
            .current("a", 0, status(ReleaseState::Progressing, true, None), 9_990)
            .behind("b", 0, ready())
    };
    let d = five_behind().decide(&progressive(), 1);
    assert_eq!(d.waits_on_releases(1), Some(1), "b to e wait for a, written now");
    let d = a_under_way_b_behind().decide(&progressive(), 1);
    assert_eq!(d.waits_on_releases(1), Some(1), "b waits for a's slot");
    let d = a_under_way_b_behind().decide(&Settings::default(), 1);
    assert_eq!(d.waits_on_releases(1), None, "AllAtOnce holds nothing back");
    let paused = Settings {
        paused: true,
        ..progressive()
    };
    let d = a_under_way_b_behind().decide(&paused, 1);
    assert_eq!(d.phase, RolloutPhase::Paused);
    assert_eq!(d.waits_on_releases(1), None, "paused: a person, not a release, moves it on");
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 9_990)
        .decide(&progressive(), 1);
    assert_eq!(d.waits_on_releases(1), None, "the last pool under way: nothing waits");
    let d = Fleet::new()
        .current("a", 0, ready(), 0)
        .current("b", 0, status(ReleaseState::Progressing, true, None), 9_990)
        .behind("c", 1, ready())
        .decide(&progressive(), 2);
    assert_eq!(d.state("c"), Some(PoolRollout::Pending));
    assert_eq!(d.waits_on_releases(1), Some(1), "the next wave waits for b");
}

#[test]
fn a_tenth_of_the_slots_or_every_release_under_way_is_worth_a_look() {
    let settings = Settings {
        max_unavailable: 40,
        ..progressive()
    };
    let under_way = |fleet: Fleet, n: usize| {
        (0..n).fold(fleet, |f, i| {
            f.current(&format!("u{i:02}"), 0, status(ReleaseState::Progressing, true, None), 9_990)
        })
    };
    let d = under_way(Fleet::new(), 40).behind("z", 0, ready()).decide(&settings, 1);
    assert_eq!(d.waits_on_releases(40), Some(4), "40 slots: 4 verdicts");
    let d = under_way(Fleet::new(), 3).behind("z", 1, ready()).decide(&settings, 2);
    assert_eq!(d.waits_on_releases(40), Some(3), "the wave's last 3: all of them");
}

#[test]
fn decisions_looked_up_in_order_or_not_are_each_pools_own() {
    let d = five_behind().decide(&progressive(), 1);
    let mut in_order = d.in_order();
    let asked = ["a", "aa", "b", "d", "c", "e", "a", "z"];
    let found: Vec<Option<PoolRollout>> = asked.iter().map(|p| in_order.get(p).map(|d| d.state)).collect();
    let expected: Vec<Option<PoolRollout>> = asked.iter().map(|p| d.state(p)).collect();
    assert_eq!(found, expected);
    assert_eq!(found.iter().filter(|s| s.is_none()).count(), 2, "aa and z are no pools of it");
}

#[test]
fn the_next_pool_starts_once_the_previous_is_done() {
    let d = Fleet::new()
        .current("a", 0, ready(), 0)
        .behind("b", 0, ready())
        .behind("c", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Done));
    assert_eq!(written(&d), ["b"]);
    assert_eq!((d.updated, d.done), (2, 1));
}

#[test]
fn a_ready_release_of_an_older_generation_is_still_updating() {
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Ready, false, Some(0)), 9_999)
        .behind("b", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert!(written(&d).is_empty());
}

#[test]
fn min_ready_seconds_holds_the_next_pool_and_asks_to_look_again() {
    let settings = Settings {
        min_ready: Duration::from_secs(30),
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Ready, true, Some(9_990)), 9_980)
        .behind("b", 0, ready())
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Soaking));
    assert!(written(&d).is_empty(), "soaking counts as unavailable");
    assert_eq!(d.requeue_after, Some(Duration::from_secs(21)));
    // Ready long enough.
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Ready, true, Some(9_970)), 9_960)
        .behind("b", 0, ready())
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Done));
    assert_eq!(written(&d), ["b"]);
}

/// Found by the fault soak (seed 98979945): a revision superseded while a
/// pool's update to it was under way. That pool is behind the new
/// revision and not judged by Flux yet; counting its slot free started a
/// healthy pool beside it: two pools down under `maxUnavailable: 1`.
#[test]
fn an_update_under_way_of_a_superseded_revision_keeps_its_slot() {
    let upgrading = || status(ReleaseState::Progressing, false, None);
    let superseded = || {
        Fleet::new()
            .behind("p0", 0, ready())
            .behind("p2", 0, upgrading())
            .behind("p3", 0, ready())
    };
    let d = superseded().last_written("p2", 9_990).decide(&progressive(), 1);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(d.state("p2"), Some(PoolRollout::Pending), "it waits for Flux's verdict");
    // Suspended, Helm upgrades nothing: no slot taken.
    let d = superseded().last_written("p2", 9_990).suspended("p2").decide(&progressive(), 1);
    assert_eq!(written(&d), ["p0"]);
    // Written past its progressDeadline (or resumed, its spec unchanged
    // for long): no update under way, and no slot held for ever.
    let d = superseded().last_written("p2", 10_000 - 601).decide(&progressive(), 1);
    assert_eq!(written(&d), ["p0"]);
    // Once Flux judges it Ready, the rollout goes on one pool at a time.
    let d = Fleet::new()
        .behind("p0", 0, ready())
        .behind("p2", 0, ready())
        .behind("p3", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(written(&d), ["p0"]);
}

#[test]
fn a_pool_soaking_on_a_superseded_revision_keeps_its_slot_until_its_soak_ends() {
    let settings = Settings {
        min_ready: Duration::from_secs(3),
        ..progressive()
    };
    let superseded = |ready_since: i64| {
        Fleet::new()
            .behind("p0", 0, ready())
            .behind("p2", 0, status(ReleaseState::Ready, true, Some(ready_since)))
            .behind("p3", 0, ready())
    };
    let d = superseded(9_999).last_written("p2", 9_990).decide(&settings, 1);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(d.requeue_after, Some(Duration::from_secs(3)), "woken past its soak's end");
    // Soaked: the rollout goes on one pool at a time.
    let d = superseded(9_990).last_written("p2", 9_990).decide(&settings, 1);
    assert_eq!(written(&d), ["p0"]);
    // Written past its progressDeadline: no update of ours under way.
    let d = superseded(9_999).last_written("p2", 10_000 - 601).decide(&settings, 1);
    assert_eq!(written(&d), ["p0"]);
}

#[test]
fn new_pools_install_at_once() {
    let d = five_behind().new_pool("new").decide(&progressive(), 1);
    assert_eq!(written(&d), ["a", "new"]);
}

#[test]
fn paused_starts_no_update_but_lets_running_ones_finish_and_new_pools_install() {
    let settings = Settings {
        paused: true,
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 9_999)
        .behind("b", 0, ready())
        .behind("c", 0, status(ReleaseState::Failed, true, None))
        .new_pool("new")
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert_eq!(d.state("b"), Some(PoolRollout::Paused));
    assert_eq!(d.state("c"), Some(PoolRollout::Paused));
    assert_eq!(written(&d), ["new"]);
    assert_eq!(d.phase, RolloutPhase::Paused);
    // Paused applies to AllAtOnce too.
    let d = five_behind().decide(
        &Settings {
            paused: true,
            ..Settings::default()
        },
        1,
    );
    assert!(written(&d).is_empty());
    assert_eq!(d.phase, RolloutPhase::Paused);
}

#[test]
fn paused_with_nothing_behind_is_complete() {
    let settings = Settings {
        paused: true,
        ..progressive()
    };
    let d = Fleet::new().current("a", 0, ready(), 0).decide(&settings, 1);
    assert_eq!(d.phase, RolloutPhase::Complete);
}

#[test]
fn everything_done_is_complete() {
    let d = Fleet::new()
        .current("a", 0, ready(), 0)
        .current("b", 0, ready(), 0)
        .decide(&progressive(), 1);
    assert_eq!(d.phase, RolloutPhase::Complete);
    assert_eq!((d.updated, d.done, d.total), (2, 2, 2));
    assert_eq!(d.requeue_after, None);
    let s = d.status("abc", &progressive());
    assert_eq!(s.progress, "Complete 2/2");
}

#[test]
fn releases_flux_has_not_judged_since_a_resume_do_not_all_start_at_once() {
    // Resumed after a suspension: Flux has not observed the generation the
    // suspension bumped, so none reads Ready; none is a verdict either.
    let unjudged = || status(ReleaseState::Progressing, false, None);
    let d = ["a", "b", "c", "d"]
        .iter()
        .fold(Fleet::new(), |f, n| f.behind(n, 0, unjudged()))
        .decide(&progressive(), 1);
    assert_eq!(written(&d), ["a"], "maxUnavailable 1: one pool at a time");
    // Flux's verdict that a release of the previous revision fails is one.
    let d = Fleet::new()
        .behind("a", 0, ready())
        .behind("b", 0, status(ReleaseState::Failed, true, None))
        .behind("c", 0, unjudged())
        .decide(&progressive(), 1);
    assert_eq!(written(&d), ["b"], "unavailable already, it starts at once and takes the slot");
}
