//! What the controller tells its operators: Prometheus metrics, health and
//! readiness endpoints, and logs as text or JSON.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `success`, or the error's category (`ApiError`, `ApplyFailed`, …).
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiErrorLabels {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `apply`, `delete`, …
    pub verb: String,
    /// `plural.group` (`pods` for the core group), with `/subresource`.
    pub resource: String,
    /// The HTTP status code, or `transport` when no answer came.
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiRequestLabels {
    /// As for [`ApiErrorLabels`].
    pub verb: String,
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppLabels {
    pub namespace: String,
    pub application: String,
}

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ResultLabels, Counter>,
    pub reconcile_duration: Histogram,
    pub pools: Family<AppLabels, Gauge>,
    pub ready_pools: Family<AppLabels, Gauge>,
    pub api_errors: Family<ApiErrorLabels, Counter>,
    pub api_requests: Family<ApiRequestLabels, Counter>,
    /// Set once the controller has connected and found the APIs it needs.
    pub ready: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("nodepool_fanout");
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register("reconciles", "Reconciles of NodePoolApplications by result", reconciles.clone());
        let reconcile_duration = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile of an application took",
            reconcile_duration.clone(),
        );
        let pools = Family::<AppLabels, Gauge>::default();
        registry.register("pools", "Node pools an application selects", pools.clone());
        let ready_pools = Family::<AppLabels, Gauge>::default();
        registry.register("ready_pools", "Node pools whose release is ready", ready_pools.clone());
        let api_errors = Family::<ApiErrorLabels, Counter>::default();
        registry.register(
            "api_errors",
            "Kubernetes API requests that failed, by verb, resource and HTTP code",
            api_errors.clone(),
        );
        let api_requests = Family::<ApiRequestLabels, Counter>::default();
        registry.register(
            "api_requests",
            "Kubernetes API requests sent, by verb and resource: what the controller costs the API server",
            api_requests.clone(),
        );
        Self {
            registry,
            reconciles,
            reconcile_duration,
            pools,
            ready_pools,
            api_errors,
            api_requests,
            ready: AtomicBool::new(false),
        }
    }
}

impl Metrics {
    pub fn observe_reconcile(&self, result: &str, took: Duration) {
        self.reconciles
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    pub fn observe_api_error(&self, verb: &str, resource: &str, code: &str) {
        self.api_errors
            .get_or_create(&ApiErrorLabels {
                verb: verb.to_string(),
                resource: resource.to_string(),
                code: code.to_string(),
            })
            .inc();
    }

    pub fn observe_api_request(&self, verb: &str, resource: &str) {
        self.api_requests
            .get_or_create(&ApiRequestLabels {
                verb: verb.to_string(),
                resource: resource.to_string(),
            })
            .inc();
    }

    pub fn set_pools(&self, namespace: &str, application: &str, selected: i64, ready: i64) {
        let labels = AppLabels {
            namespace: namespace.to_string(),
            application: application.to_string(),
        };
        self.pools.get_or_create(&labels).set(selected);
        self.ready_pools.get_or_create(&labels).set(ready);
    }

    /// An application that is gone leaves no series behind.
    pub fn forget(&self, namespace: &str, application: &str) {
        let labels = AppLabels {
            namespace: namespace.to_string(),
            application: application.to_string(),
        };
        self.pools.remove(&labels);
        self.ready_pools.remove(&labels);
    }

    /// The text exposition format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr} for metrics and health: {source} (choose another --metrics-addr)")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Serves `/metrics`, `/healthz` and `/readyz` until the process ends.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready_handler))
        .with_state(metrics);
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics server stopped");
        }
    });
    Ok(())
}

async fn metrics_handler(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    match metrics.encode() {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn ready_handler(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    match metrics.ready.load(Ordering::Relaxed) {
        true => (StatusCode::OK, "ready"),
        false => (StatusCode::SERVICE_UNAVAILABLE, "starting"),
    }
}

/// Logs to stderr, as text for people or JSON for log pipelines; the level
/// comes from RUST_LOG (default `info`).
pub fn init_logs(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_exposed_by_name_and_labels() {
        let m = Metrics::default();
        m.observe_reconcile("success", Duration::from_millis(20));
        m.observe_reconcile("ApiError", Duration::from_millis(20));
        m.set_pools("edge", "ingress", 3, 2);
        m.observe_api_error("apply", "helmreleases.helm.toolkit.fluxcd.io", "409");
        let text = m.encode().unwrap();
        assert!(text.contains(r#"nodepool_fanout_reconciles_total{result="success"} 1"#), "{text}");
        assert!(text.contains(r#"nodepool_fanout_reconciles_total{result="ApiError"} 1"#), "{text}");
        assert!(
            text.contains(r#"nodepool_fanout_pools{namespace="edge",application="ingress"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"nodepool_fanout_ready_pools{namespace="edge",application="ingress"} 2"#),
            "{text}"
        );
        assert!(text.contains("nodepool_fanout_reconcile_duration_seconds_count 2"), "{text}");
        assert!(
            text.contains(
                r#"nodepool_fanout_api_errors_total{verb="apply",resource="helmreleases.helm.toolkit.fluxcd.io",code="409"} 1"#
            ),
            "{text}"
        );
        m.forget("edge", "ingress");
        assert!(!m.encode().unwrap().contains(r#"application="ingress""#));
    }
}
