//! What the runtime carries out of a plan's checks, and what it keeps of
//! their answers: each answer folded into its pool's (or wave's) records
//! for the revision under way, and counted for the controller's metrics.

use k8s_openapi::jiff::Timestamp;
use litemap::LiteMap;

use super::{within, Answer, Ask, Check, Checks, PoolRecords, Records};
use crate::api::PrometheusSource;

/// What the runtime carries out of a plan's checks: where to ask, and
/// what is due now.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysing {
    /// The query API; none when only webhooks are given.
    pub source: Option<PrometheusSource>,
    pub checks: Vec<Check>,
    pub wave_checks: Vec<Check>,
    pub pre_rollout: Vec<Check>,
    /// The revision under way: records of any other are let go.
    pub revision: String,
    pub asks: Vec<Ask>,
    /// Whether the plan judged the answers: only while the revision under
    /// way is progressive and not complete. A plan that did not read none.
    pub judged: bool,
    /// The check failures releases keep of soaks the memory holds nothing
    /// of ([`super::kept`]), by pool: where the memory starts from.
    pub kept: Vec<(String, PoolRecords)>,
}

impl Analysing {
    /// What the runtime carries out of `checks` on `revision`: the `asks`
    /// due now, whether pools were `judged` by them, and the failures the
    /// releases `kept`.
    pub fn of(
        checks: Checks,
        revision: &str,
        asks: Vec<Ask>,
        judged: bool,
        kept: Vec<(String, PoolRecords)>,
    ) -> Self {
        Self {
            source: checks.source,
            checks: checks.checks,
            wave_checks: checks.wave_checks,
            pre_rollout: checks.pre_rollout,
            revision: revision.to_string(),
            asks,
            judged,
            kept,
        }
    }

    /// `records` with each of `answered` folded in, given at `at`: a
    /// pool's records start afresh when its soak or the revision changed,
    /// and records of another revision are let go, so what is kept never
    /// outgrows the pools that soak on the revision under way.
    /// Each answer's check and what it came to (`within`, `out_of_bounds`
    /// or `unanswered`), for the controller's own metrics.
    pub fn results(&self, answered: &[(Ask, Answer)]) -> Vec<(String, &'static str)> {
        answered
            .iter()
            .filter_map(|(ask, answer)| {
                let check = self.check_of(ask)?;
                let result = match within(check, answer) {
                    Some(true) => "within",
                    Some(false) => "out_of_bounds",
                    None => "unanswered",
                };
                Some((ask.check.clone(), result))
            })
            .collect()
    }

    /// The check `ask` asks: a wave's asks are keyed by the wave
    /// ([`Wave::key`]).
    fn check_of(&self, ask: &Ask) -> Option<&Check> {
        let list = if ask.pool == super::PRE_ROLLOUT_KEY {
            &self.pre_rollout
        } else if ask.pool.starts_with("wave:") {
            &self.wave_checks
        } else {
            &self.checks
        };
        list.iter().find(|c| c.name == ask.check)
    }

    /// Taken whole rather than copied: at ten thousand pools under a check
    /// the records are megabytes, and a copy held both at once.
    pub fn fold(&self, mut records: Records, answered: Vec<(Ask, Answer)>, at: Timestamp) -> Records {
        records.retain(|_, r| r.revision == self.revision);
        for (pool, kept) in &self.kept {
            let records = records.entry(pool.clone()).or_default();
            if records.revision != kept.revision || records.ready_since != kept.ready_since {
                *records = kept.clone();
            }
        }
        for (ask, answer) in answered {
            let Some(check) = self.check_of(&ask) else {
                continue;
            };
            let pool = records.entry(ask.pool).or_default();
            if pool.revision != self.revision || pool.ready_since != Some(ask.ready_since) {
                *pool = PoolRecords {
                    revision: self.revision.clone(),
                    ready_since: Some(ask.ready_since),
                    checks: LiteMap::new(),
                };
            }
            pool.checks.entry(ask.check).or_default().record(check, at, answer);
        }
        records
    }
}
