//! What changed since a count: which applications a watch event
//! concerns, and the recent Node and pool changes kept to say so.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use crate::api::{NodePoolApplication, PoolKind};
use crate::pools::Pool;
use crate::reconcile::observe;

/// The most applications an event names; past it, it says everything.
pub(super) const MOST_NAMED: usize = 64;

/// The most Node and pool changes kept to say which applications they
/// concern; a stream further behind is told everything changed.
pub(super) const MOST_KEPT: usize = 1024;

/// The change count at each application's last change, the recent Node
/// and pool object changes (each with its labels before and after, since a
/// node relabelled leaves one pool for another), and the count at the last
/// change that may concern any (a relist).
#[derive(Debug, Default)]
pub(super) struct Versions {
    pub(super) apps: HashMap<String, u64>,
    /// (count, a pool kind or none for a Node, the labels it had or has,
    /// and for a pool, the pool).
    pub(super) members: std::collections::VecDeque<(u64, Member)>,
    pub(super) labels: HashMap<(Option<PoolKind>, String), BTreeMap<String, String>>,
    /// The count before the oldest member kept.
    pub(super) forgotten: u64,
    pub(super) everything: u64,
}

/// A Node or a pool object that changed, as it was and as it is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Member {
    Node(Vec<BTreeMap<String, String>>),
    Pool(PoolKind, Vec<Pool>),
}

/// What changed since a count: applications by name, and the Nodes and
/// pools whose applications are yet to be found.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Changed {
    pub(super) apps: BTreeSet<String>,
    pub(super) members: Vec<Member>,
}

impl Versions {
    pub(super) fn record(&mut self, concern: Concern, at: u64) {
        let member = match concern {
            Concern::App(key) => {
                self.apps.insert(key, at);
                return;
            }
            Concern::Everything => {
                self.everything = at;
                return;
            }
            Concern::Node(name, labels) => {
                let was = self.labels.insert((None, name), labels.clone());
                Member::Node(was.into_iter().chain([labels]).collect())
            }
            Concern::Pool(kind, pool) => {
                let was = self.labels.insert((Some(kind), pool.name.clone()), pool.label_map());
                let before = was.map(|labels| Pool {
                    labels: labels.into_iter().collect(),
                    ..pool.clone()
                });
                Member::Pool(kind, before.into_iter().chain([pool]).collect())
            }
        };
        self.members.push_back((at, member));
        while self.members.len() > MOST_KEPT {
            if let Some((at, _)) = self.members.pop_front() {
                self.forgotten = at;
            }
        }
    }

    /// What changed after the count `since`; `None` for everything.
    pub(super) fn since(&self, since: u64) -> Option<Changed> {
        if self.everything > since || self.forgotten > since {
            return None;
        }
        let apps = self.apps.iter().filter(|(_, at)| **at > since).map(|(key, _)| key.clone()).collect();
        let members = self.members.iter().filter(|(at, _)| *at > since).map(|(_, m)| m.clone()).collect();
        Some(Changed { apps, members })
    }
}

/// What one watch event may change on the console's pages.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Concern {
    /// The pages of one application (`namespace/name`), and the landing page.
    App(String),
    /// A Node, with its labels: the pages of the applications whose pools
    /// it belongs to.
    Node(String, BTreeMap<String, String>),
    /// A pool object: the pages of the applications of its kind that
    /// select it.
    Pool(PoolKind, Pool),
    Everything,
}

/// An application's key on the live pages.
pub(super) fn app_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

pub(super) fn of_application(app: &NodePoolApplication) -> Concern {
    Concern::App(app_key(&app.namespace().unwrap_or_default(), &app.name_any()))
}

/// A release, or a revision record, concerns the application that is its
/// controller owner.
pub(super) fn of_owned(object: &impl observe::Owners) -> Concern {
    match observe::owner_of::<NodePoolApplication>(object) {
        Some(app) => Concern::App(app_key(app.namespace.as_deref().unwrap_or_default(), &app.name)),
        None => Concern::Everything,
    }
}

pub(super) fn of_node(node: &Node) -> Concern {
    Concern::Node(node.name_any(), node.labels().clone())
}
