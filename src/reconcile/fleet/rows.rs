//! The fleet report as rows, one per pool: what `nodepool-fanout get`
//! prints and the console's cells show, so that neither builds a pool's
//! line of its own.

use std::collections::HashMap;
use std::sync::Arc;

use kube::ResourceExt;
use serde::Serialize;

use crate::api::NodePoolApplication;
use crate::pools::nodes::NodeCount;
use crate::reconcile::plan::ObservedRelease;
use crate::reconcile::release::state::{ReleaseState, ReleaseStatus};

use super::FleetReport;

/// One pool of one application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRow {
    pub namespace: String,
    pub application: String,
    pub pool: String,
    /// Ready nodes out of the pool's nodes, e.g. `2/3`.
    pub nodes: String,
    /// The HelmRelease's name; empty when the pool has none.
    pub release: String,
    /// Ready, Progressing, Waiting, Failed, Stalled, Unknown, Offline,
    /// Suspended, or None when the pool has no HelmRelease.
    pub state: String,
    pub reason: String,
    pub chart_version: String,
    /// The Helm release's revision (its history's latest).
    pub revision: Option<i64>,
    pub message: String,
    pub suspended: bool,
    /// Where the pool stands in the rollout of the current revision (Done,
    /// Soaking, Updating, Pending, Halted, AwaitingApproval, ...), when
    /// the rollout covers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<String>,
    /// When the pool's last Ready node (or its site's control plane or
    /// connection) went down, while none is up; it reads `Offline` once it
    /// has been down for the application's `rollout.offlineAfter`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_since: Option<String>,
}

impl PoolRow {
    /// Whether a person should look at it: not Ready, and not offline
    /// (an offline site is waited for, not failing).
    pub fn failing(&self) -> bool {
        !matches!(self.state.as_str(), "Ready" | "Offline")
    }
}

/// A row per pool of the report, sorted by pool, with the Helm revision
/// and suspension read from each pool's release among `owned`. A pool
/// with no HelmRelease (a config that fails, a rollout not yet there)
/// reads `None`; a release suspended before helm-controller ever acted on
/// it says so rather than `Unknown`, because it was told not to act.
pub fn rows(app: &NodePoolApplication, report: &FleetReport, owned: &[Arc<ObservedRelease>]) -> Vec<PoolRow> {
    let namespace = app.namespace().unwrap_or_default();
    let name = app.name_any();
    let by_name: HashMap<&str, &ObservedRelease> =
        owned.iter().map(|o| (o.name.as_str(), o.as_ref())).collect();
    let mut rows: Vec<PoolRow> = report
        .pools
        .iter()
        .map(|p| {
            let release = by_name.get(p.helm_release.as_str()).copied();
            let suspended = release.is_some_and(|r| r.suspended);
            let mut status = ReleaseStatus::clone(&p.status);
            let never_acted = suspended && status.state == ReleaseState::Unknown;
            if never_acted {
                status.reason = "Suspended".to_string();
                status.message = "suspended (spec.suspend): helm-controller does not act on it".to_string();
            }
            let state = match (release, never_acted) {
                (None, _) => "None",
                (Some(_), true) => "Suspended",
                (Some(_), false) => status.state.as_str(),
            };
            PoolRow {
                namespace: namespace.clone(),
                application: name.clone(),
                pool: p.pool.clone(),
                nodes: p.nodes.map(node_text).unwrap_or_else(|| "-".to_string()),
                release: release.map(|_| p.helm_release.clone()).unwrap_or_default(),
                state: state.to_string(),
                reason: status.reason,
                chart_version: status.chart_version.unwrap_or_default(),
                revision: release.and_then(|r| r.helm_revision),
                message: status.message,
                suspended,
                rollout: p.rollout.map(|r| r.as_str().to_string()),
                down_since: p.nodes.filter(|n| n.offline()).and_then(|n| n.changed).map(|t| t.to_string()),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.pool.cmp(&b.pool));
    rows
}

fn node_text(count: NodeCount) -> String {
    match count.total {
        0 => "-".to_string(),
        _ => count.to_string(),
    }
}
