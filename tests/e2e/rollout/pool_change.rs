//! A pool's own change after its revision completed, on the local plane:
//! the revision's next rollout, pool by pool, that leaves the unchanged
//! pools as they are (docs/rollouts.md, "A pool's own change is a rollout").

use super::*;

use crate::support::nodepool_resource;
use kube::core::DynamicObject;

#[tokio::test(flavor = "multi_thread")]
async fn a_label_a_release_reads_edited_after_completion_rolls_out_as_the_revisions_next_rollout(
) -> TestResult {
    let (env, pools, controller) = three_pools("pool-change").await;
    let app = ingress_app(&env, json!({ "rollout": { "strategy": "Progressive", "maxUnavailable": 1 } }));
    apply_app(&env, &app).await?;
    let done = wait_app(&env, &controller, "the first install", READY_TIMEOUT, complete(3)).await;
    let revision = done["status"]["rollout"]["revision"].clone();
    let first = done["status"]["rollout"]["number"].as_i64().expect("the rollout's number");
    let before = hashes(&env).await;

    // Pools b and c move to region west, which their values read: the
    // application is as it was, so is its revision, and the change goes
    // out as the revision's next rollout, one pool at a time.
    let api: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    for pool in &pools[1..] {
        let patch = json!({ "metadata": { "labels": { "region": "west" } } });
        api.patch(pool, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    let most_updating = std::cell::Cell::new(0);
    let status = wait_app(&env, &controller, "the pools' change", ROLLOUT_TIMEOUT, |app| {
        most_updating.set(most_updating.get().max(updating(app)));
        match app["status"]["rollout"]["number"].as_i64() {
            Some(n) if n == first + 1 => complete(3)(app),
            other => Err(format!("rollout number {other:?}, want {}", first + 1)),
        }
    })
    .await;
    assert_eq!(status["status"]["rollout"]["revision"], revision, "a pool's change is no new revision");
    assert!(most_updating.get() <= 1, "{} pools were updating at once", most_updating.get());
    let releases = releases_by_pool(&env).await;
    assert_eq!(annotation(&releases[&pools[0]], SPEC_HASH), before[&pools[0]], "pool a was rewritten");
    for pool in &pools[1..] {
        let release = &releases[pool];
        assert_eq!(release["spec"]["values"]["controller"]["config"]["region"], "west", "{pool}");
        assert_eq!(annotation(release, "apps.fanout.dev/rollout"), (first + 1).to_string(), "{pool}");
    }
    drop(controller);
    env.cleanup().await;
    Ok(())
}
