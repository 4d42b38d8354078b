//! A pause starts no pool: while an application's `rollout.paused` is
//! true, no pool that had a release is written at another revision; pools
//! already updating finish (they carry the revision already) and new pools
//! are still installed (they had no release), as docs/rollouts.md says. A
//! rollback is no start: what is written rolled back from a revision
//! (`apps.fanout.dev/rolled-back-from`) is taken back, not sent on.
//!
//! A pause is a person's edit, and a reconcile that read the spec before it
//! may write after it. So a pause is in force from the first version of
//! the application whose status says the controller observed a paused
//! generation of the run of paused generations the spec is in now, until
//! the first version that is not paused: a pause lifted and set again is
//! in force again only once the controller observed the new one. Ordered by resourceVersion, which etcd numbers in
//! one sequence: a write is judged by the application's latest version
//! older than it, once a newer one is seen (the two watches deliver in
//! their own order).

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use super::{
    application_key, application_of_release, halt::resource_version, taken_revision, Invariant, Kind, Record,
    Violation,
};

/// How many versions of one application are kept to judge writes by.
const VERSIONS: usize = 64;

/// What one application's versions said of its pause.
#[derive(Debug, Default)]
struct Application {
    /// Whether each generation's spec is paused (the latest few).
    paused_at_generation: BTreeMap<i64, bool>,
    /// Each version's resourceVersion, with whether a pause was in force.
    versions: VecDeque<(u64, bool)>,
    /// Writes that start a pool, with their resourceVersions, waiting for a
    /// newer version of the application.
    pending: Vec<(u64, Violation)>,
}

impl Application {
    /// The first generation of the unbroken run of paused generations
    /// that ends at `generation` (itself paused). A generation not seen
    /// (a re-list skipped it) breaks the run: it may have been unpaused.
    /// The controller observing a generation of an earlier run saw a
    /// pause that was lifted since: a reconcile that read the unpaused
    /// spec may still be writing (pause, unpause, pause again within one
    /// reconcile).
    fn paused_since(&self, generation: i64) -> i64 {
        let mut first = generation;
        while self.paused_at_generation.get(&(first - 1)) == Some(&true) {
            first -= 1;
        }
        first
    }

    /// Whether a pause was in force at `written`: by the latest version
    /// older than it; none known, none in force.
    fn in_force_at(&self, written: u64) -> bool {
        (self.versions.iter().rev())
            .find(|(version, _)| *version < written)
            .is_some_and(|(_, in_force)| *in_force)
    }

    /// Judges a start written at `written`: the violation once a newer
    /// version of the application is seen and a pause was in force then;
    /// kept waiting while none newer is.
    fn settle(&mut self, written: u64, violation: Violation) -> Option<Violation> {
        let seen_after = self.versions.back().is_some_and(|(version, _)| *version > written);
        if !seen_after {
            self.pending.push((written, violation));
            return None;
        }
        self.in_force_at(written).then_some(violation)
    }
}

/// The pauses, by application (namespace, name).
#[derive(Debug, Default)]
pub(super) struct Pauses(BTreeMap<(String, String), Application>);

impl Pauses {
    /// Notes whether this version holds a pause in force; the waiting
    /// writes it settles, as violations.
    pub(super) fn read_application(&mut self, record: &Record) -> Vec<Violation> {
        debug_assert_eq!(record.kind, Kind::Application);
        let object = &record.object;
        let key = application_key(object);
        let version = resource_version(object).unwrap_or_default();
        let state = self.0.entry(key.clone()).or_default();
        let generation = object.pointer("/metadata/generation").and_then(Value::as_i64);
        let paused = object.pointer("/spec/rollout/paused") == Some(&Value::Bool(true));
        if let Some(generation) = generation {
            state.paused_at_generation.insert(generation, paused);
            while state.paused_at_generation.len() > VERSIONS {
                state.paused_at_generation.pop_first();
            }
        }
        let observed = object.pointer("/status/observedGeneration").and_then(Value::as_i64);
        let in_force = !record.deleted
            && paused
            && (generation.zip(observed)).is_some_and(|(generation, observed)| {
                (state.paused_since(generation)..=generation).contains(&observed)
            });
        state.versions.push_back((version, in_force));
        if state.versions.len() > VERSIONS {
            state.versions.pop_front();
        }
        let pending = std::mem::take(&mut state.pending);
        let found: Vec<Violation> = pending
            .into_iter()
            .filter_map(|(written, violation)| state.settle(written, violation))
            .collect();
        if record.deleted && state.pending.is_empty() {
            self.0.remove(&key);
        }
        found
    }

    /// A re-list delivered this version of an application: the versions
    /// between the last one seen and it were not seen, so whether a pause
    /// was in force then is not known, and a write made then is judged by
    /// nothing (exemption E5). Called before the version is read.
    pub(super) fn relisted_application(&mut self, record: &Record) {
        let version = resource_version(&record.object).unwrap_or_default();
        let Some(state) = self.0.get_mut(&application_key(&record.object)) else {
            return;
        };
        if let Some(&(last, _)) = state.versions.back().filter(|(last, _)| *last + 1 < version) {
            state.versions.push_back((last + 1, false));
        }
    }

    /// A release that had one written at another revision, not rolled
    /// back: a pool started. Judged now when a newer version of its
    /// application was seen, else when one is.
    pub(super) fn check_release(&mut self, record: &Record, previous: Option<&Value>) -> Vec<Violation> {
        let release = &record.object;
        let (Some((namespace, app)), Some(previous)) = (application_of_release(release), previous) else {
            return Vec::new();
        };
        let Some(state) = self.0.get_mut(&(namespace.to_string(), app.to_string())) else {
            return Vec::new();
        };
        let (Some(now), before) = (taken_revision(release), taken_revision(previous)) else {
            return Vec::new();
        };
        if before == Some(now) {
            return Vec::new();
        }
        let written = resource_version(release).unwrap_or_default();
        let violation = Violation {
            invariant: Invariant::Paused,
            message: format!(
                "{} was written at revision {now} while {namespace}/{app} was paused \
                 (resourceVersion {written}); it was at {} before",
                record.key(),
                before.unwrap_or("a revision taken back")
            ),
            objects: vec![
                record.key().to_string(),
                format!("NodePoolApplication {namespace}/{app}"),
            ],
            story: Vec::new(),
        };
        state.settle(written, violation).into_iter().collect()
    }
}
