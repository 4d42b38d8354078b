//! `make soak SEED=… DURATION=…`: random faults, drawn from a seed, while
//! the invariant checker (`nodepool_fanout::check`) judges every version
//! of every HelmRelease and application the API server records. On the
//! local control plane, with the real controller, helm-controller and
//! kwok nodes: four applications (Progressive with `onFailure: Halt`,
//! Progressive with `onFailure: Rollback`, AllAtOnce, and Progressive
//! with a step that needs approval) over pools of one node each.
//!
//! When the faults stop, every part of the control plane runs again and
//! every application gets a good revision; each must then settle
//! (liveness: Complete, Ready, every pool at its revision, no release
//! being deleted) within `SETTLE_WITHIN`. The controller's memory is read
//! from its metrics after each fault, against the chart's limit.
//!
//! It prints the seed first, a line per fault, then the checker's summary,
//! and fails when any invariant was broken: the same seed replays the
//! same schedule of faults (the timing of the cluster is its own).
//!
//! With `STOP_AT_FIRST=1` (the mutation check, `make mutation-check`) the
//! faults stop at the first violation, which is the run's answer, and its
//! time from the first fault is printed.
//!
//! Under `make test` (no `SEED` at all), a fixed seed and a random one
//! run side by side, each for `DURATION` (90 s unless given); `make soak`
//! with `SEED` empty runs one random seed, and `SEED=41,659812876` runs
//! those two side by side, as the `make test` that drew them did.
//!
//! With `SHARDS=2` the controller runs as two instances, each serving its
//! shard by `--watch-label-selector` on `sharding.fluxcd.io/key`, and
//! half of the controller kills become an application moved to the other
//! shard: the invariants are judged across both, as one fleet.

#[path = "../support/mod.rs"]
#[allow(dead_code, unused_imports)] // the soak uses a part of the shared helpers
mod support;

mod faults;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_xorshift::XorShiftRng;

use faults::World;
use nodepool_fanout::check::{answered, liveness, Invariant, Summary};
use serde_json::Value;

/// The seed every `make test` runs, besides a random one.
const FIXED_SEED: u64 = 41;
const DEFAULT_DURATION: Duration = Duration::from_secs(90);
/// After the faults stop (and a good revision is written), how long every
/// application has to settle: Complete, Ready, every pool at its revision.
/// Above three of Helm's waits (`faults::HELM_TIMEOUT`): an install the
/// faults left hanging times out, its revision halts, the halt is
/// requested again and the next install runs, with room to spare.
const SETTLE_WITHIN: Duration = Duration::from_secs(240);
/// The controller's memory limit in the chart (`resources.limits.memory`).
const MEMORY_LIMIT: u64 = 256 * 1024 * 1024;

fn main() -> ExitCode {
    // Under `cargo test` the harness's arguments (`--test-threads`) come
    // too: they say nothing to the soak.
    let duration = match std::env::var("DURATION") {
        Ok(text) => match humantime::parse_duration(&text) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("soak: DURATION={text} is no duration ({e}): say e.g. 10m");
                return ExitCode::from(2);
            }
        },
        Err(_) => DEFAULT_DURATION,
    };
    let seeds = match std::env::var("SEED") {
        // `make soak` with no SEED: one random seed.
        Ok(text) if text.is_empty() => vec![random_seed()],
        // Seeds apart by commas run side by side, as `make test` runs its
        // two: they share the plane's restarts, so a pair replays as a pair.
        Ok(text) => match text.split(',').map(|s| s.trim().parse::<u64>()).collect() {
            Ok(seeds) => seeds,
            Err(e) => {
                eprintln!("soak: SEED={text} is no number, nor numbers apart by commas ({e})");
                return ExitCode::from(2);
            }
        },
        Err(_) => vec![FIXED_SEED, random_seed()],
    };
    let shards = match std::env::var("SHARDS").as_deref() {
        Err(_) | Ok("" | "1") => 1,
        Ok("2") => 2,
        Ok(text) => {
            eprintln!("soak: SHARDS={text}: say 1 (one instance) or 2 (two shards)");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let broken: u64 = runtime.block_on(async {
        let runs = seeds.iter().map(|seed| soak(*seed, duration, shards));
        futures::future::join_all(runs).await.into_iter().sum()
    });
    match broken {
        0 => ExitCode::SUCCESS,
        _ => {
            let all = seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            eprintln!("soak: {broken} violations; replay them with make soak SEED={all} DURATION=…");
            ExitCode::FAILURE
        }
    }
}

/// A seed from the clock, printed before it is used.
fn random_seed() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    now.as_nanos() as u64 % 1_000_000_007
}

/// One soak: the world built, faults for `duration`, the fleet left to
/// settle, then the checker's verdict; how many violations it found.
async fn soak(seed: u64, duration: Duration, shards: usize) -> u64 {
    let over = match shards {
        1 => String::new(),
        n => format!(", over {n} shards"),
    };
    println!("soak: seed {seed}, faults for {}{over}", humantime::format_duration(duration));
    let rng = XorShiftRng::seed_from_u64(seed);
    let mut world = World::new(seed, rng, shards).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let client = world.env.client.clone();
    let namespace = world.env.namespace.clone();
    let tag = format!("seed {seed}");
    // When the first violation came, in milliseconds from the first
    // fault (0: none yet).
    let first = Arc::new(AtomicU64::new(0));
    let started = tokio::time::Instant::now();
    let checker = tokio::spawn({
        let first = Arc::clone(&first);
        async move {
            let stop = async {
                let _ = stopped.await;
            };
            nodepool_fanout::check::watch::run(client, Some(&namespace), stop, |v| {
                if v.starts_with("VIOLATION") {
                    let at = started.elapsed().as_millis().max(1) as u64;
                    let _ = first.compare_exchange(0, at, Ordering::SeqCst, Ordering::SeqCst);
                }
                println!("[{tag}] {v}")
            })
            .await
        }
    });
    world.install().await;
    let stop_at_first = std::env::var("STOP_AT_FIRST").is_ok_and(|v| v == "1");
    let mut memory = Memory::default();
    let mut foreign = Foreign::default();
    let mut answered = Answered::default();
    while started.elapsed() < duration {
        if stop_at_first && first.load(Ordering::SeqCst) > 0 {
            break;
        }
        let fault = world.draw();
        println!("[seed {seed}] {:>6.1} s  {fault}", started.elapsed().as_secs_f64());
        world.inject(&fault).await;
        world.pause().await;
        memory.sample(world.controller_memory().await);
        foreign.judge(seed, world.foreign_touched().await, &first, started);
        answered.judge(seed, &world.applications().await, &world.query_api.answers(), &first, started);
    }
    let caught = first.load(Ordering::SeqCst);
    if stop_at_first && caught > 0 {
        // The mutation check's run: the time to the first violation is
        // its answer, and the fleet is not left to settle.
        println!("[seed {seed}] first violation {:.1} s after the faults began", caught as f64 / 1000.0);
        let _ = stop.send(());
        let mut summary = checker.await.ok().and_then(Result::ok).unwrap_or_default();
        foreign.add_to(&mut summary);
        println!("[seed {seed}] {} faults\n{summary}", world.injected());
        world.finish().await;
        return summary.violations.values().sum::<u64>().max(1);
    }
    world.heal().await;
    let healed = tokio::time::Instant::now();
    let unsettled = settle(&mut world, seed).await;
    foreign.judge(seed, world.foreign_touched().await, &first, started);
    answered.judge(seed, &world.applications().await, &world.query_api.answers(), &first, started);
    println!("[seed {seed}] settled in {:.0} s", healed.elapsed().as_secs_f64());
    memory.sample(world.controller_memory().await);
    let _ = stop.send(());
    let mut summary = match checker.await {
        Ok(Ok(summary)) => summary,
        Ok(Err(e)) => panic!("[seed {seed}] the checker stopped: {e}"),
        Err(e) => panic!("[seed {seed}] the checker panicked: {e}"),
    };
    let checks: u64 = summary.checks.values().sum();
    assert!(checks > 0, "[seed {seed}] the checker judged nothing: {summary}");
    // Judged here, where the faults are known to have stopped.
    *summary.checks.entry(Invariant::Liveness).or_default() += world.applications().await.len() as u64;
    *summary.violations.entry(Invariant::Liveness).or_default() += unsettled;
    foreign.add_to(&mut summary);
    answered.add_to(&mut summary);
    assert!(
        answered.checks > 0,
        "[seed {seed}] no pool of {} was judged done on its checks",
        faults::CHECKED
    );
    *summary.checks.entry(Invariant::Bounded).or_default() += memory.samples;
    *summary.violations.entry(Invariant::Bounded).or_default() += memory.over;
    assert!(memory.samples > 0, "[seed {seed}] the controller's memory was never read");
    println!(
        "[seed {seed}] {} faults; controller memory at most {} MiB (limit {} MiB)\n{}{summary}",
        world.injected(),
        memory.peak / (1024 * 1024),
        MEMORY_LIMIT / (1024 * 1024),
        world.injected_by_kind()
    );
    world.finish().await;
    summary.violations.values().sum()
}

/// The controller's resident memory, sampled after each fault.
#[derive(Debug, Default)]
struct Memory {
    samples: u64,
    peak: u64,
    over: u64,
}

impl Memory {
    fn sample(&mut self, bytes: Option<u64>) {
        let Some(bytes) = bytes else { return };
        self.samples += 1;
        self.peak = self.peak.max(bytes);
        if bytes > MEMORY_LIMIT {
            self.over += 1;
            println!(
                "VIOLATION bounded (docs/concepts.md#status): the controller holds {bytes} bytes, over its limit"
            );
        }
    }
}

/// The foreign release, judged after each fault: nothing of ours may
/// delete, rewrite or write it (ownership).
#[derive(Debug, Default)]
struct Foreign {
    checks: u64,
    broken: bool,
}

impl Foreign {
    fn judge(
        &mut self,
        seed: u64,
        touched: Option<String>,
        first: &AtomicU64,
        started: tokio::time::Instant,
    ) {
        self.checks += 1;
        let Some(what) = touched.filter(|_| !self.broken) else {
            return;
        };
        self.broken = true;
        let at = started.elapsed().as_millis().max(1) as u64;
        let _ = first.compare_exchange(0, at, Ordering::SeqCst, Ordering::SeqCst);
        println!("[seed {seed}] VIOLATION ownership (docs/isolation.md#bad-input-and-ownership): {what}");
    }

    fn add_to(&self, summary: &mut Summary) {
        *summary.checks.entry(Invariant::Ownership).or_default() += self.checks;
        *summary.violations.entry(Invariant::Ownership).or_default() += u64::from(self.broken);
    }
}

/// The checked application's pools read done, judged after each fault
/// against the answers the soak's query API gave: none is done on a check
/// that was not answered at or after its soak's end.
#[derive(Debug, Default)]
struct Answered {
    checks: u64,
    violations: u64,
    /// What was reported already: a pool stays done across faults.
    reported: std::collections::BTreeSet<String>,
    /// When each application's rollout (revision, number) was last seen
    /// under way, not `Complete`.
    under_way: std::collections::BTreeMap<(String, String, Option<i64>), k8s_openapi::jiff::Timestamp>,
}

impl Answered {
    fn judge(
        &mut self,
        seed: u64,
        applications: &[(Value, Vec<Value>)],
        answers: &answered::Answers,
        first: &AtomicU64,
        started: tokio::time::Instant,
    ) {
        let now = k8s_openapi::jiff::Timestamp::now();
        for (app, releases) in applications {
            let field = |pointer: &str| app.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
            let rollout = (
                field("/metadata/name").to_string(),
                field("/status/rollout/revision").to_string(),
                app.pointer("/status/rollout/number").and_then(Value::as_i64),
            );
            if !answered::completed(app) {
                self.under_way.insert(rollout.clone(), now);
            }
            let until = self.under_way.get(&rollout).copied();
            let (judged, found) = answered::judge(app, releases, answers, until);
            self.checks += judged;
            for violation in found.into_iter().filter(|v| self.reported.insert(v.message.clone())) {
                self.violations += 1;
                let at = started.elapsed().as_millis().max(1) as u64;
                let _ = first.compare_exchange(0, at, Ordering::SeqCst, Ordering::SeqCst);
                println!("[seed {seed}] {violation}");
            }
        }
    }

    fn add_to(&self, summary: &mut Summary) {
        *summary.checks.entry(Invariant::ChecksAnswered).or_default() += self.checks;
        *summary.violations.entry(Invariant::ChecksAnswered).or_default() += self.violations;
    }
}

/// Waits until every application settles, or `SETTLE_WITHIN` passes;
/// how many did not.
async fn settle(world: &mut World, seed: u64) -> u64 {
    let deadline = tokio::time::Instant::now() + SETTLE_WITHIN;
    loop {
        world.approve_what_awaits().await;
        for app in world.request_what_halted().await {
            println!("[seed {seed}] {app} after the faults: a reconcile requested, as a person would");
        }
        let apps = world.applications().await;
        let waiting: Vec<(&Value, String)> = apps
            .iter()
            .filter_map(|(app, releases)| liveness::unsettled(app, releases).map(|why| (app, why)))
            .collect();
        if waiting.is_empty() && !apps.is_empty() {
            return 0;
        }
        if tokio::time::Instant::now() >= deadline {
            for (app, why) in &waiting {
                println!("[seed {seed}] {}", liveness::violation(app, why, SETTLE_WITHIN));
            }
            return waiting.len().max(1) as u64;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
