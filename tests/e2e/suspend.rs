//! `spec.suspend` does what Flux's suspend does: the controller stops
//! acting on the application (no release written, created or pruned,
//! whatever its spec and its pools do) and suspends its releases so that
//! helm-controller stops too; resuming takes both back and catches up.
use crate::support;

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::Api;
use nodepool_fanout::api::{naming, NodePoolApplication};
use serde_json::{json, Value};
use support::apps::{
    apply_app, ingress_app, pool_status, ready_is, releases_by_pool, wait_app, CHANGE_TIMEOUT, READY_TIMEOUT,
};
use support::{nodepool_resource, RunningController, TestEnv, TestResult};

fn ready_reason(app: &Value) -> Option<&str> {
    app.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?["reason"]
        .as_str()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_suspended_application_leaves_everything_as_it_is_until_resumed() -> TestResult {
    let mut env = TestEnv::new("suspend").await;
    support::ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let [east, west]: [String; 2] =
        env.create_region_pools(&["east", "west"]).await.try_into().expect("two pools");
    let controller = RunningController::start(&env.namespace);
    let result = async {
        let app = ingress_app(&env, json!({}));
        apply_app(&env, &app).await?;
        wait_app(&env, &controller, "READY 2/2", READY_TIMEOUT, ready_is("2/2")).await;

        // Suspended: every release is suspended, by a field manager of its own.
        let mut suspended = app.clone();
        suspended["spec"]["suspend"] = json!(true);
        apply_app(&env, &suspended).await?;
        wait_app(&env, &controller, "Ready: Suspended", CHANGE_TIMEOUT, |app| match ready_reason(app) {
            Some("Suspended") => Ok(()),
            other => Err(format!("Ready reason {other:?}")),
        })
        .await;
        let before = support::wait_for("every release suspended", CHANGE_TIMEOUT, || async {
            let releases = releases_by_pool(&env).await;
            let all = releases.len() == 2
                && releases.values().all(|hr| {
                    hr["spec"]["suspend"] == true
                        && hr["metadata"]["annotations"][naming::ANNOTATION_SUSPENDED_WITH_APPLICATION]
                            == "true"
                });
            match all {
                true => Ok(releases),
                false => Err(format!(
                    "{:?}",
                    releases.values().map(|hr| &hr["spec"]["suspend"]).collect::<Vec<_>>()
                )),
            }
        })
        .await;

        // While suspended: a values change, a pool that joins, a pool that
        // leaves. The controller sees them all and acts on none.
        let mut changed = suspended.clone();
        changed["spec"]["values"]["controller"]["replicas"] = json!(3);
        apply_app(&env, &changed).await?;
        let north = env.create_pool("north", &[("e2e", &tag), ("region", "north")], 1).await;
        let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
        let leave = json!({ "metadata": { "labels": { "e2e": null } } });
        pools.patch(&west, &PatchParams::default(), &Patch::Merge(&leave)).await?;
        let north_seen = north.clone();
        wait_app(&env, &controller, "the joining pool seen, not installed", CHANGE_TIMEOUT, move |app| {
            match pool_status(app, &north_seen) {
                Some(p) if p["reason"] == "Suspended" => Ok(()),
                other => Err(format!("north: {other:?}")),
            }
        })
        .await;
        controller.quiet(std::time::Duration::from_secs(3)).await;
        let during = releases_by_pool(&env).await;
        assert_eq!(
            during.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "nothing created or pruned"
        );
        for (pool, hr) in &during {
            assert_eq!(
                (&hr["metadata"]["generation"], &hr["spec"]),
                (&before[pool]["metadata"]["generation"], &before[pool]["spec"]),
                "pool {pool}'s release was written while the application was suspended"
            );
        }

        // Resumed: the suspension taken back, then every change caught up.
        let mut resumed = changed.clone();
        resumed["spec"].as_object_mut().expect("spec").remove("suspend");
        apply_app(&env, &resumed).await?;
        wait_app(&env, &controller, "READY 2/2 after resuming", READY_TIMEOUT, ready_is("2/2")).await;
        let after = support::wait_for("east and north, caught up", CHANGE_TIMEOUT, || async {
            let releases = releases_by_pool(&env).await;
            let pools: Vec<&String> = releases.keys().collect();
            match pools == [&east, &north] {
                true => Ok(releases),
                false => Err(format!("releases of {pools:?}")),
            }
        })
        .await;
        for (pool, hr) in &after {
            assert_eq!(hr["spec"]["values"]["controller"]["replicas"], 3, "pool {pool} caught up");
            assert!(hr["spec"].get("suspend").is_none(), "pool {pool} still suspended: {}", hr["spec"]);
            assert!(
                hr["metadata"]["annotations"]
                    .get(naming::ANNOTATION_SUSPENDED_WITH_APPLICATION)
                    .is_none(),
                "pool {pool} still marked"
            );
            let managers: Vec<&str> = hr["metadata"]["managedFields"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["manager"].as_str())
                .collect();
            assert!(!managers.contains(&naming::SUSPEND_FIELD_MANAGER), "pool {pool}: {managers:?}");
        }
        let api: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
        let status = serde_json::to_value(api.get("ingress").await?)?;
        assert_eq!(ready_reason(&status), Some("Succeeded"), "{}", status["status"]);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}

/// Whether Flux says the release is Ready for its latest spec.
fn ready_for_latest(hr: &Value) -> bool {
    let generation = &hr["metadata"]["generation"];
    hr["status"]["observedGeneration"] == *generation
        && support::condition(hr, "Ready")
            .is_some_and(|c| c["status"] == "True" && c["observedGeneration"] == *generation)
}

#[tokio::test(flavor = "multi_thread")]
async fn resuming_a_progressive_application_goes_on_pool_by_pool() -> TestResult {
    let mut env = TestEnv::new("suspend-progressive").await;
    support::ensure_crd(&env.client).await;
    let pools = env.create_region_pools(&["east", "west", "north"]).await;
    let controller = RunningController::start(&env.namespace);
    let result = async {
        let app = ingress_app(&env, json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 1 } }));
        apply_app(&env, &app).await?;
        wait_app(&env, &controller, "READY 3/3", READY_TIMEOUT, ready_is("3/3")).await;

        let mut suspended = app.clone();
        suspended["spec"]["suspend"] = json!(true);
        apply_app(&env, &suspended).await?;
        support::wait_for("every release suspended", CHANGE_TIMEOUT, || async {
            let releases = releases_by_pool(&env).await;
            match releases.len() == 3 && releases.values().all(|hr| hr["spec"]["suspend"] == true) {
                true => Ok(()),
                false => Err("not yet".to_string()),
            }
        })
        .await;
        // A change made while suspended, then a resume: the change must
        // still reach one pool at a time, not every pool at once.
        let mut changed = suspended.clone();
        changed["spec"]["values"]["controller"]["replicas"] = json!(2);
        apply_app(&env, &changed).await?;
        let mut resumed = changed.clone();
        resumed["spec"].as_object_mut().expect("spec").remove("suspend");
        apply_app(&env, &resumed).await?;

        let (mut most_in_flight, mut partial_seen) = (0, false);
        let deadline = std::time::Instant::now() + READY_TIMEOUT;
        loop {
            let releases = releases_by_pool(&env).await;
            let changed: Vec<&Value> = releases
                .values()
                .filter(|hr| hr["spec"]["values"]["controller"]["replicas"] == 2)
                .collect();
            let in_flight = changed.iter().filter(|hr| !ready_for_latest(hr)).count();
            most_in_flight = most_in_flight.max(in_flight);
            partial_seen |= !changed.is_empty() && changed.len() < pools.len();
            if changed.len() == pools.len() && in_flight == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the change did not reach every pool:\n{}",
                controller.log_tail()
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        assert!(most_in_flight <= 1, "{most_in_flight} pools updating at once, past maxUnavailable 1");
        assert!(partial_seen, "never saw the change on some pools but not all: it went everywhere at once");
        wait_app(&env, &controller, "READY 3/3 after resuming", READY_TIMEOUT, ready_is("3/3")).await;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}
