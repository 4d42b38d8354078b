//! Plan: spec hashes, what is written again and when the chart's schema
//! checks the values.
use super::*;

#[test]
fn matching_hashes_are_a_no_op() {
    let a = app(json!({}));
    let first = Scenario::of(&a).over(&pools()).plan();
    let owned: Vec<_> = first.apply.iter().map(|d| ready_release(&d.name, &d.pool, &d.spec_hash)).collect();
    let second = Scenario::of(&a).over(&pools()).owning(owned).plan();
    assert!(second.apply.is_empty(), "{second:#?}");
    assert_eq!(second.unchanged.len(), 2);
    assert!(second.pools.iter().all(|p| p.outcome == Outcome::Unchanged));
    assert_eq!(second.status().ready, "2/2");
    let ready = second.status().conditions.iter().find(|c| c.type_ == "Ready").unwrap().clone();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Succeeded"));
    assert_eq!(second.status().chart_version.as_deref(), Some("1.0.0"));
}

#[test]
fn values_are_checked_against_the_schema_only_when_they_change() {
    let chart = Chart {
        compiled: Default::default(),
        name: "ingress-gateway".into(),
        version: "1.0.0".into(),
        values: json!({}),
        schema: Some(json!({ "type": "object", "properties": { "controller": { "type": "object",
                "properties": { "replicas": { "type": "integer", "maximum": 2 } } } } })),
    };
    let bad = app(json!({ "overrides": [ { "pools": { "names": ["shanghai"] },
            "values": { "controller": { "replicas": 9 } } } ] }));
    let first = with_chart(&bad, vec![], &chart);
    assert_eq!(applied_pools(&first), ["hangzhou"], "the pool breaking the schema is not written");
    let Outcome::Failed { field, message } = outcome(&first, "shanghai") else {
        panic!("{first:#?}")
    };
    assert_eq!(field, "values");
    assert!(message.contains("/controller/replicas") && message.contains("maximum"), "{message}");

    // A release already written with this very spec was checked then: the
    // check is not repeated on every reconcile.
    let written: Vec<_> = Scenario::of(&bad)
        .over(&pools())
        .plan()
        .apply
        .iter()
        .map(|d| ready_release(&d.name, &d.pool, &d.spec_hash))
        .collect();
    let again = with_chart(&bad, written, &chart);
    assert!(again.pools.iter().all(|p| p.outcome == Outcome::Unchanged), "{again:#?}");
}

#[test]
fn a_changed_hash_is_applied_again() {
    let a = app(json!({}));
    let name = naming::release_name("gw", "hangzhou");
    let plan = Scenario::of(&a)
        .over(&pools())
        .owning(vec![ready_release(&name, "hangzhou", "stale")])
        .plan();
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
    assert_eq!(plan.status().pools[0].reason, "Progressing");
    assert_eq!(plan.status().pools[0].message, "updating the HelmRelease");
}

#[test]
fn hashes_differ_per_pool_and_follow_the_spec() {
    let plan = Scenario::of(&app(json!({}))).over(&pools()).plan();
    assert_ne!(plan.apply[0].spec_hash, plan.apply[1].spec_hash);
    let again = Scenario::of(&app(json!({ "interval": "5m" }))).over(&pools()).plan();
    assert_ne!(plan.apply[0].spec_hash, again.apply[0].spec_hash);
    assert_eq!(plan.apply[0].spec_hash.len(), 16);
    let same = Scenario::of(&app(json!({}))).over(&pools()).plan();
    assert_eq!(plan.apply, same.apply);
}
