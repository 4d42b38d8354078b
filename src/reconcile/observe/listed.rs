//! Whether an index beside a watch cache holds the cache's first list.
//!
//! kube's store says it is ready when the watch's first list is swapped
//! in, and the cache's writer rebuilds the index from it only after: a
//! reconcile started in between found the store full and the index empty.
//! At 10,000 pools the window was wide enough to hit (`make bench-scale`:
//! a new application's first reconcile selected no pool, and its fan-out
//! waited for the resync), and after a restart an empty release index
//! would read every release of an application as missing. So what a
//! reconcile waits for is the index's own signal, given once the rebuild
//! is in.

/// Set once, when the index first holds its cache's list; any number of
/// tasks may wait for it (a watch channel, not a oneshot).
#[derive(Debug, Default)]
pub struct Listed(tokio::sync::watch::Sender<bool>);

impl Listed {
    /// Already listed: an index made at once from a list.
    pub fn done() -> Self {
        let listed = Self::default();
        listed.set();
        listed
    }

    pub fn set(&self) {
        self.0.send_replace(true);
    }

    /// Returns once the index holds its cache's first list.
    pub async fn wait(&self) {
        let mut listed = self.0.subscribe();
        // The sender is `self`: it outlives this wait, which cannot fail.
        let _ = listed.wait_for(|listed| *listed).await;
    }
}
