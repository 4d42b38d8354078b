//! Notifications through Flux's notification-controller: the controller,
//! given the plane's event server (`--events-addr`), sends the Events it
//! records there, and a Flux `Alert` with a `generic` Provider routes them
//! to a webhook, here one the test serves. The halt of a broken rollout
//! arrives as an `error` with the rollout's revision, and its fix as an
//! `info` RolloutComplete of the next revision.
use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::Api;
use serde_json::{json, Value};
use support::apps::{apply_app, complete, ingress_app, releases_by_pool, stalled_because, wait_app};
use support::gitops::service_address;
use support::{ensure_crd, wait_for, RunningController, TestEnv, TestResult};

/// Each step is one or two Helm upgrades of one pool.
const STEP_TIMEOUT: Duration = Duration::from_secs(120);
/// From an Event to the webhook: the controller's queue, then
/// notification-controller's dispatch.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// One POST the webhook received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    /// The `Gotk-Component` header: who sent the event.
    pub component: Option<String>,
    pub body: Value,
}

/// A webhook on the loopback, where notification-controller (also on the
/// loopback) POSTs what an Alert selects.
pub(crate) struct Webhook {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Webhook {
    pub async fn start() -> Self {
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let kept = received.clone();
        let record = move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let component = headers.get("gotk-component").and_then(|v| v.to_str().ok()).map(str::to_string);
            let body = serde_json::from_slice(&body).unwrap_or_else(
                |e| json!({ "unreadable": e.to_string(), "raw": String::from_utf8_lossy(&body) }),
            );
            kept.lock().expect("webhook log").push(Received { component, body });
            async { axum::http::StatusCode::OK }
        };
        let app = axum::Router::new().fallback(axum::routing::post(record));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}/", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Webhook { url, received }
    }

    fn all(&self) -> Vec<Received> {
        self.received.lock().expect("webhook log").clone()
    }

    /// Waits for the first event about `name` in `namespace` that `pick`
    /// accepts.
    pub async fn wait(
        &self,
        what: &str,
        namespace: &str,
        name: &str,
        pick: impl Fn(&Value) -> bool,
    ) -> Received {
        wait_for(what, DELIVERY_TIMEOUT, || async {
            let all = self.all();
            let about = |r: &&Received| {
                let object = &r.body["involvedObject"];
                object["namespace"] == namespace && object["name"] == name
            };
            match all.iter().filter(about).find(|r| pick(&r.body)) {
                Some(found) => Ok(found.clone()),
                None => {
                    let reasons: Vec<&Value> = all.iter().filter(about).map(|r| &r.body["reason"]).collect();
                    Err(format!("received the reasons {reasons:?}"))
                }
            }
        })
        .await
    }
}

fn notification_resource(kind: &str) -> ApiResource {
    ApiResource {
        group: "notification.toolkit.fluxcd.io".into(),
        version: "v1beta3".into(),
        api_version: "notification.toolkit.fluxcd.io/v1beta3".into(),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

/// A generic Provider for the webhook, and an Alert sending it every event
/// of every application of the namespace.
async fn route_to(env: &TestEnv, webhook: &Webhook) -> TestResult {
    let objects = [
        ("Provider", json!({ "spec": { "type": "generic", "address": webhook.url } })),
        (
            "Alert",
            json!({ "spec": {
                "providerRef": { "name": "webhook" },
                "eventSeverity": "info",
                "eventSources": [{ "kind": "NodePoolApplication", "name": "*" }]
            } }),
        ),
    ];
    for (kind, mut object) in objects {
        let resource = notification_resource(kind);
        object["apiVersion"] = json!(resource.api_version);
        object["kind"] = json!(kind);
        object["metadata"] = json!({ "name": if kind == "Alert" { "fanout" } else { "webhook" } });
        let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &env.namespace, &resource);
        api.create(&PostParams::default(), &serde_json::from_value(object)?).await?;
    }
    Ok(())
}

/// Waits until notification-controller routes events of the namespace's
/// applications to the webhook. Since Flux v2.9 Alerts and Providers are
/// static (no controller marks them Ready): the event server looks the
/// Alerts up in its cache for each event, and discards an event for which
/// it finds none. So a probe event, each with a new message (the event
/// server drops a repeat within 5 min as a duplicate), is sent until one
/// arrives.
async fn wait_for_route(env: &TestEnv, webhook: &Webhook, events_addr: &str) {
    let http = reqwest::Client::new();
    let sent = std::sync::atomic::AtomicUsize::new(0);
    wait_for("notification-controller to route a probe event", Duration::from_secs(60), || async {
        let n = sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = json!({
            "involvedObject": {
                "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
                "namespace": env.namespace, "name": "probe"
            },
            "severity": "info",
            "timestamp": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            "message": format!("probe {n}"),
            "reason": "Probe",
            "reportingController": "notifications-test"
        });
        let answer = http.post(events_addr).body(probe.to_string()).send().await;
        let status = answer.map(|a| a.status().as_u16()).map_err(|e| e.to_string());
        let arrived = webhook.all().iter().any(|r| r.body["involvedObject"]["name"] == "probe");
        match arrived {
            true => Ok(()),
            false => Err(format!("the event server answered the last probe with {status:?}")),
        }
    })
    .await;
}

pub(crate) fn revision(app: &Value) -> String {
    let revision = app.pointer("/status/rollout/revision").and_then(Value::as_str);
    revision.expect("the application has a rollout revision").to_string()
}

/// A test's world where notifications are routed: a namespace whose
/// applications' events an Alert sends to a webhook, a pool of one node
/// in region east for each of `shorts`, and the controller sending its
/// Events to the plane's event server.
pub(crate) struct Routed {
    pub env: TestEnv,
    pub webhook: Webhook,
    pub pools: Vec<String>,
    pub controller: RunningController,
}

pub(crate) async fn routed(
    test: &str,
    shorts: &[&str],
) -> Result<Routed, Box<dyn std::error::Error + Send + Sync>> {
    let mut env = TestEnv::new(test).await;
    ensure_crd(&env.client).await;
    let events_addr = service_address("events-addr");
    let webhook = Webhook::start().await;
    route_to(&env, &webhook).await?;
    wait_for_route(&env, &webhook, &events_addr).await;
    let tag = env.prefix.clone();
    let mut pools = Vec::new();
    for short in shorts {
        pools.push(env.create_pool(short, &[("e2e", &tag), ("region", "east")], 1).await);
    }
    let controller = RunningController::start_with(&env.namespace, &["--events-addr", &events_addr]);
    Ok(Routed {
        env,
        webhook,
        pools,
        controller,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_halted_rollout_and_its_fix_reach_a_flux_alerts_webhook() -> TestResult {
    let started = Instant::now();
    let Routed {
        env,
        webhook,
        pools,
        controller,
    } = routed("notify", &["a", "b"]).await?;
    let mut app = ingress_app(&env, json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 1 } }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", STEP_TIMEOUT, complete(2)).await;

    // A broken change (a port no Service may have): the first pool fails
    // and the rollout halts.
    app["spec"]["values"]["controller"]["service"] = json!({ "port": 70000 });
    apply_app(&env, &app).await?;
    let halted =
        wait_app(&env, &controller, "the halt", STEP_TIMEOUT, stalled_because("RolloutHalted")).await;
    let broken = revision(&halted);
    let (ns, name) = (env.namespace.clone(), "ingress");
    let halt = webhook
        .wait("the halt's notification", &ns, name, |b| b["reason"] == "RolloutHalted")
        .await;
    assert_eq!(halt.component.as_deref(), Some("nodepool-fanout"), "the Gotk-Component header");
    let body = &halt.body;
    assert_eq!(body["severity"], "error", "{body}");
    assert_eq!(body["metadata"]["revision"], broken.as_str(), "{body}");
    assert_eq!(body["reportingController"], "nodepool-fanout", "{body}");
    assert_eq!(body["involvedObject"]["kind"], "NodePoolApplication", "{body}");
    assert_eq!(body["involvedObject"]["apiVersion"], "apps.fanout.dev/v1alpha1", "{body}");
    assert!(body["involvedObject"]["resourceVersion"].is_string(), "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(&broken) && message.contains(&pools[0]), "{message}");
    println!("the halt, as the webhook received it:\n{body}");

    // The pool's own Events name it and its HelmRelease.
    let releases = releases_by_pool(&env).await;
    let release = releases[&pools[0]]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let about_pool = webhook
        .wait("an event about the failing pool", &ns, name, |b| {
            b["metadata"]["pool"] == pools[0].as_str() && b["metadata"]["revision"] == broken.as_str()
        })
        .await;
    assert_eq!(about_pool.body["metadata"]["helmrelease"], release.as_str(), "{}", about_pool.body);
    println!("an event of the failing pool, as the webhook received it:\n{}", about_pool.body);

    // Fixed: a new revision, which completes.
    app["spec"]["values"]["controller"]["service"] = json!({ "port": 8080 });
    apply_app(&env, &app).await?;
    let fixed = wait_app(&env, &controller, "the fixed change", STEP_TIMEOUT, complete(2)).await;
    let good = revision(&fixed);
    assert_ne!(good, broken);
    let done = webhook
        .wait("the fix's completion", &ns, name, |b| {
            b["reason"] == "RolloutComplete" && b["metadata"]["revision"] == good.as_str()
        })
        .await;
    assert_eq!(done.component.as_deref(), Some("nodepool-fanout"));
    assert_eq!(done.body["severity"], "info", "{}", done.body);
    assert_eq!(done.body["metadata"]["revision"], good.as_str(), "{}", done.body);
    println!("the completion, as the webhook received it:\n{}", done.body);

    // Every notification was delivered: none failed, none was dropped.
    let counted = |result: &'static str| {
        controller
            .counter("nodepool_fanout_notifications_total", move |l| l.contains(&format!("\"{result}\"")))
    };
    assert!(counted("delivered").await > 0);
    assert_eq!((counted("failed").await, counted("dropped").await), (0, 0));
    println!("took {:?}", started.elapsed());
    env.cleanup().await;
    Ok(())
}
