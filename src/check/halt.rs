//! A halt holds: once an application's status reads its revision R
//! `Halted`, `RollingBack` or `RolledBack` (for its current generation),
//! no pool that had not taken R is written at R until the revision
//! changes. Ordered by resourceVersion, which etcd numbers in one
//! sequence, so a release written before the halt and delivered after it
//! by its own watch is not taken for one written after.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::naming;

use super::{application_of_release, text, Invariant, Kind, Record, Violation};

/// A halt seen on an application.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Halt {
    revision: String,
    phase: String,
    /// The application's resourceVersion that first read it.
    at: u64,
}

/// The halts in force, by application (namespace, name).
#[derive(Debug, Default)]
pub(super) struct Halts(BTreeMap<(String, String), Halt>);

impl Halts {
    /// Notes a halt the application's status reads, and forgets one whose
    /// revision the application has left.
    pub(super) fn read_application(&mut self, record: &Record) {
        debug_assert_eq!(record.kind, Kind::Application);
        let app = &record.object;
        let key = (
            text(app, "/metadata/namespace").unwrap_or_default().to_string(),
            text(app, "/metadata/name").unwrap_or_default().to_string(),
        );
        let current = app.pointer("/status/observedGeneration") == app.pointer("/metadata/generation");
        let revision = text(app, "/status/rollout/revision");
        let phase = text(app, "/status/rollout/phase").unwrap_or_default();
        if let Some(halt) = self.0.get(&key) {
            // A new revision (the spec changed) lifts the halt.
            if current && revision.is_some_and(|r| r != halt.revision) {
                self.0.remove(&key);
            }
        }
        let halted = matches!(phase, "Halted" | "RollingBack" | "RolledBack");
        if let (true, true, Some(revision), None) = (current, halted, revision, self.0.get(&key)) {
            let at = resource_version(app).unwrap_or_default();
            let halt = Halt {
                revision: revision.to_string(),
                phase: phase.to_string(),
                at,
            };
            self.0.insert(key, halt);
        }
    }

    /// A release written at a halted revision by a pool that had not taken it.
    pub(super) fn check_release(&self, record: &Record, previous: Option<&Value>) -> Vec<Violation> {
        let release = &record.object;
        let Some((namespace, app)) = application_of_release(release) else {
            return Vec::new();
        };
        let Some(halt) = self.0.get(&(namespace.to_string(), app.to_string())) else {
            return Vec::new();
        };
        let revision = |r: &Value| {
            let annotations = r.pointer("/metadata/annotations");
            let rolled_back = annotations.and_then(|a| a.get(naming::ANNOTATION_ROLLED_BACK_FROM)).is_some();
            let at = annotations.and_then(|a| a.get(naming::ANNOTATION_REVISION)).and_then(Value::as_str);
            at.filter(|_| !rolled_back).map(str::to_string)
        };
        let now = revision(release);
        let before = previous.and_then(revision);
        let written_after = resource_version(release).is_some_and(|v| v > halt.at);
        if now.as_deref() != Some(halt.revision.as_str()) || before == now || !written_after {
            return Vec::new();
        }
        vec![Violation {
            invariant: Invariant::HaltHolds,
            message: format!(
                "{} was written at revision {} after {namespace}/{app} read {} for it (resourceVersion {}); \
                 it was at {} before",
                record.key(),
                halt.revision,
                halt.phase,
                halt.at,
                before.as_deref().unwrap_or("no release")
            ),
            objects: vec![
                record.key().to_string(),
                format!("NodePoolApplication {namespace}/{app}"),
            ],
            story: Vec::new(),
        }]
    }
}

/// An object's resourceVersion as etcd numbers it.
pub(super) fn resource_version(object: &Value) -> Option<u64> {
    text(object, "/metadata/resourceVersion")?.parse().ok()
}
