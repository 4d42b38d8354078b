//! Isolation: no two HelmReleases drive one Helm release of one cluster,
//! and no object is in the inventories of two releases into one cluster.
//! A suspended release drives nothing (an inert one is suspended so), and
//! a cluster is the hub, or a site by the kubeconfig its release names.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::naming;

use super::{Invariant, Key, Kind, Violation};

/// What the release `key`, now `release`, shares with the others.
pub(super) fn check(objects: &BTreeMap<Key, Value>, key: &Key, release: &Value) -> Vec<Violation> {
    let mut violations = Vec::new();
    let cluster = naming::cluster_of(release);
    let drives = naming::helm_release_of(release).filter(|_| !suspended(release));
    let inventory = inventory(release);
    let others = objects
        .iter()
        .filter(|(k, _)| k.kind == Kind::HelmRelease && *k != key)
        .filter(|(_, other)| naming::cluster_of(other) == cluster);
    for (other_key, other) in others {
        let same_driven = drives.is_some() && !suspended(other) && naming::helm_release_of(other) == drives;
        if same_driven {
            let (storage, name) = drives.clone().unwrap_or_default();
            violations.push(Violation {
                invariant: Invariant::Isolation,
                message: format!("{key} and {other_key} both drive the Helm release {storage}/{name}"),
                objects: vec![key.to_string(), other_key.to_string()],
                story: Vec::new(),
            });
        }
        let theirs = self::inventory(other);
        for shared in inventory.iter().filter(|id| theirs.contains(id)) {
            violations.push(Violation {
                invariant: Invariant::Isolation,
                message: format!("{shared} is in the inventories of {key} and {other_key}"),
                objects: vec![key.to_string(), other_key.to_string(), shared.clone()],
                story: Vec::new(),
            });
        }
    }
    violations
}

fn suspended(release: &Value) -> bool {
    release.pointer("/spec/suspend") == Some(&Value::Bool(true))
}

/// The ids of what helm-controller applied for the release.
fn inventory(release: &Value) -> Vec<String> {
    let entries = release.pointer("/status/inventory/entries").and_then(Value::as_array);
    entries
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}
