//! What the controller remembers of each application between reconciles,
//! under one lock: what its pool and node events are ([`Interest`], read
//! by the triggers) and how long its last reconcile took (its wake
//! window). An application is known from its first reconcile that read it
//! until one finds it gone.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::Duration;

use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{NodePoolApplication, PoolKind, PoolSelection};
use crate::pools::nodes::Membership;

use super::context::{wake_window, AppMeta};

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

#[derive(Debug)]
struct Known {
    interest: Interest,
    last_reconcile: Option<Duration>,
    /// Its last plan's rollout holds changes until releases under way
    /// turn Ready or fail: how many verdicts are worth a reconcile soon.
    waits_on_releases: Option<usize>,
    /// The verdicts seen since its last plan.
    verdicts: usize,
}

/// Every known application, by reference.
#[derive(Debug, Default)]
pub(super) struct AppIndex {
    known: RwLock<HashMap<ObjectRef<AppMeta>, Known>>,
}

impl AppIndex {
    /// The application was read: what concerns it now.
    pub(super) fn read(&self, app: ObjectRef<AppMeta>, interest: Interest) {
        let mut known = self.known.write().unwrap_or_else(|e| e.into_inner());
        match known.get_mut(&app) {
            Some(entry) => entry.interest = interest,
            None => {
                known.insert(
                    app,
                    Known {
                        interest,
                        last_reconcile: None,
                        waits_on_releases: None,
                        verdicts: 0,
                    },
                );
            }
        }
    }

    /// The application is gone: nothing of it is kept.
    pub(super) fn forget(&self, app: &ObjectRef<AppMeta>) {
        self.known.write().unwrap_or_else(|e| e.into_inner()).remove(app);
    }

    /// A reconcile of `app` ended after `took`; returns whether the
    /// application is still known (a reconcile that found it gone leaves
    /// nothing behind, its measurements included).
    pub(super) fn reconciled(&self, app: &ObjectRef<AppMeta>, took: Duration) -> bool {
        let mut known = self.known.write().unwrap_or_else(|e| e.into_inner());
        match known.get_mut(app) {
            Some(entry) => {
                entry.last_reconcile = Some(took);
                true
            }
            None => false,
        }
    }

    /// What `app`'s last plan said of its rollout: how many releases
    /// must reach a verdict before it is worth planning again at once
    /// (see [`crate::reconcile::plan::Plan::waits_on_releases`]). The
    /// verdicts are counted afresh from here.
    pub(super) fn planned(&self, app: &ObjectRef<AppMeta>, waits_on_releases: Option<usize>) {
        let mut known = self.known.write().unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = known.get_mut(app) {
            entry.waits_on_releases = waits_on_releases;
            entry.verdicts = 0;
        }
    }

    /// A release of `app` reached a verdict (turned Ready, failed, or
    /// went): whether that makes enough, since its last plan, for its
    /// rollout to move on now. An application whose rollout waits on no
    /// release, or not read yet, moves on at its window's end.
    pub(super) fn verdict(&self, app: &ObjectRef<AppMeta>) -> bool {
        let mut known = self.known.write().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = known.get_mut(app) else {
            return false;
        };
        let Some(enough) = entry.waits_on_releases else {
            return false;
        };
        entry.verdicts += 1;
        entry.verdicts >= enough
    }

    /// How long `app`'s events are folded into one reconcile (see
    /// [`wake_window`]).
    pub(super) fn wake_window(&self, app: &ObjectRef<AppMeta>) -> Duration {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        wake_window(known.get(app).and_then(|k| k.last_reconcile))
    }

    /// The applications `served` that an event concerns: those whose
    /// interest `concerns` says so, and those not read yet, which must
    /// look for themselves.
    pub(super) fn concerned(
        &self,
        served: &Store<AppMeta>,
        concerns: impl Fn(&Interest) -> bool,
    ) -> Vec<ObjectRef<AppMeta>> {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        served
            .state()
            .iter()
            .map(|app| ObjectRef::from_obj(app.as_ref()))
            .filter(|app| known.get(app).is_none_or(|k| concerns(&k.interest)))
            .collect()
    }

    /// The known applications `served` whose interest `concerns` says so;
    /// one not read yet has no interest to match.
    pub(super) fn known_concerned(
        &self,
        served: &Store<AppMeta>,
        concerns: impl Fn(&Interest) -> bool,
    ) -> Vec<ObjectRef<AppMeta>> {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        known
            .iter()
            .filter(|(app, k)| concerns(&k.interest) && served.get(app).is_some())
            .map(|(app, _)| app.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interest(kind: PoolKind) -> Interest {
        Interest {
            kind,
            namespace: "edge".into(),
            selection: PoolSelection::default(),
            membership: Membership::Label("pool".into()),
            chart_source: None,
        }
    }

    #[test]
    fn a_reconcile_of_an_application_it_forgot_is_not_recorded() {
        let index = AppIndex::default();
        let app = ObjectRef::<AppMeta>::new("a").within("ns");
        assert!(!index.reconciled(&app, Duration::from_secs(2)), "never read");
        index.read(app.clone(), interest(PoolKind::OpenYurt));
        assert!(index.reconciled(&app, Duration::from_secs(2)));
        assert_eq!(index.wake_window(&app), Duration::from_secs(20));
        index.read(app.clone(), interest(PoolKind::KubeEdge));
        assert_eq!(index.wake_window(&app), Duration::from_secs(20), "a new read keeps the time");
        index.forget(&app);
        assert!(!index.reconciled(&app, Duration::from_secs(2)));
        assert_eq!(index.wake_window(&app), wake_window(None));
    }
}
