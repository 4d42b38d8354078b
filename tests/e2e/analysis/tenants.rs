//! One application's checks never hold another's: a webhook gate that
//! takes each POST and never answers (an address that drops packets, as
//! the query's timeout sees it) while another application's change is
//! written. The controller runs one reconcile at a time
//! (`--concurrent=1`), and its workers are shared by every namespace
//! alike: asked inside the reconcile, the gate held that one worker for
//! the query's whole timeout, and the other change waited for it (fourth
//! review, item 6).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncReadExt;

use super::{hashes, with_log_level};
use crate::support;
use support::apps::{apply_app, complete, ingress_app, wait_app, READY_TIMEOUT};
use support::{ensure_crd, RunningController, TestEnv, TestResult};

/// A gate that accepts each connection, reads the request, and never
/// answers: it counts the connections taken and those the asker gave up.
struct HangingGate {
    url: String,
    taken: Arc<AtomicUsize>,
    given_up: Arc<AtomicUsize>,
    server: tokio::task::JoinHandle<()>,
}

impl HangingGate {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}/gate", listener.local_addr().expect("its address"));
        let (taken, given_up) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (counted, ended) = (taken.clone(), given_up.clone());
        let server = tokio::spawn(async move {
            while let Ok((mut connection, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let ended = ended.clone();
                tokio::spawn(async move {
                    let mut buffer = [0u8; 4096];
                    // Read until the asker closes the connection: no answer.
                    while matches!(connection.read(&mut buffer).await, Ok(n) if n > 0) {}
                    ended.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            url,
            taken,
            given_up,
            server,
        }
    }
}

impl Drop for HangingGate {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_applications_change_is_written_while_one_applications_gate_hangs() -> TestResult {
    let mut env = TestEnv::new("tenants").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let pool = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let controller = RunningController::start_with(&env.namespace, &["--concurrent=1"]);
    let mut other = ingress_app(&env, json!({}));
    apply_app(&env, &other).await?;
    wait_app(&env, &controller, "the other application installed", READY_TIMEOUT, complete(1)).await;
    let before = hashes(&env).await;

    // The gated application's first rollout waits for its PreRollout
    // gate, which never answers: it asks again each time the query's
    // timeout ends.
    let gate = HangingGate::start().await;
    let mut gated = ingress_app(
        &env,
        json!({ "rollout": {
            "strategy": "Progressive",
            "analysis": { "webhooks": [{ "name": "change-freeze", "type": "PreRollout", "url": &gate.url }] },
        }}),
    );
    gated["metadata"]["name"] = json!("gated");
    apply_app(&env, &gated).await?;
    support::wait_for("the gate to be asked", Duration::from_secs(60), || {
        let taken = gate.taken.load(Ordering::SeqCst);
        async move {
            match taken {
                0 => Err("not asked yet".to_string()),
                _ => Ok(()),
            }
        }
    })
    .await;
    let given_up_before = gate.given_up.load(Ordering::SeqCst);

    // The other application's change is written while the gate's POST
    // is still unanswered: before the asker gives that POST up.
    with_log_level(&mut other, "debug");
    apply_app(&env, &other).await?;
    support::wait_for("the other change written", Duration::from_secs(60), || {
        let env = &env;
        let before = &before;
        let pool = &pool;
        async move {
            match hashes(env).await.get(pool) {
                Some(hash) if Some(hash) != before.get(pool) => Ok(()),
                other => Err(format!("{pool}'s release still at {other:?}")),
            }
        }
    })
    .await;
    let given_up = gate.given_up.load(Ordering::SeqCst);
    assert_eq!(
        given_up,
        given_up_before,
        "the other change waited until the gate's POST was given up ({} POST(s) taken)",
        gate.taken.load(Ordering::SeqCst)
    );
    env.cleanup().await;
    Ok(())
}
