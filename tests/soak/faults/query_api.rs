//! A Prometheus-compatible query API of the soak's own, on the loopback,
//! for the metric checks of one application: it answers each query with
//! a value within the check's bounds, or, while the soak stops it, with
//! `503` (no answer). It keeps the evaluation time of every answer it gave
//! by the pool and revision the query names, for the `checks answered`
//! rule (a pool is never passed on a check that was not answered).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Form, Query};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use k8s_openapi::jiff::Timestamp;
use nodepool_fanout::check::answered::Answers;
use serde_json::json;

/// The query the checked application asks of each pool.
pub const QUERY: &str = r#"soak_errors{pool="{{pool.name}}",revision="{{revision}}"}"#;
/// What every answer reads: within the check's `max`.
const VALUE: &str = "0.001";

#[derive(Debug, Default)]
struct State {
    stopped_until: Option<tokio::time::Instant>,
    answers: Answers,
}

pub struct QueryApi {
    pub address: String,
    state: Arc<Mutex<State>>,
    server: tokio::task::JoinHandle<()>,
}

/// A query as `GET /api/v1/query` or its form `POST` carries it.
#[derive(Debug, serde::Deserialize)]
struct Asked {
    query: String,
    time: Option<String>,
}

impl QueryApi {
    pub async fn start() -> Self {
        let state: Arc<Mutex<State>> = Arc::default();
        let answer = {
            let state = state.clone();
            move |asked: Asked| answer(&state, asked)
        };
        let on_get = answer.clone();
        let router = Router::new().route(
            "/api/v1/query",
            get(move |Query(asked): Query<Asked>| std::future::ready(on_get(asked)))
                .post(move |Form(asked): Form<Asked>| std::future::ready(answer(asked))),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = format!("http://{}", listener.local_addr().expect("its address"));
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("the query API serves");
        });
        Self {
            address,
            state,
            server,
        }
    }

    /// No answer to anything for `down`.
    pub fn stop_for(&self, down: Duration) {
        self.state.lock().expect("the query API's state").stopped_until =
            Some(tokio::time::Instant::now() + down);
    }

    /// Every answer given so far.
    pub fn answers(&self) -> Answers {
        self.state.lock().expect("the query API's state").answers.clone()
    }
}

impl Drop for QueryApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The answer to one query: a vector of one sample, or 503 while stopped.
fn answer(state: &Mutex<State>, asked: Asked) -> (StatusCode, String) {
    let mut state = state.lock().expect("the query API's state");
    if state.stopped_until.is_some_and(|until| tokio::time::Instant::now() < until) {
        let body = json!({ "status": "error", "errorType": "unavailable", "error": "stopped by the soak" });
        return (StatusCode::SERVICE_UNAVAILABLE, body.to_string());
    }
    let time = asked.time.clone().unwrap_or_default();
    let at = time
        .parse::<f64>()
        .ok()
        .and_then(|s| Timestamp::from_millisecond((s * 1000.0).round() as i64).ok());
    let (Some(pool), Some(revision), Some(at)) =
        (label(&asked.query, "pool"), label(&asked.query, "revision"), at)
    else {
        let body = json!({ "status": "error", "errorType": "bad_data", "error": "not the soak's query" });
        return (StatusCode::BAD_REQUEST, body.to_string());
    };
    state.answers.entry((pool, revision)).or_default().push(at);
    let body = json!({ "status": "success", "data": { "resultType": "vector", "result": [
        { "metric": {}, "value": [at.as_millisecond() as f64 / 1000.0, VALUE] }
    ] } });
    (StatusCode::OK, body.to_string())
}

/// The value of `name="…"` in a query.
fn label(query: &str, name: &str) -> Option<String> {
    let start = query.find(&format!("{name}=\""))? + name.len() + 2;
    let end = query[start..].find('"')?;
    Some(query[start..start + end].to_string())
}

/// The checks of the checked application, asking `address`.
pub fn analysis(address: &str) -> serde_json::Value {
    json!({
        "prometheus": { "address": address },
        "checks": [{ "name": "errors", "query": QUERY, "max": 0.01, "interval": "2s" }]
    })
}
