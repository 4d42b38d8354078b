//! Leader election: reconcile only while holding the `nodepool-fanout`
//! Lease, so that standby replicas take over within seconds.

use kube::Client;
use tracing::info;

use super::context::*;

/// The Lease's task: once every receiver of its channel is gone, it
/// releases the Lease and ends.
pub(super) type LeaseTask =
    tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>>;

/// Waits until this replica holds the Lease; the returned channel says
/// whether it still does.
pub(super) async fn lead(
    client: &Client,
    namespace: &str,
) -> Result<(tokio::sync::watch::Receiver<bool>, LeaseTask), StartError> {
    let identity =
        std::env::var("POD_NAME").unwrap_or_else(|_| format!("nodepool-fanout-{}", std::process::id()));
    let failed = |source| StartError::LeaderElection {
        namespace: namespace.to_string(),
        source,
    };
    // A 15 s lease renewed well before expiry: a standby takes over within
    // about 15 s of the leader's death.
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), "nodepool-fanout")
        .with_namespace(namespace)
        .with_identity(&identity)
        .with_duration(15)
        .with_grace(5)
        .with_field_manager(crate::reconcile::apply::FIELD_MANAGER)
        .build()
        .await
        .map_err(failed)?;
    let (mut channel, task) = manager.watch().await;
    info!(%identity, lease = %format!("{namespace}/nodepool-fanout"), "waiting for the leadership");
    while !*channel.borrow_and_update() {
        if channel.changed().await.is_err() {
            return Err(StartError::LostLeadership(namespace.to_string()));
        }
    }
    info!(%identity, "leading");
    Ok((channel, task))
}

/// This instance's leadership: held for good without leader election, or
/// while it holds the Lease.
pub(super) struct Leadership {
    channel: Option<tokio::sync::watch::Receiver<bool>>,
    task: Option<LeaseTask>,
    lost: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Leadership {
    /// Without leader election this instance leads at once; with it, once
    /// it holds the Lease in `namespace`.
    pub(super) async fn take(client: &Client, elect: bool, namespace: &str) -> Result<Self, StartError> {
        let (channel, task) = match elect {
            true => {
                let (channel, task) = lead(client, namespace).await?;
                (Some(channel), Some(task))
            }
            false => (None, None),
        };
        Ok(Leadership {
            channel,
            task,
            lost: std::sync::Arc::default(),
        })
    }

    /// Ends when the Lease is lost (never without leader election).
    /// Losing it stops the controller gracefully; `run` then fails so the
    /// process restarts as a standby.
    pub(super) fn lost(&mut self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (channel, lost) = (self.channel.take(), self.lost.clone());
        async move {
            let Some(mut channel) = channel else {
                return std::future::pending::<()>().await;
            };
            while channel.changed().await.is_ok() && *channel.borrow_and_update() {}
            lost.store(true, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!("lost the leadership; stopping");
        }
    }

    /// Whether the Lease was lost.
    pub(super) fn was_lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Lets the Lease go, once the controller (which holds the channel's
    /// last receiver) is dropped, so a standby takes over now rather than
    /// when the Lease expires.
    pub(super) async fn release(&mut self) {
        let Some(task) = self.task.take() else { return };
        drop(self.channel.take());
        match tokio::time::timeout(std::time::Duration::from_secs(5), task).await {
            Ok(Ok(Ok(_))) => info!("released the leadership"),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "cannot release the leadership"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot release the leadership"),
            Err(_) => tracing::warn!("releasing the leadership took more than 5 s; it expires on its own"),
        }
    }
}
