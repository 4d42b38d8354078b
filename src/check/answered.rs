//! No pool passes on an unanswered check: a pool is done with a revision
//! only once `minReadySeconds` have passed since it was Ready on it and
//! its checks were answered at or after that moment, within bounds
//! (docs/rollouts.md, "Metric checks": "A pool is never passed on a check
//! that was not answered"). Judged of one application and its releases as
//! the API server serves them at one moment, against the answers the
//! query API gave: the soak serves that API, so it knows them.
//!
//! An answer is known by the evaluation time the controller asked it at
//! (the query's `time`, the time the controller keeps the answer at), for
//! the pool and revision the query names; the soak's end is the one the
//! controller counts, from the release's `ready-at` mark.
//!
//! "A revision that completed is judged no more: a pool that joins later
//! is installed and reported on as before." So once the status reads the
//! revision `Complete`, or names it the last revision that completed (a
//! completed revision reads `Progressing` while a pool joins it), only the
//! pools whose soak ended before the caller last saw that rollout under
//! way are judged: those were done within it.

use std::collections::BTreeMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::api::naming;

use super::{annotation, taken_revision, text, Invariant, Violation};

/// The answers within bounds a query API gave, by (pool, revision): the
/// evaluation time of each.
pub type Answers = BTreeMap<(String, String), Vec<Timestamp>>;

/// How many pools read done were judged, and the violations among them.
/// `under_way_until`: the last time the caller saw this rollout of the
/// revision under way (not `Complete`), if it did.
pub fn judge(
    app: &Value,
    releases: &[Value],
    answers: &Answers,
    under_way_until: Option<Timestamp>,
) -> (u64, Vec<Violation>) {
    let has_checks = app
        .pointer("/spec/rollout/analysis/checks")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    let current = app.pointer("/status/observedGeneration") == app.pointer("/metadata/generation");
    let Some(revision) = text(app, "/status/rollout/revision").filter(|_| has_checks && current) else {
        return (0, Vec::new());
    };
    let min_ready = app.pointer("/spec/rollout/minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
    let complete = completed(app);
    let done = app
        .pointer("/status/pools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| p["rollout"] == "Done" && p["upToDate"] == true)
        .filter_map(|p| p["pool"].as_str());
    let name = format!(
        "NodePoolApplication {}/{}",
        text(app, "/metadata/namespace").unwrap_or_default(),
        text(app, "/metadata/name").unwrap_or_default()
    );
    let mut judged = 0;
    let mut found = Vec::new();
    for pool in done {
        let release = releases.iter().find(|r| {
            annotation(r, naming::ANNOTATION_POOL_NAME) == Some(pool) && taken_revision(r) == Some(revision)
        });
        // The soak's end, on the controller's clock: with no mark yet, the
        // controller counts from Flux's own time, which is not judged here.
        let Some((release, ready_at)) = release.and_then(|r| {
            let at = annotation(r, naming::ANNOTATION_READY_AT)?.parse::<Timestamp>().ok()?;
            Some((r, at))
        }) else {
            continue;
        };
        let due = ready_at.checked_add(SignedDuration::from_secs(min_ready)).unwrap_or(ready_at);
        // Complete: a pool that may have joined after the completion is no
        // pool of the rollout.
        if complete && under_way_until.is_none_or(|until| due > until) {
            continue;
        }
        judged += 1;
        // The query's time is sent to the millisecond.
        let slack = SignedDuration::from_millis(1);
        let times = answers.get(&(pool.to_string(), revision.to_string()));
        if times.is_some_and(|t| t.iter().any(|at| at.checked_add(slack).is_ok_and(|at| at >= due))) {
            continue;
        }
        let release_name = text(release, "/metadata/name").unwrap_or_default();
        let given = times
            .map_or("none".to_string(), |t| t.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "));
        found.push(Violation {
            invariant: Invariant::ChecksAnswered,
            message: format!(
                "{name} reads pool {pool} done with revision {revision}, but no check of it was answered at \
                 or after its soak's end ({due}: Ready at {ready_at}, minReadySeconds {min_ready}); answers \
                 within bounds at: {given}"
            ),
            objects: vec![name.clone(), format!("HelmRelease {release_name}")],
            story: Vec::new(),
        });
    }
    (judged, found)
}

/// Whether the status says the revision it rolls out completed: it reads
/// `Complete`, or names it the last revision that completed.
pub fn completed(app: &Value) -> bool {
    let revision = text(app, "/status/rollout/revision");
    text(app, "/status/rollout/phase") == Some("Complete")
        || (revision.is_some() && text(app, "/status/rollout/lastCompleteRevision") == revision)
}
