//! A Prometheus-compatible query API of the soak's own, on the loopback,
//! for the metric checks of one application: it answers each query with
//! a value within the check's bounds, or, while the soak stops it, with
//! `503` (no answer), at once or, every second stop, once the stop ends. It keeps the evaluation time of every answer it gave
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
    /// While stopped, whether a query hangs until the stop ends (an
    /// address that drops packets) rather than being refused: every second
    /// stop hangs, so that the controller's asks, which wait outside the
    /// reconciles, are tried against both.
    hangs: bool,
    stops: u64,
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
            move |asked: Asked| answer(state.clone(), asked)
        };
        let on_get = answer.clone();
        let router = Router::new().route(
            "/api/v1/query",
            get(move |Query(asked): Query<Asked>| on_get(asked))
                .post(move |Form(asked): Form<Asked>| answer(asked)),
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
        let mut state = self.state.lock().expect("the query API's state");
        state.stops += 1;
        state.hangs = state.stops.is_multiple_of(2);
        state.stopped_until = Some(tokio::time::Instant::now() + down);
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

/// The answer to one query: a vector of one sample, or, while stopped,
/// 503 (at once, or once the stop ends).
async fn answer(state: Arc<Mutex<State>>, asked: Asked) -> (StatusCode, String) {
    let stopped = {
        let state = state.lock().expect("the query API's state");
        let until = state.stopped_until.filter(|until| tokio::time::Instant::now() < *until);
        until.map(|until| (until, state.hangs))
    };
    if let Some((until, hangs)) = stopped {
        if hangs {
            tokio::time::sleep_until(until).await;
        }
        let body = json!({ "status": "error", "errorType": "unavailable", "error": "stopped by the soak" });
        return (StatusCode::SERVICE_UNAVAILABLE, body.to_string());
    }
    let mut state = state.lock().expect("the query API's state");
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
