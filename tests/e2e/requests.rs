//! `kubectl annotate` works on an application as `flux reconcile` does on
//! a Flux object: `reconcile.fluxcd.io/requestedAt` reconciles it at once
//! and is recorded in `status.lastHandledReconcileAt`, and the request
//! (with `forceAt`, a forced Helm upgrade) is passed on to every release,
//! where helm-controller handles it: one command re-runs Helm on the fleet.
use crate::support;

use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, ready_is, releases_by_pool, wait_app, READY_TIMEOUT};
use support::{ensure_crd, kubectl, wait_for, RunningController, TestEnv, TestResult};

#[tokio::test(flavor = "multi_thread")]
async fn an_annotation_reconciles_now_and_forces_helm_on_every_pool() -> TestResult {
    let mut env = TestEnv::new("requests").await;
    ensure_crd(&env.client).await;
    env.create_region_pools(&["east", "west"]).await;
    let controller = RunningController::start(&env.namespace);
    let result = async {
        apply_app(&env, &ingress_app(&env, json!({}))).await?;
        wait_app(&env, &controller, "READY 2/2", READY_TIMEOUT, ready_is("2/2")).await;
        let token =
            format!("{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs());
        // What `flux reconcile helmrelease --force` does to one release, on
        // the application.
        kubectl(&[
            "annotate",
            "npa",
            "ingress",
            "-n",
            &env.namespace,
            "--overwrite",
            &format!("reconcile.fluxcd.io/requestedAt={token}"),
            &format!("reconcile.fluxcd.io/forceAt={token}"),
        ]);
        let handled = token.clone();
        wait_app(&env, &controller, "the request handled", READY_TIMEOUT, move |app| {
            match (
                app.pointer("/status/lastHandledReconcileAt").and_then(Value::as_str),
                app.pointer("/status/lastHandledForceAt").and_then(Value::as_str),
                app.pointer("/status/ready").and_then(Value::as_str),
            ) {
                (Some(r), Some(f), Some("2/2")) if r == handled && f == handled => Ok(()),
                other => Err(format!("lastHandledReconcileAt, lastHandledForceAt, ready: {other:?}")),
            }
        })
        .await;
        // helm-controller got the request on every release, and forced an
        // upgrade of each: a second Helm revision with nothing changed.
        wait_for("helm-controller to handle the request on every release", READY_TIMEOUT, || async {
            let releases = releases_by_pool(&env).await;
            let pending: Vec<String> = releases
                .iter()
                .filter(|(_, hr)| {
                    let annotations = &hr["metadata"]["annotations"];
                    let status = &hr["status"];
                    !(annotations["reconcile.fluxcd.io/requestedAt"] == token.as_str()
                        && annotations["reconcile.fluxcd.io/forceAt"] == token.as_str()
                        && status["lastHandledForceAt"] == token.as_str()
                        && status["history"][0]["version"].as_i64() >= Some(2))
                })
                .map(|(pool, hr)| {
                    format!("{pool}: {} {}", hr["metadata"]["annotations"], hr["status"]["history"][0])
                })
                .collect();
            match (releases.len(), pending.is_empty()) {
                (2, true) => Ok(()),
                _ => Err(format!("{} releases; not yet handled: {pending:?}", releases.len())),
            }
        })
        .await;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}
