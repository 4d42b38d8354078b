//! Reading the YAML of charts and chart repositories (`Chart.yaml`,
//! `values.yaml`, `index.yaml`, and what `helm template` prints) as Helm
//! reads it.
//!
//! Helm reads these files through sigs.k8s.io/yaml: any size the download
//! limit lets through, comments of any length, and a repeated key taking the
//! last value. serde-saphyr's defaults are tighter than that: a budget of
//! 250,000 nodes (a public index with a few thousand versions passes it), at
//! most 32 comment lines buffered before a key, and duplicate keys refused.
//! Here the node and event budgets follow the input's length instead (a
//! node takes at least one byte of input, so nothing an input of that size
//! holds is refused, while a document can still not expand past its size
//! through aliases), comments are validated but not kept, and the last of
//! repeated keys wins.

use serde::de::DeserializeOwned;
use serde_saphyr::{Budget, DuplicateKeyPolicy, Options};

/// What a well-formed file of `len` bytes may hold, and no more.
fn options(len: usize) -> Options {
    // Every node and event is made from at least one byte; the floors are
    // serde-saphyr's own defaults, for small files with anchors.
    let mut budget = Budget::default();
    budget.max_nodes = len.max(250_000);
    budget.max_events = len.saturating_mul(2).max(1_000_000);
    budget.max_reader_input_bytes = Some(len);
    // Helm has no depth limit of its own; values past 128 levels are
    // refused later, where values are checked.
    budget.max_depth = 256;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.emit_comments = false;
    options.duplicate_keys = DuplicateKeyPolicy::LastWins;
    options
}

/// Parses one YAML document of a chart or chart repository.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options(text.len()))
}

/// Parses every document of a YAML stream, as Helm's rendered manifests
/// are (empty documents come back as null).
pub fn from_multiple<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, options(text.len()))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    #[test]
    fn a_long_run_of_comments_before_a_key_is_read() {
        // As the values.yaml of widely used charts have: a commented-out
        // block of options, then a key.
        let comments: String = (0..200).map(|i| format!("# option {i}: explained here\n")).collect();
        let text = format!("config:\n{comments}  port: 4222\n{comments}cluster:\n  enabled: false\n");
        let value: Value = from_str(&text).unwrap();
        assert_eq!(value, json!({ "config": { "port": 4222 }, "cluster": { "enabled": false } }));
    }

    #[test]
    fn defaults_refuse_what_helm_reads() {
        let comments: String = (0..200).map(|i| format!("# option {i}: explained here\n")).collect();
        let text = format!("config:\n{comments}  port: 4222\n{comments}cluster:\n  enabled: false\n");
        assert!(serde_saphyr::from_str::<Value>(&text).is_err(), "comments");
        assert!(serde_saphyr::from_str::<Value>("a: 1\nb: 2\na: 3\n").is_err(), "duplicates");
        let text: String = (0..300_000).map(|i| format!("k{i}: {i}\n")).collect();
        assert!(serde_saphyr::from_str::<Value>(&text).is_err(), "nodes");
    }

    /// The upstream charts kept as fixtures, as Helm reads them: every
    /// `Chart.yaml` and `values.yaml`, local subcharts included.
    #[test]
    fn upstream_charts_read_as_helm_reads_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charts-fixtures/upstream");
        let mut read = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if matches!(
                    path.file_name().and_then(|n| n.to_str()),
                    Some("Chart.yaml" | "values.yaml")
                ) {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let value: Value = from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    assert!(value.is_object(), "{}: {value}", path.display());
                    read.push((path, value));
                }
            }
        }
        let find = |chart: &str, file: &str| {
            let suffix = format!("{chart}/{file}");
            let (_, value) =
                read.iter().find(|(p, _)| p.ends_with(&suffix)).unwrap_or_else(|| panic!("{suffix}"));
            value
        };
        // What each chart is here for, read where Helm reads it.
        assert_eq!(
            find("ingress-nginx", "values.yaml")["controller"]["ingressClassResource"]["name"],
            "nginx"
        );
        assert_eq!(find("nats", "values.yaml")["config"]["cluster"]["port"], 6222);
        assert_eq!(find("podinfo", "values.yaml")["replicaCount"], 1);
        assert_eq!(find("metallb", "Chart.yaml")["name"], "metallb");
        assert!(read.len() >= 8, "two files of each of four charts: {}", read.len());
    }

    #[test]
    fn a_repeated_key_takes_its_last_value_as_helm_does() {
        let value: Value = from_str("a: 1\nb: 2\na: 3\n").unwrap();
        assert_eq!(value, json!({ "a": 3, "b": 2 }));
    }

    #[test]
    fn more_nodes_than_the_default_budget_are_read_when_the_input_holds_them() {
        let text: String = (0..300_000).map(|i| format!("k{i}: {i}\n")).collect();
        let value: Value = from_str(&text).unwrap();
        assert_eq!(value.as_object().map(|m| m.len()), Some(300_000));
    }

    #[test]
    fn aliases_cannot_expand_a_document_past_its_size() {
        // The billion laughs: nine levels of ten aliases each.
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            let list = [prev.as_str(); 10].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{list}]\n"));
        }
        assert!(from_str::<Value>(&text).is_err());
    }
}
