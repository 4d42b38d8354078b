//! What the watch caches hold, by kind, read at each scrape: how an
//! operator sizes a shard, and sees that one run with a namespace of its
//! own holds none of the other shards' sites.

use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use crate::reconcile::observe::Caches;

/// The caches, once the watches that fill them are made (the metrics
/// endpoint serves before they are).
#[derive(Debug, Default, Clone)]
pub(super) struct CachedObjects(Arc<OnceLock<CachesRead>>);

/// The caches read by a scrape.
struct CachesRead(Caches);

impl std::fmt::Debug for CachesRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Caches")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CachedLabels {
    kind: String,
    /// For HelmReleases: `whole` (of an application served here, or of
    /// none) or `cut down` (another shard's, see `runtime::shards`).
    held: String,
}

impl CachedObjects {
    /// Counts `caches` from now on; the first caches given are kept.
    pub(super) fn watch(&self, caches: Caches) {
        let _ = self.0.set(CachesRead(caches));
    }

    /// What each cache holds now, by kind and how it is held.
    fn counts(&self) -> Vec<(CachedLabels, usize)> {
        let Some(CachesRead(caches)) = self.0.get() else {
            return Vec::new();
        };
        let labels = |kind: &str, held: &str| CachedLabels {
            kind: kind.to_string(),
            held: held.to_string(),
        };
        // Counted, not copied: `Store::state` copies every entry out, and
        // a scrape every 20 ms (a bench timing the controller's writes by
        // its metrics) made that a fifth of the controller's CPU at 10,000
        // pools. The index counts what is cut down as the cache's writer
        // keeps it; a cache with none has the few entries a test gives it.
        let releases = caches.releases.len();
        let cut_down = match &caches.release_index {
            Some(index) => index.cut_down(),
            None => caches.releases.state().iter().filter(|r| r.cut_down).count(),
        };
        let mut counts = vec![
            (labels("HelmRelease", "whole"), releases.saturating_sub(cut_down)),
            (labels("HelmRelease", "cut down"), cut_down),
            (labels("Node", "whole"), caches.nodes.len()),
            (labels("ControllerRevision", "whole"), caches.history.len()),
        ];
        for pools in caches.pools.values() {
            counts.push((labels(&pools.api.kind, "whole"), pools.store.len()));
        }
        counts
    }
}

impl Collector for CachedObjects {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.counts();
        if counts.is_empty() {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "cached_objects",
            "Objects the controller's watch caches hold, by kind: a shard holds whole only its own \
             applications' releases, and with a namespace of its own no other shard's sites",
            None,
            MetricType::Gauge,
        )?;
        for (labels, count) in &counts {
            ConstGauge::new(*count as i64).encode(family.encode_family(labels)?)?;
        }
        Ok(())
    }
}
