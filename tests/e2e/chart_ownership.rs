//! The shared HelmChart's writes and clean-up, on the local control plane:
//! every branch of `ensure_chart` and `prune_charts` called directly, and
//! through the controller a source that moves to another namespace and a
//! values file that is removed.
use crate::support;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use nodepool_fanout::api::naming;
use nodepool_fanout::api::{NodePoolApplication, NodePoolApplicationSpec};
use nodepool_fanout::chart::shared::{self as shared_chart, ChartKind, ChartRef};
use nodepool_fanout::chart::source::ocirepository_resource;
use nodepool_fanout::reconcile::apply::{self, ApplyError, SharedCharts};
use serde_json::{json, Value};
use support::apps::{
    apply_app, ingress_app, ready_is, releases_by_pool, wait_app, CHANGE_TIMEOUT, READY_TIMEOUT,
};
use support::{ensure_crd, helmchart_resource, RunningController, TestEnv, TestResult};

/// Every shared HelmChart of the test's applications, in any namespace.
async fn charts_of(env: &TestEnv) -> Vec<Value> {
    let api: Api<DynamicObject> = Api::all_with(env.client.clone(), &helmchart_resource());
    let selector = format!("{}={}", shared_chart::LABEL_APPLICATION_NAMESPACE, env.namespace);
    let list = api.list(&ListParams::default().labels(&selector)).await.expect("list HelmCharts");
    list.items.into_iter().filter_map(|c| serde_json::to_value(c).ok()).collect()
}

fn where_(charts: &[Value]) -> Vec<String> {
    charts
        .iter()
        .map(|c| format!("{}/{}", c["metadata"]["namespace"], c["metadata"]["name"]).replace('"', ""))
        .collect()
}

async fn release_config(env: &TestEnv, release: &Value) -> Value {
    let name = format!("{}-config", release["spec"]["releaseName"].as_str().unwrap_or_default());
    let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    match api.get_opt(&name).await {
        Ok(Some(cm)) => json!(cm.data),
        other => json!(format!("no ConfigMap {name}: {other:?}")),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_moved_source_and_a_removed_values_file_leave_nothing_behind() -> TestResult {
    let mut env = TestEnv::new("chartmove").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let controller = RunningController::start(&env.namespace);

    // 1. valuesFiles reach the releases through the shared chart.
    let mut app = ingress_app(&env, json!({}));
    app["spec"]["chart"]["spec"]["valuesFiles"] = json!(["values.yaml", "values-edge.yaml"]);
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "READY 1/1", READY_TIMEOUT, ready_is("1/1")).await;
    let release = releases_by_pool(&env).await.into_values().next().expect("one release");
    support::wait_for("the values file's value in the release", READY_TIMEOUT, || async {
        let data = release_config(&env, &release).await;
        match data["site-profile"] == "edge" {
            true => Ok(()),
            false => Err(data.to_string()),
        }
    })
    .await;

    // 2. Removing valuesFiles reaches the chart and the releases: the
    //    chart's name does not change, so only comparing every field we
    //    own notices it.
    app["spec"]["chart"]["spec"]
        .as_object_mut()
        .expect("chart spec")
        .remove("valuesFiles");
    apply_app(&env, &app).await?;
    support::wait_for("the chart without valuesFiles", CHANGE_TIMEOUT, || async {
        let charts = charts_of(&env).await;
        match charts.as_slice() {
            [chart] if chart["spec"].get("valuesFiles").is_none() => Ok(()),
            _ => Err(format!("{charts:?}")),
        }
    })
    .await;
    support::wait_for("the release without the value", READY_TIMEOUT, || async {
        let data = release_config(&env, &release).await;
        match data.get("site-profile").is_none() && data.get("region") == Some(&json!("east")) {
            true => Ok(()),
            false => Err(data.to_string()),
        }
    })
    .await;

    // 3. The source moves to the application's namespace: the chart moves
    //    with it and the one in flux-system goes.
    let repositories: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        "flux-system",
        &nodepool_fanout::chart::source::helmrepository_resource(),
    );
    let fixtures = serde_json::to_value(repositories.get("fixtures").await?)?;
    let local: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
        "metadata": { "name": "fixtures", "namespace": env.namespace },
        "spec": { "url": fixtures["spec"]["url"], "interval": "10m" }
    }))?;
    Api::<DynamicObject>::namespaced_with(
        env.client.clone(),
        &env.namespace,
        &nodepool_fanout::chart::source::helmrepository_resource(),
    )
    .create(&PostParams::default(), &local)
    .await?;
    app["spec"]["chart"]["spec"]["sourceRef"]["namespace"] = json!(env.namespace);
    apply_app(&env, &app).await?;
    let namespace = env.namespace.clone();
    support::wait_for("one chart, beside the moved source", READY_TIMEOUT, || async {
        let charts = charts_of(&env).await;
        match where_(&charts).as_slice() {
            [only] if only.starts_with(&format!("{namespace}/")) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    support::wait_for("the release on the moved chart, Ready", READY_TIMEOUT, || async {
        let releases = releases_by_pool(&env).await;
        let hr = releases.values().next().cloned().unwrap_or_default();
        let ready = support::condition(&hr, "Ready").cloned().unwrap_or_default();
        let current = hr["status"]["observedGeneration"] == hr["metadata"]["generation"];
        match (releases.len(), hr["spec"]["chartRef"]["namespace"] == namespace.as_str()) {
            (1, true) if ready["status"] == "True" && current => Ok(()),
            _ => Err(format!(
                "{} releases; chartRef {}; Ready {ready}",
                releases.len(),
                hr["spec"]["chartRef"]
            )),
        }
    })
    .await;
    wait_app(&env, &controller, "READY 1/1", CHANGE_TIMEOUT, ready_is("1/1")).await;

    // 4. Deleting the application leaves no chart in any namespace.
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("ingress", &DeleteParams::default()).await?;
    support::wait_for("no chart anywhere", CHANGE_TIMEOUT, || async {
        let charts = charts_of(&env).await;
        match charts.is_empty() {
            true => Ok(()),
            false => Err(format!("{:?}", where_(&charts))),
        }
    })
    .await;
    env.cleanup().await;
    Ok(())
}

/// A HelmChart spec for `ensure_chart`, as the controller builds it.
fn chart_spec(values_files: &[&str]) -> NodePoolApplicationSpec {
    serde_json::from_value(json!({
        "pools": { "names": ["a"] },
        "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0", "valuesFiles": values_files,
            "sourceRef": { "kind": "HelmRepository", "name": "fixtures" } } },
        "interval": "10m"
    }))
    .expect("spec")
}

/// Watch caches of the shared charts we manage, as the controller keeps
/// them: HelmCharts and pinned OCIRepositories.
fn chart_cache(env: &TestEnv) -> SharedCharts {
    let cache = |resource: ApiResource| {
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let api: Api<DynamicObject> = Api::all_with(env.client.clone(), &resource);
        let managed_by = format!("{}={}", naming::LABEL_MANAGED_BY, naming::MANAGER);
        let events =
            reflector::reflector(writer, watcher(api, watcher::Config::default().labels(&managed_by)));
        tokio::spawn(events.applied_objects().for_each(|_| async {}));
        store
    };
    SharedCharts {
        helmcharts: cache(helmchart_resource()),
        ocirepositories: cache(ocirepository_resource()),
    }
}

/// Whether the chart exists and is not being deleted (source-controller's
/// finalizer keeps a deleted chart a moment longer).
async fn chart_exists(env: &TestEnv, chart: &ChartRef) -> bool {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &chart.namespace, &helmchart_resource());
    let found = api.get_opt(&chart.name).await.expect("get HelmChart");
    found.is_some_and(|c| c.metadata.deletion_timestamp.is_none())
}

/// Waits until the cache holds every chart of `present` and none of `absent`.
async fn cache_has(store: &Store<DynamicObject>, present: &[&ChartRef], absent: &[&ChartRef]) {
    let cached = |chart: &ChartRef| {
        store.state().iter().any(|c| {
            c.metadata.name.as_deref() == Some(&chart.name)
                && c.metadata.namespace.as_deref() == Some(&chart.namespace)
        })
    };
    support::wait_for("the chart cache", CHANGE_TIMEOUT, || async {
        match present.iter().all(|c| cached(c)) && !absent.iter().any(|c| cached(c)) {
            true => Ok(()),
            false => Err(format!("{} charts cached", store.state().len())),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ensure_chart_and_prune_charts_take_every_branch_on_a_real_api_server() -> TestResult {
    let env = TestEnv::new("chartbranches").await;
    let other_ns = format!("{}-b", env.namespace);
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": other_ns } }))?,
        )
        .await?;
    let store = chart_cache(&env);
    let (app, app_ns) = ("gw", env.namespace.as_str());
    let with_files = chart_spec(&["values.yaml", "values-edge.yaml"]);
    let here = shared_chart::chart_ref(&with_files, app, app_ns, "1.0.0");
    let desired = shared_chart::helmchart(&with_files, app, app_ns, "1.0.0", &here);

    // ensure_chart: absent, so created.
    let created = apply::ensure_chart(&env.client, &here, &desired).await?;
    assert_eq!(created["spec"]["valuesFiles"], json!(["values.yaml", "values-edge.yaml"]));
    // source-controller writes status and a finalizer meanwhile, so the
    // generation (bumped by spec changes only) tells what we changed.
    assert_eq!(created["metadata"]["generation"], 1);
    // Present and the same: the spec is not changed.
    let same = apply::ensure_chart(&env.client, &here, &desired).await?;
    assert_eq!(same["metadata"]["generation"], 1, "an unchanged chart was rewritten");
    // Present with a field we no longer set: written, and the field is gone.
    let without = shared_chart::helmchart(&chart_spec(&[]), app, app_ns, "1.0.0", &here);
    let updated = apply::ensure_chart(&env.client, &here, &without).await?;
    assert!(updated["spec"].get("valuesFiles").is_none(), "{}", updated["spec"]);
    assert_eq!(updated["metadata"]["generation"], 2);
    let again = apply::ensure_chart(&env.client, &here, &without).await?;
    assert_eq!(again["metadata"]["generation"], 2, "at rest, no change");
    // Present and not ours: refused, and left as it was.
    let foreign = ChartRef {
        kind: ChartKind::HelmChart,
        name: here.name.clone(),
        namespace: other_ns.clone(),
    };
    let mut theirs = shared_chart::helmchart(&with_files, app, app_ns, "1.0.0", &foreign);
    theirs["metadata"] = json!({ "name": foreign.name, "namespace": foreign.namespace });
    let charts_b: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &other_ns, &helmchart_resource());
    charts_b.create(&PostParams::default(), &serde_json::from_value(theirs)?).await?;
    let refused = apply::ensure_chart(&env.client, &foreign, &desired).await;
    assert!(matches!(refused, Err(ApplyError::NameClash { .. })), "{refused:?}");
    let untouched = serde_json::to_value(charts_b.get(&foreign.name).await?)?;
    assert!(
        untouched["metadata"].get("labels").is_none(),
        "the foreign chart was changed: {untouched}"
    );
    // Ours by label, but another application's: refused too, never taken
    // over (as a chart whose name another tenant searched out would be).
    let neighbours = shared_chart::helmchart(&with_files, "neighbour", app_ns, "1.0.0", &here);
    let refused = apply::ensure_chart(&env.client, &here, &neighbours).await;
    assert!(matches!(refused, Err(ApplyError::NameClash { .. })), "{refused:?}");
    let kept = serde_json::to_value(
        Api::<DynamicObject>::namespaced_with(env.client.clone(), app_ns, &helmchart_resource())
            .get(&here.name)
            .await?,
    )?;
    assert_eq!(
        kept["metadata"]["annotations"][shared_chart::ANNOTATION_APPLICATION],
        format!("{app_ns}/{app}")
    );

    // prune_charts: ours in two namespaces, another application's beside them.
    let there = ChartRef {
        kind: ChartKind::HelmChart,
        name: format!("{}-old", here.name),
        namespace: other_ns.clone(),
    };
    let moved = shared_chart::helmchart(&with_files, app, app_ns, "1.0.0", &there);
    apply::ensure_chart(&env.client, &there, &moved).await?;
    let neighbour_ref = shared_chart::chart_ref(&with_files, "neighbour", app_ns, "1.0.0");
    let neighbour = shared_chart::helmchart(&with_files, "neighbour", app_ns, "1.0.0", &neighbour_ref);
    apply::ensure_chart(&env.client, &neighbour_ref, &neighbour).await?;
    cache_has(&store.helmcharts, &[&here, &there, &neighbour_ref], &[]).await;
    let owner: NodePoolApplication = serde_json::from_value(json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": app, "namespace": app_ns }, "spec": chart_spec(&[]) }))?;
    // Keeping the current chart deletes ours elsewhere, whatever the namespace.
    apply::prune_charts(&env.client, &store, &owner, &[&here]).await?;
    assert!(chart_exists(&env, &here).await, "the kept chart was deleted");
    assert!(!chart_exists(&env, &there).await, "our chart in the old namespace is left behind");
    assert!(chart_exists(&env, &neighbour_ref).await, "another application's chart was deleted");
    assert!(chart_exists(&env, &foreign).await, "a chart we do not own was deleted");
    // A name kept in one namespace does not keep the same name in another.
    let twin = ChartRef {
        kind: ChartKind::HelmChart,
        name: here.name.clone(),
        namespace: format!("{}-c", env.namespace),
    };
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": twin.namespace } }))?,
        )
        .await?;
    let mut twin_chart = desired.clone();
    twin_chart["metadata"]["namespace"] = json!(twin.namespace);
    apply::ensure_chart(&env.client, &twin, &twin_chart).await?;
    cache_has(&store.helmcharts, &[&here, &twin], &[&there]).await;
    apply::prune_charts(&env.client, &store, &owner, &[&here]).await?;
    assert!(!chart_exists(&env, &twin).await, "kept by name alone, in another namespace");
    // Keeping nothing (the finalizer's call) deletes all of ours, and only ours.
    cache_has(&store.helmcharts, &[&here], &[&twin]).await;
    apply::prune_charts(&env.client, &store, &owner, &[]).await?;
    assert!(!chart_exists(&env, &here).await);
    assert!(chart_exists(&env, &neighbour_ref).await);
    assert!(chart_exists(&env, &foreign).await);
    // Nothing of ours left: a prune is a no-op, not an error.
    cache_has(&store.helmcharts, &[&neighbour_ref], &[&here]).await;
    apply::prune_charts(&env.client, &store, &owner, &[]).await?;

    let dp = DeleteParams::default();
    for ns in [other_ns.as_str(), twin.namespace.as_str()] {
        let _ = namespaces.delete(ns, &dp).await;
    }
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn without_shared_charts_there_is_no_finalizer_and_deletion_is_immediate() -> TestResult {
    let mut env = TestEnv::new("nofinalizer").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    let _controller = RunningController::start_with(&env.namespace, &["--shared-chart=false"]);
    // Suspended: the case is about what the controller writes and removes.
    apply_app(&env, &ingress_app(&env, json!({ "helmRelease": { "suspend": true } }))).await?;
    let releases = support::wait_for("the release", CHANGE_TIMEOUT, || async {
        let releases = releases_by_pool(&env).await;
        match releases.len() {
            1 => Ok(releases),
            n => Err(format!("{n} releases")),
        }
    })
    .await;
    for hr in releases.values() {
        assert!(hr["spec"]["chart"]["spec"].is_object(), "a chart.spec per release: {}", hr["spec"]);
        assert!(hr["spec"].get("chartRef").is_none());
    }
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let app = apps.get("ingress").await?;
    assert!(app.metadata.finalizers.unwrap_or_default().is_empty(), "no shared chart, no finalizer");
    assert!(charts_of(&env).await.is_empty(), "no shared chart is made");
    apps.delete("ingress", &DeleteParams::default()).await?;
    support::wait_for("the application gone", CHANGE_TIMEOUT, || async {
        match apps.get_opt("ingress").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|a| a.map(|a| a.metadata.finalizers)))),
        }
    })
    .await;
    env.cleanup().await;
    Ok(())
}
