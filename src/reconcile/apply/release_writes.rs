//! HelmRelease writes: create or apply a desired release, delete one we own,
//! suspend or make one inert under field managers of their own.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::naming;
use crate::reconcile::managed_fields;

use super::{ApplyError, FIELD_MANAGER};

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
/// `decided_on`, when set, is the `resourceVersion` the write was decided
/// on: a release changed since is not written ([`ApplyError::ChangedMeanwhile`]).
pub async fn write_release(
    api: &Api<DynamicObject>,
    name: &str,
    mut object: serde_json::Value,
    exists: bool,
    owned_by_update: bool,
    decided_on: Option<&str>,
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
    let changed = || ApplyError::ChangedMeanwhile {
        object: format!("HelmRelease {name}"),
    };
    let mut precondition = decided_on.map(str::to_string);
    // Ours, whether the cache knew it or the create just found it.
    if owned_by_update || found.is_some() {
        let live = match found {
            Some(live) => live,
            None => api.get(name).await.map_err(failed)?,
        };
        if precondition.is_some() && live.metadata.resource_version != precondition {
            return Err(changed());
        }
        // Folding our fields makes a version of its own, which the apply then expects.
        let folded = own_by_apply(api, name, &live).await.map_err(failed)?;
        if precondition.is_some() && folded.is_some() {
            precondition = folded;
        }
    }
    if let Some(version) = precondition {
        // Server-side apply takes a resourceVersion in the object as a precondition.
        object["metadata"]["resourceVersion"] = serde_json::Value::String(version);
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api.patch(name, &params, &Patch::Apply(&object)).await {
        Ok(_) => Ok(()),
        // A forced apply meets no field conflict: a 409 is the precondition's.
        Err(kube::Error::Api(status)) if status.code == 409 && decided_on.is_some() => Err(changed()),
        Err(source) => Err(failed(source)),
    }
}

/// Folds our `Update` entry of `name`'s managed fields, as `live` holds
/// them, into our `Apply` entry, as client-go's `csaupgrade` does, with
/// the resource version read as a precondition: a release changed meanwhile fails this write, and the
/// next reconcile reads it afresh. Returns the version it made, if it made one.
async fn own_by_apply(
    api: &Api<DynamicObject>,
    name: &str,
    live: &DynamicObject,
) -> Result<Option<String>, kube::Error> {
    let Some(entries) = live.metadata.managed_fields.as_deref().and_then(managed_fields::upgraded) else {
        return Ok(None);
    };
    let patch = json!({ "metadata": {
        "resourceVersion": live.metadata.resource_version,
        "managedFields": entries,
    } });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let folded = api.patch(name, &params, &Patch::Merge(&patch)).await?;
    Ok(folded.metadata.resource_version)
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

/// Lets a release being deleted go without its uninstall, its mark saying
/// since when its site has not answered: suspended by a field manager of
/// its own ([`naming::UNINSTALL_SKIPPED_FIELD_MANAGER`]), helm-controller
/// skips the uninstall and drops its finalizer.
pub async fn skip_uninstall(
    api: &Api<DynamicObject>,
    skipped: &crate::reconcile::plan::UninstallSkipped,
    uid: Option<&str>,
) -> Result<(), ApplyError> {
    let why = format!("its site has not answered since {}: deleted without uninstalling", skipped.since);
    let mark = Some((naming::ANNOTATION_UNINSTALL_SKIPPED, why.as_str()));
    suspend_marked(api, &skipped.release, uid, naming::UNINSTALL_SKIPPED_FIELD_MANAGER, mark).await
}

/// Marks when a release was first seen Ready on its latest spec (`at`),
/// or takes the mark back (`None`): a server-side apply under a field
/// manager of its own ([`naming::READY_FIELD_MANAGER`]) holding only the
/// annotation, which the releases' writer neither holds nor drops. It
/// changes no spec: helm-controller does nothing for it.
pub async fn mark_ready(
    api: &Api<DynamicObject>,
    mark: &crate::reconcile::plan::ReadyMark,
    uid: Option<&str>,
) -> Result<(), ApplyError> {
    let name = mark.release.as_str();
    let mut object = json!({
        "apiVersion": crate::reconcile::release::build::HELMRELEASE_API_VERSION,
        "kind": crate::reconcile::release::build::HELMRELEASE_KIND,
        "metadata": { "name": name, "uid": uid },
    });
    if let Some(at) = &mark.at {
        object["metadata"]["annotations"] = json!({ naming::ANNOTATION_READY_AT: at });
        if let Some(failures) = &mark.failures {
            object["metadata"]["annotations"][naming::ANNOTATION_CHECK_FAILURES] = json!(failures);
        }
    }
    apply_as(api, name, naming::READY_FIELD_MANAGER, &object).await
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
        "apiVersion": crate::reconcile::release::build::HELMRELEASE_API_VERSION,
        "kind": crate::reconcile::release::build::HELMRELEASE_KIND,
        "metadata": { "name": name, "uid": uid },
    });
    if let Some((annotation, value)) = mark {
        object["metadata"]["annotations"] = json!({ annotation: value });
        object["spec"] = json!({ "suspend": true });
    }
    apply_as(api, name, manager, &object).await
}

/// Applies `object`, the release `name` as `manager` would have it; a
/// release gone, or replaced by another of that name, is no error.
async fn apply_as(
    api: &Api<DynamicObject>,
    name: &str,
    manager: &str,
    object: &Value,
) -> Result<(), ApplyError> {
    let params = PatchParams::apply(manager).force();
    match api.patch(name, &params, &Patch::Apply(object)).await {
        Ok(_) => Ok(()),
        // Gone, or replaced by another object of that name.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(source) => Err(ApplyError::Apply {
            object: format!("HelmRelease {name}"),
            source,
        }),
    }
}
