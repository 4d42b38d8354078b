//! The controller: watches NodePoolApplications, the HelmReleases they own
//! and the NodePools, and reconciles each application as observe → plan →
//! apply → status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt, TryStreamExt};
use kube::api::ListParams;
use kube::runtime::controller::Config as ControllerConfig;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, reflector, ObjectRef};
use kube::runtime::{watcher, Controller};
use kube::{Api, ResourceExt};
use tracing::{info, warn};

use crate::api::PoolKind;
use crate::chart::source::Sources;
use crate::reconcile::observe::{map_event, Shallow};
use crate::runtime::api_client;
use crate::runtime::backoff::Backoff;
use crate::runtime::metrics::Metrics;
use crate::runtime::notify::{self, Notifier};
use crate::runtime::options::RunArgs;
use crate::runtime::server::{self, Readyz};
use crate::runtime::throttle::{self, Wake};

use super::asking::Asking;
pub use super::context::StartError;
use super::context::*;
use super::index::AppIndex;
use super::leader::Leadership;
use super::pool_apis::PoolApis;
use super::reconciler::*;
use super::watches::*;
use super::woken::Cause;

pub async fn run(args: RunArgs) -> Result<(), StartError> {
    let events_addr = events_url(&args)?;
    let (metrics, readyz) = (Arc::new(Metrics::default()), Arc::new(Readyz::default()));
    server::serve(args.metrics_addr, metrics.clone(), readyz.clone()).await?;
    let client = connect(&args, metrics.clone()).await?;
    let pool_apis = PoolApis::discover(&client, args.watch_namespace.as_deref()).await;
    let apps = application_api(&client, &args).await?;
    let watches = Watches::new(&client, &args, pool_apis.served.iter().cloned());
    let notifier = events_addr.map(|url| Notifier::start(url, metrics.clone()));
    let unserved = pool_apis.unserved.clone();
    let (served, writer) = reflector::store();
    let index = Arc::new(AppIndex::new(metrics.clone(), served.clone()));
    let asker = crate::reconcile::apply::asks::Asker::new(args.check_allowed_hosts.clone());
    let (asking, answered) = Asking::new(asker, client.clone(), index.clone(), metrics.clone());
    let context = Arc::new(context(&client, &args, &watches, unserved, readyz, notifier, (index, asking)));
    metrics.watch_caches(context.caches.clone());
    let mut leadership = lead_when_elected(&client, &args, &context).await?;

    // Wakes from pools, nodes, releases and charts are throttled per
    // application below, not debounced here: kube's debounce restarts at
    // every trigger, so a steady trickle of release events would hold an
    // application's reconcile (and its resync) off until the trickle stops.
    // An application that leaves the store is forgotten there and then:
    // kube's controller runs no reconcile for it (see `AppIndex`).
    let index = context.index.clone();
    // Said here rather than waited for on the store: kube's controller
    // waits on it already, and its wait wakes only one task.
    let (listed, served_listed) = tokio::sync::watch::channel(false);
    let app_events =
        reflector(writer, watcher(apps, app_watch(&args)).map_ok(|e| map_event(e, |app| app.object)))
            .inspect_ok(move |event| {
                index.watched(event);
                if matches!(event, watcher::Event::InitDone) {
                    listed.send_replace(true);
                }
            });
    let index = context.index.clone();
    let app_changes = changed_apps(app_events).inspect_ok(move |app| {
        let cause = Cause::new("NodePoolApplication", app.metadata.namespace.as_deref(), &app.name_any());
        index.woken(&ObjectRef::from_obj(app), cause);
    });
    let controller = Controller::for_stream(app_changes, served.clone())
        .with_config(ControllerConfig::default().concurrency(args.concurrent));
    let wakes = watches.wakes(&client, (&served, served_listed), &context);
    // An application whose checks' answers came in is judged at once.
    let answered = futures::stream::unfold(answered, |mut answered| async move {
        answered.recv().await.map(|app| (Wake::urgent(app), answered))
    });
    let wakes = futures::stream::select(wakes, answered).boxed();
    let index = context.index.clone();
    let window = move |app: &ObjectRef<AppMeta>| index.wake_window(app);

    // Stopping: on SIGTERM or SIGINT, a lost Lease, or a kind of pool
    // installed after the start (the restart watches it).
    let appeared: Arc<std::sync::OnceLock<&'static str>> = Arc::default();
    let stop = futures::future::select(
        Box::pin(leadership.lost()),
        Box::pin(pool_apis.appearing(&client, appeared.clone())),
    )
    .map(drop);
    let stopped = stop_on(stop);
    let running = controller
        .reconcile_on(throttle::per_key(wakes, window))
        .graceful_shutdown_on(stop_requested(stopped.clone()))
        .run(reconcile, error_policy, context.clone())
        .for_each(|result| async move {
            match result {
                Ok((app, _)) => tracing::debug!(app = %app, "reconciled"),
                Err(e) => warn!(error = %e, "reconcile failed"),
            }
        });
    // Reconciles under way get SHUTDOWN_GRACE to finish; then the process
    // goes whatever they wait on (a cache that cannot list, an API server
    // that does not answer), well inside a pod's 30 s grace period.
    let overdue = stop_requested(stopped).then(|()| tokio::time::sleep(SHUTDOWN_GRACE));
    tokio::select! {
        () = running => info!("stopped"),
        () = overdue => warn!(grace = ?SHUTDOWN_GRACE, "reconciles under way did not finish in time; stopping anyway"),
    }
    leadership.release().await;
    if let Some(notifier) = &context.notifier {
        notifier.drain(NOTIFY_GRACE).await;
    }
    if let Some(crd) = appeared.get() {
        return Err(StartError::PoolApiAppeared(crd));
    }
    match leadership.was_lost() {
        true => Err(StartError::LostLeadership(args.leader_election_namespace.clone())),
        false => Ok(()),
    }
}

/// The API client, paced and counted (see [`api_client`]).
async fn connect(args: &RunArgs, metrics: Arc<Metrics>) -> Result<kube::Client, StartError> {
    let pace = api_client::Pace {
        qps: args.kube_api_qps,
        burst: args.kube_api_burst,
    };
    api_client::client(metrics, pace).await.map_err(|e| match e {
        api_client::ClientError::Pace(e) => StartError::Pace(e),
        api_client::ClientError::Kube(e) => StartError::Connect(e),
    })
}

/// Where to send notifications, when anywhere: an empty flag is none, as
/// for Flux's controllers.
fn events_url(args: &RunArgs) -> Result<Option<reqwest::Url>, StartError> {
    let Some(addr) = args.events_addr.as_deref().filter(|a| !a.trim().is_empty()) else {
        return Ok(None);
    };
    let url = notify::parse_address(addr.trim())?;
    info!(%url, "sending every Event to Flux's notification-controller too");
    Ok(Some(url))
}

/// The applications served: in the watched namespace or all, read field
/// by field (see `Shallow`), so that one application nested too deep to
/// read fails only its own reconcile, not every list. They are watched by
/// their metadata alone and read in full by each reconcile. A shard's
/// selector is checked by the API server itself here, before a watch
/// would retry it forever.
async fn application_api(client: &kube::Client, args: &RunArgs) -> Result<Api<Shallow<AppMeta>>, StartError> {
    let apps: Api<Shallow<AppMeta>> = match &args.watch_namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    if let Some(selector) = &args.watch_label_selector {
        apps.list_metadata(&ListParams::default().labels(selector).limit(1))
            .await
            .map_err(|source| StartError::WatchLabelSelector {
                selector: selector.clone(),
                source,
            })?;
        info!(%selector, "reconciling only the applications this selector matches");
    }
    Ok(apps)
}

/// The applications' watch: of this shard's, when it is one.
fn app_watch(args: &RunArgs) -> watcher::Config {
    let config = watcher::Config::default().any_semantic();
    match args.watch_label_selector.as_deref() {
        Some(selector) => config.labels(selector),
        None => config,
    }
}

/// What every reconcile shares.
fn context(
    client: &kube::Client,
    args: &RunArgs,
    watches: &Watches,
    unserved: BTreeMap<PoolKind, String>,
    readyz: Arc<Readyz>,
    notifier: Option<Notifier>,
    (index, asking): (Arc<AppIndex>, Asking),
) -> Context {
    let caches = watches.caches(unserved);
    let reporter = Reporter {
        controller: "nodepool-fanout".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ready = readiness(caches.clone(), watches.charts(), caches.nodes.clone(), readyz.clone());
    Context {
        client: client.clone(),
        caches,
        recorder: Recorder::new(client.clone(), reporter),
        notifier,
        resync: args.resync,
        shared_chart: args.shared_chart,
        no_cross_namespace_refs: args.no_cross_namespace_refs,
        rendering_changes: args.rendering_changes,
        sources: Sources::new(client.clone()),
        charts: watches.charts(),
        ready,
        readyz,
        metrics: index.metrics(),
        backoff: Backoff::default(),
        chart_backoff: Backoff::starting_at(CHART_HOLD_FIRST_RETRY),
        leading_since: std::sync::OnceLock::new(),
        index,
        asking,
        relist: Arc::default(),
        shard: args.watch_label_selector.clone(),
    }
}

/// Waits for the leadership when leader election is on. A standby says
/// so until it leads, and is ready meanwhile: it serves nothing until it
/// leads, and a rollout of the Deployment must not wait on it. The leader
/// is ready once its caches have listed (see `readiness`).
async fn lead_when_elected(
    client: &kube::Client,
    args: &RunArgs,
    context: &Context,
) -> Result<Leadership, StartError> {
    context.metrics.set_leader(!args.leader_election);
    let serving = |ready: bool| context.readyz.set(ready);
    serving(args.leader_election);
    let leadership = Leadership::take(client, args.leader_election, &args.leader_election_namespace).await?;
    serving(matches!(*context.ready.borrow(), Readiness::Ready));
    context.metrics.set_leader(true);
    let _ = context.leading_since.set(k8s_openapi::jiff::Timestamp::now());
    Ok(leadership)
}

/// Says when to stop: on SIGTERM or SIGINT, or when `stop` ends.
fn stop_on(
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> tokio::sync::watch::Receiver<bool> {
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        futures::future::select(Box::pin(signalled()), Box::pin(stop)).await;
        let _ = stopping.send(true);
    });
    stopped
}

async fn stop_requested(mut stopped: tokio::sync::watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await;
}

/// How long reconciles under way may take to finish once the controller
/// is told to stop.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How long the Events still queued for notification-controller may take
/// to go out once the controller stops: with SHUTDOWN_GRACE, well inside a
/// pod's 30 s grace period.
const NOTIFY_GRACE: Duration = Duration::from_secs(5);

/// SIGTERM (as the kubelet stops a pod) or SIGINT (Ctrl-C).
async fn signalled() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => info!("SIGTERM: stopping"),
                _ = tokio::signal::ctrl_c() => info!("SIGINT: stopping"),
            }
        }
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGTERM; stopping on SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn events() -> Vec<watcher::Event<u8>> {
        use watcher::Event::*;
        vec![
            Init,
            InitApply(1),
            InitDone,
            Apply(2),
            Delete(2),
            Init,
            InitApply(1),
            InitDone,
        ]
    }

    #[test]
    fn a_quiet_first_list_wakes_nothing_and_later_relists_do() {
        let mut first = FirstList::Quiet;
        let quiet: Vec<bool> = events().iter().map(|e| first.holds(e)).collect();
        assert_eq!(quiet, [true, true, true, false, false, false, false, false]);
    }

    #[test]
    fn the_wake_window_is_ten_reconciles_long_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(wake_window(None), ms(1000));
        assert_eq!(wake_window(Some(ms(5))), ms(1000));
        assert_eq!(wake_window(Some(ms(100))), ms(1000));
        assert_eq!(wake_window(Some(ms(1500))), ms(15_000));
        assert_eq!(wake_window(Some(ms(90_000))), ms(30_000));
    }

    #[test]
    fn a_first_list_that_counts_is_never_quiet() {
        let mut first = FirstList::Counts;
        assert!(events().iter().all(|e| !first.holds(e)));
    }
}
