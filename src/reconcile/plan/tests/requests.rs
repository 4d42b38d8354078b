//! Flux's request annotations on an application: passed on to every
//! release, recorded as handled, and written only when their token is new.

use super::*;

fn requested(spec: Value, tokens: &[(&str, &str)]) -> NodePoolApplication {
    let mut a = app(spec);
    a.metadata.annotations = Some(tokens.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    a
}

/// Every planned release as if written and Ready.
fn written(plan: &Plan) -> Vec<ObservedRelease> {
    plan.apply.iter().map(|d| ready_release(&d.name, &d.pool, &d.spec_hash)).collect()
}

#[test]
fn a_request_is_passed_on_to_every_release_and_recorded() {
    let a = requested(
        json!({}),
        &[
            (naming::ANNOTATION_REQUESTED_AT, "t1"),
            (naming::ANNOTATION_FORCE_AT, "t1"),
            ("team", "edge"),
        ],
    );
    let planned = Scenario::of(&a).over(&pools()).plan();
    assert_eq!(applied_pools(&planned), ["hangzhou", "shanghai"]);
    for pool in ["hangzhou", "shanghai"] {
        let annotations = &desired(&planned, pool)["metadata"]["annotations"];
        assert_eq!(annotations[naming::ANNOTATION_REQUESTED_AT], "t1", "{annotations}");
        assert_eq!(annotations[naming::ANNOTATION_FORCE_AT], "t1", "{annotations}");
        assert!(annotations.get(naming::ANNOTATION_RESET_AT).is_none(), "not requested: {annotations}");
        assert!(annotations.get("team").is_none(), "only Flux's requests are passed on: {annotations}");
    }
    assert_eq!(planned.status().last_handled_reconcile_at.as_deref(), Some("t1"));
    assert_eq!(planned.status().last_handled_force_at.as_deref(), Some("t1"));
    assert_eq!(planned.status().last_handled_reset_at, None);
}

#[test]
fn a_new_token_writes_every_release_again_and_the_same_token_nothing() {
    let plain = app(json!({}));
    let first = Scenario::of(&plain).over(&pools()).plan();
    let at_rest = written(&first);
    assert!(
        Scenario::of(&plain).over(&pools()).owning(at_rest.clone()).plan().apply.is_empty(),
        "at rest, nothing to write"
    );

    let asked = requested(json!({}), &[(naming::ANNOTATION_REQUESTED_AT, "t1")]);
    let second = Scenario::of(&asked).over(&pools()).owning(at_rest).plan();
    assert_eq!(applied_pools(&second), ["hangzhou", "shanghai"], "the request reaches every release");
    let handled = written(&second);
    let again = Scenario::of(&asked).over(&pools()).owning(handled.clone()).plan();
    assert!(again.apply.is_empty(), "the same token is not written twice: {again:#?}");

    let next = requested(json!({}), &[(naming::ANNOTATION_REQUESTED_AT, "t2")]);
    assert_eq!(
        applied_pools(&Scenario::of(&next).over(&pools()).owning(handled).plan()),
        ["hangzhou", "shanghai"]
    );
}

#[test]
fn without_requests_the_hash_is_what_it_always_was() {
    // Releases written before requests were passed on must not all be
    // rewritten by an upgrade of the controller.
    let plain = Scenario::of(&app(json!({}))).over(&pools()).plan();
    let hr = desired(&plain, "hangzhou");
    let hash = crate::reconcile::release::build::spec_hash(&hr["spec"], &hr["metadata"]["labels"]);
    let stored = hr["metadata"]["annotations"][naming::ANNOTATION_SPEC_HASH].as_str().unwrap();
    assert_eq!(stored, hash);
}

#[test]
fn a_request_starts_a_new_revision_of_the_rollout() {
    let progressive = json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 1 } });
    let plain = Scenario::of(&app(progressive.clone())).over(&pools()).plan();
    let asked = Scenario::of(&requested(
        progressive,
        &[
            (naming::ANNOTATION_REQUESTED_AT, "t1"),
            (naming::ANNOTATION_RESET_AT, "t1"),
        ],
    ))
    .over(&pools())
    .owning(written(&plain))
    .plan();
    let revision = |p: &Plan| p.status().rollout.as_ref().map(|r| r.revision.clone());
    assert_ne!(revision(&plain), revision(&asked), "a halted rollout can be asked to try again");
    assert_eq!(asked.apply.len(), 1, "and it goes as the rollout says, one pool at a time");
}

#[test]
fn a_blocked_application_still_records_the_request() {
    let mut a = requested(json!({}), &[(naming::ANNOTATION_REQUESTED_AT, "t9")]);
    a.spec.pools.selector = Some(
        serde_json::from_value(json!({ "matchExpressions": [
        { "key": "region", "operator": "Bogus" } ] }))
        .unwrap(),
    );
    let planned = Scenario::of(&a).over(&pools()).plan();
    assert!(planned.blocked.is_some(), "{planned:#?}");
    assert_eq!(planned.status().last_handled_reconcile_at.as_deref(), Some("t9"));
}
