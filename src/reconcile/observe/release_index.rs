//! The releases' cache, indexed as the watch brings them: by the
//! application each belongs to, and by the Helm release each drives.
//!
//! A reconcile reads its own releases and asks after the few others it
//! could collide with. Walking every release of the namespace instead
//! cost a reconcile in proportion to the whole namespace: with ten shards
//! in one, nine tenths of what it walked (and sorted) were other shards'
//! releases, 77 ms at 90,000 of them beside 10,000 of its own
//! (`make bench-render`). The index is kept by [`ReleaseWriter`], the one
//! writer of the cache, so it never holds what the cache does not.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::hash::BuildHasher;
use std::sync::{Arc, RwLock};

use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::by_name::ByName;
use super::listed::Listed;
use super::others::application_owner;
use super::CachedRelease;
use crate::reconcile::plan::HelmReleaseKey;

/// The releases by application and by Helm release driven, shared by the
/// writer that keeps it and every reconcile that reads it.
#[derive(Debug, Default)]
pub struct ReleaseIndex {
    indexed: RwLock<Indexed>,
    /// Given once it holds the cache's first list.
    listed: Listed,
}

#[derive(Debug, Default)]
struct Indexed {
    /// By the uid of the application each one's controller owner
    /// reference names; a release of no application is in none. Known by
    /// namespace and name: a release of another namespace may name the
    /// application as its owner too (by hand), and is not one of its own.
    by_owner: foldhash::HashMap<String, foldhash::HashSet<ByName<CachedRelease>>>,
    /// By a hash of the Helm release it drives: a few bytes a release
    /// rather than both names again. A look-up checks the names of what
    /// it finds. Not by the release's namespace: HelmReleases of two
    /// namespaces with one `storageNamespace` and release name drive one
    /// Helm release (fourth review, item 10).
    by_helm_release: foldhash::HashMap<u64, Vec<Arc<CachedRelease>>>,
    /// By namespace, how many times a release there came, went, or changed
    /// in what another application's plan reads of it ([`as_another`]):
    /// a plan that found nothing to do reads this to know whether what
    /// it looked up of the others may have changed since.
    changes: foldhash::HashMap<String, u64>,
    /// The same, over every namespace.
    changes_anywhere: u64,
    /// How many times the index was made again from a list: counts of
    /// changes start again from nothing then, so they are told apart by it.
    lists: u64,
    /// How many of the releases are cut down ([`CachedRelease::cut_down`]):
    /// for the metrics, which a scrape reads without copying the cache.
    cut_down: usize,
}

/// What another application's plan reads of a release: whether it exists
/// under its name, whose it is, the Helm release it drives and since when.
fn as_another(release: &CachedRelease) -> impl Eq + '_ {
    let meta = &release.metadata;
    (
        (meta.name.as_deref(), meta.namespace.as_deref(), meta.creation_timestamp.as_ref()),
        application_owner(release).map(|owner| (owner.uid.as_str(), owner.name.as_str())),
        release.observed.is_some(),
        release.drives.as_ref(),
        release.site_pool.as_deref(),
    )
}

/// The key a release's Helm release is indexed by.
fn helm_release_hash(key: &HelmReleaseKey) -> u64 {
    foldhash::fast::FixedState::with_seed(0).hash_one((&key.0, &key.1))
}

/// The namespace a release stores its Helm release in, on this cluster,
/// when it is not its own: a change of it is a change another
/// application storing there reads (see [`ReleaseIndex::version`]).
fn storage_elsewhere(release: &CachedRelease) -> Option<&str> {
    let (storage, _) = release.drives.as_ref()?;
    let own = release.metadata.namespace.as_deref();
    // A site cluster's Helm release (`<cluster>:<storage>`) is another cluster's.
    Some(storage.as_str()).filter(|s| !s.contains(':') && Some(*s) != own)
}

impl Indexed {
    fn add(&mut self, release: &Arc<CachedRelease>) {
        self.cut_down += usize::from(release.cut_down);
        if let Some(owner) = application_owner(release.as_ref()) {
            let releases = self.by_owner.entry(owner.uid.clone()).or_default();
            releases.replace(ByName(Arc::clone(release)));
        }
        if let Some(key) = &release.drives {
            let drivers = self.by_helm_release.entry(helm_release_hash(key)).or_default();
            drivers.retain(|r| !same_object(r, release));
            drivers.push(Arc::clone(release));
        }
    }

    fn remove(&mut self, release: &Arc<CachedRelease>) {
        self.cut_down = self.cut_down.saturating_sub(usize::from(release.cut_down));
        if let Some(owner) = application_owner(release.as_ref()) {
            if let Some(releases) = self.by_owner.get_mut(owner.uid.as_str()) {
                releases.remove(&ByName(Arc::clone(release)));
                if releases.is_empty() {
                    self.by_owner.remove(owner.uid.as_str());
                }
            }
        }
        if let Some(key) = &release.drives {
            let hash = helm_release_hash(key);
            if let Some(drivers) = self.by_helm_release.get_mut(&hash) {
                drivers.retain(|r| !same_object(r, release));
                if drivers.is_empty() {
                    self.by_helm_release.remove(&hash);
                }
            }
        }
    }
}

/// One object of the namespace, whatever version of it each is.
fn same_object(a: &CachedRelease, b: &CachedRelease) -> bool {
    a.metadata.name == b.metadata.name && a.metadata.namespace == b.metadata.namespace
}

impl ReleaseIndex {
    /// An index of `releases`, made at once: for caches filled from a list
    /// (`get`, the console), which no writer keeps.
    pub fn of(releases: impl IntoIterator<Item = Arc<CachedRelease>>) -> Self {
        let mut indexed = Indexed::default();
        for release in releases {
            indexed.add(&release);
        }
        Self {
            indexed: RwLock::new(indexed),
            listed: Listed::done(),
        }
    }

    /// Returns once the index holds the cache's first list (see [`Listed`]).
    pub async fn listed(&self) {
        self.listed.wait().await;
    }

    /// The releases whose controller owner reference names the
    /// application of `uid`, in any order.
    pub fn owned_by(&self, uid: &str) -> Vec<Arc<CachedRelease>> {
        let indexed = self.indexed.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        (indexed.by_owner.get(uid).into_iter().flatten()).map(|r| Arc::clone(&r.0)).collect()
    }

    /// The releases that drive the Helm release `key`, in any namespace.
    pub fn driving(&self, key: &HelmReleaseKey) -> Vec<Arc<CachedRelease>> {
        let indexed = self.indexed.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let found = indexed.by_helm_release.get(&helm_release_hash(key));
        (found.into_iter().flatten())
            .filter(|r| r.drives.as_ref() == Some(key))
            .cloned()
            .collect()
    }

    /// Of the releases that drive the Helm release `key` (in any
    /// namespace) and pass `keep`, the one created first (by name, of those created
    /// in the same second). Looked at where they lie, under the read lock:
    /// planning asks this of every pool at every reconcile, and copying
    /// each pool's drivers out (its own release, mostly) was a tenth of a
    /// resync at rest.
    pub fn first_driving(
        &self,
        key: &HelmReleaseKey,
        keep: impl Fn(&CachedRelease) -> bool,
    ) -> Option<Arc<CachedRelease>> {
        let indexed = self.indexed.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let found = indexed.by_helm_release.get(&helm_release_hash(key));
        fn first(r: &CachedRelease) -> (Option<&Time>, Option<&str>) {
            (r.metadata.creation_timestamp.as_ref(), r.metadata.name.as_deref())
        }
        (found.into_iter().flatten())
            .filter(|r| r.drives.as_ref() == Some(key) && keep(r))
            .min_by(|a, b| first(a).cmp(&first(b)))
            .cloned()
    }

    /// `old` (the version the cache held) taken out and `new` (the one it
    /// holds now) put in, at once: a reconcile reading meanwhile finds one
    /// or the other, never neither.
    fn replace(&self, old: Option<&Arc<CachedRelease>>, new: Option<&Arc<CachedRelease>>) {
        let mut indexed = self.indexed.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        if old.map(|r| as_another(r)) != new.map(|r| as_another(r)) {
            // Counted in its namespace, and in the namespaces it stores its
            // Helm release in, before and after, where those are others.
            let mut namespaces: Vec<&str> = [old, new]
                .into_iter()
                .flatten()
                .flat_map(|r| [r.metadata.namespace.as_deref(), storage_elsewhere(r)])
                .flatten()
                .collect();
            namespaces.sort_unstable();
            namespaces.dedup();
            for namespace in namespaces {
                *indexed.changes.entry(namespace.to_string()).or_default() += 1;
            }
            indexed.changes_anywhere += 1;
        }
        if let Some(old) = old {
            indexed.remove(old);
        }
        if let Some(new) = new {
            indexed.add(new);
        }
    }

    /// Made again from what the cache holds after it listed.
    fn rebuild(&self, releases: Vec<Arc<CachedRelease>>) {
        let Self { indexed: fresh, .. } = Self::of(releases);
        let mut fresh = fresh.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut indexed = self.indexed.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        fresh.lists = indexed.lists + 1;
        *indexed = fresh;
        drop(indexed);
        self.listed.set();
    }

    /// How many of the releases are cut down, another shard's.
    pub fn cut_down(&self) -> usize {
        self.indexed.read().unwrap_or_else(|poisoned| poisoned.into_inner()).cut_down
    }

    /// A number that changes whenever a release of `namespace`, or one that
    /// stores its Helm release there, comes, goes or changes in what
    /// another application's plan reads of it (see
    /// [`crate::reconcile::plan::OtherReleases::version`]); a release's
    /// status, which helm-controller writes all day, does not change it.
    pub fn version(&self, namespace: &str) -> u64 {
        let indexed = self.indexed.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        let changes = indexed.changes.get(namespace).copied().unwrap_or_default();
        foldhash::quality::FixedState::with_seed(0).hash_one((indexed.lists, changes))
    }

    /// [`ReleaseIndex::version`] of every namespace at once: for sites
    /// that are clusters, whose drivers may be in any namespace.
    pub fn version_anywhere(&self) -> u64 {
        let indexed = self.indexed.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        foldhash::quality::FixedState::with_seed(0).hash_one((indexed.lists, indexed.changes_anywhere))
    }
}

/// The one writer of the releases' cache, which keeps its index with it:
/// each watch event is applied to the cache, then to the index, from the
/// version the cache held before it to the one it holds after.
pub struct ReleaseWriter {
    writer: Writer<CachedRelease>,
    store: Store<CachedRelease>,
    index: Arc<ReleaseIndex>,
}

impl Default for ReleaseWriter {
    fn default() -> Self {
        let writer = Writer::default();
        Self {
            store: writer.as_reader(),
            writer,
            index: Arc::default(),
        }
    }
}

impl ReleaseWriter {
    /// The cache it fills.
    pub fn store(&self) -> Store<CachedRelease> {
        self.store.clone()
    }

    /// The index it keeps.
    pub fn index(&self) -> Arc<ReleaseIndex> {
        Arc::clone(&self.index)
    }

    pub fn apply_watcher_event(&mut self, event: &watcher::Event<CachedRelease>) {
        let key = |release: &CachedRelease| ObjectRef::from_obj(release);
        let old = match event {
            watcher::Event::Apply(r) | watcher::Event::Delete(r) => self.store.get(&key(r)),
            _ => None,
        };
        self.writer.apply_watcher_event(event);
        match event {
            watcher::Event::Apply(r) => self.index.replace(old.as_ref(), self.store.get(&key(r)).as_ref()),
            watcher::Event::Delete(_) => self.index.replace(old.as_ref(), None),
            // The cache swaps in what the list brought only now.
            watcher::Event::InitDone => self.index.rebuild(self.store.state()),
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }
}

#[cfg(test)]
mod tests;
