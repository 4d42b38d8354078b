//! Notifications through Flux's notification-controller: every Event the
//! controller records on an application is also POSTed to the event server
//! that `--events-addr` names, as Flux's own controllers send theirs
//! (`github.com/fluxcd/pkg/runtime/events`), so that a Flux `Alert` routes
//! it to Slack, Teams or a webhook.
//!
//! Sending never holds a reconcile up: Events wait in a bounded queue for
//! one background task, which sends them in order, retries connection
//! errors and 5xx answers a few times, and counts what became of each. A
//! full queue drops an Info before a Warning ([`queue`]).
//! What the event server keeps of an event is decided by the pure parts
//! here ([`FluxEvent::of`], [`metadata`], [`verdict`], [`retry_wait`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::reconcile::fleet::Transition;
use crate::runtime::metrics::Metrics;

mod queue;
use queue::Queue;

/// Who sends: notification-controller passes it on as the `Gotk-Component`
/// header of a generic webhook, and Slack shows it as the source.
pub const REPORTING_CONTROLLER: &str = "nodepool-fanout";

/// The prefix of our metadata keys. The event server keeps only keys
/// prefixed with the API group of the object the event is about (or
/// Flux's own `event.toolkit.fluxcd.io/`), and forwards them without it.
pub const METADATA_PREFIX: &str = "apps.fanout.dev/";

/// Events waiting to be sent, past which one is dropped for each new one
/// (logged and counted), an Info before a Warning: a few minutes of a busy
/// fleet's Events, held while notification-controller is slow or away.
pub const QUEUE_CAPACITY: usize = 1024;

/// One attempt's limit, as Flux's own sender's.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends after the first, for an answer that may change: no answer, or a 5xx.
pub const RETRIES: u32 = 3;

/// The event as notification-controller reads it: the JSON of
/// `github.com/fluxcd/pkg/apis/event/v1beta1.Event`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FluxEvent {
    /// The application, with its `apiVersion`: the event server reads the
    /// API group of the metadata keys it keeps from it.
    pub involved_object: ObjectReference,
    /// `info` or `error`.
    pub severity: &'static str,
    /// RFC 3339 in whole seconds, as Kubernetes writes a `metav1.Time`.
    pub timestamp: String,
    pub message: String,
    pub reason: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    pub reporting_controller: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reporting_instance: Option<String>,
}

impl FluxEvent {
    /// The event for one Event recorded on `object`, an application whose
    /// rollout is at `revision` (when it has one).
    pub fn of(
        object: &ObjectReference,
        happened: &Transition,
        revision: Option<&str>,
        at: Timestamp,
        instance: Option<&str>,
    ) -> Self {
        Self {
            involved_object: object.clone(),
            severity: severity(happened.warning),
            timestamp: timestamp(at),
            message: happened.message.clone(),
            reason: happened.reason.clone(),
            metadata: metadata(revision, happened.pool.as_deref(), happened.release.as_deref()),
            reporting_controller: REPORTING_CONTROLLER,
            reporting_instance: instance.map(str::to_string),
        }
    }

    /// Whether it is of a Warning Event (see [`severity`]).
    pub fn is_warning(&self) -> bool {
        self.severity == severity(true)
    }
}

/// A Warning Event is an `error` for Flux (what `eventSeverity: error`
/// Alerts forward), any other `info`, as Flux's own recorder maps them.
pub fn severity(warning: bool) -> &'static str {
    match warning {
        true => "error",
        false => "info",
    }
}

/// `at` as a `metav1.Time` is written: `2026-11-26T09:30:00Z`.
pub fn timestamp(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// What an event carries besides its message. `revision` is the one key
/// the event server forwards under its own meaning (the `revision` of
/// Flux's providers) and part of its deduplication key, so the same
/// message about two revisions is two notifications.
pub fn metadata(
    revision: Option<&str>,
    pool: Option<&str>,
    release: Option<&str>,
) -> BTreeMap<String, String> {
    [("revision", revision), ("pool", pool), ("helmrelease", release)]
        .into_iter()
        .filter_map(|(key, value)| Some((format!("{METADATA_PREFIX}{key}"), value?.to_string())))
        .collect()
}

/// What came back from one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Status(u16),
    /// No answer: the connection failed or the attempt timed out.
    Unreachable,
}

/// What became of one event; the `result` label of
/// `nodepool_fanout_notifications_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Delivered,
    /// The event server had the same event within its rate-limit window
    /// (5 min): a 429, which Flux's own sender does not retry either.
    Duplicate,
    /// A 4xx (or 501): sending it again would get the same answer.
    Refused,
    /// No success after every retry.
    Failed,
    /// The queue was full: never sent.
    Dropped,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Duplicate => "duplicate",
            Self::Refused => "refused",
            Self::Failed => "failed",
            Self::Dropped => "dropped",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Final(Outcome),
    /// Worth another attempt, if any is left.
    Retry,
}

/// What an answer means: what may succeed later (no answer, a 5xx) is
/// tried again, as Flux's sender (go-retryablehttp's policy) does.
pub fn verdict(answer: Answer) -> Verdict {
    match answer {
        Answer::Status(429) => Verdict::Final(Outcome::Duplicate),
        Answer::Status(200..=299) => Verdict::Final(Outcome::Delivered),
        Answer::Status(501) => Verdict::Final(Outcome::Refused),
        Answer::Status(500..) | Answer::Unreachable => Verdict::Retry,
        Answer::Status(_) => Verdict::Final(Outcome::Refused),
    }
}

/// The wait before retry `retry` (from 0): 1 s, 2 s, 4 s; `None` once
/// [`RETRIES`] are spent.
pub fn retry_wait(retry: u32) -> Option<Duration> {
    (retry < RETRIES).then(|| Duration::from_secs(1 << retry))
}

/// Refused addresses: the flag is checked when the controller starts.
#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error(
        "--events-addr {0:?} is not a URL; give notification-controller's event server, such as \
         http://notification-controller.flux-system.svc.cluster.local./"
    )]
    NotAUrl(String),
    #[error(
        "--events-addr {0:?} is not an http:// URL: notification-controller's event server speaks \
         plain HTTP (http://notification-controller.flux-system.svc.cluster.local./ in a Flux install)"
    )]
    NotHttp(String),
}

/// The event server's URL, from the flag.
pub fn parse_address(addr: &str) -> Result<reqwest::Url, AddressError> {
    let url = reqwest::Url::parse(addr).map_err(|_| AddressError::NotAUrl(addr.to_string()))?;
    match url.scheme() {
        "http" if url.host().is_some() => Ok(url),
        "http" => Err(AddressError::NotAUrl(addr.to_string())),
        _ => Err(AddressError::NotHttp(addr.to_string())),
    }
}

/// Sends Events to notification-controller in the background.
pub struct Notifier {
    waiting: Arc<Waiting>,
    worker: Mutex<Option<JoinHandle<()>>>,
    metrics: Arc<Metrics>,
    /// The pod's name, as Flux's controllers report their host name.
    instance: Option<String>,
}

/// What the sender and those who queue share.
struct Waiting {
    queue: Mutex<Queue>,
    /// Tells the sender an event was queued, or the queue closed.
    queued: Notify,
    /// Set by [`Notifier::drain`]: nothing more is queued, and the sender
    /// stops once the queue is empty.
    closed: AtomicBool,
}

impl Waiting {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // A panic elsewhere while holding the lock leaves a usable queue.
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Notifier {
    /// Starts the background task that sends to `url`.
    pub fn start(url: reqwest::Url, metrics: Arc<Metrics>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        let waiting = Arc::new(Waiting {
            queue: Mutex::new(Queue::with_capacity(QUEUE_CAPACITY)),
            queued: Notify::new(),
            closed: AtomicBool::new(false),
        });
        let worker = tokio::spawn(send_all(waiting.clone(), http, url, metrics.clone()));
        Self {
            waiting,
            worker: Mutex::new(Some(worker)),
            metrics,
            instance: instance_name(),
        }
    }

    /// Queues the event for one Event recorded on `object`; never waits.
    pub fn notify(&self, object: &ObjectReference, happened: &Transition, revision: Option<&str>) {
        if self.waiting.closed.load(Ordering::Acquire) {
            return;
        }
        let event = FluxEvent::of(object, happened, revision, Timestamp::now(), self.instance.as_deref());
        let dropped = self.waiting.lock().push(event);
        self.waiting.queued.notify_one();
        if let Some(event) = dropped {
            warn!(
                reason = %event.reason,
                severity = event.severity,
                capacity = QUEUE_CAPACITY,
                "notification dropped: the queue to notification-controller is full, which is slow or \
                 unreachable (see the earlier warnings)"
            );
            self.metrics.observe_notification(Outcome::Dropped.label(), event.severity);
        }
    }

    /// Sends what is queued, for up to `grace`, and stops: the last Events
    /// before a shutdown (a halt, say) still go out.
    pub async fn drain(&self, grace: Duration) {
        self.waiting.closed.store(true, Ordering::Release);
        self.waiting.queued.notify_one();
        let worker = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut worker) = worker {
            if tokio::time::timeout(grace, &mut worker).await.is_err() {
                warn!(?grace, "notifications still queued at shutdown were not sent");
                worker.abort();
            }
        }
    }
}

/// The pod's name (`POD_NAME`), else the host's, as Flux reports
/// `reportingInstance`.
fn instance_name() -> Option<String> {
    let from_env = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    from_env("POD_NAME").or_else(|| from_env("HOSTNAME")).or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
        Some(host.trim().to_string()).filter(|h| !h.is_empty())
    })
}

/// Sends the queued events in order until the queue is closed and empty.
async fn send_all(waiting: Arc<Waiting>, http: reqwest::Client, url: reqwest::Url, metrics: Arc<Metrics>) {
    loop {
        // Taken in its own statement: the lock is not held across a send.
        let next = waiting.lock().pop();
        match next {
            Some(event) => {
                let outcome = deliver(&http, &url, &event).await;
                metrics.observe_notification(outcome.label(), event.severity);
            }
            None if waiting.closed.load(Ordering::Acquire) => return,
            // A notification that came since the queue was looked at left
            // a permit: this returns at once.
            None => waiting.queued.notified().await,
        }
    }
}

/// Sends one event, retrying as [`verdict`] and [`retry_wait`] say.
async fn deliver(http: &reqwest::Client, url: &reqwest::Url, event: &FluxEvent) -> Outcome {
    let body = match serde_json::to_vec(event) {
        Ok(body) => body,
        Err(e) => {
            warn!(error = %e, reason = %event.reason, "cannot encode a notification");
            return Outcome::Refused;
        }
    };
    let mut retry = 0;
    loop {
        let attempt = http
            .post(url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send()
            .await;
        let (answer, detail) = match attempt {
            Ok(response) => (Answer::Status(response.status().as_u16()), response.status().to_string()),
            Err(e) => (Answer::Unreachable, with_causes(&e)),
        };
        let outcome = match (verdict(answer), retry_wait(retry)) {
            (Verdict::Final(outcome), _) => outcome,
            (Verdict::Retry, Some(wait)) => {
                debug!(%url, %detail, ?wait, "notification not delivered; trying again");
                tokio::time::sleep(wait).await;
                retry += 1;
                continue;
            }
            (Verdict::Retry, None) => Outcome::Failed,
        };
        log_outcome(outcome, url, event, &detail, retry + 1);
        return outcome;
    }
}

fn log_outcome(outcome: Outcome, url: &reqwest::Url, event: &FluxEvent, detail: &str, attempts: u32) {
    let reason = &event.reason;
    match outcome {
        Outcome::Delivered => debug!(%reason, "notification delivered"),
        Outcome::Duplicate => debug!(%reason, "notification-controller had this event already (429)"),
        Outcome::Refused => warn!(
            %url, %reason, answer = %detail,
            "notification-controller refused the event; it is not sent again"
        ),
        Outcome::Failed => warn!(
            %url, %reason, attempts, error = %detail,
            "cannot deliver a notification: is notification-controller running, and does \
             --events-addr name its event server?"
        ),
        // Never sent, and said so when it was dropped.
        Outcome::Dropped => {}
    }
}

/// An error and its causes, `outer: inner: …`: reqwest's own message
/// leaves out why the connection failed.
pub(crate) fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests;
