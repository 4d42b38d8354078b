//! OCI charts end to end, from the local control plane's OCI registry,
//! where `hack/cluster.sh up` pushed the fixture charts with `helm push`:
//! an application whose `spec.chartRef` names an OCIRepository (Flux's
//! recommended form for OCI charts), and one whose `spec.chart` names an
//! OCI HelmRepository, whose versions come from the registry's tags.
use crate::support;

use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::Api;
use nodepool_fanout::api::naming;
use serde_json::{json, Value};
use support::apps::{
    apply_app, ingress_app, releases_by_pool, stalled_because, wait_app, CHANGE_TIMEOUT, READY_TIMEOUT,
};
use support::gitops::{apply_object, ocirepository_resource, service_address};
use support::{condition, ensure_crd, RunningController, TestEnv, TestResult};

/// The user's OCIRepository of the ingress fixture at `tag`, selecting the
/// chart layer as helm-controller requires (unless `chart_layer` is false).
fn ocirepository(env: &TestEnv, name: &str, tag: &str, chart_layer: bool) -> Value {
    let mut repository = json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
        "metadata": { "name": name, "namespace": env.namespace },
        "spec": {
            "url": format!("oci://{}/charts/ingress-gateway", service_address("oci-registry")),
            "ref": { "tag": tag }, "interval": "1m", "insecure": true
        }
    });
    if chart_layer {
        repository["spec"]["layerSelector"] = json!({ "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip", "operation": "copy" });
    }
    repository
}

/// Whether a chart version reported for an OCI chart is `version`:
/// helm-controller reports a chart from an OCIRepository as
/// `<version>+<digest prefix>`, which the status passes on.
fn is_version(reported: &Value, version: &str) -> bool {
    reported
        .as_str()
        .is_some_and(|v| v.split_once('+').map_or(v, |(semver, _)| semver) == version && v.contains('+'))
}

/// The ingress application over the test's pools with `spec.chartRef`.
fn oci_app(env: &TestEnv, name: &str, extra: Value) -> Value {
    let mut app = ingress_app(env, extra);
    app["metadata"]["name"] = json!(name);
    let spec = app["spec"].as_object_mut().expect("a spec");
    spec.remove("chart");
    spec.insert("chartRef".into(), json!({ "kind": "OCIRepository", "name": "ingress-gateway" }));
    app
}

/// The pinned OCIRepositories in the test's namespace.
async fn pinned(env: &TestEnv) -> Vec<String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &ocirepository_resource());
    let list = api
        .list(&ListParams::default().labels(&format!("{}={}", naming::LABEL_MANAGED_BY, naming::MANAGER)))
        .await
        .expect("list OCIRepositories");
    list.items
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .filter_map(|o| o.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oci_chart_fans_out_pinned_and_a_new_tag_rolls_out() -> TestResult {
    let mut env = TestEnv::new("oci-chartref").await;
    ensure_crd(&env.client).await;
    env.create_region_pools(&["east", "west"]).await;
    let controller = RunningController::start(&env.namespace);
    let result = async {
        apply_object(&env, &ocirepository_resource(), &ocirepository(&env, "ingress-gateway", "1.0.0", true))
            .await?;
        let progressive = json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 1 } });
        apply_app(&env, &oci_app(&env, "ingress", progressive)).await?;
        wait_app(&env, &controller, "READY 2/2 from the registry", READY_TIMEOUT, |app| {
            match (app.pointer("/status/ready"), app.pointer("/status/chartVersion")) {
                (Some(r), Some(v)) if r == "2/2" && is_version(v, "1.0.0") => Ok(()),
                other => Err(format!("ready, chartVersion: {other:?}")),
            }
        })
        .await;
        let first = pinned(&env).await;
        assert_eq!(first.len(), 1, "one pinned OCIRepository for the revision: {first:?}");
        let releases = releases_by_pool(&env).await;
        assert_eq!(releases.len(), 2);
        for (pool, hr) in &releases {
            assert_eq!(
                hr["spec"]["chartRef"],
                json!({ "kind": "OCIRepository", "name": first[0], "namespace": env.namespace }),
                "pool {pool}'s release installs the pinned revision"
            );
            assert_eq!(condition(hr, "Ready").map(|c| c["status"].clone()), Some(json!("True")), "{pool}");
        }
        let ours: Api<DynamicObject> =
            Api::namespaced_with(env.client.clone(), &env.namespace, &ocirepository_resource());
        let copy = serde_json::to_value(ours.get(&first[0]).await?)?;
        assert!(
            copy["spec"]["ref"]["digest"].as_str().is_some_and(|d| d.starts_with("sha256:")),
            "pinned by digest: {}",
            copy["spec"]
        );

        // A new tag in the user's OCIRepository: a new pinned revision,
        // rolled out pool by pool; the old copy goes once no release uses it.
        let patch = json!({ "spec": { "ref": { "tag": "1.1.0" } } });
        let users: Api<DynamicObject> =
            Api::namespaced_with(env.client.clone(), &env.namespace, &ocirepository_resource());
        users
            .patch("ingress-gateway", &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        wait_app(&env, &controller, "1.1.0 on every pool", READY_TIMEOUT, |app| {
            match (
                app.pointer("/status/ready"),
                app.pointer("/status/chartVersion"),
                app.pointer("/status/rollout/phase"),
            ) {
                (Some(r), Some(v), Some(p)) if r == "2/2" && is_version(v, "1.1.0") && p == "Complete" => {
                    Ok(())
                }
                other => Err(format!("ready, chartVersion, rollout: {other:?}")),
            }
        })
        .await;
        let releases = releases_by_pool(&env).await;
        let second: Vec<String> = releases
            .values()
            .map(|hr| hr["spec"]["chartRef"]["name"].as_str().unwrap_or_default().to_string())
            .collect();
        assert!(second.iter().all(|n| n != &first[0]), "every release moved on: {second:?}");
        support::wait_for("the old pinned revision pruned", CHANGE_TIMEOUT, || async {
            let now = pinned(&env).await;
            match now.contains(&first[0]) {
                false if now.len() == 1 => Ok(()),
                _ => Err(format!("pinned: {now:?}")),
            }
        })
        .await;

        // An OCIRepository that does not select the chart layer cannot
        // serve a chart: a condition saying what to set, nothing written.
        apply_object(&env, &ocirepository_resource(), &ocirepository(&env, "whole-artifact", "1.0.0", false))
            .await?;
        let mut wrong = oci_app(&env, "wrong", json!({}));
        wrong["spec"]["chartRef"]["name"] = json!("whole-artifact");
        apply_app(&env, &wrong).await?;
        let api: Api<nodepool_fanout::api::NodePoolApplication> =
            Api::namespaced(env.client.clone(), &env.namespace);
        let stalled = support::wait_for("the wrong source reported", CHANGE_TIMEOUT, || async {
            let app = serde_json::to_value(api.get("wrong").await.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            stalled_because("InvalidChart")(&app).map(|()| app)
        })
        .await;
        let message = condition(&stalled, "Stalled")
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default()
            .to_string();
        assert!(message.contains("whole-artifact") && message.contains("layerSelector"), "{message}");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oci_helm_repository_resolves_versions_from_the_registry_tags() -> TestResult {
    let mut env = TestEnv::new("oci-helmrepo").await;
    ensure_crd(&env.client).await;
    env.create_region_pools(&["east", "west"]).await;
    let controller = RunningController::start(&env.namespace);
    let mut app = ingress_app(&env, json!({}));
    app["spec"]["chart"]["spec"]["version"] = json!("^1.0");
    app["spec"]["chart"]["spec"]["sourceRef"]["name"] = json!("fixtures-oci");
    let result = async {
        apply_app(&env, &app).await?;
        wait_app(&env, &controller, "READY 2/2 at the newest 1.x tag", READY_TIMEOUT, |app| {
            match (app.pointer("/status/ready"), app.pointer("/status/chartVersion")) {
                (Some(r), Some(v)) if r == "2/2" && v == "1.1.0" => Ok(()),
                other => Err(format!("ready, chartVersion: {other:?}")),
            }
        })
        .await;
        for (pool, hr) in releases_by_pool(&env).await {
            assert_eq!(hr["spec"]["chartRef"]["kind"], "HelmChart", "{pool} shares one HelmChart");
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}
