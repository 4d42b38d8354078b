//! Progressive rollouts with maintenance windows: a pool outside its
//! window is updated once it opens.
use super::*;

/// A cron schedule that first matches a minute or two from now (UTC), and
/// that moment.
fn opening_soon() -> (String, Timestamp) {
    let now = Timestamp::now().as_second();
    // The next whole minute at least 60 s away, so the change is written
    // and seen waiting before the window opens.
    let opens = (now + 60).div_euclid(60) * 60 + 60;
    let at = Timestamp::from_second(opens).expect("a time in range");
    let minute = at.strftime("%M").to_string();
    let hour = at.strftime("%H").to_string();
    (
        format!(
            "{} {} * * *",
            minute.trim_start_matches('0').max("0"),
            hour.trim_start_matches('0').max("0")
        ),
        at,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_outside_its_maintenance_window_is_updated_only_once_it_opens() -> TestResult {
    let (env, pools, controller) = three_pools("window").await;
    let (schedule, opens) = opening_soon();
    let windows = json!([{ "schedule": schedule, "duration": "10m", "pools": { "names": [pools[0]] } }]);
    let mut app = ingress_app(&env, json!({ "rollout": { "windows": windows } }));
    // New pools install at once, window or not.
    apply_app(&env, &app).await?;
    wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    // The second pool keeps its own hours, on its NodePool: January only.
    let nodepools: Api<kube::api::DynamicObject> =
        Api::all_with(env.client.clone(), &support::nodepool_resource());
    let own = json!({ "metadata": { "annotations": { "apps.fanout.dev/maintenance-window":
        r#"{"schedule": "0 3 1 1 *", "duration": "1h", "timeZone": "Europe/Berlin"}"# } } });
    nodepools.patch(&pools[1], &PatchParams::default(), &Patch::Merge(&own)).await?;
    let before = hashes(&env).await;

    with_log_level(&mut app, "debug");
    apply_app(&env, &app).await?;
    let waiting =
        wait_app(&env, &controller, "the third pool updated, two waiting", ROLLOUT_TIMEOUT, |app| {
            let state = |pool: &str| {
                let entry = support::apps::pool_status(app, pool).cloned().unwrap_or_default();
                (entry["rollout"].as_str().map(String::from), entry["reason"].as_str().map(String::from))
            };
            let waiting = (Some("Waiting".to_string()), Some("OutsideMaintenanceWindow".to_string()));
            match (state(&pools[0]), state(&pools[1]), state(&pools[2]).0.as_deref()) {
                (a, b, Some("Done")) if a == waiting && b == waiting => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    assert!(Timestamp::now() < opens, "the window opened before the check: make it later");
    let message = |pool: &str| {
        support::apps::pool_status(&waiting, pool)
            .and_then(|p| p["message"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let expected = opens.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    assert!(message(&pools[0]).contains(&expected), "{}", message(&pools[0]));
    assert!(
        message(&pools[1]).contains("-01-01T02:00:00Z"),
        "03:00 in Berlin in winter: {}",
        message(&pools[1])
    );
    let during = hashes(&env).await;
    assert_eq!(during[&pools[0]], before[&pools[0]], "written outside its window");
    assert_eq!(during[&pools[1]], before[&pools[1]], "written outside its own window");

    // The window opens: the pool is updated on its own; the other still waits.
    let updated =
        wait_app(&env, &controller, "the first pool updated in its window", ROLLOUT_TIMEOUT, |app| {
            let entry = support::apps::pool_status(app, &pools[0]).cloned().unwrap_or_default();
            match entry["rollout"].as_str() {
                Some("Done") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    let written = releases_by_pool(&env).await[&pools[0]].clone();
    let written_at: Timestamp = annotation(&written, WRITTEN_AT).parse()?;
    assert!(written_at >= opens, "written at {written_at}, before its window opened at {opens}");
    assert_eq!(updated["status"]["rollout"]["phase"], "Progressing", "the second pool still waits");
    assert_eq!(hashes(&env).await[&pools[1]], before[&pools[1]]);
    env.cleanup().await;
    Ok(())
}
