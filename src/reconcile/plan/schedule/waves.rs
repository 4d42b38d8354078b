//! The checks between waves and before the rollout, judged for a plan:
//! each done wave's checks, and the `PreRollout` gates while no pool has
//! the revision yet.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::reconcile::rollout;
use crate::reconcile::rollout::analysis::{Answers, Ask, Checks, Verdict, Wave, PRE_ROLLOUT_KEY};

/// The waves' checks, judged: each wave but the last, once every pool
/// of it is done.
pub(super) struct WaveJudging<'a> {
    pub revision: &'a str,
    pub settings: &'a rollout::Settings,
    pub wave_steps: &'a [String],
    pub waves: usize,
    pub now: Timestamp,
}

impl WaveJudging<'_> {
    pub(super) fn judge(
        &self,
        checks: Option<&Checks>,
        answers: Option<Answers>,
        inputs: &[rollout::PoolInput],
        asks: &mut Vec<Ask>,
    ) -> BTreeMap<usize, Verdict> {
        let (Some(checks), Some(answers)) = (checks.filter(|c| !c.wave_checks.is_empty()), answers) else {
            return BTreeMap::new();
        };
        let done = rollout::waves_done(self.settings, inputs, self.now);
        let mut verdicts = BTreeMap::new();
        for (wave, done_at) in done.into_iter().filter(|(wave, _)| wave + 1 < self.waves) {
            let pools: Vec<&str> = inputs.iter().filter(|p| p.wave == wave).map(|p| p.pool).collect();
            let name = self.wave_steps.get(wave).map_or("", String::as_str);
            let of = Wave { name, pools: &pools };
            let verdict = match answers {
                // Those who only look read the rollout's phase from the status.
                Answers::Reported(_) => Verdict::Passed,
                Answers::Asked(records) => {
                    let records = records.get(&of.key());
                    let (deadline, now) = (self.settings.progress_deadline, self.now);
                    let verdict = checks.judge_wave(self.revision, records, done_at, deadline, now);
                    if matches!(verdict, Verdict::Asking { .. }) {
                        asks.extend(checks.due_wave(of, self.revision, records, done_at, now));
                    }
                    verdict
                }
            };
            verdicts.insert(wave, verdict);
        }
        verdicts
    }
}

impl WaveJudging<'_> {
    /// The `PreRollout` gates, judged while the revision is still to be
    /// written and no pool has it yet: once one has, it is under way.
    pub(super) fn judge_pre_rollout(
        &self,
        checks: Option<&Checks>,
        answers: Option<Answers>,
        inputs: &[rollout::PoolInput],
        asks: &mut Vec<Ask>,
    ) -> Option<Verdict> {
        let checks = checks.filter(|c| !c.pre_rollout.is_empty())?;
        let Some(Answers::Asked(records)) = answers else {
            // Those who only look read the rollout's phase from the status.
            return None;
        };
        let current = |p: &rollout::PoolInput| matches!(p.release, rollout::Release::Current { .. });
        let to_write = |p: &rollout::PoolInput| !current(p);
        if inputs.iter().any(current) || !inputs.iter().any(to_write) {
            return None;
        }
        let rollout = (self.revision, self.settings.rollout_number.unwrap_or_default());
        let records = records.get(PRE_ROLLOUT_KEY);
        let verdict = checks.judge_pre_rollout(rollout, records, self.settings.progress_deadline, self.now);
        if matches!(verdict, Verdict::Asking { .. }) {
            let pools: Vec<&str> = inputs.iter().filter(|p| to_write(p)).map(|p| p.pool).collect();
            asks.extend(checks.due_pre_rollout(&pools, rollout, records, self.now));
        }
        Some(verdict)
    }
}
