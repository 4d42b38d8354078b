//! Apply: writes what `plan` decided, with server-side apply under one field
//! manager, and deletes only releases this application owns.

use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::Api;
use serde_json::json;

use crate::api::{NodePoolApplication, NodePoolApplicationStatus};

/// The one field manager every write of this controller uses.
pub const FIELD_MANAGER: &str = "nodepool-fanout";

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(
        "HelmRelease {name} exists and was not created by this application: rename or delete it, or leave this pool out"
    )]
    NameClash { name: String },
    #[error("cannot apply HelmRelease {name}: {source}")]
    Apply {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete HelmRelease {name}: {source}")]
    Delete {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update the status of NodePoolApplication {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl ApplyError {
    /// A short category for metrics, logs and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NameClash { .. } => "NameClash",
            Self::Apply { .. } => "ApplyFailed",
            Self::Delete { .. } => "PruneFailed",
            Self::Status { .. } => "StatusFailed",
        }
    }
}

/// Applies one desired HelmRelease.
///
/// `exists` says whether observe saw this release among the owned ones. A
/// new release is applied without force: if someone else created an object
/// of that name since observe listed the namespace, their fields conflict and
/// the API server refuses, instead of this controller taking their object
/// over. An owned release is applied with force, reclaiming fields that
/// someone edited by hand.
pub async fn apply_release(
    api: &Api<DynamicObject>,
    name: &str,
    object: &serde_json::Value,
    exists: bool,
) -> Result<(), ApplyError> {
    let mut params = PatchParams::apply(FIELD_MANAGER);
    if exists {
        params = params.force();
    }
    match api.patch(name, &params, &Patch::Apply(object)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 && !exists => Err(ApplyError::NameClash {
            name: name.to_string(),
        }),
        Err(source) => Err(ApplyError::Apply {
            name: name.to_string(),
            source,
        }),
    }
}

/// Deletes a release this application owns; the uid precondition makes sure
/// the object deleted is the one observed, not a newer one of the same name.
pub async fn prune_release(api: &Api<DynamicObject>, name: &str, uid: &str) -> Result<(), ApplyError> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        // Already gone, or replaced by an object we must not touch.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(source) => Err(ApplyError::Delete {
            name: name.to_string(),
            source,
        }),
    }
}

/// Writes the status subresource by server-side apply under the same field
/// manager, so the status is replaced as a whole and lists merge by key.
pub async fn apply_status(
    api: &Api<NodePoolApplication>,
    name: &str,
    status: &NodePoolApplicationStatus,
) -> Result<(), ApplyError> {
    let patch = json!({
        "apiVersion": "apps.fanout.dev/v1alpha1",
        "kind": "NodePoolApplication",
        "status": status,
    });
    api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
        .await
        .map(|_| ())
        .map_err(|source| ApplyError::Status {
            name: name.to_string(),
            source,
        })
}
