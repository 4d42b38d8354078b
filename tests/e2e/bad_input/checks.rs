//! What must hold once the cases are in: the controller lives, the
//! bystander is untouched, and an application created now is served.
use super::*;

/// The end of a controller's log, each line cut short: a client that cannot
/// decode a response logs all of it.
fn log_tail(controller: &RunningController) -> String {
    let text = std::fs::read_to_string(&controller.log).unwrap_or_default();
    let lines: Vec<String> = text.lines().map(|l| l.chars().take(400).collect()).collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The controller still answers /healthz and its log has no panic.
pub(super) async fn controller_checks(controller: &RunningController, which: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let health = reqwest::get(format!("http://{}/healthz", controller.metrics_addr)).await;
    if !health.is_ok_and(|r| r.status().is_success()) {
        failures.push(format!("{which} no longer answers /healthz"));
    }
    let log = std::fs::read_to_string(&controller.log).unwrap_or_default();
    if log.contains("panicked") {
        failures.push(format!("{which} panicked; see {}", controller.log.display()));
    }
    failures
}

/// The bystander's releases are exactly as they were, and it is still READY 2/2.
pub(super) async fn bystander_checks(
    client: &Client,
    namespace: &str,
    before: &BTreeMap<String, (Value, Value)>,
) -> Vec<String> {
    let mut failures = Vec::new();
    let after = bystander_releases(client, namespace).await;
    if &after != before {
        failures.push(format!("the bystander's releases changed:\nbefore {before:?}\nafter {after:?}"));
    }
    match list_apps(client, namespace).await {
        Ok(apps) => match apps.get(BYSTANDER).map(|v| ready_for_generation(v, "2/2")) {
            Some(Ok(())) => {}
            other => failures.push(format!("the bystander is no longer READY 2/2: {other:?}")),
        },
        Err(e) => failures.push(format!("cannot read the applications: {e}")),
    }
    failures
}

/// A healthy application created now gets its release and a status.
pub(super) async fn canary_checks(
    client: &Client,
    vars: &Vars,
    name: &str,
    controller: &RunningController,
) -> Vec<String> {
    let canary = ingress_app(
        name,
        vars,
        json!({ "pools": { "names": [vars.pool_a] }, "helmRelease": { "suspend": true } }),
    );
    if let Err(e) = create_app(client, &vars.namespace, &canary.to_string()).await {
        return vec![format!("cannot create the application {name}: {e}")];
    }
    let deadline = Instant::now() + CANARY_TIMEOUT;
    loop {
        let releases = release_index(client, &vars.namespace).await.unwrap_or_default();
        let apps = list_apps(client, &vars.namespace).await.unwrap_or_default();
        let observed = apps.get(name).is_some_and(|v| {
            v.status.get("observedGeneration").and_then(Value::as_i64) == v.metadata.generation
        });
        if observed && releases.contains_key(&(name.to_string(), vars.pool_a.clone())) {
            return Vec::new();
        }
        if Instant::now() > deadline {
            return vec![format!(
                "the healthy application {name}, created after the cases, got no release or no status \
                 within {CANARY_TIMEOUT:?}: the controller is stalled; its log ends:\n{}",
                log_tail(controller)
            )];
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
