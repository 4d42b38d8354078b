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
) -> Result<(tokio::sync::watch::Receiver<bool>, LeaseTask), Error> {
    let identity =
        std::env::var("POD_NAME").unwrap_or_else(|_| format!("nodepool-fanout-{}", std::process::id()));
    let failed = |source| Error::LeaderElection {
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
            return Err(Error::LostLeadership(namespace.to_string()));
        }
    }
    info!(%identity, "leading");
    Ok((channel, task))
}
