//! What is worth an Event on the application: releases created, updated and
//! pruned, and pools whose state changed between two statuses. Pure, so the
//! rules are tested without a cluster.

use std::collections::HashMap;

use super::Done;
use crate::api::{ConditionStatus, NodePoolApplicationStatus, PoolStatus, RolloutPhase, RolloutStatus};

/// The longest note the API server accepts in an Event (events.k8s.io/v1),
/// in bytes; a longer one is refused and the Event is lost.
pub const MAX_NOTE_BYTES: usize = 1024;
const ELLIPSIS: &str = "…";

/// `message` cut to fit an Event's note: at a char boundary, ending in an
/// ellipsis when anything was cut. The status keeps the whole message.
pub fn fit_note(mut message: String) -> String {
    if message.len() <= MAX_NOTE_BYTES {
        return message;
    }
    let mut end = MAX_NOTE_BYTES - ELLIPSIS.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str(ELLIPSIS);
    message
}

/// One Event to publish on the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub warning: bool,
    /// PascalCase, shown by `kubectl describe` as the reason.
    pub reason: String,
    /// The action field of the Event.
    pub action: &'static str,
    /// The Event's note: at most [`MAX_NOTE_BYTES`], cut by [`fit_note`].
    pub message: String,
    /// The HelmRelease it concerns; also keeps each pool's Events a series of their own.
    pub release: Option<String>,
    /// The pool it concerns, when one: named in a notification's metadata
    /// (an Event's note has it in words only).
    pub pool: Option<String>,
}

impl Transition {
    /// The Event for one thing carrying out the plan did.
    pub fn of(done: &Done) -> Self {
        match done {
            Done::Suspended { release, suspended } => Self::suspended(release, *suspended),
            Done::Written {
                pool,
                release,
                drift: Some(field),
                ..
            } => Self::drift_corrected(pool, release, field),
            Done::Written {
                pool,
                release,
                existed,
                drift: None,
            } => Self::applied(pool, release, *existed),
            Done::WriteFailed {
                pool,
                release,
                reason,
                message,
            } => Self::apply_failed(pool, release, reason, message),
            Done::Pruned { pool, release } => Self::pruned(pool, release),
            Done::Orphaned { pool, release } => Self::orphaned(pool, release),
            Done::UninstallSkipped {
                pool,
                release,
                since,
                after,
            } => Self::uninstall_skipped(pool, release, since, *after),
        }
    }

    /// A release being deleted whose site does not answer, let go without
    /// its uninstall: what stays on the site is said, and how to remove it.
    pub fn uninstall_skipped(
        pool: &str,
        release: &str,
        since: &k8s_openapi::jiff::Timestamp,
        after: std::time::Duration,
    ) -> Self {
        let after = humantime::format_duration(after);
        Self {
            warning: true,
            reason: "UninstallSkipped".to_string(),
            action: "Prune",
            message: fit_note(format!(
                "pool {pool:?}: its site has not answered since {since} (longer than \
                 rollout.offlineAfter, {after}), so HelmRelease {release} was deleted without \
                 uninstalling; what Helm installed on the site stays there: when the site is back, \
                 remove it with helm uninstall, or delete the site's cluster"
            )),
            release: Some(release.to_string()),
            pool: Some(pool.to_string()),
        }
    }

    pub fn applied(pool: &str, release: &str, existed: bool) -> Self {
        let (reason, verb) = match existed {
            true => ("ReleaseUpdated", "updated"),
            false => ("ReleaseCreated", "created"),
        };
        Self {
            warning: false,
            reason: reason.to_string(),
            action: "Apply",
            message: fit_note(format!("pool {pool:?}: {verb} HelmRelease {release}")),
            release: Some(release.to_string()),
            pool: Some(pool.to_string()),
        }
    }

    /// An application whose spec cannot be read.
    pub fn unreadable(message: &str) -> Self {
        Self {
            warning: true,
            reason: crate::api::conditions::reason::SPEC_UNREADABLE.to_string(),
            action: "Read",
            message: fit_note(message.to_string()),
            release: None,
            pool: None,
        }
    }

    /// A release that no longer held what we wrote, written again.
    pub fn drift_corrected(pool: &str, release: &str, field: &str) -> Self {
        Self {
            warning: true,
            reason: "DriftCorrected".to_string(),
            action: "Apply",
            message: fit_note(format!(
                "pool {pool:?}: HelmRelease {release} was changed outside this application ({field} \
                 first); applied again as the application says. Change the application instead"
            )),
            release: Some(release.to_string()),
            pool: Some(pool.to_string()),
        }
    }

    pub fn pruned(pool: &str, release: &str) -> Self {
        Self {
            warning: false,
            reason: "ReleasePruned".to_string(),
            action: "Prune",
            message: fit_note(format!("pool {pool:?} left the selection: deleted HelmRelease {release}")),
            release: Some(release.to_string()),
            pool: Some(pool.to_string()),
        }
    }

    /// A release suspended with its application, or resumed with it.
    pub fn suspended(release: &str, suspended: bool) -> Self {
        let (reason, action, what) = match suspended {
            true => ("ReleaseSuspended", "Suspend", "suspended with the application (spec.suspend)"),
            false => ("ReleaseResumed", "Resume", "resumed with the application"),
        };
        Self {
            warning: false,
            reason: reason.to_string(),
            action,
            message: fit_note(format!("HelmRelease {release} {what}")),
            release: Some(release.to_string()),
            pool: None,
        }
    }

    pub fn orphaned(pool: &str, release: &str) -> Self {
        Self {
            warning: false,
            reason: "ReleaseOrphaned".to_string(),
            action: "Orphan",
            message: fit_note(format!(
                "pool {pool:?} left the selection: HelmRelease {release} left in place, no longer \
                 managed by this application (deletionPolicy: Orphan)"
            )),
            release: Some(release.to_string()),
            pool: Some(pool.to_string()),
        }
    }

    pub fn apply_failed(pool: &str, release: &str, reason: &'static str, message: &str) -> Self {
        Self {
            warning: true,
            reason: reason.to_string(),
            action: "Apply",
            message: fit_note(format!("pool {pool:?}: {message}")),
            release: Some(release.to_string()),
            pool: Some(pool.to_string()),
        }
    }
}

/// Events of one reason past which a reconcile publishes one summary
/// instead: a first fan-out to thousands of pools is one Event, not
/// thousands, and does not spend the client's QPS on them.
pub const MAX_EVENTS_PER_REASON: usize = 10;

/// `happened`, with each reason that occurs more than
/// [`MAX_EVENTS_PER_REASON`] times folded into one Event at the place of its
/// first: `ReleaseCreated for 9990 pools: gw-a, gw-b, … and 9921 more`.
/// Order is otherwise kept.
pub fn condense(happened: Vec<Transition>) -> Vec<Transition> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for t in &happened {
        *counts.entry(t.reason.clone()).or_default() += 1;
    }
    counts.retain(|_, n| *n > MAX_EVENTS_PER_REASON);
    if counts.is_empty() {
        return happened;
    }
    // Per folded reason: where its summary is, and the names it lists.
    let mut folded: HashMap<String, (usize, Vec<String>)> = HashMap::new();
    let mut out: Vec<Transition> = Vec::new();
    for t in happened {
        if !counts.contains_key(&t.reason) {
            out.push(t);
            continue;
        }
        let name = t.release.clone().unwrap_or_else(|| "?".into());
        match folded.get_mut(&t.reason) {
            Some((_, names)) => names.push(name),
            None => {
                folded.insert(t.reason.clone(), (out.len(), vec![name]));
                out.push(Transition {
                    release: None,
                    pool: None,
                    ..t
                });
            }
        }
    }
    for (reason, (at, names)) in folded {
        let head = format!("{reason} for {} pools: ", names.len());
        let mut listed = String::new();
        let mut shown = 0;
        for name in &names {
            // Room for the tail, "… and 12345 more".
            if head.len() + listed.len() + name.len() + 2 > MAX_NOTE_BYTES - 24 {
                break;
            }
            if shown > 0 {
                listed.push_str(", ");
            }
            listed.push_str(name);
            shown += 1;
        }
        let rest = names.len() - shown;
        let tail = if rest > 0 {
            format!(", … and {rest} more")
        } else {
            String::new()
        };
        out[at].message = fit_note(format!("{head}{listed}{tail}"));
    }
    out
}

/// The pools whose readiness, reason or message changed from `old` to `new`,
/// one Event each. A pool that disappears from the status is covered by the
/// prune Event instead.
pub fn between(old: &NodePoolApplicationStatus, new: &NodePoolApplicationStatus) -> Vec<Transition> {
    let mut events: Vec<Transition> = new
        .pools
        .iter()
        .filter(|p| {
            let before = old.pools.iter().find(|o| o.pool == p.pool);
            before.is_none_or(|b| (b.ready, &b.reason, &b.message) != (p.ready, &p.reason, &p.message))
        })
        .filter_map(pool_transition)
        .collect();
    if let Some(rollout) = &new.rollout {
        let revision = rollout.revision.as_str();
        let before = old.rollout.as_ref().filter(|r| r.revision == revision);
        // A pool done with an update: each step of a rollout is worth one
        // line in `kubectl events`. A pool whose release the new revision
        // does not change stays done, and a first install is PoolReady's.
        for p in new.pools.iter().filter(|p| p.up_to_date && p.rollout == "Done") {
            let was = old.pools.iter().find(|o| o.pool == p.pool);
            if was.is_some_and(|o| !(o.up_to_date && o.rollout == "Done")) {
                events.push(Transition {
                    warning: false,
                    reason: "RolloutPoolDone".to_string(),
                    action: "Rollout",
                    message: fit_note(format!(
                        "pool {:?} is on revision {revision} and Ready ({} of {} done)",
                        p.pool, rollout.done, rollout.total
                    )),
                    release: Some(p.helm_release.clone()),
                    pool: Some(p.pool.clone()),
                });
            }
        }
        events.extend(rollout_transition(before, rollout));
    }
    events
}

/// A wave started, or the rollout halted, rolled back, paused or completed.
fn rollout_transition(before: Option<&RolloutStatus>, now: &RolloutStatus) -> Vec<Transition> {
    let make = |warning, reason: &str| Transition {
        warning,
        reason: reason.to_string(),
        action: "Rollout",
        message: fit_note(format!("revision {}: {}", now.revision, now.message)),
        release: None,
        pool: None,
    };
    let phase_before = before.map(|b| b.phase);
    if phase_before != Some(now.phase) {
        return match now.phase {
            RolloutPhase::Halted => vec![make(true, "RolloutHalted")],
            // A rollback starts with the halt; a pool reached again after
            // the rollback was done goes back without another halt.
            RolloutPhase::RollingBack if phase_before == Some(RolloutPhase::RolledBack) => vec![],
            RolloutPhase::RollingBack => vec![make(true, "RolloutHalted")],
            RolloutPhase::RolledBack if phase_before == Some(RolloutPhase::RollingBack) => {
                vec![make(true, "RolloutRolledBack")]
            }
            RolloutPhase::RolledBack => vec![make(true, "RolloutHalted"), make(true, "RolloutRolledBack")],
            RolloutPhase::Paused => vec![make(false, "RolloutPaused")],
            RolloutPhase::AwaitingApproval => vec![make(false, "RolloutAwaitingApproval")],
            // A revision with nothing to roll out (a new application, a
            // change no pool's release sees) is no news.
            RolloutPhase::Complete if before.is_none() => vec![],
            RolloutPhase::Complete => vec![make(false, "RolloutComplete")],
            // Offline pools behind on it: said once, when the pools reached
            // are done; `RolloutComplete` comes when the last catches up.
            RolloutPhase::AwaitingOffline if before.is_none() => vec![],
            RolloutPhase::AwaitingOffline => vec![make(false, "RolloutAwaitingOffline")],
            RolloutPhase::Progressing if before.is_none() => vec![make(false, "RolloutStarted")],
            RolloutPhase::Progressing if phase_before == Some(RolloutPhase::AwaitingApproval) => {
                vec![make(false, "RolloutApproved")]
            }
            RolloutPhase::Progressing => vec![make(false, "RolloutResumed")],
        };
    }
    match (before.and_then(|b| b.wave.as_ref()), now.wave.as_ref()) {
        (Some(b), Some(n)) if b != n && now.phase == RolloutPhase::Progressing => {
            vec![make(false, "RolloutWaveStarted")]
        }
        _ => vec![],
    }
}

pub(super) fn pool_transition(p: &PoolStatus) -> Option<Transition> {
    let (warning, reason) = match (p.ready, p.reason.as_str()) {
        // Its metric checks' values, new at each answer: progress, seen in
        // the status; its verdict is the Event.
        (_, crate::api::conditions::pool_reason::ANALYSIS_RUNNING) => return None,
        (ConditionStatus::True, _) => (false, "PoolReady".to_string()),
        // Not a failure, yet a person may want to know the site dropped off.
        (_, "PoolOffline") => (true, "PoolOffline".to_string()),
        // Progress is visible in the status; an Event each step would be noise.
        (_, "Progressing" | "Reconciling" | "Planned" | "Waiting" | "Unknown" | "ChartNotReady") => {
            return None
        }
        // The pool's own reason (InvalidPoolConfig, NameConflict, Flux's
        // InstallFailed…): Events of one reason form one series, so a
        // generic reason would hide a new problem behind an old message.
        (ConditionStatus::False, reason) => (true, reason.to_string()),
        (ConditionStatus::Unknown, _) => return None,
    };
    Some(Transition {
        warning,
        reason,
        action: "Reconcile",
        message: fit_note(format!("pool {:?} ({}): {}: {}", p.pool, p.helm_release, p.reason, p.message)),
        release: Some(p.helm_release.clone()),
        pool: Some(p.pool.clone()),
    })
}

/// Whether two statuses differ only in condition timestamps, in which case
/// writing the new one would be churn.
pub fn same_ignoring_timestamps(a: &NodePoolApplicationStatus, b: &NodePoolApplicationStatus) -> bool {
    let strip = |s: &NodePoolApplicationStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default());
        }
        s
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests;
