//! Who may see what: a rebound page gets nothing from the loopback
//! console, and a person reads only the namespaces their RBAC lets them
//! list.
use super::*;

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
