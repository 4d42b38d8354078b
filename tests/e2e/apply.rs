//! `apply::carry_out` alone, against the real API server, below the
//! controller: the plan is made in the test (pools in memory, no
//! controller running), and what carrying it out did is checked both in
//! what it returns and in the objects the API server holds. The releases
//! are suspended (`helmRelease.suspend`), so helm-controller leaves them.

use std::sync::Arc;

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::runtime::reflector;
use kube::ResourceExt;
use serde_json::{json, Value};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use nodepool_fanout::api::NodePoolApplication;
use nodepool_fanout::pools::Pool;
use nodepool_fanout::reconcile::apply::{self, Applied, SharedCharts, Target, FIELD_MANAGER};
use nodepool_fanout::reconcile::fleet::{Done, WriteRefused};
use nodepool_fanout::reconcile::observe::helmrelease_resource;
use nodepool_fanout::reconcile::plan::{self, ListedReleases, ObservedRelease, Plan, PlanInput};
use nodepool_fanout::reconcile::release::state::ReleaseState;

use crate::support::apps::{app, apply_app};
use crate::support::{ensure_crd, TestEnv};

/// The application, made in the API server so that it has a uid for the
/// releases' owner references.
async fn application(env: &TestEnv) -> NodePoolApplication {
    ensure_crd(&env.client).await;
    let manifest = app(
        env,
        "ingress-gateway",
        "1.0.0",
        json!({
            "pools": { "selector": { "matchLabels": { "site": "edge" } } },
            "values": { "site": "{{pool.name}}" },
            "helmRelease": { "suspend": true }
        }),
    );
    apply_app(env, &manifest).await.expect("the application is accepted")
}

fn pools(names: &[&str]) -> Vec<Pool> {
    names
        .iter()
        .map(|name| Pool {
            labels: nodepool_fanout::pools::Labels::from_iter([("site".to_string(), "edge".to_string())]),
            ..Pool::named(*name)
        })
        .collect()
}

fn plan_over(app: &NodePoolApplication, pools: &[Pool], owned: Vec<Arc<ObservedRelease>>) -> Plan {
    plan::plan(&PlanInput {
        history: None,
        app,
        pools: &pools.iter().collect::<Vec<_>>(),
        nodes: None,
        owned,
        others: &ListedReleases::default(),
        now: Time(k8s_openapi::jiff::Timestamp::now()),
        chart_ref: None,
        chart: None,
        hold: None,
        unserved: None,
        clock_since: None,
        memo: None,
        // These tests carry out plans over releases as the API server takes them.
        first_install_alone: false,
        analysis: None,
        rendering_changes: Default::default(),
    })
}

/// The releases the API server holds in the namespace, by name.
async fn listed(env: &TestEnv) -> Vec<Value> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let list = api.list(&Default::default()).await.expect("HelmReleases are listed");
    list.items.into_iter().map(|r| serde_json::to_value(r).unwrap()).collect()
}

/// The owned releases as observe would see them.
async fn observed(env: &TestEnv, app: &NodePoolApplication) -> Vec<Arc<ObservedRelease>> {
    let uid = app.uid().unwrap();
    listed(env)
        .await
        .iter()
        .filter(|r| r["metadata"]["ownerReferences"][0]["uid"] == uid.as_str())
        .filter_map(ObservedRelease::from_value)
        .map(Arc::new)
        .collect()
}

/// Carries `plan` out for `app`, with empty caches: nothing was recorded
/// as a create's fields, and no shared chart is in play.
async fn carry_out(
    env: &TestEnv,
    app: &NodePoolApplication,
    plan: &mut Plan,
    owned: &[Arc<ObservedRelease>],
) -> Applied {
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.namespace);
    let applications: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let (cached, _) = reflector::store();
    let empty = |resource| reflector::store::Writer::<DynamicObject>::new(resource).as_reader();
    let charts = SharedCharts {
        helmcharts: empty(nodepool_fanout::chart::source::helmchart_resource()),
        ocirepositories: empty(nodepool_fanout::chart::source::ocirepository_resource()),
    };
    let target = Target {
        app,
        releases: &releases,
        leases: &leases,
        applications: &applications,
        cached: &cached,
        charts: &charts,
        orphan: false,
    };
    apply::carry_out(&target, plan.take_writes(), owned).await
}

/// A HelmRelease someone else made, of a chart of theirs.
fn theirs(env: &TestEnv, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": name, "namespace": env.namespace },
        "spec": { "interval": "5m", "suspend": true,
                  "chart": { "spec": { "chart": "theirs",
                      "sourceRef": { "kind": "HelmRepository", "name": "elsewhere" } } } }
    }))
    .unwrap()
}

fn written(applied: &Applied) -> Vec<(String, bool)> {
    let mut written: Vec<(String, bool)> = applied
        .done
        .iter()
        .filter_map(|d| match d {
            Done::Written { pool, existed, .. } => Some((pool.clone(), *existed)),
            _ => None,
        })
        .collect();
    written.sort();
    written
}

#[tokio::test]
async fn each_release_is_created_under_our_field_manager_owned_by_the_application() {
    let env = TestEnv::new("apply-create").await;
    let app = application(&env).await;
    let mut planned = plan_over(&app, &pools(&["east", "west"]), Vec::new());
    let applied = carry_out(&env, &app, &mut planned, &[]).await;
    assert!(applied.first_error.is_none(), "{:?}", applied.first_error);
    assert!(applied.refused.is_empty(), "{:?}", applied.refused);
    assert_eq!(written(&applied), [("east".to_string(), false), ("west".to_string(), false)]);
    let releases = listed(&env).await;
    assert_eq!(releases.len(), 2, "{releases:#?}");
    for r in &releases {
        let owner = &r["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["uid"].as_str(), owner["controller"].as_bool()),
            (app.uid().as_deref(), Some(true))
        );
        let managers: Vec<&str> = r["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(managers.contains(&FIELD_MANAGER), "{managers:?}");
        assert!(r["metadata"]["annotations"]["apps.fanout.dev/written-at"].is_string(), "{r:#}");
        assert_eq!(r["spec"]["suspend"], true);
    }
    // Written again from what observe sees: nothing differs, nothing written.
    let owned = observed(&env, &app).await;
    let mut again = plan_over(&app, &pools(&["east", "west"]), owned.clone());
    let applied = carry_out(&env, &app, &mut again, &owned).await;
    assert!(applied.done.is_empty(), "{:?}", applied.done);
    env.cleanup().await;
}

#[tokio::test]
async fn a_write_the_api_server_refuses_stays_with_its_pool_and_the_others_go_on() {
    let env = TestEnv::new("apply-refused").await;
    let app = application(&env).await;
    let mut planned = plan_over(&app, &pools(&["east", "north", "west"]), Vec::new());
    // The HelmRelease schema refuses this interval: the API server says 422.
    let north = planned.apply.iter_mut().find(|d| d.pool == "north").unwrap();
    let mut object = north.manifest.value();
    object["spec"]["interval"] = json!("every day");
    north.manifest = plan::Manifest::new(&object);
    let report = planned.report.clone();
    let applied = carry_out(&env, &app, &mut planned, &[]).await;
    assert_eq!(written(&applied), [("east".to_string(), false), ("west".to_string(), false)]);
    let refused: Vec<&WriteRefused> = applied.refused.iter().collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!((refused[0].pool.as_str(), refused[0].retriable), ("north", false));
    assert!(refused[0].message.contains("interval"), "{}", refused[0].message);
    assert!(
        applied
            .done
            .iter()
            .any(|d| matches!(d, Done::WriteFailed { pool, .. } if pool == "north")),
        "{:?}",
        applied.done
    );
    assert!(applied.first_error.is_some(), "the reconcile retries");
    // What the report makes of it: a person must act on that pool.
    let after = report.after_writes(&applied.refused);
    let north = after.pools.iter().find(|p| p.pool == "north").unwrap();
    assert_eq!(north.status.state, ReleaseState::Stalled, "{north:?}");
    assert_eq!(listed(&env).await.len(), 2);
    env.cleanup().await;
}

#[tokio::test]
async fn a_release_someone_else_made_under_our_name_is_left_as_it_is() {
    let env = TestEnv::new("apply-clash").await;
    let app = application(&env).await;
    let mut planned = plan_over(&app, &pools(&["east"]), Vec::new());
    let name = planned.apply[0].name.clone();
    let theirs = theirs(&env, &name);
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    api.create(&PostParams::default(), &theirs).await.expect("their release is made");
    let applied = carry_out(&env, &app, &mut planned, &[]).await;
    assert_eq!(applied.refused.len(), 1, "{:?}", applied.done);
    assert_eq!(applied.refused[0].reason, "NameClash");
    let live = api.get(&name).await.unwrap();
    assert_eq!(live.data["spec"]["chart"]["spec"]["chart"], "theirs", "their spec is untouched");
    assert!(live.owner_references().is_empty(), "and not adopted");
    env.cleanup().await;
}

#[tokio::test]
async fn a_prune_deletes_only_the_object_observe_saw() {
    let env = TestEnv::new("apply-prune").await;
    let app = application(&env).await;
    let mut planned = plan_over(&app, &pools(&["east", "west"]), Vec::new());
    let applied = carry_out(&env, &app, &mut planned, &[]).await;
    assert_eq!(written(&applied).len(), 2);
    let owned = observed(&env, &app).await;
    assert_eq!(owned.len(), 2);
    // West leaves the selection; east's release was meanwhile deleted and
    // made anew by someone else under the same name.
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let east = owned.iter().find(|o| o.pool.as_deref() == Some("east")).unwrap().name.clone();
    api.delete(&east, &DeleteParams::default()).await.expect("east's release is deleted");
    let replacement = theirs(&env, &east);
    crate::support::wait_for("east's release to go", std::time::Duration::from_secs(30), || async {
        match api.get_opt(&east).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    api.create(&PostParams::default(), &replacement)
        .await
        .expect("the replacement is made");
    // A plan over no pool at all prunes nothing (the empty-selection guard);
    // one over a pool of another site, both of ours allowed to go at once
    // (the mass-prune guard), prunes both, from the stale view.
    let held = plan_over(&app, &pools(&["south"]), owned.clone());
    assert!(held.prune.is_empty(), "both at once are held: {:?}", held.prune);
    let mut app = app;
    app.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(nodepool_fanout::api::naming::ANNOTATION_ALLOW_PRUNE.to_string(), "2".to_string());
    let mut prune = plan_over(&app, &pools(&["south"]), owned.clone());
    assert_eq!(prune.prune.len(), 2, "{:?}", prune.prune);
    let applied = carry_out(&env, &app, &mut prune, &owned).await;
    assert!(applied.first_error.is_none(), "{:?}", applied.first_error);
    let left: Vec<String> = listed(&env)
        .await
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(left.contains(&east), "the replacement under east's name stays: {left:?}");
    let west = owned.iter().find(|o| o.pool.as_deref() == Some("west")).unwrap().name.clone();
    assert!(!left.contains(&west), "west's release is pruned: {left:?}");
    let live = api.get(&east).await.unwrap();
    assert_eq!(live.data["spec"]["chart"]["spec"]["chart"], "theirs");
    env.cleanup().await;
}

/// The plan counts a pool that left as no longer updating, so the write
/// that takes its place must reach the API server after the prune: in
/// the record (ordered by resourceVersion), the release leaving goes first.
#[tokio::test]
async fn a_release_leaving_is_deleted_before_the_release_that_takes_its_place_is_written() {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};

    let env = TestEnv::new("apply-order").await;
    let app = application(&env).await;
    let mut planned = plan_over(&app, &pools(&["east", "west"]), Vec::new());
    let applied = carry_out(&env, &app, &mut planned, &[]).await;
    assert_eq!(written(&applied).len(), 2);
    let owned = observed(&env, &app).await;
    let east = owned.iter().find(|o| o.pool.as_deref() == Some("east")).unwrap().name.clone();

    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let from = api.list(&Default::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut events = api.watch(&WatchParams::default(), &from).await.unwrap().boxed();

    // East leaves, south comes: one plan prunes one release and writes another.
    let mut next = plan_over(&app, &pools(&["south", "west"]), owned.clone());
    assert_eq!(next.prune, std::slice::from_ref(&east));
    let south = next.apply.iter().find(|d| d.pool == "south").unwrap().name.clone();
    let applied = carry_out(&env, &app, &mut next, &owned).await;
    assert!(applied.first_error.is_none(), "{:?}", applied.first_error);

    // The resourceVersion at which east's release was marked for deletion
    // (or went) and the one at which south's was created.
    let (mut east_leaving, mut south_made) = (None, None);
    let deadline = std::time::Duration::from_secs(30);
    while east_leaving.is_none() || south_made.is_none() {
        let event = tokio::time::timeout(deadline, events.next())
            .await
            .expect("the watch reports both within 30 s")
            .expect("the watch stays open")
            .unwrap();
        let (object, deleted) = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
            WatchEvent::Deleted(o) => (o, true),
            other => panic!("unexpected watch event {other:?}"),
        };
        let rv: u64 = object.resource_version().unwrap().parse().unwrap();
        let name = object.name_any();
        if name == east && (deleted || object.metadata.deletion_timestamp.is_some()) {
            east_leaving.get_or_insert(rv);
        }
        if name == south {
            south_made.get_or_insert(rv);
        }
    }
    assert!(
        east_leaving < south_made,
        "east's release left at {east_leaving:?}, after south's was written at {south_made:?}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn a_release_that_changed_after_it_was_read_is_not_moved_until_a_plan_reads_it_again() {
    use kube::api::{Patch, PatchParams};

    let env = TestEnv::new("apply-changed").await;
    let app = application(&env).await;
    let mut planned = plan_over(&app, &pools(&["east"]), Vec::new());
    assert_eq!(written(&carry_out(&env, &app, &mut planned, &[]).await).len(), 1);
    let owned = observed(&env, &app).await;
    let before = owned[0].spec_hash.clone();

    // A new revision moves east's release, decided on the version read.
    let mut changed = app.clone();
    changed.spec.values = Some(json!({ "site": "{{pool.name}}", "replicas": 2 }));
    let mut next = plan_over(&changed, &pools(&["east"]), owned.clone());
    assert_eq!(next.apply[0].decided_on, owned[0].resource_version);
    // Before the write, someone else changes the release (as helm-controller
    // does when an install ends): the decision was made on what it no longer is.
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let label = json!({ "metadata": { "labels": { "touched": "yes" } } });
    api.patch(&owned[0].name, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let applied = carry_out(&env, &app, &mut next, &owned).await;
    assert_eq!(applied.changed_meanwhile, ["east"]);
    assert!(applied.first_error.is_none() && applied.refused.is_empty(), "not a failure: {applied:?}");
    assert!(written(&applied).is_empty(), "{:?}", applied.done);
    let now = observed(&env, &app).await;
    assert_eq!(now[0].spec_hash, before, "the release was left as it was");

    // A plan on what it holds now moves it. helm-controller may write the
    // release's status between the read and the write (its install ends):
    // then that plan, too, was made on what it no longer is, and the next
    // read is planned again, as the controller's next reconcile would.
    let mut now = now;
    let mut applied = None;
    for _ in 0..10 {
        let mut again = plan_over(&changed, &pools(&["east"]), now.clone());
        let carried = carry_out(&env, &app, &mut again, &now).await;
        if carried.changed_meanwhile.is_empty() {
            applied = Some(carried);
            break;
        }
        now = observed(&env, &app).await;
    }
    let applied = applied.expect("a plan made on what the release holds is carried out");
    assert_eq!(written(&applied), [("east".to_string(), true)]);
    assert_ne!(observed(&env, &app).await[0].spec_hash, before);
    env.cleanup().await;
}
