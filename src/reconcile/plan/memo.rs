//! What the last plan of an application found for each pool, and from
//! what: a pool whose inputs are as they were, and whose release is the
//! very object (the same `resourceVersion`) that was found to hold the
//! spec built from them with nothing of ours edited, is not built again.
//! A reconcile then costs what changed: a release turning Ready changes
//! its `resourceVersion`, so that pool alone is built and checked again.
//!
//! A pool's inputs are everything [`crate::reconcile::release::build::release`]
//! reads that can change what it builds: the application's part
//! ([`app_inputs`]: its name, namespace, spec, shared chart, shard and
//! Flux requests) and the pool's own ([`pool_inputs`]: its labels,
//! annotations and how its nodes are marked). Both name each field they
//! leave out, and why; a test leaves out each input in turn and sees the
//! plans differ. Only pools
//! whose release needed no write are remembered; the plan's result with a
//! memo is the plan's result without one (a property test checks it over
//! random sequences of events).

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use crate::chart::shared::ChartRef;
use crate::pools::Pool;
use crate::reconcile::release::build::AppInfo;

use super::rest::Rest;
use super::{HelmReleaseKey, ObservedRelease};

/// What one plan found, for the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memo {
    /// The application's part of every pool's inputs.
    app: u64,
    /// By pool name. Shared with the plan that found it, and with the
    /// next memo when the pool is as it was: 10,000 pools at rest are not
    /// copied field by field at every plan.
    pools: foldhash::HashMap<String, Arc<Remembered>>,
    /// When the plan was at rest: what the next reconcile compares its
    /// input with, to end without planning (see [`super::rest`]).
    rest: Option<Rest>,
}

/// A pool whose release held what was built for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Remembered {
    inputs: u64,
    /// Its HelmRelease's object name, made from the application's name
    /// and the pool's: kept rather than hashed again at every plan.
    pub(super) name: String,
    resource_version: String,
    pub(super) made: Arc<Made>,
}

/// What a pool's release was built into, as planning reads it: shared by
/// the plan that built it, the memo that remembers it and the plans that
/// recall it, so that a pool at rest copies none of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Made {
    /// The Helm release's name (`spec.releaseName`).
    pub release_name: String,
    pub spec_hash: String,
    /// The Helm release it drives.
    pub helm_release: Option<HelmReleaseKey>,
    /// The bytes of its spec and labels as JSON, against the
    /// application's budget.
    pub size: usize,
}

impl Memo {
    /// A memo of the application whose inputs are `app`, empty, with room
    /// for `pools` pools.
    pub(super) fn with_capacity(app: u64, pools: usize) -> Self {
        Self {
            app,
            pools: foldhash::HashMap::with_capacity_and_hasher(pools, Default::default()),
            rest: None,
        }
    }

    /// What the plan that made it left when it was at rest.
    pub fn rest(&self) -> Option<&Rest> {
        self.rest.as_ref()
    }

    /// What the plan left when it was at rest, no longer kept: the runtime
    /// keeps it apart, and only once the reconcile ended with nothing
    /// failed and nothing written.
    pub fn take_rest(&mut self) -> Option<Rest> {
        self.rest.take()
    }

    pub(super) fn set_rest(&mut self, rest: Option<Rest>) {
        self.rest = rest;
    }

    /// How many pools it remembers.
    pub fn len(&self) -> usize {
        self.pools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    /// A memo that remembers `pools` pools, `p0`, `p1`…, for tests of
    /// those who keep memos.
    #[cfg(test)]
    pub fn for_tests(pools: usize) -> Self {
        let made = Arc::new(Made {
            release_name: "r".into(),
            spec_hash: "h".into(),
            helm_release: None,
            size: 1,
        });
        let mut memo = Self::with_capacity(0, pools);
        for n in 0..pools {
            let remembered = Remembered {
                inputs: 0,
                name: format!("r-p{n}"),
                resource_version: "1".into(),
                made: Arc::clone(&made),
            };
            memo.pools.insert(format!("p{n}"), Arc::new(remembered));
        }
        memo
    }

    /// What was found for `pool`, if nothing it was found from has changed
    /// since: the application's inputs (`app`), the pool's, and its
    /// release (`observed`), which must still be the object then read, not
    /// suspended with the application and not inert. (Planning looks the
    /// pool up once, with [`Memo::name_of`], and asks [`Remembered::holds`].)
    #[cfg(test)]
    pub(super) fn recall(
        &self,
        app: u64,
        pool: &Pool,
        inputs: u64,
        observed: Option<&ObservedRelease>,
    ) -> Option<&Arc<Remembered>> {
        self.name_of(app, pool).filter(|remembered| remembered.holds(inputs, observed))
    }

    /// What is remembered of `pool`, whatever became of it since, when the
    /// application's inputs are as they were: its release's name, say,
    /// which only the application's name and the pool's make.
    pub(super) fn name_of(&self, app: u64, pool: &Pool) -> Option<&Arc<Remembered>> {
        self.pools.get(&pool.name).filter(|_| self.app == app)
    }

    /// Remembers that `observed`, the release of `pool`, holds the release
    /// `made` for it, with nothing of ours edited.
    pub(super) fn remember(&mut self, pool: &Pool, inputs: u64, observed: &ObservedRelease, made: Arc<Made>) {
        let Some(resource_version) = observed.resource_version.clone() else {
            return;
        };
        let remembered = Remembered {
            inputs,
            name: observed.name.clone(),
            resource_version,
            made,
        };
        self.pools.insert(pool.name.clone(), Arc::new(remembered));
    }

    /// Keeps what an earlier memo found of `pool`, recalled since (see
    /// [`Memo::recall`]): what [`Memo::remember`] would make of it again.
    pub(super) fn keep(&mut self, pool: &Pool, remembered: Arc<Remembered>) {
        self.pools.insert(pool.name.clone(), remembered);
    }
}

impl Remembered {
    /// Whether it still holds for a pool whose inputs are `inputs` and
    /// whose release is `observed` (see [`Memo::recall`]), the
    /// application's inputs being as they were.
    pub(super) fn holds(&self, inputs: u64, observed: Option<&ObservedRelease>) -> bool {
        let Some(observed) = observed else {
            return false;
        };
        let same_object = observed.resource_version.as_deref() == Some(self.resource_version.as_str());
        let same_spec = observed.spec_hash.as_deref() == Some(self.made.spec_hash.as_str());
        let plain = !observed.suspended_with_app && !observed.inert;
        same_object && same_spec && plain && self.inputs == inputs
    }
}

/// The hasher of inputs: one fixed seed, so that the same inputs give the
/// same number from one plan to the next; of foldhash's quality variant,
/// whose 64 bits make a collision (a changed pool taken for unchanged) as
/// unlikely as the standard library's hasher does, at a fraction of the cost.
pub(super) fn inputs_hasher() -> impl Hasher {
    foldhash::quality::FixedState::with_seed(0x6e70_665f_6d65_6d6f).build_hasher()
}

/// The application's part of every pool's inputs, as one number: every
/// field of [`AppInfo`] that can change what a pool's release is found to
/// be, by name, so that a field added to it does not compile until it is
/// taken in or said to be left out here.
pub(super) fn app_inputs(app: &AppInfo) -> u64 {
    let AppInfo {
        name,
        namespace,
        // Left out: the uid enters only the releases' owner reference,
        // which neither the spec hash nor the drift check reads, and the
        // releases planned are those whose owner reference names this uid
        // already.
        uid: _,
        spec,
        chart_ref,
        // Left out: a remembered release holds the spec hash built from
        // these inputs, and `release::build::release` checks the values against the
        // chart's schema only when the spec hash is not the release's (the
        // chart reference is part of the spec). A new schema therefore
        // changes nothing of a pool at rest, and hashing it at each plan
        // would cost as much as the check it spares.
        chart: _,
        shard,
        requests,
    } = *app;
    let mut hasher = inputs_hasher();
    part(&mut hasher, "app.name", name);
    part(&mut hasher, "app.namespace", namespace);
    part(&mut hasher, "app.spec", serde_json::to_string(spec).unwrap_or_default());
    let chart_ref = chart_ref.map(
        |ChartRef {
             kind,
             name,
             namespace,
         }| (kind.as_str(), name, namespace),
    );
    part(&mut hasher, "app.chartRef", chart_ref);
    part(&mut hasher, "app.shard", shard);
    part(&mut hasher, "app.requests", requests);
    hasher.finish()
}

/// A pool's own inputs, as one number: every field of [`Pool`] that
/// [`crate::reconcile::release::build::release`] reads, by name, so that a field
/// added to it does not compile until it is taken in or said to be left
/// out here.
pub(super) fn pool_inputs(pool: &Pool) -> u64 {
    let Pool {
        // Left out: the memo is looked up by it.
        name: _,
        labels,
        annotations,
        marks,
        // Left out: neither is read by the build. A site cluster's
        // namespace is its application's (an application selects only the
        // profiles of its own namespace); its health says whether it is
        // offline, which the rollout reads, so a site whose health flaps
        // is not built again for it.
        namespace: _,
        health: _,
        // Left out: the build does not read them; the checks that do
        // (another application's release on the same cluster, one
        // cluster selected twice) run after it at every plan, memo or not.
        cluster_ids: _,
    } = pool;
    let mut hasher = inputs_hasher();
    part(&mut hasher, "pool.labels", labels);
    part(&mut hasher, "pool.annotations", annotations);
    part(&mut hasher, "pool.marks", marks);
    hasher.finish()
}

/// One input, hashed: named, so that a test can leave each out in turn
/// and see planning with the memo go wrong (see [`dropping`]).
#[cfg_attr(not(test), allow(unused_variables))]
fn part(hasher: &mut impl Hasher, name: &'static str, value: impl Hash) {
    #[cfg(test)]
    if dropping::leaves_out(name) {
        return;
    }
    value.hash(hasher);
}

/// For tests: leave one input out of the key, as a mistake would, and
/// list the inputs the key takes in.
#[cfg(test)]
pub(super) mod dropping {
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    thread_local! {
        static LEFT_OUT: RefCell<Option<&'static str>> = const { RefCell::new(None) };
        static SEEN: RefCell<BTreeSet<&'static str>> = const { RefCell::new(BTreeSet::new()) };
    }

    /// Whether `name` is to be left out; notes that it is an input.
    pub(super) fn leaves_out(name: &'static str) -> bool {
        SEEN.with(|seen| seen.borrow_mut().insert(name));
        LEFT_OUT.with(|left_out| *left_out.borrow() == Some(name))
    }

    /// The inputs hashed on this thread so far.
    pub(in crate::reconcile::plan) fn inputs() -> BTreeSet<&'static str> {
        SEEN.with(|seen| seen.borrow().clone())
    }

    /// Runs `f` with `name` left out of every key it makes on this thread.
    pub(in crate::reconcile::plan) fn without<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
        LEFT_OUT.with(|left_out| *left_out.borrow_mut() = Some(name));
        let out = f();
        LEFT_OUT.with(|left_out| *left_out.borrow_mut() = None);
        out
    }
}
