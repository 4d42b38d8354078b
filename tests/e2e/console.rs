//! The fleet console in a real browser: Debian's headless Chromium, driven
//! through chromedriver (WebDriver), against `nodepool-fanout ui` serving
//! the local control plane with the controller running: as deploy/console
//! runs it (read-only, its own service account), and as an operator runs
//! it (acting as themselves, or as a user who may only read). `hack/browser-deps.sh`
//! (run by `make test`) installs both; without them the test fails, and
//! says how to get them.

mod access;
mod applications;
mod rollout;

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use fantoccini::error::CmdError;
use fantoccini::{Client, Locator};
use serde_json::json;

use support::apps::{apply_app, complete, ingress_app, wait_app, READY_TIMEOUT};
use support::browser::Driver;
use support::{ensure_crd, wait_for, RunningController, TestEnv, TestResult};

/// A rollout of six pools in three waves.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(240);

/// `nodepool-fanout ui` over the test's namespace, on a free loopback
/// port, as a user would start it; stopped when dropped.
pub(crate) struct Ui {
    _child: std::process::Child,
    pub(crate) address: String,
}

impl Ui {
    pub(crate) async fn start(env: &TestEnv, flags: &[&str]) -> Self {
        Self::start_as(env, flags, support::kubeconfig()).await
    }

    /// As `start`, with the identity of another kubeconfig.
    async fn start_as(env: &TestEnv, flags: &[&str], kubeconfig: &std::path::Path) -> Self {
        Self::start_with(env, flags, kubeconfig, &[]).await
    }

    /// As `start_as`, with these environment variables besides.
    async fn start_with(
        env: &TestEnv,
        flags: &[&str],
        kubeconfig: &std::path::Path,
        vars: &[(&str, &str)],
    ) -> Self {
        Self::serving(Some(&env.namespace), &env.namespace, flags, kubeconfig, vars).await
    }

    /// The console over `scope` (every namespace when `None`), its log
    /// named after `test`.
    pub(crate) async fn serving(
        scope: Option<&str>,
        test: &str,
        flags: &[&str],
        kubeconfig: &std::path::Path,
        vars: &[(&str, &str)],
    ) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let address = format!("127.0.0.1:{port}");
        let logs = support::repo_root().join("target/e2e-logs");
        std::fs::create_dir_all(&logs).expect("cannot create target/e2e-logs");
        let log = std::fs::File::create(logs.join(format!("{test}-ui-{port}.log"))).expect("a log file");
        let scope: Vec<&str> = scope.map(|n| vec!["--namespace", n]).unwrap_or_default();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_nodepool-fanout"))
            .args(["ui", "--address", &address])
            .args(scope)
            .args(flags)
            .env("KUBECONFIG", kubeconfig)
            .envs(vars.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot start nodepool-fanout ui");
        let ui = Ui {
            _child: child,
            address: format!("http://{address}"),
        };
        let healthz = format!("{}/healthz", ui.address);
        wait_for("the console to listen", Duration::from_secs(30), || async {
            reqwest::get(&healthz).await.map(|_| ()).map_err(|e| e.to_string())
        })
        .await;
        ui
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self._child.kill();
        let _ = self._child.wait();
    }
}

// The page swaps its live parts as the fleet changes, and on a busy
// cluster it does so every second: an element found by one WebDriver
// command may be gone by the next. So the page is read, and clicked, by
// one script each time, which sees one state of it.

/// The cells of the page open in `browser`: (pool, state).
async fn cells(browser: &Client) -> Result<Vec<(String, String)>, CmdError> {
    let found = browser
        .execute(
            "return Array.from(document.querySelectorAll('li.cell')).map(c => [c.dataset.pool, c.dataset.state]);",
            vec![],
        )
        .await?;
    Ok(serde_json::from_value(found).expect("the script returns [pool, state] pairs"))
}

/// The rendered text of each element `css` selects, its whitespace
/// folded to single spaces.
async fn texts(browser: &Client, css: &str) -> Result<Vec<String>, CmdError> {
    let found = browser
        .execute(
            "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.innerText);",
            vec![json!(css)],
        )
        .await?;
    let found: Vec<String> = serde_json::from_value(found).expect("the script returns texts");
    Ok(found.iter().map(|t| t.split_whitespace().collect::<Vec<_>>().join(" ")).collect())
}

/// The text of the first element `css` selects; empty when there is none.
async fn text(browser: &Client, css: &str) -> Result<String, CmdError> {
    Ok(texts(browser, css).await?.into_iter().next().unwrap_or_default())
}

/// The text of the first element `css` selects, once there is one: after
/// a click, the next page may still be on its way.
async fn text_when_shown(browser: &Client, css: &str) -> String {
    wait_for(&format!("{css} on the page"), Duration::from_secs(20), || async {
        let shown = text(browser, css).await.map_err(|e| e.to_string())?;
        (!shown.is_empty()).then_some(shown).ok_or_else(|| "not yet".to_string())
    })
    .await
}

/// Clicks the first element `css` selects, as a person would.
async fn click_on(browser: &Client, css: &str) -> Result<(), CmdError> {
    let clicked = browser
        .execute(
            "const e = document.querySelector(arguments[0]); if (e) { e.click(); } return !!e;",
            vec![json!(css)],
        )
        .await?;
    assert_eq!(clicked, json!(true), "nothing to click at {css}");
    Ok(())
}

/// A PNG's width and height, once it is one.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let header = bytes.get(..24)?;
    (header[..8] == *b"\x89PNG\r\n\x1a\n").then_some(())?;
    let width = u32::from_be_bytes(header[16..20].try_into().ok()?);
    let height = u32::from_be_bytes(header[20..24].try_into().ok()?);
    Some((width, height))
}

/// The state of `pool`'s cell on the page open in `browser`.
async fn state_of(browser: &Client, pool: &str) -> Result<String, String> {
    let found = cells(browser).await.map_err(|e| e.to_string())?;
    found
        .into_iter()
        .find(|(p, _)| p == pool)
        .map(|(_, s)| s)
        .ok_or_else(|| format!("no cell {pool}"))
}

/// Waits until the page's event stream is open: from then on the page
/// follows the fleet without being reloaded.
async fn wait_live(browser: &Client) {
    wait_for("the page's event stream", Duration::from_secs(20), || async {
        let body = browser.find(Locator::Css("body")).await.map_err(|e| e.to_string())?;
        match body.attr("data-stream").await.map_err(|e| e.to_string())?.as_deref() {
            Some("open") => Ok(()),
            other => Err(format!("data-stream {other:?}")),
        }
    })
    .await;
}

type Checked<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[tokio::test(flavor = "multi_thread")]
async fn the_console_shows_the_fleet_as_a_live_grid_in_a_real_browser() -> TestResult {
    let mut env = TestEnv::new("console").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut pools = Vec::new();
    for (short, region) in [("a", "east"), ("b", "east"), ("c", "north")] {
        pools.push(env.create_pool(short, &[("e2e", &tag), ("region", region)], 1).await);
    }
    let controller = RunningController::start(&env.namespace);
    let rollout = json!({ "rollout": { "strategy": "Progressive", "offlineAfter": "0s" } });
    apply_app(&env, &ingress_app(&env, rollout)).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    // As deploy/console runs it: read-only, as its own service account,
    // with no more rights than deploy/console gives it.
    support::kubectl(&["apply", "--server-side", "-f", "deploy/namespace.yaml"]);
    support::kubectl(&["apply", "--server-side", "-k", "deploy/console"]);
    let console_sa = support::kubeconfig_as("nodepool-fanout-system", "nodepool-fanout-console");
    let ui = Ui::start_as(&env, &["--identity", "none"], &console_sa).await;

    let driver = Driver::start().await;
    let browser = driver.browser().await;
    let checked: Checked<Duration> = async {
        // The landing page lists the application, and leads to its grid.
        browser.goto(&format!("{}/", ui.address)).await?;
        let row = text(&browser, "tr[data-app] td.ready").await?;
        assert_eq!(row, "3/3");
        click_on(&browser, "tr[data-app] a").await?;
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
            let headings = texts(&browser, "section.group h2").await.map_err(|e| e.to_string())?;
            match headings.len() {
                2 => Ok(headings),
                _ => Err(format!("headings {headings:?}")),
            }
        })
        .await;
        assert_eq!(groups, ["east (2)", "north (1)"]);

        // Read-only: it says so, and there is no form that writes, no
        // button but the filter's.
        let header = text(&browser, "header").await?;
        assert!(header.contains("read-only"), "{header}");
        let writes = browser.find_all(Locator::Css("form[method=post], form[method=POST]")).await?;
        assert!(writes.is_empty(), "a form posts");
        let buttons = browser.find_all(Locator::Css("button")).await?;
        assert_eq!(buttons.len(), 1, "only the filter's button");

        // A pool whose node goes down turns Offline on the open page, with
        // no reload.
        wait_live(&browser).await;
        let before = browser.find(Locator::Css("body")).await?.attr("data-refreshed").await?;
        let pages_before = text(&browser, "p.shown").await?;
        let cut = std::time::Instant::now();
        crate::rollout::cut_off(&env, &format!("{}-node-0", pools[2])).await?;
        wait_for("the third pool Offline", Duration::from_secs(30), || async {
            match state_of(&browser, &pools[2]).await?.as_str() {
                "Offline" => Ok(()),
                other => Err(format!("its cell says {other}")),
            }
        })
        .await;
        let latency = cut.elapsed();
        let after = browser.find(Locator::Css("body")).await?.attr("data-refreshed").await?;
        assert!(after.is_some() && after != before, "the page was not refreshed by its script");
        let counts = text(&browser, "ul.counts").await?;
        assert!(counts.contains("Offline 1") && counts.contains("Ready 2"), "{counts}");
        // The grouping the reader chose stays as it was.
        assert_eq!(texts(&browser, "section.group h2").await?.len(), 2);
        assert_eq!(text(&browser, "p.shown").await?, pages_before);

        // A pool's page, from its cell: since when it has been down.
        click_on(&browser, &format!("li.cell[data-pool='{}'] a", pools[2])).await?;
        let release = text_when_shown(&browser, "dd.release").await;
        assert!(release.starts_with(&format!("{}/ingress-", env.namespace)), "{release}");
        let nodes = text(&browser, "dd.nodes").await?;
        assert_eq!(nodes, "0/1");
        let down = text(&browser, "dd.down").await?;
        assert!(down.starts_with("20"), "down since a time: {down}");
        // Its release's conditions and Helm history, as Flux wrote them.
        let conditions = text(&browser, "table.conditions").await?;
        assert!(conditions.contains("Ready True InstallSucceeded"), "{conditions}");
        let history = text(&browser, "table.history tbody").await?;
        assert!(history.starts_with("1 1.0.0 deployed"), "{history}");
        let events = text(&browser, "table.events").await?;
        assert!(events.contains("InstallSucceeded"), "helm-controller's Event: {events}");
        Ok(latency)
    }
    .await;
    browser.close().await?;
    drop(driver);
    let latency = checked?;
    println!("a node's outage reached the open page in {} ms", latency.as_millis());
    env.cleanup().await;
    Ok(())
}

/// Lets `user` read the test's applications and releases, and nothing more.
async fn grant_read(env: &TestEnv, user: &str) -> TestResult {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": "console-viewer" },
        "rules": [
            { "apiGroups": ["apps.fanout.dev"], "resources": ["nodepoolapplications"], "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["helm.toolkit.fluxcd.io"], "resources": ["helmreleases"], "verbs": ["get", "list", "watch"] }
        ]
    }))?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "console-viewer" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "console-viewer" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }]
    }))?;
    let pp = kube::api::PostParams::default();
    kube::Api::<Role>::namespaced(env.client.clone(), &env.namespace)
        .create(&pp, &role)
        .await?;
    kube::Api::<RoleBinding>::namespaced(env.client.clone(), &env.namespace)
        .create(&pp, &binding)
        .await?;
    Ok(())
}
