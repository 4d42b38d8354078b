//! Which NodePool events matter to planning, and to which applications.
//!
//! OpenYurt rewrites a NodePool's status whenever a node's readiness
//! changes; planning reads only a pool's name, labels and annotations, and
//! whether it exists. So a watch event is a [`Change`] only when one of
//! those changed, and a change concerns only the applications whose
//! selection the pool is in, before or after it (so one it enters, leaves
//! or stays in).

use std::collections::{HashMap, HashSet};

use kube::api::DynamicObject;
use kube::runtime::watcher;

use crate::api::PoolSelection;
use crate::pools::{self, Pool};

/// A pool as planning read it before an event, and as it reads it after;
/// `None` where it did not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub before: Option<Pool>,
    pub after: Option<Pool>,
}

impl Change {
    /// Whether an application selecting `selection` must look again.
    /// A selector that cannot be read concerns every change: the
    /// application reports it at its next reconcile either way.
    pub fn concerns(&self, selection: &PoolSelection) -> bool {
        [&self.before, &self.after]
            .into_iter()
            .flatten()
            .any(|pool| pools::contains(selection, pool).unwrap_or(true))
    }
}

/// The pools as last seen, turning watch events into [`Change`]s.
#[derive(Debug, Default)]
pub struct PoolChanges {
    known: HashMap<String, Pool>,
    /// The pools seen since a re-list began, to find those deleted while
    /// the watch was down.
    relisting: Option<HashSet<String>>,
}

impl PoolChanges {
    pub fn observe(&mut self, event: watcher::Event<DynamicObject>) -> Vec<Change> {
        match event {
            watcher::Event::Init => {
                self.relisting = Some(HashSet::new());
                Vec::new()
            }
            watcher::Event::InitApply(object) => {
                let pool = Pool::from_object(&object);
                self.relisting.get_or_insert_default().insert(pool.name.clone());
                self.apply(pool)
            }
            watcher::Event::InitDone => {
                let seen = self.relisting.take().unwrap_or_default();
                let gone: Vec<String> =
                    self.known.keys().filter(|name| !seen.contains(*name)).cloned().collect();
                gone.into_iter()
                    .map(|name| Change {
                        before: self.known.remove(&name),
                        after: None,
                    })
                    .collect()
            }
            watcher::Event::Apply(object) => self.apply(Pool::from_object(&object)),
            watcher::Event::Delete(object) => {
                let last = Pool::from_object(&object);
                vec![Change {
                    before: self.known.remove(&last.name).or(Some(last)),
                    after: None,
                }]
            }
        }
    }

    fn apply(&mut self, pool: Pool) -> Vec<Change> {
        match self.known.insert(pool.name.clone(), pool.clone()) {
            // Status churn: nothing planning reads changed.
            Some(before) if before == pool => Vec::new(),
            before => vec![Change {
                before,
                after: Some(pool),
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nodepool(name: &str, labels: serde_json::Value, ready_nodes: u32) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
            "metadata": { "name": name, "labels": labels },
            "status": { "readyNodeNum": ready_nodes }
        }))
        .unwrap()
    }

    fn selection(value: serde_json::Value) -> PoolSelection {
        serde_json::from_value(value).unwrap()
    }

    fn names(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| c.after.as_ref().or(c.before.as_ref()).map(|p| p.name.clone()).unwrap_or_default())
            .collect()
    }

    #[test]
    fn status_churn_is_no_change_and_a_label_is() {
        let mut pools = PoolChanges::default();
        assert_eq!(
            names(&pools.observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "east" }), 1)))),
            ["hz"]
        );
        assert!(pools
            .observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "east" }), 0)))
            .is_empty());
        let changed = pools.observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "west" }), 0)));
        assert_eq!(changed[0].before.as_ref().unwrap().labels["r"], "east");
        assert_eq!(changed[0].after.as_ref().unwrap().labels["r"], "west");
    }

    #[test]
    fn a_deletion_is_a_change_even_unseen_before() {
        let mut pools = PoolChanges::default();
        let gone = pools.observe(watcher::Event::Delete(nodepool("hz", json!({ "r": "east" }), 1)));
        assert_eq!(
            gone,
            vec![Change {
                before: Some(Pool::from_object(&nodepool("hz", json!({ "r": "east" }), 1))),
                after: None
            }]
        );
    }

    #[test]
    fn a_relist_reports_what_changed_and_what_vanished_meanwhile() {
        let mut pools = PoolChanges::default();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(nodepool("a", json!({}), 1)),
            watcher::Event::InitApply(nodepool("b", json!({}), 1)),
            watcher::Event::InitDone,
        ] {
            pools.observe(event);
        }
        // The watch drops; meanwhile b is deleted and a relabelled.
        let mut changes = Vec::new();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(nodepool("a", json!({ "r": "east" }), 0)),
            watcher::Event::InitDone,
        ] {
            changes.extend(pools.observe(event));
        }
        assert_eq!(names(&changes), ["a", "b"]);
        assert!(changes[1].after.is_none(), "b is gone");
        // At rest, a re-list is no change at all.
        let mut again = Vec::new();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(nodepool("a", json!({ "r": "east" }), 3)),
            watcher::Event::InitDone,
        ] {
            again.extend(pools.observe(event));
        }
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn a_change_concerns_the_applications_the_pool_enters_leaves_or_is_in() {
        let mut pools = PoolChanges::default();
        pools.observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "east" }), 1)));
        let moved = pools
            .observe(watcher::Event::Apply(nodepool("hz", json!({ "r": "west" }), 1)))
            .remove(0);
        let east = selection(json!({ "selector": { "matchLabels": { "r": "east" } } }));
        let west = selection(json!({ "selector": { "matchLabels": { "r": "west" } } }));
        let north = selection(json!({ "selector": { "matchLabels": { "r": "north" } } }));
        let by_name = selection(json!({ "names": ["hz"] }));
        let other_name = selection(json!({ "names": ["sh"] }));
        assert!(moved.concerns(&east), "it left");
        assert!(moved.concerns(&west), "it entered");
        assert!(moved.concerns(&by_name), "it is in");
        assert!(!moved.concerns(&north));
        assert!(!moved.concerns(&other_name));
        let unreadable =
            selection(json!({ "selector": { "matchExpressions": [{ "key": "r", "operator": "Near" }] } }));
        assert!(moved.concerns(&unreadable));
    }
}
