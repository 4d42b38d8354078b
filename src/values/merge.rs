//! Helm-style merging of values.
//!
//! Maps merge key by key; lists and scalars replace. A `null` in the overlay
//! stays `null` in the result rather than removing the key: the merged values
//! are handed to Helm as user values, and Helm reads a user `null` as "delete
//! this key from the chart's defaults". Dropping the key here would bring the
//! chart's default back, the opposite of what the user wrote.

use serde_json::{Map, Value};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ValuesError {
    #[error("{field} must be a map of values, not {found}; write it as `key: value` pairs")]
    NotAnObject { field: String, found: &'static str },
    #[error("values path {path:?} is not a dotted path like `controller.nodeSelector`")]
    BadPath { path: String },
    #[error(
        "values path {path:?}: {at:?} is {found} in the values, not a map, so the pool's \
         nodeSelector cannot go there; fix the values or the path"
    )]
    NotAMap {
        path: String,
        at: String,
        found: &'static str,
    },
}

/// The overlay merged over the base. Both must be maps; `field` names the
/// overlay in errors (e.g. `overrides[1].values`).
pub fn merge(base: &Value, overlay: &Value, field: &str) -> Result<Value, ValuesError> {
    let base = as_object(base, "the merged values")?;
    let overlay = as_object(overlay, field)?;
    let mut out = base.clone();
    merge_maps(&mut out, overlay);
    Ok(Value::Object(out))
}

fn as_object<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>, ValuesError> {
    value.as_object().ok_or_else(|| ValuesError::NotAnObject {
        field: field.to_string(),
        found: kind(value),
    })
}

fn merge_maps(base: &mut Map<String, Value>, overlay: &Map<String, Value>) {
    for (key, value) in overlay {
        match (base.get_mut(key), value) {
            (Some(Value::Object(into)), Value::Object(from)) => merge_maps(into, from),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// Merges `map` into the map at a dotted `path`, creating maps on the way
/// (a `null` counts as absent). Keys already at the path that `map` does not
/// name are kept.
pub fn set_path(values: &mut Value, path: &str, map: &Map<String, Value>) -> Result<(), ValuesError> {
    let segments: Vec<&str> = path.split('.').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(ValuesError::BadPath {
            path: path.to_string(),
        });
    }
    let mut current = values;
    for (depth, segment) in segments.iter().enumerate() {
        let at = || segments[..=depth].join(".");
        if current.is_null() {
            *current = Value::Object(Map::new());
        }
        let found = kind(current);
        let Value::Object(object) = current else {
            let at = if depth == 0 {
                "(the values)".to_string()
            } else {
                segments[..depth].join(".")
            };
            return Err(ValuesError::NotAMap {
                path: path.to_string(),
                at,
                found,
            });
        };
        current = object.entry(segment.to_string()).or_insert(Value::Null);
        if !current.is_null() && !current.is_object() {
            return Err(ValuesError::NotAMap {
                path: path.to_string(),
                at: at(),
                found: kind(current),
            });
        }
    }
    if current.is_null() {
        *current = Value::Object(Map::new());
    }
    if let Value::Object(target) = current {
        merge_maps(target, map);
    }
    Ok(())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// How deep values may nest. The HelmReleases carrying them sit a few levels
/// deeper still, and must stay readable by clients whose JSON decoders stop
/// at 128 levels (this controller's among them).
pub const MAX_DEPTH: usize = 64;

/// How many levels of maps and lists `value` nests; a scalar is 0. Walks
/// with its own stack, so any depth can be measured.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Object(map) => Box::new(map.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        deepest = deepest.max(level + 1);
        stack.extend(children.map(|c| (c, level + 1)));
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(base: Value, overlay: Value) -> Value {
        merge(&base, &overlay, "values").unwrap()
    }

    fn set(mut values: Value, path: &str, map: Value) -> Result<Value, ValuesError> {
        set_path(&mut values, path, map.as_object().unwrap())?;
        Ok(values)
    }

    #[test]
    fn nested_maps_merge_recursively() {
        let base = json!({ "image": { "repository": "r", "tag": "1" }, "replicas": 1 });
        let overlay = json!({ "image": { "tag": "2" }, "extra": true });
        assert_eq!(
            m(base, overlay),
            json!({ "image": { "repository": "r", "tag": "2" }, "replicas": 1, "extra": true })
        );
    }

    #[test]
    fn deeply_nested_keys_survive() {
        let base = json!({ "a": { "b": { "c": { "d": 1, "e": 2 } } } });
        let overlay = json!({ "a": { "b": { "c": { "e": 3 }, "f": 4 } } });
        assert_eq!(m(base, overlay), json!({ "a": { "b": { "c": { "d": 1, "e": 3 }, "f": 4 } } }));
    }

    #[test]
    fn lists_replace_not_append() {
        let base = json!({ "tolerations": [{ "key": "a" }, { "key": "b" }] });
        let overlay = json!({ "tolerations": [{ "key": "c" }] });
        assert_eq!(m(base, overlay), json!({ "tolerations": [{ "key": "c" }] }));
    }

    #[test]
    fn empty_list_clears_a_list() {
        assert_eq!(m(json!({ "args": ["-v"] }), json!({ "args": [] })), json!({ "args": [] }));
    }

    #[test]
    fn scalars_replace() {
        let base = json!({ "replicas": 1, "name": "a", "on": true });
        let overlay = json!({ "replicas": 3, "name": "b", "on": false });
        assert_eq!(m(base, overlay.clone()), overlay);
    }

    #[test]
    fn null_is_kept_so_helm_deletes_the_default() {
        let base = json!({ "resources": { "limits": { "cpu": "1" } }, "keep": 1 });
        let overlay = json!({ "resources": { "limits": null } });
        assert_eq!(m(base, overlay), json!({ "resources": { "limits": null }, "keep": 1 }));
    }

    #[test]
    fn null_for_a_key_the_base_lacks_is_kept_too() {
        assert_eq!(m(json!({}), json!({ "gone": null })), json!({ "gone": null }));
    }

    #[test]
    fn a_later_value_replaces_an_earlier_null() {
        let once = m(json!({ "a": { "b": 1 } }), json!({ "a": null }));
        assert_eq!(m(once, json!({ "a": { "c": 2 } })), json!({ "a": { "c": 2 } }));
    }

    #[test]
    fn map_to_scalar_and_back() {
        let to_scalar = m(json!({ "x": { "y": 1 } }), json!({ "x": "flat" }));
        assert_eq!(to_scalar, json!({ "x": "flat" }));
        let back = m(to_scalar, json!({ "x": { "z": 2 } }));
        assert_eq!(back, json!({ "x": { "z": 2 } }));
    }

    #[test]
    fn list_to_map_replaces() {
        assert_eq!(m(json!({ "x": [1] }), json!({ "x": { "a": 1 } })), json!({ "x": { "a": 1 } }));
    }

    #[test]
    fn empty_overlay_changes_nothing() {
        let base = json!({ "a": { "b": [1, 2] } });
        assert_eq!(m(base.clone(), json!({})), base);
    }

    #[test]
    fn top_level_must_be_maps() {
        let err = merge(&json!({}), &json!([1]), "overrides[2].values").unwrap_err();
        assert_eq!(
            err.to_string(),
            "overrides[2].values must be a map of values, not a list; write it as `key: value` pairs"
        );
        assert!(merge(&json!("s"), &json!({}), "values").is_err());
    }

    #[test]
    fn set_path_creates_maps() {
        let out = set(json!({}), "controller.nodeSelector", json!({ "pool": "hz" })).unwrap();
        assert_eq!(out, json!({ "controller": { "nodeSelector": { "pool": "hz" } } }));
    }

    #[test]
    fn set_path_merges_into_an_existing_map() {
        let values =
            json!({ "controller": { "nodeSelector": { "os": "linux", "pool": "old" }, "replicas": 2 } });
        let out = set(values, "controller.nodeSelector", json!({ "pool": "hz" })).unwrap();
        assert_eq!(
            out,
            json!({ "controller": { "nodeSelector": { "os": "linux", "pool": "hz" }, "replicas": 2 } })
        );
    }

    #[test]
    fn set_path_replaces_nulls() {
        let out = set(json!({ "a": null }), "a.b", json!({ "k": "v" })).unwrap();
        assert_eq!(out, json!({ "a": { "b": { "k": "v" } } }));
        let out = set(json!({ "a": { "b": null } }), "a.b", json!({ "k": "v" })).unwrap();
        assert_eq!(out, json!({ "a": { "b": { "k": "v" } } }));
    }

    #[test]
    fn set_path_on_a_single_key() {
        assert_eq!(
            set(json!({}), "nodeSelector", json!({ "k": "v" })).unwrap(),
            json!({ "nodeSelector": { "k": "v" } })
        );
    }

    #[test]
    fn set_path_names_the_blocking_intermediate() {
        let err = set(json!({ "controller": "off" }), "controller.nodeSelector", json!({})).unwrap_err();
        assert_eq!(
            err,
            ValuesError::NotAMap {
                path: "controller.nodeSelector".into(),
                at: "controller".into(),
                found: "a string"
            }
        );
        assert!(err.to_string().contains("\"controller.nodeSelector\""));
    }

    #[test]
    fn set_path_names_a_non_map_leaf() {
        let err = set(json!({ "a": { "b": [1] } }), "a.b", json!({})).unwrap_err();
        assert_eq!(
            err,
            ValuesError::NotAMap {
                path: "a.b".into(),
                at: "a.b".into(),
                found: "a list"
            }
        );
    }

    #[test]
    fn set_path_rejects_empty_segments() {
        for path in ["", ".a", "a.", "a..b"] {
            assert_eq!(set(json!({}), path, json!({})), Err(ValuesError::BadPath { path: path.into() }));
        }
    }

    #[test]
    fn set_path_on_non_map_values() {
        let err = set(json!(3), "a", json!({})).unwrap_err();
        assert!(matches!(err, ValuesError::NotAMap { ref at, .. } if at == "(the values)"), "{err}");
    }

    #[test]
    fn depth_counts_maps_and_lists() {
        assert_eq!(depth(&json!("x")), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({ "a": { "b": [1, { "c": 2 }] }, "d": 1 })), 4);
        let mut deep = json!(1);
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(depth(&deep), 100_000);
        // serde_json drops values recursively: take the nest apart level by
        // level so the test itself cannot overflow the stack.
        while let Value::Array(mut items) = deep {
            deep = items.pop().unwrap_or_default();
        }
    }
}
