//! What `deploy/monitoring/` promises operators, checked against the
//! controller itself: every metric that the Grafana dashboard and the
//! PrometheusRule query is one the running controller exports, with the
//! labels they select and group by, and every alert tells its severity and
//! what to do.
//!
//! The metric names come from the queries themselves, read by a small
//! PromQL lexer: an identifier that is not a function, an aggregation, a
//! keyword, nor a label name (inside `{…}`, `by (…)`, `without (…)`,
//! `on (…)`, `ignoring (…)`, `group_left (…)`, `group_right (…)`) is a
//! metric name, looked up exactly as written (`…_bucket`, `…_total`).
//! Strings and range selectors are skipped, so Grafana's `$variables`
//! inside them need no special case; Grafana's `label_values(selector,
//! label)` of the template variables is read as a selector and a label.
use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, ready_is, wait_app, READY_TIMEOUT};
use support::{ensure_crd, repo_root, RunningController, TestEnv, TestResult};

/// Labels Prometheus gives every series of a target when it scrapes it:
/// not in the controller's output, yet always there to select or join on.
const TARGET_LABELS: &[&str] = &["job", "instance"];

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

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num,
    Open,
    Close,
    LBrace,
    RBrace,
    Comma,
    Op(String),
    /// `[5m]`, `[$__rate_interval]`, `[1h:5m]`: skipped whole.
    Range,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn lex(expr: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            _ if c.is_whitespace() => i += 1,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' | '\'' | '`' => {
                let mut value = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(format!("unterminated string in {expr:?}")),
                        Some('\\') if c != '`' => {
                            value.extend(chars.get(i + 1));
                            i += 2;
                        }
                        Some(&q) if q == c => break,
                        Some(&other) => {
                            value.push(other);
                            i += 1;
                        }
                    }
                }
                i += 1;
                toks.push(Tok::Str(value));
            }
            '[' => {
                while i < chars.len() && chars[i] != ']' {
                    i += 1;
                }
                if i == chars.len() {
                    return Err(format!("unclosed [ in {expr:?}"));
                }
                i += 1;
                toks.push(Tok::Range);
            }
            // A Grafana variable outside a string or a range stands for a
            // value.
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    while i < chars.len() && chars[i] != '}' {
                        i += 1;
                    }
                    i += 1;
                } else {
                    while i < chars.len() && is_ident_char(chars[i]) {
                        i += 1;
                    }
                }
                toks.push(Tok::Num);
            }
            _ if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    // An exponent's sign: 1e-3.
                    if matches!(chars[i], 'e' | 'E') && matches!(chars.get(i + 1), Some('+' | '-')) {
                        i += 1;
                    }
                    i += 1;
                }
                toks.push(Tok::Num);
            }
            _ if is_ident_start(c) => {
                let start = i;
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                toks.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            '(' => {
                toks.push(Tok::Open);
                i += 1;
            }
            ')' => {
                toks.push(Tok::Close);
                i += 1;
            }
            '{' => {
                toks.push(Tok::LBrace);
                i += 1;
            }
            '}' => {
                toks.push(Tok::RBrace);
                i += 1;
            }
            ',' => {
                toks.push(Tok::Comma);
                i += 1;
            }
            _ => {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                if ["=~", "!=", "!~", "==", "<=", ">="].contains(&two.as_str()) {
                    toks.push(Tok::Op(two));
                    i += 2;
                } else if "=<>+-*/%^@".contains(c) {
                    toks.push(Tok::Op(c.to_string()));
                    i += 1;
                } else {
                    return Err(format!("unexpected {c:?} in {expr:?}"));
                }
            }
        }
    }
    Ok(toks)
}

/// A label that a query needs on at least one of `metrics`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct LabelUse {
    label: String,
    metrics: BTreeSet<String>,
}

/// What one query reads.
#[derive(Debug, Default, PartialEq)]
struct Reads {
    metrics: BTreeSet<String>,
    labels: BTreeSet<LabelUse>,
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

fn reads(expr: &str) -> Result<Reads, String> {
    reads_of(&lex(expr)?)
}

/// A query and where it is.
struct Query {
    origin: String,
    expr: String,
}

fn read_text(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn dashboard() -> Value {
    serde_json::from_str(&read_text("deploy/monitoring/dashboard.json"))
        .unwrap_or_else(|e| panic!("deploy/monitoring/dashboard.json is not JSON: {e}"))
}

fn yaml_documents(relative: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(&read_text(relative))
        .unwrap_or_else(|e| panic!("{relative} is not YAML: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn prometheus_rule() -> Value {
    let docs = yaml_documents("deploy/monitoring/prometheusrule.yaml");
    assert_eq!(docs.len(), 1, "prometheusrule.yaml holds one document");
    docs.into_iter().next().unwrap_or_default()
}

/// Panels, with those inside collapsed rows.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        all.push(panel);
        all.extend(panel["panels"].as_array().into_iter().flatten());
    }
    all
}

/// Every PromQL expression of the dashboard and the alerts.
fn queries() -> Vec<Query> {
    let mut queries = Vec::new();
    let dashboard = dashboard();
    for panel in panels(&dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                queries.push(Query {
                    origin: format!(
                        "dashboard panel {:?} ({})",
                        panel["title"].as_str().unwrap_or("?"),
                        target["refId"].as_str().unwrap_or("?")
                    ),
                    expr: expr.to_string(),
                });
            }
        }
    }
    for variable in dashboard["templating"]["list"].as_array().into_iter().flatten() {
        if variable["type"] != "query" {
            continue;
        }
        let query = &variable["query"];
        let texts = [
            query.as_str(),
            query["query"].as_str(),
            variable["definition"].as_str(),
        ];
        for expr in texts.into_iter().flatten().collect::<BTreeSet<_>>() {
            queries.push(Query {
                origin: format!("dashboard variable {}", variable["name"].as_str().unwrap_or("?")),
                expr: expr.to_string(),
            });
        }
    }
    let rule = prometheus_rule();
    for group in rule["spec"]["groups"].as_array().into_iter().flatten() {
        for r in group["rules"].as_array().into_iter().flatten() {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap_or("?");
            queries.push(Query {
                origin: format!("rule {name}"),
                expr: r["expr"].as_str().unwrap_or_default().to_string(),
            });
        }
    }
    queries
}

/// Metric name → the label names seen on its series, from the text
/// exposition format.
fn exported(scrape: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut series: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in scrape.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = series.entry(line[..end].to_string()).or_default();
        let Some(rest) = line[end..].strip_prefix('{') else {
            continue;
        };
        // label="value",… with \" and \\ escaped in values.
        let mut chars = rest.chars().peekable();
        loop {
            let name: String = chars.by_ref().take_while(|&c| c != '=').collect();
            let name = name.trim_start_matches(',').trim();
            if name.is_empty() || name.starts_with('}') {
                break;
            }
            labels.insert(name.to_string());
            if chars.next() != Some('"') {
                break;
            }
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => break,
                    _ => {}
                }
            }
            if chars.peek() == Some(&'}') {
                break;
            }
        }
    }
    series
}

/// What the queries read that the scrape lacks, one line each.
fn missing(queries: &[Query], exported: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let mut missing = BTreeSet::new();
    for q in queries {
        let reads = match reads(&q.expr) {
            Ok(reads) => reads,
            Err(e) => {
                missing.insert(format!("{}: cannot read {:?}: {e}", q.origin, q.expr));
                continue;
            }
        };
        for metric in &reads.metrics {
            if !exported.contains_key(metric) {
                missing.insert(format!("metric {metric} (read by {})", q.origin));
            }
        }
        for LabelUse { label, metrics } in &reads.labels {
            let known: Vec<&String> = metrics.iter().filter(|m| exported.contains_key(*m)).collect();
            if known.is_empty() || TARGET_LABELS.contains(&label.as_str()) {
                continue;
            }
            if !known.iter().any(|m| exported[*m].contains(label)) {
                missing.insert(format!("label {label} on {known:?} (read by {})", q.origin));
            }
        }
    }
    missing
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

#[test]
fn every_alert_has_a_severity_and_tells_the_operator_what_to_do() {
    let rule = prometheus_rule();
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    let mut alerts = BTreeSet::new();
    let mut problems = Vec::new();
    for group in rule["spec"]["groups"].as_array().expect("spec.groups") {
        for r in group["rules"].as_array().expect("a group's rules") {
            let Some(name) = r["alert"].as_str() else { continue };
            if !alerts.insert(name.to_string()) {
                problems.push(format!("{name}: alerted twice"));
            }
            if !matches!(r["labels"]["severity"].as_str(), Some("critical" | "warning" | "info")) {
                problems.push(format!("{name}: severity {:?}", r["labels"]["severity"]));
            }
            for annotation in ["summary", "description"] {
                if r["annotations"][annotation].as_str().is_none_or(|t| t.trim().len() < 20) {
                    problems.push(format!("{name}: no {annotation}"));
                }
            }
            if let Some(d) = r["for"].as_str() {
                if humantime::parse_duration(d).is_err() {
                    problems.push(format!("{name}: for: {d:?}"));
                }
            }
            if r["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                problems.push(format!("{name}: no expr"));
            }
        }
    }
    assert!(problems.is_empty(), "alerts lacking what an operator needs: {problems:#?}");
    for expected in [
        "NodePoolApplicationNotReady",
        "NodePoolFanoutDown",
        "NodePoolFanoutNoLeader",
    ] {
        assert!(alerts.contains(expected), "no alert {expected} among {alerts:?}");
    }
}

#[test]
fn the_dashboard_reads_its_data_source_and_filters_from_variables() {
    let dashboard = dashboard();
    assert!(
        dashboard["schemaVersion"].as_i64() >= Some(36),
        "schemaVersion {}",
        dashboard["schemaVersion"]
    );
    let variables = dashboard["templating"]["list"].as_array().expect("templating.list");
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no template variable {name}"))
    };
    assert_eq!(variable("datasource")["type"], "datasource");
    assert_eq!(variable("datasource")["query"], "prometheus");
    for name in ["namespace", "application"] {
        let v = variable(name);
        assert_eq!(v["type"], "query", "{name}");
        assert!(
            v["definition"].as_str().is_some_and(|d| d.starts_with("label_values(")),
            "{name}: {}",
            v["definition"]
        );
    }
    let source = json!({ "type": "prometheus", "uid": "${datasource}" });
    let mut ids = BTreeSet::new();
    for panel in panels(&dashboard) {
        let title = &panel["title"];
        assert!(ids.insert(panel["id"].as_i64()), "panel id {} twice", panel["id"]);
        let grid = &panel["gridPos"];
        assert!(
            grid["x"].as_i64().unwrap_or(99) + grid["w"].as_i64().unwrap_or(99) <= 24,
            "{title}: {grid}"
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"], source, "{title}");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title} queries nothing");
        for t in targets {
            assert_eq!(t["datasource"], source, "{title}");
            let expr = t["expr"].as_str().unwrap_or_default();
            let filters = ["nodepool_fanout_pools", "nodepool_fanout_ready_pools", "gotk_"];
            if filters.iter().any(|m| expr.contains(m)) {
                assert!(
                    expr.contains("$namespace") && expr.contains("$application"),
                    "{title}: per-application data not filtered by $namespace and $application: {expr}"
                );
            }
        }
    }
}

/// The PodMonitor scrapes the pods of deploy/ on their metrics port, and
/// keeps the controller's own labels.
#[test]
fn the_pod_monitor_scrapes_the_controllers_pods() {
    let docs = yaml_documents("deploy/monitoring/podmonitor.yaml");
    let monitor = docs.iter().find(|d| d["kind"] == "PodMonitor").expect("a PodMonitor");
    let deployment = yaml_documents("deploy/deployment.yaml")
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("deploy/deployment.yaml has a Deployment");
    let pod = &deployment["spec"]["template"];
    for (key, value) in monitor["spec"]["selector"]["matchLabels"].as_object().expect("matchLabels") {
        assert_eq!(&pod["metadata"]["labels"][key], value, "the pods' label {key}");
    }
    assert_eq!(monitor["metadata"]["namespace"], deployment["metadata"]["namespace"]);
    let ports: BTreeSet<&str> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().into_iter().flatten())
        .filter_map(|p| p["name"].as_str())
        .collect();
    for endpoint in monitor["spec"]["podMetricsEndpoints"].as_array().expect("podMetricsEndpoints") {
        let port = endpoint["port"].as_str().unwrap_or_default();
        assert!(ports.contains(port), "port {port:?} is not among the pods' {ports:?}");
        assert_eq!(endpoint["honorLabels"], true, "the applications' namespace label would be renamed");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_metric_the_dashboard_and_alerts_read_is_exported() -> TestResult {
    let queries = queries();
    let mut read = BTreeSet::new();
    for q in &queries {
        read.extend(reads(&q.expr).map(|r| r.metrics).unwrap_or_default());
    }
    for known in [
        "nodepool_fanout_reconciles_total",
        "nodepool_fanout_reconcile_duration_seconds_bucket",
        "nodepool_fanout_pools",
        "nodepool_fanout_api_requests_total",
        "gotk_resource_info",
        "leader_election_master_status",
        "process_resident_memory_bytes",
    ] {
        assert!(read.contains(known), "the queries should read {known}; they read {read:?}");
    }

    let mut env = TestEnv::new("monitoring").await;
    ensure_crd(&env.client).await;
    env.create_region_pools(&["east", "west"]).await;
    let controller = RunningController::start(&env.namespace);
    let result = async {
        apply_app(&env, &ingress_app(&env, json!({}))).await?;
        wait_app(&env, &controller, "READY 2/2", READY_TIMEOUT, ready_is("2/2")).await;
        // What an application's last reconcile sets may land just after its
        // status: a few scrapes, then what is still missing is missing.
        // nodepool_fanout_api_errors_total has a series by then: the first
        // reconcile of a new application looks its HelmChart up before
        // creating it, and the API server answers 404.
        let deadline = Instant::now() + Duration::from_secs(20);
        let (scrape, lacking) = loop {
            let scrape = controller.scrape().await;
            let lacking = missing(&queries, &exported(&scrape));
            if lacking.is_empty() || Instant::now() > deadline {
                break (scrape, lacking);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        };
        let dump = repo_root().join("target/e2e-logs").join(format!("{}.metrics", env.namespace));
        let _ = std::fs::write(&dump, &scrape);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((lacking, dump))
    }
    .await;
    env.cleanup().await;
    let (lacking, dump) = result?;
    assert!(
        lacking.is_empty(),
        "deploy/monitoring/ reads {} metric(s) or label(s) the controller does not export \
         (its /metrics is in {}):\n  {}",
        lacking.len(),
        relative(&dump),
        lacking.into_iter().collect::<Vec<_>>().join("\n  ")
    );
    Ok(())
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo_root()).unwrap_or(path).display().to_string()
}
