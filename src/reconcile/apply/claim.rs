//! Claims: which application drives a Helm release, decided by one create.
//!
//! Planning refuses a release whose Helm release another HelmRelease
//! already drives, but two applications applied in one commit reconcile at
//! once and neither sees the other's HelmRelease yet. So before a
//! HelmRelease first drives a Helm release, its application creates a
//! Lease named after that Helm release ([`naming::claim_name`]) where the
//! Helm release is stored (its storage namespace): the API server lets
//! only one create of a name succeed, and the loser writes nothing, even
//! when the two applications live in different namespaces (fourth review,
//! item 10). A Lease in the application's own namespace is owned by it,
//! so it goes with it; one in another namespace cannot be (owner
//! references do not cross namespaces), and is taken over once its holder
//! is gone. Either is let go when the release is pruned or drives another
//! Helm release.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::DynamicObject;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::{ApplyError, FIELD_MANAGER};
use crate::api::{naming, NodePoolApplication};
use crate::reconcile::plan::HelmReleaseKey;

/// How long a claim whose HelmRelease does not exist is kept: its holder
/// creates the HelmRelease right after the claim, and a cache may lag.
const UNUSED_CLAIM_GRACE_SECONDS: i64 = 60;

/// Whether this application holds the claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    Ours,
    /// Another holds it: who, as the condition says it.
    HeldBy(String),
}

/// The APIs a claim is checked against, in the application's namespace;
/// those of other namespaces are made from their client.
pub struct ClaimApis<'a> {
    pub leases: &'a Api<Lease>,
    pub applications: &'a Api<NodePoolApplication>,
    pub releases: &'a Api<DynamicObject>,
}

/// Claims `key` for `release`, a HelmRelease of `app`. A claim left by an
/// application that is gone, or by a release that never came to be, is
/// taken over; one held by another live application is not.
pub async fn claim(
    apis: &ClaimApis<'_>,
    key: &HelmReleaseKey,
    app: &NodePoolApplication,
    release: &str,
) -> Result<Claim, ApplyError> {
    let lease = claim_lease(key, app, release);
    let name = lease.name_any();
    let leases = &in_namespace(apis.leases, lease_namespace(&key.0, &app.namespace().unwrap_or_default()));
    let failed = |source| ApplyError::Claim {
        helm_release: format!("{}/{}", key.0, key.1),
        source,
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    // Twice at most: a stale claim is deleted once, then created afresh.
    for _ in 0..2 {
        match leases.create(&params, &lease).await {
            Ok(_) => return Ok(Claim::Ours),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(source) => return Err(failed(source)),
        }
        let Some(live) = leases.get_opt(&name).await.map_err(failed)? else {
            continue;
        };
        let holder_uid = live.labels().get(naming::LABEL_CLAIM_APPLICATION_UID).cloned();
        if holder_uid.is_some() && holder_uid == app.uid() {
            hold_for(leases, &live, release).await.map_err(failed)?;
            return Ok(Claim::Ours);
        }
        let Some(holder) = Holder::of(&live) else {
            return Ok(Claim::HeldBy(format!(
                "Lease {name}, which nodepool-fanout did not create: delete it if nothing uses it"
            )));
        };
        if !holder.is_stale(apis, &live).await.map_err(failed)? {
            return Ok(Claim::HeldBy(holder.describe()));
        }
        tracing::info!(lease = %name, holder = %holder.describe(), "taking over a claim its holder left");
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: live.uid(),
                resource_version: live.resource_version(),
            }),
            ..DeleteParams::default()
        };
        match leases.delete(&name, &params).await {
            Ok(_) => {}
            // Changed or gone meanwhile: read again.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(source) => return Err(failed(source)),
        }
    }
    Ok(Claim::HeldBy(format!("Lease {name}, which changed while it was read")))
}

/// Lets go of the claims `release` of the application `app_uid` holds
/// (of `only` that one, when given): one request in the application's
/// namespace, which matches nothing when it holds none, and one where the
/// Helm release it drove is stored (`stored_in`), when that is another.
pub async fn release(
    leases: &Api<Lease>,
    app_uid: &str,
    release: &str,
    only: Option<&HelmReleaseKey>,
    stored_in: Option<&str>,
) -> Result<(), ApplyError> {
    let selector = format!(
        "{}={app_uid},{}={release}",
        naming::LABEL_CLAIM_APPLICATION_UID,
        naming::LABEL_CLAIM_RELEASE
    );
    let mut params = ListParams::default().labels(&selector);
    if let Some((storage, name)) = only {
        params = params.fields(&format!("metadata.name={}", naming::claim_name(storage, name)));
    }
    let here = leases.namespace().unwrap_or_default();
    let elsewhere = stored_in.or(only.map(|(storage, _)| storage.as_str()));
    let elsewhere = elsewhere
        .map(|storage| lease_namespace(storage, here))
        .filter(|ns| *ns != here)
        .map(|ns| in_namespace(leases, ns));
    for leases in std::iter::once(leases).chain(elsewhere.as_ref()) {
        leases
            .delete_collection(&DeleteParams::default(), &params)
            .await
            .map(drop)
            .map_err(|source| ApplyError::Delete {
                object: format!("the claims of HelmRelease {release}"),
                source,
            })?;
    }
    Ok(())
}

/// Where the claim of a Helm release stored in `storage` lives, for an
/// application of `app_namespace`: the storage namespace on this cluster.
/// A site cluster's Helm release is stored on the site, and its key names
/// the site by the kubeconfig Secret of the HelmRelease's namespace (the
/// application's), so its claim lives in the application's namespace.
fn lease_namespace<'a>(storage: &'a str, app_namespace: &'a str) -> &'a str {
    match naming::is_site_storage(storage) {
        true => app_namespace,
        false => storage,
    }
}

/// The Leases of `namespace`, through the client of `leases`.
fn in_namespace(leases: &Api<Lease>, namespace: &str) -> Api<Lease> {
    match leases.namespace() == Some(namespace) {
        true => leases.clone(),
        false => Api::namespaced(leases.clone().into_client(), namespace),
    }
}

/// The claim as this application creates it.
fn claim_lease(key: &HelmReleaseKey, app: &NodePoolApplication, release: &str) -> Lease {
    let labels = [
        (naming::LABEL_MANAGED_BY, naming::MANAGER.to_string()),
        (naming::LABEL_CLAIM_APPLICATION_UID, app.uid().unwrap_or_default()),
        (naming::LABEL_CLAIM_RELEASE, release.to_string()),
    ];
    let namespace = app.namespace().unwrap_or_default();
    let annotations = [
        (naming::ANNOTATION_CLAIMED_HELM_RELEASE, format!("{}/{}", key.0, key.1)),
        (naming::LABEL_APPLICATION, app.name_any()),
        (naming::ANNOTATION_CLAIMED_BY_NAMESPACE, namespace.clone()),
    ];
    let lives_in = lease_namespace(&key.0, &namespace).to_string();
    let beside = lives_in == namespace;
    Lease {
        metadata: ObjectMeta {
            name: Some(naming::claim_name(&key.0, &key.1)),
            namespace: Some(lives_in),
            labels: Some(labels.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
            annotations: Some(annotations.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
            owner_references: app.controller_owner_ref(&()).filter(|_| beside).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(format!("{}/{release}", app.name_any())),
            ..LeaseSpec::default()
        }),
    }
}

/// Moves our claim to `release` when another release of ours held it (a
/// pool renamed in the same change), so that pruning the old one does not
/// let go of it.
async fn hold_for(leases: &Api<Lease>, live: &Lease, release: &str) -> Result<(), kube::Error> {
    if live.labels().get(naming::LABEL_CLAIM_RELEASE).map(String::as_str) == Some(release) {
        return Ok(());
    }
    let patch = json!({ "metadata": {
        "resourceVersion": live.resource_version(),
        "labels": { naming::LABEL_CLAIM_RELEASE: release },
    } });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    leases.patch(&live.name_any(), &params, &Patch::Merge(&patch)).await.map(drop)
}

/// Who holds a claim this controller made.
#[derive(Debug, PartialEq, Eq)]
struct Holder {
    /// The application's namespace: the Lease's own, for one made before
    /// claims were kept where the Helm release is stored.
    namespace: String,
    application: String,
    uid: String,
    release: String,
}

impl Holder {
    fn of(lease: &Lease) -> Option<Self> {
        let managed =
            lease.labels().get(naming::LABEL_MANAGED_BY).map(String::as_str) == Some(naming::MANAGER);
        let namespace = (lease.annotations().get(naming::ANNOTATION_CLAIMED_BY_NAMESPACE).cloned())
            .or_else(|| lease.namespace())?;
        Some(Self {
            namespace,
            application: lease.annotations().get(naming::LABEL_APPLICATION)?.clone(),
            uid: lease.labels().get(naming::LABEL_CLAIM_APPLICATION_UID)?.clone(),
            release: lease.labels().get(naming::LABEL_CLAIM_RELEASE)?.clone(),
        })
        .filter(|_| managed)
    }

    fn describe(&self) -> String {
        format!(
            "NodePoolApplication {}/{} (HelmRelease {})",
            self.namespace, self.application, self.release
        )
    }

    /// Stale: its application is gone (or is another of the same name), or
    /// its HelmRelease never came to be or is gone.
    async fn is_stale(&self, apis: &ClaimApis<'_>, lease: &Lease) -> Result<bool, kube::Error> {
        let here = apis.applications.namespace() == Some(self.namespace.as_str());
        let client = || apis.leases.clone().into_client();
        let applications = match here {
            true => apis.applications.clone(),
            false => Api::namespaced(client(), &self.namespace),
        };
        let releases = match here {
            true => apis.releases.clone(),
            false => Api::namespaced_with(
                client(),
                &self.namespace,
                &crate::reconcile::observe::helmrelease_resource(),
            ),
        };
        let application = applications.get_metadata_opt(&self.application).await?;
        if application.and_then(|a| a.uid()).as_deref() != Some(self.uid.as_str()) {
            return Ok(true);
        }
        let age = lease
            .creation_timestamp()
            .map(|t| k8s_openapi::jiff::Timestamp::now().duration_since(t.0).as_secs())
            .unwrap_or_default();
        Ok(age > UNUSED_CLAIM_GRACE_SECONDS && releases.get_metadata_opt(&self.release).await?.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(namespace: &str) -> NodePoolApplication {
        let mut app = NodePoolApplication::new("gw", serde_json::from_value(json!({ "interval": "5m", "pools": { "names": ["a"] }, "chart": { "spec": { "chart": "c", "sourceRef": { "kind": "HelmRepository", "name": "r" } } } })).unwrap());
        app.metadata.namespace = Some(namespace.into());
        app.metadata.uid = Some("uid-1".into());
        app
    }

    /// Two applications of different namespaces that would store one Helm
    /// release in one namespace race for one Lease of one name there
    /// (fourth review, item 10).
    #[test]
    fn a_claim_lives_where_its_helm_release_is_stored() {
        let key: HelmReleaseKey = ("shared".into(), "gateway".into());
        let from_edge = claim_lease(&key, &app("edge"), "gw-a");
        let from_core = claim_lease(&key, &app("core"), "gw-a");
        assert_eq!(from_edge.metadata.namespace.as_deref(), Some("shared"));
        assert_eq!(from_edge.metadata.name, from_core.metadata.name);
        assert_eq!(from_edge.metadata.owner_references, None, "no owner across namespaces");
        let holder = Holder::of(&from_edge).expect("ours");
        assert_eq!((holder.namespace.as_str(), holder.application.as_str()), ("edge", "gw"));
        assert!(holder.describe().contains("edge/gw"), "{}", holder.describe());

        // Stored beside the application: owned by it, and goes with it.
        let beside = claim_lease(&("edge".into(), "gateway".into()), &app("edge"), "gw-a");
        assert_eq!(beside.metadata.namespace.as_deref(), Some("edge"));
        assert_eq!(beside.metadata.owner_references.map(|o| o.len()), Some(1));
    }

    /// A site cluster's Helm release is claimed beside the application: its
    /// key is no namespace of this cluster (seen when claims first moved to
    /// the storage namespace: every site release failed to claim).
    #[test]
    fn a_claim_of_a_site_clusters_helm_release_lives_beside_its_application() {
        let key = naming::helm_release_on("Secret edge/site-1-kubeconfig", "edge-gw", "gw-site-1");
        let lease = claim_lease(&key, &app("edge"), "gw-site-1");
        assert_eq!(lease.metadata.namespace.as_deref(), Some("edge"));
        assert_eq!(lease.metadata.owner_references.map(|o| o.len()), Some(1));
        assert_eq!(lease_namespace(&key.0, "edge"), "edge");
        assert_eq!(lease_namespace("shared", "edge"), "shared");
    }

    #[test]
    fn a_claim_made_before_it_named_its_holders_namespace_is_held_from_its_own() {
        let mut lease = claim_lease(&("edge".into(), "gateway".into()), &app("edge"), "gw-a");
        lease.annotations_mut().remove(naming::ANNOTATION_CLAIMED_BY_NAMESPACE);
        assert_eq!(Holder::of(&lease).map(|h| h.namespace), Some("edge".to_string()));
    }
}
