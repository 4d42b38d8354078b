//! Property-based fuzzing of the Helm-style values merge in `src/values/merge.rs`.
//!
//! Random JSON trees (keys drawn mostly from a small alphabet, so the base
//! and the overlay collide often, with `null`s, lists and empty maps mixed
//! in) go through `values::merge` and `values::set_path`; every property
//! below checks an exact outcome of the module's semantics: maps merge key by
//! key, lists and scalars replace, and a `null` in the overlay is kept so
//! Helm drops the chart's default.
//!
//! `cargo test` runs a few hundred cases per property. To fuzz longer:
//!
//! ```text
//! PROPTEST_CASES=100000 cargo test --test offline fuzz_values::
//! ```
//!
//! Add `--release` for many more cases a second, after a one-off release
//! build. A failure prints the shrunk input and saves it in
//! `tests/proptest-regressions/fuzz_values.txt`, replayed first on later
//! runs; commit that file with the fix.

use nodepool_fanout::values::merge::{merge, set_path, ValuesError};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value};

/// Cases per property unless `PROPTEST_CASES` says otherwise.
const CASES: u32 = 256;

fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = CASES;
    }
    config
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(vec!["a", "b", "c", "image", "tag"]).prop_map(String::from),
        1 => "\\PC{0,6}",
        1 => Just(String::new()),
        1 => "[a-z]{1,3}\\.[a-z]{1,3}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => (-1e9f64..1e9).prop_map(Value::from),
        2 => "\\PC{0,8}".prop_map(Value::from),
    ]
}

fn object_of(inner: impl Strategy<Value = Value>, max_len: usize) -> impl Strategy<Value = Value> {
    prop::collection::vec((key(), inner), 0..max_len)
        .prop_map(|entries| Value::Object(entries.into_iter().collect()))
}

/// Any JSON value, at most 5 levels and about 64 nodes.
fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            1 => prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            3 => object_of(inner, 6),
        ]
    })
}

/// A map of values, as `merge` wants at the top.
fn values() -> impl Strategy<Value = Value> {
    object_of(value(), 7)
}

fn get<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.as_object()?.get(key))
}

/// Paths to every node under the top-level map, parents before children.
fn paths(value: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![(Vec::new(), value)];
    while let Some((path, value)) = stack.pop() {
        if let Value::Object(map) = value {
            for (k, v) in map {
                let mut child = path.clone();
                child.push(k.clone());
                out.push(child.clone());
                stack.push((child, v));
            }
        }
    }
    out
}

/// Paths to every node that is not a map, or is an empty map.
fn leaves(value: &Value) -> Vec<(Vec<String>, &Value)> {
    paths(value)
        .into_iter()
        .map(|p| {
            let v = get(value, &p).unwrap();
            (p, v)
        })
        .filter(|(_, v)| v.as_object().is_none_or(Map::is_empty))
        .collect()
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

fn m(base: &Value, overlay: &Value) -> Value {
    merge(base, overlay, "values").expect("both are maps")
}

fn empty() -> Value {
    Value::Object(Map::new())
}

/// Maps nested `depth` deep along `keys` (cycled), ending in `leaf`.
fn nested(depth: usize, keys: &[String], leaf: Value) -> Value {
    (0..depth).rev().fold(leaf, |inner, level| {
        Value::Object(Map::from_iter([(keys[level % keys.len()].clone(), inner)]))
    })
}

proptest! {
    #![proptest_config(config())]

    /// Never panics on any pair of JSON values; only two maps merge, and the
    /// error names the side that is not one, base first.
    #[test]
    fn merge_accepts_exactly_two_maps(base in value(), overlay in value(), field in "\\PC{0,12}") {
        let result = merge(&base, &overlay, &field);
        match (&base, &overlay) {
            (Value::Object(_), Value::Object(_)) => prop_assert!(result.is_ok()),
            (Value::Object(_), _) => prop_assert_eq!(
                result,
                Err(ValuesError::NotAnObject { field: field.clone(), found: kind(&overlay) })
            ),
            _ => prop_assert_eq!(
                result,
                Err(ValuesError::NotAnObject { field: "the merged values".into(), found: kind(&base) })
            ),
        }
    }

    /// `{}` is the identity on either side.
    #[test]
    fn empty_map_is_the_identity(values in values()) {
        prop_assert_eq!(m(&values, &empty()), values.clone());
        prop_assert_eq!(m(&empty(), &values), values);
    }

    /// Whatever the overlay holds at a path that is not a map (a scalar, a
    /// list, or `null`) is exactly what the result holds there; and wherever
    /// the overlay has a map, so does the result.
    #[test]
    fn overlay_leaves_win(base in values(), overlay in values()) {
        let merged = m(&base, &overlay);
        for path in paths(&overlay) {
            let theirs = get(&overlay, &path).unwrap();
            let ours = get(&merged, &path);
            if theirs.is_object() {
                prop_assert!(ours.is_some_and(Value::is_object), "{:?}: {:?}", path, ours);
            } else {
                prop_assert_eq!(ours, Some(theirs), "at {:?}", path);
            }
        }
    }

    /// A base value survives unless the overlay names it or one of its
    /// parents: then the overlay's value is what is left, `null` included
    /// (the key stays, holding `null`).
    #[test]
    fn base_values_survive_unless_overridden(base in values(), overlay in values()) {
        let merged = m(&base, &overlay);
        for (path, value) in leaves(&base) {
            // The shortest prefix of `path` the overlay holds as a non-map,
            // or the whole path if the overlay has a map there.
            let mut overridden = None;
            for depth in 1..=path.len() {
                match get(&overlay, &path[..depth]) {
                    None => break,
                    Some(Value::Object(_)) if depth < path.len() => continue,
                    Some(theirs) => {
                        overridden = Some((depth, theirs));
                        break;
                    }
                }
            }
            match overridden {
                None => prop_assert_eq!(get(&merged, &path), Some(value), "at {:?}", path),
                Some((depth, Value::Object(theirs))) => {
                    // A map in the overlay where the base has a leaf: the
                    // overlay's map, plus nothing if the base's was not a map.
                    let ours = get(&merged, &path[..depth]).and_then(Value::as_object);
                    prop_assert!(ours.is_some(), "{:?}", path);
                    let ours = ours.unwrap();
                    let mut keys: Vec<_> = theirs.keys().collect();
                    if let Value::Object(base_map) = value {
                        keys.extend(base_map.keys());
                    }
                    keys.sort();
                    keys.dedup();
                    let mut ours: Vec<_> = ours.keys().collect();
                    ours.sort();
                    prop_assert_eq!(ours, keys);
                }
                Some((depth, theirs)) => {
                    prop_assert_eq!(get(&merged, &path[..depth]), Some(theirs), "at {:?}", &path[..depth]);
                }
            }
        }
    }

    /// Nothing is invented: every leaf of the result is the base's or the
    /// overlay's leaf at the same path, and every key is one of theirs.
    #[test]
    fn result_comes_from_the_inputs(base in values(), overlay in values()) {
        let merged = m(&base, &overlay);
        for (path, value) in leaves(&merged) {
            let from_overlay = get(&overlay, &path) == Some(value);
            let from_base = get(&base, &path) == Some(value);
            prop_assert!(from_overlay || from_base, "{:?} = {} is in neither input", path, value);
        }
        for path in paths(&merged) {
            prop_assert!(
                get(&base, &path).is_some() || get(&overlay, &path).is_some(),
                "{:?} is in neither input",
                path
            );
        }
    }

    /// A `null` put at any path of the base replaces what was there, key
    /// kept, and changes nothing else.
    #[test]
    fn null_is_kept_and_only_drops_its_own_key(base in values(), pick in any::<Index>(), key in key()) {
        let all = paths(&base);
        let path = if all.is_empty() { vec![key] } else { all[pick.index(all.len())].clone() };
        let overlay = nested(path.len(), &path, Value::Null);
        let mut expected = base.clone();
        let (last, parents) = path.split_last().unwrap();
        let parent = parents.iter().fold(&mut expected, |v, k| &mut v[k.as_str()]);
        parent.as_object_mut().unwrap().insert(last.clone(), Value::Null);
        let merged = m(&base, &overlay);
        prop_assert_eq!(get(&merged, &path), Some(&Value::Null));
        prop_assert_eq!(merged, expected);
    }

    /// The same inputs give the same output, key order included.
    #[test]
    fn merge_is_deterministic(base in values(), overlay in values()) {
        let first = m(&base, &overlay);
        let second = m(&base.clone(), &overlay.clone());
        prop_assert_eq!(serde_json::to_string(&first).unwrap(), serde_json::to_string(&second).unwrap());
        prop_assert_eq!(first, second);
    }

    /// Merging values over themselves changes nothing, and applying the same
    /// overlay twice is the same as once.
    #[test]
    fn merge_is_idempotent(base in values(), overlay in values()) {
        prop_assert_eq!(m(&base, &base), base.clone());
        let once = m(&base, &overlay);
        prop_assert_eq!(m(&once, &overlay), once);
    }

    /// Deep nesting, far beyond what the YAML (64) and JSON (128) parsers
    /// let in, merges without overflowing the stack, keeping the base's
    /// sibling at every level the overlay does not replace.
    #[test]
    fn deep_nesting_merges(
        depth in 100usize..=400,
        cut in 1usize..=400,
        keys in prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..4),
    ) {
        let keys: Vec<String> = keys.into_iter().map(String::from).collect();
        let cut = cut.min(depth);
        let mut base = nested(depth, &keys, Value::from("base"));
        // A sibling the overlay does not name.
        base.as_object_mut().unwrap().insert("z".into(), Value::from(0));
        let overlay = nested(cut, &keys, Value::from("overlay"));
        let merged = m(&base, &overlay);
        let path: Vec<String> = (0..depth).map(|i| keys[i % keys.len()].clone()).collect();
        prop_assert_eq!(get(&merged, &path[..cut]), Some(&Value::from("overlay")));
        prop_assert_eq!(merged.get("z"), Some(&Value::from(0)));
        prop_assert_eq!(m(&base, &empty()), base.clone());
        prop_assert_eq!(m(&merged, &merged), merged);
    }

    /// `set_path` never panics; when it succeeds the map at the path is the
    /// old one (or `{}` for none or `null`) with `map` merged over it and the
    /// rest is untouched; when it fails, the values are untouched.
    #[test]
    fn set_path_merges_at_the_path_or_changes_nothing(
        values in value(),
        path in prop::collection::vec(prop_oneof![key(), Just(String::new())], 1..4),
        map in values(),
    ) {
        let dotted = path.join(".");
        let map = map.as_object().unwrap();
        let mut out = values.clone();
        match set_path(&mut out, &dotted, map) {
            Err(ValuesError::BadPath { path: p }) => {
                prop_assert_eq!(&p, &dotted);
                prop_assert!(dotted.split('.').any(str::is_empty));
                prop_assert_eq!(out, values);
            }
            Err(err) => {
                prop_assert!(matches!(err, ValuesError::NotAMap { .. }), "{}", err);
                prop_assert_eq!(out, values);
            }
            Ok(()) => {
                let segments: Vec<String> = dotted.split('.').map(String::from).collect();
                let before = if values.is_null() { None } else { get(&values, &segments) };
                let target = match before {
                    None | Some(Value::Null) => empty(),
                    Some(old) => old.clone(),
                };
                let expected_here = m(&target, &Value::Object(map.clone()));
                prop_assert_eq!(get(&out, &segments), Some(&expected_here));
                // Everything off the path is as it was.
                for (p, v) in leaves(&values) {
                    let on_path = segments.starts_with(&p) || p.starts_with(&segments);
                    if !on_path {
                        prop_assert_eq!(get(&out, &p), Some(v), "at {:?}", p);
                    }
                }
            }
        }
    }
}

/// `merge` recurses once per level, as `Value`'s own `Clone`, `PartialEq`
/// and `Drop` do; 512 levels, four times what the JSON parser lets in, fit
/// an ordinary test thread's stack in a debug build.
#[test]
fn very_deep_values_merge() {
    let keys = ["k".to_string()];
    let base = nested(512, &keys, Value::from(1));
    let overlay = nested(512, &keys, Value::from(2));
    let merged = merge(&base, &overlay, "values").unwrap();
    assert_eq!(merged, overlay);
}
