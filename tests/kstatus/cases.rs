// The roll-up cases whose kstatus reading is pinned, shared by the unit
// test of `status::rollup` (against a replica of kstatus's rules) and
// `tests/kstatus.rs` (against Flux's kstatus library itself).
use super::{PoolReport, ReleaseState, ReleaseStatus};

/// A case: its name, the pools' states (and reasons), the named pools that
/// do not exist, a blocker, and what kstatus must read.
pub struct Case {
    pub name: &'static str,
    pub pools: &'static [(ReleaseState, &'static str)],
    pub missing: &'static [&'static str],
    pub blocker: Option<(&'static str, &'static str)>,
    pub kstatus: &'static str,
}

pub const CASES: &[Case] = &[
    Case {
        name: "all ready",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded"); 2],
        missing: &[],
        blocker: None,
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
        kstatus: "InProgress",
    },
    Case {
        name: "waiting for the chart",
        pools: &[(ReleaseState::Waiting, "ChartNotReady")],
        missing: &[],
        blocker: None,
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
        kstatus: "InProgress",
    },
    Case {
        name: "not reported yet",
        pools: &[(ReleaseState::Unknown, "NotObserved")],
        missing: &[],
        blocker: None,
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
        kstatus: "Failed",
    },
    Case {
        name: "a named pool missing",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded")],
        missing: &["atlantis"],
        blocker: None,
        kstatus: "Failed",
    },
    Case {
        name: "missing beside progressing",
        pools: &[(ReleaseState::Progressing, "Progressing")],
        missing: &["atlantis"],
        blocker: None,
        kstatus: "Failed",
    },
    Case {
        name: "a selection protecting releases",
        pools: &[(ReleaseState::Ready, "UpgradeSucceeded")],
        missing: &[],
        blocker: Some(("NoPoolsSelected", "spec.pools matches no NodePool")),
        kstatus: "Failed",
    },
    Case {
        name: "an unresolvable chart",
        pools: &[],
        missing: &[],
        blocker: Some(("ChartVersionNotFound", "no version matches")),
        kstatus: "Failed",
    },
    Case {
        name: "nothing selected, nothing to protect",
        pools: &[],
        missing: &[],
        blocker: None,
        kstatus: "Current",
    },
];

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
            },
        })
        .collect()
}
