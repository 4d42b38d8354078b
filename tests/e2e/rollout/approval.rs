//! Progressive rollouts whose steps require approval: `approve` lets go
//! the step it names, for the revision it names.
use super::*;

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
