//! Plan: `PreRollout` webhook gates, asked before a revision's first
//! pool is written (a change freeze holds the canary too).

use super::*;

fn gated() -> NodePoolApplication {
    progressive(json!({
        "steps": [{ "name": "canary", "pools": { "names": ["p1"] } }],
        "analysis": {
            "webhooks": [{ "name": "change-freeze", "type": "PreRollout", "url": "https://freeze.ci/ask" }],
        },
    }))
}

/// The gate's answer to the ask a plan over pools all behind makes,
/// folded into records as the runtime keeps them.
fn gate_records(a: &NodePoolApplication, answer: Answer) -> Records {
    let behind = releases_of(a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let none = Records::new();
    let asked = Scenario::of(a).over(&fleet()).owning(behind).answered(Answers::Asked(&none)).plan();
    let analysing = asked.analysis.as_ref().unwrap();
    let ask = analysing.asks[0].clone();
    analysing.fold(Records::new(), vec![(ask, answer)], "2029-12-31T23:59:50Z".parse().unwrap())
}

/// Every pool behind on the revision: the gate is asked for them all,
/// and holds even the canary until it lets the rollout go.
#[test]
fn a_pre_rollout_gate_holds_the_canary_until_it_answers_2xx() {
    let a = gated();
    let behind = releases_of(&a, &fleet(), &["p1", "p2", "p3", "p4", "p5"]);
    let records = Records::new();
    let plan = Scenario::of(&a)
        .over(&fleet())
        .owning(behind.clone())
        .answered(Answers::Asked(&records))
        .plan();
    assert!(plan.apply.is_empty(), "the freeze holds the canary: {:?}", applied_pools(&plan));
    let p1 = plan.status().pools.into_iter().find(|p| p.pool == "p1").unwrap();
    assert_eq!((p1.rollout.as_str(), p1.reason.as_str()), ("Waiting", "WaitingForRolloutGates"));
    let asks = &plan.analysis.as_ref().unwrap().asks;
    assert_eq!(asks.len(), 1, "{asks:?}");
    assert_eq!((asks[0].pool.as_str(), asks[0].check.as_str()), ("rollout:", "change-freeze"));
    assert_eq!(asks[0].pools.len(), 5, "{asks:?}");

    let held = gate_records(&a, Answer::Unanswered("HTTP 403: change freeze until Monday".into()));
    let plan = Scenario::of(&a)
        .over(&fleet())
        .owning(behind.clone())
        .answered(Answers::Asked(&held))
        .plan();
    assert!(plan.apply.is_empty(), "{:?}", applied_pools(&plan));
    let p1 = plan.status().pools.into_iter().find(|p| p.pool == "p1").unwrap();
    assert!(p1.message.contains("change freeze until Monday"), "{}", p1.message);

    let open = gate_records(&a, Answer::Value(200.0));
    let plan = Scenario::of(&a).over(&fleet()).owning(behind).answered(Answers::Asked(&open)).plan();
    assert_eq!(applied_pools(&plan), ["p1"], "the canary goes once the gate lets the rollout go");
}

/// Once a pool has the revision, the rollout is under way: the gate is
/// asked no more, and what it would say holds nothing.
#[test]
fn a_rollout_under_way_is_not_held_by_its_pre_rollout_gate() {
    let a = gated();
    let canary_done = releases_of(&a, &fleet(), &["p2", "p3", "p4", "p5"]);
    let records = Records::new();
    let plan = Scenario::of(&a)
        .over(&fleet())
        .owning(canary_done)
        .answered(Answers::Asked(&records))
        .plan();
    let asks = &plan.analysis.as_ref().unwrap().asks;
    assert!(asks.iter().all(|a| a.pool != "rollout:"), "{asks:?}");
    assert!(!applied_pools(&plan).is_empty(), "the next wave goes");
}
