//! `failures halt`: a status that reads a pool Flux failed as anything but
//! failed, or that counts more failures than `maxFailures` on a revision
//! not completed without reading the halt, is a violation.

use super::*;

fn with_failed(mut app: Value, failed: u64, pools: Value) -> Value {
    app["status"]["rollout"]["failed"] = json!(failed);
    app["status"]["pools"] = pools;
    app
}

fn pool(name: &str, reason: &str, rollout: &str) -> Value {
    json!({ "pool": name, "ready": "False", "reason": reason, "observedLatest": true, "upToDate": true,
            "rollout": rollout, "helmRelease": format!("gw-{name}"), "message": "" })
}

#[test]
fn past_max_failures_a_revision_not_completed_reads_the_halt() {
    let progressive = json!({ "strategy": "Progressive", "maxFailures": 1 });
    let failed_two = json!([
        pool("a", "UpgradeFailed", "Failed"),
        pool("b", "InstallFailed", "Failed")
    ]);
    let mut checker = Checker::new();
    let going_on = with_failed(
        application("gw", 10, progressive.clone(), "r2", "Progressing", 4),
        2,
        failed_two.clone(),
    );
    assert_eq!(of(&seen(&mut checker, 0, Kind::Application, going_on), Invariant::FailuresHalt), 1);
    // Within maxFailures, or halted, or under AllAtOnce: kept.
    let mut kept = Checker::new();
    let within =
        with_failed(application("gw", 11, progressive.clone(), "r2", "Progressing", 4), 1, json!([]));
    let halted =
        with_failed(application("gw", 12, progressive.clone(), "r2", "Halted", 4), 2, failed_two.clone());
    let all = json!({ "strategy": "AllAtOnce" });
    let at_once = with_failed(application("gw", 13, all, "r2", "Progressing", 4), 2, failed_two.clone());
    for (i, version) in [within, halted, at_once].into_iter().enumerate() {
        assert_eq!(of(&seen(&mut kept, i as i64, Kind::Application, version), Invariant::FailuresHalt), 0);
    }
    // A percentage of the selected pools, rounded down: 50% of 4 is 2.
    let half = json!({ "strategy": "Progressive", "maxFailures": "50%" });
    let two_of_four = with_failed(application("gw", 14, half, "r2", "Progressing", 4), 2, failed_two.clone());
    assert_eq!(of(&seen(&mut kept, 5, Kind::Application, two_of_four), Invariant::FailuresHalt), 0);
    // Completed, a revision halts no more: a new pool's failure is its own.
    let mut completed = Checker::new();
    let complete = application("gw", 20, progressive.clone(), "r2", "Complete", 4);
    seen(&mut completed, 0, Kind::Application, complete);
    let mut later =
        with_failed(application("gw", 21, progressive, "r2", "AwaitingOffline", 4), 2, failed_two);
    later["status"]["rollout"]["message"] = json!("a new pool failed");
    assert_eq!(of(&seen(&mut completed, 1, Kind::Application, later), Invariant::FailuresHalt), 0);
}

#[test]
fn a_pool_flux_reports_failed_stands_failed_and_a_waiting_one_need_not() {
    let rollout = json!({ "strategy": "Progressive", "maxFailures": 5 });
    let mut checker = Checker::new();
    let misread = with_failed(
        application("gw", 10, rollout.clone(), "r2", "Progressing", 3),
        0,
        json!([pool("a", "UpgradeFailed", "Updating")]),
    );
    let found = seen(&mut checker, 0, Kind::Application, misread);
    assert_eq!(of(&found, Invariant::FailuresHalt), 1, "{found:?}");
    let mut of_an_older_spec = pool("a", "UpgradeFailed", "Updating");
    of_an_older_spec["observedLatest"] = json!(false);
    let kept = [
        json!([pool("a", "UpgradeFailed", "Failed")]),
        json!([pool("a", "SourceNotReady", "Pending")]),
        json!([pool("a", "RetriesExceeded", "RollingBack")]),
        json!([of_an_older_spec]),
    ];
    for (i, pools) in kept.into_iter().enumerate() {
        let version =
            with_failed(application("gw", 11 + i as u64, rollout.clone(), "r2", "Progressing", 3), 1, pools);
        let found = seen(&mut checker, 1 + i as i64, Kind::Application, version);
        assert_eq!(of(&found, Invariant::FailuresHalt), 0, "{i}: {found:?}");
    }
}
