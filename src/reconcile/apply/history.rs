//! The application's revision records written: a new record by
//! server-side apply, owned by the application; an outcome or a new
//! number by a merge patch; a record past the limit deleted. Only records
//! the application is the controller owner of ever reach here.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::{json, Value};

use crate::api::NodePoolApplication;
use crate::reconcile::history::{self, HistoryWrites, Record};

use super::{ApplyError, FIELD_MANAGER};

/// Carries the history's writes out, in order: the record, the outcome,
/// then what is forgotten.
pub async fn write_history(
    api: &Api<ControllerRevision>,
    app: &NodePoolApplication,
    writes: &HistoryWrites,
) -> Result<(), ApplyError> {
    let object = |name: &str| format!("ControllerRevision {name}");
    if let Some(record) = &writes.record {
        write_record(api, app, record).await.map_err(|source| ApplyError::Apply {
            object: object(&record.name),
            source,
        })?;
    }
    if let Some((name, outcome)) = &writes.mark {
        let patch = json!({ "metadata": { "annotations": { history::ANNOTATION_OUTCOME: outcome } } });
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| ApplyError::Apply {
                object: object(name),
                source,
            })?;
    }
    for name in &writes.forget {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(ApplyError::Delete {
                    object: object(name),
                    source,
                })
            }
        }
    }
    Ok(())
}

async fn write_record(
    api: &Api<ControllerRevision>,
    app: &NodePoolApplication,
    record: &Record,
) -> Result<(), kube::Error> {
    let mut annotations = serde_json::Map::new();
    if let Some(outcome) = record.outcome {
        annotations.insert(history::ANNOTATION_OUTCOME.into(), Value::String(outcome.into()));
    }
    let Some(data) = &record.data else {
        // A record that exists: its data cannot change, its number can.
        let patch = json!({ "revision": record.number, "metadata": { "annotations": annotations } });
        api.patch(&record.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        return Ok(());
    };
    if let Some(version) = &record.chart_version {
        annotations.insert(history::ANNOTATION_CHART_VERSION.into(), Value::String(version.clone()));
    }
    let owner = app.controller_owner_ref(&()).map(|o| vec![o]).unwrap_or_default();
    let object = json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": record.name,
            "namespace": app.namespace(),
            "labels": history::labels(&app.name_any(), &record.revision),
            "annotations": annotations,
            "ownerReferences": owner,
        },
        "data": data,
        "revision": record.number,
    });
    api.patch(&record.name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&object))
        .await?;
    Ok(())
}
