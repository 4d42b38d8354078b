//! Applying the cases, each as `kubectl create` would, and judging each:
//! refused at admission, or a condition naming the field, with the
//! releases it should leave.
use super::*;

/// Whether an accepted case shows what it expects: `Ok` with the matching
/// reason and message, or `Err` with what it shows instead.
fn check_condition(
    case: &Case,
    view: Option<&AppView>,
    releases: &BTreeMap<(String, String), String>,
) -> Result<String, String> {
    let view = view.ok_or("the application is gone")?;
    let status = &view.status;
    let observed = status.get("observedGeneration").and_then(Value::as_i64);
    if observed.is_none() || observed != view.metadata.generation {
        return Err(format!("no status for generation {:?} (status: {status})", view.metadata.generation));
    }
    let reason = case.reason.as_deref().unwrap_or_default();
    let reasons: Vec<&str> = reason.split('|').map(str::trim).collect();
    let matches = |entry: &Value| {
        reasons.contains(&text(entry, "reason"))
            && case.messages.iter().all(|m| text(entry, "message").contains(m.as_str()))
    };
    let found = match &case.pool {
        Some(pool) => status
            .get("pools")
            .and_then(Value::as_array)
            .and_then(|pools| pools.iter().find(|p| text(p, "pool") == pool))
            .filter(|p| matches(p)),
        None => conditions(status).into_iter().find(|c| matches(c)),
    };
    let Some(found) = found else {
        return Err(format!(
            "no reason {reason:?} with message containing {:?}; status: {status}",
            case.messages
        ));
    };
    let label = naming::label_value(&case.app);
    for pool in &case.healthy {
        if !releases.contains_key(&(label.clone(), pool.clone())) {
            return Err(format!("healthy pool {pool} got no HelmRelease; status: {status}"));
        }
        let entry = status
            .get("pools")
            .and_then(Value::as_array)
            .and_then(|pools| pools.iter().find(|p| text(p, "pool") == pool));
        match entry {
            Some(p) if p["ready"] != "False" => {}
            other => return Err(format!("healthy pool {pool} has status {other:?}")),
        }
    }
    for pool in &case.no_release {
        if let Some(name) = releases.get(&(label.clone(), pool.clone())) {
            return Err(format!("pool {pool} got HelmRelease {name}, but must get none"));
        }
    }
    Ok(format!("{}: {}", text(found, "reason"), text(found, "message")))
}

async fn check_release_fields(client: &Client, namespace: &str, case: &Case) -> Result<(), String> {
    if case.release_fields.is_empty() {
        return Ok(());
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &helmrelease_resource());
    let selector = format!("{}={}", naming::LABEL_APPLICATION, naming::label_value(&case.app));
    let list = api.list(&ListParams::default().labels(&selector)).await.map_err(|e| e.to_string())?;
    if list.items.is_empty() {
        return Err("release-field: the application has no HelmRelease to look at".into());
    }
    for hr in &list.items {
        let value = serde_json::to_value(hr).map_err(|e| e.to_string())?;
        for (pointer, want) in &case.release_fields {
            let have = value.pointer(pointer);
            if have != Some(want) {
                return Err(format!(
                    "HelmRelease {}: {pointer} is {have:?}, want {want}",
                    hr.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
    }
    Ok(())
}

/// Creates a case's extra objects, then its application. `Ok(true)` when
/// the application was accepted.
async fn apply_case(client: &Client, namespace: &str, case: &Case) -> Result<bool, String> {
    for object in &case.extra {
        create_object(client, object).await?;
    }
    match (create_app(client, namespace, &case.body).await, case.expect) {
        (Ok(()), Expect::Condition) => Ok(true),
        (Ok(()), Expect::Admission) => {
            Err("the API server accepted the application; it must refuse it".into())
        }
        (Err(kube::Error::Api(status)), Expect::Admission) => {
            let missing: Vec<&String> =
                case.messages.iter().filter(|m| !status.message.contains(m.as_str())).collect();
            if missing.is_empty() {
                let shown: String = status.message.chars().take(160).collect();
                eprintln!("ok {}: refused at admission: {shown}", case.file);
                Ok(false)
            } else {
                Err(format!("refused, but the message lacks {missing:?}: {}", status.message))
            }
        }
        (Err(e), Expect::Admission) => Err(format!("refused without an API status: {e}")),
        (Err(e), Expect::Condition) => Err(format!("refused at admission, but must be accepted: {e}")),
    }
}

async fn create_object(client: &Client, object: &Value) -> Result<(), String> {
    let (group, version) = match text(object, "apiVersion").split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), text(object, "apiVersion").to_string()),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, text(object, "kind"));
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("no API for {gvk:?}: {e}"))?;
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        kube::discovery::Scope::Namespaced => {
            let ns = object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
            Api::namespaced_with(client.clone(), ns, &resource)
        }
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &dynamic)
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot create {} {:?}: {e}", text(object, "kind"), dynamic.metadata.name))
}

/// Deletes the cluster-scoped objects the cases made (namespaced ones go with the namespace).
pub(super) async fn delete_cluster_objects(client: &Client, cases: &[Case]) {
    for object in cases.iter().flat_map(|c| &c.extra) {
        let (group, version) = text(object, "apiVersion").split_once('/').unwrap_or(("", ""));
        let gvk = GroupVersionKind::gvk(group, version, text(object, "kind"));
        if let Ok((resource, caps)) = kube::discovery::pinned_kind(client, &gvk).await {
            if caps.scope == kube::discovery::Scope::Cluster {
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                let _ = api.delete(text(&object["metadata"], "name"), &DeleteParams::default()).await;
            }
        }
    }
}

/// Applies the cases concurrently and waits until each has shown what it
/// expects or has run out of time; returns one line per failure.
pub(super) async fn run_cases(client: &Client, namespace: &str, cases: &[&Case]) -> Vec<String> {
    let started = Instant::now();
    let applied = futures::future::join_all(cases.iter().map(|c| apply_case(client, namespace, c))).await;
    let mut failures = Vec::new();
    let mut pending: Vec<(&Case, Instant)> = Vec::new();
    for (case, result) in cases.iter().zip(applied) {
        match result {
            Ok(true) => pending.push((case, Instant::now() + CASE_TIMEOUT)),
            Ok(false) => {}
            Err(e) => failures.push(format!("{}: {e}", case.file)),
        }
    }
    // Shared with the polling closure, which runs again and again.
    let state = RefCell::new((pending, failures, BTreeMap::<String, String>::new()));
    wait_for("every accepted case to settle", CASE_TIMEOUT + Duration::from_secs(30), || async {
        let apps = list_apps(client, namespace).await;
        let releases = release_index(client, namespace).await;
        let pending = std::mem::take(&mut state.borrow_mut().0);
        let mut still = Vec::new();
        for (case, deadline) in pending {
            let verdict = match (&apps, &releases) {
                (Ok(apps), Ok(releases)) => check_condition(case, apps.get(&case.app), releases),
                (Err(e), _) | (_, Err(e)) => Err(format!("cannot read the namespace: {e}")),
            };
            let verdict = match verdict {
                Ok(found) => check_release_fields(client, namespace, case).await.map(|()| found),
                Err(e) => Err(e),
            };
            let mut state = state.borrow_mut();
            match verdict {
                Ok(found) => {
                    let shown: String = found.chars().take(160).collect();
                    eprintln!("ok {}: reported after {:.1?}: {shown}", case.file, started.elapsed())
                }
                Err(e) if Instant::now() < deadline => {
                    state.2.insert(case.file.clone(), e);
                    still.push((case, deadline));
                }
                Err(e) => state.1.push(format!("{}: after {CASE_TIMEOUT:?}: {e}", case.file)),
            }
        }
        let mut state = state.borrow_mut();
        let waiting: Vec<&str> = still.iter().map(|(c, _)| c.file.as_str()).collect();
        let report = format!("waiting for {waiting:?}: {:?}", state.2);
        state.0 = still;
        if state.0.is_empty() {
            Ok(())
        } else {
            Err(report)
        }
    })
    .await;
    let (_, failures, _) = state.into_inner();
    failures
}
