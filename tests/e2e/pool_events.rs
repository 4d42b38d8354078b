//! NodePool events on the local control plane: status churn (OpenYurt
//! rewrites a pool's status whenever a node's readiness changes) wakes no
//! application, nor does a change to a pool outside an application's
//! selection, nor a node's heartbeat, a node label that names no pool or a
//! node joining a pool the application does not select; a pool entering
//! the selection does, and so does a node joining a selected pool.
use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::Api;
use serde_json::json;
use support::apps::{apply_app, ingress_app, pool_status, ready_is, wait_app, CHANGE_TIMEOUT};
use support::{ensure_crd, nodepool_resource, RunningController, TestEnv, TestResult};

/// No reconcile for this long: the controller is at rest.
const QUIET: Duration = Duration::from_secs(3);
/// How long nothing must happen before the first count is taken.
const SETTLE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn only_changes_planning_reads_wake_only_the_applications_they_concern() -> TestResult {
    let mut env = TestEnv::new("poolevents").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let east = env.create_pool("east", &[("e2e", &tag), ("region", "east")], 1).await;
    let west = env.create_pool("west", &[("e2e", &tag), ("region", "west")], 1).await;
    // Resync far away: every reconcile counted below has a cause.
    let controller = RunningController::start_with(&env.namespace, &["--resync", "1h"]);
    let selector = json!({ "matchLabels": { "e2e": tag, "region": "east" } });
    let app =
        ingress_app(&env, json!({ "pools": { "selector": selector }, "helmRelease": { "suspend": true } }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "READY 0/1", CHANGE_TIMEOUT, ready_is("0/1")).await;
    // Settled: the first install's own echoes (helm-controller's finalizer
    // on the new release, the new nodes' first heartbeats) can come some
    // seconds apart on a busy machine, and would be counted against the
    // changes below.
    let before = controller.quiet(SETTLE).await;
    assert!(before > 0, "the controller reports its reconciles");

    let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    let params = PatchParams::default();
    // Status churn on the selected pool.
    for ready in [0, 1, 0] {
        let status = json!({ "status": { "readyNodeNum": ready, "unreadyNodeNum": 1 - ready } });
        pools.patch_status(&east, &params, &Patch::Merge(&status)).await?;
    }
    // A label change on a pool the application does not select.
    pools
        .patch(&west, &params, &Patch::Merge(&json!({ "metadata": { "labels": { "tier": "gold" } } })))
        .await?;
    // A node's label that names no pool, and a node joining a pool the
    // application does not select.
    let east_node = env.nodes_of(&east).await.remove(0);
    let nodes: Api<Node> = Api::all(env.client.clone());
    nodes
        .patch(
            &east_node,
            &params,
            &Patch::Merge(&json!({ "metadata": { "labels": { "disk": "ssd" } } })),
        )
        .await?;
    env.create_node(&format!("{west}-node-late"), &west).await;
    assert_eq!(
        controller.quiet(QUIET).await,
        before,
        "status churn, a foreign pool or its node, or a node label naming no pool woke the application"
    );

    // A node joining the selected pool does.
    env.create_node(&format!("{east}-node-late"), &east).await;
    wait_app(&env, &controller, "the new node counted", CHANGE_TIMEOUT, |app| {
        match pool_status(app, &east).and_then(|p| p["nodes"].as_str()) {
            Some("2/2") => Ok(()),
            other => Err(format!("nodes {other:?}")),
        }
    })
    .await;
    let before = controller.quiet(QUIET).await;

    // The other pool enters the selection: the application looks again.
    pools
        .patch(&west, &params, &Patch::Merge(&json!({ "metadata": { "labels": { "region": "east" } } })))
        .await?;
    wait_app(&env, &controller, "READY 0/2", CHANGE_TIMEOUT, ready_is("0/2")).await;
    assert!(controller.quiet(QUIET).await > before);
    env.cleanup().await;
    Ok(())
}
