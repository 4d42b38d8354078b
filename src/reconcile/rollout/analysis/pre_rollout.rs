//! The `PreRollout` webhook gates: asked before a revision's first pool
//! is written, their answers kept for one rollout of the revision.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::{due_of, judge_of, Ask, Checks, PoolRecords, Soaked, Verdict};

/// What the records and the asks call the `PreRollout` gates' answers:
/// no pool's name has a colon, and no wave's key starts so.
pub const PRE_ROLLOUT_KEY: &str = "rollout:";

/// The `PreRollout` gates' answers belong to one rollout of a revision,
/// not to a soak: the rollout's number stands for the time a soak began,
/// so that an answer to an earlier rollout of the same revision (a change
/// undone and redone) lets nothing go.
fn rollout_anchor(rollout: i64) -> Timestamp {
    Timestamp::from_second(rollout).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The soak the gates of one rollout of `revision` are asked in: it
/// begins and ends at the rollout's anchor, so the last answer decides.
fn soak_of(revision: &str, rollout: i64, now: Timestamp) -> Soaked<'_> {
    let anchor = rollout_anchor(rollout);
    Soaked {
        revision,
        ready_since: anchor,
        soak_end: anchor,
        now,
    }
}

impl Checks {
    /// The `PreRollout` gates due for the rollout of `revision` numbered
    /// `rollout`, before `pools` are written.
    pub fn due_pre_rollout(
        &self,
        pools: &[&str],
        (revision, rollout): (&str, i64),
        records: Option<&PoolRecords>,
        now: Timestamp,
    ) -> Vec<Ask> {
        let at = soak_of(revision, rollout, now);
        due_of(&self.pre_rollout, records, &at)
            .into_iter()
            .map(|c| Ask {
                pool: PRE_ROLLOUT_KEY.to_string(),
                check: c.name.clone(),
                query: String::new(),
                webhook: c.webhook.clone(),
                by: None,
                pools: pools.iter().map(|p| p.to_string()).collect(),
                ready_since: at.ready_since,
            })
            .collect()
    }

    /// Judges the `PreRollout` gates of the rollout of `revision`
    /// numbered `rollout`: passed once each last answered a 2xx.
    pub fn judge_pre_rollout(
        &self,
        (revision, rollout): (&str, i64),
        records: Option<&PoolRecords>,
        deadline: Duration,
        now: Timestamp,
    ) -> Verdict {
        judge_of(&self.pre_rollout, records, &soak_of(revision, rollout, now), deadline)
    }
}
