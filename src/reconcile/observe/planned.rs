//! What observe saw, planned: with what a plan reads beyond it (the
//! clock, the chart, the memo), or, when the input is what the last plan
//! at rest was made from, not planned at all.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::Observed;
use crate::api::NodePoolApplication;
use crate::chart::schema::Chart;
use crate::chart::shared::ChartRef;
use crate::pools::Pool;
use crate::reconcile::history::History;
use crate::reconcile::plan::{self, Hold, Memo, ObservedRelease, Plan, PlanInput};

/// What a plan reads beyond what observe saw: the time, the chart, the
/// controller's clock and the last plan's memo.
#[derive(Debug, Clone)]
pub struct Beyond<'a> {
    pub now: Time,
    pub chart_ref: Option<&'a ChartRef>,
    pub chart: Option<&'a Chart>,
    pub hold: Option<Hold>,
    pub clock_since: Option<Time>,
    pub memo: Option<&'a Memo>,
    /// What the metric checks answered so far (see `PlanInput::analysis`).
    pub analysis: Option<crate::reconcile::rollout::analysis::Answers<'a>>,
    /// `--rendering-changes` (see [`PlanInput::rendering_changes`]).
    pub rendering_changes: crate::reconcile::plan::RenderingChanges,
}

impl Observed {
    /// The plan over what was observed, as the controller plans (an
    /// application's first install goes to one pool alone), and the owned
    /// releases back from the plan's input: at thousands of pools a copy
    /// of every release held would be most of a reconcile's memory.
    pub fn plan(
        self,
        app: &NodePoolApplication,
        history: &History,
        beyond: Beyond<'_>,
    ) -> (Plan, Vec<Arc<ObservedRelease>>) {
        self.planned_with(app, history, beyond, plan::plan)
    }

    /// The plan, as [`Observed::plan`] makes it; or, when the input is
    /// what the plan that left `rest` was made from, none
    /// ([`plan::at_rest`]).
    pub fn plan_unless_at_rest(
        self,
        app: &NodePoolApplication,
        history: &History,
        beyond: Beyond<'_>,
        rest: Option<&plan::Rest>,
    ) -> Result<(Plan, Vec<Arc<ObservedRelease>>), plan::AtRest> {
        let (planned, owned) = self.planned_with(app, history, beyond, |input| {
            match rest.and_then(|rest| plan::at_rest(input, rest)) {
                Some(at_rest) => Err(at_rest),
                None => Ok(plan::plan(input)),
            }
        });
        planned.map(|planned| (planned, owned))
    }

    /// `f` of the plan's input made of what was observed, and the owned
    /// releases back from it.
    fn planned_with<T>(
        self,
        app: &NodePoolApplication,
        history: &History,
        beyond: Beyond<'_>,
        f: impl FnOnce(&PlanInput) -> T,
    ) -> (T, Vec<Arc<ObservedRelease>>) {
        let pools: Vec<&Pool> = self.pools.iter().map(|p| &p.pool).collect();
        let input = PlanInput {
            app,
            pools: &pools,
            nodes: Some(&self.nodes),
            owned: self.owned,
            others: &self.others,
            now: beyond.now,
            chart_ref: beyond.chart_ref,
            chart: beyond.chart,
            hold: beyond.hold,
            unserved: self.unserved.as_deref(),
            clock_since: beyond.clock_since,
            history: Some(history),
            memo: beyond.memo,
            first_install_alone: true,
            analysis: beyond.analysis,
            rendering_changes: beyond.rendering_changes,
        };
        let out = f(&input);
        let PlanInput { owned, .. } = input;
        (out, owned)
    }
}
