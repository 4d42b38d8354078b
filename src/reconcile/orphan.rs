//! Orphaning: with `deletionPolicy: Orphan`, a release this application no
//! longer wants is left running as a plain Flux HelmRelease of its own
//! instead of being deleted. Pure: what to patch onto the release.
//!
//! An orphaned release must stand on its own. It loses every mark of our
//! ownership (the owner reference, so the garbage collector keeps it; our
//! labels and annotations, so no application, not even a new one of the same
//! name, takes it for its own), and a `chartRef` to our shared HelmChart,
//! which goes when the application does, becomes the equivalent
//! `chart.spec`: Flux then keeps a HelmChart for it as for any release.
//! The chart and values are unchanged, so helm-controller sees the Helm
//! release in sync and upgrades nothing.

use serde_json::{json, Map, Value};

use crate::api::naming;
use crate::chart::shared::ANNOTATION_PINNED_FROM;

/// Says which application a release was orphaned from, for the person who
/// finds it later.
pub const ANNOTATION_ORPHANED_FROM: &str = "apps.fanout.dev/orphaned-from";

/// The JSON merge patch that orphans `release` (a HelmRelease as the API
/// server returned it), owned by the application `namespace/app` of `uid`.
/// `chart` is the shared HelmChart its `chartRef` points at, if it has one
/// and it is known.
pub fn patch(release: &Value, app: &str, uid: &str, chart: Option<&Value>) -> Value {
    let others: Vec<Value> = release
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|o| o["uid"] != uid)
        .cloned()
        .collect();
    let namespace = release.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let mut annotations = Map::new();
    for key in [
        naming::ANNOTATION_POOL_NAME,
        naming::ANNOTATION_SPEC_HASH,
        naming::ANNOTATION_WRITTEN_AT,
        naming::ANNOTATION_RESUMED_AT,
        naming::ANNOTATION_READY_AT,
    ] {
        annotations.insert(key.to_string(), Value::Null);
    }
    annotations.insert(ANNOTATION_ORPHANED_FROM.to_string(), json!(format!("{namespace}/{app}")));
    let mut labels = Map::new();
    for key in [naming::LABEL_APPLICATION, naming::LABEL_POOL] {
        labels.insert(key.to_string(), Value::Null);
    }
    // Only our own managed-by: another manager's value is theirs.
    if release.pointer("/metadata/labels").and_then(|l| l.get(naming::LABEL_MANAGED_BY))
        == Some(&json!(naming::MANAGER))
    {
        labels.insert(naming::LABEL_MANAGED_BY.to_string(), Value::Null);
    }
    let mut patch = json!({
        "metadata": {
            // A merge patch replaces a list whole: the others are kept.
            "ownerReferences": if others.is_empty() { Value::Null } else { Value::Array(others) },
            "labels": labels,
            "annotations": annotations,
        }
    });
    match chart {
        // A pinned OCIRepository goes with the application: the release
        // follows the user's, which it was pinned from, as it would
        // without nodepool-fanout.
        Some(pinned) if pinned["kind"] == "OCIRepository" => {
            if let Some(source) = pinned
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(ANNOTATION_PINNED_FROM))
                .and_then(Value::as_str)
            {
                let namespace = pinned.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null);
                patch["spec"] = json!({ "chartRef": { "kind": "OCIRepository", "name": source, "namespace": namespace } });
            }
        }
        _ => {
            if let Some(template) = chart.and_then(chart_template) {
                patch["spec"] = json!({ "chartRef": null, "chart": template });
            }
        }
    }
    patch
}

/// A HelmChart's spec as the `chart` of a HelmRelease
/// (`HelmChartTemplateSpec`): the same fields, with the source's namespace
/// spelt out, since the chart lived beside its source.
pub fn chart_template(helmchart: &Value) -> Option<Value> {
    let spec = helmchart.get("spec")?.as_object()?;
    let namespace = helmchart.pointer("/metadata/namespace")?.as_str()?;
    let mut template = Map::new();
    for key in [
        "chart",
        "version",
        "interval",
        "reconcileStrategy",
        "valuesFiles",
        "ignoreMissingValuesFiles",
        "verify",
    ] {
        if let Some(value) = spec.get(key) {
            template.insert(key.to_string(), value.clone());
        }
    }
    template.get("chart")?;
    let source = spec.get("sourceRef")?;
    template.insert(
        "sourceRef".to_string(),
        json!({ "kind": source.get("kind")?, "name": source.get("name")?, "namespace": namespace }),
    );
    Some(json!({ "spec": template }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release() -> Value {
        json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {
                "name": "gw-hz-1234", "namespace": "edge",
                "labels": { naming::LABEL_APPLICATION: "gw", naming::LABEL_POOL: "hz",
                            naming::LABEL_MANAGED_BY: naming::MANAGER, "team": "edge" },
                "annotations": { naming::ANNOTATION_POOL_NAME: "hz", naming::ANNOTATION_SPEC_HASH: "abc",
                                 naming::ANNOTATION_WRITTEN_AT: "2030-01-01T00:00:00Z", "note": "kept" },
                "ownerReferences": [
                    { "kind": "NodePoolApplication", "name": "gw", "uid": "u1", "controller": true },
                    { "kind": "ConfigMap", "name": "other", "uid": "u2" }
                ]
            },
            "spec": { "chartRef": { "kind": "HelmChart", "name": "gw-1.0.0", "namespace": "flux-system" },
                      "values": { "a": 1 } }
        })
    }

    fn helmchart() -> Value {
        json!({
            "metadata": { "name": "gw-1.0.0", "namespace": "flux-system" },
            "spec": { "chart": "ingress-gateway", "version": "1.0.0", "interval": "10m",
                      "reconcileStrategy": "ChartVersion", "valuesFiles": ["values-edge.yaml"],
                      "sourceRef": { "kind": "HelmRepository", "name": "fixtures" } }
        })
    }

    /// What the API server makes of a merge patch (RFC 7386).
    fn merge(target: &mut Value, patch: &Value) {
        match (target, patch) {
            (Value::Object(t), Value::Object(p)) => {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            (t, p) => *t = p.clone(),
        }
    }

    #[test]
    fn every_mark_of_ownership_goes_and_nothing_else() {
        let mut r = release();
        merge(&mut r, &patch(&release(), "gw", "u1", Some(&helmchart())));
        let m = &r["metadata"];
        assert_eq!(m["ownerReferences"], json!([{ "kind": "ConfigMap", "name": "other", "uid": "u2" }]));
        assert_eq!(m["labels"], json!({ "team": "edge" }));
        assert_eq!(m["annotations"], json!({ "note": "kept", ANNOTATION_ORPHANED_FROM: "edge/gw" }));
        assert_eq!(r["spec"]["values"], json!({ "a": 1 }), "values untouched");
    }

    #[test]
    fn the_shared_chart_becomes_the_releases_own() {
        let mut r = release();
        merge(&mut r, &patch(&release(), "gw", "u1", Some(&helmchart())));
        assert!(r["spec"].get("chartRef").is_none());
        assert_eq!(
            r["spec"]["chart"],
            json!({ "spec": { "chart": "ingress-gateway", "version": "1.0.0", "interval": "10m",
                "reconcileStrategy": "ChartVersion", "valuesFiles": ["values-edge.yaml"],
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } })
        );
    }

    #[test]
    fn without_a_known_chart_the_spec_is_left_alone() {
        let p = patch(&release(), "gw", "u1", None);
        assert!(p.get("spec").is_none());
        let mut only_owner = release();
        only_owner["metadata"]["ownerReferences"] = json!([{ "kind": "NodePoolApplication", "uid": "u1" }]);
        assert_eq!(patch(&only_owner, "gw", "u1", None)["metadata"]["ownerReferences"], Value::Null);
    }

    #[test]
    fn another_managers_label_is_not_ours_to_remove() {
        let mut r = release();
        r["metadata"]["labels"][naming::LABEL_MANAGED_BY] = json!("someone-else");
        let p = patch(&r, "gw", "u1", None);
        assert!(p["metadata"]["labels"].get(naming::LABEL_MANAGED_BY).is_none());
    }

    #[test]
    fn a_chart_without_name_or_source_gives_no_template() {
        assert!(chart_template(&json!({ "metadata": { "namespace": "x" }, "spec": { "version": "1" } }))
            .is_none());
        assert!(
            chart_template(&json!({ "metadata": { "namespace": "x" }, "spec": { "chart": "c" } })).is_none()
        );
    }

    #[test]
    fn a_release_of_a_pinned_oci_chart_follows_the_users_ocirepository() {
        let mut r = release();
        r["spec"]["chartRef"] =
            json!({ "kind": "OCIRepository", "name": "gw-podinfo-1a2b3c4d", "namespace": "flux-system" });
        let pinned = json!({
            "kind": "OCIRepository",
            "metadata": { "name": "gw-podinfo-1a2b3c4d", "namespace": "flux-system",
                          "annotations": { ANNOTATION_PINNED_FROM: "podinfo" } },
            "spec": { "url": "oci://registry/charts/podinfo", "ref": { "digest": "sha256:abc" } }
        });
        let p = patch(&r, "gw", "u1", Some(&pinned));
        assert_eq!(
            p["spec"],
            json!({ "chartRef": { "kind": "OCIRepository", "name": "podinfo", "namespace": "flux-system" } }),
            "the pinned copy goes with the application; the release names the user's source"
        );
        let mut unmarked = pinned.clone();
        unmarked["metadata"]["annotations"] = json!({});
        assert!(
            patch(&r, "gw", "u1", Some(&unmarked)).get("spec").is_none(),
            "nothing to point at: unchanged"
        );
    }
}
