//! Deletion at sites: an orphaning application leaves its release
//! running, and a site gone for good leaves nothing terminating.
use super::*;

#[tokio::test]
async fn deleting_an_orphaning_application_leaves_its_release_running_on_the_site() -> TestResult {
    let env = with_sites("sites-orphan", &["site-1"]).await;
    let controller = RunningController::start(&env.namespace);
    apply_app(&env, &sites_app(&env, json!({ "deletionPolicy": "Orphan" }))).await?;
    wait_named(&env, &controller, "gw", "site-1 Ready", READY_TIMEOUT, ready_is("1/1")).await;
    wait_gateway(&env, "site-1", "north").await;
    let apps: Api<nodepool_fanout::api::NodePoolApplication> =
        Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("gw", &DeleteParams::default()).await?;
    wait_for("the application gone", READY_TIMEOUT, || async {
        match apps.get_opt("gw").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|a| a.map(|a| a.metadata.finalizers)))),
        }
    })
    .await;
    // The release stays, a HelmRelease of its own, and the site keeps
    // running what it installed.
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let release = releases.get(&nodepool_fanout::api::naming::release_name("gw", "site-1")).await?;
    assert!(release.metadata.owner_references.as_ref().is_none_or(|o| o.is_empty()), "orphaned");
    assert_eq!(release.data["spec"]["kubeConfig"]["secretRef"]["name"], "site-1-kubeconfig");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(gateway_in(&env, "site-1").await?, (1, "north".to_string()));
    drop(controller);
    // The test's own leftovers: the orphan is the user's now.
    releases
        .delete(&nodepool_fanout::api::naming::release_name("gw", "site-1"), &DeleteParams::default())
        .await?;
    env.cleanup().await;
    Ok(())
}

/// A site decommissioned while it does not answer: its profile deleted
/// (the Secret forgotten, as it often is) with its API server stopped.
/// helm-controller cannot uninstall, would keep its finalizer for ever,
/// and the release would stay Terminating; after `offlineAfter` it is let
/// go without the uninstall, with an Event naming the site, and so is the
/// release of an application deleted meanwhile. What Helm installed on
/// the site stays there, as the Event says.
#[tokio::test]
async fn a_site_gone_for_good_leaves_no_release_terminating_and_keeps_what_helm_installed_there() -> TestResult
{
    let _sites = SITES.lock().await;
    let env = with_sites("sites-gone", &["site-1", "site-2"]).await;
    let controller = RunningController::start(&env.namespace);
    let fast = json!({ "interval": "15s", "rollout": { "offlineAfter": "10s" } });
    apply_app(&env, &sites_app(&env, fast)).await?;
    // A second application on site-2 alone, named: when the profile goes,
    // it selects nothing and so prunes nothing; it is then deleted.
    let keep = app_named(
        "keep",
        &env.namespace,
        "ingress-gateway",
        "1.0.0",
        json!({ "pools": { "kind": "ClusterProfile", "names": ["site-2"] },
                "targetNamespace": format!("{}-keep", env.prefix),
                "helmRelease": { "install": { "createNamespace": true } },
                "rollout": { "offlineAfter": "10s" },
                "values": { "controller": { "ingressClass": { "name": "{{app.namespace}}-keep" } } } }),
    );
    apply_app(&env, &keep).await?;
    wait_named(&env, &controller, "gw", "both sites Ready", READY_TIMEOUT, ready_is("2/2")).await;
    wait_named(&env, &controller, "keep", "site-2 Ready", READY_TIMEOUT, ready_is("1/1")).await;
    wait_gateway(&env, "site-2", "south").await;

    let stopped = SiteStopped::stop("site-2");
    let profiles: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &clusterprofile_resource());
    profiles.delete("site-2", &DeleteParams::default()).await?;
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let gone = |name: String| {
        let releases = releases.clone();
        async move {
            match releases.get_opt(&name).await {
                Ok(None) => Ok(()),
                Ok(Some(r)) => Err(format!(
                    "{name}: deleting since {:?}, suspended {}, finalizers {:?}, status {}",
                    r.metadata.deletion_timestamp,
                    r.data["spec"]["suspend"],
                    r.metadata.finalizers,
                    r.data["status"]["conditions"]
                )),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let gw_site_2 = nodepool_fanout::api::naming::release_name("gw", "site-2");
    wait_for("gw's site-2 release gone", READY_TIMEOUT, || gone(gw_site_2.clone())).await;
    wait_named(&env, &controller, "gw", "gw over site-1 alone", READY_TIMEOUT, ready_is("1/1")).await;

    let apps: Api<nodepool_fanout::api::NodePoolApplication> =
        Api::namespaced(env.client.clone(), &env.namespace);
    apps.delete("keep", &DeleteParams::default()).await?;
    let keep_site_2 = nodepool_fanout::api::naming::release_name("keep", "site-2");
    wait_for("keep's site-2 release gone", READY_TIMEOUT, || gone(keep_site_2.clone())).await;
    wait_for("the application keep gone", READY_TIMEOUT, || async {
        match apps.get_opt("keep").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|a| a.map(|a| a.metadata.finalizers)))),
        }
    })
    .await;

    // Each said so, naming the site and what stays there.
    let events: Api<Event> = Api::namespaced(env.client.clone(), &env.namespace);
    let skipped: Vec<(String, String)> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("UninstallSkipped"))
        .map(|e| (e.regarding.and_then(|r| r.name).unwrap_or_default(), e.note.unwrap_or_default()))
        .collect();
    for (app, release) in [("gw", &gw_site_2), ("keep", &keep_site_2)] {
        let note = skipped.iter().find(|(a, _)| a == app).map(|(_, n)| n.as_str());
        let note = note.unwrap_or_else(|| panic!("no UninstallSkipped Event on {app}: {skipped:?}"));
        assert!(note.contains("\"site-2\"") && note.contains(release.as_str()), "{note}");
        assert!(note.contains("stays there"), "{note}");
    }

    // The site back: what Helm installed there was left as it was.
    drop(stopped);
    wait_gateway(&env, "site-2", "south").await;
    // The test's leftovers on the shared site, which are the user's to
    // remove in a real decommissioning.
    let site = site_client("site-2").await;
    let namespaces: Api<Namespace> = Api::all(site.clone());
    let classes: Api<IngressClass> = Api::all(site);
    for app in ["gw", "keep"] {
        let _ = namespaces.delete(&format!("{}-{app}", env.prefix), &DeleteParams::default()).await;
        let _ = classes.delete(&format!("{}-{app}", env.namespace), &DeleteParams::default()).await;
    }
    drop(controller);
    env.cleanup().await;
    Ok(())
}
