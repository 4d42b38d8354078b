//! JSON text kept compressed in memory.
//!
//! At ten thousand pools the controller holds a HelmRelease twice over: as
//! the watch cache's copy of what each release holds, and, during a
//! fan-out, as the release it is about to write. Both are JSON text that
//! repeats itself (the placement patches name the pool three times), and
//! together they were most of the controller's memory. LZ4 reads back at
//! gigabytes a second, so a reconcile that reads every release pays
//! microseconds for it; primed with what every release holds
//! ([`dictionary`]), it keeps a release in a fifth of its text.

use std::sync::{Arc, LazyLock};

use serde_json::Value;

mod dictionary;

/// The text every pack is primed with, made once.
static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(dictionary::text);

/// JSON text, LZ4-compressed. Cheap to clone: the bytes are shared.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PackedJson(Arc<[u8]>);

impl PackedJson {
    pub fn new(text: &str) -> Self {
        Self(lz4_flex::block::compress_prepend_size_with_dict(text.as_bytes(), &DICTIONARY).into())
    }

    pub fn from_value(value: &Value) -> Self {
        Self::new(&value.to_string())
    }

    /// The JSON text. Only bytes made by [`PackedJson::new`] are ever
    /// read, so it decompresses to what was given.
    pub fn text(&self) -> String {
        lz4_flex::block::decompress_size_prepended_with_dict(&self.0, &DICTIONARY)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .unwrap_or_default()
    }

    /// The JSON, parsed; `None` if the text was not JSON.
    pub fn value(&self) -> Option<Value> {
        serde_json::from_str(&self.text()).ok()
    }

    /// Bytes held.
    pub fn packed_len(&self) -> usize {
        self.0.len()
    }
}

impl std::fmt::Debug for PackedJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PackedJson").field(&self.text()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_back_what_it_was_given() {
        for text in ["", "{}", r#"{"a":"ü ✓","b":[1,2.5,null]}"#] {
            assert_eq!(PackedJson::new(text).text(), text);
        }
        let value = json!({ "spec": { "values": { "replicas": 2 } } });
        assert_eq!(PackedJson::from_value(&value).value(), Some(value));
        assert_eq!(PackedJson::new("not json").value(), None);
    }

    #[test]
    fn a_release_with_placement_patches_takes_far_less_room() {
        let patch = |kind: &str| {
            format!(
                "apiVersion: apps/v1\nkind: {kind}\nmetadata:\n  name: pool-placement\nspec:\n  template:\n    \
                 spec:\n      nodeSelector:\n        apps.openyurt.io/nodepool: site-0042\n"
            )
        };
        let release = json!({
            "metadata": { "name": "gw-site-0042-1a2b3c4d", "labels": { "apps.fanout.dev/pool": "site-0042" } },
            "spec": {
                "interval": "10m",
                "postRenderers": [{ "kustomize": { "patches": [
                    { "patch": patch("Deployment"), "target": { "kind": "Deployment" } },
                    { "patch": patch("Job"), "target": { "kind": "Job" } },
                    { "patch": patch("CronJob"), "target": { "kind": "CronJob" } }
                ] } }]
            }
        });
        let text = release.to_string();
        let packed = PackedJson::new(&text);
        assert!(packed.packed_len() * 3 < text.len() * 2, "{} of {}", packed.packed_len(), text.len());
    }

    #[test]
    fn equal_texts_are_equal_packs() {
        assert_eq!(PackedJson::new(r#"{"a":1}"#), PackedJson::new(r#"{"a":1}"#));
        assert_ne!(PackedJson::new(r#"{"a":1}"#), PackedJson::new(r#"{"a":2}"#));
    }
}
