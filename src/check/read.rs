//! What the invariants read of an object: whose it is, its annotations,
//! labels and fields, and what its Ready condition says.

use serde_json::Value;

use super::{Kind, Record};

/// The application a record concerns, by namespace and name: itself, or
/// the one a release is labelled with.
pub(super) fn application_of(record: &Record) -> Option<(String, String)> {
    let (namespace, name) = match record.kind {
        Kind::Application => {
            (text(&record.object, "/metadata/namespace")?, text(&record.object, "/metadata/name")?)
        }
        Kind::HelmRelease => application_of_release(&record.object)?,
    };
    Some((namespace.to_string(), name.to_string()))
}

/// An application's (namespace, name), as the invariants key what they
/// remember of it.
pub(super) fn application_key(app: &Value) -> (String, String) {
    let field = |pointer: &str| text(app, pointer).unwrap_or_default().to_string();
    (field("/metadata/namespace"), field("/metadata/name"))
}

/// A release's namespace, and the application its label names.
pub(super) fn application_of_release(release: &Value) -> Option<(&str, &str)> {
    let labels = release.pointer("/metadata/labels")?;
    let app = labels.get(crate::api::naming::LABEL_APPLICATION)?.as_str()?;
    Some((text(release, "/metadata/namespace")?, app))
}

/// A release's namespace and application, when that application (the
/// one its label names) is its controller owner: a release that copies
/// the label (someone else's, made from one of ours) is none of its
/// pools, and says nothing of where its rollout stands (fourth review,
/// E10: such a release, lacking the revision, kept a completed revision's
/// halt in force for the `a halt holds` rule).
pub(super) fn owned_release_of(release: &Value) -> Option<(&str, &str)> {
    let (namespace, app) = application_of_release(release)?;
    let owners = release.pointer("/metadata/ownerReferences")?.as_array()?;
    owners
        .iter()
        .any(|o| o["kind"] == "NodePoolApplication" && o["name"] == app && o["controller"] == true)
        .then_some((namespace, app))
}

/// An annotation of an object.
pub(super) fn annotation<'a>(object: &'a Value, name: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations")?.get(name)?.as_str()
}

/// The revision a release was written at, unless it was taken back from
/// one (`apps.fanout.dev/rolled-back-from`): what a pool took, as the
/// rules about taking a revision count it.
pub(super) fn taken_revision(release: &Value) -> Option<&str> {
    let rolled_back = annotation(release, crate::api::naming::ANNOTATION_ROLLED_BACK_FROM).is_some();
    annotation(release, crate::api::naming::ANNOTATION_REVISION).filter(|_| !rolled_back)
}

/// A label of an object.
pub(super) fn label<'a>(object: &'a Value, name: &str) -> Option<&'a str> {
    object.pointer("/metadata/labels")?.get(name)?.as_str()
}

/// A text field of an object.
pub(super) fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

/// The Ready reasons of a release Flux only waits on: its source, its
/// artifact, a dependency. Its workload runs as before.
pub(super) const WAITING_REASONS: [&str; 3] = ["SourceNotReady", "ArtifactFailed", "DependencyNotReady"];

/// An object's Ready condition (a release's, an application's), if it has one.
pub(super) fn ready_condition(release: &Value) -> Option<&Value> {
    let conditions = release.pointer("/status/conditions").and_then(Value::as_array)?;
    conditions.iter().find(|c| c["type"] == "Ready")
}

/// Whether a release was available before a write, as docs/rollouts.md
/// counts it: Ready for its current generation, or not Ready only because
/// Flux waits on something outside it (its source, its artifact, a
/// dependency: `SourceNotReady`, `ArtifactFailed`, `DependencyNotReady`;
/// on a pool of this cluster, Helm's storage its API server could not
/// give: `StateError`), which leaves its workload running. Only a release
/// unavailable in any other way starts at once, whatever the slots and
/// approvals.
pub(super) fn available_before(release: &Value) -> bool {
    let of_this_cluster = release.pointer("/spec/kubeConfig").is_none_or(Value::is_null);
    let waiting = ready_condition(release).is_some_and(|c| {
        c["status"] == "False"
            && (WAITING_REASONS.iter().any(|w| c["reason"] == *w)
                || (of_this_cluster && c["reason"] == "StateError"))
    });
    ready_now(release) || waiting
}

/// A release's Ready condition says it is Ready for its current generation.
pub(super) fn ready_now(release: &Value) -> bool {
    let generation = release.pointer("/metadata/generation").and_then(Value::as_i64);
    ready_condition(release).is_some_and(|c| {
        c["status"] == "True"
            && generation.is_some()
            && release.pointer("/status/observedGeneration").and_then(Value::as_i64) == generation
    })
}
