//! The shared charts (HelmCharts, pinned OCIRepositories) an application
//! makes in its source's namespace: made, updated and pruned.

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use crate::api::naming;
use crate::api::NodePoolApplication;
use crate::chart::shared::{self as shared_chart, ChartKind, ChartRef};

use super::{delete_observed, ApplyError, FIELD_MANAGER};

/// Makes sure the shared HelmChart exists with the desired spec and returns
/// it as the API server has it. Writes nothing when every field we own
/// already matches (see [`shared_chart::spec_matches`]); a field the
/// application no longer sets is removed by the apply, as server-side apply
/// drops what a manager stops setting. A HelmChart of that name that is not
/// ours is never touched.
pub async fn ensure_chart(
    client: &Client,
    chart: &ChartRef,
    desired: &serde_json::Value,
) -> Result<serde_json::Value, ApplyError> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &chart.namespace, &chart.kind.resource());
    let object = format!("{} {}/{}", chart.kind.as_str(), chart.namespace, chart.name);
    let failed = |source| ApplyError::Apply {
        object: object.clone(),
        source,
    };
    let as_json =
        |found: DynamicObject| serde_json::to_value(found).map_err(|e| failed(kube::Error::SerdeError(e)));
    let mut exists = false;
    if let Some(current) = api.get_opt(&chart.name).await.map_err(failed)? {
        let current = as_json(current)?;
        // Ours, and this application's: another application's chart of
        // the same name is never taken over.
        let managed = current.pointer("/metadata/labels").and_then(|l| l.get(naming::LABEL_MANAGED_BY))
            == Some(&json!(naming::MANAGER));
        let owner = |object: &serde_json::Value| {
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(shared_chart::ANNOTATION_APPLICATION))
                .cloned()
        };
        if !managed || owner(&current).is_none() || owner(&current) != owner(desired) {
            return Err(ApplyError::NameClash { object });
        }
        if shared_chart::spec_matches(desired, &current) {
            return Ok(current);
        }
        exists = true;
    }
    let mut params = PatchParams::apply(FIELD_MANAGER);
    if exists {
        params = params.force();
    }
    let applied = api.patch(&chart.name, &params, &Patch::Apply(desired)).await.map_err(failed)?;
    as_json(applied)
}

/// Deletes this application's shared HelmCharts, wherever they are, other
/// than those in `keep`. They are found by ownership (our managed-by label
/// and the application's annotation) in `charts`, the watch cache of every
/// HelmChart we manage, not by where the application's source is now: a
/// source moved to another namespace leaves its old chart behind it.
pub async fn prune_charts(
    client: &Client,
    charts: &SharedCharts,
    app: &impl Resource,
    keep: &[&ChartRef],
) -> Result<(), ApplyError> {
    let owner =
        ObjectRef::<NodePoolApplication>::new(&app.name_any()).within(&app.namespace().unwrap_or_default());
    for (kind, store) in [
        (ChartKind::HelmChart, &charts.helmcharts),
        (ChartKind::OciRepository, &charts.ocirepositories),
    ] {
        // Before its first list the cache is empty: pruning must not take
        // that for "no charts", least of all before releasing the finalizer.
        store.wait_until_ready().await.map_err(|_| ApplyError::ChartWatchStopped)?;
        for chart in store.state() {
            if shared_chart::owner_of::<NodePoolApplication>(&chart).as_ref() != Some(&owner) {
                continue;
            }
            let (name, namespace) = (chart.name_any(), chart.namespace().unwrap_or_default());
            if keep.iter().any(|k| k.kind == kind && k.name == name && k.namespace == namespace) {
                continue;
            }
            let uid = chart.metadata.uid.clone().unwrap_or_default();
            let api = Api::namespaced_with(client.clone(), &namespace, &kind.resource());
            delete_observed(&api, kind.as_str(), &name, &uid).await?;
        }
    }
    Ok(())
}

/// The watch caches of the shared charts we manage, in every namespace:
/// HelmCharts, and the OCIRepositories pinned for a `spec.chartRef`.
#[derive(Clone)]
pub struct SharedCharts {
    pub helmcharts: Store<DynamicObject>,
    pub ocirepositories: Store<DynamicObject>,
}
