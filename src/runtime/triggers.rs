//! Which applications a watch event concerns: one function per watch, each
//! turning the watch's events into a stream of the applications to wake,
//! as kube-runtime's `trigger_owners` does. Only applications this
//! instance serves are woken, and a watch's first list wakes nothing (see
//! [`FirstList`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use k8s_openapi::api::core::v1::Node;

use super::changes::{Change, NodeChanges, NodeView, PoolChanges};
use crate::api::PoolKind;
use crate::chart::shared as shared_chart;
use crate::pools::Pool;
use crate::reconcile::observe::{self, CachedPool, CachedRelease};
use crate::reconcile::release::state::ReleaseState;

use super::context::AppMeta;
use super::index::{AppIndex, Interest};
use super::throttle::Wake;
use super::watches::{release_fingerprint, retrying, FirstList};
use super::woken::Cause;

/// The applications to wake, one reference per wake.
pub(super) type Wakes = BoxStream<'static, ObjectRef<AppMeta>>;

/// A release's change wakes the application that owns it, if this
/// instance serves it; others' releases are only remembered (by the
/// reflector the events come through).
///
/// While an application's rollout holds changes back for slots or a wave
/// that its releases under way free, their verdicts (a release turning
/// Ready or failing, or going) are counted, and once there are as many as
/// its last plan said are worth it ([`AppIndex::verdict`]) the wake is
/// urgent: the rollout moves on within about half a second rather than
/// sit out a wake window that exists to shed load. Every other change is
/// folded: helm-controller stamping thousands of releases Ready after an
/// `AllAtOnce` change is one reconcile a window, as before, and so are
/// the controller's own writes coming back.
pub(super) fn releases<S>(
    events: S,
    served: Store<AppMeta>,
    index: Arc<AppIndex>,
) -> BoxStream<'static, Wake<ObjectRef<AppMeta>>>
where
    S: Stream<Item = Result<watcher::Event<CachedRelease>, watcher::Error>> + Send + 'static,
{
    // Each release's fingerprint and state as last seen.
    let mut seen: HashMap<ObjectRef<CachedRelease>, (u64, Option<ReleaseState>)> = HashMap::new();
    let mut first_list = FirstList::Quiet;
    retrying("HelmReleases", events)
        .filter_map(move |event| {
            let quiet = first_list.holds(&event);
            let (release, gone) = match event {
                watcher::Event::Apply(r) | watcher::Event::InitApply(r) => (r, false),
                watcher::Event::Delete(r) => (r, true),
                watcher::Event::Init | watcher::Event::InitDone => return std::future::ready(None),
            };
            // By name alone: `from_obj` would keep a copy of the resource
            // version and uid in each of ten thousand keys.
            let key = ObjectRef::<CachedRelease>::new(release.metadata.name.as_deref().unwrap_or_default())
                .within(release.metadata.namespace.as_deref().unwrap_or_default());
            let (changed, verdict) = match gone {
                true => {
                    let was = seen.remove(&key);
                    (true, was.is_some_and(|(_, state)| state.is_some()))
                }
                false => {
                    let now =
                        (release_fingerprint(&release), release.observed.as_ref().map(|o| o.status.state));
                    let was = seen.insert(key, now);
                    let changed = was.map(|(print, _)| print) != Some(now.0);
                    let reached = matches!(
                        now.1,
                        Some(ReleaseState::Ready | ReleaseState::Failed | ReleaseState::Stalled)
                    );
                    // A release new to the watch is one just written: no verdict yet.
                    let verdict = reached && was.is_some_and(|(_, state)| state != now.1);
                    (changed, verdict)
                }
            };
            if !changed || quiet {
                return std::future::ready(None);
            }
            let namespace = release.metadata.namespace.clone().unwrap_or_default();
            let name = release.metadata.name.clone().unwrap_or_default();
            let cause = || Cause::new("HelmRelease", Some(&namespace), &name);
            let Some(owner) = observe::owner_of::<AppMeta>(&release) else {
                // Someone else's release going gives its name back to the
                // application whose release it kept out.
                let freed = (gone.then(|| index.waiting_for_name(&namespace, &name)))
                    .flatten()
                    .filter(|app| served.get(app).is_some());
                freed.iter().for_each(|app| index.woken(app, cause()));
                return std::future::ready(freed.map(Wake::urgent));
            };
            let wake = Some(owner).filter(|app| served.get(app).is_some()).map(|app| {
                index.woken(&app, cause());
                match verdict && index.verdict(&app) {
                    true => Wake::urgent(app),
                    false => Wake::folded(app),
                }
            });
            std::future::ready(wake)
        })
        .boxed()
}

/// A pool event wakes only the applications of its kind whose selection
/// the pool enters, leaves or is in, and only when its name, labels or
/// annotations changed or it came or went: not status churn.
pub(super) fn pools<S>(
    kind: PoolKind,
    what: &'static str,
    events: S,
    mut changes: PoolChanges,
    served: Store<AppMeta>,
    index: Arc<AppIndex>,
) -> Wakes
where
    S: Stream<Item = Result<watcher::Event<CachedPool>, watcher::Error>> + Send + 'static,
{
    let mut first_list = FirstList::Quiet;
    retrying(what, events)
        .flat_map(move |event| {
            let quiet = first_list.holds(&event);
            let cause = match &event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) | watcher::Event::Delete(p) => {
                    Some(Cause::new(what, p.pool.namespace.as_deref(), &p.pool.name))
                }
                watcher::Event::Init | watcher::Event::InitDone => None,
            };
            let changed = changes.observe(event);
            let apps = match quiet {
                true => Vec::new(),
                false => index.concerned(&served, |i| {
                    i.kind == kind
                        && changed.iter().any(|c| c.within(&i.namespace) && c.concerns(&i.selection))
                }),
            };
            woke(&index, &apps, cause);
            futures::stream::iter(apps)
        })
        .boxed()
}

/// A shared chart's artifact turning ready lets its application's
/// releases be written at once rather than at the next poll. Charts are
/// watched in every namespace, whatever their shard label (see
/// [`crate::runtime::controller`]): only applications this instance serves
/// are woken.
pub(super) fn shared_charts<S>(
    (what, kind): (&'static str, &'static str),
    events: S,
    served: Store<AppMeta>,
    index: Arc<AppIndex>,
) -> Wakes
where
    S: Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>> + Send + 'static,
{
    let mut first_list = FirstList::Quiet;
    retrying(what, events)
        .filter_map(move |event| {
            let woken = match first_list.holds(&event) {
                true => None,
                false => match event {
                    watcher::Event::Apply(chart)
                    | watcher::Event::InitApply(chart)
                    | watcher::Event::Delete(chart) => shared_chart::owner_of::<AppMeta>(&chart).map(|app| {
                        let name = chart.metadata.name.as_deref().unwrap_or_default();
                        (app, Cause::new(kind, chart.metadata.namespace.as_deref(), name))
                    }),
                    watcher::Event::Init | watcher::Event::InitDone => None,
                },
            };
            let app = woken.filter(|(app, _)| served.get(app).is_some()).map(|(app, cause)| {
                index.woken(&app, cause);
                app
            });
            std::future::ready(app)
        })
        .boxed()
}

/// A user's OCIRepository resolving a new revision (a tag pushed, a semver
/// range moving on) is a change to roll out now, not at the next resync:
/// it wakes the applications whose chartRef names it.
pub(super) fn chart_sources<S>(events: S, served: Store<AppMeta>, index: Arc<AppIndex>) -> Wakes
where
    S: Stream<Item = Result<watcher::Event<PartialObjectMeta<DynamicObject>>, watcher::Error>>
        + Send
        + 'static,
{
    let mut first_list = FirstList::Quiet;
    retrying("OCIRepositories (sources)", events)
        .flat_map(move |event| {
            let quiet = first_list.holds(&event);
            let source = match (quiet, &event) {
                (false, watcher::Event::Apply(o) | watcher::Event::Delete(o)) => {
                    o.metadata.namespace.clone().zip(o.metadata.name.clone())
                }
                _ => None,
            };
            let apps = match &source {
                None => Vec::new(),
                Some(source) => index.known_concerned(&served, |i| i.chart_source.as_ref() == Some(source)),
            };
            let cause = source.map(|(namespace, name)| Cause::new("OCIRepository", Some(&namespace), &name));
            woke(&index, &apps, cause);
            futures::stream::iter(apps)
        })
        .boxed()
}

/// A node joining, leaving or going offline changes what the applications
/// selecting its pool may write. Heartbeats rewrite a Node's status all
/// the time; only its labels and readiness matter here, so only a change
/// of those wakes anything, and only the applications that select the
/// pool it leaves or joins.
pub(super) fn nodes<S>(
    events: S,
    mut changes: NodeChanges,
    served: Store<AppMeta>,
    index: Arc<AppIndex>,
    pools: std::collections::BTreeMap<PoolKind, observe::PoolCache>,
) -> Wakes
where
    S: Stream<Item = Result<watcher::Event<Node>, watcher::Error>> + Send + 'static,
{
    let mut first_list = FirstList::Quiet;
    retrying("Nodes", events)
        .flat_map(move |event| {
            let quiet = first_list.holds(&event);
            let cause = match &event {
                watcher::Event::Apply(n) | watcher::Event::InitApply(n) | watcher::Event::Delete(n) => {
                    n.metadata.name.as_deref().map(|name| Cause::new("Node", None, name))
                }
                watcher::Event::Init | watcher::Event::InitDone => None,
            };
            let changed = changes.observe(event);
            let apps = match quiet || changed.is_empty() {
                true => Vec::new(),
                false => {
                    index.concerned(&served, |interest| node_change_concerns(interest, &changed, &pools))
                }
            };
            woke(&index, &apps, cause);
            futures::stream::iter(apps)
        })
        .boxed()
}

/// `apps` are woken by the event `cause` names.
fn woke(index: &AppIndex, apps: &[ObjectRef<AppMeta>], cause: Option<Cause>) {
    if let Some(cause) = cause {
        apps.iter().for_each(|app| index.woken(app, cause.clone()));
    }
}

/// Whether nodes changing as `changed` says concern an application.
fn node_change_concerns(
    interest: &Interest,
    changed: &[Change<NodeView>],
    pools: &std::collections::BTreeMap<PoolKind, observe::PoolCache>,
) -> bool {
    let pool = |name: &str| match pools.get(&interest.kind) {
        Some(pools) => pools.get(name).map(|p| p.pool.clone()),
        // A node label's value: a pool as soon as one node carries it;
        // its labels are not known here, so a selector takes it as
        // matching.
        None if interest.kind == PoolKind::NodeLabel => Some(Pool::named(name)),
        None => None,
    };
    match interest.kind {
        PoolKind::NodeLabel if interest.selection.selector.is_some() => {
            changed.iter().any(|c| !c.pools(&interest.membership).is_empty())
        }
        _ => changed.iter().any(|c| c.concerns(&interest.membership, &interest.selection, pool)),
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use kube::runtime::reflector;
    use serde_json::json;

    use super::*;
    use crate::api::PoolSelection;
    use crate::pools::nodes::Membership;

    /// The release `gw-hz` of the application edge/gw at `generation`,
    /// with Flux's Ready condition `ready` for it.
    fn release(generation: i64, ready: &str) -> CachedRelease {
        let reason = match ready {
            "True" => "UpgradeSucceeded",
            "False" => "UpgradeFailed",
            _ => "Progressing",
        };
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {
                "name": "gw-hz", "namespace": "edge", "generation": generation,
                "ownerReferences": [{ "apiVersion": "apps.fanout.dev/v1alpha1",
                    "kind": "NodePoolApplication", "name": "gw", "uid": "u1", "controller": true }],
                "labels": { "apps.fanout.dev/pool": "hz" }
            },
            "spec": { "interval": "10m", "values": { "replicas": generation } },
            "status": {
                "observedGeneration": generation,
                "conditions": [{ "type": "Ready", "status": ready, "reason": reason,
                                 "observedGeneration": generation, "message": "" }]
            }
        }))
        .unwrap();
        let cached = CachedRelease::from_object(object);
        assert!(cached.observed.is_some(), "read as a release of gw");
        cached
    }

    /// The application edge/gw, served and read: its reference, the store
    /// of served applications, and the index that knows it.
    fn served_gw() -> (ObjectRef<AppMeta>, Store<AppMeta>, Arc<AppIndex>) {
        let app: AppMeta = serde_json::from_value(json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "gw", "namespace": "edge", "uid": "u1" }
        }))
        .unwrap();
        let app_ref = ObjectRef::from_obj(&app);
        let (served, mut writer) = reflector::store::<AppMeta>();
        writer.apply_watcher_event(&watcher::Event::Apply(app));
        let index = Arc::new(AppIndex::new(Arc::default(), served.clone()));
        let interest = Interest {
            kind: PoolKind::OpenYurt,
            namespace: "edge".into(),
            selection: PoolSelection::default(),
            membership: Membership::Label("pool".into()),
            chart_source: None,
        };
        index.read(app_ref.clone(), interest);
        (app_ref, served, index)
    }

    #[tokio::test]
    async fn release_verdicts_are_urgent_once_enough_while_a_rollout_waits_on_them() {
        let (app_ref, served, index) = served_gw();

        let (events, rx) = futures::channel::mpsc::unbounded();
        let mut wakes = releases(rx.map(Ok), served, index.clone());
        let mut send = |event: watcher::Event<CachedRelease>| {
            events.unbounded_send(event).unwrap();
            wakes.next().now_or_never().flatten()
        };
        let folded = Some(Wake::folded(app_ref.clone()));
        let urgent = Some(Wake::urgent(app_ref.clone()));

        assert_eq!(send(watcher::Event::Init), None);
        assert_eq!(send(watcher::Event::InitApply(release(1, "Unknown"))), None, "the first list is quiet");
        assert_eq!(send(watcher::Event::InitDone), None);
        // AllAtOnce, or nothing held back: folded.
        assert_eq!(send(watcher::Event::Apply(release(1, "True"))), folded, "Ready, no rollout waiting");
        let woken = index.take_woken(&app_ref);
        assert_eq!(woken.causes(), vec!["HelmRelease"], "the wake names its cause");
        assert_eq!(woken.to_string(), "HelmRelease edge/gw-hz");
        index.planned(&app_ref, Some(1));
        assert_eq!(send(watcher::Event::Apply(release(1, "True"))), None, "nothing changed");
        assert_eq!(send(watcher::Event::Apply(release(2, "Unknown"))), folded, "our write: no verdict");
        assert_eq!(send(watcher::Event::Apply(release(2, "True"))), urgent, "Ready: a slot frees");
        assert_eq!(send(watcher::Event::Apply(release(3, "True"))), folded, "changed, but still Ready");
        assert_eq!(send(watcher::Event::Apply(release(4, "False"))), urgent, "failed: a verdict too");
        assert_eq!(send(watcher::Event::Delete(release(4, "False"))), urgent, "gone: a slot frees");
        // Three verdicts make a look worth taking: the third is urgent.
        index.planned(&app_ref, Some(3));
        for (generation, ready) in [(5, "Unknown"), (5, "True"), (6, "Unknown"), (6, "True")] {
            assert_eq!(
                send(watcher::Event::Apply(release(generation, ready))),
                folded,
                "{generation} {ready}"
            );
        }
        assert_eq!(send(watcher::Event::Apply(release(7, "False"))), urgent, "the third verdict");
        index.planned(&app_ref, None);
        assert_eq!(send(watcher::Event::Apply(release(8, "True"))), folded, "the rollout waits no more");
    }

    #[tokio::test]
    async fn someone_elses_release_going_wakes_the_application_whose_name_it_held() {
        let (app_ref, served, index) = served_gw();
        let theirs = |name: &str, namespace: &str| {
            let object: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": { "name": name, "namespace": namespace },
                "spec": { "interval": "1h", "suspend": true }
            }))
            .unwrap();
            CachedRelease::from_object(object)
        };
        let (events, rx) = futures::channel::mpsc::unbounded();
        let mut wakes = releases(rx.map(Ok), served, index.clone());
        let mut send = |event: watcher::Event<CachedRelease>| {
            events.unbounded_send(event).unwrap();
            wakes.next().now_or_never().flatten()
        };
        assert_eq!(send(watcher::Event::Init), None);
        assert_eq!(send(watcher::Event::InitDone), None);
        assert_eq!(send(watcher::Event::Apply(theirs("gw-hz", "edge"))), None, "nobody waits yet");
        index.names_taken(&app_ref, vec!["gw-hz".into()]);
        assert_eq!(send(watcher::Event::Apply(theirs("gw-sh", "edge"))), None, "another name");
        assert_eq!(send(watcher::Event::Delete(theirs("gw-hz", "west"))), None, "another namespace");
        assert_eq!(send(watcher::Event::Apply(theirs("gw-hz", "edge"))), None, "still held");
        assert_eq!(
            send(watcher::Event::Delete(theirs("gw-hz", "edge"))),
            Some(Wake::urgent(app_ref.clone())),
            "given back: gw writes its release now"
        );
    }
}
