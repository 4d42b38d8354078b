//! The controller, `get` and the console read one fleet report: built
//! from the same caches, at rest and under a rollout, the controller's
//! status, `get`'s rows and the console's cells agree pool by pool.

use std::collections::BTreeSet;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

use super::*;
use crate::console::view::{AppView, CellState};
use crate::reconcile::fleet::observed;
use crate::reconcile::observe::{self, Caches, Lists};

/// The pools of [`pools`], by name.
const POOLS: [&str; 5] = ["failing", "new", "offline", "ready", "refused"];

fn now() -> Time {
    Time("2030-01-01T00:00:00Z".parse().unwrap())
}

/// The application: `replicas` makes its revision, `progressive` rolls
/// a change out one pool at a time.
fn application(replicas: i64, progressive: bool, generation: i64) -> NodePoolApplication {
    let mut app = app();
    app.metadata.generation = Some(generation);
    app.spec.values = Some(json!({ "replicas": replicas }));
    if progressive {
        app.spec.rollout =
            serde_json::from_value(json!({ "strategy": "Progressive", "maxUnavailable": 1 })).unwrap();
    }
    app
}

fn nodepool(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
        "metadata": { "name": name, "labels": { "region": "east" } }
    }))
    .unwrap()
}

/// One node a pool; the offline pool's has not been Ready for a month.
fn node(pool: &str) -> k8s_openapi::api::core::v1::Node {
    let ready = if pool == "offline" { "False" } else { "True" };
    serde_json::from_value(json!({
        "metadata": { "name": format!("{pool}-0"), "labels": { "apps.openyurt.io/nodepool": pool } },
        "status": { "conditions": [{ "type": "Ready", "status": ready,
            "lastTransitionTime": "2029-12-01T00:00:00Z" }] }
    }))
    .unwrap()
}

/// The caches the controller's watches would hold: the pools, their
/// nodes and `releases`.
fn caches(releases: &[serde_json::Value]) -> Caches {
    caches_of(&POOLS, releases)
}

/// [`caches`] of the pools named `pools`.
fn caches_of(pools: &[&str], releases: &[serde_json::Value]) -> Caches {
    let api = ApiResource::from_gvk(&GroupVersionKind::gvk("apps.openyurt.io", "v1beta1", "NodePool"));
    let mut lists = Lists {
        nodes: pools.iter().map(|p| node(p)).collect(),
        releases: releases.iter().map(|r| serde_json::from_value(r.clone()).unwrap()).collect(),
        ..Lists::default()
    };
    lists
        .pools
        .insert(crate::api::PoolKind::OpenYurt, (api, pools.iter().map(|p| nodepool(p)).collect()));
    Caches::of_lists(lists)
}

/// What the controller's reconcile plans over the caches, as its
/// reconciler calls observe and plan.
fn controller(caches: &Caches, app: &NodePoolApplication) -> Plan {
    let beyond = observe::Beyond {
        now: now(),
        chart_ref: None,
        chart: None,
        hold: None,
        clock_since: None,
        memo: None,
        analysis: None,
        rendering_changes: Default::default(),
    };
    observe::observe(caches, app).plan(app, &caches.history_of(app), beyond).0
}

/// The release a plan wrote for `pool` two months ago, as Flux reports it
/// since a month before the offline pool's node went down.
fn written(planned: &Plan, pool: &str) -> serde_json::Value {
    let (ready, reason, message) = match pool {
        "failing" => ("False", "UpgradeFailed", "Helm upgrade failed: timed out"),
        _ => ("True", "UpgradeSucceeded", "Helm upgrade succeeded"),
    };
    let mut object = release(planned, pool, ready, reason, message);
    object["apiVersion"] = json!("helm.toolkit.fluxcd.io/v2");
    object["kind"] = json!("HelmRelease");
    object["metadata"]["uid"] = json!(format!("uid-{pool}"));
    object["metadata"]["annotations"][crate::api::naming::ANNOTATION_WRITTEN_AT] =
        json!("2029-10-31T00:00:00Z");
    object["status"]["conditions"][0]["lastTransitionTime"] = json!("2029-11-01T00:00:00Z");
    object
}

/// Checks that the controller's status (with the refused write), `get`'s
/// rows and the console's cells agree on each pool; returns the rows.
fn agree(caches: &Caches, app: &NodePoolApplication, refused: &[WriteRefused]) -> Vec<PoolRow> {
    let planned = controller(caches, app);
    let report = planned.report.after_writes(refused);
    let status = report.status();
    // What the controller wrote is what a looker reads.
    let mut app = app.clone();
    app.status = Some(status.clone());
    let looked = observed::observe(caches, &app, now());
    let rows = looked.rows(&app);
    let console = AppView::of(&app, &looked.report.status(), rows.clone(), &BTreeMap::new());
    assert_eq!(rows.len(), POOLS.len(), "a row for every pool, listed or not: {rows:#?}");
    assert_eq!(console.ready, status.ready, "the console's header is the status's");
    let listed: BTreeMap<&str, &PoolStatus> = status.pools.iter().map(|p| (p.pool.as_str(), p)).collect();
    for (row, cell) in rows.iter().zip(&console.pools) {
        let pool = row.pool.as_str();
        let ours = report.pools.iter().find(|p| p.pool == pool).unwrap();
        let entry = listed[pool];
        assert_eq!((&row.reason, &row.message), (&entry.reason, &entry.message), "{pool}: status vs get");
        assert_eq!((&row.reason, &row.message), (&ours.status.reason, &ours.status.message), "{pool}");
        if !row.release.is_empty() {
            assert_eq!(row.state, ours.status.state.as_str(), "{pool}: report vs get");
        }
        let rollout = ours.rollout.map(|r| r.as_str().to_string());
        assert_eq!(row.rollout, rollout, "{pool}: the rollout's verdict");
        assert_eq!(entry.rollout, rollout.clone().unwrap_or_default(), "{pool}: status vs report");
        assert_eq!(cell.row, *row, "{pool}: the console's cell is get's row");
        assert_eq!(cell.state, CellState::of(row, rollout.as_deref()), "{pool}");
    }
    rows
}

#[test]
fn the_status_get_and_the_console_agree_pool_by_pool_at_rest() {
    let app = application(1, false, 1);
    let first = plan_over(&app, Vec::new(), false);
    let mut releases: Vec<serde_json::Value> =
        POOLS.iter().filter(|p| **p != "new").map(|p| written(&first, p)).collect();
    // The refused pool's release holds an older spec: it is written again.
    let last = releases.len() - 1;
    releases[last]["metadata"]["annotations"][crate::api::naming::ANNOTATION_SPEC_HASH] = json!("older");
    let rows = agree(&caches(&releases), &app, &[refused()]);
    let states: Vec<(&str, &str)> = rows.iter().map(|r| (r.pool.as_str(), r.state.as_str())).collect();
    assert_eq!(states, STATES);
    let refused = rows.iter().find(|r| r.pool == "refused").unwrap();
    assert_eq!(refused.reason, "ApplyFailed", "what only the controller saw comes from the status");
}

#[test]
fn the_status_get_and_the_console_agree_pool_by_pool_under_a_rollout() {
    let first = plan_over(&application(1, true, 1), Vec::new(), false);
    let mut releases: Vec<serde_json::Value> = POOLS.iter().map(|p| written(&first, p)).collect();
    // A change: the controller writes the first pool the rollout lets go,
    // and Flux is upgrading it.
    let changed = application(2, true, 2);
    let planned = controller(&caches(&releases), &changed);
    let going: Vec<&str> = planned.apply.iter().map(|d| d.pool.as_str()).collect();
    assert_eq!(going.len(), 1, "one pool at a time: {going:?}");
    let at = POOLS.iter().position(|p| *p == going[0]).unwrap();
    let mut upgrading = release(&planned, going[0], "Unknown", "Progressing", "Running 'upgrade' action");
    upgrading["apiVersion"] = json!("helm.toolkit.fluxcd.io/v2");
    upgrading["kind"] = json!("HelmRelease");
    upgrading["metadata"]["uid"] = json!(format!("uid-{}", going[0]));
    upgrading["metadata"]["generation"] = json!(2);
    releases[at] = upgrading;
    let rows = agree(&caches(&releases), &changed, &[]);
    let verdicts: BTreeSet<&str> = rows.iter().filter_map(|r| r.rollout.as_deref()).collect();
    assert!(verdicts.contains("Updating") && verdicts.contains("Pending"), "{verdicts:?}");
}

/// More refusals than the status lists (it lists 40): the pools a look
/// would write that the status leaves out read as refused, not as writes
/// to come, when they are as many as the refusals it leaves out; and as
/// perhaps refused when the look's caches are behind a write.
#[test]
fn refusals_the_status_does_not_list_read_as_refused_not_as_updating() {
    let names: Vec<String> = (0..50).map(|i| format!("site-{i:02}")).collect();
    let pools: Vec<&str> = names.iter().map(String::as_str).collect();
    // Every pool runs the first revision: its first install went alone.
    let first = application(1, false, 1);
    let alone = controller(&caches_of(&pools, &[]), &first);
    let mut releases = vec![written(&alone, pools[0])];
    let rest = controller(&caches_of(&pools, &releases), &first);
    releases.extend(pools[1..].iter().map(|p| written(&rest, p)));
    // A change; the API server refuses 45 writes, and the other five are written.
    let app = application(2, false, 2);
    let planned = controller(&caches_of(&pools, &releases), &app);
    assert_eq!(planned.apply.len(), 50);
    let refused: Vec<WriteRefused> = pools[..45]
        .iter()
        .map(|p| WriteRefused {
            pool: (*p).to_string(),
            ..super::refused()
        })
        .collect();
    let status = planned.report.after_writes(&refused).status();
    assert_eq!((status.pools.len(), status.refused_pools), (super::status::MAX_LISTED_POOLS, 45));
    let mut app = app;
    app.status = Some(status.clone());
    let behind = releases.clone();
    for (at, pool) in pools.iter().enumerate().skip(45) {
        releases[at] = written(&planned, pool);
    }
    let unlisted: Vec<&str> = pools
        .iter()
        .copied()
        .filter(|p| !status.pools.iter().any(|l| l.pool == *p))
        .collect();
    let state_of = |report: &FleetReport, pool: &str| {
        let p = report.pools.iter().find(|r| r.pool == pool).unwrap();
        (p.status.state, p.status.reason.clone())
    };

    let looked = observed::observe(&caches_of(&pools, &releases), &app, now());
    for pool in &unlisted {
        let (state, reason) = state_of(&looked.report, pool);
        if pools[45..].contains(pool) {
            assert_eq!(state, ReleaseState::Ready, "{pool} was written");
        } else {
            assert_eq!(
                (state, reason.as_str()),
                (ReleaseState::Stalled, conditions::pool_reason::REFUSAL_NOT_LISTED),
                "{pool}"
            );
        }
    }
    assert_eq!(looked.report.status().refused_pools, 45, "the console's header counts as the status");

    // The look's caches have not seen one of the five writes yet: six
    // pools not written, five refused, and which cannot be told.
    releases[45] = behind[45].clone();
    let looked = observed::observe(&caches_of(&pools, &releases), &app, now());
    let perhaps: Vec<&str> = unlisted
        .iter()
        .copied()
        .filter(|p| state_of(&looked.report, p).1 == conditions::pool_reason::PERHAPS_REFUSED)
        .collect();
    assert_eq!(perhaps.len(), 6, "{perhaps:?}");
    assert!(perhaps.contains(&pools[45]));
}
