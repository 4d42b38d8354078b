//! Acting from the console: the forms and their tokens, the proxy's
//! users, the hosts it answers and the live pages' cap.

use super::*;

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
