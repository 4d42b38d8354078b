//! `make bench-fanout POOLS=N`: fans the ingress-shaped fixture chart out to
//! N pools on the local control plane, once with the shared HelmChart and
//! once with a `chart.spec` per release (Flux's default); then writes the
//! very same N HelmReleases directly, with no controller, as a user would
//! without nodepool-fanout. Prints for each side by side: the time until
//! all N releases exist and until all are Ready, the HelmCharts made, and
//! the chart downloads.
#[path = "../tests/support/mod.rs"]
#[allow(dead_code, unused_imports)] // this bench uses a part of the shared helpers
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
    /// Kept running until cleanup: the application's finalizer is its to
    /// remove. None for the releases written directly.
    _controller: Option<RunningController>,
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
    let direct = write_directly(&per_release.env, pools).await;

    println!();
    let row = |label: &str, a: String, b: String, c: String| println!("{label:<34} {a:>14} {b:>18} {c:>22}");
    row("", "shared chart".into(), "chart per release".into(), "direct (no controller)".into());
    let all = [&shared, &per_release, &direct];
    let [a, b, c] = all.map(|f| secs(f.write_all));
    row(&format!("all {pools} HelmReleases written"), a, b, c);
    let [a, b, c] = all.map(|f| secs(f.all_ready));
    row("all releases Ready", a, b, c);
    let [a, b, c] = all.map(|f| f.helmcharts.to_string());
    row("HelmCharts", a, b, c);
    let [a, b, c] = all.map(|f| f.downloads.to_string());
    row("chart downloads (repository)", a, b, c);
    // Not measured: leaves the cluster as it was for the next run.
    direct.env.cleanup().await;
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
        _controller: Some(controller),
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

/// The HelmReleases the controller wrote in `from` (a chart per release,
/// as Flux users write them by hand), created again in a namespace of
/// their own by 16 parallel POSTs, with no controller: the same N Helm
/// installs onto the same pools' nodes. Timed from the first create until
/// every one is Ready.
async fn write_directly(from: &TestEnv, pools: usize) -> Figures {
    let env = TestEnv::new("bench-direct").await;
    let source: Api<DynamicObject> =
        Api::namespaced_with(from.client.clone(), &from.namespace, &helmrelease_resource());
    let listed = source.list(&ListParams::default()).await.expect("list the controller's releases");
    assert_eq!(listed.items.len(), pools, "the controller's releases to copy");
    let objects: Vec<DynamicObject> = listed
        .items
        .iter()
        .map(|r| {
            let value: Value = json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": { "name": r.metadata.name, "namespace": env.namespace },
                "spec": r.data["spec"]
            });
            serde_json::from_value(value).expect("HelmRelease manifest")
        })
        .collect();
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let downloads_before = chart_downloads();
    let params = PostParams::default();
    let start = Instant::now();
    let results: Vec<_> = stream::iter(objects.iter())
        .map(|o| api.create(&params, o))
        .buffer_unordered(16)
        .collect()
        .await;
    let write_all = start.elapsed();
    if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
        panic!("direct create failed: {e}");
    }
    loop {
        assert!(start.elapsed() < TIMEOUT, "direct: not all Ready after {TIMEOUT:?}");
        let ready = api
            .list(&ListParams::default())
            .await
            .map(|l| l.items.iter().filter(|r| is_ready(r)).count())
            .unwrap_or(0);
        if ready == pools {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let all_ready = start.elapsed();
    let helmcharts = count_helmcharts(&env).await;
    let downloads = chart_downloads() - downloads_before;
    println!(
        "direct: wrote {pools} HelmReleases in {}, all Ready in {}, {helmcharts} HelmCharts, {downloads} downloads",
        secs(write_all),
        secs(all_ready),
    );
    Figures {
        env,
        _controller: None,
        write_all,
        all_ready,
        helmcharts,
        downloads,
    }
}

/// Ready as Flux's kstatus reads it: the Ready condition True for the
/// generation it observed.
fn is_ready(release: &DynamicObject) -> bool {
    let generation = release.metadata.generation;
    release.data["status"]["conditions"].as_array().is_some_and(|conditions| {
        conditions.iter().any(|c| {
            c["type"] == "Ready" && c["status"] == "True" && c["observedGeneration"].as_i64() == generation
        })
    })
}
