//! `make bench-console`: the fleet console over one application of 1,000
//! and of 10,000 pools, side by side. For each it prints:
//! - the size of the application's page;
//! - the server's time to build and render it (median of 5);
//! - in Debian's headless Chromium, the first contentful paint and the
//!   load event of that page (median of 3 loads);
//! - the time from a pool's change in the fleet to its cell's new state on
//!   the open page: server-sent event, fetch, render and swap (median of 3).
//!
//! - per person, behind the proxy: 10,000 pools in 100 applications over 50
//!   namespaces, 50 people each allowed 10 of them; the landing page and
//!   an application's page for each, beside the same pages unfiltered.
//!
//! Stand-in, declared: the fleet is built here and served from memory, not
//! read from a cluster's watch caches, so that 10,000 pools need no 10,000
//! Helm installs. The pages, the event stream and the script are the
//! console's own. The end-to-end test `console::the_console_shows_the_
//! fleet_as_a_live_grid_in_a_real_browser` prints the same update latency
//! through a real API server's watch.
#[path = "../tests/support/mod.rs"]
#[allow(dead_code, unused_imports)] // this bench uses the browser helper only
mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use fantoccini::{Client, Locator};
use futures::future::BoxFuture;
use nodepool_fanout::api::NodePoolApplication;
use nodepool_fanout::console::access::Access;
use nodepool_fanout::console::actions::Actions;
use nodepool_fanout::console::identity::{Identity, Impersonate, Tokens};
use nodepool_fanout::console::view::AppView;
use nodepool_fanout::console::{router, router_with, Source, SourceError, Steering};
use nodepool_fanout::reconcile::fleet::PoolRow;
use serde_json::json;
use tokio::sync::watch;
use tower::ServiceExt;

const SIZES: [usize; 2] = [1_000, 10_000];

/// The fleet, held in memory; a change moves `changes` as the caches do.
struct Fleet {
    apps: RwLock<Vec<AppView>>,
    changes: watch::Sender<u64>,
}

impl Source for Fleet {
    fn applications(&self) -> BoxFuture<'_, Result<Vec<AppView>, SourceError>> {
        let apps = self.apps.read().map(|a| a.clone()).unwrap_or_default();
        Box::pin(async move { Ok(apps) })
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

impl Fleet {
    /// Sets `pool`'s Flux state, as a release's change would.
    fn set(&self, pool: &str, state: &str) {
        if let Ok(mut apps) = self.apps.write() {
            for app in apps.iter_mut() {
                for p in app.pools.iter_mut().filter(|p| p.row.pool == pool) {
                    p.row.state = state.to_string();
                    p.state = nodepool_fanout::console::view::CellState::of(&p.row, p.row.rollout.as_deref());
                }
            }
        }
        self.changes.send_modify(|n| *n += 1);
    }
}

/// One application of `pools` pools over 50 regions, mid-rollout: most
/// Ready, some updating, waiting, failed and offline.
fn application(pools: usize) -> AppView {
    let app: NodePoolApplication = serde_json::from_value(json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "fleet", "namespace": "edge" },
        "spec": { "pools": { "selector": {} }, "interval": "10m",
            "chart": { "spec": { "chart": "ingress-gateway", "sourceRef": { "kind": "HelmRepository", "name": "r" } } } },
        "status": { "ready": format!("{}/{pools}", pools * 9 / 10), "chartVersion": "1.0.0, 1.1.0",
            "rollout": { "revision": "8873c8fa9d", "phase": "Progressing", "progress": format!("Progressing {}/{pools}", pools * 6 / 10),
                         "wave": "2/3", "total": pools, "updated": pools * 6 / 10, "done": pools * 6 / 10, "failed": pools / 100 } }
    }))
    .expect("the bench's application");
    let state = |i: usize| match i % 100 {
        0 => "Failed",
        1..=3 => "Offline",
        4..=8 => "Progressing",
        _ => "Ready",
    };
    let rows = (0..pools)
        .map(|i| PoolRow {
            namespace: "edge".into(),
            application: "fleet".into(),
            pool: format!("store-{i:05}"),
            nodes: "2/2".into(),
            release: format!("fleet-store-{i:05}-1a2b3c4d"),
            state: state(i).into(),
            reason: "UpgradeSucceeded".into(),
            chart_version: "1.1.0".into(),
            revision: Some(2),
            message: format!("Helm upgrade succeeded for release edge/fleet-store-{i:05}-1a2b3c4d.v2 with chart ingress-gateway@1.1.0"),
            suspended: false,
            rollout: None,
            down_since: None,
        })
        .collect();
    let labels = (0..pools)
        .map(|i| {
            (
                format!("store-{i:05}"),
                BTreeMap::from([("region".to_string(), format!("region-{:02}", i % 50))]),
            )
        })
        .collect();
    let status = app.status.clone().unwrap_or_default();
    AppView::of(&app, &status, rows, &labels)
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

struct Figures {
    pools: usize,
    bytes: usize,
    render_ms: f64,
    paint_ms: f64,
    load_ms: f64,
    update_ms: f64,
}

#[tokio::main]
async fn main() {
    let driver = support::browser::Driver::start().await;
    let mut rows = Vec::new();
    for pools in SIZES {
        rows.push(measure(&driver, pools).await);
    }
    println!("fleet console, one application, its page grouped by region (50 groups); the fleet is built in memory (stand-in for the watch caches)");
    println!(
        "{:>7} {:>10} {:>15} {:>24} {:>12} {:>22}",
        "pools", "page", "server render", "first contentful paint", "load event", "change -> open page"
    );
    for f in rows {
        println!(
            "{:>7} {:>7.1} MB {:>12.0} ms {:>21.0} ms {:>9.0} ms {:>19.0} ms",
            f.pools,
            f.bytes as f64 / 1e6,
            f.render_ms,
            f.paint_ms,
            f.load_ms,
            f.update_ms
        );
    }
    println!();
    println!(
        "per person: 10,000 pools in 100 applications over 50 namespaces, 50 people each allowed 10 \
         (RBAC answered from a table: stand-in for the SubjectAccessReviews, whose answers the console keeps 30 s)"
    );
    println!("{:<28} {:>16} {:>22}", "", "landing page", "an application's page");
    for (what, landing, app) in per_person().await {
        println!("{what:<28} {landing:>13.2} ms {app:>19.2} ms");
    }
}

/// RBAC as a table: person `u<i>` may read namespace `ns-<j>` when
/// `i % 5 == j % 5`.
struct Table;

impl Access for Table {
    fn may_read<'a>(&'a self, who: &'a Impersonate, namespace: &'a str) -> BoxFuture<'a, bool> {
        let number = |s: &str| s.trim_start_matches(|c: char| !c.is_ascii_digit()).parse::<usize>().ok();
        let allowed = matches!((number(&who.user), number(namespace)), (Some(u), Some(n)) if u % 5 == n % 5);
        Box::pin(async move { allowed })
    }
}

/// The median time of the landing page and of an application's page, per
/// request: unfiltered (read-only), and for each of 50 people behind a
/// proxy.
async fn per_person() -> Vec<(&'static str, f64, f64)> {
    let apps: Vec<AppView> = (0..100)
        .map(|i| {
            let mut app = application(100);
            app.namespace = format!("ns-{:02}", i % 50);
            app.name = format!("app-{i:02}");
            app
        })
        .collect();
    let (changes, _) = watch::channel(0);
    let fleet = Arc::new(Fleet {
        apps: RwLock::new(apps),
        changes,
    });
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
    let client = kube::Client::try_from(config.clone()).expect("a client");
    let steering = Arc::new(Steering {
        identity: Identity::Proxy {
            user: axum::http::HeaderName::from_static("x-forwarded-user"),
            groups: axum::http::HeaderName::from_static("x-forwarded-groups"),
        },
        tokens: Tokens::new().expect("a key"),
        actions: Actions::new(config, client),
    });
    let unfiltered = router(fleet.clone(), None);
    let filtered = router_with(fleet, Some(steering), Some(Arc::new(Table)));
    let time = |console: axum::Router, uri: String, user: Option<String>| async move {
        let mut request = Request::get(uri).body(Body::empty()).expect("a request");
        if let Some(user) = user {
            request.headers_mut().insert("x-forwarded-user", user.parse().expect("a header"));
        }
        let started = Instant::now();
        let response = console.oneshot(request).await.expect("a page");
        assert_eq!(response.status(), 200, "the page is shown");
        let _ = axum::body::to_bytes(response.into_body(), 64 << 20).await.expect("its body");
        started.elapsed().as_secs_f64() * 1e3
    };
    let (mut landing, mut app) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        landing.push(time(unfiltered.clone(), "/".into(), None).await);
        app.push(time(unfiltered.clone(), "/apps/ns-00/app-00".into(), None).await);
    }
    let mut rows = vec![("everything, read-only", median(landing), median(app))];
    let (mut landing, mut app) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        for user in 0..50 {
            let person = Some(format!("u{user:02}"));
            let namespace = user % 5;
            landing.push(time(filtered.clone(), "/".into(), person.clone()).await);
            let page = format!("/apps/ns-{namespace:02}/app-{namespace:02}");
            app.push(time(filtered.clone(), page, person).await);
        }
    }
    rows.push(("each of 50 people, filtered", median(landing), median(app)));
    rows
}

async fn measure(driver: &support::browser::Driver, pools: usize) -> Figures {
    let (changes, _) = watch::channel(0);
    let fleet = Arc::new(Fleet {
        apps: RwLock::new(vec![application(pools)]),
        changes,
    });
    let console = router(fleet.clone(), None);
    let page = "/apps/edge/fleet?group=region";

    let mut renders = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let response = console
            .clone()
            .oneshot(Request::get(page).body(Body::empty()).expect("a request"))
            .await;
        let body = axum::body::to_bytes(response.expect("a page").into_body(), 64 << 20)
            .await
            .expect("its body");
        renders.push(started.elapsed().as_secs_f64() * 1e3);
        bytes = body.len();
    }

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let address = format!("http://{}", listener.local_addr().expect("its address"));
    tokio::spawn(async move { axum::serve(listener, console).await });
    let browser = driver.browser().await;
    let (mut paints, mut loads) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        browser.goto(&format!("{address}{page}")).await.expect("the page loads");
        // The paint's entry is recorded a moment after the load at times:
        // asked for again, for up to two seconds.
        let mut timing = serde_json::Value::Null;
        for _ in 0..20 {
            timing = browser
                .execute(
                    "const paint = performance.getEntriesByName('first-contentful-paint')[0]; \
                     const nav = performance.getEntriesByType('navigation')[0]; \
                     return [paint ? paint.startTime : -1, nav.loadEventEnd];",
                    vec![],
                )
                .await
                .expect("the page's timings");
            if timing[0].as_f64().is_some_and(|paint| paint > 0.0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let number = |i: usize| timing[i].as_f64().expect("a timing");
        assert!(number(0) > 0.0, "no first contentful paint recorded: {timing}");
        paints.push(number(0));
        loads.push(number(1));
    }
    let cells = browser.find_all(Locator::Css("li.cell")).await.expect("the cells").len();
    assert_eq!(cells, pools, "the page shows every pool");

    let mut updates = Vec::new();
    wait_stream(&browser).await;
    for (i, pool) in ["store-00050", "store-00051", "store-00052"].into_iter().enumerate() {
        // After a quiet spell, as an operator's page mostly is.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let started = Instant::now();
        fleet.set(pool, if i % 2 == 0 { "Failed" } else { "Offline" });
        let want = if i % 2 == 0 { "Failed" } else { "Offline" };
        loop {
            let state = browser
                .execute(
                    &format!("return document.querySelector('[data-pool=\"{pool}\"]').dataset.state"),
                    vec![],
                )
                .await
                .expect("the cell's state");
            if state.as_str() == Some(want) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{pool} never read {want} on the page");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        updates.push(started.elapsed().as_secs_f64() * 1e3);
    }
    browser.close().await.expect("the browser closes");
    Figures {
        pools,
        bytes,
        render_ms: median(renders),
        paint_ms: median(paints),
        load_ms: median(loads),
        update_ms: median(updates),
    }
}

async fn wait_stream(browser: &Client) {
    let started = Instant::now();
    loop {
        let body = browser.find(Locator::Css("body")).await.expect("a body");
        if body.attr("data-stream").await.expect("its attribute").as_deref() == Some("open") {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "the page's event stream never opened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
