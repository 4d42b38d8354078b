//! What the bench's metric checks ask: one endpoint that answers a zero
//! error ratio for every pool (`bench_error_ratio{site="<pool>"}`, as an
//! edge fleet's metrics gateway would), registered with the local plane's
//! real Prometheus, and the queries Prometheus says it answered.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use crate::support;

/// The endpoint, and the targets file that points Prometheus at it.
pub struct Exporter {
    targets: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

fn prometheus_url() -> String {
    support::prometheus::url()
}

impl Exporter {
    /// Serves a zero error ratio for each of `pools`, registers the
    /// endpoint as a target under `name`, and waits until Prometheus has
    /// scraped every pool's series.
    pub async fn start(name: &str, pools: &[String]) -> Self {
        let body: Arc<String> =
            Arc::new(pools.iter().map(|p| format!("bench_error_ratio{{site=\"{p}\"}} 0\n")).collect());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        let router = Router::new().route("/metrics", get(move || async move { body.as_str().to_owned() }));
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("the metrics endpoint serves");
        });
        let dir = support::prometheus::targets_dir();
        let targets = dir.join(format!("{name}.json"));
        let partial = dir.join(format!(".{name}.partial"));
        let file = json!([{ "targets": [address.to_string()], "labels": { "bench": name } }]);
        std::fs::write(&partial, file.to_string()).expect("the targets file");
        std::fs::rename(&partial, &targets).expect("the targets file in place");
        let exporter = Self { targets, server };
        exporter.scraped(name, pools.len()).await;
        exporter
    }

    async fn scraped(&self, name: &str, pools: usize) {
        let query = format!("count(bench_error_ratio{{bench=\"{name}\"}})");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let answer = instant(&query).await;
            let count = answer["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|v| v.parse::<usize>().ok());
            if count == Some(pools) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Prometheus did not scrape the bench's {pools} series within 2 min: {answer}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    pub fn stop(self) {
        let _ = std::fs::remove_file(&self.targets);
        self.server.abort();
    }
}

/// An instant query of the plane's Prometheus, answered as JSON.
async fn instant(query: &str) -> Value {
    let url = format!("{}/api/v1/query", prometheus_url());
    let response = reqwest::Client::new()
        .get(reqwest::Url::parse_with_params(&url, [("query", query)]).expect("a URL"))
        .send()
        .await;
    match response {
        Ok(r) => serde_json::from_slice(&r.bytes().await.unwrap_or_default()).unwrap_or(Value::Null),
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// The instant queries Prometheus has answered so far, as its own
/// metrics count them (`prometheus_http_requests_total` of the query
/// handler).
pub async fn queries_answered() -> u64 {
    let url = format!("{}/metrics", prometheus_url());
    let text = match reqwest::Client::new().get(&url).send().await {
        Ok(r) => String::from_utf8_lossy(&r.bytes().await.unwrap_or_default()).to_string(),
        Err(e) => panic!("reading Prometheus's metrics at {url}: {e}"),
    };
    let counted: Vec<u64> = text
        .lines()
        .filter(|l| {
            l.starts_with("prometheus_http_requests_total{") && l.contains(r#"handler="/api/v1/query""#)
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .map(|v| v as u64)
        .collect();
    assert!(
        !counted.is_empty(),
        "Prometheus's metrics count no query handler: its metric names changed?"
    );
    counted.iter().sum()
}

/// The checks of a row: one asked per pool, or one asked `by` site.
pub fn analysis(batched: bool) -> Value {
    let check = if batched {
        json!({
            "name": "error-rate",
            "by": "site",
            "query": "max by (site) (bench_error_ratio{site=~\"{{pools}}\"})",
            "max": 0.05,
            "interval": "10s",
        })
    } else {
        json!({
            "name": "error-rate",
            "query": "max(bench_error_ratio{site=\"{{pool.name}}\"})",
            "max": 0.05,
            "interval": "10s",
        })
    };
    json!({ "prometheus": { "address": prometheus_url() }, "checks": [check] })
}
