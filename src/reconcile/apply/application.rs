//! Writes to the application itself: its status, its finalizers, and the
//! report of a spec the client cannot read.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::api::{NodePoolApplication, NodePoolApplicationStatus};

use super::{ApplyError, FIELD_MANAGER};

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
        "metadata": { "name": name },
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

/// The finalizer that lets the application delete its shared HelmCharts,
/// which live in the source's namespace where owner references cannot reach.
pub const FINALIZER: &str = "apps.fanout.dev/shared-charts";

/// Says on the application that its spec cannot be read: the conditions
/// of `status` (a report whose blocker says why), by merge patch so the
/// last known pools stay. The answer, the whole object, is just as
/// unreadable and is not decoded.
pub async fn report_unreadable(
    api: &Api<NodePoolApplication>,
    app: &impl Resource,
    status: &NodePoolApplicationStatus,
) -> Result<(), ApplyError> {
    let patch = json!({ "status": {
        "observedGeneration": status.observed_generation,
        "conditions": status.conditions,
    }});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    match api.patch_status(&app.name_any(), &params, &Patch::Merge(&patch)).await {
        Ok(_) | Err(kube::Error::SerdeError(_)) => Ok(()),
        Err(source) => Err(ApplyError::Status {
            name: app.name_any(),
            source,
        }),
    }
}

/// The finalizer that leaves the releases in place when the application
/// goes, under `deletionPolicy: Orphan`: before the garbage collector can
/// reach them, they are orphaned (see [`crate::reconcile::orphan`]).
pub const ORPHAN_FINALIZER: &str = "apps.fanout.dev/orphan-releases";

/// Makes our finalizers on the application exactly `wanted` (of
/// [`FINALIZER`] and [`ORPHAN_FINALIZER`]), writing only when they differ.
/// Applying the list under our field manager touches no one else's entry,
/// and an empty list withdraws ours.
pub async fn set_finalizers(
    api: &Api<NodePoolApplication>,
    app: &impl Resource,
    wanted: &[&str],
) -> Result<(), ApplyError> {
    let ours: Vec<&str> = app
        .finalizers()
        .iter()
        .map(String::as_str)
        .filter(|f| [FINALIZER, ORPHAN_FINALIZER].contains(f))
        .collect();
    if ours.len() == wanted.len() && wanted.iter().all(|w| ours.contains(w)) {
        return Ok(());
    }
    let patch = json!({
        "apiVersion": "apps.fanout.dev/v1alpha1",
        "kind": "NodePoolApplication",
        "metadata": { "name": app.name_any(), "finalizers": wanted },
    });
    match api
        .patch(&app.name_any(), &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
        .await
    {
        // An unreadable answer (see report_unreadable) still means done.
        Ok(_) | Err(kube::Error::SerdeError(_)) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 && wanted.is_empty() => Ok(()),
        Err(source) => Err(ApplyError::Finalizer {
            name: app.name_any(),
            source,
        }),
    }
}
