//! Downloading source-controller's artifacts: each verified against the
//! digest its source states, cached by that digest, and bounded in size
//! and in number at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client};
use serde_json::Value;
use sha2::{Digest, Sha256, Sha384, Sha512};
use tokio::sync::Semaphore;

use crate::api::{ChartReference, ChartSpec};
use crate::chart::schema::Chart;
use crate::chart::version;

use super::*;

/// Downloads and caches source-controller artifacts by digest.
pub struct Sources {
    client: Client,
    http: reqwest::Client,
    indexes: Mutex<HashMap<String, Arc<IndexVersions>>>,
    /// Why each index that could not be read could not, by digest: an
    /// index is up to 50 MiB, and downloading it again every few seconds
    /// to fail again would hold a download slot for nothing.
    unreadable_indexes: Mutex<HashMap<String, String>>,
    charts: Mutex<HashMap<String, Arc<Chart>>>,
    /// Downloads in flight: each holds up to its size limit in memory.
    downloads: Semaphore,
}

/// What one download may hold, as source-controller limits the same
/// artifacts by default (`--helm-index-max-size`, `--helm-chart-max-size`).
pub const MAX_INDEX_BYTES: u64 = 50 * 1024 * 1024;
pub const MAX_CHART_BYTES: u64 = 10 * 1024 * 1024;

/// Downloads at once, whatever the number of reconciles waiting for one:
/// at most this many times [`MAX_INDEX_BYTES`] is ever buffered.
const CONCURRENT_DOWNLOADS: usize = 2;

/// Entries kept per cache: one per repository revision and chart version in
/// use is plenty; older ones are dropped wholesale.
const CACHE_LIMIT: usize = 64;

impl Sources {
    pub fn new(client: Client) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Self {
            client,
            http,
            indexes: Mutex::new(HashMap::new()),
            unreadable_indexes: Mutex::new(HashMap::new()),
            charts: Mutex::new(HashMap::new()),
            downloads: Semaphore::new(CONCURRENT_DOWNLOADS),
        }
    }

    /// The version string of the index entry `spec.version` resolves to,
    /// or, for an OCI HelmRepository, that the registry must resolve it.
    pub async fn resolve_version(&self, spec: &ChartSpec, default_ns: &str) -> Result<Resolved, SourceError> {
        let namespace = spec.source_ref.namespace.as_deref().unwrap_or(default_ns);
        let repo = self
            .get(&helmrepository_resource(), "HelmRepository", namespace, &spec.source_ref.name)
            .await?;
        if is_oci(&repo) {
            return Ok(Resolved::InRegistry);
        }
        let artifact = artifact_of(&repo, "HelmRepository")?;
        let repository = format!("{namespace}/{}", spec.source_ref.name);
        let index = self.index(&artifact, &repository).await?;
        let versions = index.get(&spec.chart).ok_or_else(|| SourceError::NoSuchChart {
            chart: spec.chart.clone(),
            repository: repository.clone(),
        })?;
        let wanted = spec.version.as_deref().unwrap_or("*");
        Ok(Resolved::Version(
            version::resolve(wanted, versions.iter().map(String::as_str))?.to_string(),
        ))
    }

    /// The OCIRepository that `spec.chartRef` names, once it selects the
    /// Helm chart layer and source-controller has pulled an artifact.
    pub async fn oci_source(
        &self,
        reference: &ChartReference,
        default_ns: &str,
    ) -> Result<Value, SourceError> {
        let namespace = reference.namespace.as_deref().unwrap_or(default_ns);
        let repository = self
            .get(&ocirepository_resource(), "OCIRepository", namespace, &reference.name)
            .await?;
        if let Some(why) = not_a_chart_source(&repository) {
            return Err(SourceError::NotAChart {
                namespace: namespace.to_string(),
                name: reference.name.clone(),
                why,
            });
        }
        artifact_of(&repository, "OCIRepository")?;
        Ok(repository)
    }

    /// The chart in a HelmChart's artifact, once source-controller has one.
    ///
    /// Without an artifact the HelmChart may be waiting for its source, or
    /// its source may not exist at all, which no wait cures: that is
    /// reported as [`SourceError::Missing`], as for a missing HelmRepository
    /// at resolution, whatever kind of source the chart names.
    pub async fn chart(&self, helmchart: &Value) -> Result<Arc<Chart>, SourceError> {
        // A pinned OCIRepository's artifact is the chart's own archive,
        // copied from its layer.
        let kind = match helmchart.get("kind").and_then(Value::as_str) {
            Some("OCIRepository") => "OCIRepository",
            _ => "HelmChart",
        };
        let artifact = match artifact_of(helmchart, kind) {
            Ok(artifact) => artifact,
            Err(not_ready) => return Err(self.missing_source(helmchart).await.unwrap_or(not_ready)),
        };
        if let Some(chart) = lock(&self.charts).get(&artifact.digest) {
            return Ok(chart.clone());
        }
        let _permit = self.downloads.acquire().await;
        // Another reconcile may have fetched it while this one waited.
        if let Some(chart) = lock(&self.charts).get(&artifact.digest) {
            return Ok(chart.clone());
        }
        let bytes = self.download(&artifact, "chart", MAX_CHART_BYTES).await?;
        // Unpacking, parsing and compiling the schema take milliseconds to
        // seconds of CPU: off the async workers, which serve every watch.
        let read = tokio::task::spawn_blocking(move || Chart::from_tgz(&bytes)).await;
        let read = read.map_err(|e| SourceError::Worker {
            what: "chart",
            message: e.to_string(),
        })?;
        let chart = Arc::new(read.map_err(|source| SourceError::Chart {
            url: artifact.url.clone(),
            source,
        })?);
        insert(&self.charts, artifact.digest, chart.clone());
        Ok(chart)
    }

    /// [`SourceError::Missing`] when the HelmChart's source is known not to
    /// exist; `None` when it exists, or when it cannot be told (the read
    /// failed, or an unknown kind): the chart is then simply not ready yet.
    async fn missing_source(&self, helmchart: &Value) -> Option<SourceError> {
        let (kind, namespace, name) = source_of(helmchart)?;
        let (kind, resource) = chart_source_resource(kind)?;
        match self.get(&resource, kind, namespace, name).await {
            Err(missing @ SourceError::Missing { .. }) => Some(missing),
            Err(error) => {
                tracing::debug!(%error, "cannot tell whether the chart's source exists");
                None
            }
            Ok(_) => None,
        }
    }

    pub(super) async fn index(
        &self,
        artifact: &Artifact,
        repository: &str,
    ) -> Result<Arc<IndexVersions>, SourceError> {
        if let Some(index) = lock(&self.indexes).get(&artifact.digest) {
            return Ok(index.clone());
        }
        let _permit = self.downloads.acquire().await;
        if let Some(index) = lock(&self.indexes).get(&artifact.digest) {
            return Ok(index.clone());
        }
        let unreadable = |message: &String| SourceError::Index {
            repository: repository.to_string(),
            message: message.clone(),
        };
        if let Some(message) = lock(&self.unreadable_indexes).get(&artifact.digest) {
            return Err(unreadable(message));
        }
        let bytes = self.download(artifact, "repository index", MAX_INDEX_BYTES).await?;
        // Up to 50 MiB of YAML: parsed off the async workers.
        let name = repository.to_string();
        let parsed = tokio::task::spawn_blocking(move || parse_index(&bytes, &name)).await;
        let parsed = parsed.map_err(|e| SourceError::Worker {
            what: "repository index",
            message: e.to_string(),
        })?;
        match parsed {
            Ok(index) => {
                let index = Arc::new(index);
                insert(&self.indexes, artifact.digest.clone(), index.clone());
                Ok(index)
            }
            Err(e) => {
                if let SourceError::Index { message, .. } = &e {
                    insert(&self.unreadable_indexes, artifact.digest.clone(), message.clone());
                }
                Err(e)
            }
        }
    }

    async fn get(
        &self,
        resource: &ApiResource,
        kind: &'static str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, SourceError> {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), namespace, resource);
        let failed = |source| SourceError::Get {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
            source: Box::new(source),
        };
        match api.get_opt(name).await {
            Ok(Some(object)) => serde_json::to_value(object).map_err(|e| failed(kube::Error::SerdeError(e))),
            Ok(None) => Err(SourceError::Missing {
                kind,
                namespace: namespace.to_string(),
                name: name.to_string(),
            }),
            Err(source) => Err(failed(source)),
        }
    }

    /// Reads an artifact whole, refusing it past `limit` bytes as soon as
    /// the answer says or shows so, and verifies it against its digest as
    /// it streams in.
    async fn download(
        &self,
        artifact: &Artifact,
        what: &'static str,
        limit: u64,
    ) -> Result<Vec<u8>, SourceError> {
        let mut verifier = Verifier::new(&artifact.digest).ok_or_else(|| SourceError::UnknownDigest {
            url: artifact.url.clone(),
            digest: artifact.digest.clone(),
            known: Verifier::KNOWN,
        })?;
        let failed = |source| SourceError::Download {
            url: artifact.url.clone(),
            source,
        };
        let too_large = || SourceError::TooLarge {
            what,
            url: artifact.url.clone(),
            limit_mib: limit / (1024 * 1024),
        };
        let mut response = self
            .http
            .get(&artifact.url)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(failed)?;
        if response.content_length().is_some_and(|length| length > limit) {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if (bytes.len() + chunk.len()) as u64 > limit {
                return Err(too_large());
            }
            verifier.update(&chunk);
            bytes.extend_from_slice(&chunk);
        }
        if !verifier.matches() {
            return Err(SourceError::Digest {
                url: artifact.url.clone(),
                digest: artifact.digest.clone(),
            });
        }
        Ok(bytes)
    }
}

/// Checks bytes against a digest as source-controller writes it,
/// `<algorithm>:<hex>`, for every algorithm its `--artifact-digest-algo`
/// offers. An algorithm it does not know is refused, never trusted: the
/// bytes are cached under that digest.
pub(super) struct Verifier {
    hasher: Hasher,
    expected: String,
}

enum Hasher {
    Sha256(Sha256),
    Sha384(Sha384),
    Sha512(Sha512),
    Blake3(Box<blake3::Hasher>),
}

impl Verifier {
    pub(super) const KNOWN: &'static str = "sha256, sha384, sha512 and blake3";

    pub(super) fn new(digest: &str) -> Option<Self> {
        let (algorithm, hex) = digest.split_once(':')?;
        let hasher = match algorithm {
            "sha256" => Hasher::Sha256(Sha256::new()),
            "sha384" => Hasher::Sha384(Sha384::new()),
            "sha512" => Hasher::Sha512(Sha512::new()),
            "blake3" => Hasher::Blake3(Box::default()),
            _ => return None,
        };
        Some(Self {
            hasher,
            expected: hex.to_ascii_lowercase(),
        })
    }

    pub(super) fn update(&mut self, bytes: &[u8]) {
        match &mut self.hasher {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha384(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
            Hasher::Blake3(h) => {
                h.update(bytes);
            }
        }
    }

    pub(super) fn matches(self) -> bool {
        let actual: Vec<u8> = match self.hasher {
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha384(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
            Hasher::Blake3(h) => h.finalize().as_bytes().to_vec(),
        };
        let actual: String = actual.iter().map(|b| format!("{b:02x}")).collect();
        actual == self.expected
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn insert<T>(cache: &Mutex<HashMap<String, T>>, key: String, value: T) {
    let mut map = lock(cache);
    if map.len() >= CACHE_LIMIT {
        map.clear();
    }
    map.insert(key, value);
}
