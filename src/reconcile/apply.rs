//! Apply: writes what `plan` decided, with server-side apply under one field
//! manager, and deletes only releases this application owns.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Deserialize;
use serde_json::json;

use crate::api::naming;
use crate::api::{NodePoolApplication, NodePoolApplicationStatus};
use crate::chart::shared::{self as shared_chart, ChartKind, ChartRef};
use crate::reconcile::managed_fields;

pub use crate::reconcile::managed_fields::FIELD_MANAGER;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// `object` is `<Kind> <name>`, as in every variant here: releases and
    /// shared HelmCharts go through the same writes.
    #[error(
        "{object} exists and was not created by this application: rename or delete it, or leave this pool out"
    )]
    NameClash { object: String },
    #[error(
        "releaseName: Helm release {helm_release} is claimed by {holder}; two HelmReleases would \
         overwrite each other's installs, so this pool's release drives nothing: give each \
         application's releases their own names (include {{{{app.name}}}} in releaseName) or \
         storageNamespace"
    )]
    HelmReleaseClaimed { helm_release: String, holder: String },
    #[error("cannot claim Helm release {helm_release} (Lease in the application's namespace): {source}")]
    Claim {
        helm_release: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot apply {object}: {source}")]
    Apply {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete {object}: {source}")]
    Delete {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update the status of NodePoolApplication {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the watch of shared charts (HelmCharts, OCIRepositories) has stopped, so this application's charts cannot be found; the controller is shutting down")]
    ChartWatchStopped,
    #[error("cannot orphan {object} (deletionPolicy: Orphan): {source}")]
    Orphan {
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update the finalizers of NodePoolApplication {name}: {source}")]
    Finalizer {
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl ApplyError {
    /// Whether trying again may succeed: the API server busy, a conflict,
    /// a timeout, no answer at all. Refusals no retry mends (invalid,
    /// forbidden, over quota, a name another object holds) need a person.
    pub fn retriable(&self) -> bool {
        let source = match self {
            Self::NameClash { .. } | Self::HelmReleaseClaimed { .. } => return false,
            Self::ChartWatchStopped => return true,
            Self::Claim { source, .. }
            | Self::Apply { source, .. }
            | Self::Delete { source, .. }
            | Self::Status { source, .. }
            | Self::Orphan { source, .. }
            | Self::Finalizer { source, .. } => source,
        };
        match source {
            kube::Error::Api(status) => matches!(status.code, 408 | 409 | 429) || status.code >= 500,
            _ => true,
        }
    }

    /// A short category for metrics, logs and Event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::NameClash { .. } => "NameClash",
            Self::HelmReleaseClaimed { .. } => "ReleaseNameConflict",
            Self::Claim { .. } | Self::Apply { .. } => "ApplyFailed",
            Self::Delete { .. } | Self::ChartWatchStopped => "PruneFailed",
            Self::Status { .. } => "StatusFailed",
            Self::Finalizer { .. } => "FinalizerFailed",
            Self::Orphan { .. } => "OrphanFailed",
        }
    }
}

/// Writes one desired HelmRelease.
///
/// `exists` says whether observe saw this release among the owned ones. A
/// new release is created by POST (cheaper for the API server than an
/// apply; see [`crate::reconcile::managed_fields`]): if an object of that name exists
/// already, it is taken for ours only when it carries the same controller
/// owner reference (our own create, not yet in the cache), and a name
/// clash otherwise, instead of this controller taking another's object
/// over. An owned release is applied with force, reclaiming fields that
/// someone edited by hand; `owned_by_update` says our fields on it are
/// still recorded as a create's, to be made ours by apply first.
pub async fn write_release(
    api: &Api<DynamicObject>,
    name: &str,
    object: serde_json::Value,
    exists: bool,
    owned_by_update: bool,
) -> Result<(), ApplyError> {
    let failed = |source| ApplyError::Apply {
        object: format!("HelmRelease {name}"),
        source,
    };
    // What the create found under that name, if it found anything.
    let mut found = None;
    if !exists {
        // Read from the manifest by reference: the create path runs once
        // per new release, thousands of times in a fan-out.
        let release = DynamicObject::deserialize(&object).map_err(|e| failed(kube::Error::SerdeError(e)))?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match api.create(&params, &release).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let live = api.get(name).await.map_err(failed)?;
                let controller = |owners: &[OwnerReference]| {
                    owners.iter().find(|r| r.controller == Some(true)).map(|r| r.uid.clone())
                };
                let ours = controller(release.owner_references());
                if ours.is_none() || controller(live.owner_references()) != ours {
                    return Err(ApplyError::NameClash {
                        object: format!("HelmRelease {name}"),
                    });
                }
                found = Some(live);
            }
            Err(source) => return Err(failed(source)),
        }
    }
    // Ours, whether the cache knew it or the create just found it.
    if owned_by_update || found.is_some() {
        let live = match found {
            Some(live) => live,
            None => api.get(name).await.map_err(failed)?,
        };
        own_by_apply(api, name, &live).await.map_err(failed)?;
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(&object)).await.map(drop).map_err(failed)
}

/// Folds our `Update` entry of `name`'s managed fields, as `live` holds
/// them, into our `Apply` entry, as client-go's `csaupgrade` does, with
/// the resource version read as a precondition: a release changed meanwhile fails this write, and the
/// next reconcile reads it afresh.
async fn own_by_apply(api: &Api<DynamicObject>, name: &str, live: &DynamicObject) -> Result<(), kube::Error> {
    let Some(entries) = live.metadata.managed_fields.as_deref().and_then(managed_fields::upgraded) else {
        return Ok(());
    };
    let patch = json!({ "metadata": {
        "resourceVersion": live.metadata.resource_version,
        "managedFields": entries,
    } });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(&patch)).await.map(drop)
}

/// Deletes an object this application owns (a release or a shared chart);
/// the uid precondition makes sure the object deleted is the one observed,
/// not a newer one of the same name.
pub async fn delete_observed(
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
    uid: &str,
) -> Result<(), ApplyError> {
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
            object: format!("{kind} {name}"),
            source,
        }),
    }
}

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

/// Suspends a release with its application, or takes that back: a
/// server-side apply under a field manager of its own
/// ([`naming::SUSPEND_FIELD_MANAGER`]) holding only `spec.suspend: true`
/// and our mark, or, to resume, holding nothing, which removes exactly
/// what suspending set (server-side apply drops the fields a manager stops
/// applying) and leaves the fields the releases' writer owns as they are.
/// The uid is a precondition: a release deleted meanwhile is not made anew.
pub async fn set_suspended(
    api: &Api<DynamicObject>,
    name: &str,
    uid: Option<&str>,
    suspended: bool,
) -> Result<(), ApplyError> {
    let mark = suspended.then_some((naming::ANNOTATION_SUSPENDED_WITH_APPLICATION, "true"));
    suspend_marked(api, name, uid, naming::SUSPEND_FIELD_MANAGER, mark).await
}

/// Makes a release inert (`message` says why), or takes that back (`None`):
/// suspended by a field manager of its own ([`naming::INERT_FIELD_MANAGER`]),
/// helm-controller neither upgrades nor, when it is deleted, uninstalls the
/// Helm release another application's release drives.
pub async fn set_inert(
    api: &Api<DynamicObject>,
    name: &str,
    uid: Option<&str>,
    message: Option<&str>,
) -> Result<(), ApplyError> {
    let mark = message.map(|m| (naming::ANNOTATION_INERT, m));
    suspend_marked(api, name, uid, naming::INERT_FIELD_MANAGER, mark).await
}

/// Applies, as `manager`, `spec.suspend: true` and the annotation `mark`,
/// or nothing when `mark` is `None` (which takes back what that manager set).
async fn suspend_marked(
    api: &Api<DynamicObject>,
    name: &str,
    uid: Option<&str>,
    manager: &str,
    mark: Option<(&str, &str)>,
) -> Result<(), ApplyError> {
    let mut object = json!({
        "apiVersion": crate::reconcile::release::HELMRELEASE_API_VERSION,
        "kind": crate::reconcile::release::HELMRELEASE_KIND,
        "metadata": { "name": name, "uid": uid },
    });
    if let Some((annotation, value)) = mark {
        object["metadata"]["annotations"] = json!({ annotation: value });
        object["spec"] = json!({ "suspend": true });
    }
    let params = PatchParams::apply(manager).force();
    match api.patch(name, &params, &Patch::Apply(&object)).await {
        Ok(_) => Ok(()),
        // Gone, or replaced by another object of that name.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(source) => Err(ApplyError::Apply {
            object: format!("HelmRelease {name}"),
            source,
        }),
    }
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

/// Says on the application that its spec cannot be read: the Ready and
/// Stalled conditions, by merge patch so the last known pools stay. The
/// answer, the whole object, is just as unreadable and is not decoded.
pub async fn report_unreadable(
    api: &Api<NodePoolApplication>,
    app: &impl Resource,
    reason: &str,
    message: &str,
) -> Result<(), ApplyError> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let condition = |type_: &str, status: &str| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "observedGeneration": app.meta().generation, "lastTransitionTime": now,
        })
    };
    let patch = json!({ "status": {
        "observedGeneration": app.meta().generation,
        "conditions": [condition("Ready", "False"), condition("Stalled", "True")],
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
