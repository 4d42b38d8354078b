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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChartRef {
    pub kind: ChartKind,
    pub name: String,
    pub namespace: String,
}

/// The kinds of shared chart a release's `chartRef` may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
mod tests;
