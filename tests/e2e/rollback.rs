//! `onFailure: Rollback` on the local control plane, with real Helm
//! upgrades by Flux's helm-controller on kwok nodes: a broken change halts
//! after its first pool, that pool's Helm release is upgraded back to the
//! values of the last revision that completed, and the application stays
//! rolled back, says so, and tells a Flux Alert, until the spec changes.
use crate::notifications::{revision, routed, Routed};
use crate::support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::apps::{apply_app, complete, ingress_app, releases_by_pool, wait_app, READY_TIMEOUT};
use support::{condition, TestEnv, TestResult};

/// A failed Helm upgrade, then one back.
const ROLLBACK_TIMEOUT: Duration = Duration::from_secs(240);

/// What a pool's release holds: the spec hash we wrote, the values, and
/// the newest Helm release helm-controller made of it (its version,
/// status and the digest of its values).
#[derive(Debug, Clone, PartialEq)]
struct Held {
    spec_hash: String,
    values: Value,
    helm_version: i64,
    helm_status: String,
    config_digest: String,
}

fn held(release: &Value) -> Held {
    let newest = &release["status"]["history"][0];
    Held {
        spec_hash: release["metadata"]["annotations"]["apps.fanout.dev/spec-hash"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        values: release["spec"]["values"].clone(),
        helm_version: newest["version"].as_i64().unwrap_or_default(),
        helm_status: newest["status"].as_str().unwrap_or_default().to_string(),
        config_digest: newest["configDigest"].as_str().unwrap_or_default().to_string(),
    }
}

async fn held_by_pool(env: &TestEnv) -> BTreeMap<String, Held> {
    releases_by_pool(env)
        .await
        .iter()
        .map(|(pool, hr)| (pool.clone(), held(hr)))
        .collect()
}

fn rolled_back(app: &Value) -> Result<(), String> {
    let rollout = &app["status"]["rollout"];
    let ready = condition(app, "Ready").map(|c| (c["status"].clone(), c["reason"].clone()));
    match (rollout["phase"].as_str(), ready) {
        (Some("RolledBack"), Some((status, reason))) if status == "False" && reason == "RolledBack" => Ok(()),
        other => Err(format!("phase and Ready are {other:?}")),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_change_under_rollback_takes_its_first_pool_back_and_stays_rolled_back() -> TestResult {
    let Routed {
        env,
        webhook,
        pools,
        controller,
    } = routed("rollback", &["a", "b", "c"]).await?;
    let rollout = json!({ "strategy": "Progressive", "maxUnavailable": 1, "onFailure": "Rollback" });
    let mut app = ingress_app(&env, json!({ "rollout": rollout }));
    apply_app(&env, &app).await?;
    let installed = wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let good_revision = revision(&installed);
    let good = held_by_pool(&env).await;
    assert!(
        good.values().all(|h| h.helm_status == "deployed" && !h.config_digest.is_empty()),
        "{good:?}"
    );

    // A broken change (a port no Service may have): the first pool takes
    // it and fails, and goes back; the others never take it.
    app["spec"]["values"]["controller"]["service"] = json!({ "port": 70000 });
    apply_app(&env, &app).await?;
    let written = Instant::now();
    let back = wait_app(&env, &controller, "the rollback", ROLLBACK_TIMEOUT, rolled_back).await;
    println!("from the write to every pool back and Ready: {:?}", written.elapsed());
    let broken = revision(&back);
    assert_ne!(broken, good_revision);
    let rollout = &back["status"]["rollout"];
    assert_eq!(rollout["rolledBackTo"], good_revision.as_str(), "{rollout}");
    assert_eq!(rollout["progress"], "RolledBack 1/1", "{rollout}");
    let stalled = condition(&back, "Stalled").cloned().unwrap_or_default();
    let message = stalled["message"].as_str().unwrap_or_default();
    assert_eq!(stalled["reason"], "RolledBack", "{stalled}");
    assert!(
        message.contains(&pools[0]) && message.contains(&format!("rolled back to revision {good_revision}")),
        "names the pool and the revision it went back to: {message}"
    );
    let now = held_by_pool(&env).await;
    let first = &now[&pools[0]];
    // The first pool's release is again exactly what it was, and Helm
    // upgraded it back: a newer Helm release with the old values' digest.
    assert_eq!((&first.spec_hash, &first.values), (&good[&pools[0]].spec_hash, &good[&pools[0]].values));
    assert_eq!(first.helm_status, "deployed", "{first:?}");
    assert_eq!(first.config_digest, good[&pools[0]].config_digest, "{first:?}");
    assert!(
        first.helm_version >= good[&pools[0]].helm_version + 2,
        "upgraded, failed, upgraded back: {first:?}"
    );
    let entry = support::apps::pool_status(&back, &pools[0]).cloned().unwrap_or_default();
    assert_eq!(
        (entry["ready"].as_str(), entry["rollout"].as_str()),
        (Some("True"), Some("RolledBack")),
        "{entry}"
    );
    let releases = releases_by_pool(&env).await;
    let stamp = &releases[&pools[0]]["metadata"]["annotations"]["apps.fanout.dev/rolled-back-from"];
    assert_eq!(stamp, broken.as_str());
    for pool in &pools[1..] {
        assert_eq!(now[pool], good[pool], "pool {pool} was touched");
        let entry = support::apps::pool_status(&back, pool).cloned().unwrap_or_default();
        assert_eq!(
            (entry["ready"].as_str(), entry["rollout"].as_str()),
            (Some("True"), Some("Halted")),
            "{entry}"
        );
    }

    // The history lists both revisions.
    let history = nodepool_fanout::cli::history::HistoryArgs {
        name: "ingress".into(),
        namespace: Some(env.namespace.clone()),
    };
    let rows = nodepool_fanout::cli::history::fetch(&env.client, &history).await?;
    let listed: Vec<(&str, &str)> = rows.iter().map(|r| (r.revision.as_str(), r.outcome.as_str())).collect();
    assert_eq!(
        listed,
        [
            (good_revision.as_str(), "Complete"),
            (broken.as_str(), "RolledBack")
        ]
    );

    // It stays rolled back: the broken revision is not tried again.
    controller.quiet(Duration::from_secs(5)).await;
    let later = wait_app(&env, &controller, "still rolled back", Duration::from_secs(10), rolled_back).await;
    assert_eq!(later["status"]["rollout"]["revision"], broken.as_str());
    assert_eq!(held_by_pool(&env).await, now, "a release was written after the rollback");

    // An Alert gets the halt and the rollback.
    let (ns, name) = (env.namespace.clone(), "ingress");
    let about = |reason: &'static str| {
        let broken = broken.clone();
        move |b: &Value| b["reason"] == reason && b["metadata"]["revision"] == broken.as_str()
    };
    let halt = webhook.wait("the halt's notification", &ns, name, about("RolloutHalted")).await;
    assert_eq!(halt.body["severity"], "error", "{}", halt.body);
    let note = webhook
        .wait("the rollback's notification", &ns, name, about("RolloutRolledBack"))
        .await;
    assert_eq!(note.body["severity"], "error", "{}", note.body);
    let message = note.body["message"].as_str().unwrap_or_default();
    assert!(message.contains(&good_revision) && message.contains(&pools[0]), "{message}");
    println!("the rollback, as the webhook received it:\n{}", note.body);

    // Fixed: a new revision rolls out from there and completes.
    app["spec"]["values"]["controller"]["service"] = json!({ "port": 8080 });
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the fixed change", ROLLBACK_TIMEOUT, complete(3)).await;
    let fixed = held_by_pool(&env).await;
    assert!(pools.iter().all(|p| fixed[p].spec_hash != good[p].spec_hash), "{fixed:?}");
    env.cleanup().await;
    Ok(())
}
