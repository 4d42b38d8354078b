//! One instance per pool, really, on the local control plane with the real
//! helm-controller: a chart object with a fixed name (the fixture's
//! cluster-scoped IngressClass) is never shared between pools in silence.
//!
//! - Releases refuse to take objects over: the pool that installed first
//!   keeps the class, the others fail naming it and that pool, and the
//!   application is not Ready.
//! - With takeover allowed by the user, the pools' inventories both list the
//!   class: every pool holding it fails as sharing it.
//! - An application beside them with a class per pool is untouched.
use crate::support;

use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, pool_status, ready_is, wait_named, READY_TIMEOUT};
use support::{ensure_crd, RunningController, TestEnv, TestResult};

/// The ingress fixture over the test's pools, named `name`, with
/// `class` as every pool's IngressClass and `extra` merged over the spec.
fn app_with_class(env: &TestEnv, name: &str, class: &str, extra: Value) -> Value {
    let mut app = ingress_app(env, extra);
    app["metadata"]["name"] = json!(name);
    app["spec"]["values"]["controller"]["ingressClass"]["name"] = json!(class);
    app
}

fn ready_condition(app: &Value) -> String {
    support::condition(app, "Ready").map(|c| c["status"].to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fixed_name_object_is_never_shared_between_pools_in_silence() -> TestResult {
    let mut env = TestEnv::new("isolation").await;
    ensure_crd(&env.client).await;
    let first = env.create_region_pools(&["east"]).await.remove(0);
    let controller = RunningController::start(&env.namespace);
    let (fixed, adopted) = (format!("{}-fixed", env.namespace), format!("{}-adopted", env.namespace));
    apply_app(&env, &app_with_class(&env, "fixed", &fixed, json!({}))).await?;
    let takeover = json!({ "helmRelease": {
        "install": { "disableTakeOwnership": false }, "upgrade": { "disableTakeOwnership": false }
    } });
    apply_app(&env, &app_with_class(&env, "adopting", &adopted, takeover)).await?;
    // The pools' own classes, `<namespace>-<pool>`.
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    for name in ["fixed", "adopting", "ingress"] {
        wait_named(&env, &controller, name, &format!("{name} READY 1/1"), READY_TIMEOUT, ready_is("1/1"))
            .await;
    }

    // Two more pools: their releases find the class the first pool's holds.
    let others = env.create_region_pools(&["west", "north"]).await;
    let app = wait_named(&env, &controller, "fixed", "fixed: the new pools refused", READY_TIMEOUT, |app| {
        for pool in &others {
            let status = pool_status(app, pool).ok_or(format!("no status for {pool}"))?;
            if status["reason"] != "ObjectHeldElsewhere" {
                return Err(format!("{pool}: {status}"));
            }
        }
        ready_is("1/3")(app)
    })
    .await;
    for pool in &others {
        let message = pool_status(&app, pool).and_then(|s| s["message"].as_str()).unwrap_or_default();
        assert!(
            message.starts_with(&format!(
                "IngressClass {fixed} (cluster-scoped) exists and is not taken over: the release of pool {first}"
            )),
            "{message}"
        );
        assert!(message.contains("{{pool.name}}"), "says how to make it the pool's own: {message}");
        assert!(message.contains("Helm said: "), "keeps Helm's words: {message}");
    }
    assert_eq!(ready_condition(&app), "\"False\"", "not Ready while a pool cannot have its own");

    // Takeover allowed: each new pool's release took the class, so more
    // than one inventory lists it, and every pool that lists it fails.
    let app = wait_named(
        &env,
        &controller,
        "adopting",
        "adopting: the shared class reported",
        READY_TIMEOUT,
        |app| {
            let sharing: Vec<&Value> = app
                .pointer("/status/pools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|p| p["reason"] == "SharedObject")
                .collect();
            match sharing.len() >= 2 {
                true => Ok(()),
                false => Err(format!("{} pools report sharing", sharing.len())),
            }
        },
    )
    .await;
    let sharing = app["status"]["pools"].as_array().expect("pools");
    for status in sharing.iter().filter(|p| p["reason"] == "SharedObject") {
        let message = status["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!(
                "IngressClass.networking.k8s.io {adopted} (cluster-scoped) is held by the releases of pools "
            )),
            "{message}"
        );
    }
    assert_eq!(ready_condition(&app), "\"False\"");

    // The application with a class per pool is untouched.
    wait_named(&env, &controller, "ingress", "ingress READY 3/3", READY_TIMEOUT, ready_is("3/3")).await;
    env.cleanup().await;
    Ok(())
}
