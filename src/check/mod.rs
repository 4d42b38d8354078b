//! The invariant checker: judges, from what the API server records, the
//! promises the guides under docs/ make, while faults fly. It reads the
//! objects as a watch delivers them (every version of every HelmRelease and
//! NodePoolApplication, each with the time it was seen) and never the
//! controller's logs or its code: a rule is judged here in its own words,
//! so a bug in the controller's reading of it is not shared.
//!
//! Each invariant is a module with a function from the world as it stands
//! and one new record to the violations that record shows. A violation
//! names the invariant, the docs section it checks, the objects, and
//! the ordered records of the application that led to it.
//!
//! What is judged so far:
//! - [`max_unavailable`]: a Progressive rollout never has more pools
//!   updating than `maxUnavailable` (docs/rollouts.md); a pool offline
//!   by its nodes ([`nodes`]) counts for nothing, as docs/rollouts.md says,
//!   unless it is under way on the revision a write is at.
//! - [`halt`]: after a revision reads halted or rolled back, no pool that
//!   had not taken it is written at it (docs/rollouts.md).
//! - [`failures`]: a pool Flux reports failed stands failed, and past
//!   `maxFailures` the status reads the halt (docs/rollouts.md).
//! - [`isolation`]: no two HelmReleases drive one Helm release of one
//!   cluster, and no object is in two releases' inventories
//!   (docs/isolation.md, "One instance per pool, really").
//! - [`ownership`]: our field managers are on no object we do not own
//!   (docs/isolation.md, "Bad input and ownership").
//! - [`approval`]: no pool of a wave that needs approval, or after it,
//!   is updated before that revision's approval of that step
//!   (docs/rollouts.md).
//! - [`paused`]: while an application is paused, no pool that had a
//!   release is written at another revision (docs/rollouts.md).
//! - [`completed`]: a revision once complete is never halted or taken
//!   back (docs/rollouts.md).
//! - [`afresh`]: a revision that comes back is a new rollout, never read
//!   by its earlier rollout's record (docs/rollouts.md).
//! - [`window`]: no pool is updated to a new revision while every window
//!   of the application that applies to it is closed (docs/rollouts.md).
//! - [`bounded`]: an application's status stays under its bounds
//!   (docs/concepts.md, "Status").
//! - [`first_install`]: on pools of one cluster, no two releases of an
//!   application install at once until one of them is Ready or deployed
//!   (docs/isolation.md, "One instance per pool, really").
//! - [`offline_done`]: a revision never reads `Complete` while a pool
//!   offline is behind on it (docs/rollouts.md, "Offline pools").
//! - [`answered`]: no pool is done with a revision on a metric check
//!   that was not answered at or after its soak's end (docs/rollouts.md,
//!   "Metric checks"); judged by the soak, which serves the answers.
//! - [`liveness`]: once faults stop, every application settles
//!   (docs/local-plane-and-tests.md, "Faults"); judged by the soak, which
//!   knows when faults stop.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

mod afresh;
pub mod answered;
mod approval;
pub mod bounded;
mod completed;
mod failures;
mod first_install;
mod halt;
mod isolation;
pub mod liveness;
mod max_unavailable;
pub mod nodes;
mod offline_done;
mod ownership;
mod paused;
mod read;
mod record;
mod rollback;
#[cfg(test)]
mod tests;
pub mod watch;
mod window;

use read::{
    annotation, application_key, application_of, application_of_release, available_before, label,
    owned_release_of, ready_now, taken_revision, text,
};
pub use record::{Key, Kind, Record};

/// A promise broken, with what shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    pub message: String,
    /// The objects concerned.
    pub objects: Vec<String>,
    /// The application's records that led to it, oldest first.
    pub story: Vec<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "VIOLATION {} ({}): {}",
            self.invariant.name(),
            self.invariant.docs_section(),
            self.message
        )?;
        for object in &self.objects {
            writeln!(f, "  object: {object}")?;
        }
        for line in &self.story {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// The invariants judged, each a promise of the guides under docs/.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    MaxUnavailable,
    HaltHolds,
    CompletedStays,
    Afresh,
    Approvals,
    Paused,
    Windows,
    Isolation,
    Ownership,
    Bounded,
    Liveness,
    RollbackTakesBack,
    FirstInstallAlone,
    OfflineNeverDone,
    ChecksAnswered,
    FailuresHalt,
}

impl Invariant {
    pub const ALL: [Invariant; 16] = [
        Self::MaxUnavailable,
        Self::HaltHolds,
        Self::CompletedStays,
        Self::Afresh,
        Self::Approvals,
        Self::Paused,
        Self::Windows,
        Self::Isolation,
        Self::Ownership,
        Self::Bounded,
        Self::Liveness,
        Self::RollbackTakesBack,
        Self::FirstInstallAlone,
        Self::OfflineNeverDone,
        Self::ChecksAnswered,
        Self::FailuresHalt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::MaxUnavailable => "maxUnavailable",
            Self::HaltHolds => "a halt holds",
            Self::CompletedStays => "completed stays",
            Self::Afresh => "redone afresh",
            Self::Approvals => "approvals",
            Self::Paused => "a pause holds",
            Self::Windows => "windows",
            Self::Bounded => "bounded",
            Self::Liveness => "liveness",
            Self::Isolation => "isolation",
            Self::Ownership => "ownership",
            Self::RollbackTakesBack => "rollback",
            Self::FirstInstallAlone => "first install",
            Self::OfflineNeverDone => "offline not done",
            Self::ChecksAnswered => "checks answered",
            Self::FailuresHalt => "failures halt",
        }
    }

    /// The docs section whose promise it checks, as a link from the
    /// repository's root: the page and the section's anchor.
    pub fn docs_section(self) -> &'static str {
        match self {
            Self::MaxUnavailable
            | Self::HaltHolds
            | Self::CompletedStays
            | Self::Paused
            | Self::FailuresHalt => "docs/rollouts.md",
            Self::Afresh | Self::RollbackTakesBack => "docs/rollouts.md#automatic-rollback",
            Self::Approvals => "docs/rollouts.md#approval-between-waves",
            Self::Windows => "docs/rollouts.md#maintenance-windows",
            Self::OfflineNeverDone => "docs/rollouts.md#offline-pools",
            Self::ChecksAnswered => "docs/rollouts.md#metric-checks",
            Self::Bounded => "docs/concepts.md#status",
            Self::Liveness => "docs/local-plane-and-tests.md#faults",
            Self::Isolation | Self::FirstInstallAlone => "docs/isolation.md#one-instance-per-pool-really",
            Self::Ownership => "docs/isolation.md#bad-input-and-ownership",
        }
    }
}

/// How many times each invariant was judged, and how many violations it found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub checks: BTreeMap<Invariant, u64>,
    pub violations: BTreeMap<Invariant, u64>,
    pub records: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} records read", self.records)?;
        writeln!(f, "{:<16} {:>10} {:>10}", "invariant", "checks", "violations")?;
        for invariant in Invariant::ALL {
            let checks = self.checks.get(&invariant).copied().unwrap_or_default();
            let violations = self.violations.get(&invariant).copied().unwrap_or_default();
            writeln!(f, "{:<16} {checks:>10} {violations:>10}", invariant.name())?;
        }
        Ok(())
    }
}

/// How many records of one application a violation's story keeps.
const STORY: usize = 32;

/// The world as the records so far leave it, and what each invariant
/// remembers.
#[derive(Debug, Default)]
pub struct Checker {
    /// The latest version of each object that exists.
    pub(crate) objects: BTreeMap<Key, Value>,
    /// The last records of each application (by namespace and name) and
    /// of its releases, for a violation's story.
    stories: BTreeMap<(String, String), VecDeque<String>>,
    halts: halt::Halts,
    failures: failures::Failures,
    completions: completed::Completions,
    numbers: afresh::Numbers,
    approvals: approval::Approvals,
    pauses: paused::Pauses,
    windows: window::Windows,
    updating: max_unavailable::Updating,
    first_installs: first_install::FirstInstalls,
    offline_done: offline_done::OfflineDone,
    /// The nodes, for whether a pool is offline.
    nodes: nodes::Nodes,
    /// Every uid each application (by namespace and name) has had: a
    /// release is ours only when one of them owns it.
    application_uids: ownership::ApplicationUids,
    /// A re-list is being read (see [`rollback`]).
    relisting: bool,
    /// Each violation is reported once, the first time a record shows it;
    /// later records that show it again are counted as checks only.
    reported: BTreeSet<(Invariant, String)>,
    summary: Summary,
}

impl Checker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads one record and returns the violations it shows.
    pub fn observe(&mut self, record: Record) -> Vec<Violation> {
        self.summary.records += 1;
        let key = record.key();
        let application = application_of(&record);
        if let Some(app) = &application {
            let story = self.stories.entry(app.clone()).or_default();
            story.push_back(record.line());
            if story.len() > STORY {
                story.pop_front();
            }
        }
        let previous = match record.deleted {
            true => self.objects.remove(&key),
            false => self.objects.insert(key.clone(), record.object.clone()),
        };
        // Deleted and made again while the watch was away (a re-list shows
        // only the new one): no earlier version of it, as when the deletion
        // is seen.
        let uid = |o: &Value| o.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_string);
        let previous = previous.filter(|p| uid(p) == uid(&record.object));
        let mut found: Vec<(Invariant, Option<Violation>)> = Vec::new();
        let mut judge = |invariant: Invariant, violations: Vec<Violation>| {
            found.push((invariant, None));
            found.extend(violations.into_iter().map(|v| (invariant, Some(v))));
        };
        if record.kind == Kind::Application {
            self.application_uids.read_application(&record.object);
        }
        judge(Invariant::Ownership, ownership::check(&record, &self.application_uids));
        if record.kind == Kind::Application {
            // A deleted application forgets what it completed.
            judge(Invariant::CompletedStays, self.completions.read_application(&record));
            judge(Invariant::Afresh, self.numbers.read_application(&record));
            // Also on deletion, which settles what waits.
            judge(Invariant::HaltHolds, self.halts.read_application(&record, &self.objects));
            judge(Invariant::FailuresHalt, self.failures.read_application(&record));
            if let Some(v) = self.approvals.read_application(&record) {
                judge(Invariant::Approvals, v);
            }
            judge(Invariant::Windows, self.windows.read_application(&record));
            judge(Invariant::Paused, self.pauses.read_application(&record));
            self.first_installs.read_application(&record);
            self.offline_done.read_application(&record);
        }
        if record.kind == Kind::HelmRelease {
            // Also on deletion: a release deleted installs no more.
            let found =
                self.first_installs
                    .check_release(&self.objects, &self.nodes, &record, previous.as_ref());
            judge(Invariant::FirstInstallAlone, found);
            // Any release's version, a deletion's too, says the watch has
            // passed every application version older than it; this release
            // is newer than those, so no evidence of how it stood then.
            let mut found = self.offline_done.read_release(&self.objects, &self.nodes, &record);
            for violation in &mut found {
                let app = violation.objects[0].trim_start_matches("NodePoolApplication ");
                let key = app.split_once('/').map(|(ns, name)| (ns.to_string(), name.to_string()));
                let story = key.and_then(|k| self.stories.get(&k));
                violation.story = story.map(|s| s.iter().cloned().collect()).unwrap_or_default();
            }
            judge(Invariant::OfflineNeverDone, found);
        }
        if record.deleted && record.kind == Kind::HelmRelease {
            self.updating.check_release(&self.objects, &self.nodes, &record, previous.as_ref());
        }
        if !record.deleted {
            match record.kind {
                Kind::HelmRelease => {
                    judge(Invariant::Isolation, isolation::check(&self.objects, &key, &record.object));
                    judge(Invariant::HaltHolds, self.halts.check_release(&record, previous.as_ref()));
                    judge(
                        Invariant::CompletedStays,
                        self.completions.check_release(&record, previous.as_ref()),
                    );
                    if let Some(v) = self.approvals.check_release(&record, previous.as_ref()) {
                        judge(Invariant::Approvals, v);
                    }
                    judge(Invariant::Windows, self.windows.check_release(&record, previous.as_ref()));
                    judge(Invariant::Paused, self.pauses.check_release(&record, previous.as_ref()));
                    judge(
                        Invariant::RollbackTakesBack,
                        rollback::check_release(&record, previous.as_ref(), self.relisting),
                    );
                    judge(
                        Invariant::MaxUnavailable,
                        self.updating.check_release(&self.objects, &self.nodes, &record, previous.as_ref()),
                    );
                }
                // Judged at each release's write, not when the application
                // changes: a smaller maxUnavailable does not undo what is
                // under way.
                Kind::Application => judge(Invariant::Bounded, bounded::check(&record)),
            }
        }
        let story: Vec<String> = application
            .and_then(|app| self.stories.get(&app))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut violations = Vec::new();
        for (invariant, violation) in found {
            *self.summary.checks.entry(invariant).or_default() += 1;
            if let Some(mut violation) = violation {
                if !self.reported.insert((invariant, violation.message.clone())) {
                    continue;
                }
                *self.summary.violations.entry(invariant).or_default() += 1;
                if violation.story.is_empty() {
                    violation.story = story.clone();
                }
                violations.push(violation);
            }
        }
        violations
    }

    /// What a re-list of `kind` delivered, judged as one: each object's
    /// latest version in the order the API server wrote them (by resource
    /// version), then those it no longer holds as deleted; the violations.
    ///
    /// A re-list comes after a gap (the watch was away: an API server
    /// restart), and in the order it lists, a release written after the
    /// gap could be judged beside the stale, pre-gap version of another
    /// that had changed before that write (soak seed 4811231: a pool
    /// written once another was Ready again, judged while the other still
    /// read as updating). In the order of writes, every version the
    /// controller could have read before its write is in hand.
    pub fn relisted(&mut self, kind: Kind, mut listed: Vec<Record>, seen: Timestamp) -> Vec<Violation> {
        listed.sort_by_key(|r| halt::resource_version(&r.object).unwrap_or_default());
        let keys: BTreeSet<Key> = listed.iter().map(Record::key).collect();
        let mut found = Vec::new();
        if kind == Kind::HelmRelease {
            self.updating.relisted(&listed, &self.objects);
            self.first_installs.relisting(&listed);
        }
        self.relisting = true;
        for record in listed {
            if kind == Kind::Application {
                self.pauses.relisted_application(&record);
            }
            found.extend(self.observe(record));
        }
        self.relisting = false;
        for record in self.gone_since_relist(kind, &keys, seen) {
            found.extend(self.observe(record));
        }
        found
    }

    /// The objects of `kind` a re-list no longer delivered: deleted while
    /// the watch was away, as records of their deletion.
    pub fn gone_since_relist(&self, kind: Kind, listed: &BTreeSet<Key>, seen: Timestamp) -> Vec<Record> {
        self.objects
            .iter()
            .filter(|(key, _)| key.kind == kind && !listed.contains(key))
            .map(|(_, object)| Record {
                seen,
                kind,
                object: object.clone(),
                deleted: true,
            })
            .collect()
    }

    /// Reads one version of a node, or its deletion: judged by nothing
    /// itself, it says which pools are offline (see [`nodes`]).
    pub fn read_node(&mut self, node: &Value, deleted: bool) {
        self.nodes.read(node, deleted);
    }

    /// What a re-list of the nodes delivered.
    pub fn nodes_relisted(&mut self, nodes: &[Value]) {
        self.nodes.relisted(nodes);
    }

    pub fn summary(&self) -> &Summary {
        &self.summary
    }
}
