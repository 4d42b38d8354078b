//! One fault the soak injects: what it is, its kind as the summary counts
//! it, and how the soak's log names it.
use super::*;

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL, then a new process at once: of the one instance, or of
    /// the one serving `shard` (`SHARDS=2`).
    KillController {
        shard: Option<usize>,
    },
    /// The application moved to the other shard, by its
    /// `sharding.fluxcd.io/key` label (`SHARDS=2`).
    MoveShard {
        app: usize,
        to: usize,
    },
    /// A new revision every pool can take; with `window`, made in the
    /// same write that closes that pool's window (see `World::draw`).
    GoodChange {
        app: usize,
        level: u32,
        window: Option<usize>,
    },
    /// A new revision Helm refuses (a Service port out of range).
    BadChange {
        app: usize,
    },
    /// The application's last change of its values undone: its values as
    /// they were before it. Undone twice, a change is redone: a revision
    /// that comes back is rolled out afresh (docs/rollouts.md).
    Undo {
        app: usize,
    },
    Suspend {
        app: usize,
        suspended: bool,
    },
    Pause {
        app: usize,
        paused: bool,
    },
    /// A pool added; a `broken` one is labelled so that every
    /// application's override gives it values Helm refuses. Where
    /// `claimed` names an application, someone else made a HelmRelease
    /// under the name that application's release of the pool would take,
    /// before the pool came.
    AddPool {
        broken: bool,
        claimed: Option<usize>,
    },
    DeletePool {
        pool: usize,
    },
    /// The pool leaves the selection (`leaves`) or comes back to it.
    Relabel {
        pool: usize,
        leaves: bool,
    },
    /// A pool's node cut off, or handed back to kwok.
    CutNode {
        pool: usize,
        cut: bool,
    },
    /// A release's values changed by hand, under another field manager.
    HandEdit {
        release: usize,
    },
    /// A release deleted by hand.
    DeleteRelease {
        release: usize,
    },
    /// A maintenance window of the application that never opens
    /// (`closed`) now names the pool, or one always open does instead.
    Window {
        app: usize,
        pool: usize,
        closed: bool,
    },
    /// The gated application's step `rest` approved, for the revision
    /// under way or (`stale`) for one before it.
    Approve {
        stale: bool,
    },
    /// A part of the control plane stopped for `down`, then started again.
    Restart {
        component: &'static str,
        down: Duration,
    },
}

impl Fault {
    /// Its kind, as the summary counts faults.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::KillController { .. } => "controller killed",
            Self::MoveShard { .. } => "application moved to another shard",
            Self::GoodChange { window: None, .. } => "good change",
            Self::GoodChange { window: Some(_), .. } => "good change, a window closed",
            Self::BadChange { .. } => "bad change",
            Self::Undo { .. } => "change undone (or redone)",
            Self::Suspend { .. } => "suspend/resume",
            Self::Pause { .. } => "pause/resume",
            Self::AddPool { broken: true, .. } => "broken pool added",
            Self::AddPool { claimed: Some(_), .. } => "pool added, its name taken",
            Self::AddPool { .. } => "pool added",
            Self::DeletePool { .. } => "pool deleted",
            Self::Relabel { .. } => "pool relabelled",
            Self::CutNode { .. } => "node cut/reconnected",
            Self::Window { .. } => "window closed/opened",
            Self::HandEdit { .. } => "release edited by hand",
            Self::DeleteRelease { .. } => "release deleted by hand",
            Self::Approve { stale: false } => "approval",
            Self::Approve { stale: true } => "stale approval",
            Self::Restart { component, .. } => match *component {
                "helm-controller" => "helm-controller restarted",
                "source-controller" => "source-controller restarted",
                QUERY_API => "query API stopped",
                _ => "kube-apiserver restarted",
            },
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let app = |i: &usize| APPS[*i % APPS.len()].0;
        match self {
            Self::KillController { shard: None } => write!(f, "controller SIGKILLed and restarted"),
            Self::KillController { shard: Some(s) } => {
                write!(f, "controller of shard {} SIGKILLed and restarted", SHARD_NAMES[*s])
            }
            Self::MoveShard { app: a, to } => write!(f, "{}: moved to shard {}", app(a), SHARD_NAMES[*to]),
            Self::GoodChange {
                app: a,
                level,
                window: None,
            } => write!(f, "{}: a good change (log level v{level})", app(a)),
            Self::GoodChange {
                app: a,
                level,
                window: Some(pool),
            } => write!(
                f,
                "{}: a good change (log level v{level}), with pool #{pool}'s window closed in the same write",
                app(a)
            ),
            Self::BadChange { app: a } => write!(f, "{}: a change Helm refuses (port 70000)", app(a)),
            Self::Undo { app: a } => write!(f, "{}: its last change of values undone", app(a)),
            Self::Suspend { app: a, suspended } => write!(f, "{}: suspend: {suspended}", app(a)),
            Self::Pause { app: a, paused } => write!(f, "{}: rollout.paused: {paused}", app(a)),
            Self::AddPool { broken: true, .. } => write!(f, "a broken pool added (its override: port 70000)"),
            Self::AddPool { claimed: Some(a), .. } => {
                write!(f, "a pool added, whose {} release's name someone else's HelmRelease took", app(a))
            }
            Self::AddPool { .. } => write!(f, "a pool added"),
            Self::DeletePool { pool } => write!(f, "pool #{pool} deleted"),
            Self::Relabel { pool, leaves: true } => write!(f, "pool #{pool} leaves the selection"),
            Self::Relabel { pool, leaves: false } => write!(f, "pool #{pool} comes back to the selection"),
            Self::CutNode { pool, cut: true } => write!(f, "pool #{pool}'s node cut off"),
            Self::CutNode { pool, cut: false } => write!(f, "pool #{pool}'s node reconnected"),
            Self::HandEdit { release } => write!(f, "release #{release} edited by hand"),
            Self::DeleteRelease { release } => write!(f, "release #{release} deleted by hand"),
            Self::Window {
                app: a,
                pool,
                closed: true,
            } => {
                write!(f, "{}: pool #{pool}'s window closed (a window that never opens)", app(a))
            }
            Self::Window {
                app: a,
                pool,
                closed: false,
            } => {
                write!(f, "{}: pool #{pool}'s window opened (a window always open)", app(a))
            }
            Self::Approve { stale: false } => {
                write!(f, "gate: step rest approved for the revision under way")
            }
            Self::Approve { stale: true } => write!(f, "gate: step rest approved for an earlier revision"),
            Self::Restart { component, down } => {
                write!(f, "{component} stopped for {} s and started again", down.as_secs())
            }
        }
    }
}
