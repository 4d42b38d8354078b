//! `make bench-render`: what planning one application over 8 pools costs,
//! for specs of the same size that render very differently. Needs no
//! cluster: `plan` is pure.
//!
//! Cases, each planned in a fresh state:
//! - the hostile spec of the review: a 253-character name and one value
//!   holding `{{app.name}}` 20,000 times (240 KB that rendered to 5 MB a
//!   pool, 40 MB in all, before rendering was bounded);
//! - the largest template that is accepted: 256 tags in 256 KiB, the worst
//!   case for handlebars' parser, whose cost grows with tags times length;
//! - a template that renders past the 256 KiB string limit (64 tags over a
//!   100 KB pool annotation);
//! - 240 KB of plain values, no templates: the baseline.
//!
//! For each it prints the time to plan (best of 3), the peak resident
//! memory above the process's before the case, and what the plan decided.
//!
//! Then it observes and plans one application over 10,000 pools as the
//! controller does, from watch caches filled in memory: the first fan-out
//! (nothing written yet); a resync with every release in place and Ready,
//! from scratch; the same resync with the memo that plan left, as the
//! controller replans at rest; and with one release changed since (a new
//! resourceVersion, as a Ready condition brings). For each, the time to
//! observe and to plan, and the peak resident memory it added.
//!
//! First of all, the worst application accepted: releases of incompressible values
//! up to the application's budget (`MAX_APPLICATION_BYTES`), planned,
//! cached as the watch cache keeps them, and planned again; with the
//! process's peak resident memory.
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodepool_fanout::api::NodePoolApplication;
use nodepool_fanout::pools::Pool;
use nodepool_fanout::reconcile::observe::CachedRelease;
use nodepool_fanout::reconcile::packed::PackedJson;
use nodepool_fanout::reconcile::plan::{self, ListedReleases, ObservedRelease, Outcome, PlanInput};
use nodepool_fanout::reconcile::release::build::MAX_APPLICATION_BYTES;
use serde_json::{json, Value};

#[path = "render/at_scale.rs"]
mod at_scale;

const POOLS: usize = 8;

fn main() {
    // First, while the process is fresh: its peak is this case's alone.
    worst_accepted();
    println!();
    let cases: Vec<(&str, Value, usize)> = vec![
        ("hostile: {{app.name}} x 20,000", json!({ "blowup": "{{app.name}}".repeat(20_000) }), 0),
        (
            "largest accepted template",
            json!({ "config": format!("{}{}", "{{pool.name}} ".repeat(256), "x".repeat(256 * 1024 - 256 * 14)) }),
            0,
        ),
        (
            "renders past the string limit",
            json!({ "notes": "{{pool.annotations.notes}}".repeat(64) }),
            100_000,
        ),
        ("240 KB of plain values", json!({ "plain": "x".repeat(240_000) }), 0),
    ];
    println!("planning one application over {POOLS} pools (release build, best of 3)");
    println!();
    println!(
        "{:<34} {:>10} {:>12} {:>14} {:>16} {:>10}",
        "case", "spec", "plan time", "peak RSS +", "releases written", "pools failed"
    );
    for (label, values, annotation) in cases {
        let app = application(values);
        let pools = pools(annotation);
        let pools: Vec<&Pool> = pools.iter().collect();
        let spec_bytes = serde_json::to_vec(&app.spec).map(|v| v.len()).unwrap_or_default();
        reset_peak_rss();
        let before = peak_rss_kib();
        let mut best = Duration::MAX;
        let mut outcome = (0, 0, String::new());
        for _ in 0..3 {
            let start = Instant::now();
            let planned = plan::plan(&input(&app, &pools, Vec::new()));
            best = best.min(start.elapsed());
            let failed: Vec<&Outcome> = planned
                .pools
                .iter()
                .map(|p| &p.outcome)
                .filter(|o| matches!(o, Outcome::Failed { .. }))
                .collect();
            let first = match failed.first() {
                Some(Outcome::Failed { field, message }) => format!("{field}: {}", cut(message, 60)),
                _ => String::new(),
            };
            outcome = (planned.apply.len(), failed.len(), first);
        }
        let peak = peak_rss_kib().saturating_sub(before);
        println!(
            "{label:<34} {:>7} KB {:>9.1} ms {:>10} MiB {:>16} {:>10}",
            spec_bytes / 1000,
            best.as_secs_f64() * 1000.0,
            peak / 1024,
            outcome.0,
            outcome.1
        );
        if !outcome.2.is_empty() {
            println!("{:<34} first failure: {}", "", outcome.2);
        }
    }
    println!();
    at_scale::at_scale(10_000);
}

/// An application of the fixture chart over the pools of region east,
/// with these values.
fn named_application(name: &str, values: Value) -> NodePoolApplication {
    serde_json::from_value(json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": name, "namespace": "edge", "uid": "uid-1", "generation": 1 },
        "spec": {
            "pools": { "selector": { "matchLabels": { "region": "east" } } },
            "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0",
                "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } },
            "interval": "10m",
            "values": values
        }
    }))
    .expect("the benchmark's application is valid")
}

/// An application as large as one may be: 200 KiB of random text per
/// pool (LZ4 cannot shrink it), as many pools as fit the budget.
fn worst_accepted() {
    const PER_POOL: usize = 200 * 1024;
    let pools = MAX_APPLICATION_BYTES / (PER_POOL + 4 * 1024);
    let mut rng = fastrand::Rng::with_seed(7);
    let blob: String = (0..PER_POOL).map(|_| rng.alphanumeric()).collect();
    // Each pool's differs, as templated values would.
    let app = named_application("largest", json!({ "blob": format!("{{{{pool.name}}}}{blob}") }));
    let pools: Vec<Pool> = (0..pools)
        .map(|i| Pool {
            name: format!("site-{i:05}"),
            labels: nodepool_fanout::pools::Labels::from_iter([("region".to_string(), "east".to_string())]),
            ..Pool::named(format!("site-{i:05}"))
        })
        .collect();
    let pools: Vec<&Pool> = pools.iter().collect();
    println!(
        "the largest application accepted: {} pools x {} KiB of incompressible values ({} MiB budget)",
        pools.len(),
        PER_POOL / 1024,
        MAX_APPLICATION_BYTES / (1024 * 1024)
    );
    println!();
    println!(
        "{:<34} {:>12} {:>14} {:>16} {:>14}",
        "case", "plan time", "peak RSS +", "releases written", "cache holds"
    );
    reset_peak_rss();
    let before = peak_rss_kib();
    let start = Instant::now();
    let first = plan::plan(&input(&app, &pools, Vec::new()));
    let took = start.elapsed();
    let peak = peak_rss_kib().saturating_sub(before);
    // The process's own peak, before the next case resets the mark.
    let process_peak = proc_status_kib("VmHWM:");
    assert!(first.blocked.is_none(), "within the budget: {:?}", first.blocked);
    row("first fan-out", took, peak, first.apply.len(), 0);
    // The releases as the watch cache keeps them, and as it kept them
    // before large values were kept as a digest.
    let mut whole = 0;
    let owned: Vec<ObservedRelease> = first
        .apply
        .iter()
        .enumerate()
        .map(|(i, desired)| {
            let mut live = desired.object();
            live["metadata"]["uid"] = json!(format!("uid-{i:08}"));
            live["metadata"]["creationTimestamp"] = json!("2026-11-23T10:00:00Z");
            live["metadata"]["generation"] = json!(1);
            live["status"] = json!({ "observedGeneration": 1, "conditions": [{
                "type": "Ready", "status": "True", "reason": "InstallSucceeded",
                "message": "Helm install succeeded", "observedGeneration": 1
            }]});
            whole += PackedJson::from_value(&live).packed_len();
            let cached = CachedRelease::from_object(serde_json::from_value(live).expect("a HelmRelease"));
            ObservedRelease::clone(&cached.observed.expect("a release of ours"))
        })
        .collect();
    drop(first);
    let kept: usize = owned.iter().filter_map(|o| o.live.as_ref()).map(PackedJson::packed_len).sum();
    reset_peak_rss();
    let before = peak_rss_kib();
    let start = Instant::now();
    let resync = plan::plan(&input(&app, &pools, owned));
    let took = start.elapsed();
    let peak = peak_rss_kib().saturating_sub(before);
    row("resync, every release in place", took, peak, resync.apply.len(), kept as u64 / 1024);
    println!(
        "{:<34} {:>12} {:>14} {:>16} {:>14}",
        "(cache with values kept whole)",
        "",
        "",
        "",
        format!("{:.1} MiB", whole as f64 / (1024.0 * 1024.0))
    );
    let process_peak = process_peak.max(proc_status_kib("VmHWM:"));
    println!("process peak resident memory: {:.1} MiB", process_peak as f64 / 1024.0);
}

/// The 8-pool cases' application: the longest name, and a release name
/// rendered per pool.
fn application(values: Value) -> NodePoolApplication {
    let mut app = named_application(&"a".repeat(253), values);
    app.spec.release_name = Some("r-{{pool.name}}".into());
    app
}

fn pools(annotation: usize) -> Vec<Pool> {
    (0..POOLS)
        .map(|i| Pool {
            name: format!("pool-{i}"),
            labels: nodepool_fanout::pools::Labels::from_iter([("region".to_string(), "east".to_string())]),
            annotations: [("notes".to_string(), "n".repeat(annotation))].into_iter().collect(),
            ..Pool::named(format!("pool-{i}"))
        })
        .collect()
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Linux: writing 5 to clear_refs resets the peak resident set size.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss_kib() -> u64 {
    proc_status_kib("VmHWM:")
}

/// A size (KiB) from /proc/self/status.
fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// No other releases in the namespace.
static NO_OTHERS: ListedReleases = ListedReleases {
    names: std::collections::BTreeSet::new(),
    taken: std::collections::BTreeMap::new(),
};

/// What `plan` reads: the application over `pools`, with the releases
/// observed, and nothing else (no chart, no nodes, no other releases).
fn input<'a>(
    app: &'a NodePoolApplication,
    pools: &'a [&'a Pool],
    owned: Vec<ObservedRelease>,
) -> PlanInput<'a> {
    PlanInput {
        history: None,
        nodes: None,
        app,
        pools,
        owned: owned.into_iter().map(std::sync::Arc::new).collect(),
        others: &NO_OTHERS,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
        chart_ref: None,
        chart: None,
        hold: None,
        unserved: None,
        clock_since: None,
        memo: None,
        // Every pool built and written, as a fleet's resync builds them.
        first_install_alone: false,
        analysis: None,
        rendering_changes: Default::default(),
    }
}

fn row(label: &str, took: Duration, peak_kib: u64, written: usize, input_kib: u64) {
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    println!(
        "{label:<34} {:>9.0} ms {:>14} {:>16} {:>14}",
        took.as_secs_f64() * 1000.0,
        mib(peak_kib),
        written,
        mib(input_kib)
    );
}
