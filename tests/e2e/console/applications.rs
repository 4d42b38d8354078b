//! Applications in the console: an open page follows its own, and one
//! is previewed, applied, edited and deleted from the editor.
use super::*;

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
