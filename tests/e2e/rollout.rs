//! Progressive rollouts and offline pools on the local control plane, with
//! real installs by Flux's helm-controller on kwok nodes.
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
        let updating = app["status"]["pools"]
            .as_array()
            .map(|p| p.iter().filter(|p| p["upToDate"] == true && p["rollout"] != "Done").count())
            .unwrap_or_default();
        most_updating.set(most_updating.get().max(updating));
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
async fn an_offline_pool_is_skipped_reported_apart_and_caught_up_when_back() -> TestResult {
    let (env, pools, controller) = three_pools("offline").await;
    let mut app =
        ingress_app(&env, json!({ "rollout": { "strategy": "Progressive", "offlineAfter": "0s" } }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;

    let down = pools[1].clone();
    let node = env.nodes_of(&down).await.pop().expect("the pool has a node");
    cut_off(&env, &node).await?;
    let status = wait_app(&env, &controller, "the pool reported offline", Duration::from_secs(60), |app| {
        match app.pointer("/status/ready").and_then(Value::as_str) {
            Some("2/3 (1 offline)") => Ok(()),
            other => Err(format!("ready {other:?}")),
        }
    })
    .await;
    let entry = support::apps::pool_status(&status, &down).cloned().unwrap_or_default();
    assert_eq!(
        (entry["offline"].as_bool(), entry["nodes"].as_str()),
        (Some(true), Some("0/1")),
        "{entry}"
    );
    assert_eq!(entry["reason"], "PoolOffline");
    assert!(entry["offlineSince"].is_string(), "since when: {entry}");
    let before = hashes(&env).await;

    // A change completes on the others; the offline pool is left as it is.
    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let done =
        wait_app(&env, &controller, "the rollout around the offline pool", ROLLOUT_TIMEOUT, complete(2))
            .await;
    let ready = condition(&done, "Ready").cloned().unwrap_or_default();
    assert!(
        ready["message"].as_str().unwrap_or_default().contains("1 offline"),
        "the offline pool is counted apart: {ready}"
    );
    let during = hashes(&env).await;
    assert_eq!(during[&down], before[&down], "the offline pool's release was written");
    for pool in [&pools[0], &pools[2]] {
        assert_ne!(during[pool], before[pool], "pool {pool} did not get the change");
    }

    // Back online: it catches up.
    reconnect(&env, &node).await?;
    wait_app(&env, &controller, "the pool caught up", ROLLOUT_TIMEOUT, complete(3)).await;
    let after = hashes(&env).await;
    assert_ne!(after[&down], before[&down], "the pool back online did not get the change");

    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_flap_shorter_than_offline_after_neither_skips_nor_fails_its_pool() -> TestResult {
    let (env, pools, controller) = three_pools("flap").await;
    let rollout = json!({ "rollout": { "strategy": "Progressive", "offlineAfter": "5m" } });
    let mut app = ingress_app(&env, rollout);
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let before = hashes(&env).await;

    // The first pool in the rollout's order loses its node; a change comes.
    let flapping = pools[0].clone();
    let node = env.nodes_of(&flapping).await.pop().expect("the pool has a node");
    cut_off(&env, &node).await?;
    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let waiting = wait_app(
        &env,
        &controller,
        "the others updated, the flapping pool waited for",
        ROLLOUT_TIMEOUT,
        |app| {
            let entry = support::apps::pool_status(app, &flapping).cloned().unwrap_or_default();
            let done = app.pointer("/status/rollout/done").and_then(Value::as_i64);
            match (entry["rollout"].as_str(), entry["reason"].as_str(), done) {
                (Some("Waiting"), Some("PoolNotReached"), Some(2)) => Ok(()),
                other => Err(format!("{flapping}: {other:?}")),
            }
        },
    )
    .await;
    let rollout = &waiting["status"]["rollout"];
    assert_eq!(rollout["phase"], "Progressing", "not complete without it: {rollout}");
    assert_eq!(rollout["total"], 3, "not skipped: {rollout}");
    assert!(condition(&waiting, "Stalled").is_none(), "not failed");
    assert_eq!(waiting["status"]["ready"], "3/3", "Ready on its old revision, not offline");
    assert_eq!(hashes(&env).await[&flapping], before[&flapping], "written to NotReady nodes");

    // The link comes back within the grace: the pool gets the change.
    reconnect(&env, &node).await?;
    let done = wait_app(&env, &controller, "the flapping pool caught up", ROLLOUT_TIMEOUT, complete(3)).await;
    assert_eq!(done["status"]["rollout"]["failed"], 0);
    assert_ne!(hashes(&env).await[&flapping], before[&flapping]);
    env.cleanup().await;
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

/// The rollout awaits approval of its second wave.
fn awaiting_approval(app: &Value) -> Result<(), String> {
    let rollout = &app["status"]["rollout"];
    match (rollout["phase"].as_str(), rollout["wave"].as_str(), rollout["done"].as_i64()) {
        (Some("AwaitingApproval"), Some("2/2"), Some(1)) => Ok(()),
        other => Err(format!("rollout {other:?}")),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wave_that_requires_approval_waits_for_approve_and_a_later_revision_waits_again() -> TestResult {
    let (env, pools, controller) = three_pools("approval").await;
    let steps = json!([
        { "pools": { "names": [pools[0]] } },
        { "pools": { "names": [pools[1], pools[2]] }, "requireApproval": true }
    ]);
    let mut app = ingress_app(
        &env,
        json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 2, "steps": steps } }),
    );
    apply_app(&env, &app).await?;
    // New pools are installed at once: nothing to approve yet.
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let before = hashes(&env).await;

    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let waiting =
        wait_app(&env, &controller, "the canary done, wave 2 awaiting", ROLLOUT_TIMEOUT, awaiting_approval)
            .await;
    let ready = condition(&waiting, "Ready").cloned().unwrap_or_default();
    assert_eq!(ready["reason"], "AwaitingApproval", "{ready}");
    assert!(condition(&waiting, "Stalled").is_none(), "an approval is no failure");
    controller.quiet(Duration::from_secs(3)).await;
    let during = hashes(&env).await;
    assert_ne!(during[&pools[0]], before[&pools[0]], "the canary did not get the change");
    for pool in &pools[1..] {
        assert_eq!(during[pool], before[pool], "pool {pool} was written before the approval");
    }

    // `approve` lets the wave go.
    let args = nodepool_fanout::cli::approve::ApproveArgs {
        name: "ingress".into(),
        namespace: Some(env.namespace.clone()),
        step: None,
    };
    let said = nodepool_fanout::cli::approve::approve(&env.client, &args).await?;
    let revision = waiting["status"]["rollout"]["revision"].as_str().unwrap_or_default().to_string();
    assert!(said.contains(&format!("approved step 2 of revision {revision}")), "{said}");
    let done = wait_app(&env, &controller, "the approved wave", ROLLOUT_TIMEOUT, complete(3)).await;
    let approved = hashes(&env).await;
    // The history holds both revisions, each complete, and the status
    // names the last that completed.
    let history = nodepool_fanout::cli::history::HistoryArgs {
        name: "ingress".into(),
        namespace: Some(env.namespace.clone()),
    };
    let rows = nodepool_fanout::cli::history::fetch(&env.client, &history).await?;
    let listed: Vec<(i64, &str, &str)> =
        rows.iter().map(|r| (r.number, r.revision.as_str(), r.outcome.as_str())).collect();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!((listed[1].0, listed[1].1, listed[1].2), (2, revision.as_str(), "Complete"), "{listed:?}");
    assert_eq!((listed[0].0, listed[0].2), (1, "Complete"), "{listed:?}");
    assert!(rows.iter().all(|r| r.chart_version == "1.0.0"), "{rows:?}");
    assert_eq!(done["status"]["rollout"]["lastCompleteRevision"], revision.as_str());
    for pool in &pools[1..] {
        assert_ne!(approved[pool], before[pool], "pool {pool} did not get the approved change");
    }

    // The approval named that revision: the next change waits again.
    with_log_level(&mut app, "warn");
    apply_app(&env, &app).await?;
    let next =
        wait_app(&env, &controller, "the next revision awaiting", ROLLOUT_TIMEOUT, awaiting_approval).await;
    assert_eq!(next["status"]["rollout"]["lastCompleteRevision"], revision.as_str(), "the one before");
    let rows = nodepool_fanout::cli::history::fetch(&env.client, &history).await?;
    let outcomes: Vec<&str> = rows.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(outcomes, ["Complete", "Complete", "AwaitingApproval"]);
    controller.quiet(Duration::from_secs(3)).await;
    let later = hashes(&env).await;
    for pool in &pools[1..] {
        assert_eq!(later[pool], approved[pool], "the old approval let pool {pool} through");
    }
    env.cleanup().await;
    Ok(())
}

/// The rollout awaits approval of `step`, in wave `wave`.
fn awaiting_step(step: &'static str, wave: &'static str) -> impl Fn(&Value) -> Result<(), String> {
    move |app| {
        let rollout = &app["status"]["rollout"];
        let seen = (rollout["phase"].as_str(), rollout["awaitingStep"].as_str(), rollout["wave"].as_str());
        match seen {
            (Some("AwaitingApproval"), Some(s), Some(w)) if s == step && w == wave => Ok(()),
            other => Err(format!("rollout {other:?}")),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_lets_go_the_step_it_names_and_no_other_when_the_canary_leaves() -> TestResult {
    let (env, pools, controller) = three_pools("approval-step").await;
    let steps = json!([
        { "name": "canary", "pools": { "names": [pools[0]] } },
        { "name": "east", "pools": { "names": [pools[1]] }, "requireApproval": true },
        { "name": "west", "pools": { "names": [pools[2]] }, "requireApproval": true }
    ]);
    let mut app = ingress_app(&env, json!({ "rollout": { "strategy": "Progressive", "steps": steps } }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let before = hashes(&env).await;

    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "east awaiting", ROLLOUT_TIMEOUT, awaiting_step("east", "2/3")).await;
    let args = nodepool_fanout::cli::approve::ApproveArgs {
        name: "ingress".into(),
        namespace: Some(env.namespace.clone()),
        step: None,
    };
    let said = nodepool_fanout::cli::approve::approve(&env.client, &args).await?;
    assert!(said.contains("approved step east of revision"), "{said}");
    wait_app(&env, &controller, "west awaiting", ROLLOUT_TIMEOUT, awaiting_step("west", "3/3")).await;

    // The canary's pool leaves the application: east is the first wave
    // now and west the second, which the approval of east must not open.
    let nodepools: Api<kube::api::DynamicObject> =
        Api::all_with(env.client.clone(), &support::nodepool_resource());
    let unlabel = json!({ "metadata": { "labels": { "e2e": null } } });
    nodepools.patch(&pools[0], &PatchParams::default(), &Patch::Merge(&unlabel)).await?;
    wait_app(&env, &controller, "west still awaiting", ROLLOUT_TIMEOUT, awaiting_step("west", "2/2")).await;
    controller.quiet(Duration::from_secs(3)).await;
    let after = hashes(&env).await;
    assert!(!after.contains_key(&pools[0]), "the canary's release left with its pool: {after:?}");
    assert_ne!(after[&pools[1]], before[&pools[1]], "east did not get the approved change");
    assert_eq!(after[&pools[2]], before[&pools[2]], "the approval of east let west go");
    env.cleanup().await;
    Ok(())
}

/// A cron schedule that first matches a minute or two from now (UTC), and
/// that moment.
fn opening_soon() -> (String, Timestamp) {
    let now = Timestamp::now().as_second();
    // The next whole minute at least 60 s away, so the change is written
    // and seen waiting before the window opens.
    let opens = (now + 60).div_euclid(60) * 60 + 60;
    let at = Timestamp::from_second(opens).expect("a time in range");
    let minute = at.strftime("%M").to_string();
    let hour = at.strftime("%H").to_string();
    (
        format!(
            "{} {} * * *",
            minute.trim_start_matches('0').max("0"),
            hour.trim_start_matches('0').max("0")
        ),
        at,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_outside_its_maintenance_window_is_updated_only_once_it_opens() -> TestResult {
    let (env, pools, controller) = three_pools("window").await;
    let (schedule, opens) = opening_soon();
    let windows = json!([{ "schedule": schedule, "duration": "10m", "pools": { "names": [pools[0]] } }]);
    let mut app = ingress_app(&env, json!({ "rollout": { "windows": windows } }));
    // New pools install at once, window or not.
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    // The second pool keeps its own hours, on its NodePool: January only.
    let nodepools: Api<kube::api::DynamicObject> =
        Api::all_with(env.client.clone(), &support::nodepool_resource());
    let own = json!({ "metadata": { "annotations": { "apps.fanout.dev/maintenance-window":
        r#"{"schedule": "0 3 1 1 *", "duration": "1h", "timeZone": "Europe/Berlin"}"# } } });
    nodepools.patch(&pools[1], &PatchParams::default(), &Patch::Merge(&own)).await?;
    let before = hashes(&env).await;

    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let waiting =
        wait_app(&env, &controller, "the third pool updated, two waiting", ROLLOUT_TIMEOUT, |app| {
            let state = |pool: &str| {
                let entry = support::apps::pool_status(app, pool).cloned().unwrap_or_default();
                (entry["rollout"].as_str().map(String::from), entry["reason"].as_str().map(String::from))
            };
            let waiting = (Some("Waiting".to_string()), Some("OutsideMaintenanceWindow".to_string()));
            match (state(&pools[0]), state(&pools[1]), state(&pools[2]).0.as_deref()) {
                (a, b, Some("Done")) if a == waiting && b == waiting => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    assert!(Timestamp::now() < opens, "the window opened before the check: make it later");
    let message = |pool: &str| {
        support::apps::pool_status(&waiting, pool)
            .and_then(|p| p["message"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let expected = opens.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    assert!(message(&pools[0]).contains(&expected), "{}", message(&pools[0]));
    assert!(
        message(&pools[1]).contains("-01-01T02:00:00Z"),
        "03:00 in Berlin in winter: {}",
        message(&pools[1])
    );
    let during = hashes(&env).await;
    assert_eq!(during[&pools[0]], before[&pools[0]], "written outside its window");
    assert_eq!(during[&pools[1]], before[&pools[1]], "written outside its own window");

    // The window opens: the pool is updated on its own; the other still waits.
    let updated =
        wait_app(&env, &controller, "the first pool updated in its window", ROLLOUT_TIMEOUT, |app| {
            let entry = support::apps::pool_status(app, &pools[0]).cloned().unwrap_or_default();
            match entry["rollout"].as_str() {
                Some("Done") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    let written = releases_by_pool(&env).await[&pools[0]].clone();
    let written_at: Timestamp = annotation(&written, WRITTEN_AT).parse()?;
    assert!(written_at >= opens, "written at {written_at}, before its window opened at {opens}");
    assert_eq!(updated["status"]["rollout"]["phase"], "Progressing", "the second pool still waits");
    assert_eq!(hashes(&env).await[&pools[1]], before[&pools[1]]);
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
