//! A pool Flux only waits on takes its turn (fourth review, item 11): its
//! old chart's source is made not Ready while the next wave awaits
//! approval, so helm-controller reports `SourceNotReady` for its release.
//! Its workload runs as before: the rollout writes nothing to it ahead of
//! the approval, and counts nothing failed. Approved, it goes on.
//!
//! The source is made not Ready by stopping source-controller and editing
//! the HelmChart (its generation then runs ahead of what source-controller
//! observed), which would stall every other test's charts: so this test
//! has a control plane of its own (`PrivateCluster`).
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use nodepool_fanout::api::naming;
use nodepool_fanout::chart::source::helmchart_resource;
use nodepool_fanout::reconcile::observe::helmrelease_resource;

use crate::private_cluster::PrivateCluster;
use crate::support::apps::{apply_app, complete, ingress_app, releases_by_pool, wait_app, READY_TIMEOUT};
use crate::support::{ensure_crd, TestResult};

/// How long the test watches the rollout while the source is not Ready.
const WATCH_WHILE_WAITING: Duration = Duration::from_secs(20);

fn awaiting_east(app: &Value) -> Result<(), String> {
    let rollout = &app["status"]["rollout"];
    let seen = (rollout["phase"].as_str(), rollout["awaitingStep"].as_str(), rollout["failed"].as_i64());
    match seen {
        (Some("AwaitingApproval"), Some("east"), None | Some(0)) => Ok(()),
        other => Err(format!("rollout {other:?}: {}", rollout["message"])),
    }
}

fn spec_hash(release: &Value) -> String {
    release["metadata"]["annotations"][naming::ANNOTATION_SPEC_HASH]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_whose_old_source_is_not_ready_waits_for_its_waves_approval_and_nothing_fails() -> TestResult {
    let cluster = PrivateCluster::up("source-outage", 16560);
    let mut env = cluster.env("srcdown").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let a = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let b = env.create_pool("b", &[("e2e", &tag), ("region", "east")], 1).await;
    let controller = cluster.controller(&env.namespace, &[]);
    let steps = json!([
        { "name": "canary", "pools": { "names": [a] } },
        { "name": "east", "pools": { "names": [b] }, "requireApproval": true }
    ]);
    let mut app = ingress_app(&env, json!({ "rollout": { "strategy": "Progressive", "steps": steps } }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "1.0.0 on both pools", READY_TIMEOUT, complete(2)).await;

    // R2 takes the chart to 1.1.0, a HelmChart of its own: b's release
    // still points at 1.0.0's, which is made not Ready below, and the
    // chart the rollout writes stays Ready.
    app["spec"]["chart"]["spec"]["version"] = json!("1.1.0");
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the canary on 1.1.0, east awaiting", READY_TIMEOUT, awaiting_east).await;
    let before = releases_by_pool(&env).await;
    let old_chart = before[&b]["spec"]["chartRef"]["name"].as_str().unwrap_or_default().to_string();
    let old_chart_namespace = before[&b]["spec"]["chartRef"]["namespace"].as_str().unwrap_or("flux-system");
    let charts: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), old_chart_namespace, &helmchart_resource());
    assert_ne!(old_chart, "", "b's release names its chart: {}", before[&b]["spec"]);

    cluster.stop("source-controller");
    let edit = json!({ "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmChart",
        "spec": { "interval": "11m" } });
    let by_hand = PatchParams::apply("e2e-hand-edit").force();
    charts.patch(&old_chart, &by_hand, &Patch::Apply(&edit)).await?;
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let name = before[&b]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let requested = json!({ "metadata": { "annotations": {
        "reconcile.fluxcd.io/requestedAt": k8s_openapi::jiff::Timestamp::now().to_string() } } });
    releases.patch(&name, &PatchParams::default(), &Patch::Merge(&requested)).await?;

    // helm-controller says it waits on the source.
    let deadline = Instant::now() + Duration::from_secs(60);
    let waiting = loop {
        let release = releases.get(&name).await?;
        let conditions = release.data["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let ready = conditions.into_iter().find(|c| c["type"] == "Ready");
        if ready
            .as_ref()
            .is_some_and(|c| c["status"] == "False" && c["reason"] == "SourceNotReady")
        {
            break ready;
        }
        assert!(Instant::now() < deadline, "b's release never read SourceNotReady: {ready:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    // And the rollout waits for the approval all along: b is not written,
    // nothing has failed.
    let until = Instant::now() + WATCH_WHILE_WAITING;
    while Instant::now() < until {
        wait_app(&env, &controller, "east still awaiting", Duration::from_secs(5), awaiting_east).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let during = releases_by_pool(&env).await;
    assert_eq!(
        spec_hash(&during[&b]),
        spec_hash(&before[&b]),
        "b was written ahead of its approval: {waiting:?}"
    );
    let app_now = wait_app(&env, &controller, "east awaiting", Duration::from_secs(5), awaiting_east).await;
    let stalled = app_now["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Stalled");
    assert!(stalled.is_none(), "the application is Stalled: {stalled:?}");

    // Approved, with the source back, east goes on.
    cluster.start("source-controller");
    let approve = nodepool_fanout::cli::approve::ApproveArgs {
        name: "ingress".into(),
        namespace: Some(env.namespace.clone()),
        step: None,
    };
    nodepool_fanout::cli::approve::approve(&env.client, &approve).await?;
    wait_app(&env, &controller, "1.1.0 on both pools", READY_TIMEOUT, complete(2)).await;
    let after = releases_by_pool(&env).await;
    assert_ne!(spec_hash(&after[&b]), spec_hash(&before[&b]), "b took 1.1.0 once approved");
    env.cleanup().await;
    drop(controller);
    drop(cluster);
    Ok(())
}
