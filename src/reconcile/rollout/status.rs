//! The rollout's status: what `status.rollout` says of a decision, in
//! counts and in words an operator acts on.

use super::{Decision, PoolDecision, PoolInput, PoolRollout, Release, Settings};
use crate::api::{RolloutPhase, RolloutStatus};

impl Decision {
    /// Halted on a wave's failed checks: which wave, and why.
    fn wave_halt_message(&self, settings: &Settings) -> String {
        let (wave, step, why) = self.wave_failure.clone().unwrap_or_default();
        let mut message = format!(
            "halted: the checks of wave {} (step {step}) failed: {why}; no further pool is updated \
             until a new revision (fix the change)",
            wave + 1
        );
        if let Some(why) = self.rolling_back.as_ref().map(|b| cannot_go_back(b, settings)) {
            message.push_str(&format!("; onFailure: Rollback could not apply: {why}"));
        }
        message
    }

    /// The rollout's status; `revision` names what is rolled out.
    pub fn status(&self, revision: &str, settings: &Settings) -> RolloutStatus {
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        // A rollback counts the pools going back, and its failures are
        // named in its message.
        let going_back = matches!(self.phase, RolloutPhase::RollingBack | RolloutPhase::RolledBack);
        let (updated, done, total) = match self.rolling_back.as_ref().filter(|_| going_back) {
            Some(back) => {
                let written = self.pools.values().filter(|d| d.state.written_back()).count();
                (written, back.back, back.pools.len())
            }
            None => (self.updated, self.done, self.total),
        };
        let mut progress = format!("{} {done}/{total}", self.phase.as_str());
        if !self.failed.is_empty() && !going_back {
            progress.push_str(&format!(" ({} failed)", self.failed.len()));
        }
        let awaiting_step =
            self.awaiting_step.clone().filter(|_| self.phase == RolloutPhase::AwaitingApproval);
        let message = match self.phase {
            RolloutPhase::Complete if self.failed.is_empty() => {
                format!("every pool is on revision {revision}")
            }
            RolloutPhase::AwaitingOffline => format!(
                "every pool reached is on revision {revision}; {} offline pool(s) are behind on it and \
                 take it when they come back: not complete until they do, and a returning pool that \
                 fails on it halts the rollout",
                self.offline_behind
            ),
            // A completed revision stays so: what fails later is the pool's.
            RolloutPhase::Complete => format!(
                "every pool is on revision {revision}; {} pool(s) failed since it completed ({}): \
                 each is its own failure, reported on its line, and halts nothing",
                self.failed.len(),
                some_of(&self.failed)
            ),
            RolloutPhase::Halted
                if self.wave_failure.is_some() && self.failed.len() <= settings.max_failures =>
            {
                self.wave_halt_message(settings)
            }
            RolloutPhase::Halted if self.failed.len() <= settings.max_failures => {
                let on = settings
                    .halted_because
                    .as_deref()
                    .map(|b| format!(" (it halted on {b})"))
                    .unwrap_or_default();
                format!(
                    "halted earlier{on}, and it holds though no pool fails now ({} failed): the revision is \
                     known bad; no further pool is updated until a new revision (fix the change, or \
                     request a reconcile) or an edit of the application (its rollout settings)",
                    self.failed.len()
                )
            }
            RolloutPhase::Halted => {
                let cause = self.halt_cause.as_deref().map(|c| format!(": {c}")).unwrap_or_default();
                let mut message = format!(
                    "halted: {} failed pool(s) ({}), more than maxFailures {}{cause}; no further pool is \
                     updated until a new revision (fix the change) or a higher maxFailures",
                    self.failed.len(),
                    self.failed.join(", "),
                    settings.max_failures
                );
                if let Some(why) = self.rolling_back.as_ref().map(|b| cannot_go_back(b, settings)) {
                    message.push_str(&format!("; onFailure: Rollback could not apply: {why}"));
                }
                message
            }
            RolloutPhase::RollingBack | RolloutPhase::RolledBack => self.rollback_message(settings),
            RolloutPhase::Paused => format!(
                "paused: {} of {} pools updated; set rollout.paused to false to go on",
                self.updated, self.total
            ),
            RolloutPhase::AwaitingApproval => {
                self.approval_message(revision, awaiting_step.as_deref(), settings)
            }
            RolloutPhase::Progressing => {
                let wave = self.wave.map(|(w, n)| format!(", wave {w}/{n}")).unwrap_or_default();
                let waiting = self.pools.values().filter(|d| d.state == PoolRollout::Waiting).count();
                let waiting = match waiting {
                    0 => String::new(),
                    n => format!(", {n} waiting"),
                };
                format!("{} of {} pools done, {} updated{waiting}{wave}", self.done, self.total, self.updated)
            }
        };
        let message = with_held_renders(message, settings.held_renders);
        RolloutStatus {
            revision: revision.to_string(),
            number: settings.rollout_number,
            phase: self.phase,
            updated: count(updated),
            done: count(done),
            failed: count(self.failed.len()),
            total: count(total),
            rolled_back_to: self.rolling_back.as_ref().filter(|_| going_back).and(settings.back_to.clone()),
            // Waves are of the way forward; a rollback has none.
            wave: self.wave.filter(|_| self.rolling_back.is_none()).map(|(w, n)| format!("{w}/{n}")),
            awaiting_step,
            // What the history records says of earlier revisions is added
            // by the reconcile that reads it.
            last_complete_revision: (self.phase == RolloutPhase::Complete).then(|| revision.to_string()),
            progress,
            message,
        }
    }

    /// What a wave awaiting approval says: which wave, of which rollout,
    /// and the annotation that lets it go.
    fn approval_message(&self, revision: &str, awaiting_step: Option<&str>, settings: &Settings) -> String {
        let (wave, waves) = self
            .awaiting_approval
            .map(|w| (w + 1, self.wave.map_or(1, |(_, n)| n)))
            .unwrap_or((1, 1));
        let step = awaiting_step.unwrap_or("1");
        // The annotation that lets it go keeps the steps approved
        // already: each holds the waves after it.
        let mut steps: Vec<&str> = settings.approved_steps.iter().map(String::as_str).collect();
        if !steps.contains(&step) {
            steps.push(step);
        }
        let steps = steps.join(",");
        // An approval names this rollout of the revision: one given to an
        // earlier rollout of it lets nothing go.
        let (key, of) = match settings.rollout_number {
            Some(n) => (
                crate::api::naming::rollout_key(revision, n),
                format!("rollout {n} of revision {revision}"),
            ),
            None => (format!("{revision}@<rollout>"), format!("revision {revision}")),
        };
        format!(
            "wave {wave}/{waves} (step {step}) awaits approval of {of}: {} of {} pools done; approve it \
             with `nodepool-fanout approve` or the annotation {}={key}/{steps}",
            self.done,
            self.total,
            crate::api::naming::ANNOTATION_APPROVE
        )
    }

    /// What a rollback has done, and what the operator does next.
    fn rollback_message(&self, settings: &Settings) -> String {
        let Some(back) = &self.rolling_back else {
            return String::new();
        };
        let to = settings.back_to.as_deref().unwrap_or_default();
        let mut parts = Vec::new();
        // Why it halted: as it fails now, else as the history recorded it
        // when it did (the failed pools have gone back since).
        let cause = self.halt_cause.as_deref().or(settings.halted_because.as_deref());
        if !self.failed.is_empty() {
            parts.push(format!(
                "halted: {} failed pool(s) ({}), more than maxFailures {}{}",
                self.failed.len(),
                some_of(&self.failed),
                settings.max_failures,
                cause.map(|c| format!(": {c}")).unwrap_or_default()
            ));
        } else if let Some(cause) = cause {
            parts.push(format!("halted on {cause}"));
        }
        let verb = match self.phase {
            RolloutPhase::RolledBack => "rolled back",
            _ => "rolling back",
        };
        parts.push(format!(
            "{verb} to revision {to}: {} of {} pool(s) back ({})",
            back.back,
            back.pools.len(),
            some_of(&back.pools)
        ));
        if back.unreached > 0 {
            parts.push(format!("{} go back once they are reached again", back.unreached));
        }
        if !back.stranded.is_empty() || !back.unstamped.is_empty() || !settings.cannot_go_back.is_empty() {
            parts.push(cannot_go_back(back, settings));
        }
        parts.push(
            "no pool takes this revision again; fix the change in the spec (a new revision rolls out \
             from here)"
                .to_string(),
        );
        parts.join("; ")
    }
}

/// Which pools that took the revision a rollback leaves as they are, and why.
fn cannot_go_back(back: &super::RollingBack, settings: &Settings) -> String {
    let mut why = Vec::new();
    if !back.stranded.is_empty() {
        why.push(format!(
            "{} pool(s) that took this revision were done with no earlier revision (installed by it, \
             or never Ready for minReadySeconds on the one before) and stay as they are ({})",
            back.stranded.len(),
            some_of(&back.stranded)
        ));
    }
    if !back.unstamped.is_empty() {
        why.push(format!(
            "{} failed pool(s) carry no stamp of the revision they took (written before releases were \
             stamped), so what they would go back to is not known, and they stay as they are ({})",
            back.unstamped.len(),
            some_of(&back.unstamped)
        ));
    }
    why.extend(settings.cannot_go_back.iter().cloned());
    if why.is_empty() {
        why.push("no pool took this revision".to_string());
    }
    why.join("; ")
}

/// A few names of a list, and how many more.
fn some_of(names: &[String]) -> String {
    match names.len() {
        n if n <= 3 => names.join(", "),
        n => format!("{}, and {} more", names[..3].join(", "), n - 3),
    }
}

/// Why a rollout halts, in the words of what failed: each failed pool
/// (the first three) with the rollout's note on it (a metric check, its
/// value and bound; a deadline) or Flux's reason and message; else the
/// wave whose checks failed. Taken before a rollback rewrites the pools'
/// states.
pub(super) fn halt_cause(
    pools: &[PoolInput],
    states: &[PoolDecision],
    wave_failure: Option<&(usize, String, String)>,
) -> Option<String> {
    const SHOWN: usize = 3;
    let failed: Vec<String> = pools
        .iter()
        .zip(states)
        .filter(|(_, d)| d.state == PoolRollout::Failed)
        .map(|(p, d)| {
            let (reason, message) = match (&d.note, &p.release) {
                (Some(note), _) => (note.reason, note.message.as_str()),
                (None, Release::Current { status, .. } | Release::Behind(status)) => {
                    (status.reason.as_str(), status.message.as_str())
                }
                (None, Release::Missing) => ("Failed", ""),
            };
            crate::reconcile::fleet::quote_pool(p.pool, reason, message)
        })
        .collect();
    match failed.len() {
        0 => wave_failure
            .map(|(wave, step, why)| format!("the checks of wave {} (step {step}) failed: {why}", wave + 1)),
        n if n <= SHOWN => Some(failed.join("; ")),
        n => Some(format!("{}; and {} more", failed[..SHOWN].join("; "), n - SHOWN)),
    }
}

/// `message`, saying how many releases of the revision are kept as an
/// earlier controller version rendered them, when any are.
fn with_held_renders(message: String, held: usize) -> String {
    match held {
        0 => message,
        n => format!(
            "{message}; {n} release(s) of the revision are kept as an earlier controller version \
             rendered them, until the next revision (--rendering-changes=hold)"
        ),
    }
}
