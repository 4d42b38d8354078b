//! Completed means completed: once an application reads rollout N of a
//! revision R `Complete` (for its current generation), that rollout is
//! never halted or taken back. The application never reads rollout N of R
//! `Halted`, `RollingBack` or `RolledBack` again, and no release is
//! written rolled back from R by rollout N. A later failure on R is that
//! pool's failure, never the fleet's (docs/rollouts.md, "Completed means
//! completed"). A later rollout of R (a pool's own change, "A pool's own
//! change is a rollout") is judged afresh: its number is another.
//!
//! Judged on what carries R in its own words, the rollback annotation,
//! so a spec change under way (whose release writes the application's
//! status reports only later) is never taken for a rollback.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::naming;

use super::{
    annotation, application_key, application_of_release, halt::resource_version, text, Invariant, Kind,
    Record, Violation,
};

/// How many completed revisions are remembered per application: more
/// than its status history keeps.
const REMEMBERED: usize = 64;

/// The revisions each application (namespace, name) has completed, with
/// the application's resourceVersion that first read each so.
#[derive(Debug, Default)]
pub(super) struct Completions(BTreeMap<(String, String), BTreeMap<String, u64>>);

impl Completions {
    /// Notes a revision the application reads complete, and judges a
    /// completed one that reads halted or rolled back.
    pub(super) fn read_application(&mut self, record: &Record) -> Vec<Violation> {
        debug_assert_eq!(record.kind, Kind::Application);
        let app = &record.object;
        let key = application_key(app);
        if record.deleted {
            self.0.remove(&key);
            return Vec::new();
        }
        let current = app.pointer("/status/observedGeneration") == app.pointer("/metadata/generation");
        let (Some(revision), true) = (text(app, "/status/rollout/revision"), current) else {
            return Vec::new();
        };
        let number = app.pointer("/status/rollout/number").and_then(Value::as_i64);
        let revision = &rollout_key(revision, number);
        let phase = text(app, "/status/rollout/phase").unwrap_or_default();
        let completed = self.0.entry(key.clone()).or_default();
        if phase == "Complete" {
            if completed.len() >= REMEMBERED && !completed.contains_key(revision) {
                // Forget the earliest completed.
                if let Some(oldest) = completed.iter().min_by_key(|(_, at)| **at).map(|(r, _)| r.clone()) {
                    completed.remove(&oldest);
                }
            }
            completed
                .entry(revision.to_string())
                .or_insert_with(|| resource_version(app).unwrap_or_default());
            return Vec::new();
        }
        let Some(at) = completed.get(revision) else {
            return Vec::new();
        };
        if !matches!(phase, "Halted" | "RollingBack" | "RolledBack") {
            return Vec::new();
        }
        vec![Violation {
            invariant: Invariant::CompletedStays,
            message: format!(
                "{}/{} reads revision {revision} {phase} after it read it Complete (resourceVersion {at})",
                key.0, key.1
            ),
            objects: vec![format!("NodePoolApplication {}/{}", key.0, key.1)],
            story: Vec::new(),
        }]
    }

    /// A release written rolled back from a revision its application completed.
    pub(super) fn check_release(&self, record: &Record, previous: Option<&Value>) -> Vec<Violation> {
        let release = &record.object;
        let Some((namespace, app)) = application_of_release(release) else {
            return Vec::new();
        };
        let Some(completed) = self.0.get(&(namespace.to_string(), app.to_string())) else {
            return Vec::new();
        };
        let rolled_back_from =
            |r: &Value| annotation(r, naming::ANNOTATION_ROLLED_BACK_FROM).map(str::to_string);
        let Some(from) = rolled_back_from(release) else {
            return Vec::new();
        };
        // Written before the revision completed (a rollback that then
        // ended), or already so before this write: not taken back now.
        let by = annotation(release, naming::ANNOTATION_ROLLOUT).and_then(|n| n.parse().ok());
        let Some(completed_at) = completed.get(&rollout_key(&from, by)) else {
            return Vec::new();
        };
        let written_after = resource_version(release).is_some_and(|v| v > *completed_at);
        if !written_after || previous.and_then(rolled_back_from).as_deref() == Some(from.as_str()) {
            return Vec::new();
        }
        vec![Violation {
            invariant: Invariant::CompletedStays,
            message: format!(
                "{} was written rolled back from revision {from}, which {namespace}/{app} read Complete \
                 (resourceVersion {completed_at})",
                record.key()
            ),
            objects: vec![
                record.key().to_string(),
                format!("NodePoolApplication {namespace}/{app}"),
            ],
            story: Vec::new(),
        }]
    }
}

/// One rollout of a revision, as the completions are kept: its revision
/// and its number (`status.rollout.number`, a release's
/// `apps.fanout.dev/rollout`), when known.
fn rollout_key(revision: &str, number: Option<i64>) -> String {
    match number {
        Some(n) => format!("{revision}@{n}"),
        None => revision.to_string(),
    }
}
