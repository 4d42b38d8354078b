//! Proves the local control plane is real: Flux's helm-controller installs a
//! fixture chart from the loopback chart repository, the scheduler places
//! its pods on one pool's kwok nodes and kwok runs them.
use crate::support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::Api;
use serde_json::json;
use support::{condition, helmrelease_resource, wait_for, TestEnv, TestResult, POOL_LABEL};

#[tokio::test(flavor = "multi_thread")]
async fn flux_installs_a_fixture_chart_onto_one_pools_kwok_nodes() -> TestResult {
    let mut env = TestEnv::new("smoke").await;
    let east = env.create_pool("east", &[("region", "east")], 2).await;
    let west = env.create_pool("west", &[("region", "west")], 1).await;
    let east_nodes = env.nodes_of(&east).await;
    assert_eq!(east_nodes.len(), 2, "pool {east} should have two nodes");

    let release_name = format!("{}-gw", env.prefix);
    let release: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": { "name": "gateway", "namespace": env.namespace },
        "spec": {
            "interval": "5m",
            "releaseName": release_name,
            "chart": { "spec": {
                "chart": "ingress-gateway",
                "version": "1.0.0",
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" }
            }},
            "values": { "controller": {
                "replicas": 3,
                "nodeSelector": { POOL_LABEL: east },
                "ingressClass": { "name": release_name }
            }}
        }
    }))?;
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    releases.create(&PostParams::default(), &release).await?;

    let status = wait_for("the HelmRelease to be Ready", Duration::from_secs(240), || {
        let releases = releases.clone();
        async move {
            let hr = releases.get("gateway").await.map_err(|e| e.to_string())?;
            let value = serde_json::to_value(&hr).map_err(|e| e.to_string())?;
            let generation = value.pointer("/metadata/generation").cloned();
            let observed = value.pointer("/status/observedGeneration").cloned();
            match condition(&value, "Ready") {
                Some(c) if c["status"] == "True" && generation == observed => Ok(value.clone()),
                other => Err(format!("Ready condition {other:?}")),
            }
        }
    })
    .await;
    assert_eq!(
        status.pointer("/status/lastAttemptedRevision").and_then(|v| v.as_str()),
        Some("1.0.0"),
        "the release should be of chart version 1.0.0"
    );

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.namespace);
    let selector = format!("app.kubernetes.io/instance={release_name}");
    let running = wait_for("three Running pods", Duration::from_secs(120), || {
        let pods = pods.clone();
        let selector = selector.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| e.to_string())?;
            let phases: Vec<_> = list
                .items
                .iter()
                .map(|p| p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default())
                .collect();
            if list.items.len() == 3 && phases.iter().all(|p| p == "Running") {
                Ok(list.items)
            } else {
                Err(format!("pod phases {phases:?}"))
            }
        }
    })
    .await;
    for pod in &running {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        assert!(
            east_nodes.contains(&node),
            "pod {:?} runs on {node:?}, not on a node of pool {east} ({east_nodes:?}); pool {west} must stay empty",
            pod.metadata.name
        );
    }

    env.cleanup().await;
    Ok(())
}
