//! Plan: maintenance windows, as the plan reads them for each pool: the
//! application's that select it and its own annotation.

use super::rollout::{fleet, progressive};
use super::*;

/// `pools`, the given annotation on each that has one.
fn annotated(own: &[(&str, &str)]) -> Vec<Pool> {
    let mut pools = fleet();
    for pool in &mut pools {
        if let Some((_, text)) = own.iter().find(|(name, _)| *name == pool.name) {
            pool.annotations
                .insert(naming::ANNOTATION_MAINTENANCE_WINDOW.to_string(), text.to_string());
        }
    }
    pools
}

#[test]
fn a_pool_is_held_by_the_windows_that_apply_to_it_and_by_no_other() {
    // At 2030-01-01T00:00Z: the application's noon window, for p1 and p2,
    // is closed; the night window of p2's and p3's annotation is open;
    // p4's annotation never fires, so it cannot be read; p5 has none.
    let a = progressive(json!({ "maxUnavailable": "100%", "windows": [
        { "schedule": "0 12 * * *", "duration": "1h", "pools": { "names": ["p1", "p2"] } }
    ]}));
    let night = r#"{"schedule": "0 23 * * *", "duration": "2h"}"#;
    let pools = annotated(&[
        ("p2", night),
        ("p3", night),
        ("p4", r#"{"schedule": "0 0 30 2 *", "duration": "1h"}"#),
    ]);
    let first = Scenario::of(&a).over(&pools).plan();
    assert_eq!(applied_pools(&first), ["p1", "p2", "p3", "p4", "p5"], "new pools install at once");
    let behind = first.apply.iter().map(|d| ready_release(&d.name, &d.pool, "old")).collect();
    let plan = Scenario::of(&a).over(&pools).owning(behind).plan();
    assert_eq!(applied_pools(&plan), ["p2", "p3", "p5"]);
    let report = |name: &str| plan.status().pools.into_iter().find(|p| p.pool == name).unwrap();
    let p1 = report("p1");
    assert_eq!((p1.rollout.as_str(), p1.reason.as_str()), ("Waiting", "OutsideMaintenanceWindow"));
    assert!(p1.message.contains("2030-01-01T12:00:00Z"), "{}", p1.message);
    let p4 = report("p4");
    assert_eq!((p4.rollout.as_str(), p4.reason.as_str()), ("Waiting", "InvalidMaintenanceWindow"));
    assert!(p4.message.contains("never fires"), "{}", p4.message);
    let requeue = plan.requeue_after.unwrap();
    let opens = Duration::from_secs(12 * 3600);
    assert!(
        requeue >= opens && requeue <= opens + Duration::from_secs(1),
        "when p1's window opens: {requeue:?}"
    );
}

#[test]
fn a_schedule_of_the_spec_that_never_fires_stalls_the_application_naming_it() {
    let a = progressive(json!({ "windows": [
        { "schedule": "0 22 * * *", "duration": "1h" },
        { "schedule": "0 0 31 4 *", "duration": "1h" }
    ]}));
    let plan = Scenario::of(&a).over(&fleet()).plan();
    assert!(plan.apply.is_empty());
    assert_eq!(condition(&plan, "Stalled").unwrap().reason, "InvalidRollout");
    let blocked = plan.blocked.as_deref().unwrap();
    assert!(
        blocked.contains("rollout.windows[1].schedule") && blocked.contains("never fires"),
        "{blocked}"
    );
}

#[test]
fn a_pool_left_for_later_in_an_open_window_is_looked_at_again_when_it_closes() {
    // At 2030-01-01T00:00Z every pool's night window is open until 01:00.
    // One pool at a time: p1 is written, the others wait for their turn,
    // and once the window closes they wait for it instead, which their
    // status says: the plan looks again then, though nothing else moves.
    let a = progressive(json!({ "maxUnavailable": 1 }));
    let night = r#"{"schedule": "0 23 * * *", "duration": "2h"}"#;
    let pools = annotated(&[
        ("p1", night),
        ("p2", night),
        ("p3", night),
        ("p4", night),
        ("p5", night),
    ]);
    let first = Scenario::of(&a).over(&pools).plan();
    let behind = first.apply.iter().map(|d| ready_release(&d.name, &d.pool, "old")).collect();
    let plan = Scenario::of(&a).over(&pools).owning(behind).plan();
    assert_eq!(applied_pools(&plan), ["p1"]);
    let closes = Duration::from_secs(3600);
    let requeue = plan.requeue_after.expect("the window's closing is foreseen");
    assert!(requeue >= closes && requeue <= closes + Duration::from_secs(1), "{requeue:?}");
    // No pool left for later, nothing to look at when it closes.
    let all = progressive(json!({ "maxUnavailable": "100%" }));
    let behind = first.apply.iter().map(|d| ready_release(&d.name, &d.pool, "old")).collect();
    let plan = Scenario::of(&all).over(&pools).owning(behind).plan();
    assert_eq!(applied_pools(&plan).len(), 5);
    assert_eq!(plan.requeue_after, None);
}
