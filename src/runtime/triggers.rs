//! Which applications a watch event concerns: one function per watch, each
//! turning the watch's events into a stream of the applications to wake,
//! as kube-runtime's `trigger_owners` does. Only applications this
//! instance serves are woken, and a watch's first list wakes nothing (see
//! [`FirstList`]).

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::api::{DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use k8s_openapi::api::core::v1::Node;

use crate::api::PoolKind;
use crate::chart::shared as shared_chart;
use crate::pools::Pool;
use crate::reconcile::changes::{Change, NodeChanges, NodeView, PoolChanges};
use crate::reconcile::observe::{self, CachedPool, CachedRelease};

use super::context::AppMeta;
use super::index::{AppIndex, Interest};
use super::watches::{changed, release_fingerprint, retrying, FirstList};

/// The applications to wake, one reference per wake.
pub(super) type Wakes = BoxStream<'static, ObjectRef<AppMeta>>;

/// A release's change wakes the application that owns it, if this
/// instance serves it; others' releases are only remembered (by the
/// reflector the events come through).
pub(super) fn releases<S>(events: S, served: Store<AppMeta>) -> Wakes
where
    S: Stream<Item = Result<watcher::Event<CachedRelease>, watcher::Error>> + Send + 'static,
{
    changed("HelmReleases", events, release_fingerprint, FirstList::Quiet)
        .filter_map(move |release| {
            let app = observe::owner_of::<AppMeta>(&release).filter(|app| served.get(app).is_some());
            std::future::ready(app)
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
            let changed = changes.observe(event);
            let apps = match quiet {
                true => Vec::new(),
                false => index.concerned(&served, |i| {
                    i.kind == kind
                        && changed.iter().any(|c| c.within(&i.namespace) && c.concerns(&i.selection))
                }),
            };
            futures::stream::iter(apps)
        })
        .boxed()
}

/// A shared chart's artifact turning ready lets its application's
/// releases be written at once rather than at the next poll. Charts are
/// watched in every namespace, whatever their shard label (see
/// [`crate::runtime::controller`]): only applications this instance serves
/// are woken.
pub(super) fn shared_charts<S>(what: &'static str, events: S, served: Store<AppMeta>) -> Wakes
where
    S: Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>> + Send + 'static,
{
    let mut first_list = FirstList::Quiet;
    retrying(what, events)
        .filter_map(move |event| {
            let app = match first_list.holds(&event) {
                true => None,
                false => match event {
                    watcher::Event::Apply(chart)
                    | watcher::Event::InitApply(chart)
                    | watcher::Event::Delete(chart) => shared_chart::owner_of::<AppMeta>(&chart),
                    watcher::Event::Init | watcher::Event::InitDone => None,
                },
            };
            std::future::ready(app.filter(|app| served.get(app).is_some()))
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
            let apps = match source {
                None => Vec::new(),
                Some(source) => index.known_concerned(&served, |i| i.chart_source.as_ref() == Some(&source)),
            };
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
            let changed = changes.observe(event);
            let apps = match quiet || changed.is_empty() {
                true => Vec::new(),
                false => {
                    index.concerned(&served, |interest| node_change_concerns(interest, &changed, &pools))
                }
            };
            futures::stream::iter(apps)
        })
        .boxed()
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
