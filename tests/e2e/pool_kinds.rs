//! The same chart fanned out over every kind of pool, end to end: KubeEdge
//! NodeGroups, SuperEdge NodeUnits and the values of a plain node label
//! (OpenYurt's NodePools are `fanout`'s). Each kind's pods must land on
//! their own pool's nodes only, found by the label that kind puts on them.
//!
//! The local control plane runs none of the frameworks' controllers: where
//! KubeEdge's controller manager or SuperEdge's site-manager would label a
//! pool's nodes, the test labels them itself, as kwok plays the kubelet.
use crate::support;

use std::collections::BTreeMap;

use kube::api::DeleteParams;
use kube::Api;
use nodepool_fanout::api::NodePoolApplication;
use serde_json::{json, Value};
use support::apps::{
    apply_app, ingress_app, pool_status, ready_is, releases_by_pool, wait_app, wait_pools_with_releases,
    CHANGE_TIMEOUT, READY_TIMEOUT,
};
use support::{
    ensure_crd, node_of, nodegroup_resource, nodeunit_resource, running_pods, RunningController, TestEnv,
    TestResult,
};

/// A pool as the test makes it: its name, the node label its kind marks
/// its nodes with, and its region (templated into its values).
struct Site {
    pool: String,
    node_label: (String, String),
    region: &'static str,
    nodes: usize,
}

/// Fans the ingress fixture out over `sites` with `pools` as the
/// application's `spec.pools`, and checks every release: one per pool,
/// its values templated with the pool's labels, pinned by the kind's node
/// label, its pods running on that pool's nodes only. Deleting the
/// application then removes every release.
async fn fan_out(env: &TestEnv, pools: Value, sites: &[Site]) -> TestResult {
    let controller = RunningController::start(&env.namespace);
    let app = ingress_app(env, json!({ "pools": pools }));
    apply_app(env, &app).await?;
    let want = format!("{n}/{n}", n = sites.len());
    let status =
        wait_app(env, &controller, &format!("READY {want}"), READY_TIMEOUT, ready_is(want.clone())).await;
    let releases = releases_by_pool(env).await;
    let names: Vec<&String> = releases.keys().collect();
    let mut expected: Vec<&String> = sites.iter().map(|s| &s.pool).collect();
    expected.sort();
    assert_eq!(names, expected, "one HelmRelease per pool");
    for site in sites {
        let hr = &releases[&site.pool];
        let (key, value) = &site.node_label;
        assert_eq!(
            hr["spec"]["values"]["controller"]["nodeSelector"],
            json!({ key.as_str(): value }),
            "pool {} is pinned by its kind's node label",
            site.pool
        );
        assert_eq!(hr["spec"]["values"]["controller"]["config"]["region"], site.region);
        let entry = pool_status(&status, &site.pool).cloned().unwrap_or_default();
        let counted = format!("{n}/{n}", n = site.nodes);
        assert_eq!(
            entry["nodes"],
            counted.as_str(),
            "pool {}'s nodes, counted by its kind's label: {entry}",
            site.pool
        );
        let nodes = env.nodes_labelled(&format!("{key}={value}")).await;
        assert!(!nodes.is_empty(), "pool {} has nodes", site.pool);
        let release = hr["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let pods =
            running_pods(env, &format!("app.kubernetes.io/instance={release}"), 1, CHANGE_TIMEOUT).await;
        for pod in pods {
            let node = node_of(&pod);
            assert!(nodes.contains(&node), "a pod of pool {} runs on {node}, not on {nodes:?}", site.pool);
        }
    }
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("ingress", &DeleteParams::foreground()).await?;
    wait_pools_with_releases(env, &controller, &[]).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn fans_out_over_kubeedge_node_groups() -> TestResult {
    let mut env = TestEnv::new("kubeedge").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut sites = Vec::new();
    for (short, region) in [("g1", "east"), ("g2", "west")] {
        let group = env.pool_name(short);
        let node = format!("{group}-node-0");
        env.create_cluster_object(
            &nodegroup_resource(),
            json!({
                "apiVersion": "apps.kubeedge.io/v1alpha1", "kind": "NodeGroup",
                "metadata": { "name": group, "labels": { "e2e": tag, "region": region } },
                "spec": { "nodes": [node] }
            }),
        )
        .await;
        // KubeEdge's controller manager labels the group's members so.
        env.create_labelled_node(&node, &[("apps.kubeedge.io/belonging-to", &group)]).await;
        sites.push(Site {
            node_label: ("apps.kubeedge.io/belonging-to".into(), group.clone()),
            pool: group,
            region,
            nodes: 1,
        });
    }
    let result =
        fan_out(&env, json!({ "kind": "KubeEdge", "selector": { "matchLabels": { "e2e": tag } } }), &sites)
            .await;
    env.cleanup().await;
    result
}

#[tokio::test(flavor = "multi_thread")]
async fn fans_out_over_superedge_node_units() -> TestResult {
    let mut env = TestEnv::new("superedge").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut sites = Vec::new();
    for (short, region) in [("u1", "east"), ("u2", "west")] {
        let unit = env.pool_name(short);
        let node = format!("{unit}-node-0");
        env.create_cluster_object(
            &nodeunit_resource(),
            json!({
                "apiVersion": "site.superedge.io/v1alpha2", "kind": "NodeUnit",
                "metadata": { "name": unit, "labels": { "e2e": tag, "region": region } },
                "spec": { "type": "edge", "nodes": [node], "setNode": { "labels": { "site": short } } }
            }),
        )
        .await;
        // site-manager puts `<unit>: nodeunits.superedge.io` beside the
        // unit's own setNode labels on every member.
        env.create_labelled_node(&node, &[(&unit, "nodeunits.superedge.io"), ("site", short)])
            .await;
        sites.push(Site {
            node_label: (unit.clone(), "nodeunits.superedge.io".into()),
            pool: unit,
            region,
            nodes: 1,
        });
    }
    let result = fan_out(
        &env,
        json!({ "kind": "SuperEdge", "names": sites.iter().map(|s| &s.pool).collect::<Vec<_>>() }),
        &sites,
    )
    .await;
    env.cleanup().await;
    result
}

#[tokio::test(flavor = "multi_thread")]
async fn fans_out_over_the_values_of_a_node_label() -> TestResult {
    let mut env = TestEnv::new("nodelabel").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    // A label of this test's own, so that no other test's nodes are pools.
    let key = format!("sites.fanout.test/{}", tag);
    let mut sites = Vec::new();
    for (value, region, nodes) in [("zone-a", "east", 2), ("zone-b", "west", 1)] {
        for i in 0..nodes {
            let node = format!("{tag}-{value}-{i}");
            env.create_labelled_node(
                &node,
                &[
                    (&key, value),
                    ("e2e", &tag),
                    ("region", region),
                    ("slot", &i.to_string()),
                ],
            )
            .await;
        }
        sites.push(Site {
            pool: value.to_string(),
            node_label: (key.clone(), value.to_string()),
            region,
            nodes,
        });
    }
    // The selector matches labels every node of a pool carries: e2e and
    // region, not slot, which differs between zone-a's two nodes.
    let labels_shared = BTreeMap::from([("e2e", tag.as_str())]);
    let result = fan_out(
        &env,
        json!({ "kind": "NodeLabel", "nodeLabel": key, "selector": { "matchLabels": labels_shared } }),
        &sites,
    )
    .await;
    env.cleanup().await;
    result
}
