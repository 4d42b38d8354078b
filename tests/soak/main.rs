//! `make soak SEED=… DURATION=…`: random faults, drawn from a seed, while
//! the invariant checker (`nodepool_fanout::check`) judges every version
//! of every HelmRelease and application the API server records. On the
//! local control plane, with the real controller, helm-controller and
//! kwok nodes: three applications (Progressive with `onFailure: Halt`,
//! Progressive with `onFailure: Rollback`, AllAtOnce) over pools of one
//! node each.
//!
//! It prints the seed first, a line per fault, then the checker's summary,
//! and fails when any invariant was broken: the same seed replays the
//! same schedule of faults (the timing of the cluster is its own).
//!
//! Under `make test` (no `SEED` at all), a fixed seed and a random one
//! run side by side, each for `DURATION` (90 s unless given); `make soak`
//! with `SEED` empty runs one random seed.

#[path = "../support/mod.rs"]
#[allow(dead_code, unused_imports)] // the soak uses a part of the shared helpers
mod support;

mod faults;

use std::process::ExitCode;
use std::time::Duration;

use rand::SeedableRng;
use rand_xorshift::XorShiftRng;

use faults::World;

/// The seed every `make test` runs, besides a random one.
const FIXED_SEED: u64 = 41;
const DEFAULT_DURATION: Duration = Duration::from_secs(90);
/// After the faults stop, how long the checker keeps judging while the
/// fleet settles.
const SETTLE: Duration = Duration::from_secs(45);

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
        Ok(text) => match text.parse::<u64>() {
            Ok(seed) => vec![seed],
            Err(e) => {
                eprintln!("soak: SEED={text} is no number ({e})");
                return ExitCode::from(2);
            }
        },
        Err(_) => vec![FIXED_SEED, random_seed()],
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let broken: u64 = runtime.block_on(async {
        let runs = seeds.iter().map(|seed| soak(*seed, duration));
        futures::future::join_all(runs).await.into_iter().sum()
    });
    match broken {
        0 => ExitCode::SUCCESS,
        _ => {
            eprintln!("soak: {broken} violations; replay one with make soak SEED=<its seed>");
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
async fn soak(seed: u64, duration: Duration) -> u64 {
    println!("soak: seed {seed}, faults for {}", humantime::format_duration(duration));
    let rng = XorShiftRng::seed_from_u64(seed);
    let mut world = World::new(seed, rng).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let client = world.env.client.clone();
    let namespace = world.env.namespace.clone();
    let tag = format!("seed {seed}");
    let checker = tokio::spawn(async move {
        let stop = async {
            let _ = stopped.await;
        };
        nodepool_fanout::check::watch::run(client, Some(&namespace), stop, |v| println!("[{tag}] {v}")).await
    });
    world.install().await;
    let started = tokio::time::Instant::now();
    while started.elapsed() < duration {
        let fault = world.draw();
        println!("[seed {seed}] {:>6.1} s  {fault}", started.elapsed().as_secs_f64());
        world.inject(&fault).await;
        world.pause().await;
    }
    world.heal().await;
    tokio::time::sleep(SETTLE).await;
    let _ = stop.send(());
    let summary = match checker.await {
        Ok(Ok(summary)) => summary,
        Ok(Err(e)) => panic!("[seed {seed}] the checker stopped: {e}"),
        Err(e) => panic!("[seed {seed}] the checker panicked: {e}"),
    };
    let checks: u64 = summary.checks.values().sum();
    assert!(checks > 0, "[seed {seed}] the checker judged nothing: {summary}");
    println!("[seed {seed}] {} faults\n{summary}", world.injected());
    world.finish().await;
    summary.violations.values().sum()
}
