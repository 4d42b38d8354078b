//! `maxUnavailable` where the watch is away or a pool is: re-lists, pools
//! offline and back, and pools soaking for `minReadySeconds`.

use super::*;

/// Pools a and b of `gw` (`maxUnavailable: 1`) Ready at r1, then b taken
/// down by `revision` (spec hash `hash`); then the watch is away.
fn b_taken_down(revision: &str, hash: &str) -> Checker {
    let progressive = json!({ "strategy": "Progressive", "maxUnavailable": 1 });
    let mut checker = Checker::new();
    seen(
        &mut checker,
        0,
        Kind::Application,
        application("gw", 10, progressive, "r3", "Progressing", 2),
    );
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "a", 20, 1, "r1", "h1", true));
    seen(&mut checker, 1, Kind::HelmRelease, release("gw", "b", 21, 1, "r1", "h1", true));
    let found = seen(&mut checker, 2, Kind::HelmRelease, release("gw", "b", 22, 2, revision, hash, false));
    assert_eq!(of(&found, Invariant::MaxUnavailable), 0, "{found:?}");
    checker
}

/// Soak seed 4811231: the checker's watch was away (an API server
/// restart) while b came back Ready and the controller then took a down.
/// The re-list delivered a's write before b's return; judged in that
/// order, two pools read as down at once under `maxUnavailable: 1`. A
/// re-list is judged in the order of the writes, b's return first.
#[test]
fn a_relist_is_judged_in_the_order_of_its_writes_not_the_order_it_lists() {
    let relist = || {
        let checker = b_taken_down("r2", "h2");
        let listed = vec![
            release("gw", "a", 40, 3, "r3", "h3", false),
            release("gw", "b", 30, 2, "r2", "h2", true),
        ];
        let records = listed
            .into_iter()
            .map(|object| Record {
                seen: at(5),
                kind: Kind::HelmRelease,
                object,
                deleted: false,
            })
            .collect::<Vec<_>>();
        (checker, records)
    };
    let (mut checker, records) = relist();
    let found = checker.relisted(Kind::HelmRelease, records, at(5));
    assert_eq!(of(&found, Invariant::MaxUnavailable), 0, "{found:?}");
    // In the order listed, the stale b is judged beside a's write.
    let (mut checker, records) = relist();
    let found: Vec<Violation> = records.into_iter().flat_map(|r| checker.observe(r)).collect();
    assert_eq!(of(&found, Invariant::MaxUnavailable), 1, "{found:?}");
}

#[test]
fn a_relist_whose_pool_back_before_the_write_is_listed_after_it_reads_it_back() {
    // b taken down, then the watch is away: b turns Ready at `b_ready`, a
    // is written at 3 s, and Flux writes b's status again after, so the
    // re-list gives a's write before b's latest version.
    let violations = |b_ready: i64| {
        let mut checker = b_taken_down("r3", "h3");
        let mut a = release("gw", "a", 30, 2, "r3", "h3", false);
        a["metadata"]["annotations"]["apps.fanout.dev/written-at"] = json!(at(3).to_string());
        let b = ready_since(release("gw", "b", 40, 2, "r3", "h3", true), b_ready);
        let listed = [a, b].map(|object| Record {
            seen: at(9),
            kind: Kind::HelmRelease,
            object,
            deleted: false,
        });
        of(&checker.relisted(Kind::HelmRelease, listed.to_vec(), at(9)), Invariant::MaxUnavailable)
    };
    assert_eq!(violations(2), 0, "b was back when a was written");
    assert_eq!(violations(5), 1, "b turned Ready after a was written");
}

/// A release pinned to `pool`'s nodes, as the placement post-renderer
/// writes it: a kustomize patch of kind Pod, in YAML.
pub(super) fn pinned(mut release: Value, pool: &str) -> Value {
    let patch = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: pool-placement\nspec:\n  nodeSelector:\n    apps.openyurt.io/nodepool: {pool}\n");
    release["spec"]["postRenderers"] = json!([{ "kustomize": { "patches": [
        { "target": { "kind": "Pod", "version": "v1" }, "patch": patch }
    ] } }]);
    release
}

/// A node of `pool`, Ready or not since `since` seconds.
pub(super) fn node(name: &str, pool: &str, ready: bool, since: i64) -> Value {
    json!({ "metadata": { "name": name, "labels": { "apps.openyurt.io/nodepool": pool } },
        "status": { "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" },
            "lastTransitionTime": at(since).to_string() }] } })
}

/// Pools a and b of `gw`, their releases pinned to their nodes, Ready at r1.
fn both_ready_at_r1(checker: &mut Checker) {
    for (pool, rv) in [("a", 20), ("b", 21)] {
        seen(checker, 1, Kind::HelmRelease, pinned(release("gw", pool, rv, 1, "r1", "h1", true), pool));
    }
}

/// Found by the sharded fault soak (seed 267378134), as the checker's own
/// fault: a pool a bad revision took down, whose link then went down, is
/// offline, and docs/rollouts.md counts an offline pool neither as
/// unavailable nor as failed; the next revision went on beside it. Down
/// for less than `offlineAfter`, or with `offlinePools: Include`, it
/// still counts.
#[test]
fn a_pool_offline_when_the_next_pool_is_written_counts_as_neither_down_nor_up() {
    // a taken down by r2, which fails on it, while its nodes are as
    // `nodes` say; then r3 starts b at 100 s: the violations.
    let judged = |rollout: Value, nodes: &[Value]| {
        let mut checker = Checker::new();
        seen(&mut checker, 0, Kind::Application, application("gw", 10, rollout, "r3", "Progressing", 2));
        checker.nodes_relisted(nodes);
        both_ready_at_r1(&mut checker);
        seen(
            &mut checker,
            2,
            Kind::HelmRelease,
            pinned(release("gw", "a", 22, 2, "r2", "h2", false), "a"),
        );
        let b = pinned(release("gw", "b", 23, 2, "r3", "h3", false), "b");
        of(&seen(&mut checker, 100, Kind::HelmRelease, b), Invariant::MaxUnavailable)
    };
    // a's node down since `since`.
    let down_since = |since: i64| [node("n-a", "a", false, since), node("n-b", "b", true, 0)];
    let skip = json!({ "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "20s" });
    assert_eq!(judged(skip.clone(), &down_since(10)), 0, "a is offline: it counts for nothing");
    assert_eq!(judged(skip.clone(), &down_since(90)), 1, "down 10 s of 20: not offline yet, still down");
    let include = json!({ "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "20s", "offlinePools": "Include" });
    assert_eq!(judged(include, &down_since(10)), 1, "offline pools included count like any other");
    // offlineAfter unsaid: a minute.
    let default = json!({ "strategy": "Progressive", "maxUnavailable": 1 });
    assert_eq!(judged(default.clone(), &down_since(50)), 1, "down 50 s of 60");
    assert_eq!(judged(default, &down_since(30)), 0);
    // A node of its pool still Ready: not offline.
    let one_up = [
        node("n-a", "a", false, 0),
        node("n-a2", "a", true, 0),
        node("n-b", "b", true, 0),
    ];
    assert_eq!(judged(skip.clone(), &one_up), 1);
    // Its node Ready again: a is back, and b alone is down.
    assert_eq!(
        judged(skip, &[node("n-a", "a", true, 50), node("n-b", "b", true, 0)]),
        1,
        "a never turned Ready on r2"
    );
}

/// An offline pool under way on the revision a write is at keeps its slot
/// (docs/rollouts.md, "Offline pools"; exemption E6, removed): a taken
/// down by r2 and cut off while Flux has no verdict on it, b written at
/// r2 beside it is one too many. Not so once a's progressDeadline has
/// passed since its write, once Flux failed it, or for a write at another
/// revision.
#[test]
fn an_offline_pool_under_way_on_the_revision_keeps_its_slot() {
    let judged = |rollout: Value, a_reason: &str, b_revision: &str| {
        let mut checker = Checker::new();
        seen(&mut checker, 0, Kind::Application, application("gw", 10, rollout, "r2", "Progressing", 2));
        checker.nodes_relisted(&[node("n-a", "a", false, 10), node("n-b", "b", true, 0)]);
        both_ready_at_r1(&mut checker);
        let mut a = pinned(release("gw", "a", 22, 2, "r2", "h2", false), "a");
        a["metadata"]["annotations"]["apps.fanout.dev/written-at"] = json!(at(2).to_string());
        a["status"]["conditions"][0]["reason"] = json!(a_reason);
        seen(&mut checker, 2, Kind::HelmRelease, a);
        let b = pinned(release("gw", "b", 23, 2, b_revision, &format!("h-{b_revision}"), false), "b");
        of(&seen(&mut checker, 100, Kind::HelmRelease, b), Invariant::MaxUnavailable)
    };
    let skip = json!({ "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "20s" });
    assert_eq!(judged(skip.clone(), "Progressing", "r2"), 1, "a is under way: its slot is taken");
    assert_eq!(judged(skip.clone(), "StateError", "r2"), 1, "a site that does not answer is no verdict");
    assert_eq!(judged(skip.clone(), "UpgradeFailed", "r2"), 0, "Flux failed a: its slot is free");
    assert_eq!(judged(skip, "Progressing", "r3"), 0, "a write at another revision");
    let short = json!({ "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "20s", "progressDeadline": "90s" });
    assert_eq!(judged(short, "Progressing", "r2"), 0, "a's progressDeadline passed at 92 s");
}

#[test]
fn an_offline_pool_back_and_still_down_breaks_nothing_the_next_write_does() {
    // a taken down by r2, then cut off; r3 starts b while a is offline;
    // a's node is Ready again, a not yet: nothing was written past the
    // slots. Then c is started while a and b are down: that write is.
    let mut checker = Checker::new();
    let rollout = json!({ "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "20s" });
    seen(&mut checker, 0, Kind::Application, application("gw", 10, rollout, "r3", "Progressing", 3));
    checker.nodes_relisted(&[
        node("n-a", "a", false, 10),
        node("n-b", "b", true, 0),
        node("n-c", "c", true, 0),
    ]);
    let write = |checker: &mut Checker,
                 secs: i64,
                 pool: &str,
                 rv: u64,
                 generation: i64,
                 revision: &str,
                 ready: bool| {
        let hash = format!("h-{revision}");
        let release = pinned(release("gw", pool, rv, generation, revision, &hash, ready), pool);
        of(&seen(checker, secs, Kind::HelmRelease, release), Invariant::MaxUnavailable)
    };
    write(&mut checker, 1, "a", 20, 1, "r1", true);
    write(&mut checker, 1, "b", 21, 1, "r1", true);
    write(&mut checker, 1, "c", 22, 1, "r1", true);
    write(&mut checker, 2, "a", 23, 2, "r2", false);
    assert_eq!(write(&mut checker, 100, "b", 24, 2, "r3", false), 0, "a is offline");
    checker.read_node(&node("n-a", "a", true, 110), false);
    assert_eq!(write(&mut checker, 120, "a", 25, 2, "r2", false), 0, "a back, nothing written");
    assert_eq!(write(&mut checker, 121, "b", 26, 2, "r3", false), 0);
    assert_eq!(write(&mut checker, 130, "c", 27, 2, "r3", false), 1, "c taken down beside a and b");
}

/// A release Ready since `since` (seconds after the tests' epoch).
fn ready_since(mut release: Value, since: i64) -> Value {
    release["status"]["conditions"][0]["lastTransitionTime"] = json!(at(since).to_string());
    release
}

/// A pool soaking for `minReadySeconds` is still down: the next pool
/// written before its soak ends is one too many (exemption E7, removed).
#[test]
fn a_pool_still_soaking_for_min_ready_seconds_counts_as_down() {
    let rollout = json!({ "strategy": "Progressive", "maxUnavailable": 1, "minReadySeconds": 30 });
    let fleet = |checker: &mut Checker| {
        seen(
            checker,
            0,
            Kind::Application,
            application("gw", 10, rollout.clone(), "r2", "Progressing", 2),
        );
        seen(checker, 1, Kind::HelmRelease, release("gw", "a", 11, 1, "r1", "h1", true));
        seen(checker, 1, Kind::HelmRelease, release("gw", "b", 12, 1, "r1", "h1", true));
        seen(checker, 2, Kind::HelmRelease, release("gw", "a", 13, 2, "r2", "h2", false));
        // Ready at 10; a later rewrite of the condition moves its time,
        // which counts for nothing: the soak runs from the first.
        seen(
            checker,
            10,
            Kind::HelmRelease,
            ready_since(release("gw", "a", 14, 2, "r2", "h2", true), 10),
        );
        seen(
            checker,
            30,
            Kind::HelmRelease,
            ready_since(release("gw", "a", 15, 2, "r2", "h2", true), 29),
        );
    };
    let mut early = Checker::new();
    fleet(&mut early);
    let found = seen(&mut early, 35, Kind::HelmRelease, release("gw", "b", 16, 2, "r2", "h2", false));
    assert_eq!(of(&found, Invariant::MaxUnavailable), 1, "a soaked 25 s of 30: {found:?}");

    let mut soaked = Checker::new();
    fleet(&mut soaked);
    let found = seen(&mut soaked, 40, Kind::HelmRelease, release("gw", "b", 16, 2, "r2", "h2", false));
    assert_eq!(of(&found, Invariant::MaxUnavailable), 0, "a soaked its 30 s: {found:?}");
}
