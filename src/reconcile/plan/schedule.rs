//! Each pool's outcome, decided once: the rollout says which changes go
//! out now, then the chart's hold and the application's suspension have
//! their say, and only the changes that are written become writes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use crate::api::naming;
use crate::pools::nodes::{Counted, NodeCount};
use crate::pools::{self, Pool};
use crate::reconcile::release::state::ReleaseState;
use crate::reconcile::rollout::analysis::{Answers, Ask, Checks, Verdict};
use crate::reconcile::rollout::window::Gates;
use crate::reconcile::rollout::{self, PoolRollout};

use super::build::{Candidate, Change, Kind};
use super::rollback;

mod waves;
use super::{DesiredRelease, ObservedRelease, Outcome, Owned, Plan, PlanInput, PoolOutcome, Stamps};
use crate::reconcile::release::build::AppInfo;
use waves::WaveJudging;

/// What the rollout is decided over, besides the candidates.
pub(super) struct Scheduling<'a> {
    pub settings: &'a rollout::Settings,
    /// The revision under way, which an approval must name.
    pub revision: &'a str,
    pub selected: &'a [&'a Pool],
    /// Each pool's nodes, or its site's reach.
    pub reach: Option<&'a BTreeMap<String, NodeCount>>,
    /// The maintenance windows, read at the plan's `now`.
    pub windows: &'a Gates<'a>,
    /// Where the pools that took the revision may go back to.
    pub targets: &'a rollback::Targets,
    /// The revision's metric checks, and what they answered so far.
    pub checks: Option<&'a Checks>,
}

/// The pools whose last write the API server refused for good, as the
/// status says (see [`crate::reconcile::fleet::WriteRefused`]). One whose
/// write a retry may mend (a 5xx or a conflict during an API server
/// restart) is no refusal: it goes first or waits for the first install
/// as any pool does (found in review: such a failure on the first pool's
/// write let the next go first beside it).
fn refused_writes(app: &crate::api::NodePoolApplication) -> BTreeSet<&str> {
    let Some(status) = app.status.as_ref() else {
        return BTreeSet::new();
    };
    let refused = |reason: &str| {
        crate::reconcile::fleet::REFUSED_WRITE_REASONS.contains(&reason)
            && !crate::reconcile::fleet::write_retried(status, reason)
    };
    status.pools.iter().filter(|p| refused(&p.reason)).map(|p| p.pool.as_str()).collect()
}

/// The rollout's decision over the candidates whose release is built:
/// which of the changes go out now, and where each pool stands; and the
/// metric checks due now.
pub(super) fn decide(
    input: &PlanInput,
    owned: &Owned,
    scheduling: &Scheduling,
    candidates: &[Candidate],
) -> (rollout::Decision, Vec<Ask>) {
    let Scheduling {
        settings,
        revision,
        selected,
        reach,
        windows,
        targets,
        checks,
    } = *scheduling;
    let mut asks = Vec::new();
    let steps = input.app.spec.rollout.as_ref().map(|r| r.steps.as_slice()).unwrap_or_default();
    // A step's selector was checked with the others: an error matches nothing.
    let step_of = |pool: &Pool| {
        steps
            .iter()
            .position(|s| pools::contains(&s.pools, pool).unwrap_or(false))
            .unwrap_or(steps.len())
    };
    let waves = waves_of(steps, selected.iter().map(|p| step_of(p)));
    let wave_of = |pool: &Pool| waves.iter().position(|w| *w == step_of(pool)).unwrap_or_default();
    // This rollout of the revision began when its record says, or begins
    // now: a revision not yet recorded as the newest (new, come back, or
    // its record forgotten) has done nothing yet, and a rollback stamp
    // that names it is of an earlier rollout.
    let since = input.history.map(|h| h.rolled_out_since(revision).unwrap_or(input.now.0));
    let refused_before = refused_writes(input.app);
    let inputs: Vec<rollout::PoolInput> = candidates
        .iter()
        .filter_map(|c| {
            let pool = c.pool;
            let observed = owned.get(c.release.as_str());
            let nodes = reach.and_then(|n| n.get(&pool.name)).copied();
            let release = release_of(input, observed.copied(), &c.kind)?;
            let stamp =
                stamp_of(observed.copied(), &release, revision, targets, (since, settings.rollout_number));
            let analysis = checks.zip(input.analysis).and_then(|(checks, answers)| {
                let judging = Judging {
                    checks,
                    pool,
                    revision,
                    settings,
                    answers,
                    now: input.now.0,
                };
                judging.judge(&release, observed.copied(), &mut asks)
            });
            let closed = closed(windows, pool);
            let window_closes = window_closes(windows, pool, closed.as_ref(), &release);
            Some(rollout::PoolInput {
                analysis,
                stamp,
                pool: &pool.name,
                wave: wave_of(pool),
                offline: nodes.is_some_and(|n| n.offline()),
                // helm-controller's word that it cannot reach a site
                // dates from its first attempt after the write, and says
                // the site never got the write: no update took it down.
                offline_since: nodes.filter(|n| n.of != Counted::Connection).and_then(|n| n.changed),
                down_since: nodes.and_then(|n| n.changed),
                closed,
                window_closes,
                refused_before: refused_before.contains(pool.name.as_str()),
                last_written: observed.and_then(|o| o.written_at.as_ref()).and_then(|w| w.time),
                suspended: match &c.kind {
                    Kind::Differs(change) => change.suspends(),
                    _ => observed.is_some_and(|o| o.suspended),
                },
                release,
            })
        })
        .collect();
    // Waves whose step requires approval and has none for this rollout.
    let approved: BTreeSet<&str> = settings.approved_steps.iter().map(String::as_str).collect();
    let wave_steps: Vec<String> = waves.iter().map(|step| step_key(steps, *step)).collect();
    let awaiting_approval = waves
        .iter()
        .zip(&wave_steps)
        .enumerate()
        .filter(|(_, (step, _))| steps.get(**step).is_some_and(|s| s.require_approval == Some(true)))
        .filter(|(_, (_, key))| !approved.contains(key.as_str()))
        .map(|(wave, _)| wave)
        .collect();
    let judging = WaveJudging {
        revision,
        settings,
        wave_steps: &wave_steps,
        waves: waves.len(),
        now: input.now.0,
    };
    let wave_checks = judging.judge(checks, input.analysis, &inputs, &mut asks);
    let pre_rollout = judging.judge_pre_rollout(checks, input.analysis, &inputs, &mut asks);
    let settings = rollout::Settings {
        awaiting_approval,
        wave_steps,
        wave_checks,
        pre_rollout,
        ..settings.clone()
    };
    (rollout::decide(&settings, &inputs, waves.len(), input.now.0), asks)
}

/// The waves, by the index of the step each is: those of the pools'
/// steps (`steps.len()` for the pools of no step), and a step that
/// requires approval even when it selects no pool now, if a pool comes
/// after it: its approval holds them.
fn waves_of(steps: &[crate::api::RolloutStep], of_pools: impl Iterator<Item = usize>) -> BTreeSet<usize> {
    let mut waves: BTreeSet<usize> = of_pools.collect();
    let last = waves.last().copied();
    waves.extend(
        (steps.iter().enumerate())
            .filter(|(i, s)| s.require_approval == Some(true) && last.is_some_and(|l| *i < l))
            .map(|(i, _)| i),
    );
    waves
}

/// One pool's metric checks, judged.
struct Judging<'a> {
    checks: &'a Checks,
    pool: &'a Pool,
    revision: &'a str,
    settings: &'a rollout::Settings,
    answers: Answers<'a>,
    now: Timestamp,
}

impl Judging<'_> {
    /// The verdict on a pool whose release is Ready on the revision, the
    /// checks due now added to `asks`; `None` for any other pool.
    /// What the memory holds of the pool's soak is judged, or, when it
    /// holds nothing of it, the failures its release keeps.
    fn judge(
        &self,
        release: &rollout::Release,
        observed: Option<&ObservedRelease>,
        asks: &mut Vec<Ask>,
    ) -> Option<Verdict> {
        let rollout::Release::Current { status, written, .. } = release else {
            return None;
        };
        if status.state != ReleaseState::Ready || !status.observed_latest {
            return None;
        }
        let (ready_since, soak_end) = rollout::soak_of(self.settings.min_ready, status, *written);
        let kept;
        let records = match self.answers {
            Answers::Asked(records) => {
                kept = observed.and_then(|o| super::ready::kept_failures(Some(records), o, self.revision));
                kept.as_ref().or(records.get(&self.pool.name))
            }
            Answers::Reported(verdicts) => {
                return Some(verdicts.get(&self.pool.name).cloned().unwrap_or(Verdict::Passed));
            }
        };
        let (checks, now) = (self.checks, self.now);
        let verdict =
            checks.judge(self.revision, records, ready_since, soak_end, self.settings.progress_deadline, now);
        if matches!(verdict, Verdict::Asking { .. }) {
            asks.extend(checks.due(self.pool, self.revision, records, ready_since, soak_end, now));
        }
        Some(verdict)
    }
}

/// How a pool's release stands to `revision`, by its stamps: rolled back
/// from it, or written at it (and whether it can go back to the revision
/// its stamp names, one of `targets`), or neither. A rollback that an
/// earlier rollout of the revision made (written before this rollout of
/// it began, `since`; `None` when the history was not read) is of that
/// rollout: a revision that comes back is rolled out afresh.
///
/// This rollout is told by the number a release's stamp names where it
/// names one, else (a release written before releases carried it) by the
/// time it was written.
fn stamp_of(
    observed: Option<&ObservedRelease>,
    release: &rollout::Release,
    revision: &str,
    targets: &rollback::Targets,
    (since, this_rollout): (Option<Timestamp>, Option<i64>),
) -> rollout::Stamp {
    let Some(stamps) = observed.map(|o| &o.stamps) else {
        return rollout::Stamp::Earlier;
    };
    let written = observed.and_then(|o| o.written_at.as_ref()?.time);
    let of_this_rollout = match (stamps.rollout, this_rollout, written, since) {
        (Some(by), Some(this), _, _) => by == this,
        (_, _, Some(written), Some(since)) => written >= since,
        _ => true,
    };
    if stamps.rolled_back_from.as_deref() == Some(revision) && of_this_rollout {
        return rollout::Stamp::RolledBack;
    }
    let current = matches!(release, rollout::Release::Current { .. });
    match stamps.revision.as_deref() == Some(revision) && current {
        true => rollout::Stamp::Took {
            can_go_back: targets.get(stamps.rollback_revision.as_deref()).is_some(),
        },
        false => rollout::Stamp::Earlier,
    }
}

/// The windows that apply to `pool` (the application's that select it,
/// and its own annotation), when none is open.
fn closed(windows: &Gates, pool: &Pool) -> Option<rollout::Closed> {
    windows.closed(pool)
}

/// What the rollout reads of a pool's release: none, for a pool refused.
fn release_of<'o>(
    input: &PlanInput,
    observed: Option<&'o ObservedRelease>,
    kind: &Kind,
) -> Option<rollout::Release<'o>> {
    let release = match (observed, kind) {
        (_, Kind::Refused(_)) => return None,
        (None, _) => rollout::Release::Missing,
        (Some(o), Kind::Differs(change)) if !change.restores() => rollout::Release::Behind(&o.status),
        // Resumed now: its deadline runs again from now.
        (Some(o), Kind::Differs(change)) if change.resumed() => rollout::Release::Current {
            status: &o.status,
            written: o.written_at.as_ref().and_then(|w| w.time),
            resumed: Some(input.now.0),
        },
        // Suspended, Flux does not act on it: no deadline runs.
        (Some(o), _) if o.suspended_with_app => rollout::Release::Current {
            status: &o.status,
            written: None,
            resumed: None,
        },
        (Some(o), _) => rollout::Release::Current {
            status: &o.status,
            written: o.written_at.as_ref().and_then(|w| w.time),
            resumed: o.resumed_at.as_ref().and_then(|w| w.time),
        },
    };
    Some(release)
}

/// When the first open window of a pool the rollout has yet to reach
/// closes: it is held from then (see `rollout::PoolInput::window_closes`).
fn window_closes(
    windows: &Gates,
    pool: &Pool,
    closed: Option<&rollout::Closed>,
    release: &rollout::Release,
) -> Option<Timestamp> {
    match (closed, release) {
        (None, rollout::Release::Missing | rollout::Release::Behind(_)) => windows.closes(pool),
        _ => None,
    }
}

/// What an approval calls the step at `index` of `steps`: its name, or
/// its position from 1.
pub(crate) fn step_key(steps: &[crate::api::RolloutStep], index: usize) -> String {
    match steps.get(index).and_then(|s| s.name.clone()) {
        Some(name) => name,
        None => (index + 1).to_string(),
    }
}

/// The steps of the rollout `key` ([`naming::rollout_key`]) an operator
/// approved: the `<step>`s of an approval `<key>/<step>[,<step>…]`. An
/// approval of another rollout (another revision, or an earlier rollout
/// of this one), one that does not read, and any approval while the
/// rollout is not known, approve nothing.
pub(super) fn approved_steps<'a>(
    app: &'a crate::api::NodePoolApplication,
    key: Option<&str>,
) -> BTreeSet<&'a str> {
    let approval = app.metadata.annotations.as_ref().and_then(|a| a.get(naming::ANNOTATION_APPROVE));
    approval
        .zip(key)
        .map(|(a, key)| naming::approved_steps(a, key))
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// What becomes of one candidate. A change the rollout holds back is
/// deferred (a change that puts back the release's own revision goes
/// whatever the rollout, which only moves pools between revisions); a
/// change the chart holds waits for it; and a suspended application
/// writes nothing, but a change already waiting for the chart says so.
pub(super) fn outcome(kind: &Kind, rollout: Option<PoolRollout>, held: bool, suspended: bool) -> Outcome {
    let change = match kind {
        Kind::Refused(outcome) => return outcome.clone(),
        Kind::Unchanged => return Outcome::Unchanged,
        Kind::Differs(change) => change,
    };
    let deferred = match rollout {
        Some(state) if state != PoolRollout::Write && !change.restores() => Some(state),
        _ => None,
    };
    match deferred {
        None if held => Outcome::Held,
        _ if suspended => Outcome::Suspended,
        Some(state) => Outcome::Deferred(state),
        None => Outcome::Planned,
    }
}

/// What each candidate's outcome is decided with, once the rollout has
/// decided.
pub(super) struct Deciding<'a> {
    pub input: &'a PlanInput<'a>,
    pub app: &'a AppInfo<'a>,
    pub owned: &'a Owned<'a>,
    pub decision: &'a rollout::Decision,
    /// The revision under way.
    pub revision: &'a str,
    /// What a rollback goes back to.
    pub targets: &'a rollback::Targets,
    /// How long a release must be Ready to be done with its revision.
    pub min_ready: std::time::Duration,
    /// This rollout's number in the history, stamped on what it writes.
    pub rollout_number: Option<i64>,
}

impl Deciding<'_> {
    /// Each candidate's outcome into `plan`, with the writes that carry it
    /// out: a pool going back is rebuilt from the revision it goes back to.
    pub(super) fn outcomes(&self, candidates: Vec<Candidate>, plan: &mut Plan) {
        let suspended = self.input.app.spec.suspend == Some(true);
        let mut decisions = self.decision.in_order();
        // One outcome a candidate: sized once, not doubled as it fills (a
        // doubling holds the old and the new buffer at once).
        plan.pools.reserve_exact(candidates.len());
        // So are the writes, counted first: at ten thousand pools changing
        // at once, their doubling was 5 MB of the controller's peak heap,
        // and sized by the candidates, a wave of a tenth would hold room
        // for all.
        let (held, mut ahead) = (self.input.hold.is_some(), self.decision.in_order());
        let writes = (candidates.iter())
            .filter(|c| {
                let state = ahead.get(&c.pool.name).map(|d| d.state);
                state == Some(PoolRollout::RollBack)
                    || outcome(&c.kind, state, held, suspended) == Outcome::Planned
            })
            .count();
        plan.apply.reserve_exact(writes);
        for Candidate { pool, release, kind } in candidates {
            let state = decisions.get(&pool.name).map(|d| d.state);
            let observed = self.owned.get(release.as_str()).copied();
            let back_to = observed.and_then(|o| self.targets.get(o.stamps.rollback_revision.as_deref()));
            let going_back = match (state, back_to) {
                (Some(PoolRollout::RollBack), Some(past)) => Some((past, pool)),
                _ => None,
            };
            let outcome = if let Some((past, p)) = going_back {
                let back = rollback::Back {
                    input: self.input,
                    app: self.app,
                    past,
                    failed: self.revision,
                    rollout_number: self.rollout_number,
                };
                back.outcome(p, observed, &mut plan.apply)
            } else {
                let outcome = outcome(&kind, state, self.input.hold.is_some(), suspended);
                match kind {
                    Kind::Unchanged => plan.unchanged.push(release.clone()),
                    Kind::Differs(change) if outcome == Outcome::Planned => {
                        // What the soak's logs say of each write, and why.
                        tracing::debug!(
                            pool = %pool.name,
                            release = %release,
                            rollout = ?state,
                            seen = observed.is_some(),
                            was = ?observed.map(|o| (o.status.state, &o.status.reason, o.status.observed_latest)),
                            restores = change.restores(),
                            "to be written"
                        );
                        plan.apply.push(self.write(change, pool.name.clone(), observed))
                    }
                    Kind::Differs(_) | Kind::Refused(_) => {}
                }
                outcome
            };
            plan.pools.push(PoolOutcome {
                pool: pool.name.clone(),
                release,
                outcome,
            });
        }
    }

    /// Whether `release` is done with the revision it carries: Ready on
    /// its latest spec for `minReadySeconds`, as the rollout counts done.
    fn done_with_its_revision(&self, release: &ObservedRelease) -> bool {
        rollout::soak_left(self.min_ready, &release.status, self.input.now.0)
            .is_some_and(|left| left.is_zero())
    }

    /// The write of a change, stamped. A write that puts back what the
    /// release holds keeps its time and its stamps; one that moves it to
    /// this revision is stamped so, and with where it would go back to.
    fn write(&self, change: Change, pool: String, observed: Option<&ObservedRelease>) -> DesiredRelease {
        let written_at = match change.keeps_its_time() {
            true => observed.and_then(|o| Some(o.written_at.as_ref()?.text.clone())),
            false => None,
        };
        let written_at = written_at.unwrap_or_else(|| self.input.now.0.to_string());
        let resumed_at = match (change.resumed(), change.restores()) {
            (true, _) => Some(self.input.now.0.to_string()),
            (false, true) => observed.and_then(|o| Some(o.resumed_at.as_ref()?.text.clone())),
            (false, false) => None,
        };
        let stamps = match (change.restores(), observed) {
            (true, Some(o)) => o.stamps.clone(),
            _ => Stamps::next(
                observed.map(|o| &o.stamps),
                self.revision,
                self.input.history.map(|h| h.recorded.as_slice()).unwrap_or_default(),
                self.input.history.and_then(|h| h.last_complete(self.revision)),
                observed.is_some_and(|o| self.done_with_its_revision(o)),
            )
            .by(self.rollout_number)
            .over(observed.map(|o| &o.stamps)),
        };
        change.into_write(pool, (written_at, resumed_at), stamps)
    }
}
