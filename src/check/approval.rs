//! Approvals: no pool of a wave that requires approval, nor of any wave
//! after it, is updated to a revision before the application carries that
//! rollout's approval of that step (docs/rollouts.md, "Approval between
//! waves"): `<revision>@<rollout>/<step>`, the rollout the release's
//! `apps.fanout.dev/rollout` stamp names, the step by its name when it
//! has one and by its position only when it has none. An approval of
//! another revision, of an earlier rollout of the same revision (a change
//! undone and redone), or of another step, lets nothing go: it never
//! carries over to the next change.
//!
//! Judged for steps that list their pools by name (`pools.names`); an
//! application with a step chosen by selector is not judged, since the
//! checker reads no pool objects. A step that requires approval holds
//! every pool from it on, even when it selects no pool now (its pools
//! left, or were installed new and are done): its approval is a person's
//! checkpoint, not a property of its pools. As for
//! `maxUnavailable`, only updates are judged: a release Ready for its
//! generation whose spec changes to the revision; new pools and pools
//! Flux finds unavailable already go at once, and rollbacks are no
//! update to a revision.
//!
//! The approval may come in an application's version that its watch
//! delivers after the release's write it let go: a write without an
//! approval seen so far waits until a version of the application newer
//! than the write is seen, and is a violation only if no version older
//! than the write carried the approval.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use crate::api::naming;

use super::{
    annotation, application_key, application_of_release, available_before, halt::resource_version, label,
    Invariant, Record, Violation,
};

/// How many versions of an application's approval annotation are kept.
const VERSIONS: usize = 256;

/// One step of `spec.rollout.steps`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    /// Its position from 1 and its name, as an approval may call it.
    position: usize,
    name: Option<String>,
    /// Its pools by name; `None` when it chooses them by selector.
    pools: Option<Vec<String>>,
    requires_approval: bool,
}

/// A write that needed approvals not seen yet.
#[derive(Debug, Clone)]
struct Pending {
    written_at: u64,
    revision: String,
    /// The steps it needed, each as the tokens that approve it.
    needed: Vec<Step>,
    violation: Violation,
}

#[derive(Debug, Default)]
struct Application {
    /// (resourceVersion, approval annotation) of each version seen.
    versions: VecDeque<(u64, String)>,
    steps: Vec<Step>,
    pending: Vec<Pending>,
}

#[derive(Debug, Default)]
pub(super) struct Approvals(BTreeMap<(String, String), Application>);

impl Approvals {
    /// Notes the application's steps and approval; the waiting writes
    /// this version settles, as violations (`None` when none waited).
    pub(super) fn read_application(&mut self, record: &Record) -> Option<Vec<Violation>> {
        let app = &record.object;
        let key = application_key(app);
        if record.deleted {
            self.0.remove(&key);
            return None;
        }
        let state = self.0.entry(key).or_default();
        let version = resource_version(app).unwrap_or_default();
        let approval = annotation(app, naming::ANNOTATION_APPROVE).unwrap_or_default().to_string();
        state.versions.push_back((version, approval));
        if state.versions.len() > VERSIONS {
            state.versions.pop_front();
        }
        state.steps = steps(app);
        if state.pending.is_empty() {
            return None;
        }
        let versions = &state.versions;
        let mut found = Vec::new();
        state.pending.retain(|p| {
            if approved_before(versions, p.written_at, &p.revision, &p.needed) {
                return false;
            }
            if version > p.written_at {
                found.push(p.violation.clone());
                return false;
            }
            true
        });
        Some(found)
    }

    /// A release updated to a revision: the approvals its pool's wave
    /// needed, seen or awaited. `None` when there is nothing to judge.
    pub(super) fn check_release(
        &mut self,
        record: &Record,
        previous: Option<&Value>,
    ) -> Option<Vec<Violation>> {
        let release = &record.object;
        let (namespace, app) = application_of_release(release)?;
        let state = self.0.get_mut(&(namespace.to_string(), app.to_string()))?;
        if state.steps.is_empty() || state.steps.iter().any(|s| s.pools.is_none()) {
            return None;
        }
        if annotation(release, naming::ANNOTATION_ROLLED_BACK_FROM).is_some() {
            return None;
        }
        let previous = previous?;
        let revision = annotation(release, naming::ANNOTATION_REVISION)?.to_string();
        let updated = annotation(previous, naming::ANNOTATION_SPEC_HASH)
            != annotation(release, naming::ANNOTATION_SPEC_HASH)
            && annotation(previous, naming::ANNOTATION_REVISION) != Some(revision.as_str());
        // The rollout that wrote it, as its stamp says: a write without
        // the stamp names no rollout, and no approval matches it.
        let rollout = annotation(release, naming::ANNOTATION_ROLLOUT).unwrap_or("<none>");
        let revision = format!("{revision}@{rollout}");
        if !updated || !available_before(previous) || release.pointer("/metadata/deletionTimestamp").is_some()
        {
            return None;
        }
        let pool = label(release, naming::LABEL_POOL)?;
        let own = state
            .steps
            .iter()
            .position(|s| s.pools.as_ref().is_some_and(|names| names.iter().any(|n| n == pool)));
        let through = own.map_or(state.steps.len(), |i| i + 1);
        let needed: Vec<Step> =
            state.steps[..through].iter().filter(|s| s.requires_approval).cloned().collect();
        if needed.is_empty() {
            return Some(Vec::new());
        }
        let written_at = resource_version(release).unwrap_or_default();
        if approved_before(&state.versions, written_at, &revision, &needed) {
            return Some(Vec::new());
        }
        let steps: Vec<String> =
            needed.iter().map(|s| s.name.clone().unwrap_or(s.position.to_string())).collect();
        let violation = Violation {
            invariant: Invariant::Approvals,
            message: format!(
                "{} (pool {pool}) was updated to rollout {revision} without {namespace}/{app}'s approval of \
                 step(s) {} for it ({}={revision}/{})",
                record.key(),
                steps.join(", "),
                naming::ANNOTATION_APPROVE,
                steps.join(",")
            ),
            objects: vec![
                record.key().to_string(),
                format!("NodePoolApplication {namespace}/{app}"),
            ],
            story: Vec::new(),
        };
        state.pending.push(Pending {
            written_at,
            revision,
            needed,
            violation,
        });
        Some(Vec::new())
    }
}

/// Whether a version of the application older than `written_at` approved
/// every step of `needed` for the rollout `revision` (`<revision>@<rollout>`).
fn approved_before(
    versions: &VecDeque<(u64, String)>,
    written_at: u64,
    revision: &str,
    needed: &[Step],
) -> bool {
    needed.iter().all(|step| {
        versions
            .iter()
            .filter(|(v, _)| *v < written_at)
            .any(|(_, approval)| approves(approval, revision, step))
    })
}

/// `<revision>@<rollout>/<step>[,<step>…]`, a step by its name, or by its
/// position when it has no name (docs/rollouts.md: "the step's `name`, or
/// its position").
fn approves(approval: &str, rollout: &str, step: &Step) -> bool {
    let Some((approved, steps)) = approval.trim().rsplit_once('/') else {
        return false;
    };
    let key = step.name.clone().unwrap_or_else(|| step.position.to_string());
    approved == rollout && steps.split(',').map(str::trim).any(|s| s == key)
}

fn steps(app: &Value) -> Vec<Step> {
    let Some(steps) = app.pointer("/spec/rollout/steps").and_then(Value::as_array) else {
        return Vec::new();
    };
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| Step {
            position: i + 1,
            name: s.get("name").and_then(Value::as_str).map(str::to_string),
            pools: match s.pointer("/pools/selector") {
                Some(selector) if !selector.is_null() => None,
                _ => Some(
                    s.pointer("/pools/names")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect(),
                ),
            },
            requires_approval: s.get("requireApproval").and_then(Value::as_bool).unwrap_or(false),
        })
        .collect()
}
