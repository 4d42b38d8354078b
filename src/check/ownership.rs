//! Ownership: the controller's field managers appear on no object it does
//! not own. A HelmRelease is ours when the application its label names
//! is its controller owner: that application by name, and by one of the
//! uids the checker saw it have (an application deleted and made again
//! owns none of its predecessor's releases, which the garbage collector
//! takes). One of ours orphaned (`deletionPolicy: Orphan`) keeps our
//! managers' entries from before, and is told by its orphan mark.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Invariant, Kind, Record, Violation};

/// Every uid each application (namespace, name) was seen with.
#[derive(Debug, Default)]
pub(super) struct ApplicationUids(BTreeMap<(String, String), BTreeSet<String>>);

impl ApplicationUids {
    pub(super) fn read_application(&mut self, app: &Value) {
        if let Some(uid) = super::text(app, "/metadata/uid") {
            self.0.entry(super::application_key(app)).or_default().insert(uid.to_string());
        }
    }

    /// Whether `uid` is one the application was seen with; `None` when
    /// the checker saw no record of the application at all (it judges
    /// what it saw, and an application it never read is no evidence).
    fn had(&self, namespace: &str, name: &str, uid: &str) -> Option<bool> {
        let uids = self.0.get(&(namespace.to_string(), name.to_string()))?;
        Some(uids.contains(uid))
    }
}

/// The field managers of the controller (`nodepool-fanout`, and its
/// suspend, inert and uninstall-skipped managers).
const OURS: &str = "nodepool-fanout";

pub(super) fn check(record: &Record, uids: &ApplicationUids) -> Vec<Violation> {
    if record.kind != Kind::HelmRelease || record.deleted {
        return Vec::new();
    }
    let owner = match owner(&record.object, uids) {
        Owner::Ours => return Vec::new(),
        Owner::Another(owner) => owner,
        Owner::None => "no application".to_string(),
    };
    let managers = record.object.pointer("/metadata/managedFields").and_then(Value::as_array);
    let ours: Vec<&str> = managers
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("manager").and_then(Value::as_str))
        .filter(|m| *m == OURS || m.starts_with(&format!("{OURS}-")))
        .collect();
    if ours.is_empty() {
        return Vec::new();
    }
    vec![Violation {
        invariant: Invariant::Ownership,
        message: format!(
            "{} is owned by {owner}, yet our field managers wrote it: {}",
            record.key(),
            ours.join(", ")
        ),
        objects: vec![record.key().to_string()],
        story: Vec::new(),
    }]
}

/// Who owns a release, as far as the controller's writes go.
enum Owner {
    /// The application its label names (one of its uids), or none since
    /// it was orphaned by it (our orphan mark says so).
    Ours,
    /// An application other than the one its label names, or one by a
    /// uid that application never had: said as the violation says it.
    Another(String),
    None,
}

fn owner(release: &Value, uids: &ApplicationUids) -> Owner {
    if super::annotation(release, crate::reconcile::orphan::ANNOTATION_ORPHANED_FROM).is_some() {
        return Owner::Ours;
    }
    let owners = release.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    let Some(controller) = owners.into_iter().flatten().find(|o| {
        o["kind"] == "NodePoolApplication" && o["controller"] == true && o["apiVersion"].as_str().is_some()
    }) else {
        return Owner::None;
    };
    let name = controller["name"].as_str().unwrap_or_default();
    let uid = controller["uid"].as_str().unwrap_or_default();
    let namespace = super::text(release, "/metadata/namespace").unwrap_or_default();
    let labelled = super::label(release, crate::api::naming::LABEL_APPLICATION);
    if labelled.is_some_and(|l| l != name) {
        return Owner::Another(format!(
            "application {name}, though its label names {}",
            labelled.unwrap_or_default()
        ));
    }
    match uids.had(namespace, name, uid) {
        Some(false) => Owner::Another(format!("application {name} by uid {uid}, which it never had")),
        _ => Owner::Ours,
    }
}
