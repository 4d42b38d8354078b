//! Progressive rollouts whose steps require approval: `approve` lets go
//! the step it names, for the revision it names.
use super::*;

/// `nodepool-fanout approve ingress`: what it says it approved.
async fn approve_what_awaits(env: &TestEnv) -> Result<String, nodepool_fanout::cli::approve::ApproveError> {
    let args = nodepool_fanout::cli::approve::ApproveArgs {
        name: "ingress".into(),
        namespace: Some(env.namespace.clone()),
        step: None,
    };
    nodepool_fanout::cli::approve::approve(&env.client, &args).await
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
    let said = approve_what_awaits(&env).await?;
    let revision = waiting["status"]["rollout"]["revision"].as_str().unwrap_or_default().to_string();
    assert!(said.contains(&format!("approved step 2 of rollout {revision}@2")), "{said}");
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
    let said = approve_what_awaits(&env).await?;
    assert!(said.contains("approved step east of rollout"), "{said}");
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

/// The rollout is `RolledBack`, every pool that took the revision back.
fn rolled_back(app: &Value) -> Result<(), String> {
    let rollout = &app["status"]["rollout"];
    match rollout["phase"].as_str() {
        Some("RolledBack") => Ok(()),
        other => Err(format!("rollout {other:?}: {}", rollout["message"])),
    }
}

/// The fourth review's first and third items, as seen on the local plane:
/// revision R2 is approved for east, fails on the last wave and goes back;
/// the spec is reverted (R1 completes at once: every release holds it, so
/// nothing is written and the releases keep their rolled-back-from stamp)
/// and redone. R2 comes back as a new rollout: its canary is written
/// again, and east waits for a fresh approval though the first rollout's
/// approval is still on the application.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_undone_then_redone_rolls_out_afresh_and_asks_for_approval_again() -> TestResult {
    let (env, pools, controller) = three_pools("redo").await;
    let steps = json!([
        { "name": "canary", "pools": { "names": [pools[0]] } },
        { "name": "east", "pools": { "names": [pools[1]] }, "requireApproval": true },
        { "name": "rest", "pools": { "names": [pools[2]] } }
    ]);
    let rollout = json!({ "strategy": "Progressive", "onFailure": "Rollback", "steps": steps });
    let good = ingress_app(&env, json!({ "rollout": rollout }));
    apply_app(&env, &good).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let r1 = hashes(&env).await;

    // R2: a new log level everywhere, and a port no Service may have on
    // the last pool alone, so that it fails only there.
    let mut bad = good.clone();
    with_log_level(&mut bad, "debug");
    bad["spec"]["overrides"] = json!([{
        "pools": { "names": [pools[2]] },
        "values": { "controller": { "service": { "port": 70000 } } }
    }]);
    apply_app(&env, &bad).await?;
    wait_app(&env, &controller, "east awaiting", ROLLOUT_TIMEOUT, awaiting_step("east", "2/3")).await;
    let said = approve_what_awaits(&env).await?;
    let back = wait_app(&env, &controller, "R2 rolled back", ROLLOUT_TIMEOUT, rolled_back).await;
    let r2 = back["status"]["rollout"]["revision"].as_str().unwrap_or_default().to_string();
    let first_rollout = back["status"]["rollout"]["number"].as_i64();
    assert!(said.contains(&format!("{r2}@")), "{said}");
    assert_eq!(hashes(&env).await, r1, "every pool is back on R1");

    // Undone: R1 again, which every release holds already.
    apply_app(&env, &good).await?;
    wait_app(&env, &controller, "R1 again", ROLLOUT_TIMEOUT, complete(3)).await;
    assert_eq!(hashes(&env).await, r1, "R1 came back without a write");

    // Redone: R2 is rolled out afresh, its canary first, and east waits
    // again: the approval of R2's first rollout is still on the
    // application, and lets nothing of this one go.
    apply_app(&env, &bad).await?;
    let again = wait_app(
        &env,
        &controller,
        "R2's canary, east awaiting",
        ROLLOUT_TIMEOUT,
        awaiting_step("east", "2/3"),
    )
    .await;
    let rollout = &again["status"]["rollout"];
    assert_eq!(rollout["revision"], r2.as_str(), "the same revision");
    assert!(rollout["number"].as_i64() > first_rollout, "a new rollout of it: {rollout}");
    assert!(condition(&again, "Stalled").is_none(), "{:?}", condition(&again, "Stalled"));
    controller.quiet(Duration::from_secs(3)).await;
    let redone = hashes(&env).await;
    assert_ne!(redone[&pools[0]], r1[&pools[0]], "the canary was not written");
    assert_eq!(redone[&pools[1]], r1[&pools[1]], "the first rollout's approval let east go");
    assert_eq!(redone[&pools[2]], r1[&pools[2]], "the last wave went");
    let apps: Api<nodepool_fanout::api::NodePoolApplication> =
        Api::namespaced(env.client.clone(), &env.namespace);
    let stale = apps.get("ingress").await?;
    let approval = stale.metadata.annotations.unwrap_or_default().remove("apps.fanout.dev/approve");
    assert_eq!(approval, first_rollout.map(|n| format!("{r2}@{n}/east")), "the old approval is there");
    env.cleanup().await;
    Ok(())
}
