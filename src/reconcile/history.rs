//! Revision history: each revision of an application (what
//! `status.rollout.revision` names) is recorded the way Kubernetes records
//! workload history, as a `ControllerRevision` owned by the application
//! (as DaemonSets and StatefulSets keep theirs), numbered in the order the
//! revisions were rolled out, with what became of it. Pure: which records
//! to write, mark and forget, from the records as they are.
//!
//! - A revision with no record gets one, numbered after the newest; a
//!   revision that comes back (a change undone) is renumbered as the
//!   newest, as a DaemonSet renumbers a template it returns to, and its
//!   outcome starts afresh: a record's outcome is its latest rollout's.
//! - A revision whose rollout completes is marked `Complete`; one that
//!   halts, `Halted`, or `RolledBack` when its pools went back. The last revision that completed is what status
//!   names as `lastCompleteRevision`.
//! - Past `revisionHistoryLimit`, the oldest records are forgotten, but
//!   never the current revision's or the last complete one's.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::ResourceExt;
use serde_json::Value;

use crate::api::{naming, NodePoolApplicationSpec, RolloutPhase};
use crate::chart::shared::{ChartKind, ChartRef};

/// The revision a record is of (`status.rollout.revision`), as a label.
pub const LABEL_REVISION: &str = "apps.fanout.dev/revision";
/// What became of a revision's rollout: `Complete` or `Halted`.
pub const ANNOTATION_OUTCOME: &str = "apps.fanout.dev/outcome";
/// When this rollout of the revision began: set as the record is made,
/// and again when a revision that comes back is renumbered, so that what
/// an earlier rollout of it left on the releases (a rollback's stamp) is
/// told from what this one did.
pub const ANNOTATION_ROLLED_OUT_AT: &str = "apps.fanout.dev/rolled-out-at";
/// What judged a revision that halted, as a short hash of the rollout
/// settings that judge pools (see `rollout::settings::judged_by`): the
/// halt holds until they change, or a new revision (a fix, a request)
/// comes. An edit of anything else (`paused`, windows, the selection)
/// leaves it halted.
pub const ANNOTATION_HALTED_JUDGEMENT: &str = "apps.fanout.dev/halted-judged-by";
/// Why a revision halted, as the halt named it when it happened: its
/// failed pools with what each failed on (Flux's message, or the metric
/// check, its value and its bound), or the wave check that failed. Kept
/// with the record because the pools' own state moves on (a pool that
/// went back shows the upgrade that took it back) and the checks'
/// answers are not kept across a restart. At most [`MAX_HALTED_BECAUSE`]
/// bytes.
pub const ANNOTATION_HALTED_BECAUSE: &str = "apps.fanout.dev/halted-because";
/// The most bytes of [`ANNOTATION_HALTED_BECAUSE`].
pub const MAX_HALTED_BECAUSE: usize = 1024;
/// The chart version a revision resolved to, when known.
pub const ANNOTATION_CHART_VERSION: &str = "apps.fanout.dev/chart-version";
/// Records kept when `revisionHistoryLimit` is not given, as a Deployment keeps.
pub const DEFAULT_REVISION_HISTORY_LIMIT: usize = 10;

pub const COMPLETE: &str = "Complete";
pub const HALTED: &str = "Halted";
/// Halted under `onFailure: Rollback`, its pools taken back: it stays so
/// until the spec changes.
pub const ROLLED_BACK: &str = "RolledBack";

/// One recorded revision of an application.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Recorded {
    /// The ControllerRevision's name.
    pub name: String,
    pub revision: String,
    /// Its place in the order of rollouts, from 1.
    pub number: i64,
    pub outcome: Option<String>,
    /// What judged it when it halted ([`ANNOTATION_HALTED_JUDGEMENT`]).
    pub halted_judgement: Option<String>,
    /// Why it halted ([`ANNOTATION_HALTED_BECAUSE`]).
    pub halted_because: Option<String>,
    pub chart_version: Option<String>,
    /// When it was recorded.
    pub created: Option<String>,
    /// When this rollout of it began ([`ANNOTATION_ROLLED_OUT_AT`]).
    pub rolled_out_at: Option<String>,
}

impl Recorded {
    /// The record `object` is, when it is one of the application of `uid`'s:
    /// its controller owner is the application, and it names a revision.
    pub fn of(object: &ControllerRevision, uid: &str) -> Option<Self> {
        let owned = object.owner_references().iter().any(|o| o.controller == Some(true) && o.uid == uid);
        let revision = object.labels().get(LABEL_REVISION).filter(|_| owned)?;
        Some(Self {
            name: object.name_any(),
            revision: revision.clone(),
            number: object.revision,
            outcome: object.annotations().get(ANNOTATION_OUTCOME).cloned(),
            halted_judgement: object.annotations().get(ANNOTATION_HALTED_JUDGEMENT).cloned(),
            halted_because: object.annotations().get(ANNOTATION_HALTED_BECAUSE).cloned(),
            chart_version: object.annotations().get(ANNOTATION_CHART_VERSION).cloned(),
            created: object.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
            rolled_out_at: object.annotations().get(ANNOTATION_ROLLED_OUT_AT).cloned(),
        })
    }

    /// When this rollout of the revision began: when it was renumbered,
    /// else when it was recorded.
    pub fn since(&self) -> Option<k8s_openapi::jiff::Timestamp> {
        let text = self.rolled_out_at.as_deref().or(self.created.as_deref())?;
        text.parse().ok()
    }
}

/// The application's revision history, as planning reads it. A record's
/// data (a whole spec) is read only when a rollback needs it.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Newest first.
    pub recorded: Vec<Recorded>,
    /// What each recorded revision was, by revision, to be read on demand.
    data: BTreeMap<String, Data>,
    namespace: String,
}

#[derive(Debug, Clone)]
enum Data {
    Record(Arc<ControllerRevision>),
    Read(Box<PastRevision>),
}

impl History {
    /// The records of `records` that are the application of `uid`'s (in
    /// `namespace`).
    pub fn of(
        records: impl IntoIterator<Item = Arc<ControllerRevision>>,
        uid: &str,
        namespace: &str,
    ) -> Self {
        let mut ours: Vec<(Arc<ControllerRevision>, Recorded)> = records
            .into_iter()
            .filter_map(|r| {
                let recorded = Recorded::of(&r, uid)?;
                Some((r, recorded))
            })
            .collect();
        ours.sort_by_key(|(_, r)| std::cmp::Reverse(r.number));
        let data = ours
            .iter()
            .map(|(object, r)| (r.revision.clone(), Data::Record(Arc::clone(object))))
            .collect();
        Self {
            recorded: ours.into_iter().map(|(_, r)| r).collect(),
            data,
            namespace: namespace.to_string(),
        }
    }

    /// A history of `recorded` whose revisions are `pasts`, read already.
    pub fn read(recorded: Vec<Recorded>, pasts: Vec<PastRevision>) -> Self {
        Self {
            recorded,
            data: pasts.into_iter().map(|p| (p.revision.clone(), Data::Read(Box::new(p)))).collect(),
            namespace: String::new(),
        }
    }

    /// What `revision` was, rebuilt from its record; `None` when it is not
    /// recorded, an error saying why when its record does not read.
    pub fn past(&self, revision: &str) -> Option<Result<PastRevision, String>> {
        match self.data.get(revision)? {
            Data::Read(past) => Some(Ok(PastRevision::clone(past))),
            Data::Record(object) => Some(PastRevision::of(object, revision, &self.namespace)),
        }
    }

    /// The newest revision recorded complete other than `current`.
    pub fn last_complete(&self, current: &str) -> Option<&str> {
        self.recorded
            .iter()
            .find(|r| r.outcome.as_deref() == Some(COMPLETE) && r.revision != current)
            .map(|r| r.revision.as_str())
    }

    /// The number `revision` is recorded under, when it is.
    pub fn number(&self, revision: &str) -> Option<i64> {
        self.recorded.iter().find(|r| r.revision == revision).map(|r| r.number)
    }

    /// The record of the rollout of `revision` under way: its record when
    /// it is the newest. A revision whose record is older than another's
    /// comes back (a change undone, then redone): what its record says
    /// (its outcome, when it began) is of an earlier rollout, and this one
    /// has no record until the reconcile renumbers it; nor has a revision
    /// never recorded, or whose record was forgotten past the limit.
    pub fn this_rollout(&self, revision: &str) -> Option<&Recorded> {
        self.recorded.iter().max_by_key(|r| r.number).filter(|r| r.revision == revision)
    }

    /// The number this rollout of `revision` has in the history, or will
    /// have once recorded: its record's when it is the newest, else the
    /// one after the newest (a new record, or one renumbered as it comes
    /// back). An approval names it: it belongs to one rollout.
    pub fn rollout_number(&self, revision: &str) -> i64 {
        match self.this_rollout(revision) {
            Some(record) => record.number,
            None => self.recorded.iter().map(|r| r.number).max().unwrap_or(0) + 1,
        }
    }

    /// What this rollout of `revision` ended as, when it is recorded.
    fn outcome_of(&self, revision: &str) -> Option<&str> {
        self.this_rollout(revision)?.outcome.as_deref()
    }

    /// Whether the history says this rollout of `revision` completed.
    pub fn completed(&self, revision: &str) -> bool {
        self.outcome_of(revision) == Some(COMPLETE)
    }

    /// When this rollout of `revision` began, when recorded.
    pub fn rolled_out_since(&self, revision: &str) -> Option<k8s_openapi::jiff::Timestamp> {
        self.this_rollout(revision)?.since()
    }

    /// Whether the history says this rollout of `revision` halted, judged
    /// by the settings `judgement` names: then the halt holds, whatever its
    /// pools say now (a failed pool recovered, or gone from the selection)
    /// and whatever else a person edits, until those settings change or
    /// the revision does.
    pub fn halted(&self, revision: &str, judgement: &str) -> bool {
        self.this_rollout(revision).is_some_and(|r| {
            r.outcome.as_deref() == Some(HALTED) && r.halted_judgement.as_deref() == Some(judgement)
        })
    }

    /// Why this rollout of `revision` halted, as recorded when it did.
    pub fn halted_because(&self, revision: &str) -> Option<&str> {
        let record = self.this_rollout(revision)?;
        let halted = matches!(record.outcome.as_deref(), Some(HALTED | ROLLED_BACK));
        record.halted_because.as_deref().filter(|_| halted)
    }

    /// Whether the history says this rollout of `revision` was rolled back.
    pub fn rolled_back(&self, revision: &str) -> bool {
        self.outcome_of(revision) == Some(ROLLED_BACK)
    }
}

/// An earlier revision, rebuilt from its history record.
#[derive(Debug, Clone, PartialEq)]
pub struct PastRevision {
    pub revision: String,
    /// The spec it hashed (its rollout settings aside).
    pub spec: NodePoolApplicationSpec,
    /// The shared chart its releases pointed at, if any.
    pub chart_ref: Option<ChartRef>,
    /// Flux's request annotations its releases carried (a revision made
    /// by a request differs from the last by them alone), in the order of
    /// [`naming::FLUX_REQUESTS`].
    pub requests: Vec<(String, String)>,
}

impl PastRevision {
    /// What `record` says `revision` was, or why it cannot be read (a
    /// record of a version that wrote another shape).
    /// A shared chart lives beside the chart's source: in the namespace the
    /// record names, or else the one the spec's source is in.
    fn of(record: &ControllerRevision, revision: &str, namespace: &str) -> Result<Self, String> {
        let unreadable = |why: String| format!("the record of revision {revision} does not read: {why}");
        let data = &record.data.as_ref().ok_or_else(|| unreadable("it holds no data".into()))?.0;
        let spec = data.get("spec").ok_or_else(|| unreadable("it holds no spec".into()))?;
        let spec: NodePoolApplicationSpec =
            serde_json::from_value(spec.clone()).map_err(|e| unreadable(e.to_string()))?;
        let chart_ref = data.get("chart").filter(|c| !c.is_null()).and_then(|chart| {
            let beside_source = crate::chart::shared::source_namespace(&spec, namespace);
            Some(ChartRef {
                kind: ChartKind::of(chart.get("kind")?.as_str()?)?,
                name: chart.get("name")?.as_str()?.to_string(),
                namespace: chart
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(beside_source)
                    .to_string(),
            })
        });
        let recorded = data.get("requests");
        let requests = naming::FLUX_REQUESTS
            .iter()
            .filter_map(|key| {
                let token = recorded?.get(*key)?.as_str()?;
                Some((key.to_string(), token.to_string()))
            })
            .collect();
        Ok(Self {
            revision: revision.to_string(),
            spec,
            chart_ref,
            requests,
        })
    }
}

/// A record to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub name: String,
    pub revision: String,
    pub number: i64,
    /// What the revision is, for a new record; `None` renumbers a record
    /// that exists (its data cannot change).
    pub data: Option<Value>,
    pub chart_version: Option<String>,
    /// Its outcome, when known as it is recorded.
    pub outcome: Option<&'static str>,
    /// With a `Halted` outcome: what judged it.
    pub halted_judgement: Option<String>,
    /// With a `Halted` or `RolledBack` outcome: why.
    pub halted_because: Option<String>,
}

/// What to write to the history in one reconcile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryWrites {
    pub record: Option<Record>,
    /// A record's outcome to set: (name, outcome).
    pub mark: Option<(String, &'static str)>,
    /// With a `Halted` mark: what judged it.
    pub halted_judgement: Option<String>,
    /// With a `Halted` or `RolledBack` mark: why.
    pub halted_because: Option<String>,
    /// Records to delete, past the limit.
    pub forget: Vec<String>,
}

impl HistoryWrites {
    pub fn is_empty(&self) -> bool {
        self.record.is_none() && self.mark.is_none() && self.forget.is_empty()
    }
}

/// The revision under way, as the plan reports it.
#[derive(Debug, Clone, Copy)]
pub struct Current<'a> {
    pub revision: &'a str,
    pub phase: RolloutPhase,
    pub chart_version: Option<&'a str>,
    /// What judges it (see `rollout::settings::judged_by`).
    pub judgement: &'a str,
    /// Why it halted, when it did: what its halt names.
    pub because: Option<&'a str>,
    /// This rollout's number, as the plan gave it: one past the record's
    /// when a completed revision rolls out again (a pool's own change,
    /// see docs/rollouts.md), and the record is renumbered.
    pub number: Option<i64>,
}

/// The name of the record of `app`'s `revision`, within the 253 characters
/// of an object name.
pub fn record_name(app: &str, revision: &str) -> String {
    let room = 253 - revision.len() - 1;
    let head = app.get(..room.min(app.len())).unwrap_or(app).trim_end_matches(['-', '.']);
    format!("{head}-{revision}")
}

/// What to write, given the records of `app` and the revision under way;
/// `data` says what the revision is, for its record.
pub fn plan(
    app: &str,
    current: Current,
    recorded: &[Recorded],
    limit: usize,
    data: impl FnOnce() -> Value,
) -> HistoryWrites {
    let newest = recorded.iter().map(|r| r.number).max().unwrap_or(0);
    let existing = recorded.iter().find(|r| r.revision == current.revision);
    let outcome = match current.phase {
        RolloutPhase::Complete => Some(COMPLETE),
        RolloutPhase::Halted => Some(HALTED),
        RolloutPhase::RollingBack | RolloutPhase::RolledBack => Some(ROLLED_BACK),
        _ => None,
    };
    let halted_judgement = (outcome == Some(HALTED)).then(|| current.judgement.to_string());
    let halted_because = matches!(outcome, Some(HALTED | ROLLED_BACK))
        .then(|| current.because.map(|b| crate::reconcile::fleet::cut(b, MAX_HALTED_BECAUSE)))
        .flatten();
    let mut writes = HistoryWrites::default();
    match existing {
        None => {
            writes.record = Some(Record {
                name: record_name(app, current.revision),
                revision: current.revision.to_string(),
                number: newest + 1,
                data: Some(data()),
                chart_version: current.chart_version.map(String::from),
                outcome,
                halted_judgement: halted_judgement.clone(),
                halted_because: halted_because.clone(),
            })
        }
        Some(r) if r.number < newest || current.number.is_some_and(|n| n > r.number) => {
            writes.record = Some(Record {
                name: r.name.clone(),
                revision: r.revision.clone(),
                number: newest + 1,
                data: None,
                chart_version: None,
                outcome,
                halted_judgement: halted_judgement.clone(),
                halted_because: halted_because.clone(),
            })
        }
        Some(r) => {
            // Rolled back stays so: a halt read later (its pools' stamps
            // lost, say) takes nothing back from that.
            let downgrade = r.outcome.as_deref() == Some(ROLLED_BACK) && outcome == Some(HALTED);
            // Halted again after a change of what judges it: its mark moves.
            let halted_anew = outcome == Some(HALTED) && r.halted_judgement != halted_judgement;
            if let Some(outcome) =
                outcome.filter(|o| (r.outcome.as_deref() != Some(*o) || halted_anew) && !downgrade)
            {
                writes.mark = Some((r.name.clone(), outcome));
                writes.halted_judgement = halted_judgement;
                writes.halted_because = halted_because;
            }
        }
    }
    // The current revision and the last complete one are always kept, and
    // count toward the limit with a new record; the newest others fill
    // what room is left.
    let last_complete = last_complete(recorded, current).map(String::from);
    let kept_always =
        |r: &Recorded| r.revision == current.revision || Some(&r.revision) == last_complete.as_ref();
    let mut by_age: Vec<&Recorded> = recorded.iter().filter(|r| !kept_always(r)).collect();
    by_age.sort_by_key(|r| std::cmp::Reverse(r.number));
    let taken = usize::from(existing.is_none()) + recorded.iter().filter(|r| kept_always(r)).count();
    let room = limit.max(1).saturating_sub(taken);
    writes.forget = by_age.into_iter().skip(room).map(|r| r.name.clone()).collect();
    writes
}

/// The last revision whose rollout completed: the current one once it is
/// complete (now, or recorded so: a completed revision stays completed
/// while a new pool installs), or the newest record marked so.
pub fn last_complete<'a>(recorded: &'a [Recorded], current: Current<'a>) -> Option<&'a str> {
    if current.phase == RolloutPhase::Complete {
        return Some(current.revision);
    }
    recorded
        .iter()
        .filter(|r| r.outcome.as_deref() == Some(COMPLETE))
        .max_by_key(|r| r.number)
        .map(|r| r.revision.as_str())
}

/// The labels every record of `app` carries.
pub fn labels(app: &str, revision: &str) -> serde_json::Map<String, Value> {
    let mut labels = serde_json::Map::new();
    labels.insert(naming::LABEL_APPLICATION.into(), Value::String(naming::label_value(app)));
    labels.insert(LABEL_REVISION.into(), Value::String(revision.into()));
    labels.insert(naming::LABEL_MANAGED_BY.into(), Value::String(naming::MANAGER.into()));
    labels
}

#[cfg(test)]
mod tests;
