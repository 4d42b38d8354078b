//! Which kinds of pool the cluster serves: asked once at the start, then
//! asked again for the kinds it did not serve, since kube's Controller
//! takes its watches once and a kind installed later needs a restart.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kube::api::ApiResource;
use kube::Client;
use tracing::{info, warn};

use crate::api::PoolKind;
use crate::pools::kind::{self as pool_kinds, PoolObjects};
use crate::reconcile::observe;

/// How often the controller asks whether the cluster now serves a kind of
/// pool it did not serve at the start.
const POOL_API_POLL: Duration = Duration::from_secs(30);

/// The kinds of pool object the cluster serves, and why each other is not.
pub(super) struct PoolApis {
    pub(super) served: Vec<(PoolKind, &'static dyn PoolObjects, ApiResource)>,
    /// As the conditions of an application of that kind say it.
    pub(super) unserved: BTreeMap<PoolKind, String>,
    unserved_kinds: Vec<&'static dyn PoolObjects>,
}

impl PoolApis {
    /// Asks the cluster which kinds it serves now.
    pub(super) async fn discover(client: &Client) -> Self {
        let mut apis = PoolApis {
            served: Vec::new(),
            unserved: BTreeMap::new(),
            unserved_kinds: Vec::new(),
        };
        for kind in pool_kinds::OBJECT_KINDS {
            let Some(objects) = pool_kinds::objects(kind) else {
                continue;
            };
            match observe::pool_resource(client, objects).await {
                Ok(resource) => {
                    info!(%kind, version = %resource.api_version, "watching {}s", objects.kind());
                    apis.served.push((kind, objects, resource));
                }
                Err(e) => {
                    warn!(%kind, "not watching {}s: {e}", objects.kind());
                    apis.unserved.insert(kind, observe::unserved_message(kind, &e));
                    apis.unserved_kinds.push(objects);
                }
            }
        }
        apis
    }

    /// Ends when the cluster starts serving a kind it did not serve, with
    /// that kind's CRD in `appeared`; never when it served them all.
    pub(super) fn appearing(
        &self,
        client: &Client,
        appeared: Arc<OnceLock<&'static str>>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (client, unserved) = (client.clone(), self.unserved_kinds.clone());
        async move {
            if unserved.is_empty() {
                return std::future::pending::<()>().await;
            }
            loop {
                tokio::time::sleep(POOL_API_POLL).await;
                for objects in &unserved {
                    if observe::pool_resource(&client, *objects).await.is_ok() {
                        warn!(
                            crd = objects.crd(),
                            "the cluster now serves {}s; restarting to watch them",
                            objects.kind()
                        );
                        let _ = appeared.set(objects.crd());
                        return;
                    }
                }
            }
        }
    }
}
