//! The fleet console in a real browser: Debian's headless Chromium, driven
//! through chromedriver (WebDriver), against `nodepool-fanout ui` serving
//! the local control plane with the controller running: as deploy/console
//! runs it (read-only, its own service account), and as an operator runs
//! it (acting as themselves, or as a user who may only read). `hack/browser-deps.sh`
//! (run by `make test`) installs both; without them the test fails, and
//! says how to get them.
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

/// Each pool's release's spec hash.
async fn hashes(env: &TestEnv) -> std::collections::BTreeMap<String, String> {
    support::apps::releases_by_pool(env)
        .await
        .into_iter()
        .map(|(pool, hr)| {
            let hash = hr["metadata"]["annotations"]["apps.fanout.dev/spec-hash"].as_str();
            (pool, hash.unwrap_or_default().to_string())
        })
        .collect()
}

/// The phase of the application's rollout.
fn phase(app: &serde_json::Value) -> &str {
    app.pointer("/status/rollout/phase").and_then(|p| p.as_str()).unwrap_or_default()
}

async fn click(browser: &Client, action: &str) -> Result<(), fantoccini::error::CmdError> {
    browser
        .find(Locator::Css(&format!("button[data-action='{action}']")))
        .await?
        .click()
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_pauses_and_resumes_a_rollout_from_the_browser() -> TestResult {
    let mut env = TestEnv::new("steer").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let mut pools = Vec::new();
    for (short, region) in [
        ("a", "east"),
        ("b", "east"),
        ("c", "north"),
        ("d", "north"),
        ("e", "west"),
        ("f", "west"),
    ] {
        pools.push(env.create_pool(short, &[("e2e", &tag), ("region", region)], 1).await);
    }
    let controller = RunningController::start(&env.namespace);
    let wave = |region: &str| json!({ "pools": { "selector": { "matchLabels": { "region": region } } } });
    let rollout = json!({
        "strategy": "Progressive", "maxUnavailable": 2, "maxFailures": 1, "offlineAfter": "0s",
        "minReadySeconds": 6, "steps": [wave("east"), wave("north")]
    });
    let mut app = ingress_app(&env, json!({ "rollout": rollout }));
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(6)).await;
    let installed = hashes(&env).await;

    // A change under way: east first, then north, where one pool's port is
    // one no Service may have; the last west pool is cut off.
    crate::rollout::cut_off(&env, &format!("{}-node-0", pools[5])).await?;
    app["spec"]["values"]["controller"]["config"]["log-level"] = json!("warn");
    app["spec"]["overrides"] = json!([{ "pools": { "names": [pools[2]] },
        "values": { "controller": { "service": { "port": 70000 } } } }]);
    apply_app(&env, &app).await?;

    let ui = Ui::start(&env, &[]).await;
    let driver = Driver::start().await;
    let browser = driver.browser().await;
    let apps: kube::Api<nodepool_fanout::api::NodePoolApplication> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let checked: Checked<Vec<u8>> = async {
        browser
            .goto(&format!("{}/apps/{}/ingress?group=region", ui.address, env.namespace))
            .await?;
        wait_live(&browser).await;
        // Pause once the north pool has failed, from the page as it moves.
        wait_for("the north pool Failed", ROLLOUT_TIMEOUT, || async {
            match state_of(&browser, &pools[2]).await?.as_str() {
                "Failed" => Ok(()),
                other => Err(format!("its cell says {other}")),
            }
        })
        .await;
        click(&browser, "pause").await?;
        let notice = text_when_shown(&browser, "p.notice").await;
        assert!(notice.contains("paused the rollout"), "{notice}");
        let url = browser.current_url().await?;
        assert_eq!(
            url.query_pairs().find(|(k, _)| k == "group").map(|(_, v)| v.to_string()).as_deref(),
            Some("region"),
            "{url}"
        );
        let paused = wait_app(&env, &controller, "the pause", Duration::from_secs(60), |a| match phase(a) {
            "Paused" => Ok(()),
            other => Err(format!("phase {other}")),
        })
        .await;
        assert_eq!(paused["spec"]["rollout"]["paused"], true);
        // The page follows: the rollout reads Paused, and the pools of the
        // last wave wait.
        wait_for("the page to say Paused", Duration::from_secs(10), || async {
            let progress = text(&browser, "dd.progress").await.map_err(|e| e.to_string())?;
            progress.starts_with("Paused").then_some(()).ok_or(progress)
        })
        .await;
        let screenshot = browser.screenshot().await?;
        tokio::time::sleep(Duration::from_secs(4)).await;
        let held = hashes(&env).await;
        assert_eq!(held[&pools[4]], installed[&pools[4]], "a paused rollout reached the west wave");
        // Resumed from the page: the west wave takes the change.
        click(&browser, "resume").await?;
        wait_for("the west pool updated", ROLLOUT_TIMEOUT, || async {
            let now = hashes(&env).await;
            (now[&pools[4]] != installed[&pools[4]])
                .then_some(())
                .ok_or_else(|| "not yet".to_string())
        })
        .await;
        Ok(screenshot)
    }
    .await;
    browser.close().await?;
    let screenshot = checked?;

    // Each action left an Event that names the user.
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let listed = events.list(&Default::default()).await?.items;
    let said = |reason: &str| {
        listed
            .iter()
            .find(|e| e.reason.as_deref() == Some(reason))
            .and_then(|e| e.note.clone())
    };
    for reason in ["RolloutPausedByUser", "RolloutResumedByUser"] {
        let note = said(reason).unwrap_or_else(|| panic!("no {reason} Event"));
        assert!(note.contains("kubernetes-admin") || note.contains("admin"), "{reason}: {note}");
    }

    // A user who may only read is refused, and nothing changes.
    let viewer = format!("{}-viewer", env.prefix);
    grant_read(&env, &viewer).await?;
    let as_viewer = Ui::start(&env, &["--as", &viewer]).await;
    let browser = driver.browser().await;
    let refused: Checked<String> = async {
        browser
            .goto(&format!("{}/apps/{}/ingress", as_viewer.address, env.namespace))
            .await?;
        click(&browser, "pause").await?;
        Ok(text_when_shown(&browser, "p.error").await)
    }
    .await;
    browser.close().await?;
    let refused = refused?;
    assert!(refused.contains(&format!("refused it as {viewer}")), "{refused}");
    let after = apps.get("ingress").await?;
    assert_ne!(after.spec.rollout.and_then(|r| r.paused), Some(true), "the viewer paused it");
    drop(driver);

    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-rollout.png");
    let size = png_size(&screenshot);
    assert!(matches!(size, Some((w, h)) if w >= 1000 && h >= 500), "not a page-sized PNG: {size:?}");
    std::fs::write(&path, &screenshot)?;
    println!("screenshot: {}", path.display());
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

#[tokio::test(flavor = "multi_thread")]
async fn the_loopback_console_gives_a_rebound_page_nothing() -> TestResult {
    // A page of another site whose name was rebound to 127.0.0.1 is
    // same-origin to the browser; only the Host it sends tells it apart.
    let env = TestEnv::new("rebind").await;
    ensure_crd(&env.client).await;
    let ui = Ui::start(&env, &[]).await;
    let client = reqwest::Client::new();
    let port = ui.address.rsplit(':').next().expect("a port").to_string();
    let page = |host: String| client.get(format!("{}/", ui.address)).header("host", host).send();
    let own = page(format!("localhost:{port}")).await?;
    assert_eq!(own.status(), reqwest::StatusCode::OK);
    let body = own.text().await?;
    assert!(body.contains("acting as"), "the console's own page, to its own name: {body}");
    let rebound = page(format!("evil.example:{port}")).await?;
    assert_eq!(rebound.status(), reqwest::StatusCode::FORBIDDEN);
    let said = rebound.text().await?;
    assert!(said.contains("--allowed-hosts") && !said.contains("csrf"), "{said}");
    let action = client
        .post(format!("{}/apps/{}/x/actions/pause", ui.address, env.namespace))
        .header("host", format!("evil.example:{port}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=x")
        .send()
        .await?;
    assert_eq!(action.status(), reqwest::StatusCode::FORBIDDEN);
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_reads_only_the_namespaces_their_rbac_lets_them_list() -> TestResult {
    // `--as` reads as the person, as kubectl --as does: the API server
    // answers a SubjectAccessReview for them.
    let env = TestEnv::new("reads").await;
    ensure_crd(&env.client).await;
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    let app_page = format!("/apps/{}/ingress", env.namespace);
    let listed = format!("data-app=\"{}/ingress\"", env.namespace);
    let landing = |ui: &Ui| {
        let url = format!("{}/", ui.address);
        async move { reqwest::get(url).await?.text().await }
    };
    let own = Ui::start(&env, &[]).await;
    wait_for("the application on the console", Duration::from_secs(30), || async {
        match landing(&own).await {
            Ok(body) if body.contains(&listed) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    drop(own);

    let stranger = format!("{}-stranger", env.prefix);
    let as_stranger = Ui::start(&env, &["--as", &stranger]).await;
    let body = landing(&as_stranger).await?;
    assert!(!body.contains(&listed) && body.contains(&stranger), "{body}");
    let hidden = reqwest::get(format!("{}{app_page}", as_stranger.address)).await?;
    assert_eq!(hidden.status(), reqwest::StatusCode::NOT_FOUND);
    drop(as_stranger);

    let viewer = format!("{}-viewer", env.prefix);
    grant_read(&env, &viewer).await?;
    let as_viewer = Ui::start(&env, &["--as", &viewer]).await;
    let body = landing(&as_viewer).await?;
    assert!(body.contains(&listed), "{body}");
    let shown = reqwest::get(format!("{}{app_page}", as_viewer.address)).await?;
    assert_eq!(shown.status(), reqwest::StatusCode::OK);
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_open_page_follows_its_own_application_and_not_the_others() -> TestResult {
    let env = TestEnv::new("follows").await;
    ensure_crd(&env.client).await;
    let mut other = ingress_app(&env, json!({}));
    other["metadata"]["name"] = json!("other");
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    apply_app(&env, &other).await?;
    let ui = Ui::start(&env, &["--identity", "none"]).await;
    let apps: kube::Api<nodepool_fanout::api::NodePoolApplication> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let touch = |name: &'static str, value: &'static str| {
        let apps = apps.clone();
        async move {
            let patch = json!({ "metadata": { "annotations": { "e2e/touched": value } } });
            apps.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
                .await
        }
    };
    let driver = Driver::start().await;
    let browser = driver.browser().await;
    let refreshed = |browser: &Client| {
        let browser = browser.clone();
        async move {
            let body = browser.find(Locator::Css("body")).await?;
            body.attr("data-refreshed").await
        }
    };
    let checked: Checked<()> = async {
        browser.goto(&format!("{}/apps/{}/ingress", ui.address, env.namespace)).await?;
        wait_live(&browser).await;
        // Its own application changes: the page fetches itself.
        touch("ingress", "1").await?;
        let first = wait_for("the page to follow its application", Duration::from_secs(10), || async {
            refreshed(&browser)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "not yet".to_string())
        })
        .await;
        // Another application changes, within a heartbeat: it does not.
        touch("other", "1").await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(refreshed(&browser).await?, Some(first.clone()), "fetched itself for another application");
        touch("ingress", "2").await?;
        wait_for("the page to follow its application again", Duration::from_secs(10), || async {
            match refreshed(&browser).await.map_err(|e| e.to_string())? {
                Some(now) if now != first => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        Ok(())
    }
    .await;
    let _ = browser.close().await;
    checked.map_err(|e| e.to_string())?;
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_application_is_previewed_applied_edited_and_deleted_from_the_console() -> TestResult {
    let mut env = TestEnv::new("editor").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let pools = [
        env.create_pool("a", &[("e2e", &tag)], 1).await,
        env.create_pool("b", &[("e2e", &tag)], 1).await,
    ];
    let ui = Ui::start(&env, &[]).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let new = client.get(format!("{}/new", ui.address)).send().await?.text().await?;
    let token = new
        .split(r#"name="csrf" value=""#)
        .nth(1)
        .and_then(|t| t.split('"').next())
        .unwrap_or_default();
    let yaml = |values: &str| {
        format!(
            "apiVersion: apps.fanout.dev/v1alpha1\nkind: NodePoolApplication\nmetadata:\n  name: made\n  namespace: {}\n\
             spec:\n  pools:\n    selector:\n      matchLabels: {{ e2e: {tag} }}\n  chart:\n    spec:\n      chart: ingress-gateway\n\
             \x20     version: \"1.0.0\"\n      sourceRef: {{ kind: HelmRepository, name: fixtures, namespace: flux-system }}\n\
             \x20 interval: 10m\n  values: {values}\n",
            env.namespace
        )
    };
    let submit = |yaml: String, action: &'static str| {
        let form = [
            ("csrf", token.to_string()),
            ("yaml", yaml),
            ("action", action.to_string()),
        ];
        let body = serde_urlencoded::to_string(form).unwrap_or_default();
        client
            .post(format!("{}/editor", ui.address))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };

    // As one types: the pools it selects now.
    let form = [("csrf", token.to_string()), ("yaml", yaml("{}"))];
    let selected = client
        .post(format!("{}/editor/pools", ui.address))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(serde_urlencoded::to_string(form).unwrap_or_default())
        .send()
        .await?
        .text()
        .await?;
    assert!(selected.contains("It selects 2 pools now"), "{selected}");

    // The preview: each pool the cluster holds that it selects, and its release.
    let preview = submit(yaml("{ site: \"{{pool.name}}\" }"), "preview").await?;
    assert_eq!(preview.status(), reqwest::StatusCode::OK);
    let page = preview.text().await?;
    for pool in &pools {
        assert!(page.contains(&format!("data-pool=\"{pool}\"")), "{pool} in {page}");
    }
    assert!(page.contains("Preview: 2 pools") && page.contains("kind: HelmRelease"), "{page}");

    // Applied as the kubeconfig's user, by the console's field manager.
    let applied = submit(yaml("{ site: \"{{pool.name}}\" }"), "apply").await?;
    assert_eq!(applied.status(), reqwest::StatusCode::SEE_OTHER);
    let to = applied.headers()["location"].to_str()?.to_string();
    assert!(to.contains("/made?notice="), "{to}");
    let apps: kube::Api<nodepool_fanout::api::NodePoolApplication> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let made = apps.get("made").await?;
    let managers: Vec<String> = made
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(managers.contains(&"nodepool-fanout-console".to_string()), "{managers:?}");

    // Its edit page: the YAML as one writes it.
    let edit = client
        .get(format!("{}/apps/{}/made/edit", ui.address, env.namespace))
        .send()
        .await?
        .text()
        .await?;
    assert!(
        edit.contains("name: made") && !edit.contains("uid:") && !edit.contains("managedFields"),
        "{edit}"
    );

    // A field Git holds (Flux's field manager applied it): a conflict, said.
    let from_git = json!({ "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "made" }, "spec": { "values": { "site": "from-git" } } });
    apps.patch(
        "made",
        &kube::api::PatchParams::apply("kustomize-controller").force(),
        &kube::api::Patch::Apply(&from_git),
    )
    .await?;
    let conflict = submit(yaml("{ site: by-hand }"), "apply").await?;
    assert_eq!(conflict.status(), reqwest::StatusCode::CONFLICT);
    let said = conflict.text().await?;
    assert!(
        said.contains("held by another field manager") && said.contains("kustomize-controller"),
        "{said}"
    );

    // Deleted once its name is typed, saying what happens to the releases.
    let question = client
        .get(format!("{}/apps/{}/made/delete", ui.address, env.namespace))
        .send()
        .await?
        .text()
        .await?;
    assert!(question.contains("deletionPolicy is Delete"), "{question}");
    let delete = |confirm: &'static str| {
        let form = [("csrf", token.to_string()), ("confirm", confirm.to_string())];
        let body = serde_urlencoded::to_string(form).unwrap_or_default();
        client
            .post(format!("{}/apps/{}/made/delete", ui.address, env.namespace))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    assert_eq!(delete("mad").await?.status(), reqwest::StatusCode::UNPROCESSABLE_ENTITY);
    assert!(apps.get_opt("made").await?.is_some(), "deleted without its name typed");
    let deleted = delete("made").await?;
    assert_eq!(deleted.status(), reqwest::StatusCode::OK);
    wait_for("the application to go", Duration::from_secs(30), || async {
        match apps.get_opt("made").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(env.client.clone(), &env.namespace);
    let reasons: Vec<String> = events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    for reason in ["ApplicationAppliedByUser", "ApplicationDeletedByUser"] {
        assert!(reasons.iter().any(|r| r == reason), "{reason} in {reasons:?}");
    }
    env.cleanup().await;
    Ok(())
}
