//! The console's routes and pages, in process, over a fleet built in the
//! test: what each page shows, the grid's grouping and filters, escaping,
//! the security headers, and that nothing is writable.

mod acting;
mod editor_page;
mod per_person;

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
