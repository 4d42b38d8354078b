//! Plan: what stops a plan or a pool: selectors, limits, the schema, taken Helm releases, empty selections.

mod claims;
mod empty_selections;
mod limits;

use super::releases::with_chart;
use super::*;

#[test]
fn invalid_selector_blocks_everything() {
    let a =
        app(json!({ "pools": { "selector": { "matchExpressions": [{ "key": "k", "operator": "Near" }] } } }));
    let owned = vec![ready_release("anything", "hangzhou", "h")];
    let plan = Scenario::of(&a).over(&pools()).owning(owned).plan();
    assert!(plan.apply.is_empty() && plan.prune.is_empty() && plan.pools.is_empty());
    assert!(plan.blocked.as_deref().unwrap().starts_with("pools: selector: operator \"Near\""));
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert_eq!(stalled.reason, "InvalidSelector");
}

#[test]
fn invalid_override_selector_blocks_everything() {
    let a = app(
        json!({ "overrides": [{ "pools": { "selector": { "matchExpressions": [{ "key": "k", "operator": "In" }] } } }] }),
    );
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(plan.apply.is_empty());
    assert!(plan.blocked.as_deref().unwrap().starts_with("overrides[0].pools: "), "{:?}", plan.blocked);
}

#[test]
fn missing_named_pools_are_reported() {
    let a = app(json!({ "pools": { "names": ["hangzhou", "atlantis"] } }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert_eq!(plan.missing_pools, ["atlantis"]);
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
}

#[test]
fn status_rolls_up_observed_states() {
    let a = app(json!({}));
    let first = Scenario::of(&a).over(&pools()).plan();
    let mut owned: Vec<_> =
        first.apply.iter().map(|d| ready_release(&d.name, &d.pool, &d.spec_hash)).collect();
    std::sync::Arc::make_mut(&mut owned[1].status).state = ReleaseState::Failed;
    std::sync::Arc::make_mut(&mut owned[1].status).reason = "InstallFailed".into();
    let plan = Scenario::of(&a).over(&pools()).owning(owned).plan();
    let s = &plan.status();
    assert_eq!((s.selected_pools, s.ready_pools, s.ready.as_str()), (2, 1, "1/2"));
    assert_eq!(s.observed_generation, Some(3));
    assert_eq!(s.pools.len(), 2);
    assert_eq!(s.pools[0].ready, ConditionStatus::True);
    assert_eq!(s.pools[1].ready, ConditionStatus::False);
    let ready = s.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "InstallFailed");
    assert_eq!(ready.last_transition_time, now());
}

#[test]
fn observed_release_reads_annotations_and_status() {
    let object = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": "gw-hz-1", "generation": 2,
            "labels": { "apps.fanout.dev/pool": "hz-label" },
            "annotations": { "apps.fanout.dev/pool-name": "hz", "apps.fanout.dev/spec-hash": "abc" } },
        "status": { "observedGeneration": 2, "conditions": [{ "type": "Ready", "status": "True", "reason": "InstallSucceeded", "message": "" }] }
    });
    let dynamic: kube::api::DynamicObject = serde_json::from_value(object.clone()).unwrap();
    let o = ObservedRelease::from_value(&serde_json::to_value(&dynamic).unwrap()).unwrap();
    assert_eq!(
        (o.name.as_str(), o.pool.as_deref(), o.spec_hash.as_deref()),
        ("gw-hz-1", Some("hz"), Some("abc"))
    );
    assert_eq!(o.generation, Some(2));
    assert_eq!(o.status.state, ReleaseState::Ready);
    assert_eq!(ObservedRelease::from_value(&object), Some(o));
}

#[test]
fn observed_release_falls_back_to_the_pool_label() {
    let object = json!({ "metadata": { "name": "r", "labels": { "apps.fanout.dev/pool": "hz" } } });
    assert_eq!(ObservedRelease::from_value(&object).unwrap().pool.as_deref(), Some("hz"));
    assert_eq!(ObservedRelease::from_value(&json!({ "metadata": { "name": "r" } })), None);
}

fn needs_password() -> Chart {
    Chart {
        compiled: Default::default(),
        name: "db".into(),
        version: "1.0.0".into(),
        values: json!({ "replicas": 1 }),
        schema: Some(json!({
            "type": "object",
            "required": ["password"],
            "additionalProperties": false,
            "properties": {
                "password": { "type": "string", "minLength": 8 },
                "replicas": { "type": "integer" },
                "nodeSelector": { "type": "object" }
            }
        })),
    }
}

#[test]
fn a_required_key_a_secret_supplies_is_not_a_failure() {
    let from_secret = json!([{ "kind": "Secret", "name": "db-credentials" }]);
    let a = app(json!({ "values": { "replicas": 2 }, "valuesFrom": from_secret,
            "placement": { "valuesPaths": [] } }));
    let plan = with_chart(&a, vec![], &needs_password());
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"], "{:?}", plan.pools);
    // Without valuesFrom the same values are refused, naming the key.
    let a = app(json!({ "values": { "replicas": 2 }, "placement": { "valuesPaths": [] } }));
    let plan = with_chart(&a, vec![], &needs_password());
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!("{:?}", outcome(&plan, "hangzhou"))
    };
    assert_eq!(field, "values");
    assert!(message.contains("password") && message.contains("required"), "{message}");
}

#[test]
fn with_values_from_a_wrong_type_or_forbidden_key_inline_still_fails() {
    let from_secret = json!([{ "kind": "Secret", "name": "db-credentials" }]);
    for (values, rule) in [
        (json!({ "replicas": "two" }), "type"),
        (json!({ "password": "short" }), "minLength"),
        (json!({ "colour": "blue" }), "additionalProperties"),
    ] {
        let a = app(json!({ "values": values, "valuesFrom": from_secret,
                "placement": { "valuesPaths": [] } }));
        let plan = with_chart(&a, vec![], &needs_password());
        let Outcome::Failed { message, .. } = outcome(&plan, "shanghai") else {
            panic!("{values}: {:?}", outcome(&plan, "shanghai"))
        };
        assert!(message.contains(&format!("({rule})")), "{values}: {message}");
        assert!(!message.contains("(required)"), "the missing password is not reported: {message}");
    }
}

#[test]
fn a_target_path_may_set_a_value_the_inline_values_get_wrong() {
    // Flux sets a targetPath value over everything, the inline values included.
    let token = json!([{ "kind": "Secret", "name": "db", "valuesKey": "pw", "targetPath": "password" }]);
    let a = app(json!({ "values": { "password": "short" }, "valuesFrom": token,
            "placement": { "valuesPaths": [] } }));
    assert_eq!(applied_pools(&with_chart(&a, vec![], &needs_password())), ["hangzhou", "shanghai"]);
}

fn held(app: &NodePoolApplication, owned: Vec<ObservedRelease>, transient: bool) -> Plan {
    let hold = Hold {
        reason: "SourceNotReady".into(),
        message: "HelmChart edge/gw-1-0-0 is not ready: fetching the index".into(),
        transient,
    };
    Scenario::of(app).over(&pools()).owning(owned).held(hold).plan()
}

#[test]
fn a_chart_hold_says_its_reason_in_the_conditions_and_stalls_only_when_a_person_must_act() {
    let a = app(json!({}));
    // Passing by itself: Reconciling, with the source's own reason and words.
    let plan = held(&a, vec![], true);
    assert!(plan.apply.is_empty());
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "SourceNotReady"));
    assert!(ready.message.contains("fetching the index"), "{}", ready.message);
    let reconciling = condition(&plan, "Reconciling").unwrap();
    assert_eq!(reconciling.reason, "SourceNotReady");
    assert!(reconciling.message.contains("HelmChart edge/gw-1-0-0"), "{}", reconciling.message);
    assert!(condition(&plan, "Stalled").is_none());
    // Needing a person: Stalled, not Reconciling.
    let plan = held(&a, vec![], false);
    let stalled = condition(&plan, "Stalled").unwrap();
    assert_eq!(stalled.reason, "SourceNotReady");
    assert!(condition(&plan, "Reconciling").is_none());
    // Nothing waiting on it (every release already as planned): the
    // application is not held back by a source it does not need now.
    let built = Scenario::of(&a).over(&pools()).plan();
    let owned: Vec<ObservedRelease> =
        built.apply.iter().map(|d| ready_release(&d.name, &d.pool, &d.spec_hash)).collect();
    let plan = held(&a, owned, true);
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Succeeded"), "{}", ready.message);
}

#[test]
fn a_woken_inert_release_that_is_behind_takes_its_turn_in_the_rollout() {
    use super::rollout::{fleet, progressive};
    let a = progressive(json!({ "paused": true }));
    // Every pool behind; p3's release was made inert, and what held its
    // Helm release is gone.
    let first = Scenario::of(&a).over(&fleet()).plan();
    let owned: Vec<ObservedRelease> = first
        .apply
        .iter()
        .map(|d| ObservedRelease {
            inert: d.pool == "p3",
            ..ready_release(&d.name, &d.pool, "old")
        })
        .collect();
    let plan = Scenario::of(&a).over(&fleet()).owning(owned.clone()).plan();
    assert!(plan.apply.is_empty(), "paused, yet written: {:?}", applied_pools(&plan));
    assert_eq!(outcome(&plan, "p3"), &Outcome::Deferred(PoolRollout::Paused));
    // Its turn come, it is written at the revision like any other: a
    // new time and new stamps, and the inert mark taken back.
    let resumed = progressive(json!({ "maxUnavailable": 5 }));
    let plan = Scenario::of(&resumed).over(&fleet()).owning(owned).plan();
    let p3 = plan.apply.iter().find(|d| d.pool == "p3").unwrap();
    assert!(p3.lift_inert && !p3.restores(), "{p3:?}");
    assert_eq!(p3.written_at, now().0.to_string());
    let revision = plan.status().rollout.unwrap().revision;
    assert_eq!(p3.stamps.revision.as_deref(), Some(revision.as_str()));
}
