//! Two replicas with leader election: one reconciles, the other stands by;
//! when the leader is killed, the standby takes the Lease and goes on.
use crate::support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde_json::json;
use support::apps::{apply_app, ingress_app, ready_is, wait_app, wait_pools_with_releases, READY_TIMEOUT};
use support::{ensure_crd, wait_for, RunningController, TestEnv, TestResult};

async fn holder(env: &TestEnv) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    leases.get_opt("nodepool-fanout").await.ok()??.spec?.holder_identity
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standby_replica_takes_over_when_the_leader_is_killed() -> TestResult {
    let mut env = TestEnv::new("leader").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let a = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let flags = [
        "--leader-election=true",
        "--leader-election-namespace",
        env.namespace.as_str(),
    ];
    let mut first = RunningController::start_env(&env.namespace, &flags, &[("POD_NAME", "replica-1")]);
    wait_for("replica-1 to lead", Duration::from_secs(30), || async {
        holder(&env).await.filter(|h| h == "replica-1").ok_or("no holder yet".to_string())
    })
    .await;
    let second = RunningController::start_env(&env.namespace, &flags, &[("POD_NAME", "replica-2")]);
    apply_app(&env, &ingress_app(&env, json!({ "helmRelease": { "install": { "disableWait": true } } })))
        .await?;
    wait_app(&env, &first, "READY 1/1 from the leader", READY_TIMEOUT, ready_is("1/1")).await;

    first.kill();
    let b = env.create_pool("b", &[("e2e", &tag), ("region", "west")], 1).await;
    // The lease lasts 15 s; the standby must then pick the work up.
    wait_for("replica-2 to lead", Duration::from_secs(60), || async {
        holder(&env)
            .await
            .filter(|h| h == "replica-2")
            .ok_or("replica-2 does not lead".to_string())
    })
    .await;
    wait_pools_with_releases(&env, &second, &[&a, &b]).await;
    wait_app(&env, &second, "READY 2/2 from the new leader", READY_TIMEOUT, ready_is("2/2")).await;
    env.cleanup().await;
    Ok(())
}
