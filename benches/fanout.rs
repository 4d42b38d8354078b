//! `make bench-fanout POOLS=N`: fans the ingress-shaped fixture chart out to
//! N pools on the local control plane, once with the shared HelmChart and
//! once with a `chart.spec` per release (Flux's default), and prints for
//! each: the time until all N releases are Ready, the HelmCharts made, the
//! chart downloads, and the time the controller took to write all N
//! HelmReleases; then the time a plain parallel create of N HelmReleases
//! takes on the same API server.
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use support::apps::{app, apply_app};
use support::{ensure_crd, helmchart_resource, helmrelease_resource, RunningController, TestEnv};

const TIMEOUT: Duration = Duration::from_secs(1800);

struct Figures {
    env: TestEnv,
    /// Kept running until cleanup: the application's finalizer is its to remove.
    _controller: RunningController,
    mode: &'static str,
    write_all: Duration,
    all_ready: Duration,
    helmcharts: usize,
    downloads: usize,
}

#[tokio::main]
async fn main() {
    let pools: usize = std::env::var("POOLS").ok().and_then(|p| p.parse().ok()).unwrap_or(50);
    println!("fan-out benchmark: {pools} pools, chart ingress-gateway 1.0.0, one kwok node per pool");
    let shared = run_mode(pools, true).await;
    let per_release = run_mode(pools, false).await;
    let plain = plain_create(pools).await;

    println!();
    println!("{:<34} {:>14} {:>14}", "", "shared chart", "chart per release");
    let row = |label: &str, a: String, b: String| println!("{label:<34} {a:>14} {b:>14}");
    row("controller writes all HelmReleases", secs(shared.write_all), secs(per_release.write_all));
    row("all releases Ready", secs(shared.all_ready), secs(per_release.all_ready));
    row("HelmCharts", shared.helmcharts.to_string(), per_release.helmcharts.to_string());
    row(
        "chart downloads (repository)",
        shared.downloads.to_string(),
        per_release.downloads.to_string(),
    );
    println!("plain parallel create of {pools} HelmReleases: {}", secs(plain));
    println!("({} and {} were the modes measured)", shared.mode, per_release.mode);
    // Not measured: leaves the cluster as it was for the next run.
    shared.env.cleanup().await;
    per_release.env.cleanup().await;
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The chart repository's access log: one line per GET of a packaged chart.
fn chart_downloads() -> usize {
    let log = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/local-cluster/logs/chart-repository.log");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("GET /ingress-gateway-") && l.contains(".tgz"))
        .count()
}

async fn run_mode(pools: usize, shared: bool) -> Figures {
    let mode = if shared { "shared" } else { "per-release" };
    let mut env = TestEnv::new(&format!("bench-{mode}")).await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    for i in 0..pools {
        env.create_pool(&format!("p{i}"), &[("e2e", &tag)], 1).await;
    }
    let controller = RunningController::start_with(&env.namespace, &[&format!("--shared-chart={shared}")]);
    let downloads_before = chart_downloads();
    let app = app(
        &env,
        "ingress-gateway",
        "1.0.0",
        json!({
            "pools": { "selector": { "matchLabels": { "e2e": tag } } },
            "interval": "1h",
            "values": { "controller": { "ingressClass": { "name": "{{app.namespace}}-{{pool.name}}" } } }
        }),
    );
    let start = Instant::now();
    apply_app(&env, &app).await.expect("apply the application");

    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let mut write_all = None;
    let apps: Api<nodepool_fanout::api::NodePoolApplication> =
        Api::namespaced(env.client.clone(), &env.namespace);
    let want = format!("{pools}/{pools}");
    loop {
        assert!(
            start.elapsed() < TIMEOUT,
            "{mode}: not ready after {TIMEOUT:?}\n{}",
            controller.log_tail()
        );
        if write_all.is_none() {
            let n = releases
                .list_metadata(&ListParams::default())
                .await
                .map(|l| l.items.len())
                .unwrap_or(0);
            if n == pools {
                write_all = Some(start.elapsed());
            }
        }
        let ready = apps.get("ingress").await.ok().and_then(|a| a.status).map(|s| s.ready);
        if write_all.is_some() && ready.as_deref() == Some(want.as_str()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let all_ready = start.elapsed();
    let helmcharts = count_helmcharts(&env).await;
    let figures = Figures {
        env,
        _controller: controller,
        mode,
        write_all: write_all.unwrap_or(all_ready),
        all_ready,
        helmcharts,
        downloads: chart_downloads() - downloads_before,
    };
    println!(
        "{mode}: wrote {pools} HelmReleases in {}, all Ready in {}, {helmcharts} HelmCharts, {} downloads",
        secs(figures.write_all),
        secs(figures.all_ready),
        figures.downloads
    );
    figures
}

async fn count_helmcharts(env: &TestEnv) -> usize {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "flux-system", &helmchart_resource());
    let list = api.list(&ListParams::default()).await.expect("list HelmCharts");
    list.items
        .iter()
        .filter(|c| {
            let name = c.metadata.name.as_deref().unwrap_or_default();
            let labels = c.metadata.labels.clone().unwrap_or_default();
            name.starts_with(&env.namespace)
                || labels.get("apps.fanout.dev/application-namespace") == Some(&env.namespace)
        })
        .count()
}

/// N suspended HelmReleases created by N parallel POSTs: the API server's
/// own floor for writing what the controller writes.
async fn plain_create(pools: usize) -> Duration {
    let env = TestEnv::new("bench-plain").await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let objects: Vec<DynamicObject> = (0..pools)
        .map(|i| {
            let value: Value = json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": { "name": format!("plain-{i}"), "namespace": env.namespace },
                "spec": { "suspend": true, "interval": "1h",
                    "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0",
                        "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } } }
            });
            serde_json::from_value(value).expect("HelmRelease manifest")
        })
        .collect();
    let params = PostParams::default();
    let start = Instant::now();
    let results: Vec<_> = stream::iter(objects.iter())
        .map(|o| api.create(&params, o))
        .buffer_unordered(32)
        .collect()
        .await;
    let elapsed = start.elapsed();
    assert!(
        results.iter().all(Result::is_ok),
        "plain create failed: {:?}",
        results.iter().find(|r| r.is_err())
    );
    elapsed
}
