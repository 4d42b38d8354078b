//! Reading watched objects so that no single object can stop a watch.
//!
//! serde_json refuses JSON nested deeper than 128 levels, and a list page is
//! one JSON document: a HelmRelease whose values nest 130 deep (which the
//! API server accepts) made every list of HelmReleases fail, so the caches
//! never synced and no application reconciled. Its managed fields mirror
//! the values' shape, so even a metadata-only watch fails on it.
//!
//! [`Shallow`] reads an object field by field instead, as raw text (which
//! serde_json skips over without counting depth), parses each field on its
//! own, and leaves out any field nested deeper than [`MAX_KEPT_DEPTH`],
//! naming it in `dropped`. The rest of the object, and every other object
//! of the page, reads as before.
//!
//! Of the managed fields, each entry is read without its `fieldsV1`, which
//! serde_json skips over as text: nothing watched reads which fields a
//! manager holds (only who wrote how, `managed_fields::is_our_update`; the
//! write that folds field ownership reads the object afresh), and the field
//! sets mirror the whole object. Parsing them was most of a release's
//! decode, and a release's watch event is decoded at every status write
//! helm-controller makes to it.

use std::collections::BTreeMap;

use kube::Resource;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The deepest a field kept from a watched object may nest, counted from
/// the object's root. Well within serde_json's 128 levels, so an object
/// kept can always be written out and read again whole.
pub const MAX_KEPT_DEPTH: usize = 96;

/// An object of type `K`, read field by field.
#[derive(Debug, Clone)]
pub struct Shallow<K> {
    pub object: K,
    /// Dotted paths of the fields left out for nesting too deep.
    pub dropped: Vec<String>,
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Shallow<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let fields = BTreeMap::<String, Box<RawValue>>::deserialize(deserializer)?;
        let (object, dropped) = read_fields(fields).map_err(D::Error::custom)?;
        let object = K::deserialize(Value::Object(object)).map_err(D::Error::custom)?;
        Ok(Self { object, dropped })
    }
}

/// Reads a field of the object root (depth 1) or of one of its fields
/// (depth 2: `spec.values`, `metadata.managedFields`), keeping those within
/// [`MAX_KEPT_DEPTH`].
fn read_fields(
    fields: BTreeMap<String, Box<RawValue>>,
) -> serde_json::Result<(Map<String, Value>, Vec<String>)> {
    let mut object = Map::new();
    let mut dropped = Vec::new();
    for (key, raw) in fields {
        if key == "metadata" {
            let (metadata, too_deep) = read_metadata(&raw)?;
            object.insert(key, Value::Object(metadata));
            dropped.extend(too_deep.into_iter().map(|field| format!("metadata.{field}")));
            continue;
        }
        if let Some(value) = parse_within(&raw, MAX_KEPT_DEPTH - 1) {
            object.insert(key, value);
            continue;
        }
        // Too deep as a whole: keep what is not, one level down.
        let Ok(inner) = serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(raw.get()) else {
            dropped.push(key);
            continue;
        };
        let mut kept = Map::new();
        for (inner_key, raw) in inner {
            match parse_within(&raw, MAX_KEPT_DEPTH - 2) {
                Some(value) => {
                    kept.insert(inner_key, value);
                }
                None => dropped.push(format!("{key}.{inner_key}")),
            }
        }
        object.insert(key, Value::Object(kept));
    }
    Ok((object, dropped))
}

/// The object's metadata (depth 1), its managed fields without the field
/// sets, and the names of its fields left out for nesting too deep.
fn read_metadata(raw: &RawValue) -> serde_json::Result<(Map<String, Value>, Vec<String>)> {
    let fields = serde_json::from_str::<BTreeMap<String, Box<RawValue>>>(raw.get())?;
    let mut metadata = Map::new();
    let mut dropped = Vec::new();
    for (key, raw) in fields {
        let value = match key.as_str() {
            "managedFields" => serde_json::from_str::<Vec<ManagerOf>>(raw.get())
                .ok()
                .and_then(|entries| serde_json::to_value(entries).ok()),
            _ => parse_within(&raw, MAX_KEPT_DEPTH - 2),
        };
        match value {
            Some(value) => {
                metadata.insert(key, value);
            }
            None => dropped.push(key),
        }
    }
    Ok((metadata, dropped))
}

/// A managed fields entry without its field set (`fieldsV1`), which is
/// skipped over unread.
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ManagerOf {
    #[serde(skip_serializing_if = "Option::is_none")]
    manager: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subresource: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fields_type: Option<String>,
}

/// The value, if it parses and nests at most `max` levels.
fn parse_within(raw: &RawValue, max: usize) -> Option<Value> {
    let value: Value = serde_json::from_str(raw.get()).ok()?;
    (crate::values::merge::depth(&value) <= max).then_some(value)
}

impl<K: Resource> Resource for Shallow<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        self.object.meta()
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        self.object.meta_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::DynamicObject;
    use serde_json::json;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels))
    }

    fn release(values_levels: usize) -> String {
        format!(
            r#"{{"apiVersion":"helm.toolkit.fluxcd.io/v2","kind":"HelmRelease",
               "metadata":{{"name":"deep","namespace":"edge",
                 "managedFields":[{{"manager":"kubectl","operation":"Update","fieldsType":"FieldsV1",
                   "fieldsV1":{{"f:spec":{{"f:values":{}}}}}}}]}},
               "spec":{{"releaseName":"deep","values":{}}},
               "status":{{"observedGeneration":1}}}}"#,
            nested(values_levels),
            nested(values_levels)
        )
    }

    #[test]
    fn a_list_page_with_one_object_nested_past_serde_jsons_limit_still_reads() {
        let page = format!(r#"{{"items":[{},{}]}}"#, release(130), release(3));
        assert!(
            serde_json::from_str::<Value>(&page).is_err(),
            "the page as a whole is past serde_json's limit: the test would prove nothing"
        );
        #[derive(Deserialize)]
        struct Page {
            items: Vec<Shallow<DynamicObject>>,
        }
        let page: Page = serde_json::from_str(&page).unwrap();
        let deep = &page.items[0];
        // The managed fields' field sets are not read, however deep.
        assert_eq!(deep.dropped, ["spec.values"]);
        let managers = deep.object.metadata.managed_fields.as_ref().unwrap();
        assert_eq!(managers[0].manager.as_deref(), Some("kubectl"));
        assert_eq!(managers[0].operation.as_deref(), Some("Update"));
        assert!(managers[0].fields_v1.is_none());
        assert_eq!(deep.object.metadata.name.as_deref(), Some("deep"));
        assert_eq!(deep.object.data["spec"], json!({ "releaseName": "deep" }));
        assert_eq!(deep.object.data["status"], json!({ "observedGeneration": 1 }));
        let shallow = &page.items[1];
        assert!(shallow.dropped.is_empty());
        assert_eq!(shallow.object.data["spec"]["values"], json!({ "a": { "a": { "a": 1 } } }));
        assert_eq!(shallow.object.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn what_is_kept_can_be_written_out_and_read_again() {
        for levels in [90, 93, 94, 95, 96, 126, 127, 200, 5000] {
            let read: Shallow<DynamicObject> = serde_json::from_str(&release(levels)).unwrap();
            let text = serde_json::to_string(&read.object).unwrap();
            assert!(serde_json::from_str::<Value>(&text).is_ok(), "{levels} levels");
            assert_eq!(
                read.dropped.contains(&"spec.values".to_string()),
                levels > MAX_KEPT_DEPTH - 2,
                "{levels}"
            );
        }
    }

    #[test]
    fn an_object_that_is_not_an_object_is_still_an_error() {
        assert!(serde_json::from_str::<Shallow<DynamicObject>>("[1]").is_err());
        assert!(serde_json::from_str::<Shallow<DynamicObject>>(r#"{"metadata": 3}"#).is_err());
    }
}
