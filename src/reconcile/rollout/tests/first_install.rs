//! An application's first install: one pool alone, the others once it
//! is judged, in rollout order.
use super::*;

/// All at once, as the controller decides over pools of one cluster.
fn first_alone() -> Settings {
    Settings {
        first_install_alone: true,
        ..Settings::default()
    }
}

fn first_install_waiters(d: &Decision) -> Vec<&str> {
    pools_where(d, |p| p.note.as_ref().is_some_and(|n| n.reason == pool_reason::FIRST_INSTALL))
}

#[test]
fn an_applications_first_install_goes_to_one_pool_alone() {
    let fleet = Fleet::new().new_pool("c").new_pool("a").new_pool("b");
    let d = fleet.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["a"]);
    assert_eq!(first_install_waiters(&d), ["b", "c"]);
    assert_eq!(d.state("b"), Some(PoolRollout::Waiting));
    assert_eq!(d.phase, RolloutPhase::Progressing);
    // A verdict on the first is worth a reconcile at once.
    assert_eq!(d.waits_on_releases(1), Some(1));
    // Without the rule (sites that are clusters), every pool at once.
    assert_eq!(written(&fleet.decide(&Settings::default(), 1)), ["a", "b", "c"]);
}

#[test]
fn the_others_wait_while_the_first_install_is_under_way_and_go_once_it_is_judged() {
    let updating = status(ReleaseState::Progressing, false, None);
    let under_way = Fleet::new().current("b", 0, updating, 9_990).new_pool("a").new_pool("c");
    let d = under_way.decide(&first_alone(), 1);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(first_install_waiters(&d), ["a", "c"]);
    let message = &d.pools["a"].note.as_ref().unwrap().message;
    assert!(message.contains("pool \"b\""), "{message}");
    let judged = Fleet::new().current("b", 0, ready(), 9_990).new_pool("a").new_pool("c");
    assert_eq!(written(&judged.decide(&first_alone(), 1)), ["a", "c"]);
    // A first install that failed may have created nothing (a failed
    // pre-install hook): the next goes alone, unless Helm had deployed it.
    let failed = Fleet::new()
        .current("b", 0, status(ReleaseState::Failed, true, None), 9_990)
        .new_pool("a")
        .new_pool("c");
    let d = failed.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["a"]);
    assert_eq!(first_install_waiters(&d), ["c"]);
    let deployed = ReleaseStatus {
        deployed_before: true,
        deployed_version: None,
        ..status(ReleaseState::Failed, true, None)
    };
    let failed_upgrade = Fleet::new().current("b", 0, deployed, 9_990).new_pool("a").new_pool("c");
    assert_eq!(written(&failed_upgrade.decide(&first_alone(), 1)), ["a", "c"]);
    // Past its progressDeadline, the first is judged failed: no one waits longer.
    let stuck = status(ReleaseState::Progressing, false, None);
    let late = Fleet::new().current("b", 0, stuck, 10_000 - 601).new_pool("a");
    assert_eq!(written(&late.decide(&first_alone(), 1)), ["a"]);
}

#[test]
fn a_fleet_deployed_before_or_a_first_pool_that_is_down_holds_no_install_back() {
    // A release behind was installed at an earlier revision: new pools go at once.
    let installed = Fleet::new().behind("b", 0, ready()).new_pool("a").new_pool("c");
    assert_eq!(written(&installed.decide(&first_alone(), 1)), ["a", "b", "c"]);
    // Written at this revision already and not judged yet (all at once, or
    // helm-controller is away), but Helm installed it before: an update
    // of the fleet, which new pools join at once.
    let upgrading = ReleaseStatus {
        deployed_before: true,
        deployed_version: None,
        ..status(ReleaseState::Progressing, false, None)
    };
    let update = Fleet::new().current("b", 0, upgrading, 9_990).new_pool("a").new_pool("c");
    let d = update.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["a", "c"]);
    assert!(first_install_waiters(&d).is_empty(), "{:?}", d.pools);
    // The first's release is suspended (an override): Helm installs
    // nothing there, and the next goes first.
    let updating = status(ReleaseState::Progressing, false, None);
    let suspended = Fleet::new()
        .current("a", 0, updating, 9_990)
        .new_pool("b")
        .new_pool("c")
        .suspended("a");
    let d = suspended.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["b"]);
    assert_eq!(first_install_waiters(&d), ["c"]);
    // Releases written suspended install nothing: none waits for another.
    let written_suspended = Fleet::new().new_pool("a").new_pool("b").suspended("a").suspended("b");
    assert_eq!(written(&written_suspended.decide(&first_alone(), 1)), ["a", "b"]);
    // The first's write was refused (a bad override): the next goes first,
    // and the refused one is written again, since it may be fixed.
    let refused = Fleet::new().new_pool("a").new_pool("b").new_pool("c").refused("a");
    let d = refused.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["a", "b"]);
    assert_eq!(first_install_waiters(&d), ["c"]);
    // The first in order is down: the next goes first.
    let down = Fleet::new().new_pool("a").new_pool("b").new_pool("c").down_since("a", 9_990);
    let d = down.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["b"]);
    assert_eq!(first_install_waiters(&d), ["c"]);
}

#[test]
fn the_first_install_goes_in_rollout_order() {
    let waves = Fleet::new()
        .add("a", 1, false, Kind::Missing, None)
        .add("z", 0, false, Kind::Missing, None);
    assert_eq!(written(&waves.decide(&first_alone(), 2)), ["z"]);
}

#[test]
fn an_install_of_an_earlier_revision_still_under_way_holds_the_others() {
    // Pool b's first install, of the revision before, is under way when a
    // new revision comes (its window closed in the same change): Helm has
    // deployed nothing, so the new pools wait for it (found by the fault
    // soak, seed 41, once the checker judged first installs).
    let installing = status(ReleaseState::Progressing, false, None);
    let fleet = Fleet::new()
        .behind("b", 0, installing.clone())
        .last_written("b", 9_990)
        .new_pool("a")
        .new_pool("c");
    let d = fleet.decide(&first_alone(), 1);
    assert_eq!(first_install_waiters(&d), ["a", "c"], "{:?}", d.pools);
    let message = &d.pools["a"].note.as_ref().unwrap().message;
    assert!(message.contains("pool \"b\""), "{message}");
    // Past its progressDeadline, or failed, it holds no one: the first goes alone.
    let late = Fleet::new()
        .behind("b", 0, installing)
        .last_written("b", 10_000 - 601)
        .new_pool("a")
        .new_pool("c");
    assert_eq!(first_install_waiters(&late.decide(&first_alone(), 1)), ["c"]);
    let failed = Fleet::new()
        .behind("b", 0, status(ReleaseState::Failed, true, None))
        .last_written("b", 9_990)
        .new_pool("a")
        .new_pool("c");
    assert_eq!(first_install_waiters(&failed.decide(&first_alone(), 1)), ["c"]);
}

#[test]
fn an_install_under_way_at_the_revision_holds_the_others_whatever_its_state_in_the_rollout() {
    // Pool b's first install, at this revision, was cut short (its
    // application suspended, its API server restarted) and resumes while
    // b's window is closed: no rollout state of "updating", yet Helm
    // installs on b again (found by the fault soak, seed 31337, once the
    // checker judged first installs: pool a installed beside it).
    let installing = status(ReleaseState::Progressing, false, None);
    let fleet = Fleet::new()
        .current("b", 0, installing.clone(), 9_911)
        .last_written("b", 9_911)
        .window_closed("b", None, false)
        .new_pool("a")
        .new_pool("c");
    let d = fleet.decide(&first_alone(), 1);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(first_install_waiters(&d), ["a", "c"], "{:?}", d.pools);
    // Helm only waits on it (StateError on this cluster, say): still under way.
    let waiting = Fleet::new()
        .current("b", 0, status(ReleaseState::Waiting, true, None), 9_911)
        .last_written("b", 9_911)
        .window_closed("b", None, false)
        .new_pool("a");
    assert_eq!(first_install_waiters(&waiting.decide(&first_alone(), 1)), ["a"]);
}
