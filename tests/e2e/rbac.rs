//! `kubectl apply -k deploy/` installs the controller, and the RBAC it ships
//! is sufficient: the controller, acting as the deployed service account,
//! fans an application out end to end and cleans up after it. It is no
//! broader than needed: that identity cannot read Secrets (not even by
//! name: a check's Secrets are granted per namespace) or make workloads.
//! The same holds of the RBAC the Helm chart renders, installed as a
//! release of its own.
use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use nodepool_fanout::api::NodePoolApplication;
use serde_json::json;
use support::apps::{apply_app, ingress_app, ready_is, wait_app, wait_pools_with_releases, READY_TIMEOUT};
use support::{ensure_crd, kubeconfig_as, kubectl, RunningController, TestEnv, TestResult};

const NAMESPACE: &str = "nodepool-fanout-system";
const SERVICE_ACCOUNT: &str = "nodepool-fanout";

async fn client_from(path: &std::path::Path) -> Client {
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(path).expect("read kubeconfig"),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("valid kubeconfig");
    Client::try_from(config).expect("client")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_rbac_is_enough_to_fan_out_and_no_more() -> TestResult {
    let env = TestEnv::new("rbac").await;
    kubectl(&["apply", "--server-side", "-k", "deploy/"]);
    ensure_crd(&env.client).await; // waits until the CRD deploy/ installed is served
    fans_out_as(env, NAMESPACE, SERVICE_ACCOUNT).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_charts_rbac_is_enough_to_fan_out_and_no_more() -> TestResult {
    let env = TestEnv::new("rbac-chart").await;
    ensure_crd(&env.client).await;
    // A release of its own, beside deploy/'s objects: its cluster-wide
    // names come from the release name.
    // The release's name holds the chart's, so every object is named after
    // the release alone: the service account is `nodepool-fanout-chart`.
    let (release, namespace) = ("nodepool-fanout-chart", "nodepool-fanout-chart");
    let output = std::process::Command::new(support::controlplane_bin().join("helm"))
        .args([
            "template",
            release,
            "charts/nodepool-fanout",
            "--namespace",
            namespace,
        ])
        .current_dir(support::repo_root())
        .output()?;
    assert!(output.status.success(), "helm template: {}", String::from_utf8_lossy(&output.stderr));
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&output.stdout))?;
    let rbac: Vec<serde_json::Value> = documents
        .into_iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding")
            )
        })
        .collect();
    assert!(rbac.len() >= 5, "the chart renders its RBAC: {rbac:?}");
    let file = support::repo_root().join(format!("target/e2e-logs/{release}-rbac.yaml"));
    std::fs::create_dir_all(file.parent().expect("a folder"))?;
    std::fs::write(&file, serde_saphyr::to_string_multiple(&rbac)?)?;
    // Created if it is not there yet (a second run finds it).
    let _ = std::process::Command::new(support::controlplane_bin().join("kubectl"))
        .args(["create", "namespace", namespace])
        .env("KUBECONFIG", support::kubeconfig())
        .output();
    kubectl(&["apply", "--server-side", "-f", &file.to_string_lossy()]);
    fans_out_as(env, namespace, release).await
}

/// The controller, acting as `service_account` of `namespace` (leader
/// election on its Lease there), fans an application out and cleans up,
/// and that identity can do nothing beyond.
async fn fans_out_as(mut env: TestEnv, namespace: &str, service_account: &str) -> TestResult {
    let tag = env.prefix.clone();
    env.create_pool("a", &[("e2e", &tag), ("region", "east")], 1).await;
    env.create_pool("b", &[("e2e", &tag), ("region", "west")], 1).await;

    let as_controller = kubeconfig_as(namespace, service_account);
    // As deployed: with leader election on the Lease in the controller's namespace.
    let flags = ["--leader-election=true", "--leader-election-namespace", namespace];
    let controller = RunningController::start_as(&env.namespace, &flags, &as_controller);
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    wait_app(&env, &controller, "READY 2/2 under the service account", READY_TIMEOUT, ready_is("2/2")).await;

    // Deleting needs the finalizer removed, by the controller, as that identity.
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("ingress", &DeleteParams::default()).await?;
    wait_pools_with_releases(&env, &controller, &[]).await;
    support::wait_for("the application to be gone", support::apps::CHANGE_TIMEOUT, || {
        let apps = apps.clone();
        async move {
            match apps.get_opt("ingress").await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;

    // And nothing beyond: no Secrets, no workloads of its own.
    let restricted = client_from(&as_controller).await;
    let secrets: Api<Secret> = Api::namespaced(restricted.clone(), &env.namespace);
    let denied = secrets
        .list(&ListParams::default())
        .await
        .expect_err("the controller may list Secrets");
    assert!(denied.to_string().contains("forbidden"), "{denied}");
    // Not even one by name: the Secrets a check reads are granted per
    // namespace, by a RoleBinding the namespace's owner makes.
    let denied = secrets.get("anything").await.expect_err("the controller may read Secrets");
    assert!(denied.to_string().contains("forbidden"), "{denied}");
    let deployments: Api<Deployment> = Api::namespaced(restricted, &env.namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "not-allowed" },
        "spec": { "selector": { "matchLabels": { "a": "b" } },
                  "template": { "metadata": { "labels": { "a": "b" } },
                                "spec": { "containers": [{ "name": "c", "image": "x" }] } } }
    }))?;
    let denied = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect_err("the controller may create Deployments");
    assert!(denied.to_string().contains("forbidden"), "{denied}");
    env.cleanup().await;
    Ok(())
}
