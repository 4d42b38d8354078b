//! Progressive rollouts over pools whose nodes go offline: skipped,
//! reported apart and caught up when back, or waited for through a short
//! flap.
use super::*;
use support::apps::awaiting_offline;

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

    // A change reaches the others; the offline pool is left as it is, and
    // keeps the revision from completing until it catches up.
    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let done = wait_app(
        &env,
        &controller,
        "the rollout around the offline pool",
        ROLLOUT_TIMEOUT,
        awaiting_offline(2),
    )
    .await;
    let rollout = &done["status"]["rollout"];
    assert_ne!(
        rollout["lastCompleteRevision"], rollout["revision"],
        "complete behind an offline pool: {rollout}"
    );
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

/// The fourth review's second item (soak seed 41): a revision that breaks
/// only the sites offline during its rollout. It never reads `Complete`
/// behind them; the first site back takes it and fails, the rollout
/// halts, and the second site back is not written.
#[tokio::test(flavor = "multi_thread")]
async fn a_revision_is_not_complete_behind_offline_pools_and_the_first_back_that_fails_halts_the_next(
) -> TestResult {
    let (env, pools, controller) = three_pools("offline-halt").await;
    let mut app =
        ingress_app(&env, json!({ "rollout": { "strategy": "Progressive", "offlineAfter": "0s" } }));
    apply_app(&env, &app).await?;
    let installed = wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let good = installed["status"]["rollout"]["revision"].clone();
    let mut nodes = Vec::new();
    for pool in &pools[1..] {
        let node = env.nodes_of(pool).await.pop().expect("the pool has a node");
        cut_off(&env, &node).await?;
        nodes.push(node);
    }
    wait_app(&env, &controller, "two pools offline", Duration::from_secs(60), |app| {
        match app.pointer("/status/ready").and_then(Value::as_str) {
            Some("1/3 (2 offline)") => Ok(()),
            other => Err(format!("ready {other:?}")),
        }
    })
    .await;
    let before = hashes(&env).await;

    // The change breaks the offline sites alone: a port no Service may have.
    with_log_level(&mut app, "debug");
    app["spec"]["overrides"] = json!([{
        "pools": { "names": [pools[1], pools[2]] },
        "values": { "controller": { "service": { "port": 70000 } } }
    }]);
    apply_app(&env, &app).await?;
    let reached =
        wait_app(&env, &controller, "the pool reached done", ROLLOUT_TIMEOUT, awaiting_offline(1)).await;
    assert_eq!(
        reached["status"]["rollout"]["lastCompleteRevision"], good,
        "{}",
        reached["status"]["rollout"]
    );

    // The first back takes it, fails, and halts the rollout.
    reconnect(&env, &nodes[0]).await?;
    let halted = wait_app(&env, &controller, "the halt on the first back", ROLLOUT_TIMEOUT, |app| match app
        .pointer("/status/rollout/phase")
        .and_then(Value::as_str)
    {
        Some("Halted") => Ok(()),
        other => Err(format!("phase {other:?}")),
    })
    .await;
    let message = halted["status"]["rollout"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&pools[1]), "names the failed pool: {message}");
    assert_ne!(hashes(&env).await[&pools[1]], before[&pools[1]], "the first back was not written");

    // The second back is held: the revision is known bad.
    reconnect(&env, &nodes[1]).await?;
    wait_app(&env, &controller, "the second back, held", Duration::from_secs(60), |app| {
        match app.pointer("/status/ready").and_then(Value::as_str) {
            Some(r) if !r.contains("offline") => Ok(()),
            other => Err(format!("ready {other:?}")),
        }
    })
    .await;
    controller.quiet(Duration::from_secs(5)).await;
    assert_eq!(
        hashes(&env).await[&pools[2]],
        before[&pools[2]],
        "the second back took the halted revision"
    );
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
