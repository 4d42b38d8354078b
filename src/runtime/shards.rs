//! What one instance keeps of the releases other shards serve. Every
//! release of the namespaces watched is cached, since planning must know
//! the names and Helm releases others hold to never take them; but only
//! the releases of the applications this instance serves are kept whole.
//! The others are cut down as they are read from the watch
//! ([`CachedRelease::of_another_shard`]), so that a shard's memory, and
//! the work each watch event costs it, follow its own fleet rather than
//! the sum of every shard's.
//!
//! An application that moves here from another shard (its shard label
//! changed) finds its releases cut down: its reconcile asks for the
//! release watch to list again ([`Relist::request`]), which brings them
//! in whole now that it is served, and waits for that. One that moves
//! away is no longer read here ([`read_if_served`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::ListParams;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::Api;
use tokio::sync::{watch, Notify};

use super::context::AppMeta;
use super::watches::paged_releases;
use crate::api::NodePoolApplication;
use crate::reconcile::observe::{application_owner, map_event, CachedRelease, WatchedRelease};

/// A request that the release watch list again, at most one under way.
#[derive(Debug, Default)]
pub(super) struct Relist {
    notify: Notify,
    under_way: AtomicBool,
}

impl Relist {
    /// Asks for a new list of every release, unless one is under way;
    /// says whether this call asked.
    pub(super) fn request(&self) -> bool {
        let asked = !self.under_way.swap(true, Ordering::SeqCst);
        if asked {
            self.notify.notify_one();
        }
        asked
    }
}

/// Every HelmRelease of `api`, each cut down unless `served` holds the
/// application that owns it. The watch starts once `served` has listed
/// (`listed` turns true; before, every release would be cut down), and
/// starts over, listing again, when `relist` is requested: the reflector
/// takes a new list as it takes the first, swapping the whole cache when
/// it ends.
pub(super) fn releases(
    api: Api<WatchedRelease>,
    (served, mut listed): (Store<AppMeta>, watch::Receiver<bool>),
    relist: Arc<Relist>,
) -> impl Stream<Item = watcher::Result<watcher::Event<CachedRelease>>> + Send + 'static {
    let listings = futures::stream::repeat(()).flat_map(move |()| {
        let (restart, done) = (Arc::clone(&relist), Arc::clone(&relist));
        watcher(api.clone(), paged_releases())
            .take_until(async move { restart.notify.notified().await })
            .inspect_ok(move |event| {
                if matches!(event, watcher::Event::InitDone) {
                    done.under_way.store(false, Ordering::SeqCst);
                }
            })
    });
    let served_listed = futures::stream::once(async move {
        // An error is the sender gone: the controller is stopping.
        let _ = listed.wait_for(|listed| *listed).await;
    })
    .filter_map(|()| std::future::ready(None));
    // Cut down as it is read, not read whole to be cut down: the events
    // of other shards' releases outnumber this shard's own.
    served_listed.chain(listings).map_ok(move |event| {
        map_event(event, |release| match serves_owner(&served, &release) {
            true => CachedRelease::from_object(release.0),
            false => CachedRelease::of_another_shard(release.0),
        })
    })
}

/// The application, read afresh; `None` when it is gone or, for a shard,
/// no longer of it. An application moved to another shard while its
/// reconcile waited here (the watch had not yet said so, or a requeue
/// was due) is the other shard's to reconcile from then on: two instances
/// planning one application at once could each start a pool the other
/// does not know of. One request either way: for a shard, a list of
/// that one name under the shard's selector, which the API server
/// matches as it matched the watch.
pub async fn read_if_served(
    apps: &Api<NodePoolApplication>,
    name: &str,
    shard: Option<&str>,
) -> Result<Option<NodePoolApplication>, kube::Error> {
    let Some(selector) = shard else {
        return apps.get_opt(name).await;
    };
    let named = format!("metadata.name={name}");
    let listed = apps.list(&ListParams::default().labels(selector).fields(&named)).await?;
    Ok(listed.items.into_iter().next())
}

/// Whether `served` holds the application that owns `release` (by name
/// and uid), or no application owns it: a release of no application is
/// cached as such already.
fn serves_owner(served: &Store<AppMeta>, release: &impl kube::Resource) -> bool {
    let (Some(owner), Some(namespace)) = (application_owner(release), release.meta().namespace.as_deref())
    else {
        return true;
    };
    let app = served.get(&ObjectRef::new(&owner.name).within(namespace));
    app.is_some_and(|app| app.metadata.uid.as_deref() == Some(owner.uid.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_request_while_one_is_under_way_asks_nothing() {
        let relist = Relist::default();
        assert!(relist.request());
        assert!(!relist.request(), "one list at a time");
        relist.under_way.store(false, Ordering::SeqCst);
        assert!(relist.request(), "asked again once the list ended");
    }
}
