//! Observe: reads what `plan` needs from the cluster, and nothing else: the
//! node pools, and the HelmReleases in the application's namespace split into
//! those this application owns and the names of all others.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::discovery::{self, Scope};
use kube::{Api, Client, Resource, ResourceExt};

use crate::api::NodePoolApplication;
use crate::plan::{HelmReleaseKey, ObservedRelease, TakenRelease};
use crate::pools::Pool;

/// OpenYurt's API group for NodePools.
pub const NODEPOOL_GROUP: &str = "apps.openyurt.io";

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error(
        "the cluster serves no NodePool API ({NODEPOOL_GROUP}): install OpenYurt, or its NodePool CRD, first ({0})"
    )]
    NoNodePoolApi(#[source] kube::Error),
    #[error("the cluster's {NODEPOOL_GROUP} group has no cluster-scoped NodePool kind: is OpenYurt's CRD installed?")]
    NoNodePoolKind,
    #[error("cannot list NodePools: {0}")]
    ListPools(#[source] kube::Error),
    #[error("cannot list HelmReleases in namespace {namespace}: {source}")]
    ListReleases {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

impl ObserveError {
    /// A short category for metrics, logs and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NoNodePoolApi(_) | Self::NoNodePoolKind => "NodePoolApiMissing",
            Self::ListPools(_) | Self::ListReleases { .. } => "ApiError",
        }
    }
}

/// The HelmRelease API of Flux's helm-controller that every release is written in.
pub fn helmrelease_resource() -> ApiResource {
    ApiResource {
        group: "helm.toolkit.fluxcd.io".into(),
        version: "v2".into(),
        api_version: "helm.toolkit.fluxcd.io/v2".into(),
        kind: "HelmRelease".into(),
        plural: "helmreleases".into(),
    }
}

/// The NodePool version the cluster prefers: OpenYurt has served v1alpha1,
/// v1beta1 and v1beta2, and only labels and names are read here, which every
/// version has.
pub async fn nodepool_resource(client: &Client) -> Result<ApiResource, ObserveError> {
    let group = discovery::group(client, NODEPOOL_GROUP).await.map_err(ObserveError::NoNodePoolApi)?;
    let (resource, caps) = group.recommended_kind("NodePool").ok_or(ObserveError::NoNodePoolKind)?;
    if caps.scope != Scope::Cluster {
        return Err(ObserveError::NoNodePoolKind);
    }
    Ok(resource)
}

/// What the cluster holds that concerns one application.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub pools: Vec<Pool>,
    pub owned: Vec<ObservedRelease>,
    /// Names of HelmReleases in the namespace this application does not own:
    /// never adopted, overwritten or deleted.
    pub foreign_names: BTreeSet<String>,
    /// The same, by the Helm release each drives.
    pub taken: BTreeMap<HelmReleaseKey, TakenRelease>,
}

pub async fn observe(
    client: &Client,
    nodepools: &ApiResource,
    app: &NodePoolApplication,
) -> Result<Observed, ObserveError> {
    let namespace = app.namespace().unwrap_or_default();
    let pool_api: Api<DynamicObject> = Api::all_with(client.clone(), nodepools);
    let pools = pool_api
        .list(&ListParams::default())
        .await
        .map_err(ObserveError::ListPools)?
        .items
        .iter()
        .map(Pool::from_object)
        .collect();

    let release_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &helmrelease_resource());
    let releases = release_api
        .list(&ListParams::default())
        .await
        .map_err(|source| ObserveError::ListReleases {
            namespace: namespace.clone(),
            source,
        })?
        .items;

    let uid = app.meta().uid.as_deref();
    let mut observed = Observed {
        pools,
        ..Observed::default()
    };
    for release in releases {
        let value = serde_json::to_value(&release).map_err(|e| ObserveError::ListReleases {
            namespace: namespace.clone(),
            source: kube::Error::SerdeError(e),
        })?;
        match owned_by(&release, uid).then(|| ObservedRelease::from_value(&value)).flatten() {
            Some(owned) => observed.owned.push(owned),
            // Another's, or ours by owner reference but without our pool
            // label (edited by hand): left alone rather than guess its pool.
            None => {
                observed.foreign_names.insert(release.name_any());
                if let Some((key, taken)) = TakenRelease::from_value(&value) {
                    observed.taken.insert(key, taken);
                }
            }
        }
    }
    Ok(observed)
}

/// Ownership is the controller owner reference to this very application
/// (its uid, so a re-created application of the same name owns nothing yet).
pub fn owned_by(release: &DynamicObject, uid: Option<&str>) -> bool {
    let Some(uid) = uid else { return false };
    release
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid && r.kind == "NodePoolApplication")
}
