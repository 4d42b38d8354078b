//! What the tests' Prometheus scrapes: one metrics endpoint per pool on
//! the loopback, each answering the error ratio the test sets for that
//! pool, registered with the local plane's Prometheus as a target
//! labelled with the pool (file-based service discovery).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use crate::support;

type Ratios = Arc<Mutex<BTreeMap<String, f64>>>;

/// The endpoints, and the targets file that points Prometheus at them.
pub struct PoolMetrics {
    ratios: Ratios,
    targets: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

/// The local plane's Prometheus: its base URL.
pub fn prometheus_url() -> String {
    support::prometheus::url()
}

impl PoolMetrics {
    /// Serves `app_error_ratio` for each of `pools` (0 to begin with) and
    /// registers them as targets under `name`.
    pub async fn start(name: &str, pools: &[String]) -> Self {
        let ratios: Ratios = Arc::new(Mutex::new(pools.iter().map(|p| (p.clone(), 0.0)).collect()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        let router = Router::new().route("/pools/{pool}/metrics", get(metrics)).with_state(ratios.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("the metrics endpoints serve");
        });
        let targets: Vec<Value> = pools
            .iter()
            .map(|pool| {
                json!({
                    "targets": [address.to_string()],
                    "labels": { "pool": pool, "__metrics_path__": format!("/pools/{pool}/metrics") },
                })
            })
            .collect();
        let dir = support::prometheus::targets_dir();
        let file = dir.join(format!("{name}.json"));
        // Written whole, then renamed: Prometheus reads the directory as it changes.
        let partial = dir.join(format!(".{name}.partial"));
        std::fs::write(&partial, serde_json::to_vec(&targets).expect("JSON")).expect("the targets file");
        std::fs::rename(&partial, &file).expect("the targets file in place");
        Self {
            ratios,
            targets: file,
            server,
        }
    }

    /// From now on, `pool` answers `ratio`.
    pub fn set(&self, pool: &str, ratio: f64) {
        self.ratios.lock().expect("the ratios").insert(pool.to_string(), ratio);
    }

    /// Waits until Prometheus has scraped `ratio` for every pool of `pools`.
    pub async fn scraped(&self, pools: &[String], ratio: f64) {
        let what = format!("Prometheus to scrape {ratio} for {pools:?}");
        support::wait_for(&what, Duration::from_secs(60), || async move {
            for pool in pools {
                let value = query(&format!("app_error_ratio{{pool=\"{pool}\"}}")).await?;
                if value != Some(ratio) {
                    return Err(format!("{pool}: {value:?}"));
                }
            }
            Ok(())
        })
        .await;
    }
}

/// What the local plane's Prometheus answers to `promql` now: its one
/// number, or none.
pub async fn query(promql: &str) -> Result<Option<f64>, String> {
    let mut url =
        reqwest::Url::parse(&format!("{}/api/v1/query", prometheus_url())).map_err(|e| e.to_string())?;
    url.query_pairs_mut().append_pair("query", promql);
    let body = reqwest::get(url)
        .await
        .map_err(|e| e.to_string())?
        .bytes()
        .await
        .map_err(|e| e.to_string())?;
    let answer: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    Ok(answer
        .pointer("/data/result/0/value/1")
        .and_then(Value::as_str)
        .and_then(|v| v.parse::<f64>().ok()))
}

impl Drop for PoolMetrics {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.targets);
        self.server.abort();
    }
}

async fn metrics(State(ratios): State<Ratios>, Path(pool): Path<String>) -> String {
    let ratio = ratios.lock().map(|r| r.get(&pool).copied()).ok().flatten().unwrap_or(f64::NAN);
    format!("# TYPE app_error_ratio gauge\napp_error_ratio {ratio}\n")
}
