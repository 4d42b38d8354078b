//! Unit tests of the fleet report: every reader of it agrees.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::api::{ConditionStatus, PoolStatus};
use crate::pools::Pool;
use crate::reconcile::plan::{self, ListedReleases, ObservedRelease, Plan, PlanInput};

fn app() -> NodePoolApplication {
    serde_json::from_value(json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "gw", "namespace": "edge", "uid": "uid-1", "generation": 2 },
        "spec": {
            "pools": { "selector": { "matchLabels": { "region": "east" } } },
            "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0",
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } },
            "interval": "10m",
            "values": { "replicas": 1 }
        }
    }))
    .unwrap()
}

fn pools() -> Vec<Pool> {
    ["ready", "failing", "offline", "new", "refused"]
        .into_iter()
        .map(|name| Pool {
            labels: crate::pools::Labels::from_iter([("region".to_string(), "east".to_string())]),
            ..Pool::named(name)
        })
        .collect()
}

/// The plan over [`pools`]; with `offline`, the pool of that name has
/// no Ready node.
fn plan_over(app: &NodePoolApplication, owned: Vec<ObservedRelease>, offline: bool) -> Plan {
    let pools = pools();
    let nodes: BTreeMap<String, NodeCount> = pools
        .iter()
        .map(|p| {
            let ready = u32::from(!(offline && p.name == "offline"));
            (
                p.name.clone(),
                NodeCount {
                    ready,
                    total: 1,
                    changed: None,
                    of: Default::default(),
                },
            )
        })
        .collect();
    plan::plan(&PlanInput {
        history: None,
        app,
        pools: &pools.iter().collect::<Vec<_>>(),
        nodes: Some(&nodes),
        owned: owned.into_iter().map(Arc::new).collect(),
        others: &ListedReleases::default(),
        now: Time("2030-01-01T00:00:00Z".parse().unwrap()),
        chart_ref: None,
        chart: None,
        hold: None,
        unserved: None,
        clock_since: None,
        memo: None,
        first_install_alone: false,
        analysis: None,
        rendering_changes: Default::default(),
    })
}

/// The HelmRelease of `pool` as the API server lists it, holding the spec
/// the plan would write, in the state Flux says.
fn release(planned: &Plan, pool: &str, ready: &str, reason: &str, message: &str) -> serde_json::Value {
    let desired = planned.apply.iter().find(|d| d.pool == pool).unwrap();
    let mut object = desired.object();
    object["metadata"]["generation"] = json!(1);
    object["status"] = json!({
        "observedGeneration": 1,
        "conditions": [{ "type": "Ready", "status": ready, "reason": reason, "message": message,
                         "observedGeneration": 1 }],
        "history": [{ "chartVersion": "1.0.0", "version": 3 }]
    });
    object
}

/// A fleet of five pools as a reconcile sees it: one Ready, one whose
/// upgrade failed, one offline, one new, and one whose write the API
/// server is about to refuse.
fn fleet() -> (NodePoolApplication, Vec<serde_json::Value>, FleetReport) {
    let app = app();
    let first = plan_over(&app, Vec::new(), false);
    let releases = vec![
        release(&first, "ready", "True", "UpgradeSucceeded", "Helm upgrade succeeded"),
        release(&first, "failing", "False", "UpgradeFailed", "Helm upgrade failed: timed out"),
        release(&first, "offline", "False", "UpgradeFailed", "timed out waiting for the condition"),
        release(&first, "refused", "True", "UpgradeSucceeded", "Helm upgrade succeeded"),
    ];
    let mut owned: Vec<ObservedRelease> = releases.iter().filter_map(ObservedRelease::from_value).collect();
    // The refused pool's release holds an older spec: it is written again.
    owned
        .iter_mut()
        .filter(|o| o.pool.as_deref() == Some("refused"))
        .for_each(|o| o.spec_hash = None);
    let planned = plan_over(&app, owned, true);
    (app, releases, planned.report.after_writes(&[refused()]))
}

/// Each pool of [`fleet`] as `get` reads it, whoever builds the report.
const STATES: [(&str, &str); 5] = [
    ("failing", "Failed"),
    ("new", "None"),
    ("offline", "Offline"),
    ("ready", "Ready"),
    ("refused", "Stalled"),
];

/// The refused pool's write, as the API server refuses it.
fn refused() -> WriteRefused {
    WriteRefused {
        pool: "refused".into(),
        reason: "ApplyFailed".into(),
        message: "cannot apply HelmRelease: admission webhook denied it".into(),
        retriable: false,
    }
}

fn rows(app: &NodePoolApplication, releases: &[serde_json::Value], report: &FleetReport) -> Vec<PoolRow> {
    let owned: Vec<Arc<ObservedRelease>> =
        releases.iter().filter_map(ObservedRelease::from_value).map(Arc::new).collect();
    assert!(owned.iter().all(|o| o.helm_revision == Some(3)), "the Helm revision is read");
    rows::rows(app, report, &owned)
}

#[test]
fn status_events_metrics_and_get_read_one_report() {
    let (app, releases, report) = fleet();
    let published = report.publish(&NodePoolApplicationStatus::default(), &[]);
    let status = &published.status;
    let rows = rows(&app, &releases, &report);
    let listed: BTreeMap<&str, &PoolStatus> = status.pools.iter().map(|p| (p.pool.as_str(), p)).collect();
    assert_eq!(rows.len(), 5);
    assert_eq!(listed.len(), 5);
    // Each pool: the same reason and message in the status and in `get`,
    // and the same state: `get` prints the report's (`None` where the pool
    // has no HelmRelease yet), the status's readiness follows it.
    let mut states = Vec::new();
    for row in &rows {
        let entry = listed[row.pool.as_str()];
        assert_eq!((&entry.reason, &entry.message), (&row.reason, &row.message), "{}", row.pool);
        let state = report.pools.iter().find(|p| p.pool == row.pool).unwrap().status.state;
        if !row.release.is_empty() {
            assert_eq!(row.state, state.as_str(), "{}", row.pool);
        }
        let ready = match state {
            ReleaseState::Ready => ConditionStatus::True,
            ReleaseState::Failed | ReleaseState::Stalled | ReleaseState::Waiting => ConditionStatus::False,
            _ => ConditionStatus::Unknown,
        };
        assert_eq!(entry.ready, ready, "{}: {}", row.pool, row.state);
        states.push((row.pool.as_str(), row.state.as_str()));
    }
    assert_eq!(states, STATES);
    // The metrics count what the status counts.
    let counts = published.counts;
    assert_eq!((counts.selected, counts.ready, counts.offline), (5, 1, 1), "{counts:?}");
    assert_eq!((status.selected_pools, status.ready_pools, status.offline_pools), (5, 1, 1));
    assert_eq!(status.ready, "1/5 (1 offline)");
    // The Events name each pool whose state they report, with the
    // status's reason: the failed upgrade, the refused write, the offline
    // site and the Ready pool; the new pool is in progress, no news.
    let events = &published.events;
    let said: Vec<(&str, bool)> = events.iter().map(|e| (e.reason.as_str(), e.warning)).collect();
    for (pool, reason) in [
        ("failing", "UpgradeFailed"),
        ("refused", "ApplyFailed"),
        ("offline", "PoolOffline"),
        ("ready", "PoolReady"),
    ] {
        let event = events.iter().find(|e| e.message.contains(&format!("pool {pool:?}")));
        let event = event.unwrap_or_else(|| panic!("no Event for {pool}: {said:?}"));
        assert_eq!(event.reason, reason, "{}", event.message);
        assert_eq!(event.release.as_deref(), Some(listed[pool].helm_release.as_str()));
        assert_eq!(event.pool.as_deref(), Some(listed[pool].pool.as_str()));
    }
    assert!(!events.iter().any(|e| e.message.contains("pool \"new\"")), "{said:?}");
    // The conditions say a person must act, for the refused write.
    let stalled = status.conditions.iter().find(|c| c.type_ == conditions::STALLED).unwrap();
    assert_eq!(stalled.reason, "ApplyFailed");
}

#[test]
fn a_report_after_no_refusal_is_the_planned_one() {
    let (_, _, report) = fleet();
    assert_eq!(report.after_writes(&[]), report);
    let retriable = WriteRefused {
        pool: "ready".into(),
        reason: "ApplyFailed".into(),
        message: "the server is busy".into(),
        retriable: true,
    };
    let after = report.after_writes(&[retriable]);
    assert_eq!(after.counts().ready, 0, "the refused pool no longer counts as Ready");
    let row = after.pools.iter().find(|p| p.pool == "ready").unwrap();
    assert_eq!(row.status.state, ReleaseState::Failed, "a retry may mend it");
}

/// Fifty pools whose values break the chart's schema: the status lists
/// 40, and the other ten have their Event at each plan all the same, each
/// naming its pool and the field.
#[test]
fn a_refusal_the_status_leaves_out_has_its_event() {
    let pools: Vec<PoolReport> = (0..50)
        .map(|i| PoolReport {
            pool: format!("site-{i:02}"),
            helm_release: format!("ingress-site-{i:02}"),
            status: Arc::new(ReleaseStatus {
                state: ReleaseState::Stalled,
                reason: conditions::pool_reason::INVALID_POOL_CONFIG.into(),
                message: "values.replicas: \"many\" is not of type \"integer\"".into(),
                chart_version: None,
                observed_latest: false,
                ready_since: None,
                ready_recorded: None,
                checks_recorded: None,
                deployed_before: false,
                deployed_version: None,
            }),
            rollout: None,
            nodes: None,
        })
        .collect();
    let report = FleetReport {
        pools,
        ..FleetReport::default()
    };
    let first = report.publish(&NodePoolApplicationStatus::default(), &[]);
    assert_eq!((first.status.pools.len(), first.status.refused_pools), (40, 50));
    let again = report.publish(&first.status, &[]);
    let named: Vec<&str> = again.events.iter().filter_map(|e| e.pool.as_deref()).collect();
    let left_out: Vec<String> = (40..50).map(|i| format!("site-{i:02}")).collect();
    assert_eq!(named, left_out, "nothing changed for the listed pools; the others are said again");
    for event in &again.events {
        assert_eq!(event.reason, conditions::pool_reason::INVALID_POOL_CONFIG);
        assert!(event.warning && event.message.contains("values.replicas"), "{}", event.message);
    }
}

mod agreement;
