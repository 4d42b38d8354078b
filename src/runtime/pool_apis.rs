//! Which kinds of pool the cluster serves: asked once at the start, then
//! asked again for the kinds it did not serve, since kube's Controller
//! takes its watches once and a kind installed later needs a restart.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use backon::Retryable;
use kube::api::{ApiResource, DynamicObject};
use kube::discovery::{self, Scope};
use kube::Client;
use tracing::{info, warn};

use crate::api::PoolKind;
use crate::pools::kind::{self as pool_kinds, PoolObjects};
use crate::reconcile::observe;

/// How often the controller asks whether the cluster now serves a kind of
/// pool it did not serve at the start.
const POOL_API_POLL: Duration = Duration::from_secs(30);

/// Why the cluster's pools of a kind cannot be watched.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PoolApiError {
    #[error("the cluster serves no cluster-scoped {kind} in {group}: {reason}")]
    NoPoolApi {
        kind: &'static str,
        group: &'static str,
        reason: String,
    },
    #[error("the controller may not list {crd}: {reason}")]
    PoolsForbidden { crd: &'static str, reason: String },
    /// The API server did not say: it was not reached, or answered with a
    /// trouble of its own (a 5xx while it starts, a 429).
    #[error(
        "cannot ask the cluster whether it serves {kind}s in {group}: {reason}; check that the API server \
         is reachable, and the controller asks again"
    )]
    Unanswered {
        kind: &'static str,
        group: &'static str,
        reason: String,
    },
}

/// Whether a discovery error says nothing of what the cluster serves:
/// no answer (an API server restarting, a network cut) or an answer of
/// the API server's own trouble. Read as "not served", one made the
/// controller start without the kind's watch, then exit to restart once
/// it answered (found by the fault soak, seed 41, beside another seed
/// that stopped the API server: no Deployment restarted it there).
fn unanswered(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        kube::Error::Service(_) | kube::Error::HyperError(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// The version of a kind of pool the cluster prefers (OpenYurt has served
/// NodePools as v1alpha1, v1beta1 and v1beta2; only names, labels and
/// annotations are read, which every version has), or why it serves none.
/// `namespace`: where pools of a namespaced kind are read, when not in
/// every namespace (`--watch-namespace`).
pub(crate) async fn pool_resource(
    client: &Client,
    objects: &PoolObjects,
    namespace: Option<&str>,
) -> Result<ApiResource, PoolApiError> {
    let missing = |reason: String| PoolApiError::NoPoolApi {
        kind: objects.kind(),
        group: objects.group(),
        reason,
    };
    let group = discovery::group(client, objects.group()).await.map_err(|e| match unanswered(&e) {
        true => PoolApiError::Unanswered {
            kind: objects.kind(),
            group: objects.group(),
            reason: e.to_string(),
        },
        false => missing(e.to_string()),
    })?;
    let (resource, caps) = group
        .recommended_kind(objects.kind())
        .ok_or_else(|| missing(format!("the group has no {}", objects.kind())))?;
    let scope = match objects.namespaced {
        true => Scope::Namespaced,
        false => Scope::Cluster,
    };
    if caps.scope != scope {
        return Err(missing(format!("its {} is not {scope:?}-scoped", objects.kind())));
    }
    // Served, but perhaps not to us: a watch refused for want of RBAC would
    // retry forever, and every reconcile would wait for its first list.
    // Asked where the watch will read them.
    let api: kube::Api<DynamicObject> = match watched_namespace(objects, namespace) {
        Some(namespace) => kube::Api::namespaced_with(client.clone(), namespace, &resource),
        None => kube::Api::all_with(client.clone(), &resource),
    };
    match api.list_metadata(&kube::api::ListParams::default().limit(1)).await {
        Err(kube::Error::Api(e)) if e.code == 403 => Err(PoolApiError::PoolsForbidden {
            crd: objects.crd(),
            reason: e.message,
        }),
        _ => Ok(resource),
    }
}

/// The one namespace pools of this kind are read in, if not every one:
/// an application selects only pools of its own namespace where pools are
/// namespaced (ClusterProfiles), so an instance serving one namespace
/// reads only that namespace's. A shard run with a namespace of its own
/// then holds none of the other shards' sites, and needs no more than a
/// Role there to read its own.
pub(crate) fn watched_namespace<'a>(objects: &PoolObjects, namespace: Option<&'a str>) -> Option<&'a str> {
    namespace.filter(|_| objects.namespaced)
}

/// Why an application's pools cannot be read, as its condition says it.
fn unserved_message(kind: PoolKind, error: &PoolApiError) -> String {
    if let PoolApiError::PoolsForbidden { crd, .. } = error {
        return format!(
            "spec.pools.kind is {kind}, but the controller may not read {crd}: grant its service account \
             get, list and watch on them (deploy/rbac.yaml does); the controller notices within a minute and \
             restarts to watch them"
        );
    }
    observe::not_served_message(kind)
}

/// The kinds of pool object the cluster serves, and why each other is not.
pub(super) struct PoolApis {
    pub(super) served: Vec<(PoolKind, &'static PoolObjects, ApiResource)>,
    /// As the conditions of an application of that kind say it.
    pub(super) unserved: BTreeMap<PoolKind, String>,
    unserved_kinds: Vec<&'static PoolObjects>,
    /// Where a namespaced kind is read (see [`watched_namespace`]).
    namespace: Option<String>,
}

impl PoolApis {
    /// Asks the cluster which kinds it serves now, where the controller
    /// reads them: `namespace` for a namespaced kind, when it serves one.
    pub(super) async fn discover(client: &Client, namespace: Option<&str>) -> Self {
        let mut apis = PoolApis {
            served: Vec::new(),
            unserved: BTreeMap::new(),
            unserved_kinds: Vec::new(),
            namespace: namespace.map(str::to_string),
        };
        for kind in pool_kinds::OBJECT_KINDS {
            let Some(objects) = pool_kinds::objects(kind) else {
                continue;
            };
            // Until the API server answers: whether a kind is served is
            // asked once, and nothing else can be done without it.
            let asked = (|| pool_resource(client, objects, namespace))
                .retry(
                    backon::ExponentialBuilder::default()
                        .with_min_delay(Duration::from_millis(500))
                        .with_max_delay(Duration::from_secs(10))
                        .with_jitter()
                        .without_max_times(),
                )
                .when(|e| matches!(e, PoolApiError::Unanswered { .. }))
                .notify(|e, wait| warn!(%kind, "{e} (in {wait:?})"))
                .await;
            match asked {
                Ok(resource) => {
                    info!(%kind, version = %resource.api_version, "watching {}s", objects.kind());
                    apis.served.push((kind, objects, resource));
                }
                Err(e) => {
                    warn!(%kind, "not watching {}s: {e}", objects.kind());
                    apis.unserved.insert(kind, unserved_message(kind, &e));
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
        let namespace = self.namespace.clone();
        async move {
            if unserved.is_empty() {
                return std::future::pending::<()>().await;
            }
            loop {
                tokio::time::sleep(POOL_API_POLL).await;
                for objects in &unserved {
                    if pool_resource(&client, objects, namespace.as_deref()).await.is_ok() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_answer_or_the_api_servers_own_trouble_says_nothing_of_what_it_serves() {
        use kube::core::Status;
        let status = |code| kube::Error::Api(Status::failure("", "").with_code(code).boxed());
        let cut = kube::Error::Service("client error (Connect)".into());
        assert!(unanswered(&cut), "the API server not reached");
        assert!(unanswered(&status(503)) && unanswered(&status(500)) && unanswered(&status(429)));
        assert!(!unanswered(&status(404)) && !unanswered(&status(403)));
        let missing =
            kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup("apps.openyurt.io".into()));
        assert!(!unanswered(&missing), "an answer: the group is not served");
    }

    #[test]
    fn only_namespaced_pools_are_read_in_the_namespace_served() {
        let profiles = pool_kinds::objects(PoolKind::ClusterProfile).expect("ClusterProfiles");
        let nodepools = pool_kinds::objects(PoolKind::OpenYurt).expect("NodePools");
        assert_eq!(watched_namespace(profiles, Some("fleet-a")), Some("fleet-a"));
        assert_eq!(watched_namespace(profiles, None), None, "every namespace, when serving all");
        assert_eq!(watched_namespace(nodepools, Some("fleet-a")), None, "cluster-scoped: every pool");
    }
}
