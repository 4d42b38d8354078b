//! `make bench-rollout POOLS=N`: one values change reaching N pools on the
//! local control plane, with real Helm upgrades on kwok nodes, under three
//! rollouts side by side: all at once, progressive one pool at a time, and
//! progressive a quarter of the pools at a time. Prints, for each, the time
//! from the change to the rollout's `Complete N/N`, and the most pools seen
//! updating at once. Then a broken change (a Service port out of range)
//! under `onFailure: Rollback`, one pool at a time and every pool at once:
//! the time from the write to the halt, and to every pool that took it
//! back on the last good revision and Ready.
#[path = "../tests/support/mod.rs"]
#[allow(dead_code, unused_imports)] // this bench uses a part of the shared helpers
mod support;

use std::time::{Duration, Instant};

use kube::Api;
use nodepool_fanout::api::{NodePoolApplication, RolloutPhase};
use serde_json::{json, Value};
use support::apps::{app, apply_app};
use support::{ensure_crd, RunningController, TestEnv};

const TIMEOUT: Duration = Duration::from_secs(1800);

struct Run {
    label: &'static str,
    rollout: Value,
}

#[tokio::main]
async fn main() {
    let pools: usize = std::env::var("POOLS").ok().and_then(|p| p.parse().ok()).unwrap_or(10);
    println!("rollout benchmark: {pools} pools, chart ingress-gateway 1.0.0, one kwok node per pool");
    let runs = [
        Run {
            label: "AllAtOnce",
            rollout: json!({ "strategy": "AllAtOnce" }),
        },
        Run {
            label: "Progressive, maxUnavailable 1",
            rollout: json!({ "strategy": "Progressive", "maxUnavailable": 1 }),
        },
        Run {
            label: "Progressive, maxUnavailable 25%",
            rollout: json!({ "strategy": "Progressive", "maxUnavailable": "25%" }),
        },
    ];
    let mut rows = Vec::new();
    for run in &runs {
        let (install, change, most) = measure(pools, &run.rollout).await;
        println!(
            "{}: install {}, change {}, at most {most} updating at once",
            run.label,
            secs(install),
            secs(change)
        );
        rows.push((run.label, install, change, most));
    }
    let broken = [
        Run {
            label: "Rollback, maxUnavailable 1",
            rollout: json!({ "strategy": "Progressive", "maxUnavailable": 1, "onFailure": "Rollback" }),
        },
        Run {
            label: "Rollback, maxUnavailable 100%",
            // Every pool takes the change before the first fails.
            rollout: json!({ "strategy": "Progressive", "maxUnavailable": "100%", "onFailure": "Rollback" }),
        },
    ];
    let mut rollbacks = Vec::new();
    for run in &broken {
        let (halt, back, pools_back) = measure_rollback(pools, &run.rollout).await;
        println!("{}: halt {}, {pools_back} pool(s) back {}", run.label, secs(halt), secs(back));
        rollbacks.push((run.label, halt, back, pools_back));
    }
    println!();
    println!("{:<34} {:>12} {:>16} {:>18}", "", "first install", "change complete", "most updating");
    for (label, install, change, most) in rows {
        println!("{label:<34} {:>12} {:>16} {most:>18}", secs(install), secs(change));
    }
    println!();
    println!(
        "{:<34} {:>12} {:>16} {:>18}",
        "a broken change", "halt", "all back, Ready", "pools rolled back"
    );
    for (label, halt, back, pools_back) in rollbacks {
        println!("{label:<34} {:>12} {:>16} {pools_back:>18}", secs(halt), secs(back));
    }
}

/// Installs the application over `pools` fresh pools, then writes a
/// change no pool can take; returns the time from the write to the halt
/// (the rollback under way), to every pool that took it back and Ready on
/// the last complete revision, and how many pools went back.
async fn measure_rollback(pools: usize, rollout: &Value) -> (Duration, Duration, usize) {
    let (env, controller, mut manifest) = installed(pools, rollout).await;
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    manifest["spec"]["values"]["controller"]["service"] = json!({ "port": 70000 });
    let start = Instant::now();
    let applied = apply_app(&env, &manifest).await.expect("write the broken change");
    let generation = applied.metadata.generation;
    let mut halt = None;
    loop {
        assert!(start.elapsed() < TIMEOUT, "not rolled back after {TIMEOUT:?}\n{}", controller.log_tail());
        let status = apps.get("ingress").await.ok().and_then(|a| a.status);
        let rollout = status.filter(|s| s.observed_generation == generation).and_then(|s| s.rollout);
        if let Some(r) = rollout {
            if matches!(r.phase, RolloutPhase::RollingBack | RolloutPhase::RolledBack) {
                halt.get_or_insert(start.elapsed());
            }
            if r.phase == RolloutPhase::RolledBack {
                let back = start.elapsed();
                drop(controller);
                env.cleanup().await;
                return (halt.unwrap_or(back), back, r.done as usize);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A fresh namespace with `pools` pools and the application installed on
/// every one of them.
async fn installed(pools: usize, rollout: &Value) -> (TestEnv, RunningController, Value) {
    let mut env = TestEnv::new("bench-rollout").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    for i in 0..pools {
        env.create_pool(&format!("p{i:02}"), &[("e2e", &tag)], 1).await;
    }
    let controller = RunningController::start(&env.namespace);
    let manifest = app(
        &env,
        "ingress-gateway",
        "1.0.0",
        json!({
            "pools": { "selector": { "matchLabels": { "e2e": tag } } },
            "interval": "1h",
            "values": { "controller": {
                "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" },
                "config": { "log-level": "info" }
            } },
            "rollout": rollout
        }),
    );
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    apply_app(&env, &manifest).await.expect("apply the application");
    wait_complete(&apps, pools, &controller).await;
    (env, controller, manifest)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Installs the application over `pools` fresh pools, then changes its
/// values; returns the time to the first `Complete`, the time from the
/// change to the next, and the most pools seen updating at once.
async fn measure(pools: usize, rollout: &Value) -> (Duration, Duration, usize) {
    let start = Instant::now();
    let (env, controller, mut manifest) = installed(pools, rollout).await;
    let install = start.elapsed();
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);

    manifest["spec"]["values"]["controller"]["config"]["log-level"] = json!("debug");
    let start = Instant::now();
    let applied = apply_app(&env, &manifest).await.expect("change the application");
    let generation = applied.metadata.generation;
    let most = wait_complete_after(&apps, pools, generation, &controller).await;
    let change = start.elapsed();
    drop(controller);
    env.cleanup().await;
    (install, change, most)
}

async fn wait_complete(apps: &Api<NodePoolApplication>, pools: usize, controller: &RunningController) {
    wait_complete_after(apps, pools, None, controller).await;
}

/// Polls until the status of `generation` (or any) says Complete with
/// every pool done and Ready; returns the most pools seen updating at once.
async fn wait_complete_after(
    apps: &Api<NodePoolApplication>,
    pools: usize,
    generation: Option<i64>,
    controller: &RunningController,
) -> usize {
    let start = Instant::now();
    let mut most = 0;
    loop {
        assert!(start.elapsed() < TIMEOUT, "not complete after {TIMEOUT:?}\n{}", controller.log_tail());
        let status = apps.get("ingress").await.ok().and_then(|a| a.status);
        if let Some(status) = status.filter(|s| generation.is_none() || s.observed_generation == generation) {
            let updating = status.pools.iter().filter(|p| p.up_to_date && p.rollout != "Done").count();
            most = most.max(updating);
            let complete = status
                .rollout
                .as_ref()
                .is_some_and(|r| r.phase == RolloutPhase::Complete && r.done as usize == pools);
            if complete && status.ready_pools as usize == pools {
                return most;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
