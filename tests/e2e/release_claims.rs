//! Two applications whose release names give the same Helm release,
//! applied at once: only one drives it, the other is refused and drives
//! nothing, and deleting the refused one uninstalls nothing.

use crate::support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::Api;
use nodepool_fanout::api::naming;
use nodepool_fanout::api::NodePoolApplication;
use serde_json::{json, Value};
use support::apps::{app_named, READY_TIMEOUT};
use support::{ensure_crd, helmrelease_resource, RunningController, TestEnv, TestResult};

/// The application's Ready and Stalled conditions, as `(reason, status)`.
fn condition(app: &Value, type_: &str) -> Option<(String, String)> {
    let c = app["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
    Some((c["reason"].as_str()?.to_string(), c["status"].as_str()?.to_string()))
}

#[tokio::test(flavor = "multi_thread")]
async fn two_applications_racing_for_one_helm_release_leave_one_driver_and_an_inert_loser() -> TestResult {
    let mut env = TestEnv::new("claims").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let pool = env.create_pool("a", &[("e2e", &tag)], 1).await;
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let controller = RunningController::start(&env.namespace);

    // Both name their release after the pool alone: one Helm release.
    let manifest = |name: &str, region: &str| {
        app_named(
            name,
            &env.namespace,
            "ingress-gateway",
            "1.0.0",
            json!({
                "pools": { "selector": { "matchLabels": { "e2e": tag } } },
                "releaseName": "shared-{{pool.name}}",
                "values": { "controller": {
                    "ingressClass": { "name": format!("{}-{{{{pool.name}}}}", env.namespace) },
                    "config": { "region": region }
                }}
            }),
        )
    };
    // One request each, as one GitOps commit lands them: at once.
    let params = kube::api::PatchParams::apply("e2e-user").force();
    let (first, second) = (manifest("first", "one"), manifest("second", "two"));
    let (first, second) = (kube::api::Patch::Apply(&first), kube::api::Patch::Apply(&second));
    let (a, b) = tokio::join!(apps.patch("first", &params, &first), apps.patch("second", &params, &second));
    a?;
    b?;

    // One wins and becomes Ready; the other is Stalled on the conflict.
    let (winner, loser) =
        support::wait_for("one application Ready, the other Stalled", READY_TIMEOUT, || async {
            let read = |name: &'static str| {
                let apps = apps.clone();
                async move {
                    serde_json::to_value(apps.get(name).await.map_err(|e| e.to_string())?)
                        .map_err(|e| e.to_string())
                }
            };
            let (first, second) = (read("first").await?, read("second").await?);
            let ready = |app: &Value| condition(app, "Ready") == Some(("Succeeded".into(), "True".into()));
            let stalled = |app: &Value| {
                condition(app, "Stalled") == Some(("ReleaseNameConflict".into(), "True".into()))
            };
            match (ready(&first), stalled(&first), ready(&second), stalled(&second)) {
                (true, _, _, true) => Ok(("first", "second")),
                (_, true, true, _) => Ok(("second", "first")),
                _ => Err(format!("first: {}; second: {}", first["status"], second["status"])),
            }
        })
        .await;
    println!("{winner} drives the Helm release; {loser} was refused");

    // Exactly one HelmRelease drives it, and it is the winner's: the loser
    // has none, or one that is suspended.
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let listed = releases.list(&ListParams::default()).await?;
    let mut active = Vec::new();
    for hr in &listed.items {
        let value = serde_json::to_value(hr)?;
        let owner =
            value.pointer(&format!("/metadata/labels/{}", naming::LABEL_APPLICATION.replace('/', "~1")));
        let suspended = value.pointer("/spec/suspend") == Some(&json!(true));
        if !suspended {
            active.push(owner.and_then(Value::as_str).unwrap_or_default().to_string());
        }
    }
    assert_eq!(active, vec![winner.to_string()], "the active HelmReleases' applications");
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    let claim = leases.get(&naming::claim_name(&env.namespace, &format!("shared-{pool}"))).await?;
    assert_eq!(
        claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(naming::LABEL_APPLICATION))
            .map(String::as_str),
        Some(winner)
    );

    // The Helm release holds the winner's values.
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.namespace);
    let region = |name: &str| if name == "first" { "one" } else { "two" };
    let installed = configmaps.list(&ListParams::default()).await?;
    let regions: Vec<String> = installed
        .items
        .iter()
        .filter_map(|c| c.data.as_ref()?.get("region").cloned())
        .collect();
    assert_eq!(regions, vec![region(winner).to_string()], "what the Helm release installed");

    // Deleting the loser uninstalls nothing: the winner stays Ready and
    // its workload stays.
    apps.delete(loser, &DeleteParams::default()).await?;
    support::wait_for("the loser gone", READY_TIMEOUT, || async {
        match apps.get_opt(loser).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let still = configmaps.list(&ListParams::default()).await?;
    let regions: Vec<String> =
        still.items.iter().filter_map(|c| c.data.as_ref()?.get("region").cloned()).collect();
    assert_eq!(regions, vec![region(winner).to_string()], "the Helm release after the loser's deletion");
    let winner_app = serde_json::to_value(apps.get(winner).await?)?;
    assert_eq!(condition(&winner_app, "Ready"), Some(("Succeeded".into(), "True".into())));
    drop(controller);
    env.cleanup().await;
    Ok(())
}

/// A pool refused at its write, for good (someone else's Lease holds the
/// claim of its Helm release), keeps neither the other pools nor the
/// revision's record back: `history` lists the revision the others took.
#[tokio::test(flavor = "multi_thread")]
async fn a_pool_refused_at_its_write_keeps_the_revision_out_of_no_history() -> TestResult {
    let mut env = TestEnv::new("claims-history").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let free = env.create_pool("a-free", &[("e2e", &tag)], 1).await;
    let held = env.create_pool("b-held", &[("e2e", &tag)], 1).await;
    // A claim nodepool-fanout did not make: it never takes it over.
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(naming::claim_name(&env.namespace, &format!("recorded-{held}"))),
            ..Default::default()
        },
        spec: None,
    };
    leases.create(&kube::api::PostParams::default(), &lease).await?;
    let controller = RunningController::start(&env.namespace);
    let manifest = app_named(
        "recorded",
        &env.namespace,
        "ingress-gateway",
        "1.0.0",
        json!({
            "pools": { "selector": { "matchLabels": { "e2e": tag } } },
            "releaseName": "recorded-{{pool.name}}",
            "values": { "controller": {
                "ingressClass": { "name": format!("{}-{{{{pool.name}}}}", env.namespace) }
            }}
        }),
    );
    support::apps::apply_app(&env, &manifest).await?;
    let refused = |app: &Value| {
        let entry = |pool: &str| support::apps::pool_status(app, pool).cloned().unwrap_or_default();
        let (free, held) = (entry(&free), entry(&held));
        match (free["ready"].as_str(), held.to_string().contains("did not create")) {
            (Some("True"), true) => Ok(()),
            _ => Err(format!("{free} / {held}")),
        }
    };
    // The free pool is installed; the held one refused, naming the Lease.
    let first = support::apps::wait_named(
        &env,
        &controller,
        "recorded",
        "the held pool refused",
        READY_TIMEOUT,
        refused,
    )
    .await;
    let first = first["status"]["rollout"]["revision"].clone();

    // A change: every reconcile of it meets the held pool's refusal.
    let mut changed = manifest.clone();
    changed["spec"]["values"]["controller"]["config"] = json!({ "log-level": "notice" });
    support::apps::apply_app(&env, &changed).await?;
    let app = support::apps::wait_named(
        &env,
        &controller,
        "recorded",
        "the change on the free pool, the held one still refused",
        READY_TIMEOUT,
        |app| {
            let free = support::apps::pool_status(app, &free).cloned().unwrap_or_default();
            match (app["status"]["rollout"]["revision"] != first, free["rollout"].as_str()) {
                (true, Some("Done")) => refused(app),
                _ => Err(format!("the change is not on the free pool yet: {free}")),
            }
        },
    )
    .await;
    let revision = app["status"]["rollout"]["revision"].as_str().unwrap_or_default().to_string();
    assert!(!revision.is_empty(), "{}", app["status"]);

    let history = nodepool_fanout::cli::history::HistoryArgs {
        name: "recorded".into(),
        namespace: Some(env.namespace.clone()),
    };
    support::wait_for("the revision in the history", Duration::from_secs(30), || async {
        let rows = nodepool_fanout::cli::history::fetch(&env.client, &history)
            .await
            .map_err(|e| e.to_string())?;
        match rows.iter().any(|row| row.revision == revision) {
            true => Ok(()),
            false => Err(format!("{} recorded, not {revision}", rows.len())),
        }
    })
    .await;
    drop(controller);
    env.cleanup().await;
    Ok(())
}
