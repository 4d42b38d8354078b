//! Ownership: the controller's field managers appear on no object it does
//! not own. A HelmRelease is ours when an application is its controller
//! owner; one of ours orphaned (`deletionPolicy: Orphan`) keeps our
//! managers' entries from before, and is told by its orphan mark.

use serde_json::Value;

use super::{Invariant, Kind, Record, Violation};

/// The field managers of the controller (`nodepool-fanout`, and its
/// suspend, inert and uninstall-skipped managers).
const OURS: &str = "nodepool-fanout";

pub(super) fn check(record: &Record) -> Vec<Violation> {
    if record.kind != Kind::HelmRelease || record.deleted || owned(&record.object) {
        return Vec::new();
    }
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
            "{} is owned by no application, yet our field managers wrote it: {}",
            record.key(),
            ours.join(", ")
        ),
        objects: vec![record.key().to_string()],
        story: Vec::new(),
    }]
}

/// Owned by an application, or orphaned by one (our orphan mark says so).
fn owned(release: &Value) -> bool {
    let owners = release.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    let by_application = owners.into_iter().flatten().any(|o| {
        o["kind"] == "NodePoolApplication" && o["controller"] == true && o["apiVersion"].as_str().is_some()
    });
    let orphaned = super::annotation(release, crate::reconcile::orphan::ANNOTATION_ORPHANED_FROM).is_some();
    by_application || orphaned
}
