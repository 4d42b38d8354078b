//! Metric checks (`spec.rollout.analysis`): whether a pool that soaks on
//! the revision passes, fails or is still being asked. Pure: the runtime
//! asks the queries the plan says are due ([`Ask`]) and keeps each
//! check's answers folded into a [`CheckRecord`]; this judges them.
//!
//! - A check is asked once the pool's release is Ready on the revision,
//!   then every `interval`, and once more when the soak ends if its last
//!   answer came before that.
//! - An answer out of bounds (or empty, unless `onEmpty: Pass`) is a
//!   failure; more than `failureLimit` failures fail the pool for the
//!   revision, naming the check, the value and the bound.
//! - A pool passes once its soak (`minReadySeconds`) is over and each
//!   check's latest answer, given at or after the soak's end, is within
//!   bounds.
//! - A query that gets no answer (the server down, a query it refuses)
//!   counts neither way: the pool waits, and says why; once its checks
//!   have gone unanswered for `progressDeadline` it fails. A check never
//!   passes a pool it could not ask.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use litemap::LiteMap;

use crate::api::{Analysis, GateType, PrometheusSource};
use crate::pools::Pool;
use crate::reconcile::release::build::FieldError;

use super::measure::format_duration;

mod analysing;
pub mod kept;
mod pre_rollout;
mod read;
mod render;

pub use analysing::Analysing;
pub use pre_rollout::PRE_ROLLOUT_KEY;
use read::{read_checks, read_gate};
pub use render::{render, render_batched, render_pools, render_wave};

/// A check's interval when the spec gives none.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// The checks of `spec.rollout.analysis`, read and their queries parsed.
#[derive(Debug, Clone)]
pub struct Checks {
    pub source: Option<PrometheusSource>,
    pub checks: Vec<Check>,
    /// Each wave's checks (`waveChecks`).
    pub wave_checks: Vec<Check>,
    /// The `PreRollout` webhook gates: asked before the revision's first
    /// pool is written.
    pub pre_rollout: Vec<Check>,
}

/// One wave, as its checks see it.
#[derive(Debug, Clone, Copy)]
pub struct Wave<'a> {
    /// What an approval calls its step: the step's name or its position.
    pub name: &'a str,
    pub pools: &'a [&'a str],
}

impl Wave<'_> {
    /// What the records and the asks call the wave: no pool's name has
    /// a colon.
    pub fn key(&self) -> String {
        format!("wave:{}", self.name)
    }
}

/// One check, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: String,
    /// The query as written, templated per pool.
    pub query: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub interval: Duration,
    pub failure_limit: u32,
    pub pass_on_empty: bool,
    /// A webhook gate: where it POSTs to. A 2xx answer lets it go,
    /// anything else holds; it never fails.
    pub webhook: Option<Webhook>,
    /// Asked once for the pools due together: the label that names each
    /// pool's series in the answer (`by`).
    pub by: Option<String>,
}

/// Where a webhook gate POSTs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub url: String,
    /// The Secret (in the application's namespace) whose `ca.crt` the
    /// gate's TLS certificate is checked against, besides the system's.
    pub cert_secret: Option<String>,
}

/// The default interval of a webhook gate.
pub const DEFAULT_GATE_INTERVAL: Duration = Duration::from_secs(10);

/// One query to ask now, for one pool's check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub pool: String,
    pub check: String,
    /// The query with the pool's names put in.
    pub query: String,
    /// A webhook gate's: POSTed to rather than queried.
    pub webhook: Option<Webhook>,
    /// A check asked once for the pools due together: the label that
    /// names each pool's series. `query` is then the check's query with
    /// the revision put in and `{{pools}}` left for the asker, which puts
    /// in the pools it asks for at once.
    pub by: Option<String>,
    /// The pools it is about: the pool, or the wave's.
    pub pools: Vec<String>,
    /// When the pool's release turned Ready on the revision: the answers
    /// belong to this soak.
    pub ready_since: Timestamp,
}

/// What a query answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Value(f64),
    /// No series.
    Empty,
    /// No answer: why.
    Unanswered(String),
}

/// One check's answers for one pool over one soak, folded: bounded
/// however long the soak.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckRecord {
    pub asked: u32,
    pub failures: u32,
    /// The latest failure, for the message.
    pub last_failure: Option<(Timestamp, Answer)>,
    /// The latest answer of any kind, and when.
    pub last: Option<(Timestamp, Answer)>,
    /// Since when the check has gone unanswered, while it has.
    pub unanswered_since: Option<Timestamp>,
}

/// One pool's records for one soak on one revision, by check name: in a
/// sorted vector, since a pool has one check or a few, and the first node
/// of a `BTreeMap` has room for eleven (about 1.6 KB a pool, 16 MB at
/// 10,000 pools under a check).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolRecords {
    pub revision: String,
    pub ready_since: Option<Timestamp>,
    pub checks: LiteMap<String, CheckRecord>,
}

/// The records of one application's pools, by pool name.
pub type Records = BTreeMap<String, PoolRecords>;

/// What a plan knows of the checks' answers.
#[derive(Debug, Clone, Copy)]
pub enum Answers<'a> {
    /// The answers themselves, as the controller that asks keeps them.
    Asked(&'a Records),
    /// The verdicts the application's status reports, for those who only
    /// look (`get`, the console): a pool it does not list passed.
    Reported(&'a BTreeMap<String, Verdict>),
}

/// Where a pool's checks stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every check passed over the soak.
    Passed,
    /// Still asking: when the next answer is due, and what the checks say
    /// so far (for the status).
    Asking { next: Duration, message: String },
    /// The pool failed its checks for the revision.
    Failed(String),
}

impl Checks {
    /// `spec.rollout.analysis` read: intervals parsed, queries parsed as
    /// PromQL with their placeholders filled in.
    pub fn new(spec: &Analysis) -> Result<Self, FieldError> {
        let mut checks = read_checks("checks", &spec.checks)?;
        let mut wave_checks = read_checks("waveChecks", &spec.wave_checks)?;
        let mut pre_rollout = Vec::new();
        for (i, gate) in spec.webhooks.iter().enumerate() {
            let read = read_gate(i, gate)?;
            match gate.gate {
                GateType::PreDone => checks.push(read),
                GateType::PreWave => wave_checks.push(read),
                GateType::PreRollout => pre_rollout.push(read),
            }
        }
        Ok(Self {
            source: spec.prometheus.clone(),
            checks,
            wave_checks,
            pre_rollout,
        })
    }

    /// The checks due for `pool`, soaking since `ready_since` until
    /// `soak_end`, each with its query rendered for the pool.
    pub fn due(
        &self,
        pool: &Pool,
        revision: &str,
        records: Option<&PoolRecords>,
        ready_since: Timestamp,
        soak_end: Timestamp,
        now: Timestamp,
    ) -> Vec<Ask> {
        let at = Soaked {
            revision,
            ready_since,
            soak_end,
            now,
        };
        due_of(&self.checks, records, &at)
            .into_iter()
            .map(|c| Ask {
                pool: pool.name.clone(),
                check: c.name.clone(),
                query: match &c.by {
                    None => render(&c.query, pool, revision),
                    Some(_) => render_batched(&c.query, revision),
                },
                webhook: c.webhook.clone(),
                by: c.by.clone(),
                pools: vec![pool.name.clone()],
                ready_since,
            })
            .collect()
    }

    /// Judges `pool`'s checks for the soak from `ready_since` to
    /// `soak_end`, `deadline` being how long they may go unanswered.
    pub fn judge(
        &self,
        revision: &str,
        records: Option<&PoolRecords>,
        ready_since: Timestamp,
        soak_end: Timestamp,
        deadline: Duration,
        now: Timestamp,
    ) -> Verdict {
        let at = Soaked {
            revision,
            ready_since,
            soak_end,
            now,
        };
        judge_of(&self.checks, records, &at, deadline)
    }

    /// The wave checks due for `wave`, done since `done`.
    pub fn due_wave(
        &self,
        wave: Wave,
        revision: &str,
        records: Option<&PoolRecords>,
        done: Timestamp,
        now: Timestamp,
    ) -> Vec<Ask> {
        let at = Soaked {
            revision,
            ready_since: done,
            soak_end: done,
            now,
        };
        due_of(&self.wave_checks, records, &at)
            .into_iter()
            .map(|c| Ask {
                pool: wave.key(),
                check: c.name.clone(),
                query: render_wave(&c.query, wave, revision),
                webhook: c.webhook.clone(),
                by: None,
                pools: wave.pools.iter().map(|p| p.to_string()).collect(),
                ready_since: done,
            })
            .collect()
    }

    /// Judges `wave`'s checks, every pool of it done since `done`: each
    /// check's answer since then decides.
    pub fn judge_wave(
        &self,
        revision: &str,
        records: Option<&PoolRecords>,
        done: Timestamp,
        deadline: Duration,
        now: Timestamp,
    ) -> Verdict {
        let at = Soaked {
            revision,
            ready_since: done,
            soak_end: done,
            now,
        };
        judge_of(&self.wave_checks, records, &at, deadline)
    }
}

/// When a soak's checks are looked at.
#[derive(Clone, Copy)]
struct Soaked<'a> {
    revision: &'a str,
    ready_since: Timestamp,
    soak_end: Timestamp,
    now: Timestamp,
}

/// The checks of `checks` due now.
fn due_of<'c>(checks: &'c [Check], records: Option<&PoolRecords>, at: &Soaked) -> Vec<&'c Check> {
    let records = records.filter(|r| r.revision == at.revision && r.ready_since == Some(at.ready_since));
    checks
        .iter()
        .filter(|c| {
            let last = records.and_then(|r| r.checks.get(&c.name)).and_then(|r| r.last.as_ref());
            next_due(c, last.map(|(at, _)| *at), at.soak_end).is_none_or(|due| due <= at.now)
        })
        .collect()
}

/// Judges `checks` for the soak `at`, `deadline` being how long they may
/// go unanswered.
fn judge_of(checks: &[Check], records: Option<&PoolRecords>, at: &Soaked, deadline: Duration) -> Verdict {
    let Soaked {
        revision,
        ready_since,
        soak_end,
        now,
    } = *at;
    let records = records.filter(|r| r.revision == revision && r.ready_since == Some(ready_since));
    let record = |c: &Check| records.and_then(|r| r.checks.get(&c.name));
    for c in checks {
        let Some(r) = record(c) else { continue };
        if r.failures > c.failure_limit {
            let (at, answer) = r.last_failure.as_ref().map_or((now, &Answer::Empty), |(t, a)| (*t, a));
            return Verdict::Failed(format!(
                "check {} failed {} of {} times (failureLimit {}); at {}: {}",
                c.name,
                r.failures,
                r.asked,
                c.failure_limit,
                super::stamp(at),
                describe(c, answer)
            ));
        }
        // A gate holds as long as it answers so: it never fails.
        if let Some(since) = r.unanswered_since.filter(|_| c.webhook.is_none()) {
            let waited = Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO);
            if waited >= deadline {
                let why = match &r.last {
                    Some((_, Answer::Unanswered(why))) => why.as_str(),
                    _ => "no answer",
                };
                return Verdict::Failed(format!(
                    "check {} went unanswered for its progressDeadline ({}) since {}: {why}",
                    c.name,
                    format_duration(deadline),
                    super::stamp(since)
                ));
            }
        }
    }
    let passed = |c: &Check| {
        record(c)
            .and_then(|r| r.last.as_ref())
            .is_some_and(|(at, answer)| *at >= soak_end && within(c, answer) == Some(true))
    };
    if now >= soak_end && checks.iter().all(passed) {
        return Verdict::Passed;
    }
    let next = checks
        .iter()
        .filter_map(|c| next_due(c, record(c).and_then(|r| r.last.as_ref()).map(|(at, _)| *at), soak_end))
        .min()
        .map_or(Duration::ZERO, |due| {
            Duration::try_from(due.duration_since(now)).unwrap_or(Duration::ZERO)
        });
    let message = checks
        .iter()
        .map(|c| match record(c).and_then(|r| r.last.as_ref()) {
            None => format!("{}: not asked yet", c.name),
            Some((_, answer)) => format!("{}: {}", c.name, describe(c, answer)),
        })
        .collect::<Vec<_>>()
        .join("; ");
    Verdict::Asking { next, message }
}

impl CheckRecord {
    /// Folds in one answer of `check`, given at `at`.
    pub fn record(&mut self, check: &Check, at: Timestamp, answer: Answer) {
        self.asked += 1;
        match within(check, &answer) {
            None => {
                self.unanswered_since.get_or_insert(at);
            }
            Some(ok) => {
                self.unanswered_since = None;
                if !ok {
                    self.failures += 1;
                    self.last_failure = Some((at, answer.clone()));
                }
            }
        }
        self.last = Some((at, answer));
    }
}

/// Whether `answer` passes `check`: `None` when there was no answer.
pub fn within(check: &Check, answer: &Answer) -> Option<bool> {
    match answer {
        Answer::Unanswered(_) => None,
        Answer::Empty => Some(check.pass_on_empty),
        // NaN is within no bounds.
        Answer::Value(v) => Some(
            !v.is_nan() && check.min.is_none_or(|min| *v >= min) && check.max.is_none_or(|max| *v <= max),
        ),
    }
}

/// When `check` is next due, its last answer given at `last`: `None` when
/// it is due at once (never asked in this soak).
fn next_due(check: &Check, last: Option<Timestamp>, soak_end: Timestamp) -> Option<Timestamp> {
    let last = last?;
    let interval = k8s_openapi::jiff::SignedDuration::try_from(check.interval).unwrap_or_default();
    let by_interval = last.checked_add(interval).unwrap_or(last);
    // The soak's end is asked for as soon as it comes.
    Some(if last < soak_end {
        by_interval.min(soak_end)
    } else {
        by_interval
    })
}

/// An answer said against the check's bounds.
fn describe(check: &Check, answer: &Answer) -> String {
    if check.webhook.is_some() {
        return match answer {
            Answer::Value(status) => format!("HTTP {status}: lets it go"),
            Answer::Empty => "no answer: holds".into(),
            Answer::Unanswered(why) => format!("holds: {why}"),
        };
    }
    let bounds = match (check.min, check.max) {
        (Some(min), Some(max)) => format!("min {min}, max {max}"),
        (Some(min), None) => format!("min {min}"),
        (None, Some(max)) => format!("max {max}"),
        (None, None) => "no bounds".into(),
    };
    match answer {
        Answer::Value(v) => {
            let verdict = match within(check, answer) {
                Some(true) => "within",
                _ => "out of",
            };
            format!("{v} ({verdict} {bounds})")
        }
        Answer::Empty if check.pass_on_empty => "no data (onEmpty: Pass)".into(),
        Answer::Empty => "no data (onEmpty: Fail: no data is not good news)".into(),
        Answer::Unanswered(why) => format!("no answer: {why}"),
    }
}

#[cfg(test)]
mod tests;
