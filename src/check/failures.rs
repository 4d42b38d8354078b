//! Failures are counted and halt: as docs/rollouts.md says, a pool has
//! failed when Flux reports its current generation failed, and past
//! `maxFailures` the rollout halts. Judged of each version of an
//! application's status alone, for its current spec, so that what the
//! controller read and what it decided are one snapshot:
//!
//! - a pool listed up to date, whose release's status describes its latest
//!   spec and reads `Ready=False` with one of Flux's failure reasons
//!   (`InstallFailed`, `UpgradeFailed`, `TestFailed`, `RollbackFailed`,
//!   `RetriesExceeded`), stands `Failed` in the rollout (or goes back, or
//!   is offline): never updating, soaking or done;
//! - under `Progressive`, a revision that has not completed and counts more
//!   failed pools than `maxFailures` (a count, or a percentage of the
//!   selected pools rounded down) reads `Halted`, `RollingBack` or
//!   `RolledBack`. A completed revision halts no more: a pool that fails
//!   on it later is that pool's own failure.
//!
//! The stricter promise, that no pool is written past the failure that
//! halts, needs what the controller had read when it wrote, which no
//! object records; `a halt holds` judges every write once the status
//! reads the halt, and this rule that the status reads it.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{application_key, text, Invariant, Record, Violation};

/// Flux's reasons for a release whose current generation failed.
const FLUX_FAILED: [&str; 5] = [
    "InstallFailed",
    "UpgradeFailed",
    "TestFailed",
    "RollbackFailed",
    "RetriesExceeded",
];
/// Where a failed pool may stand in the rollout.
const FAILED_STANDS: [&str; 6] = [
    "Failed",
    "RollBack",
    "RollbackPending",
    "RollingBack",
    "RolledBack",
    "Offline",
];

/// The rollouts that read `Complete`, by (namespace, name, revision, number).
#[derive(Debug, Default)]
pub(super) struct Failures(BTreeSet<(String, String, String, Option<i64>)>);

impl Failures {
    pub(super) fn read_application(&mut self, record: &Record) -> Vec<Violation> {
        let app = &record.object;
        // A deleted application forgets what it completed: made again, its
        // rollouts start over.
        if record.deleted {
            let (namespace, name) = application_key(app);
            self.0.retain(|(ns, n, _, _)| !(*ns == namespace && *n == name));
            return Vec::new();
        }
        let current = app.pointer("/status/observedGeneration") == app.pointer("/metadata/generation");
        let (Some(revision), Some(phase), true) =
            (text(app, "/status/rollout/revision"), text(app, "/status/rollout/phase"), current)
        else {
            return Vec::new();
        };
        let (namespace, name) = application_key(app);
        let number = app.pointer("/status/rollout/number").and_then(Value::as_i64);
        let this_rollout = (namespace.clone(), name.clone(), revision.to_string(), number);
        if phase == "Complete" {
            self.0.insert(this_rollout.clone());
        }
        let object = format!("NodePoolApplication {namespace}/{name}");
        let violation = |message: String| Violation {
            invariant: Invariant::FailuresHalt,
            message,
            objects: vec![object.clone()],
            story: Vec::new(),
        };
        let mut found: Vec<Violation> = misread(app)
            .into_iter()
            .map(|(pool, reason, stands)| {
                violation(format!(
                    "{object} (resourceVersion {}) lists pool {pool} up to date with Flux's {reason} for its \
                     latest spec, yet standing {stands} in the rollout of revision {revision}: a pool Flux \
                     reports failed has failed",
                    text(app, "/metadata/resourceVersion").unwrap_or("?")
                ))
            })
            .collect();
        let progressive =
            app.pointer("/spec/rollout/strategy").and_then(Value::as_str) == Some("Progressive");
        let failed = app.pointer("/status/rollout/failed").and_then(Value::as_u64).unwrap_or_default();
        // Complete now, seen so, or named by the status as the last revision
        // that completed (its history says so: a `Complete` version may have
        // passed in a watch's gap).
        let last_complete = text(app, "/status/rollout/lastCompleteRevision") == Some(revision);
        let completed = phase == "Complete" || last_complete || self.0.contains(&this_rollout);
        let halted = matches!(phase, "Halted" | "RollingBack" | "RolledBack");
        if let Some(max) =
            max_failures(app).filter(|max| progressive && !completed && !halted && failed > *max)
        {
            found.push(violation(format!(
                "{object} (resourceVersion {}) counts {failed} failed pool(s) on revision {revision}, more than \
                 maxFailures {max}, yet reads {phase}: past maxFailures the rollout halts",
                text(app, "/metadata/resourceVersion").unwrap_or("?")
            )));
        }
        found
    }
}

/// The pools listed up to date with a failure of Flux's for their latest
/// spec that do not stand failed: (pool, reason, where they stand).
fn misread(app: &Value) -> Vec<(String, String, String)> {
    let pools = app.pointer("/status/pools").and_then(Value::as_array);
    pools
        .into_iter()
        .flatten()
        .filter(|p| p["upToDate"] == true && p["observedLatest"] == true && p["ready"] == "False")
        .filter(|p| FLUX_FAILED.iter().any(|r| p["reason"] == *r))
        .filter(|p| !FAILED_STANDS.iter().any(|s| p["rollout"] == *s))
        .map(|p| {
            let field = |key: &str| p[key].as_str().unwrap_or_default().to_string();
            (field("pool"), field("reason"), field("rollout"))
        })
        .collect()
}

/// `maxFailures` resolved as docs/rollouts.md says: a count, or a
/// percentage of the selected pools rounded down; 0 when unset.
fn max_failures(app: &Value) -> Option<u64> {
    let selected = app.pointer("/status/selectedPools").and_then(Value::as_u64).unwrap_or_default();
    match app.pointer("/spec/rollout/maxFailures") {
        None | Some(Value::Null) => Some(0),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => match s.strip_suffix('%') {
            Some(percent) => Some(percent.trim().parse::<u64>().ok()? * selected / 100),
            None => s.trim().parse().ok(),
        },
        Some(_) => None,
    }
}
