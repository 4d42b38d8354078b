// The roll-up cases whose kstatus reading is pinned, shared by the unit
// test of `status::rollup` (against a replica of kstatus's rules) and
// `tests/offline/kstatus.rs` (against Flux's kstatus library itself).
use super::{PoolReport, PoolRollout, ReleaseState, ReleaseStatus, RolloutPhase, RolloutStatus};

/// A case: its name, the pools' states (and reasons), the named pools that
/// do not exist, a blocker, the rollout's phase, and what kstatus must read.
pub struct Case {
    pub name: &'static str,
    pub pools: &'static [(ReleaseState, &'static str)],
    pub missing: &'static [&'static str],
    pub blocker: Option<(&'static str, &'static str)>,
    /// What every write waits on, expected to pass by itself.
    pub held: Option<(&'static str, &'static str)>,
    /// A step after the plan that failed and is retried.
    pub failed_step: Option<(&'static str, &'static str)>,
    pub rollout: Option<RolloutPhase>,
    pub kstatus: &'static str,
}

pub const CASES: &[Case] = &[
    Case {
        name: "all ready, the history's write failed",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded"); 2],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: Some((
            "HistoryWriteFailed",
            "writing the revision history: cannot apply ControllerRevision gw-1: the server is busy",
        )),
        rollout: None,
        kstatus: "InProgress",
    },
    Case {
        name: "all ready",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded"); 2],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "Current",
    },
    Case {
        name: "one progressing",
        pools: &[
            (ReleaseState::Ready, "UpgradeSucceeded"),
            (ReleaseState::Progressing, "Progressing"),
        ],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "InProgress",
    },
    Case {
        name: "waiting for the chart",
        pools: &[(ReleaseState::Waiting, "ChartNotReady")],
        missing: &[],
        blocker: None,
        held: Some(("SourceNotReady", "HelmChart edge/gw-1-0-0 is not ready: fetching")),
        failed_step: None,
        rollout: None,
        kstatus: "InProgress",
    },
    Case {
        name: "failed, Flux retrying",
        pools: &[
            (ReleaseState::Ready, "UpgradeSucceeded"),
            (ReleaseState::Failed, "InstallFailed"),
        ],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "InProgress",
    },
    Case {
        name: "not reported yet",
        pools: &[(ReleaseState::Unknown, "NotObserved")],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "InProgress",
    },
    Case {
        name: "invalid pool config",
        pools: &[
            (ReleaseState::Ready, "UpgradeSucceeded"),
            (ReleaseState::Stalled, "InvalidPoolConfig"),
        ],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "Failed",
    },
    Case {
        name: "stalled beside progressing",
        pools: &[
            (ReleaseState::Progressing, "Progressing"),
            (ReleaseState::Stalled, "RetriesExceeded"),
        ],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "Failed",
    },
    Case {
        name: "a named pool missing",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded")],
        missing: &["atlantis"],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "Failed",
    },
    Case {
        name: "missing beside progressing",
        pools: &[(ReleaseState::Progressing, "Progressing")],
        missing: &["atlantis"],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "Failed",
    },
    Case {
        name: "a selection protecting releases",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded")],
        missing: &[],
        blocker: Some(("NoPoolsSelected", "spec.pools matches no NodePool")),
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "Failed",
    },
    Case {
        name: "an unresolvable chart",
        pools: &[],
        missing: &[],
        blocker: Some(("ChartVersionNotFound", "no version matches")),
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "Failed",
    },
    Case {
        name: "nothing selected, nothing to protect",
        pools: &[],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: None,
        kstatus: "Current",
    },
    Case {
        name: "rollout under way, the next pool waiting its turn",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded"); 2],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: Some(RolloutPhase::Progressing),
        kstatus: "InProgress",
    },
    Case {
        name: "rollout paused by its owner",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded"); 2],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: Some(RolloutPhase::Paused),
        kstatus: "InProgress",
    },
    Case {
        name: "rollout halted on a failed pool",
        pools: &[
            (ReleaseState::Failed, "UpgradeFailed"),
            (ReleaseState::Ready, "UpgradeSucceeded"),
        ],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: Some(RolloutPhase::Halted),
        kstatus: "Failed",
    },
    Case {
        name: "rollout complete but for an offline pool",
        pools: &[
            (ReleaseState::Ready, "UpgradeSucceeded"),
            (ReleaseState::Offline, "PoolOffline"),
        ],
        missing: &[],
        blocker: None,
        held: None,
        failed_step: None,
        rollout: Some(RolloutPhase::Complete),
        kstatus: "Current",
    },
];

/// The case's rollout, as the roll-up takes it.
pub fn rollout(case: &Case) -> Option<RolloutStatus> {
    case.rollout.map(|phase| RolloutStatus {
        revision: "rev1".into(),
        phase,
        progress: format!("{} 1/2", phase.as_str()),
        message: format!("{} message", phase.as_str()),
        ..RolloutStatus::default()
    })
}

/// The case's pools as the roll-up takes them.
pub fn reports(case: &Case) -> Vec<PoolReport> {
    case.pools
        .iter()
        .enumerate()
        .map(|(i, (state, reason))| PoolReport {
            pool: format!("pool-{i}"),
            helm_release: format!("app-pool-{i}"),
            status: ReleaseStatus {
                state: *state,
                reason: reason.to_string(),
                message: format!("{reason} message"),
                chart_version: Some("1.0.0".into()),
                observed_latest: *state == ReleaseState::Ready,
                ready_since: None,
                ready_recorded: None,
                checks_recorded: None,
                deployed_before: true,
                deployed_version: None,
            }
            .into(),
            rollout: match (case.rollout, state) {
                (None, _) => None,
                (Some(RolloutPhase::Halted), ReleaseState::Failed | ReleaseState::Stalled) => {
                    Some(PoolRollout::Failed)
                }
                (Some(_), ReleaseState::Offline) => Some(PoolRollout::Offline),
                (Some(_), _) => Some(PoolRollout::Done),
            },
            nodes: None,
        })
        .collect()
}
