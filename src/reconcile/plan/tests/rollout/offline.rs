//! Plan: offline pools in a rollout: left alone and reported apart, and
//! a pool the change took offline halting it.
use super::*;

#[test]
fn an_offline_pool_is_left_alone_reported_apart_and_waited_for_by_nobody() {
    let a = progressive(json!({}));
    let nodes: BTreeMap<String, NodeCount> = [
        (
            "p1".to_string(),
            NodeCount {
                ready: 0,
                total: 2,
                changed: Some("2029-12-31T23:00:00Z".parse().unwrap()),
                of: Default::default(),
            },
        ),
        (
            "p2".to_string(),
            NodeCount {
                ready: 2,
                total: 3,
                changed: None,
                of: Default::default(),
            },
        ),
    ]
    .into();
    let owned = releases_of(&a, &fleet(), &["p1", "p2"]);
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert_eq!(applied_pools(&plan), ["p2"], "p1 is offline: p2 goes instead");
    assert_eq!(outcome(&plan, "p1"), &Outcome::Deferred(PoolRollout::Offline));
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!((p1.offline, p1.nodes.as_deref(), p1.reason.as_str()), (true, Some("0/2"), "PoolOffline"));
    assert_eq!(p1.offline_since.as_deref(), Some("2029-12-31T23:00:00Z"));
    assert!(p1.message.contains("since 2029-12-31T23:00:00Z"), "{}", p1.message);
    let p2 = plan.status().pools.iter().find(|p| p.pool == "p2").unwrap().clone();
    assert_eq!((p2.offline, p2.nodes.as_deref()), (false, Some("2/3")));
    assert_eq!(plan.status().offline_pools, 1);
    // The rest done: Ready, the offline pool counted apart.
    let owned = releases_of(&a, &fleet(), &["p1"]);
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert!(plan.apply.is_empty());
    assert_eq!(plan.status().ready, "4/5 (1 offline)");
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!(ready.status.as_str(), "True", "{}", ready.message);
    assert!(ready.message.contains("1 offline (p1)"), "{}", ready.message);
    // Its nodes back: it catches up.
    let back: BTreeMap<String, NodeCount> = [(
        "p1".to_string(),
        NodeCount {
            ready: 1,
            total: 2,
            changed: None,
            of: Default::default(),
        },
    )]
    .into();
    let owned = releases_of(&a, &fleet(), &["p1"]);
    assert_eq!(applied_pools(&with_nodes(&a, &fleet(), owned, &back)), ["p1"]);
}

#[test]
fn an_offline_pools_failed_upgrade_is_not_the_charts_failure() {
    let a = progressive(json!({}));
    let nodes: BTreeMap<String, NodeCount> = [(
        "p1".to_string(),
        NodeCount {
            ready: 0,
            total: 1,
            changed: None,
            of: Default::default(),
        },
    )]
    .into();
    let mut owned = releases_of(&a, &fleet(), &["p2"]);
    std::sync::Arc::make_mut(&mut owned[0].status).state = ReleaseState::Failed;
    std::sync::Arc::make_mut(&mut owned[0].status).reason = "UpgradeFailed".into();
    std::sync::Arc::make_mut(&mut owned[0].status).message = "context deadline exceeded".into();
    let plan = with_nodes(&a, &fleet(), owned, &nodes);
    assert_eq!(applied_pools(&plan), ["p2"]);
    assert!(condition(&plan, "Stalled").is_none());
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!(p1.reason, "PoolOffline");
}

#[test]
fn a_pool_the_change_took_offline_halts_the_rollout() {
    let a = progressive(json!({}));
    let pools = fleet();
    let mut owned = releases_of(&a, &pools, &["p2", "p3", "p4", "p5"]);
    // p1 took the revision at 23:50 and is still being upgraded; its nodes
    // stopped being Ready at 23:55.
    owned[0].written_at = Some("2029-12-31T23:50:00Z".into());
    std::sync::Arc::make_mut(&mut owned[0].status).state = ReleaseState::Progressing;
    std::sync::Arc::make_mut(&mut owned[0].status).observed_latest = false;
    let down = NodeCount {
        ready: 0,
        total: 2,
        changed: Some("2029-12-31T23:55:00Z".parse().unwrap()),
        of: Default::default(),
    };
    let up = NodeCount {
        ready: 1,
        total: 1,
        changed: None,
        of: Default::default(),
    };
    let nodes: BTreeMap<String, NodeCount> = pools
        .iter()
        .map(|p| (p.name.clone(), if p.name == "p1" { down } else { up }))
        .collect();
    let plan = with_nodes(&a, &pools, owned.clone(), &nodes);
    assert!(plan.apply.is_empty(), "no further pool is written: {:?}", applied_pools(&plan));
    let rollout = plan.status().rollout.as_ref().unwrap().clone();
    assert_eq!(rollout.phase, RolloutPhase::Halted);
    let stalled = condition(&plan, "Stalled").unwrap();
    assert_eq!(stalled.reason, "RolloutHalted");
    assert!(stalled.message.contains("OfflineAfterUpdate"), "{}", stalled.message);
    let p1 = plan.status().pools.iter().find(|p| p.pool == "p1").unwrap().clone();
    assert_eq!(p1.reason, "OfflineAfterUpdate");
    assert!(p1.offline);

    // Offline since before its update: skipped, and the rollout goes on.
    let nodes: BTreeMap<String, NodeCount> = nodes
        .into_iter()
        .map(|(name, mut n)| {
            if name == "p1" {
                n.changed = Some("2029-12-31T23:40:00Z".parse().unwrap());
            }
            (name, n)
        })
        .collect();
    let plan = with_nodes(&a, &pools, owned, &nodes);
    assert_eq!(applied_pools(&plan), ["p2"]);
    assert_eq!(plan.status().rollout.as_ref().unwrap().phase, RolloutPhase::Progressing);
}
