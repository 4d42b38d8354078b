//! The metric checks' queries asked of a Prometheus-compatible query API
//! (`GET /api/v1/query`), as the plan says they are due: with the bearer
//! token or basic auth of a Secret in the application's own namespace,
//! a timeout per query, and a few at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client};
use serde_json::Value;

use crate::api::PrometheusSource;
use crate::reconcile::rollout::analysis::{Analysing, Answer, Ask};
use crate::runtime::notify::with_causes;

mod batch;
mod reach;
use batch::Request;
pub use reach::{BadEntry, Reach};

/// How long one query may take: a check asked every few seconds must not
/// hold the reconcile for long.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Queries in flight at once, for one application.
const IN_FLIGHT: usize = 8;
/// The longest query string sent in a GET's URL; a longer one is POSTed.
const MAX_GET_QUERY: usize = 4096;

/// Asks the checks' queries; one per controller, its connections reused.
/// It follows no redirect (a redirect would take a query, and its
/// credentials, past `--check-allowed-hosts`), and asks only the hosts
/// its [`Reach`] admits.
#[derive(Clone)]
pub struct Asker {
    reach: Arc<Reach>,
    /// The client that trusts the system's roots alone.
    plain: reqwest::Client,
    /// Those that trust a CA of a Secret's besides, by the CA.
    with_ca: Arc<Mutex<HashMap<Vec<u8>, reqwest::Client>>>,
}

impl Default for Asker {
    fn default() -> Self {
        Self::new(Reach::default())
    }
}

/// How a query is let in.
enum Auth {
    Bearer(String),
    Basic(String, String),
}

/// At most this many clients with a CA of their own are kept: one per
/// CA in use, and CAs change rarely.
const MAX_CA_CLIENTS: usize = 64;

/// A client that asks only what `reach` admits, trusting `ca` besides the
/// system's roots.
fn client_of(reach: &Arc<Reach>, ca: Option<&[u8]>) -> Result<reqwest::Client, String> {
    let tls = crate::tls::client_config(ca).map_err(|e| e.to_string())?;
    reqwest::Client::builder()
        .timeout(QUERY_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(reach::Resolver(reach.clone()))
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| format!("making an HTTP client: {}", with_causes(&e)))
}

impl Asker {
    /// An asker of the hosts `reach` admits.
    pub fn new(reach: Reach) -> Self {
        let reach = Arc::new(reach);
        // The system's roots alone cannot fail to make a client but for a
        // broken TLS stack, which every later ask then reports.
        let plain = client_of(&reach, None).unwrap_or_else(|_| reqwest::Client::new());
        Self {
            reach,
            plain,
            with_ca: Arc::default(),
        }
    }

    /// The client for a CA read from a Secret, or the plain one.
    fn client(&self, ca: Option<&[u8]>) -> Result<reqwest::Client, String> {
        let Some(ca) = ca else {
            return Ok(self.plain.clone());
        };
        let mut clients = self.with_ca.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = clients.get(ca) {
            return Ok(client.clone());
        }
        let client = client_of(&self.reach, Some(ca))?;
        if clients.len() >= MAX_CA_CLIENTS {
            clients.clear();
        }
        clients.insert(ca.to_vec(), client.clone());
        Ok(client)
    }

    /// The client to ask `url` with, trusting `cert_secret`'s CA: or why
    /// it may not be asked.
    async fn client_for(
        &self,
        client: &Client,
        namespace: &str,
        url: &str,
        cert_secret: Option<(&str, &str)>,
    ) -> Result<reqwest::Client, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url} is not a URL: {e}"))?;
        self.reach.check(&parsed)?;
        let ca = match cert_secret {
            None => None,
            Some((name, field)) => Some(ca_of(client, namespace, name, field).await?),
        };
        self.client(ca.as_deref())
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
        // The Secrets are read only when something is asked that needs them.
        let queries = analysing.asks.iter().any(|ask| ask.webhook.is_none());
        let querying = match analysing.source.as_ref().filter(|_| queries) {
            None => Err("no query API: give rollout.analysis.prometheus.address".to_string()),
            Some(source) => self.querying(client, namespace, source).await,
        };
        let mut gates: HashMap<(String, Option<String>), Result<reqwest::Client, String>> = HashMap::new();
        for hook in analysing.asks.iter().filter_map(|ask| ask.webhook.as_ref()) {
            let key = (hook.url.clone(), hook.cert_secret.clone());
            if let std::collections::hash_map::Entry::Vacant(entry) = gates.entry(key) {
                let cert =
                    hook.cert_secret.as_deref().map(|s| (s, "rollout.analysis.webhooks[].certSecretRef"));
                entry.insert(self.client_for(client, namespace, &hook.url, cert).await);
            }
        }
        let round = Round {
            querying: &querying,
            gates: &gates,
            application: (namespace, name, analysing.revision.as_str()),
            at,
        };
        let answered: Vec<Vec<(Ask, Answer)>> = futures::stream::iter(batch::requests(&analysing.asks))
            .map(|request| round.carry(request))
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        answered.into_iter().flatten().collect()
    }

    /// How the query API is asked this round: its client, URL and
    /// credentials, or why it cannot be.
    async fn querying(
        &self,
        client: &Client,
        namespace: &str,
        source: &PrometheusSource,
    ) -> Result<Querying, String> {
        let address = source.address.trim_end_matches('/');
        let url = format!("{address}/api/v1/query");
        let cert = source
            .cert_secret_ref
            .as_ref()
            .map(|s| (s.name.as_str(), "rollout.analysis.prometheus.certSecretRef"));
        let http = self.client_for(client, namespace, &url, cert).await?;
        let auth = match source.secret_ref.as_ref() {
            None => None,
            Some(secret) => Some(auth_of(client, namespace, &secret.name).await?),
        };
        Ok(Querying { http, url, auth })
    }
}

/// The query API as one round asks it.
struct Querying {
    http: reqwest::Client,
    url: String,
    auth: Option<Auth>,
}

/// One round of asks: the clients made for it, and what every request
/// says of its application.
struct Round<'a> {
    querying: &'a Result<Querying, String>,
    /// Each gate's client by its URL and CA Secret, or why it may not be
    /// asked.
    gates: &'a HashMap<(String, Option<String>), Result<reqwest::Client, String>>,
    application: (&'a str, &'a str, &'a str),
    at: Timestamp,
}

impl Round<'_> {
    /// One request of a round carried out: each of its asks with its answer.
    async fn carry(&self, request: Request) -> Vec<(Ask, Answer)> {
        let (namespace, name, revision) = self.application;
        match request {
            Request::One(ask) => {
                let answer = match &ask.webhook {
                    Some(hook) => match self.gates.get(&(hook.url.clone(), hook.cert_secret.clone())) {
                        Some(Ok(http)) => {
                            gate(http, &hook.url, &gate_body(namespace, name, revision, &ask)).await
                        }
                        Some(Err(why)) => Answer::Unanswered(why.clone()),
                        None => Answer::Unanswered(format!("{}: no client was made for it", hook.url)),
                    },
                    None => match self.query(&ask.query).await {
                        Ok((status, body)) => answer_of(status, &body),
                        Err(why) => Answer::Unanswered(why),
                    },
                };
                vec![(ask, answer)]
            }
            Request::Batch { by, query, asks } => match self.query(&query).await {
                Ok((status, body)) => batch::split(asks, &by, status, &body),
                Err(why) => asks.into_iter().map(|a| (a, Answer::Unanswered(why.clone()))).collect(),
            },
        }
    }

    /// Asks `query` at the round's time: the answer's status and body, or
    /// why there is none. A long query (a batch's many pools) goes as a
    /// form POST, which every Prometheus-compatible query API reads as it
    /// reads the GET.
    async fn query(&self, query: &str) -> Result<(u16, bytes::Bytes), String> {
        let Querying { http, url, auth } = self.querying.as_ref().map_err(Clone::clone)?;
        let time = format!("{:.3}", self.at.as_millisecond() as f64 / 1000.0);
        let mut parsed = reqwest::Url::parse(url).map_err(|e| format!("{url} is not a URL: {e}"))?;
        parsed.query_pairs_mut().append_pair("query", query).append_pair("time", &time);
        let request = match parsed.query().filter(|q| q.len() > MAX_GET_QUERY).map(String::from) {
            None => http.get(parsed),
            Some(form) => {
                parsed.set_query(None);
                http.post(parsed)
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

/// A webhook gate asked: a 2xx lets it go (its status as the value),
/// anything else holds, with its status and a short reason from its
/// answer's first line. A redirect is not followed: it holds.
async fn gate(http: &reqwest::Client, url: &str, body: &serde_json::Value) -> Answer {
    let response = match http
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
    match short_reason(&text, GATE_REASON) {
        reason if reason.is_empty() => Answer::Unanswered(format!("HTTP {}", status.as_u16())),
        reason => Answer::Unanswered(format!("HTTP {}: {reason}", status.as_u16())),
    }
}

/// The most characters of a gate's answer the status shows.
const GATE_REASON: usize = 80;
/// The most characters of a query API's error the status shows.
const QUERY_REASON: usize = 160;

/// The first line of what a server answered, at most `most` characters,
/// anything but printable text escaped: a reason for the status, never
/// the body itself (which may be a page of the server's, or anything the
/// address chose to answer).
fn short_reason(text: &str, most: usize) -> String {
    let line = text.trim().lines().next().unwrap_or_default().trim();
    let escaped: String = line.chars().flat_map(char::escape_debug).collect();
    match escaped.char_indices().nth(most) {
        None => escaped,
        Some((end, _)) => format!("{}…", &escaped[..end]),
    }
}

/// What a webhook gate is POSTed: the application, the revision, the gate,
/// and the pool or the wave it is about, with the pools.
pub fn gate_body(namespace: &str, name: &str, revision: &str, ask: &Ask) -> serde_json::Value {
    let wave = ask.pool.strip_prefix("wave:");
    let rollout = ask.pool == crate::reconcile::rollout::analysis::PRE_ROLLOUT_KEY;
    let kind = match (rollout, wave) {
        (true, _) => "PreRollout",
        (false, Some(_)) => "PreWave",
        (false, None) => "PreDone",
    };
    serde_json::json!({
        "application": { "namespace": namespace, "name": name },
        "revision": revision,
        "gate": ask.check,
        "type": kind,
        "wave": wave,
        "pool": if wave.is_some() || rollout { None } else { Some(&ask.pool) },
        "pools": ask.pools,
    })
}

/// A Secret of the application's namespace that a check reads, `field`
/// naming where the spec names it. A ServiceAccount's token is never
/// sent anywhere: a Secret of that type is refused.
async fn secret_of(client: &Client, namespace: &str, name: &str, field: &str) -> Result<Secret, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets.get(name).await.map_err(|e| match &e {
        kube::Error::Api(s) if s.code == 403 => format!(
            "the controller may not read Secret {namespace}/{name} ({field}): bind the ClusterRole \
             nodepool-fanout-check-secrets to its ServiceAccount in namespace {namespace}"
        ),
        _ => format!("reading Secret {namespace}/{name} ({field}): {e}"),
    })?;
    if secret.type_.as_deref() == Some("kubernetes.io/service-account-token") {
        return Err(format!(
            "Secret {namespace}/{name} ({field}) is a ServiceAccount's token, which is never sent to a check: \
             give a Secret of its own"
        ));
    }
    Ok(secret)
}

/// The Secret's `token`, or its `username` and `password`.
async fn auth_of(client: &Client, namespace: &str, name: &str) -> Result<Auth, String> {
    let field = "rollout.analysis.prometheus.secretRef";
    let data = secret_of(client, namespace, name, field).await?.data.unwrap_or_default();
    let text = |key: &str| data.get(key).map(|b| String::from_utf8_lossy(&b.0).trim().to_string());
    match (text("token"), text("username"), text("password")) {
        (Some(token), _, _) => Ok(Auth::Bearer(token)),
        (None, Some(user), Some(password)) => Ok(Auth::Basic(user, password)),
        _ => Err(format!(
            "Secret {namespace}/{name} ({field}) has neither a token key nor username and password keys"
        )),
    }
}

/// The Secret's `ca.crt`: PEM certificates to trust besides the system's.
async fn ca_of(client: &Client, namespace: &str, name: &str, field: &str) -> Result<Vec<u8>, String> {
    let data = secret_of(client, namespace, name, field).await?.data.unwrap_or_default();
    data.get("ca.crt")
        .map(|b| b.0.clone())
        .ok_or_else(|| format!("Secret {namespace}/{name} ({field}) has no ca.crt key"))
}

/// What an answer of the query API says: one number, no series, or why
/// there is no answer (an error the server gives, or an answer that is
/// not one number).
pub fn answer_of(status: u16, body: &[u8]) -> Answer {
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        return Answer::Unanswered(format!("HTTP {status}, not the query API's JSON"));
    };
    if json["status"] != "success" {
        let kind = short_reason(json["errorType"].as_str().unwrap_or("error"), 32);
        let error = short_reason(json["error"].as_str().unwrap_or("no error given"), QUERY_REASON);
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
mod tests;
