//! Sites cut off: an unhealthy control plane or a stopped API server
//! makes a site offline, not failed, and it is caught up when it returns.
use super::*;
use std::collections::BTreeMap;
use support::apps::releases_by_pool;

#[tokio::test]
async fn a_site_whose_control_plane_is_unhealthy_is_offline_and_caught_up_when_it_recovers() -> TestResult {
    let _sites = SITES.lock().await;
    let env = with_sites("sites-health", &["site-1", "site-2"]).await;
    let controller = RunningController::start(&env.namespace);
    // Offline as soon as the manager says so: the grace has its own test.
    let at_once = json!({ "rollout": { "offlineAfter": "0s" } });
    apply_app(&env, &sites_app(&env, at_once)).await?;
    wait_named(&env, &controller, "gw", "both sites Ready", READY_TIMEOUT, ready_is("2/2")).await;
    // The manager says site-2 is down; a change comes.
    set_health(&env, "site-2", false).await;
    let change =
        json!({ "rollout": { "offlineAfter": "0s" }, "values": gateway_values("{{pool.labels.region}}-v2") });
    apply_app(&env, &sites_app(&env, change.clone())).await?;
    let app = wait_named(&env, &controller, "gw", "site-1 changed, site-2 offline", READY_TIMEOUT, |app| {
        let offline = pool_status(app, "site-2").ok_or("no site-2")?;
        if offline["offline"] != true || offline["reason"] != "PoolOffline" {
            return Err(format!("site-2: {offline}"));
        }
        ready_is("1/2 (1 offline)")(app)
    })
    .await;
    let message = pool_status(&app, "site-2").and_then(|p| p["message"].as_str()).unwrap_or_default();
    assert!(message.contains("control plane is not healthy"), "{message}");
    wait_gateway(&env, "site-1", "north-v2").await;
    // Not a failure: nobody must act.
    let conditions = app["status"]["conditions"].as_array().cloned().unwrap_or_default();
    assert!(!conditions.iter().any(|c| c["type"] == "Stalled"), "{conditions:?}");
    set_health(&env, "site-2", true).await;
    wait_named(&env, &controller, "gw", "site-2 caught up", READY_TIMEOUT, ready_is("2/2")).await;
    wait_gateway(&env, "site-2", "south-v2").await;
    drop(controller);
    env.cleanup().await;
    Ok(())
}

#[tokio::test]
async fn a_site_whose_api_server_stops_is_offline_not_failed_and_caught_up_when_it_returns() -> TestResult {
    let _sites = SITES.lock().await;
    let env = with_sites("sites-outage", &["site-1", "site-2"]).await;
    let controller = RunningController::start(&env.namespace);
    // Flux retries a failed reconcile at its interval: short here.
    let fast = json!({ "interval": "15s", "rollout": { "offlineAfter": "0s" } });
    apply_app(&env, &sites_app(&env, fast.clone())).await?;
    wait_named(&env, &controller, "gw", "both sites Ready", READY_TIMEOUT, ready_is("2/2")).await;
    let stopped = SiteStopped::stop("site-2");
    let mut change = fast.clone();
    change["values"] = gateway_values("{{pool.labels.region}}-v2");
    apply_app(&env, &sites_app(&env, change)).await?;
    let app = wait_named(&env, &controller, "gw", "site-2 unreachable, offline", READY_TIMEOUT, |app| {
        let site = pool_status(app, "site-2").ok_or("no site-2")?;
        match site["offline"] == true && site["nodes"] == "unreachable" {
            true => ready_is("1/2 (1 offline)")(app),
            false => Err(format!("site-2: {site}")),
        }
    })
    .await;
    let message = pool_status(&app, "site-2").and_then(|p| p["message"].as_str()).unwrap_or_default();
    assert!(message.contains("cannot reach the site cluster"), "{message}");
    wait_gateway(&env, "site-1", "north-v2").await;
    drop(stopped);
    wait_named(&env, &controller, "gw", "site-2 caught up", Duration::from_secs(300), ready_is("2/2")).await;
    wait_gateway(&env, "site-2", "south-v2").await;
    drop(controller);
    env.cleanup().await;
    Ok(())
}

/// A pool under way on the current revision that goes out of reach keeps
/// its slot of `maxUnavailable` (docs/rollouts.md, "Offline pools"): it
/// comes back still updating. site-1 takes a change and soaks; its API
/// server stops, so helm-controller cannot reach it and the pool reads
/// offline; site-2 is not written while site-1 is away, and is once
/// site-1 is back and done. The checker's exemption E6 counted such a
/// pool for nothing.
#[tokio::test]
async fn a_site_out_of_reach_while_it_soaks_keeps_its_slot_and_the_next_waits() -> TestResult {
    let _sites = SITES.lock().await;
    let env = with_sites("sites-slot", &["site-1", "site-2"]).await;
    let controller = RunningController::start(&env.namespace);
    let rollout = json!({ "strategy": "Progressive", "maxUnavailable": 1, "minReadySeconds": 60, "offlineAfter": "0s" });
    let fast = json!({ "interval": "15s", "rollout": rollout });
    apply_app(&env, &sites_app(&env, fast.clone())).await?;
    wait_named(&env, &controller, "gw", "both sites Ready", READY_TIMEOUT, ready_is("2/2")).await;
    let spec_hash = |releases: &BTreeMap<String, Value>, site: &str| {
        releases
            .get(site)
            .map(|r| r["metadata"]["annotations"]["apps.fanout.dev/spec-hash"].clone())
    };
    let before = releases_by_pool(&env).await;
    let mut change = fast.clone();
    change["values"] = gateway_values("{{pool.labels.region}}-v2");
    apply_app(&env, &sites_app(&env, change)).await?;
    wait_gateway(&env, "site-1", "north-v2").await;
    // Flux's verdict in, site-1 soaks: helm-controller has no action
    // under way there when its API server stops.
    wait_named(&env, &controller, "gw", "site-1 soaking on the change", READY_TIMEOUT, |app| {
        let site = pool_status(app, "site-1").ok_or("no site-1")?;
        match site["rollout"] == "Soaking" && site["observedLatest"] == true {
            true => Ok(()),
            false => Err(format!("site-1: {site}")),
        }
    })
    .await;
    let stopped = SiteStopped::stop("site-1");
    wait_named(&env, &controller, "gw", "site-1 unreachable, offline", READY_TIMEOUT, |app| {
        let site = pool_status(app, "site-1").ok_or("no site-1")?;
        match site["offline"] == true && site["nodes"] == "unreachable" {
            true => Ok(()),
            false => Err(format!("site-1: {site}")),
        }
    })
    .await;
    // Away, site-1 keeps its slot: site-2 waits.
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while std::time::Instant::now() < until {
        let now = releases_by_pool(&env).await;
        assert_eq!(
            spec_hash(&now, "site-2"),
            spec_hash(&before, "site-2"),
            "site-2 written while site-1 is away"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    drop(stopped);
    wait_named(&env, &controller, "gw", "both sites on the change", Duration::from_secs(300), |app| {
        let rollout = &app["status"]["rollout"];
        match rollout["phase"].as_str() {
            Some("Complete") => ready_is("2/2")(app),
            other => Err(format!("rollout {other:?}: {}", rollout["message"])),
        }
    })
    .await;
    wait_gateway(&env, "site-2", "south-v2").await;
    drop(controller);
    env.cleanup().await;
    Ok(())
}
