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
        let patch = json!({ "metadata": { "annotations": {
            history::ANNOTATION_OUTCOME: outcome,
            history::ANNOTATION_HALTED_JUDGEMENT: writes.halted_judgement,
            history::ANNOTATION_HALTED_BECAUSE: writes.halted_because,
        } } });
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
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let Some(data) = &record.data else {
        // A record that exists: its data cannot change, its number can.
        let patch = renumbering(record, &now);
        api.patch(&record.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        return Ok(());
    };
    let mut annotations = serde_json::Map::new();
    if let Some(outcome) = record.outcome {
        annotations.insert(history::ANNOTATION_OUTCOME.into(), Value::String(outcome.into()));
    }
    if let Some(judgement) = &record.halted_judgement {
        annotations.insert(history::ANNOTATION_HALTED_JUDGEMENT.into(), Value::String(judgement.clone()));
    }
    if let Some(because) = &record.halted_because {
        annotations.insert(history::ANNOTATION_HALTED_BECAUSE.into(), Value::String(because.clone()));
    }
    annotations.insert(history::ANNOTATION_ROLLED_OUT_AT.into(), Value::String(now));
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

/// The merge patch that renumbers a record of a revision that came back:
/// a new rollout of it, begun `now`, whose outcome is not the earlier
/// one's (an outcome not known yet is removed, not left as it was).
fn renumbering(record: &Record, now: &str) -> Value {
    let outcome = record.outcome.map_or(Value::Null, |o| Value::String(o.into()));
    let halted_judgement = record.halted_judgement.clone().map_or(Value::Null, Value::String);
    let halted_because = record.halted_because.clone().map_or(Value::Null, Value::String);
    json!({
        "revision": record.number,
        "metadata": { "annotations": {
            history::ANNOTATION_OUTCOME: outcome,
            history::ANNOTATION_HALTED_JUDGEMENT: halted_judgement,
            history::ANNOTATION_HALTED_BECAUSE: halted_because,
            history::ANNOTATION_ROLLED_OUT_AT: now,
        } },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renumbered_record_starts_a_new_rollout_with_no_outcome_of_the_last() {
        let record = Record {
            name: "shop-bbb".into(),
            revision: "bbb".into(),
            number: 7,
            data: None,
            chart_version: None,
            outcome: None,
            halted_judgement: None,
            halted_because: None,
        };
        let patch = renumbering(&record, "2030-01-01T00:00:00Z");
        let annotations = &patch["metadata"]["annotations"];
        assert_eq!(patch["revision"], json!(7));
        // A merge patch removes a key set to null: the old outcome goes.
        assert!(annotations.get(history::ANNOTATION_OUTCOME).is_some_and(Value::is_null), "{patch}");
        assert_eq!(annotations[history::ANNOTATION_ROLLED_OUT_AT], json!("2030-01-01T00:00:00Z"));
        let complete = Record {
            outcome: Some(history::COMPLETE),
            ..record
        };
        let annotations = renumbering(&complete, "now")["metadata"]["annotations"].clone();
        assert_eq!(annotations[history::ANNOTATION_OUTCOME], json!(history::COMPLETE));
    }
}
