//! An application whose kind of pool the cluster does not serve: it stalls
//! with a condition naming the CRD to install, nothing is written, and
//! once the CRD is installed the controller restarts to watch the new kind
//! (as a Deployment's pod would be restarted) and fans out. On a control
//! plane of its own, since it deletes a CRD the other tests use.
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::Api;
use serde_json::json;

use crate::private_cluster::PrivateCluster;
use crate::support::apps::{
    apply_app, ingress_app, ready_is, releases_by_pool, stalled_because, wait_app, READY_TIMEOUT,
};
use crate::support::{condition, ensure_crd, nodeunit_resource, wait_for, TestResult};

const NODEUNIT_CRD: &str = "nodeunits.site.superedge.io";

#[tokio::test(flavor = "multi_thread")]
async fn a_kind_the_cluster_does_not_serve_stalls_until_its_crd_is_installed() -> TestResult {
    let cluster = PrivateCluster::up("pool-api-missing", 16540);
    let mut env = cluster.env("apimissing").await;
    ensure_crd(&env.client).await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let saved = crds.get(NODEUNIT_CRD).await?;
    crds.delete(NODEUNIT_CRD, &DeleteParams::default()).await?;
    wait_for("the NodeUnit CRD to be gone", Duration::from_secs(60), || {
        let crds = crds.clone();
        async move {
            match crds.get_opt(NODEUNIT_CRD).await {
                Ok(None) => Ok(()),
                other => Err(format!("still there: {:?}", other.map(|c| c.is_some()))),
            }
        }
    })
    .await;

    let tag = env.prefix.clone();
    let unit = env.pool_name("u1");
    let node = format!("{unit}-node-0");
    env.create_labelled_node(&node, &[(&unit, "nodeunits.superedge.io")]).await;
    let mut controller = cluster.controller(&env.namespace, &[]);
    let app = ingress_app(&env, json!({ "pools": { "kind": "SuperEdge", "names": [unit] } }));
    apply_app(&env, &app).await?;
    let status = wait_app(
        &env,
        &controller,
        "Stalled: PoolApiMissing",
        READY_TIMEOUT,
        stalled_because("PoolApiMissing"),
    )
    .await;
    let message = condition(&status, "Stalled").and_then(|c| c["message"].as_str()).unwrap_or_default();
    assert!(
        message.contains(NODEUNIT_CRD) && message.contains("SuperEdge"),
        "the condition names the CRD to install: {message}"
    );
    assert!(releases_by_pool(&env).await.is_empty(), "nothing is written");

    // The CRD is installed, and a unit made: the controller notices within
    // its poll and stops so that its restart watches NodeUnits.
    let crd = CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(NODEUNIT_CRD.into()),
            ..ObjectMeta::default()
        },
        spec: saved.spec,
        status: None,
    };
    crds.create(&PostParams::default(), &crd).await?;
    wait_for("the NodeUnit CRD to be served", Duration::from_secs(60), || {
        let client = env.client.clone();
        async move {
            let units: Api<kube::api::DynamicObject> = Api::all_with(client, &nodeunit_resource());
            units.list(&Default::default()).await.map(|_| ()).map_err(|e| e.to_string())
        }
    })
    .await;
    env.create_cluster_object(
        &nodeunit_resource(),
        json!({
            "apiVersion": "site.superedge.io/v1alpha2", "kind": "NodeUnit",
            "metadata": { "name": unit, "labels": { "e2e": tag, "region": "east" } },
            "spec": { "type": "edge", "nodes": [node] }
        }),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while controller.is_running() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        !controller.is_running(),
        "the controller did not restart for the new kind within 90 s:\n{}",
        controller.log_tail()
    );
    assert!(
        controller.log_tail().contains("the cluster now serves NodeUnits"),
        "it says why it stopped:\n{}",
        controller.log_tail()
    );
    let controller = cluster.controller(&env.namespace, &[]);
    wait_app(&env, &controller, "READY 1/1 once NodeUnits are served", READY_TIMEOUT, ready_is("1/1")).await;
    assert_eq!(releases_by_pool(&env).await.into_keys().collect::<Vec<_>>(), [unit]);
    env.cleanup().await;
    Ok(())
}
