//! Windows: no pool is updated to a new revision while every maintenance
//! window of the application that applies to it is closed
//! (docs/rollouts.md, "Maintenance windows").
//!
//! Judged for the windows of `spec.rollout.windows` that list their pools
//! by name or take every pool; an application with a window chosen by
//! selector is not judged, and neither is a pool's own window (an
//! annotation on the pool object, which may open it): the checker reads no
//! pool objects. Only updates are judged: a release whose revision stamp
//! changes from one revision to another. New pools are installed at once
//! by default, a failed pool goes back at once whatever its windows, and
//! a drift correction restores the revision the pool has.
//!
//! What the controller knew: a write is judged against the last version of
//! the application before it (by resourceVersion), and only when that
//! version's status had observed its generation, so an edit that closed
//! the window is not held against a decision made before the controller
//! read it. The two watches deliver in their own order, so a write waits
//! until a version of the application newer than it is seen. A window
//! must be closed both when the write was seen and `TOLERANCE` before: a
//! decision takes a moment, and a window that closed during it is no
//! violation. A write to another revision than that version's status rolls
//! out was decided on a spec the watch missed (it re-listed across an API
//! server restart), and is not judged.

use std::collections::{BTreeMap, VecDeque};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use crate::api::naming;
use crate::reconcile::rollout::window::{self, Gate, Window};

use super::{
    annotation, application_key, application_of_release, halt::resource_version, label, Invariant, Record,
    Violation,
};

/// How many versions of an application are kept.
const VERSIONS: usize = 256;
/// How long before a write its pool's windows must have been closed too.
const TOLERANCE: SignedDuration = SignedDuration::from_secs(10);

/// One window of the spec, with the pools it applies to (`None`: every pool).
#[derive(Debug, Clone)]
struct Applies {
    pools: Option<Vec<String>>,
    window: Window,
}

/// One version of an application, as far as windows go.
#[derive(Debug, Clone)]
struct Version {
    resource_version: u64,
    /// Its status had read its spec (observedGeneration = generation).
    observed: bool,
    /// Its windows; `None` when one of them cannot be judged here (chosen
    /// by selector, or unreadable).
    windows: Option<Vec<Applies>>,
    /// The revision its status rolls out (`status.rollout.revision`).
    revision: Option<String>,
}

/// A write that waits for a newer version of its application.
#[derive(Debug, Clone)]
struct Pending {
    written_at: u64,
    seen: Timestamp,
    pool: String,
    /// The revision the write moved the pool to.
    revision: String,
    violation: Violation,
}

#[derive(Debug, Default)]
struct Application {
    versions: VecDeque<Version>,
    pending: Vec<Pending>,
}

#[derive(Debug, Default)]
pub(super) struct Windows(BTreeMap<(String, String), Application>);

impl Windows {
    /// Notes the application's windows; the waiting writes this version
    /// settles, as violations.
    pub(super) fn read_application(&mut self, record: &Record) -> Vec<Violation> {
        let app = &record.object;
        let key = application_key(app);
        if record.deleted {
            self.0.remove(&key);
            return Vec::new();
        }
        let state = self.0.entry(key).or_default();
        let version = Version {
            resource_version: resource_version(app).unwrap_or_default(),
            observed: app.pointer("/metadata/generation").is_some()
                && app.pointer("/status/observedGeneration") == app.pointer("/metadata/generation"),
            windows: windows(app),
            revision: app.pointer("/status/rollout/revision").and_then(Value::as_str).map(str::to_string),
        };
        let newest = version.resource_version;
        state.versions.push_back(version);
        if state.versions.len() > VERSIONS {
            state.versions.pop_front();
        }
        let versions = &state.versions;
        let mut found = Vec::new();
        state.pending.retain(|p| {
            if newest <= p.written_at {
                return true;
            }
            if closed_at_write(versions, p) {
                found.push(p.violation.clone());
            }
            false
        });
        found
    }

    /// A release written: when it updates its pool to another revision, a
    /// write to judge once the application's next version is seen.
    pub(super) fn check_release(&mut self, record: &Record, previous: Option<&Value>) -> Vec<Violation> {
        let release = &record.object;
        let Some((namespace, app)) = application_of_release(release) else {
            return Vec::new();
        };
        let Some(state) = self.0.get_mut(&(namespace.to_string(), app.to_string())) else {
            return Vec::new();
        };
        let (Some(previous), Some(revision)) = (previous, annotation(release, naming::ANNOTATION_REVISION))
        else {
            return Vec::new();
        };
        let before = annotation(previous, naming::ANNOTATION_REVISION);
        let updated = before.is_some() && before != Some(revision);
        let rolled_back = annotation(release, naming::ANNOTATION_ROLLED_BACK_FROM).is_some();
        if !updated || rolled_back || release.pointer("/metadata/deletionTimestamp").is_some() {
            return Vec::new();
        }
        let Some(pool) = label(release, naming::LABEL_POOL) else {
            return Vec::new();
        };
        let violation = Violation {
            invariant: Invariant::Windows,
            message: format!(
                "{} (pool {pool}) was updated from revision {} to {revision} while every window of \
                 {namespace}/{app} that applies to it was closed",
                record.key(),
                before.unwrap_or_default(),
            ),
            objects: vec![
                record.key().to_string(),
                format!("NodePoolApplication {namespace}/{app}"),
            ],
            story: Vec::new(),
        };
        let pending = Pending {
            written_at: resource_version(release).unwrap_or_default(),
            seen: record.seen,
            pool: pool.to_string(),
            revision: revision.to_string(),
            violation,
        };
        // Judged at once when a newer version of the application is in hand.
        let newest = state.versions.back().map(|v| v.resource_version).unwrap_or_default();
        if newest > pending.written_at {
            return match closed_at_write(&state.versions, &pending) {
                true => vec![pending.violation],
                false => Vec::new(),
            };
        }
        state.pending.push(pending);
        Vec::new()
    }
}

/// Whether the last version of the application before the write had read
/// its spec, and every window of it that applies to the pool was closed
/// at the write and `TOLERANCE` before.
fn closed_at_write(versions: &VecDeque<Version>, write: &Pending) -> bool {
    let Some(last) = versions.iter().rev().find(|v| v.resource_version < write.written_at) else {
        return false;
    };
    let Some(windows) = last.windows.as_ref().filter(|_| last.observed) else {
        return false;
    };
    // The controller moves a pool only to the revision of the spec it read
    // (a rollback, the other way, is not judged here). A write to another
    // revision was decided on a newer spec than this version's, one the
    // checker's watch missed while it re-listed: its windows are not known.
    if last.revision.as_deref().is_some_and(|r| r != write.revision) {
        return false;
    }
    let applying: Vec<&Window> = windows
        .iter()
        .filter(|w| w.pools.as_ref().is_none_or(|names| names.contains(&write.pool)))
        .map(|w| &w.window)
        .collect();
    if applying.is_empty() {
        return false;
    }
    let earlier = write.seen.checked_sub(TOLERANCE).unwrap_or(write.seen);
    [write.seen, earlier]
        .into_iter()
        .all(|t| matches!(window::gate(applying.iter().copied(), t), Gate::Closed { .. }))
}

/// The application's windows, each with the pools it names; `None` when
/// one chooses its pools by selector or cannot be read.
fn windows(app: &Value) -> Option<Vec<Applies>> {
    let Some(spec) = app.pointer("/spec/rollout/windows").and_then(Value::as_array) else {
        return Some(Vec::new());
    };
    spec.iter()
        .map(|w| {
            let pools = match w.pointer("/pools/selector") {
                Some(selector) if !selector.is_null() => return None,
                _ => w.pointer("/pools/names").and_then(Value::as_array).map(|names| {
                    names.iter().filter_map(Value::as_str).map(str::to_string).collect::<Vec<_>>()
                }),
            };
            let text = |field: &str| w.get(field).and_then(Value::as_str);
            let window = Window::new(text("schedule")?, text("duration")?, text("timeZone")).ok()?;
            Some(Applies { pools, window })
        })
        .collect()
}
