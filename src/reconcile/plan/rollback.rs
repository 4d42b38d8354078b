//! A pool's release taken back to the last revision it was done with, as a
//! DaemonSet is taken back to a ControllerRevision: rebuilt from the spec,
//! the chart and the requests the history recorded for that revision, for
//! this pool, and stamped as rolled back from the failed revision. The
//! rollout says which pools go back and when (see `rollout::rollback`).

pub mod stamps;

use std::collections::BTreeMap;

use crate::chart::shared::ChartRef;
use crate::pools::Pool;
use crate::reconcile::history::History;
use crate::reconcile::release::build::{self, AppInfo, FieldError};
use crate::values::template::Renderer;

use super::build::{Built, Kind};
use super::{DesiredRelease, ObservedRelease, Outcome, PastRevision, PlanInput, Stamps};

/// The revisions the pools that took a revision may go back to (each the
/// last its pool was done with, as its release's stamp says), read from
/// the history, or why one cannot be read.
#[derive(Debug, Default)]
pub(super) struct Targets {
    pasts: BTreeMap<String, Result<PastRevision, String>>,
}

impl Targets {
    /// Those of the `owned` releases that took `revision`, or were taken
    /// back from it; none unless a rollback may come (`wanted`).
    pub(super) fn of<'a>(
        history: Option<&History>,
        owned: impl Iterator<Item = &'a ObservedRelease>,
        revision: &str,
        wanted: bool,
    ) -> Self {
        let Some(history) = history.filter(|_| wanted) else {
            return Self::default();
        };
        let mut pasts = BTreeMap::new();
        for stamps in owned.map(|o| &o.stamps) {
            let to = match (stamps.revision.as_deref(), stamps.rolled_back_from.as_deref()) {
                (_, Some(from)) if from == revision => stamps.revision.as_deref(),
                (Some(at), None) if at == revision => stamps.rollback_revision.as_deref(),
                _ => None,
            };
            if let Some(to) = to.filter(|to| !pasts.contains_key(*to)) {
                let past = history.past(to).unwrap_or_else(|| {
                    Err(format!(
                        "revision {to} is no longer in the history (past revisionHistoryLimit): the pools \
                         done with it cannot go back to it"
                    ))
                });
                pasts.insert(to.to_string(), past);
            }
        }
        Self { pasts }
    }

    /// The revision `to`, when it can be gone back to.
    pub(super) fn get(&self, to: Option<&str>) -> Option<&PastRevision> {
        self.pasts.get(to?)?.as_ref().ok()
    }

    /// The newest revision that can be gone back to, by `history`'s numbers.
    pub(super) fn newest(&self, history: Option<&History>) -> Option<String> {
        let number = |revision: &str| history.and_then(|h| h.number(revision)).unwrap_or_default();
        self.pasts
            .iter()
            .filter(|(_, past)| past.is_ok())
            .max_by_key(|(revision, _)| number(revision))
            .map(|(revision, _)| revision.clone())
    }

    /// Why some cannot be gone back to.
    pub(super) fn unreadable(&self) -> Vec<String> {
        self.pasts.values().filter_map(|p| p.as_ref().err().cloned()).collect()
    }

    /// The shared charts of those that can be gone back to: kept until the
    /// revision under way completes.
    pub(super) fn charts(&self) -> Vec<ChartRef> {
        self.pasts.values().filter_map(|p| p.as_ref().ok()?.chart_ref.clone()).collect()
    }
}

/// A rollback from the revision `failed` to `past`.
pub(super) struct Back<'a> {
    pub input: &'a PlanInput<'a>,
    pub app: &'a AppInfo<'a>,
    pub past: &'a PastRevision,
    pub failed: &'a str,
    /// The rollout of `failed` that takes the pool back, by its number.
    pub rollout_number: Option<i64>,
}

impl Back<'_> {
    /// What becomes of `pool`, whose turn to go back came: its write is
    /// added to `apply`. A chart hold or a suspension holds it, as it holds
    /// every write; a pool the past revision cannot be built for (a
    /// template that reads what the pool no longer has) stays as it is.
    pub(super) fn outcome(
        &self,
        pool: &Pool,
        observed: Option<&ObservedRelease>,
        apply: &mut Vec<DesiredRelease>,
    ) -> Outcome {
        if self.input.app.spec.suspend == Some(true) {
            return Outcome::Suspended;
        }
        if self.input.hold.is_some() {
            return Outcome::Held;
        }
        match self.write(pool, observed) {
            Ok(Some(write)) => {
                apply.push(write);
                Outcome::Planned
            }
            Ok(None) => Outcome::Unchanged,
            Err(FieldError { field, message }) => Outcome::Failed {
                field,
                message: format!(
                    "cannot go back to revision {}: {message}; the pool stays as it is",
                    self.past.revision
                ),
            },
        }
    }

    fn write(
        &self,
        pool: &Pool,
        observed: Option<&ObservedRelease>,
    ) -> Result<Option<DesiredRelease>, FieldError> {
        // Exactly as the revision was: with the requests it carried, not
        // the application's now (which may be what made the failed one).
        let requests: Vec<(&str, &str)> =
            self.past.requests.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let app = AppInfo {
            spec: &self.past.spec,
            chart_ref: self.past.chart_ref.as_ref(),
            // Its values were checked against its chart when it rolled out.
            chart: None,
            requests: &requests,
            ..*self.app
        };
        let built = build::release(&app, pool, &Renderer::new(), None)?;
        let stamps = Stamps::rolled_back(self.failed, &self.past.revision).by(self.rollout_number);
        match Built::new(built, observed.as_ref().copied()).into_candidate().1 {
            Kind::Differs(change) => {
                let now = self.input.now.0.to_string();
                Ok(Some(change.into_write(pool.name.clone(), (now, None), stamps)))
            }
            // The release holds that revision already.
            Kind::Unchanged | Kind::Refused(_) => Ok(None),
        }
    }
}
