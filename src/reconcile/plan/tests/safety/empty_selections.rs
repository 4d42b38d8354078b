//! Plan: a selection that matches nothing, or pools the cluster does not
//! serve, prunes nothing.
use super::*;

#[test]
fn a_selection_matching_nothing_prunes_nothing_and_stalls() {
    // A typo in the selector: every site would be uninstalled.
    let a = app(json!({ "pools": { "selector": { "matchLabels": { "regoin": "east" } } } }));
    let hz = naming::release_name("gw", "hangzhou");
    let sh = naming::release_name("gw", "shanghai");
    let owned = vec![
        ready_release(&hz, "hangzhou", "h1"),
        ready_release(&sh, "shanghai", "h2"),
    ];
    let plan = Scenario::of(&a).over(&pools()).owning(owned).plan();
    assert!(plan.prune.is_empty(), "{:?}", plan.prune);
    assert!(plan.apply.is_empty());
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert_eq!(stalled.reason, "NoPoolsSelected");
    assert!(
        stalled.message.contains(r#"selector {"matchLabels":{"regoin":"east"}}"#),
        "{}",
        stalled.message
    );
    assert!(stalled.message.contains("2 HelmRelease(s)"), "{}", stalled.message);
    // The releases left in place are still reported as they are.
    let reported: Vec<String> = plan.status().pools.iter().map(|p| p.pool.clone()).collect();
    assert_eq!(reported, ["hangzhou", "shanghai"]);
    assert_eq!(plan.status().ready, "2/2");
    assert!(plan.has_errors());
}

#[test]
fn named_pools_that_all_vanished_prune_nothing_either() {
    let a = app(json!({ "pools": { "names": ["atlantis"] } }));
    let hz = naming::release_name("gw", "hangzhou");
    let plan = Scenario::of(&a)
        .over(&pools())
        .owning(vec![ready_release(&hz, "hangzhou", "h1")])
        .plan();
    assert!(plan.prune.is_empty());
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert!(stalled.message.contains("names [atlantis]"), "{}", stalled.message);
}

#[test]
fn a_selection_matching_nothing_with_nothing_to_protect_is_not_stalled() {
    let a = app(json!({ "pools": { "selector": { "matchLabels": { "region": "mars" } } } }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(plan.blocked.is_none());
    assert!(
        plan.status().conditions.iter().all(|c| c.type_ != "Stalled"),
        "{:?}",
        plan.status().conditions
    );
}

#[test]
fn one_pool_left_in_the_selection_still_prunes_the_others() {
    // Only a selection of nothing is taken for a typo.
    let a = app(json!({ "pools": { "names": ["hangzhou"] } }));
    let sh = naming::release_name("gw", "shanghai");
    let plan = Scenario::of(&a)
        .over(&pools())
        .owning(vec![ready_release(&sh, "shanghai", "h2")])
        .plan();
    assert_eq!(plan.prune, [sh]);
}

#[test]
fn pools_of_a_kind_the_cluster_does_not_serve_stall_and_prune_nothing() {
    let a = app(json!({}));
    let owned = vec![ready_release("ingress-hz", "hz", "h")];
    let message = "spec.pools.kind is KubeEdge, but the cluster serves no NodeGroup API";
    let plan = Scenario::of(&a).owning(owned).unserved(message).plan();
    assert!(plan.apply.is_empty() && plan.prune.is_empty(), "{plan:?}");
    let stalled = plan
        .status()
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .expect("stalled")
        .clone();
    assert_eq!((stalled.reason.as_str(), stalled.message.as_str()), ("PoolApiMissing", message));
}
