//! Field ownership of releases created by POST.
//!
//! A new HelmRelease is created with a plain create: at ten thousand pools
//! the API server takes about a third longer to create by server-side apply
//! (see docs/performance.md, "Scale"). A create records our fields under an
//! `Update` entry of our field manager, though, and a later apply prunes
//! only the fields its own `Apply` entry owns: a value dropped from the
//! application would stay on the release for good. So before the first
//! apply to such a release, its `Update` entry is turned into (or merged
//! into) our `Apply` entry, as client-go's `csaupgrade` does for kubectl.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::Value;

/// The one field manager every write of this controller uses.
pub const FIELD_MANAGER: &str = "nodepool-fanout";

/// Whether `entry` is our record of a create or an update of the object
/// itself (not of its status).
pub fn is_our_update(entry: &ManagedFieldsEntry) -> bool {
    entry.manager.as_deref() == Some(FIELD_MANAGER)
        && entry.operation.as_deref() == Some("Update")
        && entry.subresource.as_deref().unwrap_or_default().is_empty()
}

fn is_our_apply(entry: &ManagedFieldsEntry) -> bool {
    entry.manager.as_deref() == Some(FIELD_MANAGER)
        && entry.operation.as_deref() == Some("Apply")
        && entry.subresource.as_deref().unwrap_or_default().is_empty()
}

/// `entries` with our `Update` entries folded into our `Apply` entry (made
/// from the first of them when there is none), every other entry as it
/// was; `None` when there is nothing to fold.
pub fn upgraded(entries: &[ManagedFieldsEntry]) -> Option<Vec<ManagedFieldsEntry>> {
    if !entries.iter().any(is_our_update) {
        return None;
    }
    let mut out: Vec<ManagedFieldsEntry> = Vec::with_capacity(entries.len());
    let mut folded = FieldsV1(Value::Object(Default::default()));
    let mut first_update = None;
    for entry in entries {
        if is_our_update(entry) {
            if let Some(fields) = &entry.fields_v1 {
                union(&mut folded.0, &fields.0);
            }
            first_update.get_or_insert_with(|| (out.len(), entry.clone()));
        } else {
            out.push(entry.clone());
        }
    }
    match out.iter_mut().find(|e| is_our_apply(e)) {
        Some(apply) => {
            let mine = apply.fields_v1.get_or_insert_with(|| FieldsV1(Value::Object(Default::default())));
            union(&mut mine.0, &folded.0);
        }
        None => {
            let (at, update) = first_update?;
            out.insert(
                at,
                ManagedFieldsEntry {
                    operation: Some("Apply".into()),
                    fields_type: Some("FieldsV1".into()),
                    fields_v1: Some(folded),
                    ..update
                },
            );
        }
    }
    Some(out)
}

/// Adds the field set `more` to `set`: both are FieldsV1 trees, objects
/// whose keys name fields and whose leaves are empty objects.
fn union(set: &mut Value, more: &Value) {
    let (Value::Object(set), Value::Object(more)) = (set, more) else {
        return;
    };
    for (key, value) in more {
        match set.get_mut(key) {
            Some(existing) => union(existing, value),
            None => {
                set.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const US: &str = FIELD_MANAGER;

    fn entry(manager: &str, operation: &str, subresource: Option<&str>, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            api_version: Some("helm.toolkit.fluxcd.io/v2".into()),
            subresource: subresource.map(Into::into),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            time: None,
        }
    }

    fn created() -> Value {
        json!({ "f:spec": { "f:values": { "f:a": {}, "f:b": {} }, "f:interval": {} } })
    }

    #[test]
    fn a_create_becomes_our_apply_in_place() {
        let flux = entry("helm-controller", "Update", Some("status"), json!({ "f:status": {} }));
        let finalizer = entry("helm-controller", "Update", None, json!({ "f:metadata": {} }));
        let entries = vec![
            entry(US, "Update", None, created()),
            flux.clone(),
            finalizer.clone(),
        ];
        let upgraded = upgraded(&entries).expect("an Update entry to fold");
        assert_eq!(upgraded, vec![entry(US, "Apply", None, created()), flux, finalizer]);
    }

    #[test]
    fn an_update_beside_our_apply_is_merged_into_it() {
        let apply = entry(US, "Apply", None, json!({ "f:spec": { "f:values": { "f:a": {} } } }));
        let update = entry(US, "Update", None, json!({ "f:spec": { "f:values": { "f:b": {} }, "f:x": {} } }));
        let other = entry("kubectl-edit", "Update", None, json!({ "f:spec": { "f:values": { "f:c": {} } } }));
        let upgraded = upgraded(&[apply, other.clone(), update]).expect("an Update entry to fold");
        assert_eq!(
            upgraded,
            vec![
                entry(
                    US,
                    "Apply",
                    None,
                    json!({ "f:spec": { "f:values": { "f:a": {}, "f:b": {} }, "f:x": {} } })
                ),
                other,
            ]
        );
    }

    #[test]
    fn nothing_to_fold_changes_nothing() {
        let entries = vec![
            entry(US, "Apply", None, created()),
            // Our status writes are not the object's fields.
            entry(US, "Update", Some("status"), json!({ "f:status": {} })),
            entry("kubectl-edit", "Update", None, created()),
        ];
        assert_eq!(upgraded(&entries), None);
        assert_eq!(upgraded(&[]), None);
    }

    #[test]
    fn only_our_main_resource_updates_count() {
        assert!(is_our_update(&entry(US, "Update", None, json!({}))));
        assert!(is_our_update(&entry(US, "Update", Some(""), json!({}))));
        assert!(!is_our_update(&entry(US, "Update", Some("status"), json!({}))));
        assert!(!is_our_update(&entry(US, "Apply", None, json!({}))));
        assert!(!is_our_update(&entry("helm-controller", "Update", None, json!({}))));
    }
}
