//! The fan-out controller end to end: the real binary, real Flux installing
//! the fixture charts, kwok nodes in OpenYurt node pools.
use crate::support;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use nodepool_fanout::api::naming;
use nodepool_fanout::api::NodePoolApplication;
use serde_json::{json, Value};
use support::apps::{
    app, apply_app, ingress_app, pool_status, ready_is, releases_by_pool, wait_app, wait_pools_with_releases,
    CHANGE_TIMEOUT, READY_TIMEOUT,
};
use support::{
    ensure_crd, helmrelease_resource, node_of, nodepool_resource, running_pods, wait_for, RunningController,
    TestEnv, TestResult, POOL_LABEL,
};

#[tokio::test(flavor = "multi_thread")]
async fn fans_out_one_release_per_pool_pinned_to_its_nodes() -> TestResult {
    let mut env = TestEnv::new("fanout").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let east = env.create_pool("east", &[("e2e", &tag), ("region", "east")], 2).await;
    let west = env.create_pool("west", &[("e2e", &tag), ("region", "west")], 1).await;
    let north = env.create_pool("north", &[("e2e", &tag), ("region", "north")], 1).await;
    let controller = RunningController::start(&env.namespace);

    let app = ingress_app(
        &env,
        json!({ "overrides": [
            { "pools": { "names": [west] }, "values": { "controller": { "replicas": 2 } } },
            { "pools": { "selector": { "matchLabels": { "region": "north" } } },
              "values": { "controller": { "config": { "log-level": "debug", "region": null } } } }
        ]}),
    );
    apply_app(&env, &app).await?;
    let status = wait_app(&env, &controller, "READY 3/3", READY_TIMEOUT, ready_is("3/3")).await;
    let ready = status["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(ready["status"], "True", "Ready condition: {ready}");
    assert_eq!(status["status"]["chartVersion"], "1.0.0");

    let releases = releases_by_pool(&env).await;
    assert_eq!(releases.len(), 3, "one HelmRelease per pool: {:?}", releases.keys());
    for (pool, hr) in &releases {
        let name = hr["metadata"]["name"].as_str().unwrap_or_default();
        assert!(name.len() <= 53, "release name {name} is longer than 53 characters");
        assert_eq!(hr["spec"]["releaseName"], name, "releaseName is the object name");
        let owner = &hr["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "NodePoolApplication");
        assert_eq!(owner["controller"], true);
        assert_eq!(hr["spec"]["values"]["controller"]["nodeSelector"][POOL_LABEL], pool.as_str());
        assert_eq!(
            hr["spec"]["values"]["controller"]["ingressClass"]["name"],
            format!("{}-{pool}", env.namespace),
            "templates are rendered per pool"
        );
    }
    // Overrides land in the right pool only; later ones win; null removes.
    assert_eq!(releases[&west]["spec"]["values"]["controller"]["replicas"], 2);
    assert!(releases[&east]["spec"]["values"]["controller"].get("replicas").is_none());
    assert_eq!(releases[&north]["spec"]["values"]["controller"]["config"]["log-level"], "debug");
    assert_eq!(releases[&north]["spec"]["values"]["controller"]["config"]["region"], Value::Null);
    assert_eq!(releases[&east]["spec"]["values"]["controller"]["config"]["region"], "east");

    // Helm really rendered the per-pool values.
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let east_release = releases[&east]["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let cm = configmaps.get(&format!("{east_release}-config")).await?;
    let data = cm.data.unwrap_or_default();
    assert_eq!(data.get("region").map(String::as_str), Some("east"));
    assert_eq!(data.get("ingress-class"), Some(&format!("{}-{east}", env.namespace)));

    // Every pod runs on its own pool's nodes.
    for (pool, hr) in &releases {
        let nodes = env.nodes_of(pool).await;
        let release = hr["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let want = if *pool == west { 2 } else { 1 };
        let selector = format!("app.kubernetes.io/instance={release}");
        let placed = running_pods(&env, &selector, want, CHANGE_TIMEOUT).await;
        for pod in placed {
            let node = node_of(&pod);
            assert!(nodes.contains(&node), "a pod of pool {pool} runs on {node}, not on {nodes:?}");
        }
    }

    // Deleting the application removes all its releases.
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("ingress", &DeleteParams::foreground()).await?;
    wait_pools_with_releases(&env, &controller, &[]).await;

    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn follows_pools_as_they_appear_change_and_vanish() -> TestResult {
    let mut env = TestEnv::new("follow").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let a = env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let b = env.create_pool("b", &[("e2e", &tag), ("region", "east")], 1).await;
    let controller = RunningController::start(&env.namespace);
    // Installs are not awaited: this test is about which releases exist.
    let app = ingress_app(&env, json!({ "helmRelease": { "install": { "disableWait": true } } }));
    apply_app(&env, &app).await?;
    wait_pools_with_releases(&env, &controller, &[&a, &b]).await;

    // A new pool gets its release.
    let c = env.create_pool("c", &[("e2e", &tag), ("region", "west")], 1).await;
    wait_pools_with_releases(&env, &controller, &[&a, &b, &c]).await;

    // A pool relabelled out of the selection loses its release.
    let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    pools
        .patch(
            &a,
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "labels": { "e2e": null } } })),
        )
        .await?;
    wait_pools_with_releases(&env, &controller, &[&b, &c]).await;

    // A deleted pool loses its release.
    pools.delete(&b, &DeleteParams::default()).await?;
    wait_pools_with_releases(&env, &controller, &[&c]).await;

    let status = wait_app(&env, &controller, "one selected pool", CHANGE_TIMEOUT, |app| {
        match app.pointer("/status/selectedPools").and_then(Value::as_i64) {
            Some(1) => Ok(()),
            other => Err(format!("selectedPools {other:?}")),
        }
    })
    .await;
    assert_eq!(status["status"]["pools"].as_array().map(Vec::len), Some(1));

    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.namespace);
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.iter().any(|r| r == "ReleaseCreated"), "Events: {reasons:?}");
    assert!(reasons.iter().any(|r| r == "ReleasePruned"), "Events: {reasons:?}");

    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_override_fails_only_its_pool_and_keeps_its_release() -> TestResult {
    let mut env = TestEnv::new("broken").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let good = env.create_pool("good", &[("e2e", &tag), ("region", "east")], 1).await;
    let bad = env.create_pool("bad", &[("e2e", &tag), ("region", "west")], 1).await;
    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    wait_app(&env, &controller, "READY 2/2", READY_TIMEOUT, ready_is("2/2")).await;
    let before = releases_by_pool(&env).await;

    // The override for one pool names a label that pool does not have.
    let broken = ingress_app(
        &env,
        json!({ "overrides": [
            { "pools": { "names": [bad] }, "values": { "controller": { "image": { "tag": "{{pool.labels.version}}" } } } },
            { "pools": { "names": [good] }, "values": { "controller": { "replicas": 2 } } }
        ]}),
    );
    apply_app(&env, &broken).await?;
    let bad_pool = bad.clone();
    let status = wait_app(&env, &controller, "the bad pool failing", CHANGE_TIMEOUT, move |app| {
        match pool_status(app, &bad_pool) {
            Some(p) if p["ready"] == "False" => Ok(()),
            other => Err(format!("bad pool status {other:?}")),
        }
    })
    .await;
    let failed = pool_status(&status, &bad).cloned().unwrap_or_default();
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("overrides[0].values.controller.image.tag")
            && message.contains("pool.labels.version"),
        "the message names the field and the variable: {message}"
    );

    // The healthy pool still gets its change; the broken pool's release is untouched.
    let after = releases_by_pool(&env).await;
    assert_eq!(after[&good]["spec"]["values"]["controller"]["replicas"], 2);
    assert_eq!(
        (&after[&bad]["metadata"]["generation"], &after[&bad]["spec"]),
        (&before[&bad]["metadata"]["generation"], &before[&bad]["spec"]),
        "the failing pool's release was rewritten"
    );
    wait_app(&env, &controller, "the good pool ready again", READY_TIMEOUT, {
        let good = good.clone();
        move |app| match pool_status(app, &good) {
            Some(p) if p["ready"] == "True" && p["observedLatest"] == true => Ok(()),
            other => Err(format!("good pool status {other:?}")),
        }
    })
    .await;

    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.namespace);
    let warnings: Vec<String> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| e.message)
        .collect();
    assert!(
        warnings.iter().any(|m| m.contains(&bad) && m.contains("pool.labels.version")),
        "a Warning Event names the pool and the problem: {warnings:?}"
    );
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_release_with_a_clashing_name_is_left_untouched() -> TestResult {
    let mut env = TestEnv::new("clash").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mine = env.create_pool("mine", &[("e2e", &tag)], 1).await;
    let taken = env.create_pool("taken", &[("e2e", &tag)], 1).await;

    // Someone else's HelmRelease holds the name the app would give pool `taken`.
    let clashing = naming::release_name("ingress", &taken);
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": clashing, "namespace": env.namespace, "labels": { "owner": "someone-else" } },
        "spec": {
            "suspend": true, "interval": "1h",
            "chart": { "spec": { "chart": "edgex-lite",
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } }
        }
    }))?;
    let hrs: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let created = hrs.create(&PostParams::default(), &foreign).await?;
    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &ingress_app(&env, json!({ "helmRelease": { "install": { "disableWait": true } } })))
        .await?;

    let taken_pool = taken.clone();
    let status = wait_app(&env, &controller, "the clash reported", CHANGE_TIMEOUT, move |app| {
        match pool_status(app, &taken_pool) {
            Some(p) if p["reason"] == "NameConflict" => Ok(()),
            other => Err(format!("taken pool status {other:?}")),
        }
    })
    .await;
    assert!(pool_status(&status, &mine).is_some());
    assert_untouched(&hrs.get(&clashing).await?, &created);

    // Deleting the application leaves the foreign release alone too.
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("ingress", &DeleteParams::foreground()).await?;
    wait_pools_with_releases(&env, &controller, &[]).await;
    assert_untouched(&hrs.get(&clashing).await?, &created);
    env.cleanup().await;
    Ok(())
}

/// Flux itself adds a finalizer and status to any HelmRelease; what matters
/// is that this controller changed nothing: spec, labels, owners, and no
/// field of its manager.
fn assert_untouched(now: &DynamicObject, created: &DynamicObject) {
    assert_eq!(now.metadata.generation, created.metadata.generation, "foreign release spec changed");
    assert_eq!(now.data["spec"], created.data["spec"], "foreign release spec changed");
    assert_eq!(now.metadata.labels, created.metadata.labels, "foreign release labels changed");
    assert!(
        now.metadata.owner_references.clone().unwrap_or_default().is_empty(),
        "foreign release adopted"
    );
    let managers: Vec<String> = now
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(!managers.iter().any(|m| m == "nodepool-fanout"), "managers: {managers:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_chart_install_is_reported_with_flux_message() -> TestResult {
    let mut env = TestEnv::new("failing").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let pool = env.create_pool("only", &[("e2e", &tag)], 1).await;
    let controller = RunningController::start(&env.namespace);
    // A chart without a schema: only the API server, during Helm's install,
    // finds that replicas is not a number.
    let app = app(
        &env,
        "ingress-gateway",
        "1.0.0",
        json!({
            "pools": { "names": [pool] },
            "values": { "controller": { "replicas": "three", "ingressClass": { "name": "{{app.namespace}}" } } }
        }),
    );
    apply_app(&env, &app).await?;
    let pool_name = pool.clone();
    let status = wait_app(&env, &controller, "the install failure", READY_TIMEOUT, move |app| {
        match pool_status(app, &pool_name) {
            Some(p) if p["ready"] == "False" && p["observedLatest"] == true => Ok(()),
            other => Err(format!("pool status {other:?}")),
        }
    })
    .await;
    let p = pool_status(&status, &pool).cloned().unwrap_or_default();
    let message = p["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("install failed") && message.contains("replicas"),
        "Flux's message names the failure: {p}"
    );
    assert_eq!(status["status"]["ready"], "0/1");
    let ready = status["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(ready["status"], "False", "Ready condition: {ready}");
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_application_without_pools_is_refused_at_admission() -> TestResult {
    let env = TestEnv::new("admission").await;
    ensure_crd(&env.client).await;
    let mut app = ingress_app(&env, json!({}));
    app["spec"]["pools"] = json!({});
    let err = apply_app(&env, &app)
        .await
        .expect_err("an application selecting no pools was accepted");
    let text = err.to_string();
    assert!(text.contains("give pool names, a selector, or both"), "admission message: {text}");
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn every_workload_of_a_chart_without_placement_values_is_pinned() -> TestResult {
    let mut env = TestEnv::new("edgex").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let east = env.create_pool("east", &[("e2e", &tag), ("city", "hangzhou")], 2).await;
    let west = env.create_pool("west", &[("e2e", &tag), ("city", "chengdu")], 2).await;
    let controller = RunningController::start(&env.namespace);
    // edgex-lite has no nodeSelector in its values: only the post-renderer
    // can pin its Deployments, StatefulSet and Job.
    let app = app(
        &env,
        "edgex-lite",
        "0.3.x",
        json!({
            "pools": { "selector": { "matchLabels": { "e2e": tag } } },
            "releaseName": "edgex-{{pool.labels.city}}",
            "values": { "deviceProfile": "{{pool.labels.city}}-sensors" }
        }),
    );
    apply_app(&env, &app).await?;
    let status = wait_app(&env, &controller, "READY 2/2", READY_TIMEOUT, ready_is("2/2")).await;
    assert_eq!(status["status"]["chartVersion"], "0.3.0");

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.namespace);
    for (pool, city) in [(&east, "hangzhou"), (&west, "chengdu")] {
        let nodes = env.nodes_of(pool).await;
        let selector = format!("app.kubernetes.io/instance=edgex-{city}");
        // Three service Deployments and the database StatefulSet.
        let placed = running_pods(&env, &selector, 4, CHANGE_TIMEOUT).await;
        let job_pods = pods
            .list(&ListParams::default().labels(&format!("job-name=edgex-{city}-bootstrap")))
            .await?;
        assert!(!job_pods.items.is_empty(), "the bootstrap Job of edgex-{city} made no pod");
        for pod in placed.iter().chain(job_pods.items.iter()) {
            let node = node_of(pod);
            assert!(
                nodes.contains(&node),
                "pod {:?} of pool {pool} runs on {node:?}, not on {nodes:?}",
                pod.metadata.name
            );
        }
        let env_value = placed
            .iter()
            .filter_map(|p| p.spec.as_ref()?.containers.first()?.env.as_ref()?.first()?.value.clone())
            .next();
        assert_eq!(env_value.as_deref(), Some(format!("{city}-sensors").as_str()));
    }
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_health_and_readiness_are_served() -> TestResult {
    let mut env = TestEnv::new("metrics").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    env.create_pool("b", &[("e2e", &tag), ("region", "west")], 1).await;
    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    wait_app(&env, &controller, "READY 2/2", READY_TIMEOUT, ready_is("2/2")).await;

    let base = format!("http://{}", controller.metrics_addr);
    let http = reqwest::Client::new();
    for path in ["/healthz", "/readyz"] {
        let response = http.get(format!("{base}{path}")).send().await?;
        assert_eq!(response.status(), 200, "{path}");
    }
    let labels = format!(r#"{{namespace="{}",application="ingress"}}"#, env.namespace);
    let text = wait_for("the pool gauges", CHANGE_TIMEOUT, || {
        let (http, url, labels) = (http.clone(), format!("{base}/metrics"), labels.clone());
        async move {
            let text = http
                .get(url)
                .send()
                .await
                .map_err(|e| e.to_string())?
                .text()
                .await
                .map_err(|e| e.to_string())?;
            if text.contains(&format!("nodepool_fanout_ready_pools{labels} 2")) {
                Ok(text)
            } else {
                Err(text)
            }
        }
    })
    .await;
    assert!(text.contains(&format!("nodepool_fanout_pools{labels} 2")), "{text}");
    assert!(text.contains(r#"nodepool_fanout_reconciles_total{result="success"}"#), "{text}");
    assert!(text.contains("nodepool_fanout_reconcile_duration_seconds_bucket"), "{text}");
    env.cleanup().await;
    Ok(())
}
