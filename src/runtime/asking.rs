//! The metric checks and webhook gates asked away from the reconcile:
//! one tenant's checks must never stall another's rollout. A query may
//! take its whole timeout (a webhook at an address that drops packets),
//! and asked inside the reconcile four such applications held every
//! worker while another tenant's rollback waited (fourth review, item 6).
//! So a reconcile only hands its plan's due asks here and ends; a task
//! asks them, keeps the answers for the application, and wakes it, and
//! the next plan judges them.
//!
//! Each application has at most one round in flight (its share: a round
//! asks at most a few queries at once, see `apply::asks`), and at most
//! [`ROUNDS`] rounds run at once across applications, waiting their turn
//! in order.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use tokio::sync::{mpsc, Semaphore};

use super::context::AppMeta;
use super::index::AppIndex;
use super::metrics::Metrics;
use crate::api::NodePoolApplication;
use crate::reconcile::apply::asks::Asker;
use crate::reconcile::rollout::analysis::Analysing;

/// Rounds of asks in flight at once, across applications.
pub(super) const ROUNDS: usize = 32;

/// Asks rounds of checks in tasks of their own.
#[derive(Clone)]
pub(super) struct Asking {
    inner: Arc<Inner>,
}

struct Inner {
    asker: Asker,
    client: kube::Client,
    index: Arc<AppIndex>,
    metrics: Arc<Metrics>,
    /// The applications with a round in flight, by namespace and name.
    in_flight: Mutex<HashSet<(String, String)>>,
    rounds: Arc<Semaphore>,
    /// Each application whose answers came in, to be reconciled.
    answered: mpsc::UnboundedSender<ObjectRef<AppMeta>>,
}

impl Asking {
    /// An asker of rounds, and the applications whose answers came in.
    pub(super) fn new(
        asker: Asker,
        client: kube::Client,
        index: Arc<AppIndex>,
        metrics: Arc<Metrics>,
    ) -> (Self, mpsc::UnboundedReceiver<ObjectRef<AppMeta>>) {
        let (answered, woken) = mpsc::unbounded_channel();
        let inner = Inner {
            asker,
            client,
            index,
            metrics,
            in_flight: Mutex::default(),
            rounds: Arc::new(Semaphore::new(ROUNDS)),
            answered,
        };
        (
            Self {
                inner: Arc::new(inner),
            },
            woken,
        )
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<(String, String)>> {
        self.inner.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl crate::reconcile::Asking for Asking {
    fn ask(&self, app: &NodePoolApplication, analysing: Analysing) -> bool {
        let uid = app.metadata.uid.clone().unwrap_or_default();
        self.start((app.namespace().unwrap_or_default(), app.name_any(), uid), analysing)
    }
}

impl Asking {
    /// Starts a round for the application of `namespace`, `name` and
    /// `uid`, unless one is in flight: whether one is now.
    fn start(&self, (namespace, name, uid): (String, String, String), analysing: Analysing) -> bool {
        if analysing.asks.is_empty() {
            return false;
        }
        let key = (namespace.clone(), name.clone());
        if !self.in_flight().insert(key.clone()) {
            // Its round in flight brings answers soon, and wakes it then.
            return true;
        }
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            // A closed semaphore is never: it lives as long as the asker.
            let permit = Arc::clone(&inner.rounds).acquire_owned().await.ok();
            let at = k8s_openapi::jiff::Timestamp::now();
            let answered = inner.asker.ask(&inner.client, (&namespace, &name), &analysing, at).await;
            drop(permit);
            inner.metrics.observe_answers(&namespace, &name, &analysing.results(&answered));
            let app_ref = ObjectRef::<AppMeta>::new(&name).within(&namespace);
            let records = inner
                .index
                .take_answers(&app_ref, &uid)
                .map(Arc::unwrap_or_clone)
                .unwrap_or_default();
            inner.index.keep_answers(&app_ref, &uid, analysing.fold(records, answered, at));
            inner
                .in_flight
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&key);
            // The controller is stopping when no one listens: nothing to wake.
            let _ = inner.answered.send(app_ref);
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use k8s_openapi::jiff::Timestamp;
    use kube::runtime::{reflector, watcher};

    use super::*;
    use crate::reconcile::rollout::analysis::{Answer, Ask, Check, Webhook};

    /// A gate that holds each POST until the test lets it answer 200.
    async fn held_gate() -> (String, Arc<AtomicUsize>, tokio::sync::watch::Sender<bool>) {
        let posted = Arc::new(AtomicUsize::new(0));
        let (answer, answering) = tokio::sync::watch::channel(false);
        let seen = posted.clone();
        let router = axum::Router::new().route(
            "/gate",
            axum::routing::post(move || {
                let (seen, mut answering) = (seen.clone(), answering.clone());
                async move {
                    seen.fetch_add(1, Ordering::SeqCst);
                    answering.wait_for(|go| *go).await.expect("the test lets it answer");
                    "go"
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}/gate", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, router).await.expect("serves") });
        (url, posted, answer)
    }

    fn analysing(url: &str) -> Analysing {
        let webhook = Webhook {
            url: url.to_string(),
            cert_secret: None,
        };
        let gate = Check {
            name: "change-freeze".into(),
            query: String::new(),
            min: None,
            max: None,
            interval: Duration::from_secs(10),
            failure_limit: u32::MAX,
            pass_on_empty: false,
            webhook: Some(webhook.clone()),
            by: None,
        };
        Analysing {
            source: None,
            checks: vec![gate],
            wave_checks: Vec::new(),
            pre_rollout: Vec::new(),
            revision: "r1".into(),
            asks: vec![Ask {
                pool: "east".into(),
                check: "change-freeze".into(),
                query: String::new(),
                webhook: Some(webhook),
                by: None,
                pools: vec!["east".into()],
                ready_since: Timestamp::UNIX_EPOCH,
            }],
            judged: true,
            kept: Vec::new(),
        }
    }

    async fn eventually(what: &str, done: impl Fn() -> bool) {
        for _ in 0..500 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{what} did not happen");
    }

    /// The reconcile hands its asks over and ends while the gate has not
    /// answered; a second reconcile meanwhile starts no second round; the
    /// answer is kept for the application, which is woken for it.
    #[tokio::test]
    async fn a_round_is_asked_away_from_the_reconcile_once_at_a_time_and_its_answer_wakes_the_application() {
        let (url, posted, answer) = held_gate().await;
        let (store, mut writer) = reflector::store::<AppMeta>();
        let meta: AppMeta = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "gw", "namespace": "edge", "uid": "uid-gw" }
        }))
        .expect("metadata");
        writer.apply_watcher_event(&watcher::Event::Apply(meta));
        let index = Arc::new(AppIndex::new(Arc::default(), store));
        let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().expect("a URI")))
            .expect("a client no gate uses");
        let (asking, mut woken) = Asking::new(Asker::default(), client, index.clone(), Arc::default());
        let app = || ("edge".to_string(), "gw".to_string(), "uid-gw".to_string());

        assert!(asking.start(app(), analysing(&url)), "a round is in flight");
        eventually("the gate to be posted", || posted.load(Ordering::SeqCst) == 1).await;
        assert!(asking.start(app(), analysing(&url)), "its round is still in flight");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(posted.load(Ordering::SeqCst), 1, "no second round while one is in flight");
        let app_ref = ObjectRef::<AppMeta>::new("gw").within("edge");
        assert!(index.answers(&app_ref, "uid-gw").is_none(), "no answer before the gate's");

        answer.send_replace(true);
        let woke = tokio::time::timeout(Duration::from_secs(5), woken.recv())
            .await
            .expect("woken in time");
        assert_eq!(woke, Some(app_ref.clone()));
        let records = index.answers(&app_ref, "uid-gw").expect("the answer is kept");
        let last = records["east"].checks.get("change-freeze").and_then(|r| r.last.clone());
        assert!(matches!(last, Some((_, Answer::Value(v))) if v == 200.0), "{last:?}");
        // The round over, the next reconcile's asks start one afresh.
        assert!(asking.start(app(), analysing(&url)));
        eventually("a second round", || posted.load(Ordering::SeqCst) == 2).await;
    }
}
