//! Every Kubernetes manifest of README.md and docs/ (the `yaml` blocks,
//! and the `yaml fragment` blocks completed into applications, as
//! `tests/support/docs.rs` says) applied to the local control plane with a
//! server-side dry run (`dryRun: All`) and strict field validation, in a
//! namespace of the test's own: the API server's own validation (the
//! CRDs' schemas, their CEL rules, built-in kinds' validation, RBAC's
//! escalation check) judges each, and nothing is stored. The offline
//! checks of the same blocks are in `tests/offline/docs.rs`.

#[path = "../support/docs.rs"]
mod blocks;

use kube::api::{DynamicObject, Patch, PatchParams, ValidationDirective};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Api, Client};
use serde_json::Value;

use crate::support::{ensure_crd, TestEnv, TestResult};

/// The field manager of the dry runs.
const MANAGER: &str = "nodepool-fanout-docs-test";

#[tokio::test(flavor = "multi_thread")]
async fn every_manifest_of_the_docs_passes_the_api_servers_validation() -> TestResult {
    let env = TestEnv::new("docs").await;
    ensure_crd(&env.client).await;
    let all = blocks::blocks();
    let unknown: Vec<String> = all
        .iter()
        .filter(|b| !blocks::KINDS.contains(&b.info.as_str()))
        .map(|b| b.place())
        .collect();
    assert!(unknown.is_empty(), "blocks of no known kind, which would not be applied: {unknown:?}");
    let manifests = blocks::manifests(&all)
        .unwrap_or_else(|errors| panic!("the docs' YAML blocks are broken:\n{}", errors.join("\n")));
    assert!(!manifests.is_empty(), "no manifest found in README.md and docs/");
    let mut errors = Vec::new();
    for (place, manifest) in &manifests {
        if let Err(e) = dry_run(&env.client, &env.namespace, manifest).await {
            errors.push(format!("{place}: {e}"));
        }
    }
    assert!(
        errors.is_empty(),
        "{} of {} manifests of the docs refused by the API server:\n{}",
        errors.len(),
        manifests.len(),
        errors.join("\n")
    );
    env.cleanup().await;
    Ok(())
}

/// Applies one manifest by server-side apply in dry-run mode, a namespaced
/// one in the test's namespace whatever namespace the docs give it.
async fn dry_run(client: &Client, namespace: &str, manifest: &Value) -> Result<(), String> {
    let field = |name: &str| manifest[name].as_str().unwrap_or_default().to_string();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    let gvk = GroupVersionKind::gvk(group, version, &kind);
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("the cluster serves no {api_version} {kind}: {e}"))?;
    let mut object = manifest.clone();
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Namespaced => {
            object["metadata"]["namespace"] = Value::String(namespace.to_string());
            Api::namespaced_with(client.clone(), namespace, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let params = PatchParams {
        dry_run: true,
        force: true,
        field_manager: Some(MANAGER.into()),
        field_validation: Some(ValidationDirective::Strict),
    };
    api.patch(&name, &params, &Patch::Apply(&object))
        .await
        .map(drop)
        .map_err(|e| format!("{kind} {name}: {e}"))
}
