//! An offline pool is never counted done.

use super::unavailable::{node, pinned};
use super::*;

/// `gw` over pools a and b, b's only node down since 0 s (offline after
/// 20 s): a Ready at r2, b's release as `b` says, then the application at
/// resourceVersion 30 reading r2 as `phase`. The violations once a later
/// release (rv 31, another application's) is seen, and none before.
fn judged(b: Value, phase: &str) -> usize {
    let mut checker = Checker::new();
    checker.nodes_relisted(&[node("n-a", "a", true, 0), node("n-b", "b", false, 0)]);
    let rollout = json!({ "strategy": "Progressive", "offlineAfter": "20s" });
    seen(
        &mut checker,
        40,
        Kind::HelmRelease,
        pinned(release("gw", "a", 20, 2, "r2", "h2", true), "a"),
    );
    seen(&mut checker, 40, Kind::HelmRelease, b);
    let at_30 = seen(&mut checker, 41, Kind::Application, application("gw", 30, rollout, "r2", phase, 2));
    assert_eq!(
        of(&at_30, Invariant::OfflineNeverDone),
        0,
        "judged before the releases are known: {at_30:?}"
    );
    let later = seen(&mut checker, 42, Kind::HelmRelease, release("other", "a", 31, 1, "x", "x", true));
    of(&later, Invariant::OfflineNeverDone)
}

#[test]
fn complete_while_an_offline_pool_is_behind_breaks_it() {
    let behind = pinned(release("gw", "b", 21, 1, "r1", "h1", true), "b");
    assert_eq!(judged(behind.clone(), "Complete"), 1);
    // What the docs promise instead.
    assert_eq!(judged(behind, "AwaitingOffline"), 0);
    // Carried back from r2 is behind too.
    let taken_back = pinned(rolled_back(release("gw", "b", 21, 2, "r2", "h2", true), "r2"), "b");
    assert_eq!(judged(taken_back, "Complete"), 1);
}

#[test]
fn an_offline_pool_done_with_the_revision_a_pool_online_or_one_changed_since_is_no_evidence() {
    // Done with r2 before its link went down.
    assert_eq!(judged(pinned(release("gw", "b", 21, 2, "r2", "h2", true), "b"), "Complete"), 0);
    // Not pinned to any node the checker knows: not offline.
    assert_eq!(judged(release("gw", "b", 21, 1, "r1", "h1", true), "Complete"), 0);
    // Changed after the application's version (rv 35 > 30): how it stood
    // then is unknown.
    assert_eq!(judged(pinned(release("gw", "b", 35, 1, "r1", "h1", true), "b"), "Complete"), 0);
    // Being deleted: its pool left.
    let mut leaving = pinned(release("gw", "b", 21, 1, "r1", "h1", true), "b");
    leaving["metadata"]["deletionTimestamp"] = json!(at(5).to_string());
    assert_eq!(judged(leaving, "Complete"), 0);
}
