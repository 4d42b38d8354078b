//! Which schema violations the controller can judge when Flux will merge in
//! values it does not see: `valuesFrom` ConfigMaps and Secrets, the
//! documented way to pass secrets.
//!
//! Flux merges the `valuesFrom` documents in order, then the inline values
//! over them (inline wins), then each entry with a `targetPath` over
//! everything; Helm validates only the result. So with `valuesFrom`:
//! - a value the inline values set that is not a map (a string, number,
//!   list) reaches Helm as it is: every rule about it is final;
//! - a map the inline values set may gain keys, never lose them: a rule
//!   that more keys cannot satisfy (`type`, `additionalProperties`,
//!   `propertyNames`, `unevaluatedProperties`, `maxProperties`) is final,
//!   any other (`required`, `minProperties`, `anyOf`, ...) is not;
//! - a value the inline values do not set may come from a Secret: nothing
//!   about it is final;
//! - and a `targetPath` at, above or below a value may replace it.
//!
//! A missing required key is therefore never a failure when the application
//! has `valuesFrom`, while a wrong type or a forbidden key in the inline
//! values still is.

use serde_json::Value;

/// What Flux will merge in that the controller cannot read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnseenValues {
    /// Whether any `valuesFrom` entry merges a whole values document.
    pub documents: bool,
    /// The `targetPath` of each entry that sets one value, as written
    /// (`a.b[0].c`, `\.` for a dot inside a key).
    pub target_paths: Vec<String>,
}

impl UnseenValues {
    /// From a HelmRelease spec's `valuesFrom` list.
    pub fn of_release_spec(spec: &Value) -> Self {
        let entries = spec
            .get("valuesFrom")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut unseen = Self::default();
        for entry in entries {
            match entry.get("targetPath").and_then(Value::as_str).filter(|p| !p.is_empty()) {
                Some(path) => unseen.target_paths.push(path.to_string()),
                None => unseen.documents = true,
            }
        }
        unseen
    }

    pub fn is_empty(&self) -> bool {
        !self.documents && self.target_paths.is_empty()
    }

    /// Whether a violation of `keyword` at `pointer` (a JSON pointer into
    /// the values, `""` for the root) stands whatever the unseen values
    /// hold. `inline` is what the application sets itself.
    pub fn is_final(&self, pointer: &str, keyword: &str, inline: &Value) -> bool {
        let segments = pointer_segments(pointer);
        let touched = self.target_paths.iter().any(|target| {
            let target = target_segments(target);
            let shared = target.len().min(segments.len());
            target[..shared] == segments[..shared]
        });
        if touched {
            return false;
        }
        if !self.documents {
            return true;
        }
        match lookup(inline, &segments) {
            None => false,
            Some(Value::Object(_)) => MORE_KEYS_CANNOT_FIX.contains(&keyword),
            Some(_) => true,
        }
    }
}

/// Rules about a map that extra keys can only break further, never mend.
const MORE_KEYS_CANNOT_FIX: [&str; 5] = [
    "type",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "maxProperties",
];

fn pointer_segments(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect()
}

/// Helm's strvals path syntax, as Flux reads `targetPath`: keys separated
/// by `.`, `\.` a literal dot, `[n]` a list index.
fn target_segments(path: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                current.push('.');
                chars.next();
            }
            '.' => segments.push(std::mem::take(&mut current)),
            '[' => {
                if !current.is_empty() {
                    segments.push(std::mem::take(&mut current));
                }
                let index: String = chars.by_ref().take_while(|c| *c != ']').collect();
                segments.push(index);
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments.retain(|s| !s.is_empty());
    segments
}

fn lookup<'a>(values: &'a Value, segments: &[String]) -> Option<&'a Value> {
    segments.iter().try_fold(values, |value, segment| match value {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => items.get(segment.parse::<usize>().ok()?),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn documents() -> UnseenValues {
        UnseenValues {
            documents: true,
            target_paths: Vec::new(),
        }
    }

    #[test]
    fn without_value_from_everything_is_final() {
        let none = UnseenValues::default();
        assert!(none.is_empty());
        assert!(none.is_final("", "required", &json!({})));
        assert!(none.is_final("/a/b", "minimum", &json!({})));
    }

    #[test]
    fn a_missing_required_key_is_not_final_with_values_from() {
        let inline = json!({ "db": { "user": "app" } });
        assert!(!documents().is_final("", "required", &inline));
        assert!(!documents().is_final("/db", "required", &inline));
        assert!(!documents().is_final("/db", "minProperties", &inline));
        assert!(!documents().is_final("", "anyOf", &inline));
    }

    #[test]
    fn a_wrong_type_or_value_set_inline_stays_final() {
        let inline =
            json!({ "replicas": "three", "mode": "orbit", "ports": [1, 2], "db": { "user": "app" } });
        assert!(documents().is_final("/replicas", "type", &inline));
        assert!(documents().is_final("/mode", "enum", &inline));
        assert!(documents().is_final("/ports", "minItems", &inline), "lists are replaced, not merged");
        assert!(documents().is_final("/ports/1", "minimum", &inline));
        assert!(documents().is_final("/db", "type", &inline), "a map stays a map");
        assert!(documents().is_final("", "additionalProperties", &inline), "a forbidden key stays");
    }

    #[test]
    fn a_value_the_inline_values_do_not_set_may_come_from_a_secret() {
        let inline = json!({ "db": {} });
        assert!(!documents().is_final("/password", "type", &inline));
        assert!(!documents().is_final("/db/port", "minimum", &inline));
    }

    #[test]
    fn a_target_path_at_above_or_below_a_value_may_replace_it() {
        let unseen = UnseenValues {
            documents: false,
            target_paths: vec!["db.auth.password".into(), "hosts[1]".into(), "a\\.b.c".into()],
        };
        let inline = json!({ "db": { "auth": { "password": 1 } }, "hosts": ["a", 2], "name": 3 });
        assert!(!unseen.is_final("/db/auth/password", "type", &inline));
        assert!(!unseen.is_final("/db/auth", "required", &inline), "above");
        assert!(!unseen.is_final("/db/auth/password/x", "type", &inline), "below");
        assert!(!unseen.is_final("/hosts/1", "type", &inline));
        assert!(!unseen.is_final("/a.b/c", "type", &inline), "an escaped dot is part of the key");
        assert!(unseen.is_final("/hosts/0", "type", &inline));
        assert!(unseen.is_final("/name", "type", &inline));
        assert!(!unseen.is_final("", "required", &inline), "the root holds every target");
    }

    #[test]
    fn pointers_and_target_paths_are_read_as_their_specs_say() {
        assert_eq!(pointer_segments(""), Vec::<String>::new());
        assert_eq!(pointer_segments("/a~1b/c~0d/0"), ["a/b", "c~d", "0"]);
        assert_eq!(target_segments("a.b[0].c"), ["a", "b", "0", "c"]);
        assert_eq!(target_segments("a\\.b.c"), ["a.b", "c"]);
        assert_eq!(target_segments("[2]"), ["2"]);
    }

    #[test]
    fn of_a_release_spec() {
        let spec = json!({ "valuesFrom": [
            { "kind": "Secret", "name": "db" },
            { "kind": "Secret", "name": "token", "targetPath": "auth.token" } ] });
        let unseen = UnseenValues::of_release_spec(&spec);
        assert!(unseen.documents);
        assert_eq!(unseen.target_paths, ["auth.token"]);
        assert!(UnseenValues::of_release_spec(&json!({})).is_empty());
        let only_target = json!({ "valuesFrom": [{ "kind": "Secret", "name": "t", "targetPath": "x" }] });
        assert!(!UnseenValues::of_release_spec(&only_target).documents);
    }
}
