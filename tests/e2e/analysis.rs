//! Metric checks and gates between pools (`rollout.analysis`) on the
//! local plane: real Helm upgrades by Flux's helm-controller on kwok
//! nodes, judged by the plane's real Prometheus, which scrapes one
//! endpoint per pool whose error ratio the test sets. A change with good
//! numbers completes pool by pool; one under which the canary's error
//! ratio rises halts after the canary, naming the check, the value and
//! the bound (a check asked once for every pool due, split by the pool's
//! label, judges alike); a wave check over the canary's wave holds the
//! next wave;
//! with Prometheus stopped, the canary waits and says why, then fails at
//! its deadline, never passed; and a webhook gate (a real HTTP server of
//! the test's own) that answers 403 holds the next wave until it answers
//! 200.

mod gate;
mod metrics;
mod tenants;

use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::Api;
use serde_json::{json, Value};
use support::apps::{
    apply_app, complete, ingress_app, pool_status, releases_by_pool, wait_app, READY_TIMEOUT,
};
use support::{ensure_crd, RunningController, TestEnv, TestResult};

use gate::Gate;
use metrics::{prometheus_url, PoolMetrics};

/// Three pools one after another, each a Helm upgrade and a few checks.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(240);

/// Each pool's release's spec hash.
async fn hashes(env: &TestEnv) -> BTreeMap<String, String> {
    releases_by_pool(env)
        .await
        .into_iter()
        .map(|(pool, hr)| {
            let hash = hr["metadata"]["annotations"]["apps.fanout.dev/spec-hash"]
                .as_str()
                .unwrap_or_default();
            (pool, hash.to_string())
        })
        .collect()
}

fn with_log_level(app: &mut Value, level: &str) {
    app["spec"]["values"]["controller"]["config"]["log-level"] = json!(level);
}

/// A progressive rollout whose pools are judged by their error ratio.
fn judged_app(env: &TestEnv, progress_deadline: &str) -> Value {
    ingress_app(
        env,
        json!({ "rollout": {
            "strategy": "Progressive",
            "maxUnavailable": 1,
            "minReadySeconds": 3,
            "progressDeadline": progress_deadline,
            "analysis": {
                "prometheus": { "address": prometheus_url() },
                "checks": [{
                    "name": "error-rate",
                    "query": "max(app_error_ratio{pool=\"{{pool.name}}\"})",
                    "max": 0.05,
                    "interval": "1s",
                }, {
                    // The same numbers, asked once for every pool due at
                    // the same time and split by the label.
                    "name": "error-rate-by-pool",
                    "query": "max by (pool) (app_error_ratio{pool=~\"{{pools}}\"})",
                    "by": "pool",
                    "max": 0.05,
                    "interval": "1s",
                }],
            },
        }}),
    )
}

/// The plane's Prometheus, stopped until this is dropped.
struct StoppedPrometheus;

impl StoppedPrometheus {
    fn stop() -> Self {
        crate::sites::cluster(&["stop", "prometheus"]);
        Self
    }
}

impl Drop for StoppedPrometheus {
    fn drop(&mut self) {
        crate::sites::cluster(&["start", "prometheus"]);
    }
}

/// The pool's row says `rollout` for `reason`.
fn pool_is(app: &Value, pool: &str, rollout: &str, reason: &str) -> Result<(), String> {
    let row = pool_status(app, pool).cloned().unwrap_or_default();
    match (row["rollout"].as_str(), row["reason"].as_str()) {
        (Some(r), Some(why)) if r == rollout && why == reason => Ok(()),
        other => Err(format!("{pool} is {other:?}, want ({rollout}, {reason})")),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_canary_and_its_wave_are_judged_by_their_error_rate_and_nothing_passes_unasked() -> TestResult {
    let mut env = TestEnv::new("analysis").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut pools = Vec::new();
    for short in ["a", "b", "c"] {
        pools.push(env.create_pool(short, &[("e2e", &tag), ("region", "east")], 1).await);
    }
    let metrics = PoolMetrics::start(&env.namespace, &pools).await;
    metrics.scraped(&pools, 0.0).await;
    let controller = RunningController::start(&env.namespace);
    let mut app = judged_app(&env, "10m");
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install, judged", READY_TIMEOUT, complete(3)).await;

    // A good change: each pool judged in turn, and the rollout completes.
    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let written = Instant::now();
    wait_app(&env, &controller, "the good change", ROLLOUT_TIMEOUT, complete(3)).await;
    println!("a good change over three judged pools: {:?}", written.elapsed());

    // A pool that joins the completed revision is installed and reported
    // on as before, judged no more (docs/rollouts.md). It has no metrics
    // at all: a check asked of it would answer empty, and fail.
    let late = env.create_pool("late", &[("e2e", &tag), ("region", "east")], 1).await;
    wait_app(&env, &controller, "a pool joining the completed revision", READY_TIMEOUT, |app| {
        complete(4)(app)?;
        pool_is(app, &late, "Done", "InstallSucceeded")
    })
    .await;
    let nodepools: Api<kube::api::DynamicObject> =
        Api::all_with(env.client.clone(), &support::nodepool_resource());
    nodepools.delete(&late, &Default::default()).await?;
    wait_app(&env, &controller, "the late pool gone", READY_TIMEOUT, complete(3)).await;

    // The canary's error ratio rises under the next change: it fails its
    // check, and no other pool takes the change.
    let before = hashes(&env).await;
    metrics.set(&pools[0], 0.5);
    metrics.scraped(&pools[..1], 0.5).await;
    with_log_level(&mut app, "info");
    apply_app(&env, &app).await?;
    let halted = wait_app(&env, &controller, "the halt after the canary", ROLLOUT_TIMEOUT, |app| {
        pool_is(app, &pools[0], "Failed", "AnalysisFailed")?;
        match app["status"]["rollout"]["phase"].as_str() {
            Some("Halted") => Ok(()),
            other => Err(format!("phase {other:?}")),
        }
    })
    .await;
    let row = pool_status(&halted, &pools[0]).cloned().unwrap_or_default();
    let message = row["message"].as_str().unwrap_or_default();
    for said in ["error-rate", "0.5", "max 0.05"] {
        assert!(message.contains(said), "the failure names {said}: {message}");
    }
    let after = hashes(&env).await;
    assert_ne!(after[&pools[0]], before[&pools[0]], "the canary took the change");
    for pool in &pools[1..] {
        assert_eq!(after[pool], before[pool], "{pool} took the change though the canary failed");
    }
    // The controller counts what its checks' answers came to.
    let counted = |check: &'static str, result: &'static str| {
        controller.counter("nodepool_fanout_analysis_answers_total", move |l| {
            l.contains(&format!(r#"check="{check}""#)) && l.contains(&format!(r#"result="{result}""#))
        })
    };
    for check in ["error-rate", "error-rate-by-pool"] {
        assert!(counted(check, "within").await > 0, "{check}: answers within bounds are counted");
        assert!(counted(check, "out_of_bounds").await > 0, "{check}: the canary's bad answer is counted");
    }

    // A wave check over the canary's wave (a budget tighter than each
    // pool's bound): the canary passes its own check, the wave fails its
    // budget, and the next wave never starts.
    metrics.set(&pools[0], 0.03);
    metrics.scraped(&pools[..1], 0.03).await;
    app["spec"]["rollout"]["steps"] = json!([{ "name": "canary", "pools": { "names": [&pools[0]] } }]);
    app["spec"]["rollout"]["analysis"]["waveChecks"] = json!([{
        "name": "error-budget",
        "query": "max(app_error_ratio{pool=~\"{{wave.pools}}\"})",
        "max": 0.02,
        "interval": "1s",
    }]);
    with_log_level(&mut app, "error");
    apply_app(&env, &app).await?;
    let held = wait_app(&env, &controller, "the halt on the canary wave's budget", ROLLOUT_TIMEOUT, |app| {
        let rollout = &app["status"]["rollout"];
        match (rollout["phase"].as_str(), rollout["message"].as_str()) {
            (Some("Halted"), Some(m)) if m.contains("checks of wave 1 (step canary) failed") => Ok(()),
            other => Err(format!("phase and message {other:?}")),
        }
    })
    .await;
    let message = held["status"]["rollout"]["message"].as_str().unwrap_or_default().to_string();
    for said in ["error-budget", "0.03", "max 0.02"] {
        assert!(message.contains(said), "the wave's failure names {said}: {message}");
    }
    assert_eq!(pool_status(&held, &pools[0]).cloned().unwrap_or_default()["rollout"], "Done");
    let budget = hashes(&env).await;
    assert_ne!(budget[&pools[0]], after[&pools[0]], "the canary took the change");
    for pool in &pools[1..] {
        assert_eq!(budget[pool], before[pool], "{pool} took the change though its wave's budget failed");
    }

    // Prometheus stops: the canary's checks go unanswered under the next
    // change, which waits and says why, fails at its deadline, and under
    // `onFailure: Rollback` the canary goes back; no pool is ever passed.
    metrics.set(&pools[0], 0.0);
    metrics.scraped(&pools[..1], 0.0).await;
    let stopped = StoppedPrometheus::stop();
    app["spec"]["rollout"]["progressDeadline"] = json!("30s");
    app["spec"]["rollout"]["onFailure"] = json!("Rollback");
    with_log_level(&mut app, "warn");
    apply_app(&env, &app).await?;
    let written = Instant::now();
    // It says why it waits, and it is never passed meanwhile.
    wait_app(&env, &controller, "the canary waiting for Prometheus", ROLLOUT_TIMEOUT, |app| {
        pool_is(app, &pools[0], "Soaking", "AnalysisRunning")?;
        let message = pool_status(app, &pools[0]).cloned().unwrap_or_default()["message"].clone();
        match message.as_str().unwrap_or_default().contains("no answer") {
            true => Ok(()),
            false => Err(format!("the canary's message: {message}")),
        }
    })
    .await;
    let back = wait_app(&env, &controller, "the rollback at the deadline", ROLLOUT_TIMEOUT, |app| match app
        ["status"]["rollout"]["phase"]
        .as_str()
    {
        Some("RolledBack") => Ok(()),
        other => Err(format!("phase {other:?}")),
    })
    .await;
    println!("from the write to the canary rolled back, Prometheus down: {:?}", written.elapsed());
    assert!(written.elapsed() >= Duration::from_secs(30), "failed before its deadline");
    let rollout = back["status"]["rollout"].clone();
    assert_eq!(rollout["progress"], "RolledBack 1/1", "{rollout}");
    // The canary is back, its row shows the upgrade that took it back;
    // the rollout, and the halt's Event, still name the check it failed.
    let message = rollout["message"].as_str().unwrap_or_default();
    for said in ["AnalysisFailed", "error-rate", "went unanswered"] {
        assert!(message.contains(said), "the rollback names {said}: {message}");
    }
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let halts: Vec<String> = events
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RolloutHalted"))
        .filter_map(|e| e.note)
        .collect();
    assert!(
        halts
            .iter()
            .any(|note| note.contains("AnalysisFailed") && note.contains("error-rate")),
        "a RolloutHalted Event names the failed check: {halts:?}"
    );
    let now = hashes(&env).await;
    assert_eq!(
        now, budget,
        "the canary went back to the revision it was done with, the others were not touched"
    );
    drop(stopped);

    // A webhook gate before each wave: it answers 403, and the wave after
    // the canary waits, saying why, until it answers 200.
    let gate = Gate::start(403).await;
    app["spec"]["rollout"]["analysis"]["webhooks"] = json!([{
        "name": "change-freeze",
        "type": "PreWave",
        "url": &gate.url,
        "interval": "1s",
    }]);
    with_log_level(&mut app, "notice");
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the next wave held by the gate", ROLLOUT_TIMEOUT, |app| {
        pool_is(app, &pools[1], "Waiting", "WaitingForWaveChecks")?;
        let message = pool_status(app, &pools[1]).cloned().unwrap_or_default()["message"].clone();
        match message.as_str().unwrap_or_default().contains("HTTP 403") {
            true => Ok(()),
            false => Err(format!("{}'s message: {message}", pools[1])),
        }
    })
    .await;
    let held = hashes(&env).await;
    for pool in &pools[1..] {
        assert_eq!(held[pool], before[pool], "{pool} went past a gate that answered 403");
    }
    gate.answer(200);
    wait_app(&env, &controller, "the rollout once the gate lets it go", ROLLOUT_TIMEOUT, complete(3)).await;
    let sent = gate.sent();
    let asked = sent.first().cloned().unwrap_or_default();
    assert_eq!(asked["application"]["name"], "ingress", "{asked}");
    assert_eq!(
        (asked["type"].as_str(), asked["wave"].as_str()),
        (Some("PreWave"), Some("canary")),
        "{asked}"
    );
    assert_eq!(asked["pools"], json!([&pools[0]]), "{asked}");
    env.cleanup().await;
    Ok(())
}
