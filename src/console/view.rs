//! What the console shows, and nothing it reads: each application as its
//! status and fleet report say it stands, each pool as a cell whose state
//! is said in a word and a symbol as well as a colour. Pure, so every
//! rule here is tested without a cluster or a browser.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::api::{NodePoolApplication, NodePoolApplicationStatus, RolloutPhase};
use crate::reconcile::fleet::PoolRow;

/// One application, as the landing page lists it and its page heads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppView {
    pub namespace: String,
    pub name: String,
    /// The chart's name (or the shared chart the spec references).
    pub chart: String,
    /// The chart versions the pools run, e.g. `1.0.0` or `1.0.0, 1.1.0`.
    pub versions: String,
    /// `READY n/m`, as the status says it.
    pub ready: String,
    /// The rollout's phase and progress, e.g. `Progressing 3/10`.
    pub progress: String,
    /// The revision under way, and the wave, when there are steps.
    pub revision: String,
    pub wave: Option<String>,
    /// The status's `Ready` condition message: how it stands, in words.
    pub message: String,
    /// `spec.suspend`.
    pub suspended: bool,
    /// `spec.rollout.paused`.
    pub paused: bool,
    /// The rollout's phase (`status.rollout.phase`), when there is one.
    pub phase: Option<RolloutPhase>,
    pub pools: Vec<PoolView>,
}

/// One pool of an application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolView {
    /// As `nodepool-fanout get` prints it.
    pub row: PoolRow,
    /// The pool object's labels, to group the grid by.
    pub labels: BTreeMap<String, String>,
    pub state: CellState,
}

/// A pool's state as a cell shows it: a word, a symbol and a colour, so
/// that no state is told by colour alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum CellState {
    Failed,
    Halted,
    Offline,
    Unreachable,
    Waiting,
    AwaitingApproval,
    Updating,
    Soaking,
    RolledBack,
    Suspended,
    Missing,
    Ready,
}

impl CellState {
    pub const ALL: [CellState; 12] = [
        Self::Failed,
        Self::Halted,
        Self::Offline,
        Self::Unreachable,
        Self::Waiting,
        Self::AwaitingApproval,
        Self::Updating,
        Self::Soaking,
        Self::RolledBack,
        Self::Suspended,
        Self::Missing,
        Self::Ready,
    ];

    /// The word, also the CSS class (`state-<word>` in lower case) and the
    /// filter's value.
    pub fn word(self) -> &'static str {
        match self {
            Self::Failed => "Failed",
            Self::Halted => "Halted",
            Self::Offline => "Offline",
            Self::Unreachable => "Unreachable",
            Self::Waiting => "Waiting",
            Self::AwaitingApproval => "AwaitingApproval",
            Self::Updating => "Updating",
            Self::Soaking => "Soaking",
            Self::RolledBack => "RolledBack",
            Self::Suspended => "Suspended",
            Self::Missing => "Missing",
            Self::Ready => "Ready",
        }
    }

    /// A symbol that tells the state apart without its colour.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Failed => "✕",
            Self::Halted => "■",
            Self::Offline => "○",
            Self::Unreachable => "◌",
            Self::Waiting => "◷",
            Self::AwaitingApproval => "✋",
            Self::Updating => "↻",
            Self::Soaking => "◐",
            Self::RolledBack => "↶",
            Self::Suspended => "⏸",
            Self::Missing => "·",
            Self::Ready => "✓",
        }
    }

    pub fn of_word(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.word().eq_ignore_ascii_case(word))
    }

    /// A pool's state from what `get` reads of its release and what the
    /// rollout says of it. The rollout's word wins where it says more than
    /// Flux (a pool held for a window or an approval is Ready to Flux); a
    /// failure, an outage or a suspension wins over the rollout. A pool
    /// that is down, but not yet for `offlineAfter`, is Unreachable: the
    /// rollout waits for it rather than skipping it.
    pub fn of(row: &PoolRow, rollout: Option<&str>) -> Self {
        match row.state.as_str() {
            "Failed" | "Stalled" => return Self::Failed,
            "Offline" => return Self::Offline,
            _ if row.down_since.is_some() => return Self::Unreachable,
            "Suspended" => return Self::Suspended,
            _ if row.suspended => return Self::Suspended,
            _ => {}
        }
        match rollout {
            Some("Failed") => return Self::Failed,
            Some("Halted") => return Self::Halted,
            Some("Waiting" | "Pending" | "Paused" | "RollbackPending") => return Self::Waiting,
            Some("AwaitingApproval") => return Self::AwaitingApproval,
            Some("Updating" | "RollingBack") => return Self::Updating,
            Some("Soaking") => return Self::Soaking,
            Some("RolledBack") => return Self::RolledBack,
            _ => {}
        }
        match row.state.as_str() {
            "Ready" => Self::Ready,
            "None" => Self::Missing,
            "Waiting" => Self::Waiting,
            _ => Self::Updating,
        }
    }
}

impl AppView {
    /// The application as one fleet report says it stands: `status` is
    /// the report's status, `rows` its pools (each with its place in the
    /// rollout), so that the header and the cells cannot disagree; with
    /// each pool's labels.
    pub fn of(
        app: &NodePoolApplication,
        status: &NodePoolApplicationStatus,
        rows: Vec<PoolRow>,
        labels: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Self {
        let pools = rows
            .into_iter()
            .map(|row| PoolView {
                labels: labels.get(&row.pool).cloned().unwrap_or_default(),
                state: CellState::of(&row, row.rollout.as_deref()),
                row,
            })
            .collect();
        let ready = status.conditions.iter().find(|c| c.type_ == crate::api::conditions::READY);
        let rollout = status.rollout.as_ref();
        Self {
            namespace: app.metadata.namespace.clone().unwrap_or_default(),
            name: app.metadata.name.clone().unwrap_or_default(),
            chart: chart_name(app),
            versions: status.chart_version.clone().unwrap_or_default(),
            ready: status.ready.clone(),
            progress: rollout.map(|r| r.progress.clone()).unwrap_or_default(),
            revision: rollout.map(|r| r.revision.clone()).unwrap_or_default(),
            wave: rollout.and_then(|r| r.wave.clone()),
            message: ready.map(|c| c.message.clone()).unwrap_or_default(),
            suspended: app.spec.suspend == Some(true),
            paused: app.spec.rollout.as_ref().and_then(|r| r.paused) == Some(true),
            phase: rollout.map(|r| r.phase),
            pools,
        }
    }

    /// How many pools are in each state, in the order of [`CellState::ALL`].
    pub fn counts(&self) -> Vec<(CellState, usize)> {
        CellState::ALL
            .into_iter()
            .map(|s| (s, self.pools.iter().filter(|p| p.state == s).count()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Every label key some pool carries, to group by.
    pub fn label_keys(&self) -> BTreeSet<&str> {
        self.pools.iter().flat_map(|p| p.labels.keys().map(String::as_str)).collect()
    }
}

fn chart_name(app: &NodePoolApplication) -> String {
    if let Some(chart) = &app.spec.chart {
        return chart.spec.chart.clone();
    }
    app.spec
        .chart_ref
        .as_ref()
        .map(|r| format!("{:?}/{}", r.kind, r.name))
        .unwrap_or_default()
}

/// What the grid shows: the pools that pass the filter, grouped by the
/// value of one label (pools without it in a group of their own, last).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// The label to group by; one group when not given.
    pub group: Option<String>,
    pub state: Option<CellState>,
    /// A text the pool's name, labels, reason or message contain.
    pub text: Option<String>,
}

impl Filter {
    pub fn passes(&self, pool: &PoolView) -> bool {
        let state = self.state.is_none_or(|s| s == pool.state);
        let text = self.text.as_deref().map(str::to_lowercase).is_none_or(|t| {
            let found = |s: &str| s.to_lowercase().contains(&t);
            found(&pool.row.pool)
                || found(&pool.row.reason)
                || found(&pool.row.message)
                || pool.labels.iter().any(|(k, v)| found(k) || found(v))
        });
        state && text
    }

    /// The groups, each with its pools in name order.
    pub fn groups<'a>(&self, app: &'a AppView) -> Vec<(String, Vec<&'a PoolView>)> {
        let mut groups: BTreeMap<(bool, String), Vec<&PoolView>> = BTreeMap::new();
        for pool in app.pools.iter().filter(|p| self.passes(p)) {
            let key = match &self.group {
                None => (false, String::new()),
                Some(label) => match pool.labels.get(label) {
                    Some(value) => (false, value.clone()),
                    None => (true, format!("no {label}")),
                },
            };
            groups.entry(key).or_default().push(pool);
        }
        groups.into_iter().map(|((_, name), pools)| (name, pools)).collect()
    }
}

/// What a pool's page shows beyond its cell: its release's conditions, its
/// Helm history and its recent Events, each newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PoolDetail {
    pub conditions: Vec<ConditionView>,
    pub history: Vec<HistoryView>,
    pub events: Vec<EventView>,
}

/// One condition of the release, as Flux wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConditionView {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub since: String,
}

/// One Helm release revision of the release's history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HistoryView {
    pub revision: i64,
    pub chart_version: String,
    pub status: String,
    pub deployed: String,
}

/// One Event about the release.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventView {
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub last: String,
    pub count: i32,
}

impl PoolDetail {
    /// The conditions and history of a HelmRelease, as JSON.
    pub fn of_release(release: &serde_json::Value) -> Self {
        let text = |v: &serde_json::Value, key: &str| {
            v.get(key).and_then(|s| s.as_str()).unwrap_or_default().to_string()
        };
        let list =
            |pointer: &str| release.pointer(pointer).and_then(|l| l.as_array()).cloned().unwrap_or_default();
        let conditions = list("/status/conditions")
            .iter()
            .map(|c| ConditionView {
                type_: text(c, "type"),
                status: text(c, "status"),
                reason: text(c, "reason"),
                message: text(c, "message"),
                since: text(c, "lastTransitionTime"),
            })
            .collect();
        let history = list("/status/history")
            .iter()
            .map(|h| HistoryView {
                revision: h.get("version").and_then(|v| v.as_i64()).unwrap_or_default(),
                chart_version: text(h, "chartVersion"),
                status: text(h, "status"),
                deployed: text(h, "lastDeployed"),
            })
            .collect();
        Self {
            conditions,
            history,
            events: Vec::new(),
        }
    }
}
