//! An operator steering a rollout from the browser: pause and resume.
use super::*;

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
