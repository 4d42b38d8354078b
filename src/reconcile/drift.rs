//! Drift: whether an owned HelmRelease still holds what this controller
//! wrote. Our spec-hash annotation says what we last wrote, not what the
//! release holds now: a `kubectl edit` leaves the annotation as it was. So
//! the fields we write are compared with the live object, and a release
//! that lost one of them is written again.
//!
//! Only what we write is compared, as a subset: the API server defaults
//! fields we never set (`chart.spec.version`, `uninstall.deletionPropagation`)
//! and other managers may add their own; neither is drift. A `null` we write
//! (to drop a chart default) matches a field that is absent.

use serde_json::Value;

use crate::api::naming;

/// Values longer than this, as JSON, are kept in the watch cache as their
/// hash alone ([`values_digest`]): a release may carry a megabyte of
/// values, and the cache holds every owned release of every application.
pub const VALUES_KEPT_BYTES: usize = 16 * 1024;

/// The key of the object that stands in the cache for values too large to
/// keep, holding their digest.
pub const VALUES_DIGEST_KEY: &str = "$apps.fanout.dev/values-sha256";

/// A digest of values, nulls dropped (a null we write is an absent key
/// once stored), keys in order (serde_json's map is sorted).
pub fn values_digest(values: &Value) -> String {
    fn without_nulls(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), without_nulls(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
            other => other.clone(),
        }
    }
    naming::hex_prefix(&[&without_nulls(values).to_string()], 64)
}

/// Values as the cache keeps them: as they are, or their digest when large.
pub fn kept_values(values: Value) -> Value {
    let large = serde_json::to_string(&values).map_or(true, |text| text.len() > VALUES_KEPT_BYTES);
    match large {
        true => serde_json::json!({ VALUES_DIGEST_KEY: values_digest(&values) }),
        false => values,
    }
}

/// Annotations that change on every write by design, so never drift.
const UNCOMPARED_ANNOTATIONS: &[&str] = &[naming::ANNOTATION_WRITTEN_AT, naming::ANNOTATION_RESUMED_AT];

/// What [`first_difference`] reads of a live release: its labels,
/// annotations and spec. The watch cache keeps this much of each release
/// it must compare, not its status or the rest of its metadata, which
/// planning reads once as the release enters the cache.
pub fn compared_part(live: &Value) -> Value {
    let metadata = &live["metadata"];
    let mut part = serde_json::json!({ "metadata": {} });
    for section in ["labels", "annotations"] {
        if let Some(entries) = metadata.get(section).filter(|v| !v.is_null()) {
            part["metadata"][section] = entries.clone();
        }
    }
    if let Some(spec) = live.get("spec") {
        part["spec"] = spec.clone();
    }
    part
}

/// The first field of `desired` (a HelmRelease as we would apply it) that
/// `live` (the release as the API server holds it) does not hold, as a
/// path such as `spec.values.controller.replicas`; `None` when it holds
/// them all.
pub fn first_difference(desired: &Value, live: &Value) -> Option<String> {
    let metadata = &desired["metadata"];
    for (section, value) in [
        ("labels", &metadata["labels"]),
        ("annotations", &metadata["annotations"]),
    ] {
        let Some(entries) = value.as_object() else {
            continue;
        };
        for (key, want) in entries {
            if section == "annotations" && UNCOMPARED_ANNOTATIONS.contains(&key.as_str()) {
                continue;
            }
            if live.pointer(&format!("/metadata/{section}")).and_then(|m| m.get(key)) != Some(want) {
                return Some(format!("metadata.{section}.{key}"));
            }
        }
    }
    differs(&desired["spec"], live.get("spec"), "spec")
}

fn differs(want: &Value, have: Option<&Value>, path: &str) -> Option<String> {
    // Large values, kept as a digest: compared whole, by digest (then
    // keys another manager added count as a change too).
    if let Some(digest) = have.and_then(|h| h.get(VALUES_DIGEST_KEY)).filter(|_| path == "spec.values") {
        return (digest.as_str() != Some(values_digest(want).as_str())).then(|| path.to_string());
    }
    match (want, have) {
        (Value::Null, None | Some(Value::Null)) => None,
        (Value::Object(want), Some(Value::Object(have))) => want
            .iter()
            .find_map(|(key, value)| differs(value, have.get(key), &format!("{path}.{key}"))),
        // Items of a list are compared as subsets too: the API server may
        // default a field inside one.
        (Value::Array(want), Some(Value::Array(have))) if want.len() == have.len() => want
            .iter()
            .zip(have)
            .enumerate()
            .find_map(|(i, (w, h))| differs(w, Some(h), &format!("{path}[{i}]"))),
        (want, Some(have)) if want == have => None,
        _ => Some(path.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn desired() -> Value {
        json!({
            "metadata": {
                "name": "gw-hz", "labels": { "app.kubernetes.io/managed-by": "nodepool-fanout" },
                "annotations": { "apps.fanout.dev/spec-hash": "abc", "apps.fanout.dev/written-at": "2030-01-01T00:00:00Z" }
            },
            "spec": {
                "interval": "10m",
                "chart": { "spec": { "chart": "gw", "sourceRef": { "kind": "HelmRepository", "name": "r" } } },
                "values": { "replicas": 2, "drop": null, "list": [1, 2] },
                "postRenderers": [{ "kustomize": { "patches": [{ "patch": "p" }] } }]
            }
        })
    }

    /// As the API server returns it: defaults filled in, other managers'
    /// fields and status added, the `null` dropped, a newer write time.
    fn live() -> Value {
        let mut live = desired();
        live["metadata"]["annotations"]["apps.fanout.dev/written-at"] = json!("2031-01-01T00:00:00Z");
        live["metadata"]["labels"]["team"] = json!("edge");
        live["metadata"]["resourceVersion"] = json!("42");
        live["spec"]["chart"]["spec"]["version"] = json!("*");
        live["spec"]["chart"]["spec"]["reconcileStrategy"] = json!("ChartVersion");
        live["spec"]["values"].as_object_mut().unwrap().remove("drop");
        live["spec"]["postRenderers"][0]["kustomize"]["patches"][0]["target"] =
            json!({ "kind": "Deployment" });
        live["status"] = json!({ "observedGeneration": 3 });
        live
    }

    #[test]
    fn large_values_kept_as_a_digest_still_show_a_changed_value() {
        let mut want = desired();
        want["spec"]["values"]["blob"] = json!("x".repeat(VALUES_KEPT_BYTES));
        let mut live = want.clone();
        live["spec"]["values"] = kept_values(live["spec"]["values"].clone());
        assert!(live["spec"]["values"].get(VALUES_DIGEST_KEY).is_some(), "kept as a digest");
        // Stored, the null we wrote is gone: no change.
        assert_eq!(first_difference(&want, &live), None);
        let mut edited = want.clone();
        edited["spec"]["values"]["replicas"] = json!(3);
        edited["spec"]["values"] = kept_values(edited["spec"]["values"].clone());
        assert_eq!(first_difference(&want, &edited), Some("spec.values".into()));
        // Small values are kept as they are.
        assert_eq!(kept_values(json!({ "a": 1 })), json!({ "a": 1 }));
    }

    #[test]
    fn a_release_at_rest_has_no_drift() {
        assert_eq!(first_difference(&desired(), &live()), None);
        assert_eq!(first_difference(&desired(), &desired()), None);
        let kept = compared_part(&live());
        assert_eq!(first_difference(&desired(), &kept), None);
        assert_eq!(kept.as_object().map(|m| m.len()), Some(2), "metadata and spec, no status: {kept}");
        assert_eq!(kept["metadata"].as_object().map(|m| m.len()), Some(2), "labels, annotations: {kept}");
    }

    #[test]
    fn a_hand_edit_of_any_field_we_write_is_drift_named_by_its_path() {
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("spec.values.replicas", Box::new(|l| l["spec"]["values"]["replicas"] = json!(5))),
            (
                "spec.values.replicas",
                Box::new(|l| {
                    l["spec"]["values"].as_object_mut().unwrap().remove("replicas");
                }),
            ),
            ("spec.values.drop", Box::new(|l| l["spec"]["values"]["drop"] = json!("set by hand"))),
            ("spec.values.list", Box::new(|l| l["spec"]["values"]["list"] = json!([1]))),
            ("spec.values.list[1]", Box::new(|l| l["spec"]["values"]["list"] = json!([1, 3]))),
            ("spec.interval", Box::new(|l| l["spec"]["interval"] = json!("1h"))),
            ("spec.postRenderers", Box::new(|l| l["spec"]["postRenderers"] = json!([]))),
            (
                "spec.postRenderers[0].kustomize.patches[0].patch",
                Box::new(|l| l["spec"]["postRenderers"][0]["kustomize"]["patches"][0]["patch"] = json!("q")),
            ),
            (
                "spec",
                Box::new(|l| {
                    l.as_object_mut().unwrap().remove("spec");
                }),
            ),
            (
                "metadata.labels.app.kubernetes.io/managed-by",
                Box::new(|l| l["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("someone")),
            ),
            (
                "metadata.annotations.apps.fanout.dev/spec-hash",
                Box::new(|l| {
                    l["metadata"]["annotations"]
                        .as_object_mut()
                        .unwrap()
                        .remove("apps.fanout.dev/spec-hash");
                }),
            ),
        ];
        for (path, edit) in cases {
            let mut l = live();
            edit(&mut l);
            assert_eq!(first_difference(&desired(), &l).as_deref(), Some(path), "{l}");
            // What the cache keeps of it finds the same.
            assert_eq!(first_difference(&desired(), &compared_part(&l)).as_deref(), Some(path), "{l}");
        }
    }

    #[test]
    fn a_field_someone_else_added_is_no_drift() {
        let mut l = live();
        l["spec"]["values"]["extra"] = json!("theirs");
        l["spec"]["suspend"] = json!(true);
        assert_eq!(first_difference(&desired(), &l), None);
    }
}
