//! What a PromQL query reads: its metric names and the labels it selects
//! and groups by, from the lexer's tokens.
use super::lexer::{lex, Tok};
use super::*;

const FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count_over_time",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "deg",
    "delta",
    "deriv",
    "double_exponential_smoothing",
    "end",
    "exp",
    "floor",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "holt_winters",
    "hour",
    "idelta",
    "increase",
    "info",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "mad_over_time",
    "max_over_time",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rad",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_by_label",
    "sort_by_label_desc",
    "sort_desc",
    "sqrt",
    "start",
    "stddev_over_time",
    "stdvar_over_time",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "vector",
    "year",
];

const AGGREGATIONS: &[&str] = &[
    "avg",
    "bottomk",
    "count",
    "count_values",
    "group",
    "limit_ratio",
    "limitk",
    "max",
    "min",
    "quantile",
    "stddev",
    "stdvar",
    "sum",
    "topk",
];

/// Keywords that are neither functions nor metrics; the grouping ones take
/// a list of label names.
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"];
const GROUPINGS: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];

/// A label that a query needs on at least one of `metrics`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct LabelUse {
    pub(super) label: String,
    pub(super) metrics: BTreeSet<String>,
}

/// What one query reads.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Reads {
    pub(super) metrics: BTreeSet<String>,
    pub(super) labels: BTreeSet<LabelUse>,
}

/// The index of the token that closes the one at `open`.
fn closing(toks: &[Tok], open: usize) -> Result<usize, String> {
    let (up, down) = match toks[open] {
        Tok::Open => (Tok::Open, Tok::Close),
        Tok::LBrace => (Tok::LBrace, Tok::RBrace),
        _ => return Err("not an opening token".into()),
    };
    let mut depth = 0;
    for (i, t) in toks.iter().enumerate().skip(open) {
        if *t == up {
            depth += 1;
        } else if *t == down {
            depth -= 1;
            if depth == 0 {
                return Ok(i);
            }
        }
    }
    Err("unbalanced parentheses or braces".into())
}

/// The label names of a `(a, b)` list at `open`, and the index past it.
fn label_list(toks: &[Tok], open: usize) -> Result<(Vec<String>, usize), String> {
    let close = closing(toks, open)?;
    let mut labels = Vec::new();
    for t in &toks[open + 1..close] {
        match t {
            Tok::Ident(l) => labels.push(l.clone()),
            Tok::Comma => {}
            other => return Err(format!("{other:?} in a label list")),
        }
    }
    Ok((labels, close + 1))
}

/// The matchers of a `{…}` at `open`: the label names, the metric named
/// by `__name__="…"` if any, and the index past it.
fn matchers(toks: &[Tok], open: usize) -> Result<(Vec<String>, Option<String>, usize), String> {
    let close = closing(toks, open)?;
    let (mut labels, mut name) = (Vec::new(), None);
    let mut i = open + 1;
    while i < close {
        match (&toks[i], toks.get(i + 1), toks.get(i + 2)) {
            (Tok::Ident(label), Some(Tok::Op(op)), Some(Tok::Str(value)))
                if ["=", "!=", "=~", "!~"].contains(&op.as_str()) =>
            {
                if label == "__name__" && op == "=" {
                    name = Some(value.clone());
                } else {
                    labels.push(label.clone());
                }
                i += 3;
            }
            (Tok::Comma, ..) => i += 1,
            other => return Err(format!("cannot read the label matcher at {other:?}")),
        }
    }
    Ok((labels, name, close + 1))
}

/// The metric names in `toks[from..to]`, as `reads` of the whole query
/// found them.
fn metrics_within(toks: &[Tok], from: usize, to: usize) -> Result<BTreeSet<String>, String> {
    Ok(reads_of(&toks[from..to])?.metrics)
}

/// Reads the metric names and the labels a query uses.
fn reads_of(toks: &[Tok]) -> Result<Reads, String> {
    let mut reads = Reads::default();
    let mut whole_query_labels = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let next_opens = toks.get(i + 1) == Some(&Tok::Open);
        match &toks[i] {
            Tok::Ident(word) if GROUPINGS.contains(&word.to_ascii_lowercase().as_str()) => {
                let lower = word.to_ascii_lowercase();
                if !next_opens {
                    // group_left without labels.
                    i += 1;
                    continue;
                }
                let (labels, past) = label_list(toks, i + 1)?;
                // by and without are read with their aggregation; on,
                // ignoring and group_* join the two sides, which both
                // come from the query's metrics.
                if lower != "by" && lower != "without" {
                    whole_query_labels.extend(labels);
                }
                i = past;
            }
            Tok::Ident(word) if AGGREGATIONS.contains(&word.to_ascii_lowercase().as_str()) => {
                // `sum by (l) (expr)` or `sum (expr) by (l)`.
                let mut grouped = Vec::new();
                let mut j = i + 1;
                if let Some(Tok::Ident(kw)) = toks.get(j) {
                    if matches!(kw.to_ascii_lowercase().as_str(), "by" | "without") {
                        let (labels, past) = label_list(toks, j + 1)?;
                        grouped.extend(labels);
                        j = past;
                    }
                }
                if toks.get(j) != Some(&Tok::Open) {
                    return Err(format!("{word} without its argument"));
                }
                let close = closing(toks, j)?;
                if let Some(Tok::Ident(kw)) = toks.get(close + 1) {
                    if matches!(kw.to_ascii_lowercase().as_str(), "by" | "without") {
                        grouped.extend(label_list(toks, close + 2)?.0);
                    }
                }
                let within = metrics_within(toks, j + 1, close)?;
                for label in grouped {
                    reads.labels.insert(LabelUse {
                        label,
                        metrics: within.clone(),
                    });
                }
                // The argument is read as the rest of the query is; the
                // grouping after it is skipped as a grouping.
                i = j + 1;
            }
            Tok::Ident(word) if word == "label_values" && next_opens => {
                // Grafana's label_values(label) or label_values(selector, label).
                let close = closing(toks, i + 1)?;
                let comma = (i + 2..close).rev().find(|&k| toks[k] == Tok::Comma);
                match (comma, &toks[close - 1]) {
                    (Some(comma), Tok::Ident(label)) if comma + 2 == close => {
                        let inner = reads_of(&toks[i + 2..comma])?;
                        reads.labels.insert(LabelUse {
                            label: label.clone(),
                            metrics: inner.metrics.clone(),
                        });
                        reads.metrics.extend(inner.metrics);
                        reads.labels.extend(inner.labels);
                    }
                    (None, Tok::Ident(_)) => {}
                    _ => return Err("label_values takes (selector, label)".into()),
                }
                i = close + 1;
            }
            Tok::Ident(word) if KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) => i += 1,
            Tok::Ident(word) if next_opens => {
                if !FUNCTIONS.contains(&word.as_str()) {
                    return Err(format!("unknown function {word}()"));
                }
                i += 1;
            }
            Tok::Ident(metric) => {
                reads.metrics.insert(metric.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::LBrace) {
                    let (labels, name, past) = matchers(toks, i)?;
                    if name.is_some() {
                        return Err(format!("{metric} has a __name__ matcher too"));
                    }
                    for label in labels {
                        reads.labels.insert(LabelUse {
                            label,
                            metrics: BTreeSet::from([metric.clone()]),
                        });
                    }
                    i = past;
                }
            }
            Tok::LBrace => {
                let (labels, name, past) = matchers(toks, i)?;
                let metric = name.ok_or("a selector with neither a metric name nor __name__")?;
                reads.metrics.insert(metric.clone());
                for label in labels {
                    reads.labels.insert(LabelUse {
                        label,
                        metrics: BTreeSet::from([metric.clone()]),
                    });
                }
                i = past;
            }
            Tok::RBrace => return Err("a } without its {".into()),
            _ => i += 1,
        }
    }
    let mut depth = 0i32;
    for t in toks {
        match t {
            Tok::Open => depth += 1,
            Tok::Close => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return Err("a ) without its (".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    for label in whole_query_labels {
        reads.labels.insert(LabelUse {
            label,
            metrics: reads.metrics.clone(),
        });
    }
    Ok(reads)
}

pub(super) fn reads(expr: &str) -> Result<Reads, String> {
    reads_of(&lex(expr)?)
}

fn names(set: &BTreeSet<LabelUse>) -> Vec<(&str, Vec<&str>)> {
    set.iter()
        .map(|u| (u.label.as_str(), u.metrics.iter().map(String::as_str).collect()))
        .collect()
}

#[test]
fn the_query_reader_finds_metrics_and_labels_and_nothing_else() {
    let r = reads(
        r#"histogram_quantile(0.95, sum by (le, namespace) (rate(gotk_reconcile_duration_seconds_bucket{kind="NodePoolApplication", name=~"$application"}[$__rate_interval])))"#,
    )
    .unwrap();
    assert_eq!(r.metrics, BTreeSet::from(["gotk_reconcile_duration_seconds_bucket".to_string()]));
    assert_eq!(
        names(&r.labels),
        vec![
            ("kind", vec!["gotk_reconcile_duration_seconds_bucket"]),
            ("le", vec!["gotk_reconcile_duration_seconds_bucket"]),
            ("name", vec!["gotk_reconcile_duration_seconds_bucket"]),
            ("namespace", vec!["gotk_reconcile_duration_seconds_bucket"]),
        ]
    );

    let r = reads(
        r#"sum(rate(a_total{code!~"4.."}[5m] offset 1h)) by (code) / ignoring(code) group_left sum(rate(b_total[5m])) > 0.5 and on (job) up == bool 1"#,
    )
    .unwrap();
    let metrics: Vec<&str> = r.metrics.iter().map(String::as_str).collect();
    assert_eq!(metrics, ["a_total", "b_total", "up"]);
    assert_eq!(
        names(&r.labels),
        vec![
            ("code", vec!["a_total"]),
            ("code", vec!["a_total", "b_total", "up"]),
            ("job", vec!["a_total", "b_total", "up"]),
        ]
    );

    let r = reads(r#"label_values(nodepool_fanout_pools{namespace=~"$namespace"}, application)"#).unwrap();
    assert_eq!(r.metrics, BTreeSet::from(["nodepool_fanout_pools".to_string()]));
    assert_eq!(
        names(&r.labels),
        vec![
            ("application", vec!["nodepool_fanout_pools"]),
            ("namespace", vec!["nodepool_fanout_pools"])
        ]
    );

    let r =
        reads(r#"process_resident_memory_bytes > 400 * 1024 * 1024 and absent({__name__="x:y"})"#).unwrap();
    let metrics: Vec<&str> = r.metrics.iter().map(String::as_str).collect();
    assert_eq!(metrics, ["process_resident_memory_bytes", "x:y"]);

    assert!(reads("histogram_quantil(0.5, x)").unwrap_err().contains("unknown function"));
    assert!(reads("sum(rate(x[5m])").is_err());
    assert!(reads(r#"x{a="b"#).is_err());

    let scrape = "# TYPE a counter\na_total{verb=\"get\",resource=\"x\\\",y\"} 1\nb 2\n# EOF\n";
    let e = exported(scrape);
    assert_eq!(e["a_total"], BTreeSet::from(["verb".to_string(), "resource".to_string()]));
    assert!(e["b"].is_empty());
    let q = |expr: &str| Query {
        origin: "test".into(),
        expr: expr.into(),
    };
    let found = missing(
        &[
            q(r#"sum by (code) (a_total{verb="get"}) + c"#),
            q("b and on (instance) b"),
        ],
        &e,
    );
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    assert_eq!(
        found,
        [
            r#"label code on ["a_total"] (read by test)"#,
            "metric c (read by test)"
        ]
    );
}
