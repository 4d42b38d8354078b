//! The one HelmChart an application's releases share.
//!
//! With `chart.spec` in every HelmRelease, Flux makes a HelmChart per
//! release: N pools mean N chart downloads and N version resolutions, each
//! on its own clock. Instead the controller resolves the version once and
//! creates one HelmChart per resolved version; every release points at it
//! with `chartRef`.
//!
//! A HelmChart's `sourceRef` is local to its namespace, so the shared chart
//! lives beside the source, which may be another namespace than the
//! application's. Owner references cannot cross namespaces: the chart is
//! found by labels, and the application's finalizer deletes it.

use serde_json::{json, Value};

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::Resource;

use crate::api::naming;
use crate::api::{NodePoolApplicationSpec, ReconcileStrategy, SourceKind};
use crate::chart::source::{helmchart_resource, ocirepository_resource};

pub const HELMCHART_API_VERSION: &str = "source.toolkit.fluxcd.io/v1";
/// The namespace of the application a shared HelmChart belongs to; the
/// application's name is in `naming::LABEL_APPLICATION`.
pub const LABEL_APPLICATION_NAMESPACE: &str = "apps.fanout.dev/application-namespace";
/// `<namespace>/<name>` of the application, whole: label values may be cut.
pub const ANNOTATION_APPLICATION: &str = "apps.fanout.dev/application";

/// Where the shared chart of one resolved version lives: a HelmChart, or,
/// for a `spec.chartRef`, an OCIRepository pinned to one digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartRef {
    pub kind: ChartKind,
    pub name: String,
    pub namespace: String,
}

/// The kinds of shared chart a release's `chartRef` may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    HelmChart,
    OciRepository,
}

impl ChartKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChartKind::HelmChart => "HelmChart",
            ChartKind::OciRepository => "OCIRepository",
        }
    }

    pub fn of(kind: &str) -> Option<Self> {
        match kind {
            "HelmChart" => Some(ChartKind::HelmChart),
            "OCIRepository" => Some(ChartKind::OciRepository),
            _ => None,
        }
    }

    pub fn resource(self) -> ApiResource {
        match self {
            ChartKind::HelmChart => helmchart_resource(),
            ChartKind::OciRepository => ocirepository_resource(),
        }
    }
}

/// The chart's name as users know it: `spec.chart.spec.chart`, or the
/// name of the OCIRepository `spec.chartRef` names.
pub fn chart_name(spec: &NodePoolApplicationSpec) -> &str {
    match (&spec.chart, &spec.chart_ref) {
        (Some(chart), _) => &chart.spec.chart,
        (None, Some(reference)) => &reference.name,
        (None, None) => "",
    }
}

/// The namespace of the application's chart source.
pub fn source_namespace<'a>(spec: &'a NodePoolApplicationSpec, app_namespace: &'a str) -> &'a str {
    let named = match (&spec.chart, &spec.chart_ref) {
        (Some(chart), _) => chart.spec.source_ref.namespace.as_deref(),
        (None, Some(reference)) => reference.namespace.as_deref(),
        (None, None) => None,
    };
    named.unwrap_or(app_namespace)
}

/// The field that names the chart's source, for messages.
fn source_field(spec: &NodePoolApplicationSpec) -> &'static str {
    match spec.chart {
        Some(_) => "spec.chart.spec.sourceRef",
        None => "spec.chartRef",
    }
}

/// With `--no-cross-namespace-refs`, as Flux's own lockdown flag: the first
/// reference the application makes to another namespace, if any.
pub fn cross_namespace_reference(spec: &NodePoolApplicationSpec, app_namespace: &str) -> Option<String> {
    let source = source_namespace(spec, app_namespace);
    if source != app_namespace {
        return Some(format!(
            "{} names namespace {source:?}; cross-namespace references are \
             refused here: put the source in namespace {app_namespace:?}",
            source_field(spec)
        ));
    }
    let depends_on = spec.helm_release.as_ref().map(|h| h.depends_on.as_slice()).unwrap_or_default();
    depends_on.iter().enumerate().find_map(|(i, d)| {
        d.namespace.as_deref().filter(|ns| *ns != app_namespace).map(|ns| {
            format!(
                "spec.helmRelease.dependsOn[{i}] names namespace {ns:?}; cross-namespace references are refused here"
            )
        })
    })
}

const CHART_HASH_LEN: usize = 16;

/// `<app>-<chart>-<hash>`, at most 63 characters; the hash covers everything
/// that makes the artifact, so a version bump gets a new chart beside the
/// old one, which goes once no release uses it.
pub fn chart_ref(spec: &NodePoolApplicationSpec, app: &str, app_namespace: &str, version: &str) -> ChartRef {
    let (kind, source_kind, source_name) = match (&spec.chart, &spec.chart_ref) {
        (Some(chart), _) => {
            let source = &chart.spec.source_ref;
            (ChartKind::HelmChart, format!("{:?}", source.kind), source.name.as_str())
        }
        (None, Some(reference)) => {
            (ChartKind::OciRepository, "OCIRepository".to_string(), reference.name.as_str())
        }
        (None, None) => (ChartKind::HelmChart, String::new(), ""),
    };
    let chart = chart_name(spec);
    // 64 bits: a tenant cannot search out another application's next
    // chart name and create it first (32 bits took seconds to search).
    let hash =
        naming::hex_prefix(&[app_namespace, app, chart, version, &source_kind, source_name], CHART_HASH_LEN);
    let mut readable: String = format!("{app}-{chart}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    readable.truncate(63 - CHART_HASH_LEN - 1);
    let readable = readable.trim_end_matches('-');
    ChartRef {
        kind,
        name: format!("{readable}-{hash}"),
        namespace: source_namespace(spec, app_namespace).to_string(),
    }
}

/// The HelmChart through which source-controller resolves `wanted` (a
/// range, or empty for the newest) in an OCI HelmRepository's tags. Its
/// artifact's version names the shared chart; it stays beside it so that a
/// newer tag is noticed at the chart's interval, as Flux notices one.
pub fn resolver_ref(
    spec: &NodePoolApplicationSpec,
    app: &str,
    app_namespace: &str,
    wanted: &str,
) -> ChartRef {
    chart_ref(spec, app, app_namespace, &format!("resolving {wanted}"))
}

/// The chart version a HelmChart's artifact holds: its revision, without
/// the `@<digest>` an OCI chart's revision may carry.
pub fn artifact_version(helmchart: &Value) -> Option<String> {
    let revision = helmchart.pointer("/status/artifact/revision")?.as_str()?;
    let version = revision.split('@').next().unwrap_or(revision);
    (!version.is_empty()).then(|| version.to_string())
}

/// The HelmChart object for one resolved version.
pub fn helmchart(
    spec: &NodePoolApplicationSpec,
    app: &str,
    app_namespace: &str,
    version: &str,
    chart: &ChartRef,
) -> Value {
    let Some(chart_template) = &spec.chart else {
        return Value::Null;
    };
    let chart_spec = &chart_template.spec;
    let mut object = json!({
        "apiVersion": HELMCHART_API_VERSION,
        "kind": "HelmChart",
        "metadata": metadata(app, app_namespace, chart),
        "spec": {
            "chart": chart_spec.chart,
            "version": version,
            "sourceRef": {
                "kind": format!("{:?}", chart_spec.source_ref.kind),
                "name": chart_spec.source_ref.name,
            },
            "interval": chart_spec.interval.as_deref().unwrap_or(&spec.interval),
        },
    });
    let out = &mut object["spec"];
    // Written even when it is the API server's default, so that the chart
    // as stored equals the chart as written, field for field.
    out["reconcileStrategy"] =
        json!(chart_spec.reconcile_strategy.unwrap_or(ReconcileStrategy::ChartVersion));
    if !chart_spec.values_files.is_empty() {
        out["valuesFiles"] = json!(chart_spec.values_files);
    }
    if let Some(ignore) = chart_spec.ignore_missing_values_files {
        out["ignoreMissingValuesFiles"] = json!(ignore);
    }
    object
}

/// Every `spec` field of a HelmChart this controller may write. Each is
/// compared with the chart as stored, so that one the application no
/// longer sets is noticed and, applied under our field manager, removed.
pub const OWNED_SPEC_FIELDS: [&str; 7] = [
    "chart",
    "version",
    "sourceRef",
    "interval",
    "reconcileStrategy",
    "valuesFiles",
    "ignoreMissingValuesFiles",
];

/// Whether the stored HelmChart already has the desired spec, in every
/// field we own (absent where we set nothing), and every label we set;
/// fields others set are theirs.
pub fn spec_matches(desired: &Value, current: &Value) -> bool {
    let labels = desired["metadata"]["labels"].as_object().into_iter().flatten();
    let annotations = desired["metadata"]["annotations"].as_object().into_iter().flatten();
    // A pinned OCIRepository's spec is a copy, every field of it ours.
    let spec = match desired["kind"].as_str() {
        Some("OCIRepository") => desired["spec"] == current["spec"],
        _ => OWNED_SPEC_FIELDS
            .iter()
            .all(|field| desired["spec"].get(field) == current["spec"].get(field)),
    };
    spec && labels.into_iter().all(|(k, v)| current["metadata"]["labels"].get(k) == Some(v))
        && annotations
            .into_iter()
            .all(|(k, v)| current["metadata"]["annotations"].get(k) == Some(v))
}

/// Puts the application's shard label on its HelmChart, so that Flux's
/// sharded source-controller serves it with the releases.
pub fn with_shard(mut chart: Value, shard: Option<&str>) -> Value {
    if let Some(shard) = shard {
        chart["metadata"]["labels"][naming::LABEL_SHARD] = json!(shard);
    }
    chart
}

/// The application a shared HelmChart belongs to, from its annotation, as a
/// reference to the application or to its metadata (what the controller
/// watches).
pub fn owner_of<K: Resource<DynamicType = ()>>(chart: &DynamicObject) -> Option<ObjectRef<K>> {
    let owner = chart.metadata.annotations.as_ref()?.get(ANNOTATION_APPLICATION)?;
    let (namespace, name) = owner.split_once('/')?;
    Some(ObjectRef::new(name).within(namespace))
}

/// The version a shared chart is created with: resolved centrally from a
/// HelmRepository's index (or, for an OCI one, its tags), or, for Git and
/// Bucket sources (one chart at a path), the spec's own.
pub fn needs_resolution(spec: &NodePoolApplicationSpec) -> bool {
    spec.chart
        .as_ref()
        .is_some_and(|c| matches!(c.spec.source_ref.kind, SourceKind::HelmRepository))
}

/// The OCIRepository pinned to one digest of the user's: a copy of its
/// spec (URL, credentials, provider, verification, layer selection) with
/// `ref.digest` set, so that every release of this revision installs the
/// very same chart, and a new tag pushed reaches the pools only as the
/// rollout lets it. `source` is the user's OCIRepository, whose name the
/// copy keeps in an annotation (an orphaned release is pointed back at it).
pub fn pinned_ocirepository(
    app: &str,
    app_namespace: &str,
    source: &Value,
    digest: &str,
    chart: &ChartRef,
) -> Value {
    let mut spec = source.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(fields) = spec.as_object_mut() {
        // The copy follows the digest only; pausing the user's source
        // does not pause what is installed.
        fields.remove("suspend");
        fields.insert("ref".into(), json!({ "digest": digest }));
    }
    let source_name = source.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let mut metadata = metadata(app, app_namespace, chart);
    metadata["annotations"][ANNOTATION_PINNED_FROM] = json!(source_name);
    json!({
        "apiVersion": HELMCHART_API_VERSION,
        "kind": "OCIRepository",
        "metadata": metadata,
        "spec": spec,
    })
}

/// The metadata of every shared chart: where it is, and the marks of the
/// application that owns it (found by them, as owner references cannot
/// cross namespaces).
fn metadata(app: &str, app_namespace: &str, chart: &ChartRef) -> Value {
    json!({
        "name": chart.name,
        "namespace": chart.namespace,
        "labels": {
            naming::LABEL_APPLICATION: naming::label_value(app),
            LABEL_APPLICATION_NAMESPACE: naming::label_value(app_namespace),
            naming::LABEL_MANAGED_BY: naming::MANAGER,
        },
        "annotations": { ANNOTATION_APPLICATION: format!("{app_namespace}/{app}") },
    })
}

/// On a pinned OCIRepository: the name of the user's it copies.
pub const ANNOTATION_PINNED_FROM: &str = "apps.fanout.dev/pinned-from";

#[cfg(test)]
mod tests {
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
        assert_ne!(
            a.name,
            chart_ref(&s, "ingress", "other", "1.0.0").name,
            "apps in other namespaces differ"
        );
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
        assert!(
            pinned["metadata"].get("uid").is_none() && pinned["metadata"].get("resourceVersion").is_none()
        );
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
}
