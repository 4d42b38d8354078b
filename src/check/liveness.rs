//! Liveness: once faults stop and a good revision is written, the fleet
//! settles (docs/local-plane-and-tests.md, "The fault soak"). Judged of one application
//! and its releases as the API server serves them at one moment; the
//! soak asks until it holds or its bound passes.

use serde_json::Value;

use crate::api::naming;

use super::{text, Invariant, Violation};

/// Why the application has not settled yet: `None` once its status is
/// current, its rollout `Complete` and `Ready=True` with every selected
/// pool ready, and every release of it carries its revision, none of
/// them being deleted.
pub fn unsettled(app: &Value, releases: &[Value]) -> Option<String> {
    if app.pointer("/status/observedGeneration") != app.pointer("/metadata/generation") {
        return Some("its status is not of its current generation".into());
    }
    let revision = text(app, "/status/rollout/revision").unwrap_or_default();
    let phase = text(app, "/status/rollout/phase").unwrap_or_default();
    let ready = super::read::ready_condition(app);
    if phase != "Complete" {
        let message = ready.and_then(|c| c["message"].as_str()).unwrap_or("no Ready condition");
        return Some(format!("its rollout of revision {revision} reads {phase}: {message}"));
    }
    if !ready.is_some_and(|c| c["status"] == "True") {
        let message = ready.and_then(|c| c["message"].as_str()).unwrap_or("no Ready condition");
        return Some(format!("it is not Ready: {message}"));
    }
    let count = |pointer: &str| app.pointer(pointer).and_then(Value::as_u64);
    if count("/status/readyPools") != count("/status/selectedPools") {
        return Some(format!(
            "{} of {} pools ready",
            count("/status/readyPools").unwrap_or_default(),
            count("/status/selectedPools").unwrap_or_default()
        ));
    }
    for release in releases {
        let name = text(release, "/metadata/name").unwrap_or_default();
        if release.pointer("/metadata/deletionTimestamp").is_some() {
            return Some(format!("HelmRelease {name} is being deleted"));
        }
        let at = super::annotation(release, naming::ANNOTATION_REVISION);
        if at != Some(revision) {
            return Some(format!(
                "HelmRelease {name} is at revision {}, not {revision}",
                at.unwrap_or("none")
            ));
        }
    }
    None
}

/// The application did not settle within `bound`.
pub fn violation(app: &Value, why: &str, bound: std::time::Duration) -> Violation {
    let name = format!(
        "NodePoolApplication {}/{}",
        text(app, "/metadata/namespace").unwrap_or_default(),
        text(app, "/metadata/name").unwrap_or_default()
    );
    Violation {
        invariant: Invariant::Liveness,
        message: format!("{name} has not settled {}s after the faults stopped: {why}", bound.as_secs()),
        objects: vec![name],
        story: Vec::new(),
    }
}
