//! What each person sees: their RBAC behind a proxy, and the console's
//! own sign-in.

use super::*;

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
