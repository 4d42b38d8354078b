//! A halt holds: once an application's status reads its revision R
//! `Halted`, `RollingBack` or `RolledBack` (for its current generation),
//! no pool that had not taken R is written at R until, as docs/rollouts.md
//! says a halt ends, the revision changes (a fix, a request) or a person
//! changes what judges the pools (`maxFailures`, `onFailure`,
//! `progressDeadline`, `minReadySeconds`, `offlinePools`, `offlineAfter`,
//! `analysis`, or the strategy: `AllAtOnce` never halts). Any other edit
//! (`paused`, windows, the selection) lifts nothing. Nor does the revision
//! reading `Complete`, unless every release of the application then
//! carries R: a revision is complete only when every selected pool is done
//! with it, and one that reads so behind a pool still on another revision
//! (an offline site, say) must not let that pool take the halted one.
//! Ordered by resourceVersion, which etcd numbers in one sequence, so a
//! release written before the halt and delivered after it by its own
//! watch is not taken for one written after.
//!
//! The two watches deliver in their own order: a write that an edit let
//! go may arrive before the edit. So a write at a halted revision waits
//! until a version of the application newer than the write is seen, and
//! is a violation only if no edit older than the write lifted the halt.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{
    application_key, application_of_release, owned_release_of, taken_revision, text, Invariant, Key, Kind,
    Record, Violation,
};

/// A halt seen on an application.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Halt {
    revision: String,
    phase: String,
    /// The application's resourceVersion that first read it.
    at: u64,
    /// What judged its pools then (see [`judging`]).
    judging: Value,
    /// The resourceVersion of the first edit since (another generation).
    lifted: Option<u64>,
    /// Writes at the halted revision, with their resourceVersions, that
    /// wait for a newer version of the application.
    pending: Vec<(u64, Violation)>,
}

/// The halts in force, by application (namespace, name).
#[derive(Debug, Default)]
pub(super) struct Halts(BTreeMap<(String, String), Halt>);

impl Halts {
    /// Notes a halt the application's status reads, an edit that lifts
    /// one, and forgets one whose revision the application has left; the
    /// waiting writes this version settles, as violations.
    pub(super) fn read_application(
        &mut self,
        record: &Record,
        objects: &BTreeMap<Key, Value>,
    ) -> Vec<Violation> {
        debug_assert_eq!(record.kind, Kind::Application);
        let app = &record.object;
        let key = application_key(app);
        let version = resource_version(app).unwrap_or_default();
        let judged = judging(app);
        let current = app.pointer("/status/observedGeneration") == app.pointer("/metadata/generation");
        let revision = text(app, "/status/rollout/revision");
        let phase = text(app, "/status/rollout/phase").unwrap_or_default();
        let mut found = Vec::new();
        if let Some(halt) = self.0.get_mut(&key) {
            // A change of what judges it lifts it; so does the revision
            // reading Complete while every release of the application
            // carries it: what comes later (a release re-created) catches
            // up with a completed revision.
            let complete = current
                && revision == Some(halt.revision.as_str())
                && phase == "Complete"
                && every_release_carries(objects, &key, &halt.revision);
            if (judged != halt.judging || complete) && halt.lifted.is_none() {
                halt.lifted = Some(version);
            }
            let lifted = halt.lifted;
            halt.pending.retain(|(written, violation)| {
                if lifted.is_some_and(|l| l < *written) {
                    return false;
                }
                if version > *written {
                    found.push(violation.clone());
                    return false;
                }
                true
            });
            // A new revision (the spec changed) ends the halt, and so does
            // the application's deletion.
            let left = current && revision.is_some_and(|r| r != halt.revision);
            if (left || record.deleted) && halt.pending.is_empty() {
                self.0.remove(&key);
            }
        }
        let halted = matches!(phase, "Halted" | "RollingBack" | "RolledBack");
        let in_force = self.0.get(&key).is_some_and(|h| h.lifted.is_none());
        if let (true, true, Some(revision), false, false) =
            (current, halted, revision, in_force, record.deleted)
        {
            let pending = self.0.remove(&key).map(|h| h.pending).unwrap_or_default();
            let halt = Halt {
                revision: revision.to_string(),
                phase: phase.to_string(),
                at: version,
                judging: judged,
                lifted: None,
                pending,
            };
            self.0.insert(key, halt);
        }
        found
    }

    /// A release written at a halted revision by a pool that had not
    /// taken it: waits for the application's next version (see above).
    pub(super) fn check_release(&mut self, record: &Record, previous: Option<&Value>) -> Vec<Violation> {
        let release = &record.object;
        let Some((namespace, app)) = application_of_release(release) else {
            return Vec::new();
        };
        let Some(halt) = self.0.get_mut(&(namespace.to_string(), app.to_string())) else {
            return Vec::new();
        };
        let now = taken_revision(release);
        let before = previous.and_then(taken_revision);
        let written = resource_version(release).unwrap_or_default();
        let lifted = halt.lifted.is_some_and(|l| l < written);
        if now != Some(halt.revision.as_str()) || before == now || written <= halt.at || lifted {
            return Vec::new();
        }
        let violation = Violation {
            invariant: Invariant::HaltHolds,
            message: format!(
                "{} was written at revision {} after {namespace}/{app} read {} for it (resourceVersion {}); \
                 it was at {} before",
                record.key(),
                halt.revision,
                halt.phase,
                halt.at,
                before.unwrap_or("no release")
            ),
            objects: vec![
                record.key().to_string(),
                format!("NodePoolApplication {namespace}/{app}"),
            ],
            story: Vec::new(),
        };
        halt.pending.push((written, violation));
        Vec::new()
    }
}

/// What judges an application's pools, as docs/rollouts.md lists it
/// under "A halt holds": a change of any of these ends a halt.
fn judging(app: &Value) -> Value {
    const JUDGING: [&str; 8] = [
        "strategy",
        "maxFailures",
        "onFailure",
        "progressDeadline",
        "minReadySeconds",
        "offlinePools",
        "offlineAfter",
        "analysis",
    ];
    let rollout = app.pointer("/spec/rollout");
    let fields = JUDGING
        .iter()
        .map(|f| (f.to_string(), rollout.and_then(|r| r.get(*f)).cloned().unwrap_or(Value::Null)));
    Value::Object(fields.collect())
}

/// Whether every release of the application `key` (namespace, name)
/// carries `revision`, not taken back from it.
fn every_release_carries(objects: &BTreeMap<Key, Value>, key: &(String, String), revision: &str) -> bool {
    let of_app = objects.iter().filter(|(k, object)| {
        // One being deleted (its pool left) is no pool of the revision.
        k.kind == Kind::HelmRelease
            && object.pointer("/metadata/deletionTimestamp").is_none()
            && owned_release_of(object).is_some_and(|(ns, app)| ns == key.0 && app == key.1)
    });
    of_app.map(|(_, r)| r).all(|r| taken_revision(r) == Some(revision))
}

/// An object's resourceVersion as etcd numbers it.
pub(super) fn resource_version(object: &Value) -> Option<u64> {
    text(object, "/metadata/resourceVersion")?.parse().ok()
}
