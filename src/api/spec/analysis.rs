//! Health beyond Ready: the metric checks a pool must pass over its soak
//! before the rollout counts it done, asked of a Prometheus-compatible
//! query API with the pool's own numbers.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::schema::*;

/// Metric checks, asked of a Prometheus-compatible query API while each
/// updated pool soaks: a pool is done only once every check passed over
/// its soak (`minReadySeconds`, and at least one answer each), and a
/// check out of its bounds fails the pool for the revision (reason
/// `AnalysisFailed`), so the rollout halts or rolls back as for a failed
/// Helm upgrade. A query that cannot be answered (the server down, a
/// query it refuses) waits and says so, and fails the pool once it has
/// gone unanswered for `progressDeadline`: never does it pass one.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(
    cel,
    validation = Rule::new(
        "(has(self.checks) && size(self.checks) > 0) || (has(self.waveChecks) && size(self.waveChecks) > 0) \
         || (has(self.webhooks) && size(self.webhooks) > 0)"
    )
    .message("give checks (each pool's), waveChecks (each wave's), webhooks, or several"),
    validation = Rule::new(
        "has(self.prometheus) || ((!has(self.checks) || size(self.checks) == 0) \
         && (!has(self.waveChecks) || size(self.waveChecks) == 0))"
    )
    .message("checks and waveChecks are asked of a query API: give prometheus.address"),
)]
#[serde(rename_all = "camelCase")]
pub struct Analysis {
    /// The query API that `checks` and `waveChecks` are asked of; not
    /// needed for webhooks alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusSource>,

    /// Each pool's checks, asked while it soaks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new("self.all(c, self.exists_one(d, d.name == c.name))")
        .message("check names must be unique: a failure names its check"))]
    pub checks: Vec<MetricCheck>,

    /// Each wave's checks, asked once every pool of a wave is done and
    /// before the next wave starts: a fleet-level error budget. A failed
    /// wave check halts the rollout. In their queries `{{wave.name}}` is
    /// the step's name, or its position from one, and `{{wave.pools}}`
    /// is a regular expression of the wave's pools, such as `a|b|c`:
    /// `sum(rate(errors_total{site=~"{{wave.pools}}"}[5m]))`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(
        validation = Rule::new("self.all(c, self.exists_one(d, d.name == c.name))")
            .message("check names must be unique: a failure names its check"),
        validation = Rule::new("self.all(c, !has(c.by))")
            .message("a wave check answers for its whole wave: by is for each pool's checks"),
    )]
    pub wave_checks: Vec<MetricCheck>,

    /// Webhook gates, as Flagger's: an HTTP POST of the application, the
    /// revision, and the pool or the wave with its pools, asked every
    /// `interval`; a 2xx answer lets it go, anything else holds it (with
    /// the answer in the status), for as long as it answers so: a gate
    /// holds, it never fails a pool. For integration tests and
    /// change-management systems.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(validation = Rule::new("self.all(c, self.exists_one(d, d.name == c.name))")
        .message("webhook names must be unique: the status names the one that holds"))]
    pub webhooks: Vec<WebhookGate>,
}

/// One webhook gate.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebhookGate {
    /// What the status calls the gate, e.g. `change-freeze`.
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')").message(
        "a webhook's name is a DNS label that starts with a letter, such as change-freeze"
    ))]
    pub name: String,

    /// When it is asked: `PreRollout`, before a revision's first pool is
    /// written (a change freeze holds the canary too); `PreDone`, before
    /// each pool counts as done (at the end of its soak); or `PreWave`,
    /// before each wave after the first starts (once the wave before it
    /// is done).
    #[serde(rename = "type")]
    pub gate: GateType,

    /// Where the POST goes, e.g. `https://gate.ci/approve`. Redirects
    /// are not followed, and the controller's `--check-allowed-hosts`
    /// says which hosts it may name.
    #[schemars(length(min = 1, max = 2048))]
    #[x_kube(validation = Rule::new("self.matches('^https?://[^/?#[:space:]]+(/[^#[:space:]]*)?$')").message(
        "must be an http:// or https:// URL, e.g. https://gate.ci/approve"
    ))]
    pub url: String,

    /// A Secret in the application's namespace whose `ca.crt` key (PEM)
    /// is trusted for the gate's TLS certificate besides the system's
    /// roots, as Flux's `certSecretRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalSecretReference>,

    /// How often it is asked while it holds, e.g. `10s` (the default);
    /// at least a second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_schema")]
    pub interval: Option<String>,
}

/// When a webhook gate is asked.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateType {
    /// Before the revision's first pool is written.
    PreRollout,
    /// Before each pool counts as done with the revision.
    PreDone,
    /// Before each wave after the first starts.
    PreWave,
}

/// Where the checks are asked.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusSource {
    /// The query API's base URL, e.g. `http://prometheus.monitoring:9090`
    /// or `https://mimir.example.com/prometheus` (its `/api/v1/query` is
    /// asked). Prometheus, Thanos, Mimir and VictoriaMetrics all answer
    /// there. Redirects are not followed, and the controller's
    /// `--check-allowed-hosts` says which hosts it may name.
    #[schemars(length(min = 1, max = 2048))]
    #[x_kube(validation = Rule::new("self.matches('^https?://[^/?#[:space:]]+(/[^?#[:space:]]*)?$')").message(
        "must be an http:// or https:// URL, e.g. http://prometheus.monitoring:9090, with no query or fragment"
    ))]
    pub address: String,

    /// A Secret in the application's namespace whose `token` key is sent
    /// as a bearer token, or whose `username` and `password` keys are sent
    /// as basic auth. Secrets of other namespaces are never read, nor a
    /// ServiceAccount's token Secret; the controller reads a namespace's
    /// Secrets only where it is granted to (see docs/rollouts.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalSecretReference>,

    /// A Secret in the application's namespace whose `ca.crt` key (PEM)
    /// is trusted for the query API's TLS certificate besides the
    /// system's roots, as Flux's `certSecretRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalSecretReference>,
}

/// A Secret in the application's own namespace, by name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LocalSecretReference {
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(DNS1123_SUBDOMAIN_RULE).message("must be a Secret's name"))]
    pub name: String,
}

/// One check: a PromQL query, templated for each pool, whose value must
/// stay within `min` and `max`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(
    cel,
    validation = Rule::new("has(self.min) || has(self.max)")
        .message("give min, max or both: the bounds a pool's value must stay within"),
    validation = Rule::new("!has(self.min) || !has(self.max) || self.min <= self.max")
        .message("min must not be greater than max"),
    validation = Rule::new("!has(self.by) || (self.query.contains('{{pools}}') && !self.query.contains('{{pool.'))")
        .message("a check with by is asked once for many pools: its query names them with {{pools}}, and no one pool's {{pool.…}}"),
)]
#[serde(rename_all = "camelCase")]
pub struct MetricCheck {
    /// What a failure and the status call the check, e.g. `error-rate`.
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')").message(
        "a check's name is a DNS label that starts with a letter, such as error-rate"
    ))]
    pub name: String,

    /// The PromQL query, answering one number for the pool: a scalar, or
    /// an instant vector of one sample (aggregate it, e.g. with `sum`).
    /// `{{pool.name}}`, `{{pool.labels.<key>}}` and `{{revision}}` are
    /// replaced with the pool's name, its labels and the revision under
    /// way, e.g. `sum(rate(http_requests_total{site="{{pool.name}}",code=~"5.."}[1m]))`.
    #[schemars(length(min = 1, max = 4096))]
    pub query: String,

    /// Ask once for every pool due at the same time rather than once per
    /// pool: `{{pools}}` in the query is a regular expression of their
    /// names (such as `a|b|c`), and each pool's value is the series whose
    /// label `by` is the pool's name; a pool without its series has no
    /// data. At a thousand pools, one query where there were a thousand:
    /// `sum by (site) (rate(http_requests_total{site=~"{{pools}}",code=~"5.."}[1m]))`
    /// with `by: site`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(validation = Rule::new("self.matches('^[a-zA-Z_][a-zA-Z0-9_]*$')")
        .message("must be a Prometheus label name, such as site"))]
    pub by: Option<String>,

    /// The least value that passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,

    /// The greatest value that passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,

    /// How often the check is asked while a pool soaks, e.g. `30s` (the
    /// default); at least a second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_duration_schema")]
    pub interval: Option<String>,

    /// Answers out of bounds tolerated over one pool's soak before the
    /// pool fails. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub failure_limit: Option<u32>,

    /// What an empty answer (no series) means: `Fail` (the default: no
    /// data is not good news) or `Pass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_empty: Option<OnEmpty>,
}

/// What an empty answer to a check means.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnEmpty {
    /// The answer counts as out of bounds.
    #[default]
    Fail,
    /// The answer counts as within bounds.
    Pass,
}
