//! `render --check-isolation`: every pool's manifests as Helm renders them
//! (`helm template`, the `helm` on the user's PATH), checked before Git for
//! what would break "one instance per pool":
//!
//! - an object two pools' releases would both hold (a fixed name: an
//!   IngressClass, a ClusterRole, a CRD, a namespaced object when pools
//!   share a namespace), named with the values key that sets its name when
//!   one does;
//! - a pod the placement would not pin to its pool (a kind it does not
//!   know), or one that names its node itself (`nodeName` wins over any
//!   nodeSelector).
//!
//! The manifests are read as helm-controller applies them: hooks and test
//! Pods included, CRDs from `crds/` included.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::api::Placement;
use crate::reconcile::isolation::{self, ObjectId};
use crate::values::merge as values;

/// Why the check could not run.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(
        "the isolation check runs `{helm} template`, which could not start ({source}): install Helm, \
         or name its binary with --helm"
    )]
    HelmMissing { helm: String, source: std::io::Error },
    #[error("`helm template` failed for pool {pool}: {message}")]
    Template { pool: String, message: String },
    #[error("the manifests Helm rendered for pool {pool} are not valid YAML: {source}")]
    Output {
        pool: String,
        source: Box<serde_saphyr::Error>,
    },
}

/// One pool's release, rendered by Helm.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedPool {
    pub pool: String,
    /// The namespace Helm installs into: the release's target namespace.
    pub namespace: String,
    /// The values Helm used: the chart's defaults with the release's over them.
    pub values: Value,
    pub objects: Vec<Value>,
}

/// What the check found: each error fails `render`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// Renders each release with `helm template`, as helm-controller would
/// install it. `releases` are the HelmReleases `render` built, `chart` the
/// chart's directory or package and `defaults` its values.
pub fn render_with_helm(
    helm: &Path,
    chart: &Path,
    releases: &[Value],
    defaults: &Value,
) -> Result<(Vec<RenderedPool>, Vec<String>), CheckError> {
    let mut rendered = Vec::new();
    let mut warnings = Vec::new();
    for release in releases {
        let text = |pointer: &str| release.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
        let pool = text("/metadata/annotations/apps.fanout.dev~1pool-name").to_string();
        let namespace = match text("/spec/targetNamespace") {
            "" => text("/metadata/namespace"),
            target => target,
        };
        if release.pointer("/spec/valuesFrom").is_some() {
            warnings.push(format!(
                "pool {pool}: valuesFrom is not read by the check (it names objects in the cluster); \
                 names set only there are not seen"
            ));
        }
        let release_values = release
            .pointer("/spec/values")
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default()));
        let objects =
            helm_template(helm, chart, text("/spec/releaseName"), namespace, &release_values, &pool)?;
        let values = values::merge(defaults, &release_values, "values").unwrap_or(release_values);
        rendered.push(RenderedPool {
            pool,
            namespace: namespace.to_string(),
            values,
            objects,
        });
    }
    Ok((rendered, warnings))
}

fn helm_template(
    helm: &Path,
    chart: &Path,
    release: &str,
    namespace: &str,
    values: &Value,
    pool: &str,
) -> Result<Vec<Value>, CheckError> {
    let mut child = Command::new(helm)
        .args(["template", release])
        .arg(chart)
        .args(["--namespace", namespace, "--include-crds", "--values", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| CheckError::HelmMissing {
            helm: helm.display().to_string(),
            source,
        })?;
    let failed = |message: String| CheckError::Template {
        pool: pool.to_string(),
        message,
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(values.to_string().as_bytes()).map_err(|e| failed(e.to_string()))?;
    }
    let output = child.wait_with_output().map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        return Err(failed(String::from_utf8_lossy(&output.stderr).trim().to_string()));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let documents: Vec<Value> =
        crate::chart::yaml::from_multiple(&text).map_err(|source| CheckError::Output {
            pool: pool.to_string(),
            source: Box::new(source),
        })?;
    Ok(documents.into_iter().filter(|d| d.get("kind").is_some()).collect())
}

/// Kinds Kubernetes serves cluster-wide: an object of one of them is the
/// same object whatever namespace its release installs into.
const CLUSTER_SCOPED: &[&str] = &[
    "APIService",
    "CSIDriver",
    "CSINode",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "FlowSchema",
    "GatewayClass",
    "IngressClass",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "MutatingWebhookConfiguration",
    "Namespace",
    "Node",
    "PersistentVolume",
    "PriorityClass",
    "PriorityLevelConfiguration",
    "RuntimeClass",
    "StorageClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
    "VolumeAttachment",
    "VolumeSnapshotClass",
];

/// An object's id as helm-controller's inventory writes it.
fn object_id(object: &Value, release_namespace: &str) -> Option<String> {
    let kind = object.get("kind")?.as_str()?;
    let name = object.pointer("/metadata/name")?.as_str()?;
    let group = object.get("apiVersion")?.as_str()?.rsplit_once('/').map_or("", |(group, _)| group);
    let namespace = match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(namespace) => namespace,
        None if CLUSTER_SCOPED.contains(&kind) => "",
        None => release_namespace,
    };
    Some(format!("{namespace}_{}_{group}_{kind}", name.replace(':', "__")))
}

/// Every dotted path in `values` whose value is the string `wanted`.
fn paths_holding(values: &Value, wanted: &str) -> Vec<String> {
    fn walk(value: &Value, path: &str, wanted: &str, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    let path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    walk(value, &path, wanted, found);
                }
            }
            Value::String(s) if s == wanted => found.push(path.to_string()),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(values, "", wanted, &mut found);
    found
}

/// The pod specs an object carries, by dotted path: a Pod's own spec, and
/// every map below it that holds a `containers` list.
fn pod_specs(object: &Value) -> Vec<(String, &Value)> {
    fn walk<'a>(value: &'a Value, path: &str, found: &mut Vec<(String, &'a Value)>) {
        let Value::Object(map) = value else { return };
        if map.get("containers").is_some_and(Value::is_array) {
            found.push((path.to_string(), value));
            return;
        }
        for (key, value) in map {
            walk(value, &format!("{path}.{key}"), found);
        }
    }
    let mut found = Vec::new();
    if let Some(spec) = object.get("spec") {
        walk(spec, "spec", &mut found);
    }
    found
}

/// Where the placement's post-renderer puts the pool's nodeSelector in an
/// object of this apiVersion and kind, if it pins that kind at all.
fn pinned_at(api_version: &str, kind: &str, placement: &Placement) -> Option<String> {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let built_in = match (group, kind) {
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") => Some("spec.template.spec"),
        ("batch", "Job") | ("", "ReplicationController") => Some("spec.template.spec"),
        ("batch", "CronJob") => Some("spec.jobTemplate.spec.template.spec"),
        ("", "Pod") => Some("spec"),
        _ => None,
    };
    built_in.map(str::to_string).or_else(|| {
        placement
            .workloads
            .iter()
            .find(|w| w.kind == kind && w.api_version == api_version)
            .map(|w| format!("{}.spec", w.pod_template_path.as_deref().unwrap_or("spec.template")))
    })
}

/// What would break one instance per pool, across the rendered pools.
pub fn check(rendered: &[RenderedPool], placement: &Placement) -> Findings {
    let ids: Vec<(&str, Vec<String>)> = rendered
        .iter()
        .map(|r| (r.pool.as_str(), r.objects.iter().filter_map(|o| object_id(o, &r.namespace)).collect()))
        .collect();
    let shared = isolation::shared_objects(ids.iter().map(|(pool, ids)| (*pool, ids.as_slice())));
    let mut findings = Findings::default();
    for (id, pools) in &shared {
        let object = ObjectId::parse(id).map_or_else(|| id.to_string(), |o| o.to_string());
        let name = ObjectId::parse(id).map(|o| o.name).unwrap_or_default();
        let keys: Vec<String> = rendered
            .iter()
            .find(|r| r.pool == pools[0])
            .map(|r| paths_holding(&r.values, &name))
            .unwrap_or_default();
        let fix = match keys.as_slice() {
            [] => "make its name unique per pool (no value holds it: the chart fixes it, or builds it \
                   from more than one value), or give each pool its own targetNamespace"
                .to_string(),
            keys => format!(
                "set {} per pool, e.g. with a {{{{pool.name}}}} template, or give each pool its own \
                 targetNamespace",
                keys.join(" or ")
            ),
        };
        findings
            .errors
            .push(format!("{object} would be in the releases of pools {}: {fix}", pools.join(", ")));
    }
    for r in rendered {
        for object in &r.objects {
            let text = |key: &str| object.get(key).and_then(Value::as_str).unwrap_or_default();
            let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            let pinned = pinned_at(text("apiVersion"), text("kind"), placement);
            for (path, spec) in pod_specs(object) {
                let what = format!("pool {}: {} {name}", r.pool, text("kind"));
                if pinned.as_deref() != Some(path.as_str()) {
                    let template = path.strip_suffix(".spec").unwrap_or(&path);
                    findings.errors.push(format!(
                        "{what} carries pods at {path} that placement does not pin to the pool: name \
                         it in placement.workloads (apiVersion: {}, kind: {}, podTemplatePath: {template})",
                        text("apiVersion"),
                        text("kind")
                    ));
                } else if spec.get("nodeName").is_some_and(|n| !n.is_null()) {
                    findings.errors.push(format!(
                        "{what} sets {path}.nodeName, which wins over the pool's nodeSelector: clear it \
                         in the values"
                    ));
                }
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class(name: &str) -> Value {
        json!({ "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": { "name": name } })
    }

    fn config(name: &str) -> Value {
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name } })
    }

    fn deployment(name: &str) -> Value {
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": name },
            "spec": { "template": { "spec": { "containers": [{ "name": "c" }] } } } })
    }

    fn pool(name: &str, namespace: &str, values: Value, objects: Vec<Value>) -> RenderedPool {
        RenderedPool {
            pool: name.into(),
            namespace: namespace.into(),
            values,
            objects,
        }
    }

    #[test]
    fn an_object_two_pools_would_hold_is_named_with_the_value_that_names_it() {
        let values = json!({ "controller": { "ingressClassResource": { "name": "nginx" } } });
        let rendered = [
            pool("a", "edge", values.clone(), vec![class("nginx"), config("a-config")]),
            pool("b", "edge", values, vec![class("nginx"), config("b-config")]),
        ];
        let findings = check(&rendered, &Placement::default());
        assert_eq!(
            findings.errors,
            [
                "IngressClass.networking.k8s.io nginx (cluster-scoped) would be in the releases of pools a, b: \
                 set controller.ingressClassResource.name per pool, e.g. with a {{pool.name}} template, or \
                 give each pool its own targetNamespace"
            ]
        );
    }

    #[test]
    fn namespaced_objects_collide_only_in_one_namespace() {
        let apart = [
            pool("a", "edge-a", json!({}), vec![config("fixed")]),
            pool("b", "edge-b", json!({}), vec![config("fixed")]),
        ];
        assert_eq!(check(&apart, &Placement::default()), Findings::default());
        let together = [
            pool("a", "edge", json!({}), vec![config("fixed")]),
            pool("b", "edge", json!({}), vec![config("fixed")]),
        ];
        let findings = check(&together, &Placement::default());
        assert_eq!(findings.errors.len(), 1);
        assert!(findings.errors[0].starts_with("ConfigMap edge/fixed would be in the releases of pools a, b"));
        assert!(findings.errors[0].contains("no value holds it"), "{}", findings.errors[0]);
        // A namespace the chart writes wins over the release's.
        let mut pinned = config("fixed");
        pinned["metadata"]["namespace"] = json!("kube-system");
        let written = [
            pool("a", "edge-a", json!({}), vec![pinned.clone()]),
            pool("b", "edge-b", json!({}), vec![pinned]),
        ];
        assert!(check(&written, &Placement::default()).errors[0].starts_with("ConfigMap kube-system/fixed"));
    }

    #[test]
    fn pods_of_kinds_placement_does_not_know_are_reported_with_the_fix() {
        let rollout = json!({ "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": { "name": "r" },
            "spec": { "template": { "spec": { "containers": [] } } } });
        let test_pod = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "t" },
            "spec": { "containers": [] } });
        let cron = json!({ "apiVersion": "batch/v1", "kind": "CronJob", "metadata": { "name": "c" },
            "spec": { "jobTemplate": { "spec": { "template": { "spec": { "containers": [] } } } } } });
        let rendered = [pool(
            "a",
            "edge",
            json!({}),
            vec![deployment("d"), rollout, test_pod, cron],
        )];
        let findings = check(&rendered, &Placement::default());
        assert_eq!(
            findings.errors,
            ["pool a: Rollout r carries pods at spec.template.spec that placement does not pin to the pool: \
              name it in placement.workloads (apiVersion: argoproj.io/v1alpha1, kind: Rollout, \
              podTemplatePath: spec.template)"]
        );
        let placement: Placement = serde_json::from_value(json!({ "workloads": [
            { "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout" }
        ] }))
        .unwrap();
        assert_eq!(check(&rendered, &placement), Findings::default());
    }

    #[test]
    fn a_pod_that_names_its_node_is_reported() {
        let mut d = deployment("d");
        d["spec"]["template"]["spec"]["nodeName"] = json!("node-1");
        let findings = check(&[pool("a", "edge", json!({}), vec![d])], &Placement::default());
        assert_eq!(
            findings.errors,
            ["pool a: Deployment d sets spec.template.spec.nodeName, which wins over the pool's nodeSelector: \
              clear it in the values"]
        );
    }

    #[test]
    fn ids_match_helm_controllers_inventory() {
        assert_eq!(
            object_id(&class("nginx"), "edge").as_deref(),
            Some("_nginx_networking.k8s.io_IngressClass")
        );
        assert_eq!(object_id(&config("c"), "edge").as_deref(), Some("edge_c__ConfigMap"));
        let role = json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": "system:gw" } });
        assert_eq!(
            object_id(&role, "edge").as_deref(),
            Some("_system__gw_rbac.authorization.k8s.io_ClusterRole")
        );
    }

    #[test]
    fn a_missing_helm_says_what_to_do() {
        let error = render_with_helm(
            Path::new("/nonexistent/helm"),
            Path::new("."),
            &[json!({ "spec": { "releaseName": "r" } })],
            &json!({}),
        )
        .unwrap_err();
        assert!(error.to_string().contains("install Helm, or name its binary with --helm"), "{error}");
    }
}
