//! The hashes releases are stamped with: of a release's spec (see
//! [`super::spec_hash`]), and of what it read of its pool
//! ([`crate::api::naming::ANNOTATION_POOL_INPUTS`]), by which a release
//! of the current revision that would be written otherwise now is told to
//! differ by its pool's own change (a rollout) or by the controller's
//! rendering alone.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::pools::nodes::Membership;
use crate::pools::Pool;

/// The hash of what [`super::release`] reads of `pool`: every field of
/// [`Pool`] it reads, by name, so that a field added to it does not
/// compile until it is taken in or said to be left out here. Stable
/// across controller versions (a SHA-256 of canonical JSON), since a
/// release written by one version is compared by the next.
pub fn pool_inputs(pool: &Pool) -> String {
    let Pool {
        name,
        labels,
        annotations,
        marks,
        // Left out: not read by the build (see `plan::memo::pool_inputs`).
        namespace: _,
        health: _,
        cluster_ids: _,
    } = pool;
    let map = |m: &crate::pools::Labels| {
        m.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>()
    };
    let marks = match marks {
        Membership::Label(label) => format!("label {label}"),
        Membership::Marker(value) => format!("marker {value}"),
        Membership::OwnCluster => "own cluster".to_string(),
    };
    let inputs = json!({
        "name": name,
        "labels": map(labels),
        "annotations": map(annotations),
        "marks": marks,
    });
    let mut text = String::new();
    canonical(&inputs, &mut text);
    hash_hex(&text)
}

/// The first 8 bytes of the SHA-256 of `canonical`, in hex.
pub(super) fn hash_hex(canonical: &str) -> String {
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// `value` as JSON with its keys sorted, so equal values hash alike.
pub(super) fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}
