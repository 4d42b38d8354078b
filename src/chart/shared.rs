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

use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::Resource;

use crate::api::naming;
use crate::api::{NodePoolApplicationSpec, ReconcileStrategy, SourceKind};

pub const HELMCHART_API_VERSION: &str = "source.toolkit.fluxcd.io/v1";
/// The namespace of the application a shared HelmChart belongs to; the
/// application's name is in `naming::LABEL_APPLICATION`.
pub const LABEL_APPLICATION_NAMESPACE: &str = "apps.fanout.dev/application-namespace";
/// `<namespace>/<name>` of the application, whole: label values may be cut.
pub const ANNOTATION_APPLICATION: &str = "apps.fanout.dev/application";

/// Where the shared HelmChart of one resolved version lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartRef {
    pub name: String,
    pub namespace: String,
}

/// The namespace of the application's chart source.
pub fn source_namespace<'a>(spec: &'a NodePoolApplicationSpec, app_namespace: &'a str) -> &'a str {
    spec.chart.spec.source_ref.namespace.as_deref().unwrap_or(app_namespace)
}

/// With `--no-cross-namespace-refs`, as Flux's own lockdown flag: the first
/// reference the application makes to another namespace, if any.
pub fn cross_namespace_reference(spec: &NodePoolApplicationSpec, app_namespace: &str) -> Option<String> {
    let source = source_namespace(spec, app_namespace);
    if source != app_namespace {
        return Some(format!(
            "spec.chart.spec.sourceRef names namespace {source:?}; cross-namespace references are \
             refused here: put the source in namespace {app_namespace:?}"
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

/// `<app>-<chart>-<hash>`, at most 63 characters; the hash covers everything
/// that makes the artifact, so a version bump gets a new chart beside the
/// old one, which goes once no release uses it.
pub fn chart_ref(spec: &NodePoolApplicationSpec, app: &str, app_namespace: &str, version: &str) -> ChartRef {
    let source = &spec.chart.spec.source_ref;
    let kind = format!("{:?}", source.kind);
    let hash = naming::hex_prefix(
        &[
            app_namespace,
            app,
            &spec.chart.spec.chart,
            version,
            &kind,
            &source.name,
        ],
        8,
    );
    let mut readable: String = format!("{app}-{}", spec.chart.spec.chart)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    readable.truncate(63 - 9);
    let readable = readable.trim_end_matches('-');
    ChartRef {
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
    let chart_spec = &spec.chart.spec;
    let mut object = json!({
        "apiVersion": HELMCHART_API_VERSION,
        "kind": "HelmChart",
        "metadata": {
            "name": chart.name,
            "namespace": chart.namespace,
            "labels": {
                naming::LABEL_APPLICATION: naming::label_value(app),
                LABEL_APPLICATION_NAMESPACE: naming::label_value(app_namespace),
                naming::LABEL_MANAGED_BY: naming::MANAGER,
            },
            "annotations": { ANNOTATION_APPLICATION: format!("{app_namespace}/{app}") },
        },
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
    OWNED_SPEC_FIELDS
        .iter()
        .all(|field| desired["spec"].get(field) == current["spec"].get(field))
        && labels.into_iter().all(|(k, v)| current["metadata"]["labels"].get(k) == Some(v))
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
    matches!(spec.chart.spec.source_ref.kind, SourceKind::HelmRepository)
}

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
        s.chart.spec.source_ref.namespace = None;
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
        local.chart.spec.source_ref.namespace = None;
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
}
