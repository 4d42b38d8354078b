//! `make bench-scale POOLS=N` (10,000 by default): the controller alone at
//! scale. Its N HelmReleases are suspended, so only the controller and the
//! API server work. Prints, side by side in one run on one control plane:
//! the time the controller takes to write N HelmReleases against a raw
//! parallel create, a raw parallel server-side apply, a raw create
//! after each release's claim Lease (the two creates the controller makes
//! for a new release), and the same with a watch cache of the releases
//! written (as the controller keeps one), of the very same objects (with
//! the controller stopped; their owner references name a copy of the
//! application in the raw namespace), and what the plane did during each
//! ([`support::plane_meter`]). The controller writes twice, first and
//! last, and the floor it is held to (the last) second and second to
//! last, so that the plane's drift over the run weighs on both alike.
//! Then the controller's peak RSS and CPU seconds;
//! the application's status size; its reconciles and writes during 60 s at
//! rest (two resyncs); and, after a restart with the resync far away and
//! 100 further applications present, the reconciles one NodePool status
//! change and one NodePool label change cause, and the time from a new
//! NodePool's create to its release ([`reaction`]). Then two shards over
//! 2 × N pools and four over 4 × N/2, one controller each ([`shards`]);
//! then two and four shards over N/2 sites that are clusters each, a
//! namespace a shard ([`site_shards`]).
#[path = "../tests/support/mod.rs"]
#[allow(dead_code, unused_imports)] // this bench uses a part of the shared helpers
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::Api;
use nodepool_fanout::api::NodePoolApplication;
use serde_json::json;
use support::apps::{app_named, apply_app};
use support::bench::{
    clean_up, controller_flags, count, create_pools, let_go, process_figures, secs, suspended_fleet, wait,
    writes, PARALLEL, TIMEOUT,
};
use support::plane_meter;
use support::{ensure_crd, helmrelease_resource, nodepool_resource, RunningController, TestEnv};

#[path = "scale/raw.rs"]
mod raw;
use raw::Raw;
#[path = "scale/reaction.rs"]
mod reaction;
#[path = "scale/shards.rs"]
mod shards;
#[path = "scale/site_shards.rs"]
mod site_shards;

const SMALL_APPS: usize = 100;
/// The floors, in the order written: the one the controller is held to
/// first and last, the others between.
const FLOORS: [Raw; 5] = [
    Raw::ClaimThenCreateWatched,
    Raw::Create,
    Raw::Apply,
    Raw::ClaimThenCreate,
    Raw::ClaimThenCreateWatched,
];
/// The columns of the write's tables, in the order written: the
/// controller, each of [`FLOORS`], the controller again.
const HEADS: [&str; 7] = [
    "controller",
    "+ its watch",
    "raw create",
    "raw apply",
    "claim+create",
    "+ its watch",
    "controller",
];
/// No reconcile for this long: the controller is at rest.
const QUIET: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() {
    let pools: usize = std::env::var("POOLS").ok().and_then(|p| p.parse().ok()).unwrap_or(10_000);
    assert!(pools >= SMALL_APPS, "POOLS must be at least {SMALL_APPS}");
    println!("scale benchmark: {pools} pools, suspended HelmReleases, {PARALLEL} writes in flight");
    if std::env::var_os("SITE_SHARDS_ONLY").is_some() {
        println!("(SITE_SHARDS_ONLY: the shards a namespace each alone)");
        return site_shards_out(pools).await;
    }
    if std::env::var_os("SHARDS_ONLY").is_some() {
        println!("(SHARDS_ONLY: the shards alone)");
        return scale_out(pools).await;
    }
    let env = TestEnv::new("scale").await;
    ensure_crd(&env.client).await;
    let pool_api: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    let names: Vec<String> = (0..pools).map(|i| env.pool_name(&format!("p{i}"))).collect();
    let started = Instant::now();
    create_pools(&pool_api, &names, &env.prefix, &["r"]).await;
    println!("created {pools} NodePools in {}", secs(started.elapsed()));

    let controller = RunningController::start_with(&env.namespace, &controller_flags("30s"));
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let fleet = suspended_fleet(&env, json!({}));
    let first = controller_write(&env, &fleet, &controller, pools, "1-controller").await;
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let status = wait("the status to count every pool", &controller, || async {
        let app = apps.get("fleet").await.ok()?;
        let status = app.status?;
        (status.selected_pools as usize == pools).then_some(status)
    })
    .await;
    let status_bytes = serde_json::to_vec(&status).expect("status serializes").len();
    println!("status {status_bytes} B");

    // At rest: two resyncs replan every pool and must write nothing. Not
    // before helm-controller has looked at every release: even a suspended
    // one gets its finalizer, then its status.observedGeneration, each a
    // change planning reads, and at thousands of releases its queue takes
    // minutes to drain (the reconciles "at rest" measured before it did
    // were its stamps coming in, `woken_by` HelmRelease).
    let observed = support::bench::helm_controller_idle(&env.client).await;
    println!("helm-controller observed every release {} after the write", secs(observed));
    let quiet_from = controller.quiet(QUIET).await;
    let writes_before = writes(&controller).await;
    let wakes_before = controller.wakes().await;
    let at_rest_before = controller.counter("nodepool_fanout_reconciles_at_rest_total", |_| true).await;
    let (_, cpu_before_rest) = process_figures(controller.pid());
    tokio::time::sleep(Duration::from_secs(60)).await;
    let (_, cpu_after_rest) = process_figures(controller.pid());
    let rest_reconciles = controller.reconciles().await - quiet_from;
    let rest_not_planned =
        controller.counter("nodepool_fanout_reconciles_at_rest_total", |_| true).await - at_rest_before;
    let rest_wakes = support::bench::grown(&wakes_before, controller.wakes().await);
    let rest_writes = writes(&controller).await - writes_before;
    let (peak_rss, cpu) = process_figures(controller.pid());
    drop(controller);

    // With the controller stopped: it would otherwise cache the raw
    // clients' releases too, and its figures above would not be its own.
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    let app = apps.get("fleet").await.expect("the application");
    let floors = raw::raw_writes(&app, &releases, &leases, pools, &FLOORS).await;
    println!(
        "raw parallel writes of the same {pools} objects, in turn: {}",
        (FLOORS.iter().zip(&floors))
            .map(|(floor, (took, _))| format!("{floor:?} {}", secs(*took)))
            .collect::<Vec<_>>()
            .join(", ")
    );

    // The controller's write once more, after the floors, in a namespace
    // of its own: with the first, the two stand around the two writes of
    // the floor it is held to (controller, floor, the other floors,
    // floor, controller), so that the plane's drift over the run weighs
    // on both sides alike.
    let again = TestEnv::new("scale-again").await;
    let second_controller = RunningController::start_with(&again.namespace, &controller_flags("30s"));
    let mut fleet_again = fleet.clone();
    fleet_again["metadata"]["namespace"] = json!(again.namespace);
    let second = controller_write(&again, &fleet_again, &second_controller, pools, "7-controller").await;
    drop(second_controller);
    let_go(&again.client, &again.namespace).await;
    again.cleanup().await;

    // Events, with the resync far away so that every reconcile counted has
    // a cause: a fresh instance on the same objects, and a hundred more
    // applications of one pool each.
    let controller = RunningController::start_with(&env.namespace, &controller_flags("1h"));
    for (i, pool) in names.iter().take(SMALL_APPS).enumerate() {
        let small = app_named(
            &format!("site-{i}"),
            &env.namespace,
            "ingress-gateway",
            "1.0.0",
            json!({ "pools": { "names": [pool] }, "helmRelease": { "suspend": true } }),
        );
        apply_app(&env, &small).await.expect("apply a small application");
    }
    wait("the small applications to write their releases", &controller, || async {
        (count(&releases).await == pools + SMALL_APPS).then_some(())
    })
    .await;
    let params = PatchParams::default();
    let before = controller.quiet(QUIET).await;
    let churn = json!({ "status": { "readyNodeNum": 3, "unreadyNodeNum": 1 } });
    pool_api
        .patch_status(&names[5], &params, &Patch::Merge(&churn))
        .await
        .expect("patch pool status");
    let after_status = controller.quiet(QUIET).await;
    let relabel = json!({ "metadata": { "labels": { "tier": "gold" } } });
    pool_api
        .patch(&names[5], &params, &Patch::Merge(&relabel))
        .await
        .expect("label a pool");
    let after_label = controller.quiet(QUIET).await;
    let (new_at_rest, new_window_open) =
        reaction::new_pools(&env, &controller, &pool_api, &releases, "fleet").await;
    let (events_peak_rss, _) = process_figures(controller.pid());

    println!();
    let took: Vec<Duration> = std::iter::once(first.took)
        .chain(floors.iter().map(|(took, _)| *took))
        .chain([second.took])
        .collect();
    let row7 = |label: &str, cells: Vec<String>| plane_meter::print_row(label, &cells);
    row7("in the order written", HEADS.map(String::from).to_vec());
    row7(
        &format!("write {pools} HelmReleases ({PARALLEL} in flight)"),
        took.iter().copied().map(secs).collect(),
    );
    let controller_mean = (first.took + second.took) / 2;
    let ratio = |a: Duration, b: Duration| format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64());
    let mut ratios: Vec<String> = vec![String::new()];
    ratios.extend(floors.iter().map(|(took, _)| ratio(controller_mean, *took)));
    ratios.push(String::new());
    row7("the controller's mean / each", ratios);
    let (watched_first, watched_second) = (floors[0].0, floors[FLOORS.len() - 1].0);
    let row = |label: &str, value: String| println!("{label:<52} {value:>12}");
    println!(
        "the controller held to the raw client that makes its requests (a claim and a create a \
         release) and keeps its watch, each write beside that floor's:"
    );
    row("  its first write / the floor's first", ratio(first.took, watched_first));
    row("  its second write / the floor's second", ratio(second.took, watched_second));
    row(
        "  the two / the two (goal: at most 1.05x)",
        ratio(first.took + second.took, watched_first + watched_second),
    );
    println!(
        "(a raw create makes one request and keeps no watch; the claims and the watch are what a \
         controller that never lets two applications drive one Helm release, and knows each \
         release's health, cannot shed. The two pairs stand in the order controller, floor, \
         floor, controller, so that the plane's drift over a run weighs on both sides alike)"
    );
    println!();
    for (which, write) in [("first", &first), ("second", &second)] {
        println!("the controller's own requests during its {which} write: {}", write.requests.join(", "));
    }
    let mut used = vec![first.used];
    used.extend(floors.into_iter().map(|(_, used)| used));
    used.push(second.used);
    plane_meter::print_table(&HEADS, &used);
    println!();
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    row("peak RSS (fan-out and 60 s at rest)", mib(peak_rss));
    row(&format!("peak RSS (restarted, {} applications)", SMALL_APPS + 1), mib(events_peak_rss));
    row("CPU time (fan-out and 60 s at rest)", format!("{cpu:.1} s"));
    row("status size", format!("{:.1} KiB", status_bytes as f64 / 1024.0));
    row("reconciles during 60 s at rest (resync 30 s; goal 2)", rest_reconciles.to_string());
    row("  woken by", rest_wakes.join(", "));
    row("  of them ended at rest, not planned", rest_not_planned.to_string());
    row("CPU time during 60 s at rest", format!("{:.2} s", cpu_after_rest - cpu_before_rest));
    row("writes during 60 s at rest", rest_writes.to_string());
    row(
        &format!("reconciles per NodePool status change ({} apps)", SMALL_APPS + 1),
        (after_status - before).to_string(),
    );
    row(
        &format!("reconciles per NodePool label change ({} apps)", SMALL_APPS + 1),
        (after_label - after_status).to_string(),
    );
    row(
        &format!("new pool -> its release written, at rest ({} apps)", SMALL_APPS + 1),
        reaction::ms(new_at_rest),
    );
    row("new pool -> its release written, wake window open", reaction::ms(new_window_open));
    println!("(controller flags: {}; --resync 1h for the events)", controller_flags("30s").join(" "));

    // Not measured: the cluster as it was, for the next run.
    drop(controller);
    clean_up(env).await;

    if std::env::var_os("SKIP_SHARDS").is_some() {
        return println!("(SKIP_SHARDS: no shards)");
    }
    scale_out(pools).await;
}

/// One write of the controller's: what it took, what the plane did
/// meanwhile, and the controller's own requests.
struct ControllerWrite {
    took: Duration,
    used: Vec<(String, String)>,
    requests: Vec<String>,
}

/// Applies `fleet`, an application of `pools` pools, in `env`'s namespace,
/// served by `controller`, and times the controller's write of its
/// releases: from the apply to the last release's create answered.
/// Starts as each floor does: helm-controller idle, the plane quiet. The
/// API server's profile, if asked for, is named `profile`.
async fn controller_write(
    env: &TestEnv,
    fleet: &serde_json::Value,
    controller: &RunningController,
    pools: usize,
    profile: &str,
) -> ControllerWrite {
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    support::bench::helm_controller_idle(&env.client).await;
    let quiet = plane_meter::quiet(TIMEOUT).await;
    println!("(the controller: the plane quiet {} before its write)", secs(quiet));
    let before = plane_meter::read(&env.client, controller.pid()).await;
    let requests_before = support::bench::requests(controller).await;
    let profile = plane_meter::profile(&env.client, profile);
    let start = Instant::now();
    apply_app(env, fleet).await.expect("apply the application");
    // Followed by the controller's own count of its creates, which costs
    // the API server nothing: a list every 250 ms for the whole write was
    // a load on the plane the raw writes beside it did not bear. Then the
    // last creates' answers, by a list every 20 ms. The count is read
    // more often as the write nears its end: each read is work for the
    // controller that a raw writer does not bear, and a read every 20 ms
    // throughout was 2,800 of them over a write of 10,000; read every
    // 250 ms, the wait was a tenth of a 1,000-pool write.
    let creates = |l: &str| {
        l.contains("verb=\"create\"") && l.contains("resource=\"helmreleases.helm.toolkit.fluxcd.io\"")
    };
    let mut first_create = None;
    loop {
        let created = controller.counter("nodepool_fanout_api_requests_total", creates).await as usize;
        if created > 0 && first_create.is_none() {
            first_create = Some(start.elapsed());
        }
        if created >= pools {
            break;
        }
        assert!(start.elapsed() < TIMEOUT, "the controller's creates\n{}", controller.log_tail());
        tokio::time::sleep(next_read(created, pools, first_create.map(|f| start.elapsed() - f))).await;
    }
    while count(&releases).await < pools {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = start.elapsed();
    let used = plane_meter::read(&env.client, controller.pid()).await.since(&before);
    profile.finish().await;
    let requests = support::bench::grown(&requests_before, support::bench::requests(controller).await);
    println!(
        "controller wrote {pools} HelmReleases in {} (its first create {} after the application \
         was applied: the watch event, the first plan)",
        secs(took),
        reaction::ms(first_create.unwrap_or_default())
    );
    ControllerWrite { took, used, requests }
}

/// How long to wait before the next read of the controller's count of
/// its creates, `created` of `pools` after `writing` since its first: a
/// quarter of what is left at the pace so far, between 10 and 500 ms, so
/// that the end is seen within a few milliseconds by a few hundred reads.
fn next_read(created: usize, pools: usize, writing: Option<Duration>) -> Duration {
    let (floor, ceiling) = (Duration::from_millis(10), Duration::from_millis(500));
    match writing {
        Some(writing) if created > 0 => {
            let left = writing.mul_f64((pools - created) as f64 / created as f64);
            (left / 4).clamp(floor, ceiling)
        }
        _ => Duration::from_millis(20),
    }
}

/// Scale out: two shards over twice the pools, and four over as many;
/// then shards a namespace each.
async fn scale_out(pools: usize) {
    shards::shards(&["a", "b"], pools).await;
    shards::shards(&["a", "b", "c", "d"], pools / 2).await;
    site_shards_out(pools).await;
}

/// Shards a namespace each over sites that are clusters, N/2 a shard: two,
/// then four, so that a shard's figures beside one other and beside three
/// stand side by side.
async fn site_shards_out(pools: usize) {
    site_shards::site_shards(&["a", "b"], pools / 2).await;
    site_shards::site_shards(&["a", "b", "c", "d"], pools / 2).await;
}
