//! Claims: which application drives a Helm release, decided by one create.
//!
//! Planning refuses a release whose Helm release another HelmRelease
//! already drives, but two applications applied in one commit reconcile at
//! once and neither sees the other's HelmRelease yet. So before a
//! HelmRelease first drives a Helm release, its application creates a
//! Lease named after that Helm release ([`naming::claim_name`]) in its
//! namespace: the API server lets only one create of a name succeed, and
//! the loser writes nothing. The Lease is owned by the application, so it
//! goes with it; it is let go when the release is pruned or drives another
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

/// The APIs a claim is checked against, all in the application's namespace.
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
        match apis.leases.create(&params, &lease).await {
            Ok(_) => return Ok(Claim::Ours),
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(source) => return Err(failed(source)),
        }
        let Some(live) = apis.leases.get_opt(&name).await.map_err(failed)? else {
            continue;
        };
        let holder_uid = live.labels().get(naming::LABEL_CLAIM_APPLICATION_UID).cloned();
        if holder_uid.is_some() && holder_uid == app.uid() {
            hold_for(apis.leases, &live, release).await.map_err(failed)?;
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
        match apis.leases.delete(&name, &params).await {
            Ok(_) => {}
            // Changed or gone meanwhile: read again.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(source) => return Err(failed(source)),
        }
    }
    Ok(Claim::HeldBy(format!("Lease {name}, which changed while it was read")))
}

/// Lets go of the claims `release` of the application `app_uid` holds
/// (of `only` that one, when given): one request, which matches nothing
/// when it holds none.
pub async fn release(
    leases: &Api<Lease>,
    app_uid: &str,
    release: &str,
    only: Option<&HelmReleaseKey>,
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
    leases
        .delete_collection(&DeleteParams::default(), &params)
        .await
        .map(drop)
        .map_err(|source| ApplyError::Delete {
            object: format!("the claims of HelmRelease {release}"),
            source,
        })
}

/// The claim as this application creates it.
fn claim_lease(key: &HelmReleaseKey, app: &NodePoolApplication, release: &str) -> Lease {
    let labels = [
        (naming::LABEL_MANAGED_BY, naming::MANAGER.to_string()),
        (naming::LABEL_CLAIM_APPLICATION_UID, app.uid().unwrap_or_default()),
        (naming::LABEL_CLAIM_RELEASE, release.to_string()),
    ];
    let annotations = [
        (naming::ANNOTATION_CLAIMED_HELM_RELEASE, format!("{}/{}", key.0, key.1)),
        (naming::LABEL_APPLICATION, app.name_any()),
    ];
    Lease {
        metadata: ObjectMeta {
            name: Some(naming::claim_name(&key.0, &key.1)),
            namespace: app.namespace(),
            labels: Some(labels.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
            annotations: Some(annotations.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
            owner_references: app.controller_owner_ref(&()).map(|o| vec![o]),
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
struct Holder {
    application: String,
    uid: String,
    release: String,
}

impl Holder {
    fn of(lease: &Lease) -> Option<Self> {
        let managed =
            lease.labels().get(naming::LABEL_MANAGED_BY).map(String::as_str) == Some(naming::MANAGER);
        Some(Self {
            application: lease.annotations().get(naming::LABEL_APPLICATION)?.clone(),
            uid: lease.labels().get(naming::LABEL_CLAIM_APPLICATION_UID)?.clone(),
            release: lease.labels().get(naming::LABEL_CLAIM_RELEASE)?.clone(),
        })
        .filter(|_| managed)
    }

    fn describe(&self) -> String {
        format!("NodePoolApplication {} (HelmRelease {})", self.application, self.release)
    }

    /// Stale: its application is gone (or is another of the same name), or
    /// its HelmRelease never came to be or is gone.
    async fn is_stale(&self, apis: &ClaimApis<'_>, lease: &Lease) -> Result<bool, kube::Error> {
        let application = apis.applications.get_metadata_opt(&self.application).await?;
        if application.and_then(|a| a.uid()).as_deref() != Some(self.uid.as_str()) {
            return Ok(true);
        }
        let age = lease
            .creation_timestamp()
            .map(|t| k8s_openapi::jiff::Timestamp::now().duration_since(t.0).as_secs())
            .unwrap_or_default();
        Ok(
            age > UNUSED_CLAIM_GRACE_SECONDS
                && apis.releases.get_metadata_opt(&self.release).await?.is_none(),
        )
    }
}
