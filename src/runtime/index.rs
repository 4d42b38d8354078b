//! Everything the controller keeps of each application between
//! reconciles, in one map under one lock: what its pool and node events
//! are ([`Interest`], read by the triggers), how long its last reconcile
//! took (its wake window), what its rollout waits on, its last plan's
//! memo, its failure streak and chart waits (its backoffs), and which
//! metric series it has.
//!
//! An application is kept only while this instance serves it (it is in
//! the watch's store), and forgotten whole, its metric series with it, by
//! the one function [`AppIndex::forget`]: on the watch's delete event (an
//! application deleted without our finalizer, or out of this shard), on a
//! relist that no longer lists it, when a reconcile finds it gone, and
//! when it is finalized. kube-runtime's controller runs no reconcile for
//! an object no longer in its store, so a reconcile alone would not see
//! every application go.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use crate::api::{NodePoolApplication, PoolKind, PoolSelection};
use crate::pools::nodes::Membership;
use crate::reconcile::plan::{Memo, Rest};
use crate::reconcile::rollout::analysis::Records;
use crate::runtime::metrics::{Metrics, PoolCounts, ResourceInfoLabels};

use super::context::{wake_window, AppMeta};
use super::woken::{Cause, Timer, Woken};

/// What of an application decides which pool and node events concern it.
#[derive(Debug, Clone)]
pub(super) struct Interest {
    /// The kind of its pools: events of other kinds' pools are not its.
    pub(super) kind: PoolKind,
    /// Its namespace: a pool of a namespaced kind elsewhere is not its.
    pub(super) namespace: String,
    pub(super) selection: PoolSelection,
    /// How a node names its pools, for this application.
    pub(super) membership: Membership,
    /// The OCIRepository its `spec.chartRef` names, `(namespace, name)`:
    /// a new revision there is a change to roll out.
    pub(super) chart_source: Option<(String, String)>,
}

impl Interest {
    /// As the application's spec says it now.
    pub(super) fn of(app: &NodePoolApplication, namespace: &str) -> Self {
        Interest {
            kind: app.spec.pools.kind,
            namespace: namespace.to_string(),
            selection: app.spec.pools.selection(),
            membership: Membership::of(&app.spec.pools, app.spec.placement.node_label.as_deref()),
            chart_source: app.spec.chart_ref.as_ref().map(|r| {
                let source_namespace = r.namespace.clone().unwrap_or_else(|| namespace.to_string());
                (source_namespace, r.name.clone())
            }),
        }
    }
}

/// What is kept of one application.
#[derive(Debug, Default)]
struct Known {
    /// `None` until a reconcile reads it (one whose read failed may have a
    /// failure streak all the same).
    interest: Option<Interest>,
    last_reconcile: Option<Duration>,
    /// Its last plan's rollout holds changes until releases under way
    /// turn Ready or fail: how many verdicts are worth a reconcile soon.
    waits_on_releases: Option<usize>,
    /// The verdicts seen since its last plan.
    verdicts: usize,
    /// Its last plan's memo, with the uid of the object it was made for:
    /// an application deleted and made again under the same name is
    /// another object, planned afresh.
    memo: Option<(String, Arc<Memo>)>,
    /// What its last plan left when it was at rest, once that reconcile
    /// ended with nothing failed and nothing written: the next reconcile
    /// over the same input ends without planning. Made for the object of
    /// the memo's uid; let go when a new memo is kept.
    rest: Option<Rest>,
    /// What its metric checks answered for the revision under way, with
    /// the uid of the object they were asked for.
    answers: Option<(String, Arc<Records>)>,
    /// Consecutive reconciles that failed, for its backoff.
    failures: u32,
    /// Consecutive reconciles whose writes waited on the chart: a source
    /// that stays unready is looked at less and less often (its own events
    /// still wake the application at once).
    chart_waits: u32,
    /// Its `gotk_resource_info` series, so that a change of its labels
    /// removes the old one.
    info: Option<ResourceInfoLabels>,
    /// The names of its releases that someone else's HelmRelease holds,
    /// from its last writes: when one of those goes, it may write at once
    /// rather than at the end of its failure backoff.
    names_taken: Vec<String>,
    /// What has woken it since its last reconcile began.
    woken: Woken,
    /// The releases its last reconcile created that the release cache has
    /// not shown yet, and when it created them.
    creates_unseen: Option<(Instant, Vec<String>)>,
}

/// How long a reconcile waits for the release cache to show the releases
/// the last one created: a watch is seconds behind on a busy API server,
/// and a create and delete before the watch brought the release leave it
/// never shown. Past this, planning goes ahead (the create path takes an
/// existing release of ours for ours).
pub const CREATES_SEEN_WITHIN: Duration = Duration::from_secs(15);

/// Every application this instance serves and has something of, by
/// reference.
pub(super) struct AppIndex {
    known: RwLock<HashMap<ObjectRef<AppMeta>, Known>>,
    /// The applications served, from their watch: nothing is kept of one
    /// that is not there (a reconcile under way when it went, an error
    /// policy after its delete event).
    served: Store<AppMeta>,
    metrics: Arc<Metrics>,
}

impl AppIndex {
    pub(super) fn new(metrics: Arc<Metrics>, served: Store<AppMeta>) -> Self {
        Self {
            known: RwLock::default(),
            served,
            metrics,
        }
    }

    /// The metrics the applications' series are kept in.
    pub(super) fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<ObjectRef<AppMeta>, Known>> {
        // A panic elsewhere while holding the lock leaves a usable map.
        self.known.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn read_lock(&self) -> std::sync::RwLockReadGuard<'_, HashMap<ObjectRef<AppMeta>, Known>> {
        self.known.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Changes what is kept of `app` with `change`, making its entry if
    /// need be, as long as it is served: checked under the lock, after
    /// which a delete event (which follows the store's update) can only
    /// come after the change, and removes it.
    fn keep<T>(&self, app: &ObjectRef<AppMeta>, change: impl FnOnce(&mut Known) -> T) -> Option<T> {
        let mut known = self.write();
        if let Some(entry) = known.get_mut(app) {
            return Some(change(entry));
        }
        self.served.get(app)?;
        Some(change(known.entry(app.clone()).or_default()))
    }

    /// Changes what is kept of `app`, if anything is.
    fn update<T>(&self, app: &ObjectRef<AppMeta>, change: impl FnOnce(&mut Known) -> T) -> Option<T> {
        self.write().get_mut(app).map(change)
    }

    /// One event of the applications' watch, once the store has taken it:
    /// an application deleted, or out of this shard, is forgotten; so is,
    /// at the end of a relist, every one the relist did not list (gone
    /// while the watch was down, with no delete event to say so).
    pub(super) fn watched(&self, event: &watcher::Event<AppMeta>) {
        match event {
            watcher::Event::Delete(app) => self.forget(&ObjectRef::from_obj(app)),
            watcher::Event::InitDone => {
                let gone: Vec<ObjectRef<AppMeta>> = {
                    let known = self.read_lock();
                    known.keys().filter(|app| self.served.get(app).is_none()).cloned().collect()
                };
                for app in &gone {
                    self.forget(app);
                }
            }
            watcher::Event::Apply(_) | watcher::Event::InitApply(_) | watcher::Event::Init => {}
        }
    }

    /// A watch event woke `app`.
    pub(super) fn woken(&self, app: &ObjectRef<AppMeta>, cause: Cause) {
        self.keep(app, |k| k.woken.event(cause));
    }

    /// The timer `app`'s reconcile set for the next one.
    pub(super) fn timer(&self, app: &ObjectRef<AppMeta>, timer: Timer) {
        self.keep(app, |k| k.woken.timer(timer));
    }

    /// What woke the reconcile of `app` that begins now.
    pub(super) fn take_woken(&self, app: &ObjectRef<AppMeta>) -> Woken {
        self.update(app, |k| k.woken.taken()).unwrap_or_default()
    }

    /// The application is gone, or finalized: nothing of it is kept, its
    /// metric series included.
    pub(super) fn forget(&self, app: &ObjectRef<AppMeta>) {
        let entry = self.write().remove(app);
        let namespace = app.namespace.as_deref().unwrap_or_default();
        let info = entry.and_then(|e| e.info);
        self.metrics.forget(namespace, &app.name, info.as_ref());
    }

    /// How many applications something is kept of.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.read_lock().len()
    }

    /// The application was read: what concerns it now.
    pub(super) fn read(&self, app: ObjectRef<AppMeta>, interest: Interest) {
        self.keep(&app, |entry| entry.interest = Some(interest));
    }

    /// A reconcile of `app` ended after `took`: its wake window, and
    /// Flux's per-object duration, from it. Returns whether the application
    /// is still known (a reconcile that found it gone leaves nothing
    /// behind, its measurements included).
    pub(super) fn reconciled(&self, app: &ObjectRef<AppMeta>, took: Duration) -> bool {
        let known = self.update(app, |entry| entry.last_reconcile = Some(took)).is_some();
        if known {
            let namespace = app.namespace.as_deref().unwrap_or_default();
            self.metrics.observe_object(namespace, &app.name, took);
        }
        known
    }

    /// What `app`'s last plan said of its rollout: how many releases
    /// must reach a verdict before it is worth planning again at once
    /// (see [`crate::reconcile::plan::Plan::waits_on_releases`]). The
    /// verdicts are counted afresh from here.
    pub(super) fn planned(&self, app: &ObjectRef<AppMeta>, waits_on_releases: Option<usize>) {
        self.update(app, |entry| {
            entry.waits_on_releases = waits_on_releases;
            entry.verdicts = 0;
        });
    }

    /// The releases `app`'s last reconcile created (see
    /// [`crate::reconcile::Ended::CreatesUnseen`]).
    pub(super) fn created(&self, app: &ObjectRef<AppMeta>, releases: Vec<String>) {
        self.update(app, |entry| {
            entry.creates_unseen = (!releases.is_empty()).then(|| (Instant::now(), releases));
        });
    }

    /// How many releases `app`'s last reconcile created are not `seen` in
    /// the cache yet, within [`CREATES_SEEN_WITHIN`] of their creation;
    /// those seen are forgotten, so each is looked up until it shows.
    pub(super) fn creates_unseen(
        &self,
        app: &ObjectRef<AppMeta>,
        seen: &dyn Fn(&str) -> bool,
    ) -> Option<usize> {
        self.update(app, |entry| {
            let (since, releases) = entry.creates_unseen.as_mut()?;
            releases.retain(|name| !seen(name));
            if releases.is_empty() || since.elapsed() > CREATES_SEEN_WITHIN {
                entry.creates_unseen = None;
                return None;
            }
            Some(releases.len())
        })
        .flatten()
    }

    /// A release of `app` reached a verdict (turned Ready, failed, or
    /// went): whether that makes enough, since its last plan, for its
    /// rollout to move on now. An application whose rollout waits on no
    /// release, or not read yet, moves on at its window's end.
    pub(super) fn verdict(&self, app: &ObjectRef<AppMeta>) -> bool {
        self.update(app, |entry| {
            let Some(enough) = entry.waits_on_releases else {
                return false;
            };
            entry.verdicts += 1;
            entry.verdicts >= enough
        })
        .unwrap_or(false)
    }

    /// The release names `app`'s last writes found taken by objects not
    /// its own.
    pub(super) fn names_taken(&self, app: &ObjectRef<AppMeta>, names: Vec<String>) {
        self.update(app, |entry| entry.names_taken = names);
    }

    /// The application waiting for the release name `name` of `namespace`
    /// to be given back, if any (a release's name is its application's
    /// alone, so at most one).
    pub(super) fn waiting_for_name(&self, namespace: &str, name: &str) -> Option<ObjectRef<AppMeta>> {
        let known = self.read_lock();
        known
            .iter()
            .find(|(app, entry)| {
                app.namespace.as_deref() == Some(namespace) && entry.names_taken.iter().any(|n| n == name)
            })
            .map(|(app, _)| app.clone())
    }

    /// The memo of `app`'s last plan, if it was made for the object `uid`.
    pub(super) fn memo(&self, app: &ObjectRef<AppMeta>, uid: &str) -> Option<Arc<Memo>> {
        let known = self.read_lock();
        let (made_for, memo) = known.get(app)?.memo.as_ref()?;
        (made_for == uid).then(|| Arc::clone(memo))
    }

    /// Keeps `memo`, of `app`'s plan of the object `uid`, for its next
    /// plan; an empty one is none.
    pub(super) fn keep_memo(&self, app: &ObjectRef<AppMeta>, uid: &str, memo: Memo) {
        let memo = (!memo.is_empty()).then(|| (uid.to_string(), Arc::new(memo)));
        self.update(app, |entry| {
            entry.memo = memo;
            entry.rest = None;
        });
    }

    /// What `app`'s last plan left at rest, if it was made for the object
    /// `uid` (see [`Known::rest`]).
    pub(super) fn rest(&self, app: &ObjectRef<AppMeta>, uid: &str) -> Option<Rest> {
        let known = self.read_lock();
        let entry = known.get(app)?;
        let (made_for, _) = entry.memo.as_ref()?;
        (made_for == uid).then(|| entry.rest.clone()).flatten()
    }

    /// Keeps what `app`'s last plan left at rest, beside its memo (kept
    /// first, by the same reconcile).
    pub(super) fn keep_rest(&self, app: &ObjectRef<AppMeta>, rest: Option<Rest>) {
        self.update(app, |entry| entry.rest = rest.filter(|_| entry.memo.is_some()));
    }

    /// What `app`'s metric checks answered, if asked for the object `uid`.
    pub(super) fn answers(&self, app: &ObjectRef<AppMeta>, uid: &str) -> Option<Arc<Records>> {
        let known = self.read_lock();
        let (made_for, answers) = known.get(app)?.answers.as_ref()?;
        (made_for == uid).then(|| Arc::clone(answers))
    }

    /// What `app`'s metric checks answered, if asked for the object `uid`,
    /// no longer kept.
    pub(super) fn take_answers(&self, app: &ObjectRef<AppMeta>, uid: &str) -> Option<Arc<Records>> {
        let (made_for, answers) = self.update(app, |entry| entry.answers.take())??;
        (made_for == uid).then_some(answers)
    }

    /// Keeps what `app`'s metric checks answered, asked for the object
    /// `uid`, while it is served; none is nothing. Answers come in after
    /// the reconcile that asked (see `super::asking`): an application
    /// served yet not remembered since is remembered with them.
    pub(super) fn keep_answers(&self, app: &ObjectRef<AppMeta>, uid: &str, answers: Records) {
        let answers = (!answers.is_empty()).then(|| (uid.to_string(), Arc::new(answers)));
        self.keep(app, |entry| entry.answers = answers);
    }

    /// One more reconcile of `app` failed: the failures in a row now, for
    /// its backoff (0 for an application no longer served).
    pub(super) fn failed(&self, app: &ObjectRef<AppMeta>) -> u32 {
        self.keep(app, |entry| {
            entry.failures = entry.failures.saturating_add(1);
            entry.failures
        })
        .unwrap_or(0)
    }

    /// Settles one reconcile of `app`: an error is counted by the error
    /// policy (through [`AppIndex::failed`]); anything else (done, waiting
    /// for source-controller, or finding it gone) ends the streak, so the
    /// next failure starts again from the first wait.
    pub(super) fn settle(&self, app: &ObjectRef<AppMeta>, ok: bool) {
        if ok {
            self.update(app, |entry| entry.failures = 0);
        }
    }

    /// One more reconcile of `app` whose writes waited on the chart: the
    /// waits in a row now (0 for an application no longer served).
    pub(super) fn chart_waited(&self, app: &ObjectRef<AppMeta>) -> u32 {
        self.keep(app, |entry| {
            entry.chart_waits = entry.chart_waits.saturating_add(1);
            entry.chart_waits
        })
        .unwrap_or(0)
    }

    /// `app`'s writes no longer wait on the chart.
    pub(super) fn chart_ready(&self, app: &ObjectRef<AppMeta>) {
        self.update(app, |entry| entry.chart_waits = 0);
    }

    /// `app`'s pool gauges, while it is known.
    pub(super) fn set_pools(&self, app: &ObjectRef<AppMeta>, counts: PoolCounts) {
        let namespace = app.namespace.as_deref().unwrap_or_default();
        // Under the lock: a forget cannot come between the check and the write.
        let mut known = self.write();
        if known.get_mut(app).is_some() {
            self.metrics.set_pools(namespace, &app.name, counts);
        }
    }

    /// `app`'s Ready status and suspension as `gotk_resource_info`, while
    /// it is known; the series of its old labels goes.
    pub(super) fn set_info(&self, app: &ObjectRef<AppMeta>, ready: &str, suspended: bool) {
        let namespace = app.namespace.as_deref().unwrap_or_default();
        let mut known = self.write();
        if let Some(entry) = known.get_mut(app) {
            let info = Metrics::info_labels(namespace, &app.name, ready, suspended);
            self.metrics.set_info(entry.info.as_ref(), &info);
            entry.info = Some(info);
        }
    }

    /// How long `app`'s events are folded into one reconcile (see
    /// [`wake_window`]).
    pub(super) fn wake_window(&self, app: &ObjectRef<AppMeta>) -> Duration {
        wake_window(self.read_lock().get(app).and_then(|k| k.last_reconcile))
    }

    /// The applications `served` that an event concerns: those whose
    /// interest `concerns` says so, and those not read yet, which must
    /// look for themselves.
    pub(super) fn concerned(
        &self,
        served: &Store<AppMeta>,
        concerns: impl Fn(&Interest) -> bool,
    ) -> Vec<ObjectRef<AppMeta>> {
        let known = self.read_lock();
        served
            .state()
            .iter()
            .map(|app| ObjectRef::from_obj(app.as_ref()))
            .filter(|app| known.get(app).and_then(|k| k.interest.as_ref()).is_none_or(&concerns))
            .collect()
    }

    /// The known applications `served` whose interest `concerns` says so;
    /// one not read yet has no interest to match.
    pub(super) fn known_concerned(
        &self,
        served: &Store<AppMeta>,
        concerns: impl Fn(&Interest) -> bool,
    ) -> Vec<ObjectRef<AppMeta>> {
        let known = self.read_lock();
        known
            .iter()
            .filter(|(app, k)| k.interest.as_ref().is_some_and(&concerns) && served.get(app).is_some())
            .map(|(app, _)| app.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests;
