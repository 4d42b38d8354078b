//! Placement: the kustomize post-renderer that pins every pod template of
//! a pool's release to the pool's nodes, whatever the chart's values say.

use serde_json::{json, Value};

use crate::api::Placement;
use crate::pools::Pool;

use super::{to_json, FieldError};

/// One kustomize post-renderer pinning every pod template of the chart to
/// the pool. It catches workloads whose chart has no nodeSelector value, and
/// merges with any nodeSelector the chart sets rather than replacing it.
pub fn post_renderers(placement: &Placement, pool: &Pool) -> Result<Value, FieldError> {
    let mut pod_spec = json!({ "nodeSelector": pool.placed_by(placement.node_label.as_deref()) });
    if !placement.tolerations.is_empty() {
        pod_spec["tolerations"] = to_json("placement.tolerations", &placement.tolerations)?;
    }
    let template = json!({ "template": { "spec": pod_spec } });
    let body = |api_version: &str, kind: &str, spec: Value| json!({ "apiVersion": api_version, "kind": kind, "metadata": { "name": "pool-placement" }, "spec": spec });
    // Kinds match whole (kustomize anchors the pattern); a target without
    // a group matches the kind in any group, and only the core group has
    // Pods and ReplicationControllers.
    let mut patches = vec![
        patch(
            json!({ "group": "apps", "kind": "(Deployment|StatefulSet|DaemonSet|ReplicaSet)" }),
            &body("apps/v1", "Deployment", template.clone()),
        )?,
        patch(json!({ "group": "batch", "kind": "Job" }), &body("batch/v1", "Job", template.clone()))?,
        patch(
            json!({ "group": "batch", "kind": "CronJob" }),
            &body("batch/v1", "CronJob", json!({ "jobTemplate": { "spec": template } })),
        )?,
        patch(
            json!({ "version": "v1", "kind": "ReplicationController" }),
            &body("v1", "ReplicationController", template),
        )?,
        // Bare Pods: Helm test hooks, and charts that render a Pod.
        patch(json!({ "version": "v1", "kind": "Pod" }), &body("v1", "Pod", pod_spec.clone()))?,
    ];
    for (i, workload) in placement.workloads.iter().enumerate() {
        let field = format!("placement.workloads[{i}]");
        let path = workload.pod_template_path.as_deref().unwrap_or("spec.template");
        let mut nested = json!({ "spec": pod_spec.clone() });
        for segment in path.split('.').rev() {
            nested = json!({ segment: nested });
        }
        let (group, version) = match workload.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", workload.api_version.as_str()),
        };
        let mut object = json!({ "apiVersion": workload.api_version, "kind": workload.kind,
            "metadata": { "name": "pool-placement" } });
        if let (Some(object), Value::Object(nested)) = (object.as_object_mut(), nested) {
            if nested.contains_key("apiVersion")
                || nested.contains_key("kind")
                || nested.contains_key("metadata")
            {
                return Err(FieldError::new(
                    format!("{field}.podTemplatePath"),
                    "must lead below the object's apiVersion, kind and metadata, e.g. spec.template",
                ));
            }
            object.extend(nested);
        }
        let target = json!({ "group": group, "version": version, "kind": workload.kind });
        patches.push(patch(target, &object)?);
    }
    Ok(json!([{ "kustomize": { "patches": patches } }]))
}

/// Patches are YAML text, as Flux users write them, so `kubectl get -o yaml`
/// shows them readably.
fn patch(target: Value, body: &Value) -> Result<Value, FieldError> {
    let text = serde_saphyr::to_string(body)
        .map_err(|e| FieldError::new("placement", format!("cannot write the placement patch: {e}")))?;
    Ok(json!({ "target": target, "patch": text }))
}
