//! What is worth an Event on the application: releases created, updated and
//! pruned, and pools whose state changed between two statuses. Pure, so the
//! rules are tested without a cluster.

use crate::api::{ConditionStatus, NodePoolApplicationStatus, PoolStatus};

/// One Event to publish on the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub warning: bool,
    /// PascalCase, shown by `kubectl describe` as the reason.
    pub reason: String,
    /// The action field of the Event.
    pub action: &'static str,
    pub message: String,
    /// The HelmRelease it concerns; also keeps each pool's Events a series of their own.
    pub release: Option<String>,
}

impl Transition {
    pub fn applied(pool: &str, release: &str, existed: bool) -> Self {
        let (reason, verb) = match existed {
            true => ("ReleaseUpdated", "updated"),
            false => ("ReleaseCreated", "created"),
        };
        Self {
            warning: false,
            reason: reason.to_string(),
            action: "Apply",
            message: format!("pool {pool:?}: {verb} HelmRelease {release}"),
            release: Some(release.to_string()),
        }
    }

    pub fn pruned(pool: &str, release: &str) -> Self {
        Self {
            warning: false,
            reason: "ReleasePruned".to_string(),
            action: "Prune",
            message: format!("pool {pool:?} left the selection: deleted HelmRelease {release}"),
            release: Some(release.to_string()),
        }
    }

    pub fn apply_failed(pool: &str, release: &str, reason: &'static str, message: &str) -> Self {
        Self {
            warning: true,
            reason: reason.to_string(),
            action: "Apply",
            message: format!("pool {pool:?}: {message}"),
            release: Some(release.to_string()),
        }
    }
}

/// The pools whose readiness, reason or message changed from `old` to `new`,
/// one Event each. A pool that disappears from the status is covered by the
/// prune Event instead.
pub fn between(old: &NodePoolApplicationStatus, new: &NodePoolApplicationStatus) -> Vec<Transition> {
    new.pools
        .iter()
        .filter(|p| {
            let before = old.pools.iter().find(|o| o.pool == p.pool);
            before.is_none_or(|b| (b.ready, &b.reason, &b.message) != (p.ready, &p.reason, &p.message))
        })
        .filter_map(pool_transition)
        .collect()
}

fn pool_transition(p: &PoolStatus) -> Option<Transition> {
    let (warning, reason) = match (p.ready, p.reason.as_str()) {
        (ConditionStatus::True, _) => (false, "PoolReady".to_string()),
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
        message: format!("pool {:?} ({}): {}: {}", p.pool, p.helm_release, p.reason, p.message),
        release: Some(p.helm_release.clone()),
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
mod tests {
    use super::*;

    fn pool(name: &str, ready: ConditionStatus, reason: &str, message: &str) -> PoolStatus {
        PoolStatus {
            pool: name.into(),
            helm_release: format!("app-{name}"),
            ready,
            reason: reason.into(),
            message: message.into(),
            chart_version: None,
            observed_latest: true,
        }
    }

    fn status(pools: Vec<PoolStatus>) -> NodePoolApplicationStatus {
        NodePoolApplicationStatus {
            pools,
            ..Default::default()
        }
    }

    #[test]
    fn a_pool_turning_ready_is_a_normal_event() {
        let old = status(vec![pool("hz", ConditionStatus::Unknown, "Progressing", "installing")]);
        let new = status(vec![pool("hz", ConditionStatus::True, "InstallSucceeded", "ok")]);
        let events = between(&old, &new);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, "PoolReady");
        assert!(!events[0].warning);
        assert!(events[0].message.contains("\"hz\""));
    }

    #[test]
    fn a_failing_pool_is_a_warning_naming_pool_and_reason() {
        let old = status(vec![pool("hz", ConditionStatus::True, "InstallSucceeded", "ok")]);
        let new = status(vec![pool(
            "hz",
            ConditionStatus::False,
            "TemplateError",
            "overrides[0].values.x: unknown variable",
        )]);
        let events = between(&old, &new);
        assert_eq!(events.len(), 1);
        assert!(events[0].warning);
        assert_eq!(events[0].reason, "TemplateError", "the pool's own reason");
        assert!(events[0].message.contains("TemplateError"));
        assert!(events[0].message.contains("overrides[0].values.x"));
    }

    #[test]
    fn an_unchanged_pool_is_no_event() {
        let s = status(vec![pool("hz", ConditionStatus::True, "InstallSucceeded", "ok")]);
        assert!(between(&s, &s).is_empty());
    }

    #[test]
    fn waiting_for_the_chart_is_no_event() {
        let new = status(vec![pool("hz", ConditionStatus::False, "ChartNotReady", "waiting")]);
        assert!(between(&status(vec![]), &new).is_empty());
    }

    #[test]
    fn progress_is_no_event() {
        let old = status(vec![]);
        let new = status(vec![pool("hz", ConditionStatus::Unknown, "Progressing", "installing")]);
        assert!(between(&old, &new).is_empty());
    }

    #[test]
    fn a_new_pool_already_failing_is_reported() {
        let new = status(vec![pool("hz", ConditionStatus::False, "NameConflict", "taken")]);
        assert_eq!(between(&status(vec![]), &new).len(), 1);
    }

    #[test]
    fn timestamps_alone_are_no_change() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
        let cond = |t: i64| Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Ready".into(),
            message: "3/3".into(),
            observed_generation: Some(1),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::from_second(t).unwrap()),
        };
        let mut a = status(vec![]);
        a.conditions = vec![cond(1)];
        let mut b = a.clone();
        b.conditions = vec![cond(2)];
        assert!(same_ignoring_timestamps(&a, &b));
        b.ready_pools = 1;
        assert!(!same_ignoring_timestamps(&a, &b));
    }

    #[test]
    fn apply_events_name_pool_and_release() {
        let created = Transition::applied("hz", "app-hz-1234", false);
        assert_eq!(created.reason, "ReleaseCreated");
        assert!(created.message.contains("app-hz-1234"));
        assert_eq!(Transition::applied("hz", "r", true).reason, "ReleaseUpdated");
        assert_eq!(Transition::pruned("hz", "r").reason, "ReleasePruned");
        assert!(Transition::apply_failed("hz", "r", "NameClash", "taken").warning);
    }
}
