//! Deletion safety on the local control plane: a selection that suddenly
//! matches no pool (a typo, a renamed label) uninstalls nothing.
mod support;

use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, releases_by_pool, stalled_because, wait_app, CHANGE_TIMEOUT};
use support::{ensure_crd, RunningController, TestEnv, TestResult};

fn uids(releases: &std::collections::BTreeMap<String, Value>) -> Vec<String> {
    releases
        .values()
        .map(|hr| hr["metadata"]["uid"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_typo_prunes_nothing_and_stalls_until_fixed() -> TestResult {
    let mut env = TestEnv::new("typo").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    for pool in ["a", "b"] {
        env.create_pool(pool, &[("e2e", &tag), ("region", "east")], 1).await;
    }
    let controller = RunningController::start(&env.namespace);
    // Suspended: the case is about what the controller writes and removes.
    let mut app = ingress_app(&env, json!({ "helmRelease": { "suspend": true } }));
    apply_app(&env, &app).await?;
    let before = support::wait_for("two releases", CHANGE_TIMEOUT, || async {
        let releases = releases_by_pool(&env).await;
        match releases.len() {
            2 => Ok(releases),
            n => Err(format!("{n} releases")),
        }
    })
    .await;

    // The label key misspelt: the selection matches nothing.
    app["spec"]["pools"] = json!({ "selector": { "matchLabels": { "e2ee": tag } } });
    apply_app(&env, &app).await?;
    let status = wait_app(
        &env,
        &controller,
        "Stalled NoPoolsSelected",
        CHANGE_TIMEOUT,
        stalled_because("NoPoolsSelected"),
    )
    .await;
    let stalled = status["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Stalled"))
        .cloned()
        .unwrap_or_default();
    assert!(
        stalled["message"].as_str().unwrap_or_default().contains("e2ee"),
        "names the selector: {stalled}"
    );
    // Give a wrong prune time to happen, then check that none did.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let during = releases_by_pool(&env).await;
    assert_eq!(uids(&during), uids(&before), "a release was deleted or replaced");

    // Fixed: the application is served again, the same releases kept.
    app["spec"]["pools"] = json!({ "selector": { "matchLabels": { "e2e": tag } } });
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "no longer Stalled", CHANGE_TIMEOUT, |app| {
        let conditions = app
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match conditions.iter().find(|c| c["type"] == "Stalled") {
            None if app["status"]["observedGeneration"] == app["metadata"]["generation"] => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(uids(&releases_by_pool(&env).await), uids(&before));
    env.cleanup().await;
    Ok(())
}
