//! Plan: drift: a release at rest is left alone, a hand edit is written back.

use super::rollout::{fleet, progressive};
use super::*;

/// Releases as the API server would hold them after our writes of
/// `a`: live fields included, and what the server adds.
fn at_rest(a: &NodePoolApplication) -> Vec<ObservedRelease> {
    Scenario::of(a)
        .over(&fleet())
        .plan()
        .apply
        .iter()
        .map(|d| {
            let mut o = ready_release(&d.name, &d.pool, &d.spec_hash);
            let mut live = d.object();
            live["spec"]["chart"]["spec"]["reconcileStrategy"] = json!("ChartVersion");
            live["status"] = json!({ "observedGeneration": 1 });
            live["metadata"]["annotations"]["apps.fanout.dev/written-at"] = json!("2029-01-01T00:00:00Z");
            o.live = Some(PackedJson::from_value(&live));
            o.written_at = Some("2029-01-01T00:00:00Z".into());
            o
        })
        .collect()
}

#[test]
fn a_release_at_rest_is_not_written() {
    let a = app(json!({}));
    let plan = Scenario::of(&a).over(&fleet()).owning(at_rest(&a)).plan();
    assert!(plan.apply.is_empty(), "{:?}", plan.apply);
}

#[test]
fn a_hand_edit_is_written_back_naming_the_field_whatever_the_rollout() {
    for a in [app(json!({})), progressive(json!({ "paused": true }))] {
        let mut owned = at_rest(&a);
        let mut live: Value = owned[2].live.as_ref().unwrap().value().unwrap();
        live["spec"]["values"]["controller"]["replicas"] = json!(9);
        owned[2].live = Some(PackedJson::from_value(&live));
        let plan = Scenario::of(&a).over(&fleet()).owning(owned).plan();
        assert_eq!(applied_pools(&plan), ["p3"]);
        assert_eq!(plan.apply[0].drift.as_deref(), Some("spec.values.controller.replicas"));
        // What it holds is put back whatever it is now: no precondition.
        assert_eq!(plan.apply[0].decided_on, None);
        assert_eq!(
            plan.apply[0].object()["metadata"]["annotations"]["apps.fanout.dev/written-at"],
            "2029-01-01T00:00:00Z",
            "the write time stays that of the revision"
        );
        assert_eq!(outcome(&plan, "p3"), &Outcome::Planned);
    }
}
