//! A pool's release taken back to the last revision that completed, as a
//! DaemonSet is taken back to a ControllerRevision: rebuilt from the spec
//! and the chart the history recorded for that revision, for this pool,
//! and stamped as rolled back from the failed revision. The rollout says
//! which pools go back and when (see `rollout::rollback`).

use crate::pools::Pool;
use crate::reconcile::release::{self, AppInfo, FieldError};
use crate::values::template::Renderer;

use super::build::{Built, Kind};
use super::{DesiredRelease, ObservedRelease, Outcome, PastRevision, PlanInput, Stamps};

/// A rollback from the revision `failed` to `past`.
pub(super) struct Back<'a> {
    pub input: &'a PlanInput<'a>,
    pub app: &'a AppInfo<'a>,
    pub past: &'a PastRevision,
    pub failed: &'a str,
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
        let built = release::build(&app, pool, &Renderer::new(), None)?;
        let stamps = Stamps::rolled_back(self.failed, &self.past.revision);
        match Built::new(built, observed.as_ref().copied()).into_candidate().1 {
            Kind::Differs(change) => {
                let now = self.input.now.0.to_string();
                Ok(Some(change.into_write(pool.name.clone(), now, stamps)))
            }
            // The release holds that revision already.
            Kind::Unchanged | Kind::Refused(_) => Ok(None),
        }
    }
}
