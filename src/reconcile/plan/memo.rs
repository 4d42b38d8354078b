//! What the last plan of an application found for each pool, and from
//! what: a pool whose inputs are as they were, and whose release is the
//! very object (the same `resourceVersion`) that was found to hold the
//! spec built from them with nothing of ours edited, is not built again.
//! A reconcile then costs what changed: a release turning Ready changes
//! its `resourceVersion`, so that pool alone is built and checked again.
//!
//! A pool's inputs are everything [`crate::reconcile::release::build`]
//! reads: the application's part ([`app_inputs`]: its name, namespace,
//! uid, spec, shared chart, shard and Flux requests) and the pool's own
//! (every field of [`Pool`], hashed). Only pools
//! whose release needed no write are remembered; the plan's result with a
//! memo is the plan's result without one (a property test checks it over
//! random sequences of events).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use crate::pools::Pool;
use crate::reconcile::release::AppInfo;

use super::{HelmReleaseKey, ObservedRelease};

/// What one plan found, for the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memo {
    /// The application's part of every pool's inputs.
    app: u64,
    /// By pool name. Shared with the plan that found it, and with the
    /// next memo when the pool is as it was: 10,000 pools at rest are not
    /// copied field by field at every plan.
    pools: HashMap<String, Arc<Remembered>>,
}

/// A pool whose release held what was built for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Remembered {
    inputs: u64,
    /// Its HelmRelease's object name, made from the application's name
    /// and the pool's: kept rather than hashed again at every plan.
    pub(super) name: String,
    resource_version: String,
    pub(super) spec_hash: String,
    pub(super) release_name: String,
    pub(super) helm_release: Option<HelmReleaseKey>,
    pub(super) size: usize,
}

impl Memo {
    /// A memo of the application whose inputs are `app`, empty, with room
    /// for `pools` pools.
    pub(super) fn with_capacity(app: u64, pools: usize) -> Self {
        Self {
            app,
            pools: HashMap::with_capacity(pools),
        }
    }

    /// How many pools it remembers.
    pub fn len(&self) -> usize {
        self.pools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pools.is_empty()
    }

    /// What was found for `pool`, if nothing it was found from has changed
    /// since: the application's inputs (`app`), the pool's, and its
    /// release (`observed`), which must still be the object then read, not
    /// suspended with the application and not inert.
    pub(super) fn recall(
        &self,
        app: u64,
        pool: &Pool,
        inputs: u64,
        observed: Option<&ObservedRelease>,
    ) -> Option<&Arc<Remembered>> {
        let remembered = self.name_of(app, pool)?;
        let observed = observed?;
        let same_object = observed.resource_version.as_deref() == Some(remembered.resource_version.as_str());
        let same_spec = observed.spec_hash.as_deref() == Some(remembered.spec_hash.as_str());
        let plain = !observed.suspended_with_app && !observed.inert;
        (same_object && same_spec && plain && remembered.inputs == inputs).then_some(remembered)
    }

    /// What is remembered of `pool`, whatever became of it since, when the
    /// application's inputs are as they were: its release's name, say,
    /// which only the application's name and the pool's make.
    pub(super) fn name_of(&self, app: u64, pool: &Pool) -> Option<&Arc<Remembered>> {
        self.pools.get(&pool.name).filter(|_| self.app == app)
    }

    /// Remembers that `observed`, the release of `pool`, holds the spec
    /// `spec_hash` built for it, with nothing of ours edited.
    pub(super) fn remember(&mut self, pool: &Pool, inputs: u64, observed: &ObservedRelease, found: Found) {
        let Some(resource_version) = observed.resource_version.clone() else {
            return;
        };
        let remembered = Remembered {
            inputs,
            name: observed.name.clone(),
            resource_version,
            spec_hash: found.spec_hash,
            release_name: found.release_name,
            helm_release: found.helm_release,
            size: found.size,
        };
        self.pools.insert(pool.name.clone(), Arc::new(remembered));
    }

    /// Keeps what an earlier memo found of `pool`, recalled since (see
    /// [`Memo::recall`]): what [`Memo::remember`] would make of it again.
    pub(super) fn keep(&mut self, pool: &Pool, remembered: Arc<Remembered>) {
        self.pools.insert(pool.name.clone(), remembered);
    }
}

/// What was found of a pool whose release needed no write.
pub(super) struct Found {
    pub spec_hash: String,
    pub release_name: String,
    pub helm_release: Option<HelmReleaseKey>,
    pub size: usize,
}

/// The application's part of every pool's inputs, as one number.
pub(super) fn app_inputs(app: &AppInfo) -> u64 {
    let mut hasher = DefaultHasher::new();
    (app.name, app.namespace, app.uid, app.shard, app.requests).hash(&mut hasher);
    serde_json::to_string(app.spec).unwrap_or_default().hash(&mut hasher);
    app.chart_ref
        .map(|c| (format!("{:?}", c.kind), &c.name, &c.namespace))
        .hash(&mut hasher);
    hasher.finish()
}

/// A pool's own inputs, as one number.
pub(super) fn pool_inputs(pool: &Pool) -> u64 {
    let mut hasher = DefaultHasher::new();
    // Every field: a field added to `Pool` is part of the inputs without
    // a change here (the derive hashes it, or fails to compile).
    pool.hash(&mut hasher);
    hasher.finish()
}
