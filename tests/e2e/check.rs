//! The invariant checker (`nodepool-fanout-check`) on the local control
//! plane: it watches a progressive rollout by the real controller and
//! helm-controller and finds nothing to say of it, then catches a
//! HelmRelease no application owns written under our field manager.

use crate::support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::Api;
use serde_json::json;
use support::apps::{apply_app, complete, ingress_app, wait_app};
use support::{ensure_crd, helmrelease_resource, wait_for, RunningController, TestEnv, TestResult};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The checker's own end, should the test never interrupt it.
const WATCH: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread")]
async fn the_checker_passes_a_progressive_rollout_and_catches_a_foreign_release_written_as_ours() -> TestResult
{
    let mut env = TestEnv::new("check").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    for short in ["a", "b", "c"] {
        env.create_pool(short, &[("e2e", &tag), ("region", "east")], 1).await;
    }
    let checker = tokio::process::Command::new(env!("CARGO_BIN_EXE_nodepool-fanout-check"))
        .args([
            "--namespace",
            &env.namespace,
            "--duration",
            &format!("{}s", WATCH.as_secs()),
        ])
        .env("KUBECONFIG", support::kubeconfig())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut checker = checker;
    let printed = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut lines = BufReader::new(checker.stdout.take().expect("the checker's stdout")).lines();
    let reader = {
        let printed = Arc::clone(&printed);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                printed.lock().expect("lines").push(line);
            }
        })
    };
    let controller = RunningController::start(&env.namespace);
    let started = std::time::Instant::now();
    // Each pool soaks a while before the next is written: the checker
    // counts a soaking pool as down, so a controller that wrote the next
    // pool early would be named.
    let rollout = json!({ "strategy": "Progressive", "maxUnavailable": 1, "minReadySeconds": 5 });
    let mut app = ingress_app(&env, json!({ "rollout": rollout }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "installed", Duration::from_secs(180), complete(3)).await;
    app["spec"]["values"]["controller"]["config"]["log-level"] = json!("debug");
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the change rolled out", Duration::from_secs(180), complete(3)).await;

    // A HelmRelease of no application, written under our field manager:
    // what a controller that touches what it does not own would leave.
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let foreign = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": "someone-elses" },
        "spec": { "suspend": true, "interval": "10m",
            "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0",
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } } }
    });
    releases
        .patch("someone-elses", &PatchParams::apply("nodepool-fanout").force(), &Patch::Apply(&foreign))
        .await?;

    wait_for("the checker to name the foreign release", Duration::from_secs(60), || {
        let printed = Arc::clone(&printed);
        async move {
            let printed = printed.lock().expect("lines").join("\n");
            match printed.contains("someone-elses") {
                true => Ok(()),
                false => Err(printed),
            }
        }
    })
    .await;
    // Interrupted, it prints what it judged and exits 1 for the violation.
    let pid = checker.id().expect("the checker runs").to_string();
    let interrupted = std::process::Command::new("kill").args(["-INT", &pid]).status()?;
    assert!(interrupted.success());
    let status = checker.wait().await?;
    reader.await?;
    assert!(started.elapsed() < WATCH, "interrupted before its own end");
    let stdout = printed.lock().expect("lines").join("\n");
    assert_eq!(status.code(), Some(1), "a violation found: {stdout}");
    let violations: Vec<&str> = stdout.lines().filter(|l| l.starts_with("VIOLATION")).collect();
    assert_eq!(violations.len(), 1, "{stdout}");
    assert!(
        violations[0].starts_with("VIOLATION ownership (docs/isolation.md#bad-input-and-ownership)")
            && violations[0].contains("someone-elses"),
        "{stdout}"
    );
    // Every invariant was judged, over the rollout's records.
    for invariant in ["maxUnavailable", "a halt holds", "isolation", "ownership"] {
        let row = stdout.lines().find(|l| l.starts_with(invariant)).unwrap_or_default();
        let checks: u64 = row.split_whitespace().rev().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(checks > 10, "{invariant} judged {checks} times: {stdout}");
    }
    drop(controller);
    env.cleanup().await;
    Ok(())
}
