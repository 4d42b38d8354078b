use super::*;
use crate::api::NodePoolApplication;

fn spec(extra: Value) -> NodePoolApplicationSpec {
    let mut base = json!({
        "pools": { "names": ["a"] },
        "chart": { "spec": { "chart": "ingress-gateway", "version": "^1.0",
            "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } },
        "interval": "10m"
    });
    for (k, v) in extra.as_object().unwrap() {
        base["chart"]["spec"][k] = v.clone();
    }
    serde_json::from_value(base).unwrap()
}

#[test]
fn one_name_per_version_in_the_source_namespace() {
    let s = spec(json!({}));
    let a = chart_ref(&s, "ingress", "edge", "1.0.0");
    let b = chart_ref(&s, "ingress", "edge", "1.1.0");
    assert_ne!(a.name, b.name);
    assert_eq!(a.namespace, "flux-system");
    assert!(a.name.starts_with("ingress-ingress-gateway-"), "{}", a.name);
    assert_eq!(a, chart_ref(&s, "ingress", "edge", "1.0.0"), "stable");
    assert_ne!(a.name, chart_ref(&s, "ingress", "other", "1.0.0").name, "apps in other namespaces differ");
}

#[test]
fn long_names_fit_63_characters() {
    let s = spec(json!({ "chart": "a-chart-with-a-very-long-name-that-goes-on-and-on-and-on-forever" }));
    let r = chart_ref(&s, "an-application-with-a-long-name", "edge", "1.0.0");
    assert!(r.name.len() <= 63, "{} is {} long", r.name, r.name.len());
    assert!(!r.name.contains("--"));
}

#[test]
fn a_source_in_the_apps_namespace_by_default() {
    let mut s = spec(json!({}));
    s.chart.as_mut().unwrap().spec.source_ref.namespace = None;
    assert_eq!(chart_ref(&s, "ingress", "edge", "1.0.0").namespace, "edge");
}

#[test]
fn the_helmchart_pins_the_resolved_version() {
    let s = spec(json!({ "valuesFiles": ["values-edge.yaml"], "interval": "2m" }));
    let r = chart_ref(&s, "ingress", "edge", "1.0.0");
    let hc = helmchart(&s, "ingress", "edge", "1.0.0", &r);
    assert_eq!(hc["spec"]["version"], "1.0.0");
    assert_eq!(hc["spec"]["chart"], "ingress-gateway");
    assert_eq!(hc["spec"]["sourceRef"], json!({ "kind": "HelmRepository", "name": "fixtures" }));
    assert_eq!(hc["spec"]["interval"], "2m");
    assert_eq!(hc["spec"]["valuesFiles"], json!(["values-edge.yaml"]));
    assert_eq!(hc["metadata"]["labels"][LABEL_APPLICATION_NAMESPACE], "edge");
    assert_eq!(hc["metadata"]["labels"][naming::LABEL_APPLICATION], "ingress");
    let object: DynamicObject = serde_json::from_value(hc).unwrap();
    assert_eq!(owner_of(&object), Some(ObjectRef::<NodePoolApplication>::new("ingress").within("edge")));
}

#[test]
fn a_field_the_application_no_longer_sets_is_a_difference() {
    let with = spec(
        json!({ "valuesFiles": ["values.yaml", "values-edge.yaml"], "reconcileStrategy": "Revision",
        "ignoreMissingValuesFiles": true }),
    );
    let without = spec(json!({}));
    let r = chart_ref(&with, "ingress", "edge", "1.0.0");
    assert_eq!(r, chart_ref(&without, "ingress", "edge", "1.0.0"), "the same chart object");
    let stored = helmchart(&with, "ingress", "edge", "1.0.0", &r);
    let desired = helmchart(&without, "ingress", "edge", "1.0.0", &r);
    assert!(spec_matches(&stored, &stored));
    // Was: only the desired keys were compared, so nothing was written.
    assert!(!spec_matches(&desired, &stored));
    for field in ["valuesFiles", "ignoreMissingValuesFiles"] {
        let mut one_left = desired.clone();
        one_left["spec"][field] = stored["spec"][field].clone();
        assert!(!spec_matches(&desired, &one_left), "{field} left behind");
    }
    assert_eq!(desired["spec"]["reconcileStrategy"], "ChartVersion", "the default, written out");
    // What others set is not ours to compare.
    let mut verified = desired.clone();
    verified["spec"]["verify"] = json!({ "provider": "cosign" });
    assert!(spec_matches(&desired, &verified));
}

#[test]
fn a_shard_label_is_put_on_the_chart_and_its_change_is_written() {
    let s = spec(json!({}));
    let r = chart_ref(&s, "ingress", "edge", "1.0.0");
    let plain = helmchart(&s, "ingress", "edge", "1.0.0", &r);
    let sharded = with_shard(plain.clone(), Some("shard1"));
    assert_eq!(sharded["metadata"]["labels"][naming::LABEL_SHARD], "shard1");
    assert_eq!(with_shard(plain.clone(), None), plain);
    assert!(!spec_matches(&sharded, &plain), "a chart gaining the shard label is written");
    let mut theirs = sharded.clone();
    theirs["metadata"]["labels"]["team"] = json!("edge");
    assert!(spec_matches(&sharded, &theirs), "labels others add are theirs");
}

#[test]
fn cross_namespace_references_are_named() {
    let s = spec(json!({}));
    let found = cross_namespace_reference(&s, "edge").unwrap();
    assert!(found.contains("sourceRef") && found.contains("flux-system"), "{found}");
    assert_eq!(cross_namespace_reference(&s, "flux-system"), None);
    let mut local = s.clone();
    local.chart.as_mut().unwrap().spec.source_ref.namespace = None;
    assert_eq!(cross_namespace_reference(&local, "edge"), None);
    local.helm_release = Some(
        serde_json::from_value(json!({ "dependsOn": [
        { "name": "db" }, { "name": "cert-manager", "namespace": "infra" } ] }))
        .unwrap(),
    );
    let found = cross_namespace_reference(&local, "edge").unwrap();
    assert!(found.contains("dependsOn[1]") && found.contains("infra"), "{found}");
}

#[test]
fn only_helm_repositories_have_an_index() {
    assert!(needs_resolution(&spec(json!({}))));
    let git = spec(json!({ "sourceRef": { "kind": "GitRepository", "name": "repo" } }));
    assert!(!needs_resolution(&git));
}

#[test]
fn a_resolver_chart_is_apart_from_every_versions_chart() {
    let s = spec(json!({}));
    let resolver = resolver_ref(&s, "gw", "edge", "^1.0");
    assert_ne!(resolver, chart_ref(&s, "gw", "edge", "^1.0"));
    assert_ne!(resolver, chart_ref(&s, "gw", "edge", "1.0.0"));
    assert_ne!(resolver, resolver_ref(&s, "gw", "edge", "^2.0"));
    assert_eq!(resolver.namespace, "flux-system");
    assert!(resolver.name.len() <= 63);
}

#[test]
fn the_version_of_an_artifact_drops_an_oci_digest() {
    let chart = |revision: &str| json!({ "status": { "artifact": { "revision": revision } } });
    assert_eq!(artifact_version(&chart("1.2.0")).as_deref(), Some("1.2.0"));
    assert_eq!(artifact_version(&chart("1.2.0@sha256:abc")).as_deref(), Some("1.2.0"));
    assert_eq!(artifact_version(&chart("")), None);
    assert_eq!(artifact_version(&json!({ "status": {} })), None);
}

fn oci_spec() -> NodePoolApplicationSpec {
    serde_json::from_value(json!({
        "pools": { "names": ["a"] },
        "chartRef": { "kind": "OCIRepository", "name": "podinfo", "namespace": "flux-system" },
        "interval": "10m"
    }))
    .unwrap()
}

fn user_ocirepository() -> Value {
    json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
        "metadata": { "name": "podinfo", "namespace": "flux-system", "uid": "theirs", "resourceVersion": "7",
                      "labels": { "team": "edge" } },
        "spec": {
            "url": "oci://registry.example/charts/podinfo", "interval": "5m", "suspend": true,
            "ref": { "semver": ">=6.0.0" }, "secretRef": { "name": "registry" }, "provider": "generic",
            "layerSelector": { "mediaType": crate::chart::source::HELM_CHART_LAYER, "operation": "copy" }
        },
        "status": { "artifact": { "revision": "6.1.0@sha256:abc" } }
    })
}

#[test]
fn an_oci_chart_is_pinned_per_revision_beside_its_source() {
    let s = oci_spec();
    assert_eq!(chart_name(&s), "podinfo");
    assert!(!needs_resolution(&s), "source-controller resolves the OCIRepository's ref itself");
    let a = chart_ref(&s, "gw", "edge", "6.1.0@sha256:abc");
    assert_eq!(a.kind, ChartKind::OciRepository);
    assert_eq!(a.namespace, "flux-system");
    assert!(a.name.starts_with("gw-podinfo-"), "{}", a.name);
    assert_ne!(
        a,
        chart_ref(&s, "gw", "edge", "6.1.0@sha256:def"),
        "the same tag pushed again is a new revision"
    );
    let mut local = s.clone();
    local.chart_ref.as_mut().unwrap().namespace = None;
    assert_eq!(chart_ref(&local, "gw", "edge", "6.1.0@sha256:abc").namespace, "edge");
    assert_eq!(cross_namespace_reference(&local, "edge"), None);
    let refused = cross_namespace_reference(&s, "edge").unwrap();
    assert!(refused.contains("spec.chartRef"), "{refused}");
}

#[test]
fn the_pinned_copy_keeps_the_users_settings_and_fixes_the_digest() {
    let s = oci_spec();
    let r = chart_ref(&s, "gw", "edge", "6.1.0@sha256:abc");
    let pinned = pinned_ocirepository("gw", "edge", &user_ocirepository(), "sha256:abc", &r);
    assert_eq!(pinned["kind"], "OCIRepository");
    assert_eq!(pinned["metadata"]["name"], json!(r.name));
    assert_eq!(pinned["spec"]["ref"], json!({ "digest": "sha256:abc" }), "no semver, no tag: one digest");
    assert!(pinned["spec"].get("suspend").is_none(), "the user's pause is not the copy's");
    for kept in ["url", "interval", "secretRef", "provider", "layerSelector"] {
        assert_eq!(pinned["spec"][kept], user_ocirepository()["spec"][kept], "{kept}");
    }
    assert!(pinned["metadata"].get("uid").is_none() && pinned["metadata"].get("resourceVersion").is_none());
    assert_eq!(pinned["metadata"]["labels"][naming::LABEL_MANAGED_BY], naming::MANAGER);
    assert!(pinned["metadata"]["labels"].get("team").is_none(), "the user's labels are theirs");
    assert_eq!(pinned["metadata"]["annotations"][ANNOTATION_PINNED_FROM], "podinfo");
    let object: DynamicObject = serde_json::from_value(pinned.clone()).unwrap();
    assert_eq!(owner_of(&object), Some(ObjectRef::<NodePoolApplication>::new("gw").within("edge")));
    // Every field of the copy is ours: one the user drops is a difference.
    assert!(spec_matches(&pinned, &pinned));
    let mut without_secret = user_ocirepository();
    without_secret["spec"].as_object_mut().unwrap().remove("secretRef");
    let desired = pinned_ocirepository("gw", "edge", &without_secret, "sha256:abc", &r);
    assert!(!spec_matches(&desired, &pinned));
}

#[test]
fn an_oci_source_must_select_and_copy_the_chart_layer() {
    use crate::chart::source::not_a_chart_source;
    assert_eq!(not_a_chart_source(&user_ocirepository()), None);
    let mut extract = user_ocirepository();
    extract["spec"]["layerSelector"]["operation"] = json!("extract");
    let mut none = user_ocirepository();
    none["spec"].as_object_mut().unwrap().remove("layerSelector");
    for bad in [extract, none] {
        let why = not_a_chart_source(&bad).unwrap();
        assert!(why.contains("layerSelector") && why.contains("copy"), "{why}");
    }
}

#[test]
fn an_oci_revision_splits_into_tag_and_digest() {
    use crate::chart::source::oci_revision;
    let with = |revision: &str| json!({ "status": { "artifact": { "revision": revision } } });
    assert_eq!(oci_revision(&with("6.1.0@sha256:abc")), Some(("6.1.0".into(), "sha256:abc".into())));
    assert_eq!(oci_revision(&with("sha256:abc")), Some((String::new(), "sha256:abc".into())));
    assert_eq!(oci_revision(&with("6.1.0")), None, "a tag without a digest pins nothing");
    assert_eq!(oci_revision(&json!({})), None);
}

#[test]
fn chart_names_carry_64_bits_of_hash_within_63_characters() {
    let long = "a".repeat(80);
    for app in ["gw", long.as_str()] {
        let name = chart_ref(&spec(json!({})), app, "edge", "1.0.0").name;
        let hash = name.rsplit('-').next().unwrap();
        assert_eq!(hash.len(), 16, "{name}");
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{name}");
        assert!(name.len() <= 63, "{name}");
    }
}
