//! The console's routes and pages, in process, over a fleet built in the
//! test: what each page shows, the grid's grouping and filters, escaping,
//! the security headers, and that nothing is writable.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;
use tower::ServiceExt;

use super::view::{AppView, CellState, Filter};
use super::*;
use crate::api::NodePoolApplication;
use crate::reconcile::fleet::PoolRow;
use identity::Tokens;

/// A fleet the test builds; `Err` answers as caches that cannot list.
struct Fixed(Result<Vec<AppView>, String>);

impl Source for Fixed {
    fn applications(&self) -> BoxFuture<'_, Result<Vec<AppView>, SourceError>> {
        let result = self.0.clone().map_err(SourceError::NotListed);
        Box::pin(async move { result })
    }

    fn changes(&self) -> watch::Receiver<u64> {
        watch::channel(0).1
    }
}

/// Steering as `identity`, over an API server that is never reached: every
/// request these tests make is refused before it would be.
fn steering(identity: Identity) -> Option<Arc<Steering>> {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config.clone()).unwrap();
    Some(Arc::new(Steering {
        identity,
        tokens: Tokens::new().unwrap(),
        actions: Actions::new(config, client),
    }))
}

fn kubeconfig_user() -> Identity {
    Identity::Kubeconfig {
        name: "admin".into(),
        impersonate: None,
    }
}

fn proxy() -> Identity {
    Identity::Proxy {
        user: axum::http::HeaderName::from_static("x-forwarded-user"),
        groups: axum::http::HeaderName::from_static("x-forwarded-groups"),
    }
}

fn row(pool: &str, state: &str, message: &str) -> PoolRow {
    PoolRow {
        namespace: "edge".into(),
        application: "gw".into(),
        pool: pool.into(),
        nodes: "2/2".into(),
        release: format!("gw-{pool}"),
        state: state.into(),
        reason: format!("{state}Reason"),
        chart_version: "1.0.0".into(),
        revision: Some(2),
        message: message.into(),
        suspended: false,
        rollout: None,
        down_since: None,
    }
}

/// An application of five pools mid-rollout: hangzhou done, shanghai
/// updating, beijing offline, wuhan failed, a hostile message on xian.
fn fleet() -> Vec<AppView> {
    let app: NodePoolApplication = serde_json::from_value(json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "gw", "namespace": "edge" },
        "spec": {
            "pools": { "selector": {} }, "interval": "10m",
            "chart": { "spec": { "chart": "ingress-gateway", "sourceRef": { "kind": "HelmRepository", "name": "r" } } }
        },
        "status": {
            "ready": "2/5", "readyPools": 2, "selectedPools": 5, "chartVersion": "1.0.0",
            "conditions": [{ "type": "Ready", "status": "False", "reason": "Progressing",
                "message": "2/5 pools ready; rollout under way", "lastTransitionTime": "2030-01-01T00:00:00Z" }],
            "rollout": { "revision": "abc123", "phase": "Progressing", "progress": "Progressing 1/4",
                "wave": "2/3", "total": 4, "updated": 2, "done": 1 },
            "pools": [
                { "pool": "hangzhou", "helmRelease": "gw-hangzhou", "ready": "True", "rollout": "Done" },
                { "pool": "shanghai", "helmRelease": "gw-shanghai", "ready": "Unknown", "rollout": "Updating" },
                { "pool": "xian", "helmRelease": "gw-xian", "ready": "True", "rollout": "Waiting" }
            ]
        }
    }))
    .unwrap();
    let at = |row: PoolRow, rollout: &str| PoolRow {
        rollout: Some(rollout.to_string()),
        ..row
    };
    let rows = vec![
        row("beijing", "Offline", "no node of the pool is Ready"),
        at(row("hangzhou", "Ready", "Helm upgrade succeeded"), "Done"),
        at(row("shanghai", "Progressing", "upgrading"), "Updating"),
        row("wuhan", "Failed", "UpgradeFailed: port 70000"),
        at(row("xian", "Ready", "<script>alert(1)</script>"), "Waiting"),
    ];
    let region = |r: &str| BTreeMap::from([("region".to_string(), r.to_string())]);
    let labels = BTreeMap::from([
        ("beijing".to_string(), region("north")),
        ("hangzhou".to_string(), region("east")),
        ("shanghai".to_string(), region("east")),
        ("wuhan".to_string(), region("central")),
    ]);
    let status = app.status.clone().unwrap_or_default();
    vec![AppView::of(&app, &status, rows, &labels)]
}

async fn get_page(source: Fixed, uri: &str) -> (StatusCode, axum::http::HeaderMap, String) {
    send(router(Arc::new(source), None), Request::get(uri).body(Body::empty()).unwrap()).await
}

async fn send(router: Router, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
    let response = router.oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    (parts.status, parts.headers, String::from_utf8(bytes.to_vec()).unwrap())
}

#[test]
fn a_pools_state_is_the_rollouts_word_unless_flux_says_worse() {
    let r = |state| row("p", state, "");
    assert_eq!(CellState::of(&r("Ready"), None), CellState::Ready);
    assert_eq!(CellState::of(&r("Ready"), Some("Waiting")), CellState::Waiting);
    assert_eq!(CellState::of(&r("Ready"), Some("AwaitingApproval")), CellState::AwaitingApproval);
    assert_eq!(CellState::of(&r("Ready"), Some("Soaking")), CellState::Soaking);
    assert_eq!(CellState::of(&r("Ready"), Some("RolledBack")), CellState::RolledBack);
    assert_eq!(CellState::of(&r("Ready"), Some("Halted")), CellState::Halted);
    assert_eq!(CellState::of(&r("Progressing"), None), CellState::Updating);
    assert_eq!(CellState::of(&r("None"), None), CellState::Missing);
    // An outage, a failure or a suspension says more than the rollout.
    assert_eq!(CellState::of(&r("Offline"), Some("Updating")), CellState::Offline);
    assert_eq!(CellState::of(&r("Stalled"), Some("Soaking")), CellState::Failed);
    // Down, not yet for offlineAfter: the rollout waits for it.
    let down = PoolRow {
        down_since: Some("2030-01-01T00:00:00Z".into()),
        ..r("Ready")
    };
    assert_eq!(CellState::of(&down, Some("Waiting")), CellState::Unreachable);
    assert_eq!(
        CellState::of(
            &PoolRow {
                down_since: Some("t".into()),
                ..r("Failed")
            },
            None
        ),
        CellState::Failed
    );
    let suspended = PoolRow {
        suspended: true,
        ..r("Ready")
    };
    assert_eq!(CellState::of(&suspended, Some("Done")), CellState::Suspended);
    // Every state has its own word and symbol: none is told by colour alone.
    let words: std::collections::BTreeSet<_> = CellState::ALL.iter().map(|s| s.word()).collect();
    let symbols: std::collections::BTreeSet<_> = CellState::ALL.iter().map(|s| s.symbol()).collect();
    assert_eq!((words.len(), symbols.len()), (CellState::ALL.len(), CellState::ALL.len()));
    assert!(CellState::ALL
        .iter()
        .all(|s| CellState::of_word(&s.word().to_lowercase()) == Some(*s)));
}

#[test]
fn the_grid_groups_by_a_label_and_filters_by_state_and_text() {
    let app = &fleet()[0];
    let names = |groups: Vec<(String, Vec<&view::PoolView>)>| -> Vec<(String, Vec<String>)> {
        groups
            .into_iter()
            .map(|(g, p)| (g, p.iter().map(|p| p.row.pool.clone()).collect()))
            .collect()
    };
    let by_region = Filter {
        group: Some("region".into()),
        ..Filter::default()
    };
    assert_eq!(
        names(by_region.groups(app)),
        [
            ("central".to_string(), vec!["wuhan".to_string()]),
            ("east".to_string(), vec!["hangzhou".to_string(), "shanghai".to_string()]),
            ("north".to_string(), vec!["beijing".to_string()]),
            ("no region".to_string(), vec!["xian".to_string()]),
        ]
    );
    let failed = Filter {
        state: Some(CellState::Failed),
        ..Filter::default()
    };
    assert_eq!(names(failed.groups(app)), [(String::new(), vec!["wuhan".to_string()])]);
    let text = Filter {
        text: Some("EAST".into()),
        ..Filter::default()
    };
    assert_eq!(names(text.groups(app))[0].1, ["hangzhou", "shanghai"]);
    let counts: Vec<(&str, usize)> = app.counts().iter().map(|(s, n)| (s.word(), *n)).collect();
    assert_eq!(
        counts,
        [
            ("Failed", 1),
            ("Offline", 1),
            ("Waiting", 1),
            ("Updating", 1),
            ("Ready", 1)
        ]
    );
}

#[tokio::test]
async fn the_landing_page_lists_each_application_with_its_rollout() {
    let (status, headers, body) = get_page(Fixed(Ok(fleet())), "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"<a href="/apps/edge/gw">gw</a>"#), "{body}");
    assert!(
        body.contains("ingress-gateway") && body.contains("2/5") && body.contains("Progressing 1/4"),
        "{body}"
    );
    let csp = headers.get("content-security-policy").unwrap().to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && !csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(headers.get("x-content-type-options").unwrap(), "nosniff");
    assert_eq!(headers.get("cache-control").unwrap(), "no-store");
    let (_, _, empty) = get_page(Fixed(Ok(Vec::new())), "/").await;
    assert!(empty.contains("No NodePoolApplication is visible to you."), "{empty}");
}

#[tokio::test]
async fn an_applications_page_shows_every_pool_as_a_cell_with_word_and_symbol() {
    let (status, _, body) = get_page(Fixed(Ok(fleet())), "/apps/edge/gw?group=region&state=&q=").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"<body data-app="edge/gw">"#), "it follows its own application's changes");
    for (pool, state) in [
        ("beijing", "Offline"),
        ("hangzhou", "Ready"),
        ("shanghai", "Updating"),
        ("wuhan", "Failed"),
        ("xian", "Waiting"),
    ] {
        let cell = format!(r#"data-pool="{pool}" data-state="{state}""#);
        assert!(body.contains(&cell), "no cell {cell} in {body}");
    }
    assert!(body.contains("<h2>east <span class=\"count\">(2)</span></h2>"), "{body}");
    assert!(body.contains("Wave") && body.contains("2/3") && body.contains("abc123"), "{body}");
    // The hostile message is text, never markup, on the pool's page.
    assert!(!body.contains("<script>alert"), "{body}");
    let (_, _, xian) = get_page(Fixed(Ok(fleet())), "/apps/edge/gw/pools/xian").await;
    assert!(!xian.contains("<script>alert") && xian.contains("&lt;script&gt;alert(1)"), "{xian}");
    let (_, _, failed) = get_page(Fixed(Ok(fleet())), "/apps/edge/gw?state=failed").await;
    assert!(failed.contains(r#"data-pool="wuhan""#) && !failed.contains(r#"data-pool="hangzhou""#));
    assert!(failed.contains("1 of 5 pools"), "{failed}");
}

#[tokio::test]
async fn a_pools_page_shows_its_release_and_an_unknown_one_is_not_found() {
    let (status, _, body) = get_page(Fixed(Ok(fleet())), "/apps/edge/gw/pools/wuhan").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("edge/gw-wuhan") && body.contains("UpgradeFailed: port 70000"), "{body}");
    assert!(body.contains("region=central"), "{body}");
    let (status, _, body) = get_page(Fixed(Ok(fleet())), "/apps/edge/gw/pools/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("edge/gw has no pool nowhere."), "{body}");
    let (status, _, _) = get_page(Fixed(Ok(fleet())), "/apps/edge/other").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_cluster_that_cannot_be_read_is_said_so() {
    let (status, _, body) = get_page(Fixed(Err("the token has expired".into())), "/").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("cannot read from the cluster"), "{body}");
    assert!(body.contains("the token has expired"), "{body}");
}

#[tokio::test]
async fn a_read_only_console_has_no_action_and_serves_its_assets() {
    for uri in ["/", "/apps/edge/gw", "/apps/edge/gw/pools/wuhan"] {
        let (status, _, _) = send(router(Arc::new(Fixed(Ok(fleet()))), None), post(uri, "")).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "POST {uri}");
    }
    for uri in [
        "/apps/edge/gw/actions/pause",
        "/apps/edge/gw/pools/wuhan/actions/suspend",
    ] {
        let (status, _, _) = send(router(Arc::new(Fixed(Ok(fleet()))), None), post(uri, "csrf=x")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "POST {uri}: no action route at all");
    }
    let (_, _, body) = get_page(Fixed(Ok(fleet())), "/apps/edge/gw/pools/wuhan").await;
    assert!(body.contains("read-only") && !body.contains("<form class=\"action\""), "{body}");
    let (_, headers, js) = get_page(Fixed(Ok(fleet())), "/static/console.js").await;
    assert_eq!(headers.get("content-type").unwrap(), "text/javascript; charset=utf-8");
    assert!(js.contains("EventSource(\"/events\")"), "{js}");
    let (status, headers, css) = get_page(Fixed(Ok(fleet())), "/static/console.css").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.get("content-type").unwrap(), "text/css; charset=utf-8");
    assert!(css.contains(".state-offline"), "{css}");
}

fn post(uri: &str, form: &str) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(form.to_string()))
        .unwrap()
}

/// The CSRF token a page gives its reader.
fn token_in(body: &str) -> String {
    let at =
        body.find(r#"name="csrf" value=""#).expect("a form with a token") + r#"name="csrf" value=""#.len();
    let end = body[at..].find('"').expect("the token's closing quote");
    body[at..at + end].to_string()
}

#[tokio::test]
async fn a_console_that_may_act_offers_the_actions_with_a_token() {
    let console = router(Arc::new(Fixed(Ok(fleet()))), steering(kubeconfig_user()));
    let (_, _, body) =
        send(console.clone(), Request::get("/apps/edge/gw").body(Body::empty()).unwrap()).await;
    assert!(body.contains("acting as <strong class=\"user\">admin</strong>"), "{body}");
    for action in ["pause", "reconcile"] {
        assert!(body.contains(&format!(r#"action="/apps/edge/gw/actions/{action}""#)), "{action}: {body}");
    }
    assert!(!body.contains("actions/approve"), "no wave awaits approval: {body}");
    let token = token_in(&body);
    assert!(
        token
            .split_once('.')
            .is_some_and(|(expires, mac)| expires.parse::<u64>().is_ok() && mac.len() == 64),
        "{token}"
    );
    let (_, _, pool) =
        send(console, Request::get("/apps/edge/gw/pools/wuhan").body(Body::empty()).unwrap()).await;
    assert!(pool.contains(r#"action="/apps/edge/gw/pools/wuhan/actions/suspend""#), "{pool}");
}

#[tokio::test]
async fn an_action_without_the_pages_token_or_from_another_site_is_refused() {
    let console = router(Arc::new(Fixed(Ok(fleet()))), steering(kubeconfig_user()));
    let (_, _, body) =
        send(console.clone(), Request::get("/apps/edge/gw").body(Body::empty()).unwrap()).await;
    let token = token_in(&body);
    let (status, _, said) = send(console.clone(), post("/apps/edge/gw/actions/pause", "csrf=forged")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(said.contains("the form is stale or not the console"), "{said}");
    let mut cross = post("/apps/edge/gw/actions/pause", &format!("csrf={token}"));
    cross.headers_mut().insert("sec-fetch-site", "cross-site".parse().unwrap());
    let (status, _, said) = send(console.clone(), cross).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(said.contains("came from another site"), "{said}");
    let (status, _, _) = send(console, post("/apps/edge/gw/actions/explode", &format!("csrf={token}"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn behind_a_proxy_only_a_named_user_acts_with_their_own_token() {
    let console = router(Arc::new(Fixed(Ok(fleet()))), steering(proxy()));
    let (_, _, anonymous) =
        send(console.clone(), Request::get("/apps/edge/gw").body(Body::empty()).unwrap()).await;
    assert!(anonymous.contains("read-only") && !anonymous.contains("name=\"csrf\""), "{anonymous}");
    let as_user = |user: &str, request: Request<Body>| {
        let mut request = request;
        request.headers_mut().insert("x-forwarded-user", user.parse().unwrap());
        request
    };
    let get = |user| as_user(user, Request::get("/apps/edge/gw").body(Body::empty()).unwrap());
    let (_, _, alices) = send(console.clone(), get("alice")).await;
    assert!(alices.contains("<strong class=\"user\">alice</strong>"), "{alices}");
    let token = token_in(&alices);
    let (status, _, _) =
        send(console.clone(), post("/apps/edge/gw/actions/pause", &format!("csrf={token}"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "nobody signed in");
    let bobs = as_user("bob", post("/apps/edge/gw/actions/pause", &format!("csrf={token}")));
    let (status, _, _) = send(console, bobs).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "alice's token is not bob's");
}

#[test]
fn a_pools_detail_is_its_releases_conditions_and_history() {
    let release = json!({ "status": {
        "conditions": [{ "type": "Ready", "status": "False", "reason": "UpgradeFailed",
                         "message": "port 70000", "lastTransitionTime": "2030-01-01T00:00:00Z" }],
        "history": [{ "version": 3, "chartVersion": "1.1.0", "status": "failed", "lastDeployed": "2030-01-01T00:00:00Z" },
                    { "version": 2, "chartVersion": "1.0.0", "status": "superseded" }]
    } });
    let detail = view::PoolDetail::of_release(&release);
    assert_eq!(detail.conditions.len(), 1);
    assert_eq!(
        (detail.conditions[0].reason.as_str(), detail.conditions[0].message.as_str()),
        ("UpgradeFailed", "port 70000")
    );
    let history: Vec<(i64, &str, &str)> = detail
        .history
        .iter()
        .map(|h| (h.revision, h.chart_version.as_str(), h.status.as_str()))
        .collect();
    assert_eq!(history, [(3, "1.1.0", "failed"), (2, "1.0.0", "superseded")]);
    assert_eq!(view::PoolDetail::of_release(&json!({})), view::PoolDetail::default());
}

#[tokio::test]
async fn a_request_naming_another_host_gets_nothing_from_the_loopback_console() {
    let hosts =
        super::hosts::AllowedHosts::of_console("127.0.0.1:8090".parse().unwrap(), false, &[]).unwrap();
    let console =
        super::hosts::only(router(Arc::new(Fixed(Ok(fleet()))), steering(kubeconfig_user())), hosts);
    let named = |host: &str, request: Request<Body>| {
        let mut request = request;
        request.headers_mut().insert("host", host.parse().unwrap());
        request
    };
    let page = || Request::get("/apps/edge/gw").body(Body::empty()).unwrap();
    let (status, _, own) = send(console.clone(), named("localhost:8090", page())).await;
    assert_eq!(status, StatusCode::OK);
    let token = token_in(&own);
    // A page of evil.example rebound to 127.0.0.1: same origin to the
    // browser, but its name is in Host.
    let (status, headers, body) = send(console.clone(), named("evil.example:8090", page())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(!body.contains("csrf") && !body.contains("gw"), "{body}");
    assert!(body.contains("--allowed-hosts"), "{body}");
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    let forged = named("evil.example:8090", post("/apps/edge/gw/actions/pause", &format!("csrf={token}")));
    let (status, _, _) = send(console.clone(), forged).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = send(console, Request::get("/events").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no Host at all is no name of ours");
}

#[tokio::test]
async fn a_proxy_request_naming_system_masters_acts_as_nobody() {
    let console = router(Arc::new(Fixed(Ok(fleet()))), steering(proxy()));
    let forged = |request: Request<Body>| {
        let mut request = request;
        request.headers_mut().insert("x-forwarded-user", "mallory".parse().unwrap());
        request.headers_mut().insert("x-forwarded-groups", "system:masters".parse().unwrap());
        request
    };
    let (_, _, page) =
        send(console.clone(), forged(Request::get("/apps/edge/gw").body(Body::empty()).unwrap())).await;
    assert!(!page.contains("name=\"csrf\"") && !page.contains("mallory"), "no forms offered: {page}");
    let (status, _, said) = send(console, forged(post("/apps/edge/gw/actions/pause", "csrf=x"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(said.contains("system:masters"), "{said}");
}

#[test]
fn behind_a_proxy_the_console_listens_on_the_loopback_only() {
    use super::start::may_listen;
    use super::IdentityMode;
    let wide = "0.0.0.0:8090".parse().unwrap();
    let refused = may_listen(IdentityMode::Proxy, wide).unwrap_err().to_string();
    assert!(refused.contains("loopback only") && refused.contains("0.0.0.0:8090"), "{refused}");
    assert!(may_listen(IdentityMode::Proxy, "127.0.0.1:8090".parse().unwrap()).is_ok());
    assert!(may_listen(IdentityMode::Proxy, "[::1]:8090".parse().unwrap()).is_ok());
    assert!(may_listen(IdentityMode::None, wide).is_ok(), "read-only, anyone may read what it shows");
    let as_you = may_listen(IdentityMode::Kubeconfig, wide).unwrap_err().to_string();
    assert!(as_you.contains("would act as you"), "{as_you}");
}

#[tokio::test]
async fn a_user_past_the_cap_of_live_pages_is_told_so_and_others_are_not() {
    let console = router(Arc::new(Fixed(Ok(fleet()))), steering(proxy()));
    let stream_of = |user: &str| {
        let mut request = Request::get("/events").body(Body::empty()).unwrap();
        request.headers_mut().insert("x-forwarded-user", user.parse().unwrap());
        console.clone().oneshot(request)
    };
    // Open streams hold their places while their responses live.
    let mut open = Vec::new();
    for _ in 0..super::live::PER_USER {
        let response = stream_of("alice").await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        open.push(response);
    }
    let past = stream_of("alice").await.unwrap();
    assert_eq!(past.status(), StatusCode::TOO_MANY_REQUESTS);
    let said = axum::body::to_bytes(past.into_body(), 1 << 16).await.unwrap();
    assert!(String::from_utf8_lossy(&said).contains("live pages of this console open already"));
    assert_eq!(stream_of("bob").await.unwrap().status(), StatusCode::OK, "bob has his own");
    open.pop();
    assert_eq!(
        stream_of("alice").await.unwrap().status(),
        StatusCode::OK,
        "a closed page gives its place back"
    );
}

/// RBAC as a table: who may read which namespace.
struct Rbac(Vec<(&'static str, &'static str)>);

impl access::Access for Rbac {
    fn may_read<'a>(&'a self, who: &'a identity::Impersonate, namespace: &'a str) -> BoxFuture<'a, bool> {
        let allowed = self.0.iter().any(|(user, ns)| *user == who.user && *ns == namespace);
        Box::pin(async move { allowed })
    }
}

#[tokio::test]
async fn behind_a_proxy_each_person_sees_only_what_their_rbac_lets_them_list() {
    let rbac: Arc<dyn access::Access> = Arc::new(Rbac(vec![("alice", "edge")]));
    let console = router_with(Arc::new(Fixed(Ok(fleet()))), steering(proxy()), Some(rbac));
    let as_user = |user: Option<&str>, uri: &str| {
        let mut request = Request::get(uri).body(Body::empty()).unwrap();
        if let Some(user) = user {
            request.headers_mut().insert("x-forwarded-user", user.parse().unwrap());
        }
        request
    };
    let (status, _, alices) = send(console.clone(), as_user(Some("alice"), "/")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(alices.contains("/apps/edge/gw"), "{alices}");
    let (status, _, bobs) = send(console.clone(), as_user(Some("bob"), "/")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!bobs.contains("gw"), "bob may not list edge: {bobs}");
    // What bob may not read is the page of what is not there.
    let (status, _, hidden) = send(console.clone(), as_user(Some("bob"), "/apps/edge/gw")).await;
    let (_, _, missing) = send(console.clone(), as_user(Some("bob"), "/apps/edge/nothing")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(hidden.replace("gw", "nothing"), missing, "a 404 that tells nothing");
    let (status, _, _) = send(console.clone(), as_user(Some("bob"), "/apps/edge/gw/pools/wuhan")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, page) = send(console.clone(), as_user(Some("alice"), "/apps/edge/gw/pools/wuhan")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    // Nobody signed in, or a forged system: group: nothing at all.
    for uri in ["/", "/apps/edge/gw", "/apps/edge/gw/pools/wuhan", "/events"] {
        let (status, _, body) = send(console.clone(), as_user(None, uri)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
        assert!(!body.contains("gw") && body.contains("Nobody is signed in"), "{uri}: {body}");
    }
    let mut masters = as_user(Some("alice"), "/");
    masters.headers_mut().insert("x-forwarded-groups", "system:masters".parse().unwrap());
    let (status, _, body) = send(console, masters).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!body.contains("gw") && body.contains("system:masters"), "{body}");
}

fn signed_in_console(key: &[u8]) -> Arc<signin::SignIn> {
    let provider = signin::Provider {
        issuer: "http://127.0.0.1:9".into(),
        client_id: "console".into(),
        client_secret: None,
        redirect: "http://127.0.0.1:8090/auth/callback".into(),
        scopes: Vec::new(),
        claims: signin::Claims {
            username: "sub".into(),
            username_prefix: String::new(),
            groups: "groups".into(),
            groups_prefix: String::new(),
        },
        lifetime: std::time::Duration::from_secs(3600),
        ca: None,
    };
    Arc::new(signin::SignIn::new(provider, key).unwrap())
}

#[tokio::test]
async fn a_console_that_signs_people_in_shows_nothing_before_and_after_and_honours_no_header() {
    let key = b"0123456789abcdef0123456789abcdef";
    let signin = signed_in_console(key);
    let rbac: Arc<dyn access::Access> = Arc::new(Rbac(vec![("alice", "edge")]));
    let console =
        router_with(Arc::new(Fixed(Ok(fleet()))), steering(Identity::Oidc(Arc::clone(&signin))), Some(rbac));
    let expires = std::time::SystemTime::now() + std::time::Duration::from_secs(600);
    let session = |user: &str| signin::Session {
        user: user.into(),
        groups: Vec::new(),
        expires: expires.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs(),
        id: format!("{user}-1"),
    };
    let request = |uri: &str, cookie: Option<String>| {
        let mut request = Request::get(uri).body(Body::empty()).unwrap();
        // Forged headers name alice in system:masters: no proxy is there to
        // vouch for them, so they name nobody.
        request.headers_mut().insert("x-forwarded-user", "alice".parse().unwrap());
        request.headers_mut().insert("x-forwarded-groups", "system:masters".parse().unwrap());
        if let Some(cookie) = cookie {
            request.headers_mut().insert("cookie", cookie.parse().unwrap());
        }
        request
    };
    // Nobody signed in: each page sends the browser to sign in, and back.
    for (uri, back) in [
        ("/", "%2F"),
        ("/apps/edge/gw?state=failed", "%2Fapps%2Fedge%2Fgw%3Fstate%3Dfailed"),
    ] {
        let (status, headers, body) = send(console.clone(), request(uri, None)).await;
        assert_eq!(status, StatusCode::SEE_OTHER, "{uri}");
        assert_eq!(headers["location"], format!("/auth/sign-in?back={back}"));
        assert!(!body.contains("gw"), "{body}");
    }
    let (status, _, _) = send(console.clone(), request("/events", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // alice's session: her page, with her name and a way out.
    let alice = signin.cookie_header(&session("alice"));
    let (status, _, page) = send(console.clone(), request("/", Some(alice.clone()))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("/apps/edge/gw") && page.contains(">alice<"), "{page}");
    assert!(page.contains("action=\"/auth/sign-out\""), "{page}");
    // bob's: his RBAC lets him list nothing here.
    let (status, _, page) =
        send(console.clone(), request("/", Some(signin.cookie_header(&session("bob"))))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!page.contains("/apps/edge/gw") && page.contains(">bob<"), "{page}");
    // A session sealed under another key is nobody's.
    let forged = signed_in_console(b"another key, another key, another key").cookie_header(&session("alice"));
    let (status, _, _) = send(console.clone(), request("/", Some(forged))).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    // Signing out takes the session back, with the page's own token only.
    let token = token_in(&send(console.clone(), request("/", Some(alice.clone()))).await.2);
    let mut out = post("/auth/sign-out", "csrf=stale");
    out.headers_mut().insert("cookie", alice.parse().unwrap());
    let (status, _, _) = send(console.clone(), out).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut out = post("/auth/sign-out", &format!("csrf={token}"));
    out.headers_mut().insert("cookie", alice.parse().unwrap());
    let (status, headers, page) = send(console.clone(), out).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Signed out") && !page.contains("gw"), "{page}");
    let cleared = headers["set-cookie"].to_str().unwrap();
    assert!(
        cleared.starts_with("nodepool-fanout-session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
}

#[tokio::test]
async fn sign_in_routes_exist_only_where_the_console_signs_people_in() {
    for steering in [None, steering(proxy()), steering(kubeconfig_user())] {
        let console = router(Arc::new(Fixed(Ok(fleet()))), steering);
        let (status, _, _) =
            send(console.clone(), Request::get("/auth/sign-in").body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _, _) = send(console, post("/auth/sign-out", "csrf=x")).await;
        assert!(status == StatusCode::NOT_FOUND || status == StatusCode::METHOD_NOT_ALLOWED, "{status}");
    }
}

#[tokio::test]
async fn the_editor_previews_what_it_can_and_says_what_is_wrong() {
    let console = router(Arc::new(Fixed(Ok(fleet()))), steering(kubeconfig_user()));
    let (status, _, page) = send(console.clone(), Request::get("/new").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("kind: NodePoolApplication") && page.contains("Copy YAML"), "{page}");
    let token = token_in(&page);
    // The template is an application as it stands.
    let template = page
        .split("name=\"yaml\"")
        .nth(1)
        .and_then(|t| t.split_once('>'))
        .map(|(_, t)| t)
        .unwrap();
    let template = template.split("</textarea>").next().unwrap().replace("&quot;", "\"");
    assert!(crate::cli::render::parse_app(&template, "default").is_ok(), "{template}");
    let form = |yaml: &str, action: &str| {
        serde_urlencoded::to_string([("csrf", token.as_str()), ("yaml", yaml), ("action", action)]).unwrap()
    };
    // Not an application: said, and the YAML kept to fix.
    let (status, _, page) = send(console.clone(), post("/editor", &form("kind: [", "preview"))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("role=\"alert\"") && page.contains("kind: ["), "{page}");
    // An application over no pool: the preview says so.
    let yaml = super::editor::editable(
        &serde_json::from_value::<NodePoolApplication>(json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "gw", "namespace": "edge", "uid": "u1", "resourceVersion": "7" },
            "spec": { "interval": "10m", "pools": { "selector": { "matchLabels": { "region": "east" } } },
                      "chart": { "spec": { "chart": "gw", "version": "1.0.0",
                                 "sourceRef": { "kind": "HelmRepository", "name": "charts" } } } }
        }))
        .unwrap(),
    );
    assert!(!yaml.contains("uid") && !yaml.contains("resourceVersion"), "{yaml}");
    let (status, _, page) = send(console.clone(), post("/editor", &form(&yaml, "preview"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Preview: 0 pools") && page.contains("no node pool matches"), "{page}");
    // As one types: what it selects, or why that cannot be told.
    let pools = |yaml: &str| serde_urlencoded::to_string([("csrf", token.as_str()), ("yaml", yaml)]).unwrap();
    let (status, _, fragment) = send(console.clone(), post("/editor/pools", &pools(&yaml))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(fragment.contains("selects no pool"), "{fragment}");
    let (_, _, fragment) = send(console.clone(), post("/editor/pools", &pools("kind: ["))).await;
    assert!(fragment.contains("class=\"error\""), "{fragment}");
    // From the form, field by field: the YAML of the same object.
    let fields = serde_urlencoded::to_string([
        ("csrf", token.as_str()),
        ("name", "gw"),
        ("namespace", "edge"),
        ("chart", "gw"),
        ("version", "1.0.0"),
        ("source_kind", "HelmRepository"),
        ("source_name", "charts"),
        ("selector", "region=east, tier = edge"),
        ("values", "controller: { replicas: 2 }"),
        ("overrides", "- { pools: { names: [hangzhou] }, values: { controller: { replicas: 3 } } }"),
    ])
    .unwrap();
    let (status, _, page) = send(console.clone(), post("/editor/form", &fields)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let yaml = page
        .split("name=\"yaml\"")
        .nth(1)
        .and_then(|t| t.split_once('>'))
        .map(|(_, t)| t)
        .unwrap();
    let yaml = yaml.split("</textarea>").next().unwrap().replace("&quot;", "\"");
    let app = crate::cli::render::parse_app(&yaml, "default").expect("the form makes an application");
    let values = serde_json::to_value(&app.spec.values).unwrap();
    assert_eq!(values["controller"]["replicas"], json!(2), "{yaml}");
    assert!(yaml.contains("tier: edge") && yaml.contains("hangzhou"), "{yaml}");
    let bad = serde_urlencoded::to_string([("csrf", token.as_str()), ("selector", "region")]).unwrap();
    let (status, _, page) = send(console.clone(), post("/editor/form", &bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("key=value"), "{page}");
    // A stale token is refused, whatever the button.
    let stale = serde_urlencoded::to_string([("csrf", "1.00"), ("yaml", yaml.as_str()), ("action", "apply")])
        .unwrap();
    let (status, _, _) = send(console.clone(), post("/editor", &stale)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A delete wants the name typed.
    let wrong = serde_urlencoded::to_string([("csrf", token.as_str()), ("confirm", "g")]).unwrap();
    let (status, _, page) = send(console.clone(), post("/apps/edge/gw/delete", &wrong)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.contains("type the application") && page.contains("gw"), "{page}");
    // A read-only console has no editor.
    let read_only = router(Arc::new(Fixed(Ok(fleet()))), None);
    let (status, _, _) = send(read_only, Request::get("/new").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
