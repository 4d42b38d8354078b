use super::*;
use serde_json::json;

fn provider(redirect: &str) -> Provider {
    Provider {
        issuer: "https://login.example.test".into(),
        client_id: "console".into(),
        client_secret: None,
        redirect: redirect.into(),
        scopes: vec!["email".into()],
        claims: claims("sub", "groups"),
        lifetime: Duration::from_secs(3600),
        ca: None,
    }
}

fn claims(username: &str, groups: &str) -> Claims {
    Claims {
        username: username.into(),
        username_prefix: String::new(),
        groups: groups.into(),
        groups_prefix: String::new(),
    }
}

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

fn console(key: &[u8]) -> SignIn {
    SignIn::new(provider("http://127.0.0.1:8090/auth/callback"), key).expect("a sign-in")
}

fn headers(cookie: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(axum::http::header::COOKIE, cookie.parse().expect("a header value"));
    headers
}

fn alice(expires: u64) -> Session {
    Session {
        user: "alice".into(),
        groups: vec!["console-admins".into()],
        expires,
        id: "s1".into(),
    }
}

#[test]
fn a_session_sealed_by_one_replica_is_read_by_another_with_the_same_key_only() {
    let now = SystemTime::now();
    let session = alice(seconds(now) + 60);
    let cookie = console(KEY).cookie_header(&session);
    assert!(cookie.starts_with("nodepool-fanout-session="), "{cookie}");
    assert!(!cookie.contains("alice"), "sealed, not readable: {cookie}");
    assert_eq!(console(KEY).session_at(&headers(&cookie), now), Some(session.clone()));
    let other = console(b"another key, another key, another key");
    assert_eq!(other.session_at(&headers(&cookie), now), None);
    // Expired, it is nobody's.
    assert_eq!(console(KEY).session_at(&headers(&cookie), now + Duration::from_secs(61)), None);
}

#[test]
fn a_session_cookie_written_by_hand_or_altered_is_nobody() {
    let now = SystemTime::now();
    let by_hand = r#"nodepool-fanout-session={"user":"alice","groups":[],"expires":99999999999}"#;
    assert_eq!(console(KEY).session_at(&headers(by_hand), now), None);
    let cookie = console(KEY).cookie_header(&alice(seconds(now) + 60));
    let mut altered = cookie.into_bytes();
    let last = altered.len() - 2;
    altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).expect("ASCII");
    assert_eq!(console(KEY).session_at(&headers(&altered), now), None);
}

#[test]
fn over_tls_the_session_cookie_is_secure_and_kept_to_its_host() {
    let secure = SignIn::new(provider("https://fleet.example.test/auth/callback"), KEY).expect("a sign-in");
    let cookie = secure.cookie_header(&alice(seconds(SystemTime::now()) + 60));
    assert!(cookie.starts_with("__Host-nodepool-fanout-session="), "{cookie}");
    let set = secure.cookie(SESSION_SECURE, "x".into(), "/", Duration::from_secs(60)).to_string();
    for attribute in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/", "Max-Age=60"] {
        assert!(set.contains(attribute), "{attribute} in {set}");
    }
    let plain = console(KEY).cookie(SESSION, "x".into(), "/", Duration::from_secs(60)).to_string();
    assert!(!plain.contains("Secure"), "{plain}");
}

#[test]
fn the_configuration_is_refused_with_what_to_fix() {
    let short = SignIn::new(provider("http://127.0.0.1:8090/auth/callback"), b"short");
    assert!(matches!(short, Err(ConfigError::Key(5))));
    let elsewhere = SignIn::new(provider("http://127.0.0.1:8090/oauth2/callback"), KEY);
    assert!(matches!(elsewhere, Err(ConfigError::RedirectPath(_))));
    let not_a_url = SignIn::new(provider("fleet.example.test/auth/callback"), KEY);
    assert!(matches!(not_a_url, Err(ConfigError::Redirect(_))));
    let mut bad_ca = provider("http://127.0.0.1:8090/auth/callback");
    bad_ca.ca = Some(b"not a certificate".to_vec());
    assert!(matches!(SignIn::new(bad_ca, KEY), Err(ConfigError::Ca(_))));
}

#[test]
fn the_user_and_groups_are_read_as_the_api_server_reads_them() {
    let token = json!({ "sub": "u-123", "email": "alice@example.test", "email_verified": true,
        "preferred_username": "alice", "groups": ["admins", " ", "viewers"], "team": "edge" });
    assert_eq!(
        person(&token, &claims("sub", "groups")).ok(),
        Some(("u-123".to_string(), vec!["admins".to_string(), "viewers".to_string()]))
    );
    let prefixed = Claims {
        username_prefix: "oidc:".into(),
        groups_prefix: "oidc:".into(),
        ..claims("email", "team")
    };
    assert_eq!(
        person(&token, &prefixed).ok(),
        Some(("oidc:alice@example.test".to_string(), vec!["oidc:edge".to_string()]))
    );
    let no_groups = person(&token, &claims("preferred_username", "roles")).ok();
    assert_eq!(no_groups, Some(("alice".to_string(), Vec::new())));
    assert!(
        matches!(person(&token, &claims("login", "groups")), Err(SignInError::NoUser(c)) if c == "login")
    );
    let unverified = json!({ "email": "alice@example.test", "email_verified": false });
    assert!(matches!(
        person(&unverified, &claims("email", "groups")),
        Err(SignInError::EmailNotVerified)
    ));
}

#[test]
fn kubernetes_own_names_never_sign_in() {
    let master = json!({ "sub": "mallory", "groups": ["system:masters"] });
    assert!(
        matches!(person(&master, &claims("sub", "groups")), Err(SignInError::System(g)) if g.contains("system:masters"))
    );
    let node = json!({ "sub": "system:node:edge-1" });
    assert!(matches!(person(&node, &claims("sub", "groups")), Err(SignInError::System(_))));
    // A prefix that makes a system name is refused too.
    let prefixed = Claims {
        username_prefix: "system:".into(),
        ..claims("sub", "groups")
    };
    assert!(person(&json!({ "sub": "anonymous" }), &prefixed).is_err());
}

#[test]
fn a_sign_in_comes_back_only_to_the_console_s_own_pages() {
    assert_eq!(local_path("/apps/edge/gw?state=failed"), "/apps/edge/gw?state=failed");
    for elsewhere in [
        "https://evil.example/",
        "//evil.example/",
        "/\\evil.example",
        "",
        "apps",
    ] {
        assert_eq!(local_path(elsewhere), "/", "{elsewhere}");
    }
}
