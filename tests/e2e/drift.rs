//! Drift on the local control plane: a hand edit of an owned HelmRelease is
//! put back at once, a field someone else added is left alone, and a
//! release at rest is never written, however often the application is
//! reconciled.
use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, releases_by_pool, CHANGE_TIMEOUT};
use support::{ensure_crd, helmrelease_resource, RunningController, TestEnv, TestResult};

/// Each pool's release's resourceVersion: it moves on every write.
async fn versions(env: &TestEnv) -> BTreeMap<String, String> {
    releases_by_pool(env)
        .await
        .into_iter()
        .map(|(pool, hr)| (pool, hr["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string()))
        .collect()
}

/// Reconciles every 2 s happen meanwhile (`--resync 2s`): none may write.
async fn assert_at_rest(env: &TestEnv, what: &str) {
    let before = versions(env).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(versions(env).await, before, "{what}: a release at rest was written");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hand_edit_is_put_back_and_a_release_at_rest_is_never_written() -> TestResult {
    let mut env = TestEnv::new("drift").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let a = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    env.create_pool("b", &[("e2e", &tag), ("region", "west")], 1).await;
    let controller = RunningController::start_with(&env.namespace, &["--resync", "2s"]);
    // Suspended: only this controller writes the releases, so any change
    // of their resourceVersion is ours.
    apply_app(&env, &ingress_app(&env, json!({ "helmRelease": { "suspend": true } }))).await?;
    let releases = support::wait_for("two releases", CHANGE_TIMEOUT, || async {
        match releases_by_pool(&env).await {
            r if r.len() == 2 => Ok(r),
            r => Err(format!("{} releases", r.len())),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_at_rest(&env, "after the first writes").await;

    // `kubectl edit hr`: a field we write changed, a field of its own added.
    let name = releases[&a]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let want = releases[&a]["spec"]["values"]["controller"]["ingressClass"]["name"].clone();
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let edit = json!({ "spec": { "values": {
        "controller": { "ingressClass": { "name": "edited-by-hand" } },
        "extra": "added by hand"
    } } });
    api.patch(
        &name,
        &PatchParams {
            field_manager: Some("kubectl-edit".into()),
            ..PatchParams::default()
        },
        &Patch::Merge(&edit),
    )
    .await?;
    let restored = support::wait_for("the edit put back", CHANGE_TIMEOUT, || async {
        let hr = serde_json::to_value(api.get(&name).await.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        match &hr["spec"]["values"]["controller"]["ingressClass"]["name"] {
            v if *v == want => Ok(hr),
            other => Err(format!("ingressClass.name is {other}")),
        }
    })
    .await;
    assert_eq!(
        restored["spec"]["values"]["extra"], "added by hand",
        "a field we never wrote is not ours to remove"
    );

    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.namespace);
    let drift: Vec<Value> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DriftCorrected"))
        .filter_map(|e| serde_json::to_value(e.note).ok())
        .collect();
    assert_eq!(drift.len(), 1, "one Event: {drift:?}");
    assert!(
        drift[0]
            .as_str()
            .unwrap_or_default()
            .contains("spec.values.controller.ingressClass.name"),
        "{drift:?}"
    );

    // Put back once, then at rest again: no write loop with the other manager.
    assert_at_rest(&env, "after the correction").await;
    drop(controller);
    env.cleanup().await;
    Ok(())
}

/// Our entries in a release's managed fields, as `manager/operation`.
fn our_entries(release: &Value) -> Vec<String> {
    release["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == "nodepool-fanout")
        .map(|e| format!("nodepool-fanout/{}", e["operation"].as_str().unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_value_dropped_from_the_application_leaves_a_release_it_created() -> TestResult {
    let mut env = TestEnv::new("dropped").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let a = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let controller = RunningController::start(&env.namespace);
    let values = |tier: Option<&str>| {
        let mut config = json!({ "region": "{{pool.labels.region}}" });
        if let Some(tier) = tier {
            config["tier"] = json!(tier);
        }
        json!({
            "helmRelease": { "suspend": true },
            "values": { "controller": {
                "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" },
                "config": config
            }}
        })
    };
    apply_app(&env, &ingress_app(&env, values(Some("gold")))).await?;
    let created = support::wait_for("the release", CHANGE_TIMEOUT, || async {
        let releases = releases_by_pool(&env).await;
        releases.get(&a).cloned().ok_or_else(|| format!("{releases:?}"))
    })
    .await;
    assert_eq!(created["spec"]["values"]["controller"]["config"]["tier"], "gold");
    // Created by POST: the create's fields are an Update of ours.
    assert_eq!(our_entries(&created), ["nodepool-fanout/Update"], "{created}");

    apply_app(&env, &ingress_app(&env, values(None))).await?;
    let changed = support::wait_for("the value gone from the release", CHANGE_TIMEOUT, || async {
        let release = releases_by_pool(&env).await.remove(&a).unwrap_or_default();
        match &release["spec"]["values"]["controller"]["config"] {
            config if config.get("tier").is_none() && config["region"] == "east" => Ok(release),
            config => Err(config.to_string()),
        }
    })
    .await;
    // The create's record was folded into our apply's, not left beside it.
    assert_eq!(our_entries(&changed), ["nodepool-fanout/Apply"], "{changed}");
    drop(controller);
    env.cleanup().await;
    Ok(())
}
