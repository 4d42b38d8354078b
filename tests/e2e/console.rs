//! The fleet console in a real browser: Debian's headless Chromium, driven
//! through chromedriver (WebDriver), against the console serving the local
//! control plane with the controller running. `hack/browser-deps.sh`
//! (run by `make test`) installs both; without them the test fails, and
//! says how to get them.
use crate::support;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use nodepool_fanout::console;
use support::apps::{apply_app, complete, ingress_app, wait_app, READY_TIMEOUT};
use support::{ensure_crd, wait_for, RunningController, TestEnv, TestResult};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver on a loopback port it picked itself, stopped when dropped.
struct Driver {
    _child: Child,
    url: String,
}

impl Driver {
    async fn start() -> Self {
        let mut child = Command::new(CHROMEDRIVER)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER}: {e}; run hack/browser-deps.sh"));
        let mut lines = BufReader::new(child.stdout.take().expect("chromedriver's stdout")).lines();
        let port = tokio::time::timeout(Duration::from_secs(20), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    return rest.trim_end_matches('.').parse::<u16>().ok();
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .expect("chromedriver did not say its port within 20 s");
        // Keep its stdout drained, so that it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Driver {
            _child: child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A headless Chromium session. Root needs `--no-sandbox`.
    async fn browser(&self) -> Client {
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": CHROMIUM, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900"
            ] }
        });
        let capabilities = capabilities.as_object().cloned().unwrap_or_default();
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("no headless Chromium session ({e}); run hack/browser-deps.sh"))
    }
}

/// Serves the console over the test's namespace on a loopback port; returns
/// its address.
async fn serve_console(env: &TestEnv) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let address = format!("http://{}", listener.local_addr().expect("its address"));
    let source = console::source::ClusterSource {
        client: env.client.clone(),
        namespace: Some(env.namespace.clone()),
    };
    let router = console::router(Arc::new(source));
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

/// The cells of the page open in `browser`: (pool, state).
async fn cells(browser: &Client) -> Result<Vec<(String, String)>, fantoccini::error::CmdError> {
    let mut found = Vec::new();
    for cell in browser.find_all(Locator::Css("li.cell")).await? {
        let pool = cell.attr("data-pool").await?.unwrap_or_default();
        let state = cell.attr("data-state").await?.unwrap_or_default();
        found.push((pool, state));
    }
    Ok(found)
}

/// A PNG's width and height, once it is one.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let header = bytes.get(..24)?;
    (header[..8] == *b"\x89PNG\r\n\x1a\n").then_some(())?;
    let width = u32::from_be_bytes(header[16..20].try_into().ok()?);
    let height = u32::from_be_bytes(header[20..24].try_into().ok()?);
    Some((width, height))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_shows_the_fleet_as_a_grid_in_a_real_browser() -> TestResult {
    let mut env = TestEnv::new("console").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut pools = Vec::new();
    for (short, region) in [("a", "east"), ("b", "east"), ("c", "north")] {
        pools.push(env.create_pool(short, &[("e2e", &tag), ("region", region)], 1).await);
    }
    let controller = RunningController::start(&env.namespace);
    let app = ingress_app(&env, json!({ "rollout": { "strategy": "Progressive" } }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let address = serve_console(&env).await;

    let driver = Driver::start().await;
    let browser = driver.browser().await;
    let checked = async {
        // The landing page lists the application, and leads to its grid.
        browser.goto(&format!("{address}/")).await?;
        let link = browser.find(Locator::LinkText("ingress")).await?;
        let row = browser.find(Locator::Css("tr[data-app] td.ready")).await?.text().await?;
        assert_eq!(row, "3/3");
        link.click().await?;
        let seen = wait_for("the grid of three Ready pools", Duration::from_secs(20), || async {
            let found = cells(&browser).await.map_err(|e| e.to_string())?;
            let ready = found.iter().filter(|(_, state)| state == "Ready").count();
            match (found.len(), ready) {
                (3, 3) => Ok(found),
                _ => Err(format!("cells {found:?}")),
            }
        })
        .await;
        let names: Vec<&str> = seen.iter().map(|(pool, _)| pool.as_str()).collect();
        assert_eq!(names, pools.iter().map(String::as_str).collect::<Vec<_>>());

        // Grouped by region through the filter form, as a person would.
        let form = browser.form(Locator::Css("form.filter")).await?;
        form.set_by_name("group", "region").await?.submit().await?;
        let groups = wait_for("the grid grouped by region", Duration::from_secs(20), || async {
            let headings =
                browser.find_all(Locator::Css("section.group h2")).await.map_err(|e| e.to_string())?;
            let mut texts = Vec::new();
            for h in headings {
                texts.push(h.text().await.map_err(|e| e.to_string())?);
            }
            match texts.len() {
                2 => Ok(texts),
                _ => Err(format!("headings {texts:?}")),
            }
        })
        .await;
        assert_eq!(groups, ["east (2)", "north (1)"]);

        // Read-only: no form that writes, no button but the filter's.
        let writes = browser.find_all(Locator::Css("form[method=post], form[method=POST]")).await?;
        assert!(writes.is_empty(), "a form posts");
        let buttons = browser.find_all(Locator::Css("button")).await?;
        assert_eq!(buttons.len(), 1, "only the filter's button");

        // A pool whose node goes down reads Offline on the next look.
        crate::rollout::cut_off(&env, &format!("{}-node-0", pools[2])).await?;
        wait_for("the third pool Offline", Duration::from_secs(30), || async {
            browser.refresh().await.map_err(|e| e.to_string())?;
            let found = cells(&browser).await.map_err(|e| e.to_string())?;
            let state = found.iter().find(|(pool, _)| *pool == pools[2]).map(|(_, s)| s.clone());
            match state.as_deref() {
                Some("Offline") => Ok(()),
                other => Err(format!("its cell says {other:?}")),
            }
        })
        .await;
        let counts = browser.find(Locator::Css("ul.counts")).await?.text().await?;
        assert!(counts.contains("Offline 1") && counts.contains("Ready 2"), "{counts}");

        // A pool's page, from its cell.
        let screenshot = browser.screenshot().await?;
        let cell = browser.find(Locator::Css(&format!("li.cell[data-pool='{}'] a", pools[2]))).await?;
        cell.click().await?;
        let release = browser.find(Locator::Css("dd.release")).await?.text().await?;
        assert!(release.starts_with(&format!("{}/ingress-", env.namespace)), "{release}");
        let nodes = browser.find(Locator::Css("dd.nodes")).await?.text().await?;
        assert_eq!(nodes, "0/1");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(screenshot)
    }
    .await;
    browser.close().await?;
    drop(driver);
    let screenshot = checked?;
    let size = png_size(&screenshot);
    assert!(matches!(size, Some((w, h)) if w >= 1000 && h >= 500), "not a page-sized PNG: {size:?}");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-grid.png");
    std::fs::write(&path, &screenshot)?;
    println!("screenshot: {}", path.display());
    env.cleanup().await;
    Ok(())
}
