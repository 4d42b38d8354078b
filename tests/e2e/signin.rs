//! The console's own sign-in, end to end: `nodepool-fanout ui --identity
//! oidc` against the local plane's OpenID provider (zitadel/oidc's, with
//! the users alice, bob and mallory) and the real API server, whose RBAC
//! decides what each person reads and does. A real browser signs in
//! through the provider's own login form.

use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::json;

use crate::console::Ui;
use crate::support;
use nodepool_fanout::api::NodePoolApplication;
use support::apps::{apply_app, ingress_app};
use support::browser::Driver;
use support::{ensure_crd, wait_for, TestEnv, TestResult};

/// The key two replicas share, as the Secret would give it.
const SHARED_KEY: &str = "0123456789abcdef0123456789abcdef-shared";

fn issuer() -> String {
    support::gitops::service_address("oidc-issuer")
}

/// A console over every namespace that signs people in at the plane's
/// provider, with `key`.
async fn console(env: &TestEnv, key: &str) -> Ui {
    let issuer = issuer();
    let flags = [
        "--identity",
        "oidc",
        "--oidc-issuer-url",
        &issuer,
        "--oidc-client-id",
        "console",
    ];
    let vars = [("CONSOLE_SESSION_KEY", key)];
    Ui::serving(None, &env.namespace, &flags, support::kubeconfig(), &vars).await
}

/// Lets `group` read the namespace's applications and releases, and, when
/// `steer`, change its applications (pause, resume, approve, reconcile).
async fn grant(env: &TestEnv, group: &str, steer: bool) -> TestResult {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let apps = match steer {
        true => json!(["get", "list", "watch", "patch"]),
        false => json!(["get", "list", "watch"]),
    };
    let role: Role = serde_json::from_value(json!({
        "metadata": { "name": group },
        "rules": [
            { "apiGroups": ["apps.fanout.dev"], "resources": ["nodepoolapplications"], "verbs": apps },
            { "apiGroups": ["helm.toolkit.fluxcd.io"], "resources": ["helmreleases"], "verbs": ["get", "list", "watch"] }
        ]
    }))?;
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": { "name": group },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": group },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group }]
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

type Checked<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Opens `url`; the console sends the browser to the provider, where
/// `user` signs in with the login form, and back.
async fn sign_in(browser: &Client, url: &str, user: &str) -> Checked<()> {
    browser.goto(url).await?;
    let name = browser
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("#username"))
        .await?;
    name.send_keys(user).await?;
    browser
        .find(Locator::Css("#password"))
        .await?
        .send_keys(&format!("{user}-password"))
        .await?;
    browser.find(Locator::Css("button[type=submit]")).await?.click().await?;
    Ok(())
}

/// The page's HTML once it holds `text` (a click's page may take a moment).
async fn page_with(browser: &Client, text: &str) -> String {
    let mut last = String::new();
    for _ in 0..100 {
        last = browser.source().await.unwrap_or_default();
        if last.contains(text) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the page never said {text:?}: {last}");
}

/// The page's HTML once its address holds `part`.
async fn page_at(browser: &Client, part: &str) -> String {
    let mut last = String::new();
    for _ in 0..100 {
        let url = browser.current_url().await.map(|u| u.to_string()).unwrap_or_default();
        if url.contains(part) {
            if let Ok(source) = browser.source().await {
                return source;
            }
        }
        last = url;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the browser never reached {part}: it is at {last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn people_sign_in_read_and_steer_as_their_rbac_says_across_replicas_and_sign_out() -> TestResult {
    // Namespace A: console-admins (alice) read and steer. Namespace B:
    // console-viewers (bob) read. Bound by group, as a team would bind them.
    let a = TestEnv::new("signin-a").await;
    let b = TestEnv::new("signin-b").await;
    ensure_crd(&a.client).await;
    for env in [&a, &b] {
        apply_app(env, &ingress_app(env, json!({}))).await?;
    }
    grant(&a, "console-admins", true).await?;
    grant(&b, "console-viewers", false).await?;
    let listed = |env: &TestEnv| format!("data-app=\"{}/ingress\"", env.namespace);
    let page_of = |env: &TestEnv| format!("/apps/{}/ingress", env.namespace);

    let one = console(&a, SHARED_KEY).await;
    let two = console(&a, SHARED_KEY).await;
    let other = console(&a, "another-key-another-key-another-key").await;
    let issuer = issuer();

    let driver = Driver::start().await;
    let browser = driver.browser().await;
    let checked: Checked<()> = async {
        // Nothing before sign-in: the console sends the browser to the provider.
        browser.goto(&format!("{}{}", one.address, page_of(&a))).await?;
        let login = page_at(&browser, &issuer).await;
        assert!(!login.contains(&a.namespace), "nothing of the fleet before sign-in");

        // alice signs in and comes back to the page she asked for.
        sign_in(&browser, &format!("{}{}", one.address, page_of(&a)), "alice").await?;
        let page = page_at(&browser, &format!("{}{}", one.address, page_of(&a))).await;
        assert!(page.contains("acting as") && page.contains(">alice<"), "{page}");
        assert!(page.contains("Sign out"), "{page}");
        let landing =
            wait_for("A's application on alice's landing page", Duration::from_secs(30), || async {
                browser.goto(&format!("{}/", one.address)).await.map_err(|e| e.to_string())?;
                let page = browser.source().await.map_err(|e| e.to_string())?;
                match page.contains(&listed(&a)) {
                    true => Ok(page),
                    false => Err(page),
                }
            })
            .await;
        assert!(!landing.contains(&listed(&b)), "alice may not list B: {landing}");

        // She may steer A: her pause is done, as her.
        browser.goto(&format!("{}{}", one.address, page_of(&a))).await?;
        browser.find(Locator::Css("button[data-action='pause']")).await?.click().await?;
        let done = page_at(&browser, "notice=").await;
        assert!(done.contains("alice paused the rollout"), "{done}");

        // The other replica, given the same key, takes her session; one
        // with another key does not, and sends her to sign in.
        browser.goto(&format!("{}/", two.address)).await?;
        let shared = browser.source().await?;
        assert!(shared.contains(&listed(&a)) && shared.contains(">alice<"), "{shared}");
        browser.goto(&format!("{}/", other.address)).await?;
        page_at(&browser, &issuer).await;

        // Signed out, nothing is shown until she signs in again.
        browser.goto(&format!("{}/", one.address)).await?;
        browser.find(Locator::Css("form.sign-out button")).await?.click().await?;
        let out = page_with(&browser, "Signed out").await;
        assert!(!out.contains(&listed(&a)), "{out}");
        browser.goto(&format!("{}/", one.address)).await?;
        page_at(&browser, &issuer).await;

        // bob signs in: B, not A, and his pause is refused by the API server.
        sign_in(&browser, &format!("{}/", one.address), "bob").await?;
        let page = page_at(&browser, &format!("{}/", one.address)).await;
        assert!(page.contains(">bob<") && page.contains(&listed(&b)), "{page}");
        assert!(!page.contains(&listed(&a)), "bob may not list A: {page}");
        browser.goto(&format!("{}{}", one.address, page_of(&a))).await?;
        let hidden = browser.source().await?;
        assert!(hidden.contains("is visible to you") && !hidden.contains("Pause"), "{hidden}");
        browser.goto(&format!("{}{}", one.address, page_of(&b))).await?;
        browser.find(Locator::Css("button[data-action='pause']")).await?.click().await?;
        page_with(&browser, "refused it as bob").await;

        // mallory's provider puts her in system:masters: refused.
        browser.delete_all_cookies().await?;
        sign_in(&browser, &format!("{}/", one.address), "mallory").await?;
        let page = page_at(&browser, &format!("{}/auth/callback", one.address)).await;
        assert!(page.contains("system:masters") && !page.contains(&listed(&a)), "{page}");
        Ok(())
    }
    .await;
    let _ = browser.close().await;
    checked.map_err(|e| e.to_string())?;

    // alice's pause was hers: the Event names her; bob changed nothing.
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(a.client.clone(), &a.namespace);
    let paused: Vec<String> = (events.list(&Default::default()).await?.items.into_iter())
        .filter(|e| e.reason.as_deref() == Some("RolloutPausedByUser"))
        .filter_map(|e| e.note)
        .collect();
    assert!(paused.iter().any(|note| note.contains("alice")), "{paused:?}");
    let apps: kube::Api<NodePoolApplication> = kube::Api::namespaced(b.client.clone(), &b.namespace);
    let untouched = apps.get("ingress").await?;
    assert!(untouched.spec.rollout.as_ref().and_then(|r| r.paused) != Some(true), "bob paused B");
    a.cleanup().await;
    b.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn headers_name_nobody_to_a_console_that_signs_people_in() -> TestResult {
    // Behind no proxy, a request that names a user or group in headers is
    // a request from nobody: sent to sign in, never served, never acted on.
    let env = TestEnv::new("forged").await;
    ensure_crd(&env.client).await;
    apply_app(&env, &ingress_app(&env, json!({}))).await?;
    let ui = console(&env, SHARED_KEY).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let forged = |request: reqwest::RequestBuilder| {
        request
            .header("X-Forwarded-User", "alice")
            .header("X-Forwarded-Groups", "system:masters")
            .header("X-Forwarded-Email", "alice@example.test")
    };
    let landing = forged(client.get(format!("{}/", ui.address))).send().await?;
    assert_eq!(landing.status(), reqwest::StatusCode::SEE_OTHER);
    let to = landing.headers()["location"].to_str()?.to_string();
    assert_eq!(to, "/auth/sign-in?back=%2F");
    assert!(!landing.text().await?.contains(&env.namespace));
    let events = forged(client.get(format!("{}/events", ui.address))).send().await?;
    assert_eq!(events.status(), reqwest::StatusCode::UNAUTHORIZED);
    let action = forged(client.post(format!("{}/apps/{}/ingress/actions/pause", ui.address, env.namespace)))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=x")
        .send()
        .await?;
    assert_eq!(action.status(), reqwest::StatusCode::UNAUTHORIZED);
    // A cookie of the right name that the console did not seal.
    let made_up = client
        .get(format!("{}/", ui.address))
        .header("cookie", r#"nodepool-fanout-session={"user":"alice","groups":[],"expires":99999999999}"#)
        .send()
        .await?;
    assert_eq!(made_up.status(), reqwest::StatusCode::SEE_OTHER);
    // The sign-in goes to the plane's provider, with PKCE.
    let start = client.get(format!("{}{to}", ui.address)).send().await?;
    assert_eq!(start.status(), reqwest::StatusCode::SEE_OTHER);
    let provider = start.headers()["location"].to_str()?.to_string();
    assert!(provider.starts_with(&issuer()), "{provider}");
    assert!(provider.contains("code_challenge_method=S256"), "{provider}");
    let pending = start.headers()["set-cookie"].to_str()?;
    assert!(pending.contains("HttpOnly") && pending.contains("SameSite=Lax"), "{pending}");
    // A foreign Host gets nothing, on the loopback (DNS rebinding).
    let port = ui.address.rsplit(':').next().unwrap_or_default();
    let rebound = client
        .get(format!("{}/", ui.address))
        .header("host", format!("evil.example:{port}"))
        .send()
        .await?;
    assert_eq!(rebound.status(), reqwest::StatusCode::FORBIDDEN);
    env.cleanup().await;
    Ok(())
}
