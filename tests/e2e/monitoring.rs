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

mod lexer;
mod reader;

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, ready_is, wait_app, READY_TIMEOUT};
use support::{ensure_crd, repo_root, RunningController, TestEnv, TestResult};

use reader::{reads, LabelUse};

/// Labels Prometheus gives every series of a target when it scrapes it:
/// not in the controller's output, yet always there to select or join on.
const TARGET_LABELS: &[&str] = &["job", "instance"];

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
