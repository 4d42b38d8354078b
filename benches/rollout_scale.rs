//! `make bench-rollout-scale POOLS=N` (10,000 by default): the controller
//! alone rolling one values change out over N pools, all at once and
//! progressively (`maxUnavailable: 10%`, three waves, one per region),
//! side by side in one run on one control plane.
//!
//! helm-controller on two cores installs about 1,000 releases in ten
//! minutes, so it would measure itself here, not the controller. The
//! releases are suspended, and a **stand-in for helm-controller** in this
//! bench marks each release the controller writes Ready one second after
//! the write, as helm-controller writes its status on a successful install
//! or upgrade (`observedGeneration`, a `Ready=True` condition of the
//! release's generation, the Helm history). Nothing else is stood in for:
//! the controller, the API server and etcd are real.
//!
//! The application is installed first (every pool at once, whatever the
//! strategy) and changed once unmeasured (the first apply to a created
//! release carries a one-time field ownership fold), then its values change
//! once under `AllAtOnce` and once more under `Progressive`; a change to `spec.rollout` alone is no new
//! revision, so both rows measure one change of the same application over
//! the same releases. Two more progressive changes are judged by a metric
//! check (`rollout.analysis`) asked of the plane's real Prometheus, every
//! 10 s while a pool soaks: once per pool, and once `by` site for every
//! pool due together. For each it prints the time from the change to
//! `Complete N/N` with every pool Ready, and over that interval the
//! controller's CPU seconds, its write requests, its reconciles, its peak
//! RSS, the most pools seen updating at once, the mean time from a pool's
//! write to its being done, the queries Prometheus answered, and the
//! stand-in's patches.
#[path = "../tests/support/mod.rs"]
#[allow(dead_code, unused_imports)] // this bench uses a part of the shared helpers
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube::Api;
use nodepool_fanout::api::{NodePoolApplication, NodePoolApplicationStatus, RolloutPhase};
use serde_json::{json, Value};
use support::apps::apply_app;
use support::bench::{
    clean_up, controller_flags, create_pools, process_figures, reset_peak, resident_kib, secs,
    suspended_fleet, wait, writes,
};
use support::{ensure_crd, helmrelease_resource, nodepool_resource, RunningController, TestEnv};

#[path = "rollout_scale/stand_in.rs"]
mod stand_in;
use stand_in::StandIn;

#[path = "rollout_scale/checks.rs"]
mod checks;
use checks::{queries_answered, Exporter};

/// The name `suspended_fleet` gives the application.
const APP: &str = "fleet";
/// One wave per region.
const REGIONS: [&str; 3] = ["east", "west", "north"];
/// How long the stand-in takes to "install" a release after its write.
const STAND_IN_DELAY: Duration = Duration::from_secs(1);
/// The stand-in's status patches in flight at once.
const STAND_IN_PARALLEL: usize = 32;
/// No reconcile for this long: the controller is at rest.
const QUIET: Duration = Duration::from_secs(5);
/// A rollout whose counts and stand-in patches have not moved for this
/// long has stalled: the bench fails rather than wait out a half-hour
/// timeout.
const STALL: Duration = Duration::from_secs(300);
/// The resync far away, so that every reconcile counted has a cause.
const RESYNC: &str = "1h";

/// What one measured change cost the controller.
struct Figures {
    wall: Duration,
    cpu: f64,
    writes: u64,
    /// Write requests by verb and resource.
    writes_by_series: BTreeMap<String, u64>,
    reconciles: u64,
    /// Its resident size as the change began: the floor of the peak
    /// after it (its peak is reset to it then).
    resident_at_start_kib: u64,
    peak_rss_kib: u64,
    most_updating: i32,
    /// The mean time from a pool's write to its being done, by Little's
    /// law: the pools under way, summed over the samples, over the pools.
    mean_under_way: Duration,
    /// The instant queries the plane's Prometheus answered meanwhile.
    queries: u64,
    stand_in_patches: u64,
}

#[tokio::main]
async fn main() {
    let pools: usize = std::env::var("POOLS").ok().and_then(|p| p.parse().ok()).unwrap_or(10_000);
    println!(
        "rollout-at-scale benchmark: {pools} pools in {} regions, suspended HelmReleases; \
         a stand-in for helm-controller marks each written release Ready",
        REGIONS.len()
    );
    println!(
        "stand-in: Ready {} s after each write ({STAND_IN_PARALLEL} status patches in flight)",
        STAND_IN_DELAY.as_secs()
    );
    println!("controller flags: {}", controller_flags(RESYNC).join(" "));
    let env = TestEnv::new("rollout-scale").await;
    ensure_crd(&env.client).await;
    let pool_api: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    let names: Vec<String> = (0..pools).map(|i| env.pool_name(&format!("p{i}"))).collect();
    let started = Instant::now();
    create_pools(&pool_api, &names, &env.prefix, &REGIONS).await;
    println!("created {pools} NodePools in {}", secs(started.elapsed()));

    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let stand_in = StandIn::start(releases);
    let controller = RunningController::start_with(&env.namespace, &controller_flags(RESYNC));
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    // Its figures are read from its metrics from the first write on.
    wait("the controller to be ready", &controller, || async {
        (controller.readyz().await == 200).then_some(())
    })
    .await;

    let mut manifest = application(&env, json!({ "strategy": "AllAtOnce" }), "info");
    let started = Instant::now();
    let install = measure(&env, &apps, &manifest, pools, &controller, &stand_in).await;
    println!(
        "first install (every pool at once): {} to Complete {pools}/{pools}, in all {}",
        secs(install.wall),
        secs(started.elapsed())
    );

    // The first apply to a release the controller created by POST also
    // folds the create's field ownership into its apply entry, a patch per
    // release, once: made here, unmeasured as a row, so that neither row
    // carries it.
    manifest["spec"]["values"]["controller"]["config"]["log-level"] = json!("notice");
    let first = measure(&env, &apps, &manifest, pools, &controller, &stand_in).await;
    println!(
        "first change (with the field ownership fold, all at once): {} to Complete {pools}/{pools}, \
         controller CPU {:.1} s, {} writes",
        secs(first.wall),
        first.cpu,
        first.writes
    );

    // The checks' rows ask the plane's real Prometheus of one endpoint
    // that answers every pool's error ratio.
    let exporter = Exporter::start(&env.namespace, &names).await;
    let mut judged = progressive();
    judged["analysis"] = checks::analysis(false);
    let mut batched = progressive();
    batched["analysis"] = checks::analysis(true);
    let mut rows = Vec::new();
    let changes = [
        ("AllAtOnce", json!({ "strategy": "AllAtOnce" }), "debug"),
        ("Progressive", progressive(), "warn"),
        ("+check/pool", judged, "error"),
        ("+check by site", batched, "info"),
    ];
    for (label, rollout, level) in changes {
        // The strategy first, on its own: no new revision, nothing written.
        manifest["spec"]["rollout"] = rollout.clone();
        apply_settled(&env, &apps, &manifest, &controller).await;
        manifest["spec"]["values"]["controller"]["config"]["log-level"] = json!(level);
        let figures = measure(&env, &apps, &manifest, pools, &controller, &stand_in).await;
        println!(
            "{label}: {} to Complete {pools}/{pools}, controller CPU {:.1} s, {} writes, {} reconciles",
            secs(figures.wall),
            figures.cpu,
            figures.writes,
            figures.reconciles
        );
        rows.push((label, figures));
    }
    print_table(pools, &rows);

    // Not measured: the cluster as it was, for the next run.
    exporter.stop();
    stand_in.stop();
    drop(controller);
    clean_up(env).await;
}

/// The application over every pool of this run, its releases suspended so
/// that the real helm-controller leaves them to the stand-in.
fn application(env: &TestEnv, rollout: Value, log_level: &str) -> Value {
    let mut manifest = suspended_fleet(env, json!({ "rollout": rollout }));
    manifest["spec"]["values"]["controller"]["config"] = json!({ "log-level": log_level });
    manifest
}

/// A tenth of the pools at a time, a region per wave. The deadline is far:
/// the stand-in's queue, not a chart, sets when a release turns Ready, and
/// a deadline passed would halt the rollout on the bench's own backlog.
fn progressive() -> Value {
    let steps: Vec<Value> = REGIONS
        .iter()
        .map(|r| json!({ "pools": { "selector": { "matchLabels": { "region": r } } } }))
        .collect();
    json!({
        "strategy": "Progressive",
        "maxUnavailable": "10%",
        "progressDeadline": "30m",
        "steps": steps
    })
}

/// Applies a change that makes no new revision, and waits until the
/// controller has read it and rests.
async fn apply_settled(
    env: &TestEnv,
    apps: &Api<NodePoolApplication>,
    manifest: &Value,
    controller: &RunningController,
) {
    let applied = apply_app(env, manifest).await.expect("apply the rollout settings");
    let generation = applied.metadata.generation;
    wait("the controller to read the rollout settings", controller, || async {
        let status = apps.get(APP).await.ok()?.status?;
        (status.observed_generation == generation).then_some(())
    })
    .await;
    controller.quiet(QUIET).await;
}

/// Applies `manifest` and waits until its rollout is `Complete` with every
/// one of `pools` pools done and Ready; returns what it cost the
/// controller from the write to then.
async fn measure(
    env: &TestEnv,
    apps: &Api<NodePoolApplication>,
    manifest: &Value,
    pools: usize,
    controller: &RunningController,
    stand_in: &StandIn,
) -> Figures {
    let reconciles_before = controller.quiet(QUIET).await;
    let writes_before = writes(controller).await;
    let series_before = write_series(controller).await;
    let (_, cpu_before) = process_figures(controller.pid());
    let resident_at_start_kib = resident_kib(controller.pid());
    reset_peak(controller.pid());
    let patches_before = stand_in.patches();
    let queries_before = queries_answered().await;
    let revision_before = apps.get(APP).await.ok().and_then(|a| a.status?.rollout).map(|r| r.revision);

    let start = Instant::now();
    let applied = apply_app(env, manifest).await.expect("apply the application");
    let generation = applied.metadata.generation;
    let mut most_updating = 0;
    let mut under_way_seconds = 0.0;
    let mut sampled = Instant::now();
    let mut last_moved = (Instant::now(), None);
    loop {
        if let Some(error) = stand_in.error() {
            panic!("the stand-in for helm-controller failed: {error}\n{}", controller.log_tail());
        }
        let status = apps.get(APP).await.ok().and_then(|a| a.status);
        let status = status.filter(|s| s.observed_generation == generation);
        let rollout = status.as_ref().and_then(|s| s.rollout.as_ref());
        let rollout = rollout.filter(|r| Some(&r.revision) != revision_before.as_ref());
        if let (Some(status), Some(r)) = (&status, rollout) {
            let under_way = r.updated - r.done - r.failed;
            most_updating = most_updating.max(under_way);
            under_way_seconds += f64::from(under_way) * sampled.elapsed().as_secs_f64();
            sampled = Instant::now();
            if complete(status, pools) {
                break;
            }
        }
        // The status moves at the end of each reconcile, which at
        // thousands of pools can write for minutes; the stand-in's patches
        // follow each write within a second.
        let counts = (rollout.map(|r| (r.updated, r.done, r.failed)), stand_in.patches());
        if last_moved.1 != Some(counts) {
            last_moved = (Instant::now(), Some(counts));
        }
        assert!(
            last_moved.0.elapsed() < STALL,
            "the rollout has not moved for {STALL:?}: {:?}\n{}",
            apps.get(APP).await.ok().and_then(|a| a.status).map(|s| (s.ready, s.rollout)),
            controller.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let wall = start.elapsed();
    let (peak_rss_kib, cpu_after) = process_figures(controller.pid());
    let series_after = write_series(controller).await;
    Figures {
        wall,
        cpu: cpu_after - cpu_before,
        writes: writes(controller).await - writes_before,
        writes_by_series: series_after
            .into_iter()
            .map(|(k, v)| (k.clone(), v - series_before.get(&k).copied().unwrap_or(0)))
            .filter(|(_, v)| *v > 0)
            .collect(),
        reconciles: controller.reconciles().await - reconciles_before,
        resident_at_start_kib,
        peak_rss_kib,
        most_updating,
        mean_under_way: Duration::from_secs_f64(under_way_seconds / pools as f64),
        queries: queries_answered().await - queries_before,
        stand_in_patches: stand_in.patches() - patches_before,
    }
}

/// The rollout is complete with every pool done, and every pool Ready.
fn complete(status: &NodePoolApplicationStatus, pools: usize) -> bool {
    let pools = pools as i32;
    status.selected_pools == pools
        && status.ready_pools == pools
        && status
            .rollout
            .as_ref()
            .is_some_and(|r| r.phase == RolloutPhase::Complete && r.done == pools && r.total == pools)
}

/// The controller's write requests so far, by the labels of each series
/// (verb and resource).
async fn write_series(controller: &RunningController) -> BTreeMap<String, u64> {
    let verbs = ["create", "update", "patch", "apply", "delete", "deletecollection"];
    controller
        .scrape()
        .await
        .lines()
        .filter(|l| l.starts_with("nodepool_fanout_api_requests_total{"))
        .filter(|l| verbs.iter().any(|v| l.contains(&format!("verb=\"{v}\""))))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once(' ')?;
            let labels = labels.trim_start_matches("nodepool_fanout_api_requests_total");
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn print_table(pools: usize, rows: &[(&str, Figures)]) {
    println!();
    let row = |label: &str, cells: Vec<String>| {
        let cells: String = cells.iter().map(|c| format!(" {c:>14}")).collect();
        println!("{label:<44}{cells}");
    };
    let cell = |f: &dyn Fn(&Figures) -> String| rows.iter().map(|(_, figures)| f(figures)).collect();
    row(
        &format!("a values change over {pools} pools"),
        rows.iter().map(|(label, _)| label.to_string()).collect(),
    );
    row("wall time to Complete, every pool Ready", cell(&|f| secs(f.wall)));
    row("controller CPU", cell(&|f| format!("{:.1} s", f.cpu)));
    row("controller writes", cell(&|f| f.writes.to_string()));
    row("controller reconciles", cell(&|f| f.reconciles.to_string()));
    row(
        "controller resident as the change began",
        cell(&|f| format!("{:.1} MiB", f.resident_at_start_kib as f64 / 1024.0)),
    );
    row(
        "controller peak RSS (goal: at most 100 MiB)",
        cell(&|f| format!("{:.1} MiB", f.peak_rss_kib as f64 / 1024.0)),
    );
    row("most pools updating at once", cell(&|f| f.most_updating.to_string()));
    row("mean time from a pool's write to done", cell(&|f| secs(f.mean_under_way)));
    row("queries Prometheus answered", cell(&|f| f.queries.to_string()));
    row("queries per second", cell(&|f| format!("{:.1}", f.queries as f64 / f.wall.as_secs_f64())));
    row("stand-in status patches", cell(&|f| f.stand_in_patches.to_string()));
    if let [(_, all), (_, progressive), (_, per_pool), (_, by_site)] = rows {
        println!(
            "controller CPU, Progressive / AllAtOnce: {:.2}x (goal: at most 2x)",
            progressive.cpu / all.cpu
        );
        let added = |f: &Figures| f.mean_under_way.as_secs_f64() - progressive.mean_under_way.as_secs_f64();
        println!(
            "a check adds to each pool's time under way: {:.1} s asked per pool, {:.1} s asked by site; \
             queries: {} per pool, {} by site ({:.0}x fewer)",
            added(per_pool),
            added(by_site),
            per_pool.queries,
            by_site.queries,
            per_pool.queries as f64 / by_site.queries.max(1) as f64
        );
    }
    for (label, figures) in rows {
        let series: Vec<String> = figures.writes_by_series.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!("{label} writes: {}", series.join(", "));
    }
}
