//! Which chart an application installs: a HelmRelease's `spec.chart`
//! (a chart of a HelmRepository, GitRepository or Bucket) or its
//! `spec.chartRef` (an OCIRepository or a HelmChart), as Flux spells them.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::*;

/// The `spec.chart` of a HelmRelease.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChartTemplate {
    pub spec: ChartSpec,
}

/// Flux's `HelmChartTemplateSpec`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChartSpec {
    /// Chart name in a HelmRepository, or path in a GitRepository or Bucket.
    #[schemars(length(min = 1))]
    pub chart: String,

    /// Semver range; `*` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "*"))]
    pub version: Option<String>,

    pub source_ref: SourceReference,

    /// How often Flux checks the source for a new chart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_schema")]
    pub interval: Option<String>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile_strategy: Option<ReconcileStrategy>,

    /// Values files in the chart, merged in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_files: Vec<String>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_missing_values_files: Option<bool>,
}

/// Where Flux gets the chart.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SourceReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    pub kind: SourceKind,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Defaults to the namespace of the application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Flux's `CrossNamespaceSourceReference` as a HelmRelease's `chartRef`
/// takes it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChartReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    pub kind: ChartReferenceKind,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Defaults to the namespace of the application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

/// What a `chartRef` may name. A HelmRelease may also name a HelmChart;
/// here a chart in a HelmRepository, GitRepository or Bucket is
/// `spec.chart`, from which the controller makes the HelmCharts itself.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChartReferenceKind {
    #[serde(rename = "OCIRepository")]
    OciRepository,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    HelmRepository,
    GitRepository,
    Bucket,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileStrategy {
    ChartVersion,
    Revision,
}
