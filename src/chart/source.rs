//! Chart sources: resolves an application's chart version once, centrally,
//! from the HelmRepository's index, and reads the shared HelmChart's
//! artifact, both from what source-controller serves.
//!
//! source-controller serves every artifact over plain HTTP at
//! `status.artifact.url` with its digest in `status.artifact.digest`; both
//! downloads are verified against that digest and cached by it, so a
//! reconcile that finds the same artifact fetches nothing.

use std::collections::BTreeMap;

use kube::api::ApiResource;
use serde::Deserialize;
use serde_json::Value;

use crate::chart::schema::ChartError;
use crate::chart::version::VersionError;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot read {kind} {namespace}/{name}: {source}")]
    Get {
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error(
        "{kind} {namespace}/{name} does not exist: create it, or fix the reference to it \
         (spec.chart.spec.sourceRef, or spec.chartRef)"
    )]
    Missing {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("{kind} {namespace}/{name} has no artifact yet ({why}); waiting for source-controller")]
    NotReady {
        kind: &'static str,
        namespace: String,
        name: String,
        why: String,
    },
    #[error("{kind} {namespace}/{name} failed and source-controller will not retry: {message}; fix spec.chart.spec")]
    Stalled {
        kind: &'static str,
        namespace: String,
        name: String,
        message: String,
    },
    #[error("cannot download {url}: {source}")]
    Download {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error(
        "the artifact at {url} does not match its digest {digest}: it changed during the download; retrying"
    )]
    Digest { url: String, digest: String },
    #[error(
        "the artifact at {url} has digest {digest:?}, whose algorithm this controller cannot verify \
         (it knows {known}); start source-controller with --artifact-digest-algo set to one of them"
    )]
    UnknownDigest {
        url: String,
        digest: String,
        known: &'static str,
    },
    #[error(
        "the {what} at {url} is larger than {limit_mib} MiB, the most this controller reads \
         (source-controller's own default limit); make it smaller, e.g. a repository with fewer charts"
    )]
    TooLarge {
        what: &'static str,
        url: String,
        limit_mib: u64,
    },
    #[error("reading the {what} stopped ({message}); retrying")]
    Worker { what: &'static str, message: String },
    #[error("the index of HelmRepository {repository} is not valid YAML: {message}")]
    Index { repository: String, message: String },
    #[error("OCIRepository {namespace}/{name} cannot serve a Helm chart: {why}")]
    NotAChart {
        namespace: String,
        name: String,
        why: String,
    },
    #[error("chart {chart:?} is not in HelmRepository {repository}: check spec.chart.spec.chart")]
    NoSuchChart { chart: String, repository: String },
    #[error("spec.chart.spec.version: {0}")]
    Version(#[from] VersionError),
    #[error("the chart artifact at {url}: {source}")]
    Chart {
        url: String,
        #[source]
        source: ChartError,
    },
}

impl SourceError {
    /// Whether the user must change something (as opposed to waiting or retrying).
    pub fn needs_user(&self) -> bool {
        match self {
            // Forbidden or unauthorized: the controller's RBAC needs a person.
            Self::Get { source, .. } => {
                matches!(source.as_ref(), kube::Error::Api(status) if matches!(status.code, 401 | 403))
            }
            // The same index is never read again (see `Sources::index`):
            // only a new revision of the repository mends it.
            Self::Index { .. } => true,
            _ => matches!(
                self,
                Self::Missing { .. }
                    | Self::NotAChart { .. }
                    | Self::NoSuchChart { .. }
                    | Self::Version(_)
                    | Self::Chart { .. }
                    | Self::UnknownDigest { .. }
                    | Self::TooLarge { .. }
                    | Self::Stalled { .. }
            ),
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            Self::Missing { .. } => "SourceNotFound",
            Self::NotReady { .. } => "SourceNotReady",
            Self::NoSuchChart { .. } => "ChartNotFound",
            Self::Version(_) => "ChartVersionNotFound",
            Self::Chart { .. } | Self::TooLarge { .. } | Self::NotAChart { .. } => "InvalidChart",
            Self::UnknownDigest { .. } => "UnsupportedDigest",
            Self::Stalled { .. } => "SourceFailed",
            Self::Index { .. } => "InvalidIndex",
            Self::Get { .. } | Self::Download { .. } | Self::Digest { .. } | Self::Worker { .. } => {
                "SourceUnavailable"
            }
        }
    }
}

pub fn helmrepository_resource() -> ApiResource {
    source_resource("HelmRepository", "helmrepositories")
}

pub fn helmchart_resource() -> ApiResource {
    source_resource("HelmChart", "helmcharts")
}

pub fn ocirepository_resource() -> ApiResource {
    source_resource("OCIRepository", "ocirepositories")
}

/// The API resource of each kind of chart source a HelmChart may name in
/// `spec.sourceRef`, with the kind as a static string for errors.
pub fn chart_source_resource(kind: &str) -> Option<(&'static str, ApiResource)> {
    match kind {
        "HelmRepository" => Some(("HelmRepository", helmrepository_resource())),
        "GitRepository" => Some(("GitRepository", source_resource("GitRepository", "gitrepositories"))),
        "Bucket" => Some(("Bucket", source_resource("Bucket", "buckets"))),
        _ => None,
    }
}

/// The source a HelmChart builds from: (kind, namespace, name). A HelmChart's
/// `sourceRef` is local to its own namespace.
pub fn source_of(helmchart: &Value) -> Option<(&str, &str, &str)> {
    let text = |pointer: &str| helmchart.pointer(pointer).and_then(Value::as_str);
    Some((text("/spec/sourceRef/kind")?, text("/metadata/namespace")?, text("/spec/sourceRef/name")?))
}

fn source_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "source.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Where an application's chart version comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The version the HelmRepository's index resolves `spec.version` to.
    Version(String),
    /// An OCI HelmRepository (`type: oci`) has no index, only the
    /// registry's tags: source-controller resolves them itself, with the
    /// repository's own credentials and cloud provider, through a HelmChart
    /// of the wanted version ([`crate::chart::shared::resolver_ref`]).
    InRegistry,
}

/// Whether a HelmRepository is an OCI registry (`spec.type: oci`).
pub fn is_oci(repository: &Value) -> bool {
    repository.pointer("/spec/type").and_then(Value::as_str) == Some("oci")
}

/// The Helm chart layer of an OCI artifact, which helm-controller requires
/// an OCIRepository to select and copy as it is.
pub const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// Why an OCIRepository cannot serve a Helm chart, if it cannot: without
/// the chart layer selected and copied, its artifact is not a chart.
pub fn not_a_chart_source(ocirepository: &Value) -> Option<String> {
    let selector = ocirepository.pointer("/spec/layerSelector");
    let media_type = selector.and_then(|s| s.get("mediaType")).and_then(Value::as_str);
    let operation = selector.and_then(|s| s.get("operation")).and_then(Value::as_str);
    (media_type != Some(HELM_CHART_LAYER) || operation != Some("copy")).then(|| {
        format!(
            "its spec.layerSelector must select the Helm chart layer: set mediaType \
             {HELM_CHART_LAYER:?} and operation \"copy\", as helm-controller requires"
        )
    })
}

/// The `<version>` and `sha256:<digest>` of an OCIRepository's artifact
/// revision (`<tag>@sha256:<digest>`, or the digest alone).
pub fn oci_revision(ocirepository: &Value) -> Option<(String, String)> {
    let revision = ocirepository.pointer("/status/artifact/revision")?.as_str()?;
    let (tag, digest) = match revision.rsplit_once('@') {
        Some((tag, digest)) => (tag, digest),
        None => ("", revision),
    };
    digest.starts_with("sha256:").then(|| (tag.to_string(), digest.to_string()))
}

/// An artifact as source-controller reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub url: String,
    pub digest: String,
}

/// The Ready artifact of a Flux source object, or why there is none.
pub fn artifact_of(object: &Value, kind: &'static str) -> Result<Artifact, SourceError> {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let not_ready = |why: String| SourceError::NotReady {
        kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
        why,
    };
    // Right after a spec change (a new version or values files) the
    // artifact is still the previous spec's: judging pools by it would
    // check their values against the wrong chart.
    let generation = object.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = object.pointer("/status/observedGeneration").and_then(Value::as_i64);
    if let Some(generation) = generation.filter(|g| observed < Some(*g)) {
        return Err(not_ready(format!("source-controller has not yet reconciled generation {generation}")));
    }
    let url = object.pointer("/status/artifact/url").and_then(Value::as_str);
    let digest = object.pointer("/status/artifact/digest").and_then(Value::as_str);
    match (url, digest) {
        (Some(url), Some(digest)) => Ok(Artifact {
            url: url.to_string(),
            digest: digest.to_string(),
        }),
        _ => {
            let condition = |type_: &str| {
                object
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|c| c.iter().find(|c| c["type"] == type_))
            };
            // Stalled: a values file that is not in the chart, say. No
            // wait cures it, and kstatus readers should see it at once.
            if let Some(stalled) = condition("Stalled").filter(|c| c["status"] == "True") {
                return Err(SourceError::Stalled {
                    kind,
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    message: stalled["message"].as_str().unwrap_or("no message").to_string(),
                });
            }
            let why = condition("Ready")
                .and_then(|c| c["message"].as_str())
                .unwrap_or("not reconciled yet");
            Err(not_ready(why.to_string()))
        }
    }
}

#[derive(Debug, Deserialize)]
struct Index {
    #[serde(default)]
    entries: BTreeMap<String, Vec<IndexEntry>>,
}

#[derive(Debug, Deserialize)]
struct IndexEntry {
    #[serde(default)]
    version: String,
}

/// The versions of each chart in a repository index.
pub type IndexVersions = BTreeMap<String, Vec<String>>;

/// Reads the chart versions out of an index.yaml.
pub fn parse_index(bytes: &[u8], repository: &str) -> Result<IndexVersions, SourceError> {
    let text = String::from_utf8_lossy(bytes);
    let index: Index = super::yaml::from_str(&text).map_err(|e| SourceError::Index {
        repository: repository.to_string(),
        message: e.to_string(),
    })?;
    Ok(index
        .entries
        .into_iter()
        .map(|(chart, entries)| (chart, entries.into_iter().map(|e| e.version).collect()))
        .collect())
}

mod download;
pub use download::{Sources, MAX_CHART_BYTES, MAX_INDEX_BYTES};

#[cfg(test)]
mod tests;
