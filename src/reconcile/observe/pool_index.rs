//! The pools' cache, indexed by label as the watch brings them.
//!
//! Every instance caches every pool of the cluster, whichever shard its
//! applications are of. Selecting an application's pools by walking the
//! whole cache cost a reconcile in proportion to every shard's pools: 44
//! ms beside 90,000 of other shards' pools for 10,000 of its own (`make
//! bench-render`), most of it reading each pool's labels from memory. A
//! selector that asks for a label's value (`matchLabels`, `In`) is answered
//! from this index instead: only the pools that carry one of the values
//! are read, and matched against the whole selector. The index is kept by
//! the one writer of the cache (`runtime::changes::Changes`), so it never
//! holds what the cache does not.

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::by_name::ByName;
use super::listed::Listed;
use super::CachedPool;

/// The pools by each label they carry, shared by the writer that keeps it
/// and every reconcile that reads it.
#[derive(Debug, Default)]
pub struct PoolIndex {
    /// By a hash of a label's key and value: a few bytes a pool and label
    /// rather than both texts again. A look-up checks the labels of what
    /// it finds.
    by_label: RwLock<ByLabel>,
    /// How many times a pool came, went or changed (or the index was made
    /// again): a plan that found nothing to do reads it to know whether
    /// any pool of the kind, in any namespace, may have changed since.
    changes: AtomicU64,
    /// Given once it holds the cache's first list.
    listed: Listed,
}

fn label_hash(key: &str, value: &str) -> u64 {
    foldhash::fast::FixedState::with_seed(0).hash_one((key, value))
}

type ByLabel = foldhash::HashMap<u64, foldhash::HashSet<ByName<CachedPool>>>;

fn add(by_label: &mut ByLabel, pool: &Arc<CachedPool>) {
    for (key, value) in pool.pool.labels.iter() {
        by_label.entry(label_hash(key, value)).or_default().replace(ByName(Arc::clone(pool)));
    }
}

fn remove(by_label: &mut ByLabel, pool: &Arc<CachedPool>) {
    for (key, value) in pool.pool.labels.iter() {
        let hash = label_hash(key, value);
        if let Some(pools) = by_label.get_mut(&hash) {
            pools.remove(&ByName(Arc::clone(pool)));
            if pools.is_empty() {
                by_label.remove(&hash);
            }
        }
    }
}

impl PoolIndex {
    /// An index of `pools`, made at once.
    pub fn of(pools: impl IntoIterator<Item = Arc<CachedPool>>) -> Self {
        let index = Self::default();
        index.rebuild(pools);
        index
    }

    /// The pools that carry the label `key` with one of `values`.
    pub fn labelled(&self, key: &str, values: &BTreeSet<String>) -> Vec<Arc<CachedPool>> {
        let by_label = self.by_label.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let carries = |p: &&ByName<CachedPool>| p.0.pool.labels.get(key).is_some_and(|v| values.contains(v));
        (values.iter())
            .filter_map(|value| by_label.get(&label_hash(key, value)))
            .flat_map(|pools| pools.iter().filter(carries).map(|p| Arc::clone(&p.0)))
            .collect()
    }

    /// How many pools carry the label `key` with one of `values`, or a
    /// label that hashes alike (rare): which of a selector's labels
    /// narrows the search most.
    pub fn count(&self, key: &str, values: &BTreeSet<String>) -> usize {
        let by_label = self.by_label.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        (values.iter())
            .filter_map(|value| by_label.get(&label_hash(key, value)))
            .map(|pools| pools.len())
            .sum()
    }

    /// `old` (the version the cache held) taken out and `new` (the one it
    /// holds now) put in, at once: a reconcile reading meanwhile finds one
    /// or the other, never neither.
    pub fn replace(&self, old: Option<&Arc<CachedPool>>, new: Option<&Arc<CachedPool>>) {
        let mut by_label = self.by_label.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Released after the cache took the change: whoever reads the
        // new count finds the cache as new.
        self.changes.fetch_add(1, Ordering::Release);
        if let Some(old) = old {
            remove(&mut by_label, old);
        }
        if let Some(new) = new {
            add(&mut by_label, new);
        }
    }

    /// Made again from what the cache holds after it listed.
    pub fn rebuild(&self, pools: impl IntoIterator<Item = Arc<CachedPool>>) {
        let mut fresh = ByLabel::default();
        for pool in pools {
            add(&mut fresh, &pool);
        }
        let mut by_label = self.by_label.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.changes.fetch_add(1, Ordering::Release);
        *by_label = fresh;
        drop(by_label);
        self.listed.set();
    }

    /// Returns once the index holds the cache's first list (see [`Listed`]).
    pub async fn listed(&self) {
        self.listed.wait().await;
    }

    /// A number that changes whenever a pool of the kind does, in any
    /// namespace (see [`PoolIndex::changes`]).
    pub fn version(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests;
