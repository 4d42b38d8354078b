//! The metric checks' queries asked of a Prometheus-compatible query API
//! (`GET /api/v1/query`), as the plan says they are due: with the bearer
//! token or basic auth of a Secret in the application's own namespace,
//! a timeout per query, and a few at once.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client};
use serde_json::Value;

use crate::reconcile::rollout::analysis::{Analysing, Answer, Ask};
use crate::runtime::notify::with_causes;

mod batch;
use batch::Request;

/// How long one query may take: a check asked every few seconds must not
/// hold the reconcile for long.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Queries in flight at once, for one application.
const IN_FLIGHT: usize = 8;
/// The longest query string sent in a GET's URL; a longer one is POSTed.
const MAX_GET_QUERY: usize = 4096;

/// Asks the checks' queries; one per controller, its connections reused.
#[derive(Clone)]
pub struct Asker {
    http: reqwest::Client,
}

impl Default for Asker {
    fn default() -> Self {
        Self::new()
    }
}

/// How a query is let in.
enum Auth {
    Bearer(String),
    Basic(String, String),
}

impl Asker {
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .timeout(QUERY_TIMEOUT)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Self { http }
    }

    /// Every query `analysing` says is due, each with its answer (a query
    /// that got none says why), asked at `at`.
    pub async fn ask(
        &self,
        client: &Client,
        application: (&str, &str),
        analysing: &Analysing,
        at: Timestamp,
    ) -> Vec<(Ask, Answer)> {
        let (namespace, name) = application;
        if analysing.asks.is_empty() {
            return Vec::new();
        }
        // The Secret is the query API's: read only when a query is asked.
        let queries = analysing.asks.iter().any(|ask| ask.webhook.is_none());
        let auth = match analysing.source.secret_ref.as_ref().filter(|_| queries) {
            None => Ok(None),
            Some(secret) => auth_of(client, namespace, &secret.name).await.map(Some),
        };
        let auth = match auth {
            Ok(auth) => auth,
            Err(why) => {
                let no = |ask: &Ask| (ask.clone(), Answer::Unanswered(why.clone()));
                return analysing.asks.iter().map(no).collect();
            }
        };
        let address = analysing.source.address.trim_end_matches('/');
        let url = format!("{address}/api/v1/query");
        let (url, auth, revision) = (&url, auth.as_ref(), analysing.revision.as_str());
        let answered: Vec<Vec<(Ask, Answer)>> = futures::stream::iter(batch::requests(&analysing.asks))
            .map(|request| self.carry(request, url, auth, (namespace, name, revision), at))
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        answered.into_iter().flatten().collect()
    }

    /// One request of a round carried out: each of its asks with its answer.
    async fn carry(
        &self,
        request: Request,
        url: &str,
        auth: Option<&Auth>,
        (namespace, name, revision): (&str, &str, &str),
        at: Timestamp,
    ) -> Vec<(Ask, Answer)> {
        match request {
            Request::One(ask) => {
                let answer = match &ask.webhook {
                    Some(hook) => self.gate(hook, &gate_body(namespace, name, revision, &ask)).await,
                    None => match self.query(url, auth, &ask.query, at).await {
                        Ok((status, body)) => answer_of(status, &body),
                        Err(why) => Answer::Unanswered(why),
                    },
                };
                vec![(ask, answer)]
            }
            Request::Batch { by, query, asks } => match self.query(url, auth, &query, at).await {
                Ok((status, body)) => batch::split(asks, &by, status, &body),
                Err(why) => asks.into_iter().map(|a| (a, Answer::Unanswered(why.clone()))).collect(),
            },
        }
    }

    /// A webhook gate asked: a 2xx lets it go (its status as the value),
    /// anything else holds, with what it answered.
    async fn gate(&self, url: &str, body: &serde_json::Value) -> Answer {
        let response = match self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
        {
            Ok(response) => response,
            Err(e) => return Answer::Unanswered(format!("posting to {url}: {}", with_causes(&e))),
        };
        let status = response.status();
        if status.is_success() {
            return Answer::Value(f64::from(status.as_u16()));
        }
        let text = response.text().await.unwrap_or_default();
        let head: String = text.trim().chars().take(200).collect();
        Answer::Unanswered(format!("HTTP {}: {head}", status.as_u16()))
    }

    /// Asks `query` at `at`: the answer's status and body, or why there is
    /// none. A long query (a batch's many pools) goes as a form POST, which
    /// every Prometheus-compatible query API reads as it reads the GET.
    async fn query(
        &self,
        url: &str,
        auth: Option<&Auth>,
        query: &str,
        at: Timestamp,
    ) -> Result<(u16, bytes::Bytes), String> {
        let time = format!("{:.3}", at.as_millisecond() as f64 / 1000.0);
        let mut parsed = reqwest::Url::parse(url).map_err(|e| format!("{url} is not a URL: {e}"))?;
        parsed.query_pairs_mut().append_pair("query", query).append_pair("time", &time);
        let request = match parsed.query().filter(|q| q.len() > MAX_GET_QUERY).map(String::from) {
            None => self.http.get(parsed),
            Some(form) => {
                parsed.set_query(None);
                self.http
                    .post(parsed)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(form)
            }
        };
        let request = match auth {
            Some(Auth::Bearer(token)) => request.bearer_auth(token),
            Some(Auth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            None => request,
        };
        let response = request.send().await.map_err(|e| format!("asking {url}: {}", with_causes(&e)))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| format!("reading the answer of {url}: {}", with_causes(&e)))?;
        Ok((status, body))
    }
}

/// What a webhook gate is POSTed: the application, the revision, the gate,
/// and the pool or the wave it is about, with the pools.
pub fn gate_body(namespace: &str, name: &str, revision: &str, ask: &Ask) -> serde_json::Value {
    let wave = ask.pool.strip_prefix("wave:");
    serde_json::json!({
        "application": { "namespace": namespace, "name": name },
        "revision": revision,
        "gate": ask.check,
        "type": if wave.is_some() { "PreWave" } else { "PreDone" },
        "wave": wave,
        "pool": if wave.is_some() { None } else { Some(&ask.pool) },
        "pools": ask.pools,
    })
}

/// The Secret's `token`, or its `username` and `password`.
async fn auth_of(client: &Client, namespace: &str, name: &str) -> Result<Auth, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets.get(name).await.map_err(|e| {
        format!("reading Secret {namespace}/{name} (rollout.analysis.prometheus.secretRef): {e}")
    })?;
    let data = secret.data.unwrap_or_default();
    let text = |key: &str| data.get(key).map(|b| String::from_utf8_lossy(&b.0).trim().to_string());
    match (text("token"), text("username"), text("password")) {
        (Some(token), _, _) => Ok(Auth::Bearer(token)),
        (None, Some(user), Some(password)) => Ok(Auth::Basic(user, password)),
        _ => Err(format!(
            "Secret {namespace}/{name} (rollout.analysis.prometheus.secretRef) has neither a token key nor \
             username and password keys"
        )),
    }
}

/// What an answer of the query API says: one number, no series, or why
/// there is no answer (an error the server gives, or an answer that is
/// not one number).
pub fn answer_of(status: u16, body: &[u8]) -> Answer {
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        let head = String::from_utf8_lossy(&body[..body.len().min(200)]).to_string();
        return Answer::Unanswered(format!("HTTP {status}, not the query API's JSON: {head}"));
    };
    if json["status"] != "success" {
        let kind = json["errorType"].as_str().unwrap_or("error");
        let error = json["error"].as_str().unwrap_or("no error given");
        return Answer::Unanswered(format!("HTTP {status}, {kind}: {error}"));
    }
    let data = &json["data"];
    let number = |sample: &Value| sample.get(1).and_then(Value::as_str).and_then(|v| v.parse::<f64>().ok());
    match data["resultType"].as_str() {
        Some("scalar") => number(&data["result"])
            .map_or_else(|| Answer::Unanswered("a scalar that is not a number".into()), Answer::Value),
        Some("vector") => match data["result"].as_array().map(Vec::as_slice) {
            Some([]) => Answer::Empty,
            Some([one]) => number(&one["value"])
                .map_or_else(|| Answer::Unanswered("a sample that is not a number".into()), Answer::Value),
            Some(many) => Answer::Unanswered(format!(
                "{} series: a check's query must answer one number (aggregate it, e.g. with sum)",
                many.len()
            )),
            None => Answer::Unanswered("a vector without a result".into()),
        },
        other => Answer::Unanswered(format!(
            "a result of type {}: a check's query must answer a scalar or an instant vector",
            other.unwrap_or("none")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gate of the test's own on the loopback: it refuses until told
    /// otherwise, and keeps what it was sent.
    #[tokio::test]
    async fn a_gate_is_posted_the_application_and_its_pools_and_holds_until_a_2xx() {
        use std::sync::{Arc, Mutex};
        let state: Arc<Mutex<(u16, Vec<serde_json::Value>)>> = Arc::new(Mutex::new((403, Vec::new())));
        let seen = state.clone();
        let router = axum::Router::new().route(
            "/approve",
            axum::routing::post(move |body: String| {
                let seen = seen.clone();
                async move {
                    let mut s = seen.lock().expect("state");
                    s.1.push(serde_json::from_str(&body).expect("a JSON body"));
                    let code = axum::http::StatusCode::from_u16(s.0).expect("a status");
                    (code, "change freeze until Monday")
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}/approve", listener.local_addr().expect("its address"));
        let server = tokio::spawn(async move { axum::serve(listener, router).await.expect("serves") });
        let ask = Ask {
            pool: "east".into(),
            check: "change-freeze".into(),
            query: String::new(),
            webhook: Some(url.clone()),
            by: None,
            pools: vec!["east".into()],
            ready_since: Timestamp::UNIX_EPOCH,
        };
        let body = gate_body("edge", "ingress", "abc123", &ask);
        let asker = Asker::new();
        let held = asker.gate(&url, &body).await;
        assert_eq!(held, Answer::Unanswered("HTTP 403: change freeze until Monday".into()));
        state.lock().expect("state").0 = 200;
        assert_eq!(asker.gate(&url, &body).await, Answer::Value(200.0));
        let sent = state.lock().expect("state").1.clone();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0]["application"], serde_json::json!({ "namespace": "edge", "name": "ingress" }));
        assert_eq!(
            (sent[0]["revision"].as_str(), sent[0]["type"].as_str()),
            (Some("abc123"), Some("PreDone"))
        );
        assert_eq!(
            (sent[0]["pool"].as_str(), &sent[0]["pools"]),
            (Some("east"), &serde_json::json!(["east"]))
        );
        server.abort();
    }

    #[test]
    fn answers_read_as_one_number_no_data_or_why_not() {
        let vector = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1.5,"0.25"]}]}}"#;
        assert_eq!(answer_of(200, vector), Answer::Value(0.25));
        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1.5,"3"]}}"#;
        assert_eq!(answer_of(200, scalar), Answer::Value(3.0));
        let empty = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(answer_of(200, empty), Answer::Empty);
        let nan = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#;
        assert!(matches!(answer_of(200, nan), Answer::Value(v) if v.is_nan()));
        let two = br#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]},{"value":[1,"2"]}]}}"#;
        assert!(matches!(answer_of(200, two), Answer::Unanswered(why) if why.contains("2 series")));
        let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#;
        assert!(
            matches!(answer_of(400, bad), Answer::Unanswered(why) if why.contains("bad_data: parse error"))
        );
        assert!(
            matches!(answer_of(502, b"<html>Bad Gateway</html>"), Answer::Unanswered(why) if why.contains("HTTP 502"))
        );
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(matches!(answer_of(200, matrix), Answer::Unanswered(why) if why.contains("matrix")));
    }
}
