//! Progressive rollouts and offline pools on the local control plane, with
//! real installs by Flux's helm-controller on kwok nodes.

mod approval;
mod offline;
mod pool_change;
mod windows;

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};
use support::apps::{
    apply_app, complete, ingress_app, releases_by_pool, stalled_because, wait_app, READY_TIMEOUT,
};
use support::{condition, ensure_crd, RunningController, TestEnv, TestResult};

/// A rollout of three pools takes a few Helm upgrades one after another.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(240);

const SPEC_HASH: &str = "apps.fanout.dev/spec-hash";
const WRITTEN_AT: &str = "apps.fanout.dev/written-at";

fn annotation<'a>(object: &'a Value, key: &str) -> &'a str {
    object["metadata"]["annotations"][key].as_str().unwrap_or_default()
}

/// Each pool's release's spec hash.
async fn hashes(env: &TestEnv) -> BTreeMap<String, String> {
    releases_by_pool(env)
        .await
        .into_iter()
        .map(|(pool, hr)| (pool, annotation(&hr, SPEC_HASH).to_string()))
        .collect()
}

/// The values change every test step makes: a new revision for every pool.
fn with_log_level(app: &mut Value, level: &str) {
    app["spec"]["values"]["controller"]["config"]["log-level"] = json!(level);
}

/// How many pools the application's status reads updated and not done.
fn updating(app: &Value) -> usize {
    app["status"]["pools"]
        .as_array()
        .map(|p| p.iter().filter(|p| p["upToDate"] == true && p["rollout"] != "Done").count())
        .unwrap_or_default()
}

/// A test's world: three pools of one kwok node each, and the controller.
async fn three_pools(test: &str) -> (TestEnv, Vec<String>, RunningController) {
    let mut env = TestEnv::new(test).await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut pools = Vec::new();
    for short in ["a", "b", "c"] {
        pools.push(env.create_pool(short, &[("e2e", &tag), ("region", "east")], 1).await);
    }
    let controller = RunningController::start(&env.namespace);
    (env, pools, controller)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_goes_pool_by_pool_halts_on_a_broken_site_and_completes_once_fixed() -> TestResult {
    let (env, pools, controller) = three_pools("rollout").await;
    let mut app = ingress_app(&env, json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 1 } }));
    apply_app(&env, &app).await?;
    // New pools have nothing to break: installed at once.
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;

    // A good change: one pool at a time, in name order, each written only
    // once the one before it was Ready on the new revision.
    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let most_updating = std::cell::Cell::new(0);
    let status = wait_app(&env, &controller, "the good change", ROLLOUT_TIMEOUT, |app| {
        most_updating.set(most_updating.get().max(updating(app)));
        complete(3)(app)
    })
    .await;
    assert!(most_updating.get() <= 1, "{} pools were updating at once", most_updating.get());
    let releases = releases_by_pool(&env).await;
    for pair in pools.windows(2) {
        let (before, after) = (&releases[&pair[0]], &releases[&pair[1]]);
        // Compared as times: the annotation has nanoseconds, Flux's
        // condition whole seconds (so the check is blind within a second).
        let time = |text: Option<&str>| text.and_then(|t| t.parse::<Timestamp>().ok());
        let ready_since = time(condition(before, "Ready").and_then(|c| c["lastTransitionTime"].as_str()));
        let written = time(Some(annotation(after, WRITTEN_AT)));
        assert!(
            matches!((written, ready_since), (Some(w), Some(r)) if w >= r),
            "pool {} was written at {written:?}, before pool {} turned Ready at {ready_since:?}",
            pair[1],
            pair[0]
        );
    }
    // Each done release carries the controller's mark of when it first saw
    // it Ready on that write: after its write, and before the next pool's.
    for pair in pools.windows(2) {
        let time = |hr: &Value, key: &str| {
            hr["metadata"]["annotations"][key].as_str().and_then(|t| t.parse::<Timestamp>().ok())
        };
        let (before, after) = (&releases[&pair[0]], &releases[&pair[1]]);
        let marked = time(before, "apps.fanout.dev/ready-at");
        let (written, next) = (time(before, WRITTEN_AT), time(after, WRITTEN_AT));
        assert!(
            matches!((written, marked, next), (Some(w), Some(m), Some(n)) if w <= m && m <= n),
            "pool {}: written at {written:?}, marked Ready at {marked:?}, next pool written at {next:?}",
            pair[0]
        );
    }
    assert_eq!(status["status"]["rollout"]["updated"], 3);
    let good = hashes(&env).await;

    // A broken change (a port no Service may have): the first pool fails,
    // the rollout halts, the others keep the previous release exactly.
    app["spec"]["values"]["controller"]["service"] = json!({ "port": 70000 });
    apply_app(&env, &app).await?;
    let halted =
        wait_app(&env, &controller, "the halt", ROLLOUT_TIMEOUT, stalled_because("RolloutHalted")).await;
    let stalled = condition(&halted, "Stalled").cloned().unwrap_or_default();
    let message = stalled["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&pools[0]) && message.contains("70000"),
        "names the pool and Flux's words: {message}"
    );
    let ready = condition(&halted, "Ready").cloned().unwrap_or_default();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some("RolloutHalted"))
    );
    assert_eq!(halted["status"]["rollout"]["phase"], "Halted");
    // Give a wrong write time to happen, then check that none did.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = hashes(&env).await;
    assert_ne!(during[&pools[0]], good[&pools[0]], "the first pool got the change");
    for pool in &pools[1..] {
        assert_eq!(during[pool], good[pool], "pool {pool} was touched by a halted rollout");
        let entry = support::apps::pool_status(&halted, pool).cloned().unwrap_or_default();
        assert_eq!(
            (entry["ready"].as_str(), entry["rollout"].as_str()),
            (Some("True"), Some("Halted")),
            "{entry}"
        );
    }

    // Fixed: a new revision starts again, the failed pool first, and completes.
    app["spec"]["values"]["controller"]["service"] = json!({ "port": 8080 });
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the fixed change", ROLLOUT_TIMEOUT, complete(3)).await;
    let fixed = hashes(&env).await;
    assert!(pools.iter().all(|p| fixed[p] != good[p] && fixed[p] != during[p]), "{fixed:?}");

    // Paused: a change reaches no pool until the pause is lifted.
    app["spec"]["rollout"]["paused"] = json!(true);
    with_log_level(&mut app, "warn");
    apply_app(&env, &app).await?;
    let paused = wait_app(&env, &controller, "the pause", Duration::from_secs(60), |app| {
        match app.pointer("/status/rollout/phase").and_then(Value::as_str) {
            Some("Paused") => Ok(()),
            other => Err(format!("phase {other:?}")),
        }
    })
    .await;
    let ready = condition(&paused, "Ready").cloned().unwrap_or_default();
    assert_eq!(ready["reason"], "RolloutPaused");
    assert!(condition(&paused, "Stalled").is_none(), "a pause is no failure");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(hashes(&env).await, fixed, "a paused rollout wrote a release");
    app["spec"]["rollout"]["paused"] = json!(false);
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the resumed change", ROLLOUT_TIMEOUT, complete(3)).await;
    let resumed = hashes(&env).await;
    assert!(pools.iter().all(|p| resumed[p] != fixed[p]), "{resumed:?}");

    env.cleanup().await;
    Ok(())
}

/// Cuts a kwok node off as a lost link would: kwok stops answering for it
/// and its Ready condition turns False.
pub(crate) async fn cut_off(env: &TestEnv, node: &str) -> TestResult {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let unmanaged = json!({ "metadata": { "annotations": { "kwok.x-k8s.io/node": null } } });
    nodes.patch(node, &PatchParams::default(), &Patch::Merge(&unmanaged)).await?;
    // As the node lifecycle controller writes it: since now.
    let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let not_ready = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "False", "reason": "NodeStatusUnknown", "message": "link down (test)",
        "lastTransitionTime": now
    }] } });
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&not_ready))
        .await?;
    Ok(())
}

/// Hands the node back to kwok, which turns it Ready again.
async fn reconnect(env: &TestEnv, node: &str) -> TestResult {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let managed = json!({ "metadata": { "annotations": { "kwok.x-k8s.io/node": "fake" } } });
    nodes.patch(node, &PatchParams::default(), &Patch::Merge(&managed)).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_failing_after_its_revision_completed_takes_no_healthy_pool_back() -> TestResult {
    let mut env = TestEnv::new("completed").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut pools = Vec::new();
    for short in ["a", "b"] {
        pools.push(env.create_pool(short, &[("e2e", &tag), ("region", "east")], 1).await);
    }
    let controller = RunningController::start(&env.namespace);
    // A pool still to come gets an override the API server refuses (a
    // Deployment with -1 replicas): its install will fail.
    let late = env.pool_name("late");
    let overrides = json!([{ "pools": { "names": [late] }, "values": { "controller": { "replicas": -1 } } }]);
    let rollout = json!({ "strategy": "Progressive", "onFailure": "Rollback" });
    let mut app = ingress_app(&env, json!({ "rollout": rollout, "overrides": overrides }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(2)).await;
    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let done = wait_app(&env, &controller, "the change complete", ROLLOUT_TIMEOUT, complete(2)).await;
    let revision = done["status"]["rollout"]["revision"].as_str().unwrap_or_default().to_string();
    let before = hashes(&env).await;

    env.create_pool("late", &[("e2e", &tag), ("region", "east")], 1).await;
    let failed = |app: &Value| {
        let status = support::apps::pool_status(app, &late).ok_or("no line for the late pool")?;
        match status["ready"].as_str() {
            Some("False") => Ok(()),
            _ => Err(format!("late pool: {status}")),
        }
    };
    let after = wait_app(&env, &controller, "the late pool's install failed", READY_TIMEOUT, failed).await;
    controller.quiet(Duration::from_secs(5)).await;
    let rollout = &after["status"]["rollout"];
    assert_eq!(rollout["revision"], revision.as_str(), "{rollout}");
    assert!(rollout.get("rolledBackTo").is_none(), "a completed revision went back: {rollout}");
    assert_ne!(rollout["phase"], "Halted", "{rollout}");
    assert_ne!(rollout["phase"], "RollingBack", "{rollout}");
    let now = hashes(&env).await;
    for pool in &pools {
        assert_eq!(now[pool], before[pool], "the healthy pool {pool} was written");
    }
    let ready = condition(&after, "Ready").cloned().unwrap_or_default();
    assert_eq!(ready["status"], "False", "{ready}");
    assert!(ready["message"].as_str().unwrap_or_default().contains(&late), "{ready}");
    let history = nodepool_fanout::cli::history::HistoryArgs {
        name: "ingress".into(),
        namespace: Some(env.namespace.clone()),
    };
    let rows = nodepool_fanout::cli::history::fetch(&env.client, &history).await?;
    let last = rows.iter().find(|r| r.revision == revision).map(|r| r.outcome.clone());
    assert_eq!(last.as_deref(), Some("Complete"), "{rows:?}");
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_that_takes_its_pool_offline_halts_the_rollout() -> TestResult {
    let (env, pools, controller) = three_pools("offline-after-update").await;
    let mut app = ingress_app(
        &env,
        json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 1, "offlineAfter": "0s" } }),
    );
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let before = hashes(&env).await;

    // The change reaches the first pool, and its node goes down right
    // after, as if the chart broke the kubelet or the link.
    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let first = pools[0].clone();
    support::wait_for("the change written to the first pool", support::apps::CHANGE_TIMEOUT, || async {
        match hashes(&env).await.get(&first) != before.get(&first) {
            true => Ok(()),
            false => Err("not yet".to_string()),
        }
    })
    .await;
    let node = env.nodes_of(&first).await.pop().expect("the pool has a node");
    cut_off(&env, &node).await?;

    let halted =
        wait_app(&env, &controller, "the halt", ROLLOUT_TIMEOUT, stalled_because("RolloutHalted")).await;
    let message = condition(&halted, "Stalled").and_then(|c| c["message"].as_str()).unwrap_or_default();
    assert!(
        message.contains(&first) && message.contains("OfflineAfterUpdate"),
        "names the pool and why: {message}"
    );
    let entry = support::apps::pool_status(&halted, &first).cloned().unwrap_or_default();
    assert_eq!(
        (entry["reason"].as_str(), entry["offline"].as_bool()),
        (Some("OfflineAfterUpdate"), Some(true))
    );
    controller.quiet(Duration::from_secs(5)).await;
    let after = hashes(&env).await;
    for pool in &pools[1..] {
        assert_eq!(after[pool], before[pool], "pool {pool} was written after the halt");
    }
    reconnect(&env, &node).await?;
    env.cleanup().await;
    Ok(())
}
