//! `deletionPolicy: Orphan`: releases left in place as HelmReleases of
//! their own (see [`crate::reconcile::orphan`] for what the patch is).

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::{ApplyError, SharedCharts, FIELD_MANAGER};

/// Leaves an owned release in place as a HelmRelease of its own (see
/// [`crate::reconcile::orphan`]): read afresh, then merge-patched with its uid as a
/// precondition, so only the release observed is changed. `charts` finds
/// the shared HelmChart its `chartRef` points at.
pub async fn orphan_release(
    api: &Api<DynamicObject>,
    charts: &SharedCharts,
    name: &str,
    app: &impl Resource,
) -> Result<(), ApplyError> {
    let object = format!("HelmRelease {name}");
    let failed = |source| ApplyError::Orphan {
        object: object.clone(),
        source,
    };
    let Some(current) = api.get_opt(name).await.map_err(failed)? else {
        return Ok(());
    };
    let uid = app.meta().uid.clone().unwrap_or_default();
    if !crate::reconcile::observe::owned_by(&current, Some(&uid)) {
        return Ok(());
    }
    let release = serde_json::to_value(&current).map_err(|e| failed(kube::Error::SerdeError(e)))?;
    let store = match release.pointer("/spec/chartRef/kind").and_then(serde_json::Value::as_str) {
        Some("OCIRepository") => &charts.ocirepositories,
        _ => &charts.helmcharts,
    };
    store.wait_until_ready().await.map_err(|_| ApplyError::ChartWatchStopped)?;
    let chart = release
        .pointer("/spec/chartRef")
        .filter(|r| r["kind"] == "HelmChart" || r["kind"] == "OCIRepository")
        .and_then(|r| {
            let name = r["name"].as_str()?;
            let namespace = r["namespace"].as_str().or(current.metadata.namespace.as_deref())?;
            store
                .state()
                .into_iter()
                .find(|c| c.name_any() == name && c.namespace().as_deref() == Some(namespace))
        })
        .and_then(|c| serde_json::to_value(c.as_ref()).ok());
    if release.pointer("/spec/chartRef").is_some() && chart.is_none() {
        tracing::warn!(release = %name, "orphaning a release whose shared chart is gone: it keeps its chartRef");
    }
    let mut patch = crate::reconcile::orphan::patch(&release, &app.name_any(), &uid, chart.as_ref());
    patch["metadata"]["uid"] = json!(current.metadata.uid);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    match api.patch(name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        // Gone, or replaced by an object that is not the one observed.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(source) => Err(failed(source)),
    }
}

/// Every release this application owns, orphaned: the application is going
/// and its releases are to stay.
pub async fn orphan_all(
    client: &Client,
    charts: &SharedCharts,
    app: &impl Resource,
) -> Result<(), ApplyError> {
    let namespace = app.namespace().unwrap_or_default();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &crate::reconcile::observe::helmrelease_resource());
    let uid = app.meta().uid.clone();
    let listed = api
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|source| ApplyError::Orphan {
            object: format!("the HelmReleases of namespace {namespace}"),
            source,
        })?;
    let owned = listed
        .items
        .iter()
        .filter(|r| crate::reconcile::observe::owned_by(*r, uid.as_deref()));
    for release in owned {
        orphan_release(&api, charts, &release.name_any(), app).await?;
    }
    Ok(())
}
