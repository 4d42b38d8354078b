//! Faults: kube-apiserver goes away for 30 seconds while pools change. The
//! controller rides it out in the same process and converges once the API
//! server is back: its watches resume, it sees what changed before and
//! after the outage, and it counts the failed requests.
//!
//! The controller runs with leader election, as deployed: a lone replica
//! keeps its Lease through the outage and renews it once it can.
//!
//! The outage would break every other test's requests, so this test has a
//! control plane of its own (`PrivateCluster`).
use std::time::Duration;

use kube::api::DeleteParams;
use kube::Api;
use serde_json::json;

use crate::private_cluster::PrivateCluster;
use crate::support::apps::{apply_app, ingress_app, ready_is, releases_by_pool, wait_app, READY_TIMEOUT};
use crate::support::{ensure_crd, nodepool_resource, TestResult};

const OUTAGE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_rides_out_an_api_server_outage_while_pools_change() -> TestResult {
    let cluster = PrivateCluster::up("apiserver-outage", 16500);
    let mut env = cluster.env("outage").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let a = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let b = env.create_pool("b", &[("e2e", &tag), ("region", "west")], 1).await;
    // As deploy/ runs it: with leader election, whose Lease cannot be
    // renewed while the API server is away.
    let flags = [
        "--leader-election=true",
        "--leader-election-namespace",
        &env.namespace,
    ];
    let mut controller = cluster.controller(&env.namespace, &flags);
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    wait_app(&env, &controller, "READY 2/2 before the outage", READY_TIMEOUT, ready_is("2/2")).await;

    // Pools change and the API server goes away at once, before the
    // controller can have finished with the change.
    let c = env.create_pool("c", &[("e2e", &tag), ("region", "north")], 1).await;
    let pools: Api<kube::api::DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    pools.delete(&b, &DeleteParams::default()).await?;
    cluster.stop("kube-apiserver");
    tokio::time::sleep(OUTAGE).await;
    assert!(
        controller.is_running(),
        "the controller exited during the outage:\n{}",
        controller.log_tail()
    );
    cluster.start("kube-apiserver");

    // A pool that appears after the outage is seen only through watches
    // that came back.
    let d = env.create_pool("d", &[("e2e", &tag), ("region", "south")], 1).await;
    wait_app(&env, &controller, "READY 3/3 after the outage", READY_TIMEOUT, ready_is("3/3")).await;
    let releases: Vec<String> = releases_by_pool(&env).await.into_keys().collect();
    let mut want = vec![a, c, d];
    want.sort();
    assert_eq!(releases, want, "exactly one release per selected pool, none for the deleted pool");
    assert!(
        controller.is_running(),
        "the controller restarted instead of recovering:\n{}",
        controller.log_tail()
    );

    // The outage shows in the API error counter, as requests that got no
    // answer at all.
    let metrics = controller.scrape().await;
    let transport_errors: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("nodepool_fanout_api_errors_total{") && l.contains(r#"code="transport""#))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        transport_errors > 0.0,
        "no API error with code=transport counted during a {OUTAGE:?} outage:\n{metrics}"
    );
    println!("{transport_errors} requests failed during the outage:");
    for line in metrics.lines().filter(|l| l.starts_with("nodepool_fanout_api_errors_total{")) {
        println!("  {line}");
    }
    env.cleanup().await;
    drop(controller);
    drop(cluster);
    Ok(())
}
