//! Deletion safety on the local control plane: a selection that suddenly
//! matches no pool (a typo, a renamed label) uninstalls nothing, and
//! `deletionPolicy: Orphan` leaves releases running on their own.
use crate::support;

use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::Api;
use nodepool_fanout::api::naming;
use nodepool_fanout::api::NodePoolApplication;
use nodepool_fanout::chart::shared as shared_chart;
use nodepool_fanout::reconcile::orphan;
use serde_json::{json, Value};
use support::apps::{
    apply_app, ingress_app, ready_is, releases_by_pool, stalled_because, wait_app, CHANGE_TIMEOUT,
    READY_TIMEOUT,
};
use support::{ensure_crd, helmchart_resource, helmrelease_resource, RunningController, TestEnv, TestResult};

fn uids(releases: &std::collections::BTreeMap<String, Value>) -> Vec<String> {
    releases
        .values()
        .map(|hr| hr["metadata"]["uid"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The application's releases by pool, once there are `n`.
async fn releases_made(env: &TestEnv, n: usize) -> std::collections::BTreeMap<String, Value> {
    support::wait_for(&format!("{n} releases"), CHANGE_TIMEOUT, || async {
        let releases = releases_by_pool(env).await;
        match releases.len() {
            len if len == n => Ok(releases),
            len => Err(format!("{len} releases")),
        }
    })
    .await
}

/// The application's current spec is reconciled, and it is not Stalled.
fn not_stalled(app: &Value) -> Result<(), String> {
    let conditions = app.pointer("/status/conditions").and_then(Value::as_array);
    match conditions.and_then(|c| c.iter().find(|c| c["type"] == "Stalled")) {
        None if app["status"]["observedGeneration"] == app["metadata"]["generation"] => Ok(()),
        other => Err(format!("{other:?}")),
    }
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
    let before = releases_made(&env, 2).await;

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
    wait_app(&env, &controller, "no longer Stalled", CHANGE_TIMEOUT, not_stalled).await;
    assert_eq!(uids(&releases_by_pool(&env).await), uids(&before));
    env.cleanup().await;
    Ok(())
}

/// A selection that still matches a pool but drops most of them (a list
/// of names cut short) prunes none, Stalled `PruneHeld` saying how to
/// allow it; allowed by the annotation, the releases go (fourth review,
/// item 5).
#[tokio::test(flavor = "multi_thread")]
async fn a_selection_that_drops_most_pools_at_once_prunes_nothing_until_allowed() -> TestResult {
    let mut env = TestEnv::new("mass-prune").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut pools = Vec::new();
    for pool in ["a", "b", "c"] {
        pools.push(env.create_pool(pool, &[("e2e", &tag), ("region", "east")], 1).await);
    }
    let controller = RunningController::start(&env.namespace);
    let mut app = ingress_app(&env, json!({ "helmRelease": { "suspend": true } }));
    apply_app(&env, &app).await?;
    let before = releases_made(&env, 3).await;

    app["spec"]["pools"] = json!({ "names": [pools[0]] });
    apply_app(&env, &app).await?;
    let status =
        wait_app(&env, &controller, "Stalled PruneHeld", CHANGE_TIMEOUT, stalled_because("PruneHeld")).await;
    let stalled = status["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Stalled"))
        .cloned()
        .unwrap_or_default();
    let message = stalled["message"].as_str().unwrap_or_default();
    assert!(message.contains("apps.fanout.dev/allow-prune=2"), "says how to allow it: {message}");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(uids(&releases_by_pool(&env).await), uids(&before), "a release was pruned");

    app["metadata"]["annotations"] = json!({ naming::ANNOTATION_ALLOW_PRUNE: "2" });
    apply_app(&env, &app).await?;
    support::wait_for("two releases pruned", CHANGE_TIMEOUT, || async {
        let releases = releases_by_pool(&env).await;
        match releases.keys().collect::<Vec<_>>() {
            left if left == [&pools[0]] => Ok(()),
            left => Err(format!("{left:?} left")),
        }
    })
    .await;
    wait_app(&env, &controller, "no longer Stalled", CHANGE_TIMEOUT, not_stalled).await;
    env.cleanup().await;
    Ok(())
}

/// A HelmRelease of the test's namespace, by name.
async fn release(env: &TestEnv, name: &str) -> Option<Value> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    api.get_opt(name)
        .await
        .expect("get a HelmRelease")
        .and_then(|r| serde_json::to_value(r).ok())
}

/// The release stands on its own: no mark of ours, its own chart, and Flux
/// Ready on it with the Helm release it had (no upgrade, no reinstall).
fn orphaned(release: &Value, helm_revision: &Value) -> Result<(), String> {
    let m = &release["metadata"];
    let problems: Vec<&str> = [
        (m.get("ownerReferences").is_some(), "it has owner references"),
        (m["labels"].get(naming::LABEL_APPLICATION).is_some(), "it has our application label"),
        (m["annotations"].get(naming::ANNOTATION_SPEC_HASH).is_some(), "it has our spec hash"),
        (
            m["annotations"].get(orphan::ANNOTATION_ORPHANED_FROM).is_none(),
            "it does not say where it came from",
        ),
        (release["spec"].get("chartRef").is_some(), "it still points at the shared HelmChart"),
        (release.pointer("/spec/chart/spec/version").is_none(), "it has no chart of its own"),
        (
            release["status"]["observedGeneration"] != m["generation"],
            "Flux has not reconciled its latest generation",
        ),
        (
            support::condition(release, "Ready").map(|c| &c["status"]) != Some(&json!("True")),
            "it is not Ready",
        ),
        (
            release.pointer("/status/history/0/version") != Some(helm_revision),
            "Helm made a new revision",
        ),
    ]
    .into_iter()
    .filter_map(|(bad, what)| bad.then_some(what))
    .collect();
    match problems.as_slice() {
        [] => Ok(()),
        _ => Err(format!("{}: {}", problems.join(", "), release)),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn orphan_leaves_releases_running_on_their_own_and_no_application_takes_them_back() -> TestResult {
    let mut env = TestEnv::new("orphan").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let a = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let b = env.create_pool("b", &[("e2e", &tag), ("region", "east")], 1).await;
    let controller = RunningController::start(&env.namespace);
    let mut app = ingress_app(&env, json!({ "deletionPolicy": "Orphan" }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "READY 2/2", READY_TIMEOUT, ready_is("2/2")).await;
    let (name_a, name_b) = (naming::release_name("ingress", &a), naming::release_name("ingress", &b));
    let before_b = release(&env, &name_b).await.expect("pool b's release");
    let revision_b = before_b.pointer("/status/history/0/version").cloned().unwrap_or_default();
    assert!(revision_b.is_u64(), "a Helm revision: {before_b}");

    // Pool b leaves the selection: its release stays, on its own.
    app["spec"]["pools"] = json!({ "names": [a] });
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "READY 1/1", CHANGE_TIMEOUT, ready_is("1/1")).await;
    let after_b = support::wait_for("pool b's release orphaned", READY_TIMEOUT, || async {
        let r = release(&env, &name_b).await.ok_or("pool b's release is gone")?;
        orphaned(&r, &revision_b).map(|()| r)
    })
    .await;
    assert_eq!(after_b["metadata"]["uid"], before_b["metadata"]["uid"], "the same object");

    // The application deleted: its last release stays too, and its shared
    // HelmChart goes (the orphans have their own).
    let release_a = release(&env, &name_a).await.expect("pool a's release");
    let revision_a = release_a.pointer("/status/history/0/version").cloned().unwrap_or_default();
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("ingress", &DeleteParams::default()).await?;
    support::wait_for("the application gone", CHANGE_TIMEOUT, || async {
        match apps.get_opt("ingress").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    support::wait_for("pool a's release orphaned", READY_TIMEOUT, || async {
        let r = release(&env, &name_a).await.ok_or("pool a's release is gone")?;
        orphaned(&r, &revision_a)
    })
    .await;
    let charts: Api<DynamicObject> = Api::all_with(env.client.clone(), &helmchart_resource());
    let ours = format!("{}={}", shared_chart::LABEL_APPLICATION_NAMESPACE, env.namespace);
    let left = charts.list(&ListParams::default().labels(&ours)).await?.items;
    assert!(left.is_empty(), "shared HelmCharts left behind: {left:?}");

    // An application of the same name does not take them back.
    let again = ingress_app(&env, json!({ "helmRelease": { "suspend": true } }));
    apply_app(&env, &again).await?;
    let status = wait_app(&env, &controller, "both pools in conflict", CHANGE_TIMEOUT, |app| {
        let reasons: Vec<&str> = app["status"]["pools"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p["reason"].as_str()).collect())
            .unwrap_or_default();
        match reasons.as_slice() {
            ["NameConflict", "NameConflict"] => Ok(()),
            other => Err(format!("pool reasons {other:?}")),
        }
    })
    .await;
    assert_eq!(status["status"]["ready"], "0/2");
    for name in [&name_a, &name_b] {
        let r = release(&env, name).await.expect("the orphan is still there");
        assert!(r["metadata"].get("ownerReferences").is_none(), "{name} was adopted: {r}");
    }
    env.cleanup().await;
    Ok(())
}
