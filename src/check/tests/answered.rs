//! `checks answered`: a pool read done on an answer before its soak's end,
//! or on none, is a violation; one answered at or after it is not.

use super::*;
use crate::check::answered::{judge, Answers};

fn app_with_checks(pools: Value) -> Value {
    json!({
        "metadata": { "namespace": "ns", "name": "app", "generation": 2 },
        "spec": { "rollout": {
            "minReadySeconds": 3,
            "analysis": { "checks": [{ "name": "errors", "query": "q", "max": 0.01 }] }
        } },
        "status": { "observedGeneration": 2, "rollout": { "revision": "r1" }, "pools": pools }
    })
}

fn release_ready_at(pool: &str, revision: &str, ready_at: i64) -> Value {
    json!({ "metadata": { "name": format!("app-{pool}"), "namespace": "ns", "annotations": {
        "apps.fanout.dev/pool-name": pool,
        "apps.fanout.dev/revision": revision,
        "apps.fanout.dev/ready-at": at(ready_at).to_string(),
    } } })
}

fn answered(pool: &str, times: &[i64]) -> Answers {
    [((pool.to_string(), "r1".to_string()), times.iter().map(|t| at(*t)).collect())].into()
}

#[test]
fn a_pool_done_on_no_answer_or_one_before_its_soak_ended_is_a_violation() {
    let app = app_with_checks(json!([{ "pool": "a", "rollout": "Done", "upToDate": true }]));
    let releases = [release_ready_at("a", "r1", 100)];
    // Ready at 100, minReadySeconds 3: the soak ends at 103.
    for (what, answers) in [
        ("none", Answers::new()),
        ("before the end", answered("a", &[100, 102])),
    ] {
        let (judged, found) = judge(&app, &releases, &answers, None);
        assert_eq!((judged, found.len()), (1, 1), "{what}");
        assert_eq!(found[0].invariant, Invariant::ChecksAnswered);
        assert!(found[0].message.contains("pool a done with revision r1"), "{}", found[0].message);
    }
    // An answer for another revision or pool is no answer for this one.
    let other: Answers = [(("a".to_string(), "r0".to_string()), vec![at(200)])].into();
    assert_eq!(judge(&app, &releases, &other, None).1.len(), 1);
    assert_eq!(judge(&app, &releases, &answered("b", &[200]), None).1.len(), 1);
}

#[test]
fn a_pool_answered_at_its_soaks_end_or_after_is_kept_and_one_not_done_is_not_judged() {
    let app = app_with_checks(json!([
        { "pool": "a", "rollout": "Done", "upToDate": true },
        { "pool": "b", "rollout": "Soaking", "upToDate": true },
    ]));
    let releases = [release_ready_at("a", "r1", 100), release_ready_at("b", "r1", 100)];
    for times in [[103], [150]] {
        assert_eq!(judge(&app, &releases, &answered("a", &times), None), (1, Vec::new()));
    }
    // No checks, or a status of an older spec: nothing is judged.
    let mut unchecked = app.clone();
    unchecked["spec"]["rollout"]["analysis"] = Value::Null;
    assert_eq!(judge(&unchecked, &releases, &Answers::new(), None), (0, Vec::new()));
    let mut stale = app;
    stale["metadata"]["generation"] = json!(3);
    assert_eq!(judge(&stale, &releases, &Answers::new(), None), (0, Vec::new()));
}

/// docs/rollouts.md: "A revision that completed is judged no more: a pool
/// that joins later is installed and reported on as before." Found by the
/// soak (seed 12373142), where a pool added after completion read done
/// with no check asked.
#[test]
fn once_complete_only_the_pools_done_while_the_rollout_was_seen_under_way_are_judged() {
    let mut app = app_with_checks(json!([
        { "pool": "a", "rollout": "Done", "upToDate": true },
        { "pool": "joined", "rollout": "Done", "upToDate": true },
    ]));
    app["status"]["rollout"]["phase"] = json!("Complete");
    // a's soak ended at 103, while the rollout was seen under way (110);
    // `joined` was Ready at 200, after the completion.
    let releases = [
        release_ready_at("a", "r1", 100),
        release_ready_at("joined", "r1", 200),
    ];
    let (judged, found) = judge(&app, &releases, &Answers::new(), Some(at(110)));
    assert_eq!((judged, found.len()), (1, 1), "{found:?}");
    assert!(found[0].message.contains("pool a "), "{}", found[0].message);
    assert_eq!(judge(&app, &releases, &answered("a", &[104]), Some(at(110))), (1, Vec::new()));
    // Never seen under way: nothing of the rollout is known to be its own.
    assert_eq!(judge(&app, &releases, &Answers::new(), None), (0, Vec::new()));
    // A completed revision reads Progressing while a pool joins it: the
    // status names it the last complete revision.
    app["status"]["rollout"]["phase"] = json!("Progressing");
    app["status"]["rollout"]["lastCompleteRevision"] = json!("r1");
    let (judged, found) = judge(&app, &releases, &Answers::new(), Some(at(110)));
    assert_eq!((judged, found.len()), (1, 1), "{found:?}");
}
