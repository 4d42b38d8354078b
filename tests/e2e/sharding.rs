//! Sharding the Flux way on the local control plane: two instances with
//! `--watch-label-selector` side by side, each serving only the applications
//! of its shard, and passing the shard label on to what it makes so that
//! Flux's own sharded controllers serve them too.
use crate::support;

use std::time::Duration;

use kube::api::{DynamicObject, ListParams};
use kube::Api;
use nodepool_fanout::api::naming;
use nodepool_fanout::api::NodePoolApplication;
use serde_json::{json, Value};
use support::apps::{app_named, apply_app, CHANGE_TIMEOUT};
use support::{ensure_crd, helmchart_resource, helmrelease_resource, RunningController, TestEnv, TestResult};

/// An application of `shard` over the test's pools, its releases suspended.
fn sharded_app(env: &TestEnv, name: &str, shard: &str) -> Value {
    let mut app = app_named(
        name,
        &env.namespace,
        "ingress-gateway",
        "1.0.0",
        json!({
            "pools": { "selector": { "matchLabels": { "e2e": env.prefix } } },
            "values": { "controller": { "ingressClass": { "name": format!("{}-{name}-{{{{pool.name}}}}", env.namespace) } } },
            "helmRelease": { "suspend": true }
        }),
    );
    app["metadata"]["labels"] = json!({ naming::LABEL_SHARD: shard });
    app
}

/// The application's observed generation, once some instance has served it.
async fn served(env: &TestEnv, name: &str) -> Option<i64> {
    let api: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    // An application no controller has read carries the CRD's default
    // status, observed generation -1: not served.
    api.get(name).await.ok()?.status?.observed_generation.filter(|g| *g >= 0)
}

/// Shard labels on the objects an application made, by kind.
async fn shard_labels(env: &TestEnv, app: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let label = format!("{}={app}", naming::LABEL_APPLICATION);
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let charts: Api<DynamicObject> = Api::all_with(env.client.clone(), &helmchart_resource());
    for (kind, api) in [("HelmRelease", releases), ("HelmChart", charts)] {
        for object in api.list(&ListParams::default().labels(&label)).await.expect("list").items {
            if kind == "HelmChart"
                && object
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("apps.fanout.dev/application"))
                    != Some(&format!("{}/{app}", env.namespace))
            {
                continue;
            }
            found.push((
                kind.to_string(),
                object.metadata.labels.unwrap_or_default().get(naming::LABEL_SHARD).cloned(),
            ));
        }
    }
    found.sort();
    found
}

/// What the application's status says of each pool now.
async fn pool_messages(env: &TestEnv, name: &str) -> Vec<String> {
    let api: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let status = api.get(name).await.ok().and_then(|app| app.status);
    status.map(|s| s.pools.into_iter().map(|p| p.message).collect()).unwrap_or_default()
}

/// How many of the application's pools its status says are up to date
/// with its latest spec (none until it has read that spec).
async fn up_to_date(env: &TestEnv, name: &str) -> usize {
    let api: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    let Ok(app) = api.get(name).await else { return 0 };
    let status = app.status.unwrap_or_default();
    match status.observed_generation == app.metadata.generation {
        true => status.pools.iter().filter(|p| p.up_to_date).count(),
        false => 0,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_shards_serve_only_their_own_applications() -> TestResult {
    let mut env = TestEnv::new("shards").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    for pool in ["a", "b", "c"] {
        env.create_pool(pool, &[("e2e", &tag)], 1).await;
    }
    let (one, two) = (format!("{tag}-one"), format!("{tag}-two"));
    apply_app(&env, &sharded_app(&env, "app-one", &one)).await?;
    apply_app(&env, &sharded_app(&env, "app-two", &two)).await?;

    let first = RunningController::start_env(
        &env.namespace,
        &[
            "--watch-label-selector",
            &format!("{}={one}", naming::LABEL_SHARD),
        ],
        &[("POD_NAME", "shard-one")],
    );
    support::wait_for("shard one serving app-one", CHANGE_TIMEOUT, || async {
        served(&env, "app-one").await.map(|_| ()).ok_or_else(|| first.log_tail())
    })
    .await;
    // One shared chart, and a release a pool.
    let expect = |shard: &str| {
        let mut objects = vec![("HelmChart".to_string(), Some(shard.to_string()))];
        objects.extend(std::iter::repeat_n(("HelmRelease".to_string(), Some(shard.to_string())), 3));
        objects
    };
    support::wait_for("app-one's objects labelled", CHANGE_TIMEOUT, || async {
        match shard_labels(&env, "app-one").await {
            found if found == expect(&one) => Ok(()),
            found => Err(format!("{found:?}")),
        }
    })
    .await;
    // Nobody serves shard two yet.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(served(&env, "app-two").await, None, "shard one served an application of shard two");
    assert!(shard_labels(&env, "app-two").await.is_empty());

    let second = RunningController::start_env(
        &env.namespace,
        &[
            "--watch-label-selector",
            &format!("{}={two}", naming::LABEL_SHARD),
        ],
        &[("POD_NAME", "shard-two")],
    );
    support::wait_for("app-two's objects labelled", CHANGE_TIMEOUT, || async {
        match shard_labels(&env, "app-two").await {
            found if found == expect(&two) && served(&env, "app-two").await.is_some() => Ok(()),
            found => Err(format!("{found:?}\n{}", second.log_tail())),
        }
    })
    .await;
    for (log, own, other) in [
        (&first.log, "app-one", "app-two"),
        (&second.log, "app-two", "app-one"),
    ] {
        let text = std::fs::read_to_string(log)?;
        assert!(text.contains(own), "{} never reconciled {own}", log.display());
        assert!(!text.contains(other), "{} reconciled {other}", log.display());
    }

    // app-one moves to shard two with a new chart version: shard two,
    // which serves it now, prunes the chart shard one made for 1.0.0.
    // Shard two held app-one's releases cut down, as another shard's: it
    // reads them again in full before it plans, so it never takes its
    // own releases for someone else's.
    let mut moved = sharded_app(&env, "app-one", &two);
    moved["spec"]["chart"]["spec"]["version"] = json!("1.1.0");
    apply_app(&env, &moved).await?;
    let said = std::sync::Mutex::new(Vec::new());
    support::wait_for(
        "app-one's releases and charts all of shard two, and up to date",
        CHANGE_TIMEOUT,
        || {
            let (env, second, said, two) = (&env, &second, &said, &two);
            async move {
                let messages = pool_messages(env, "app-one").await;
                said.lock().unwrap().extend(messages);
                let updated = up_to_date(env, "app-one").await;
                match shard_labels(env, "app-one").await {
                    found if found == expect(two) && updated == 3 => Ok(()),
                    found => Err(format!("{found:?}, {updated} pools up to date\n{}", second.log_tail())),
                }
            }
        },
    )
    .await;
    let said = said.into_inner().unwrap();
    let taken: Vec<&String> = said.iter().filter(|m| m.contains("not owned by this application")).collect();
    assert!(taken.is_empty(), "shard two took app-one's own releases for another's: {taken:?}");
    let log = std::fs::read_to_string(&second.log)?;
    assert!(log.contains("reading its releases again"), "{}", second.log_tail());
    drop((first, second));
    env.cleanup().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_the_api_server_refuses_stops_the_controller_naming_the_flag() -> TestResult {
    let env = TestEnv::new("badshard").await;
    ensure_crd(&env.client).await;
    let mut controller =
        RunningController::start_with(&env.namespace, &["--watch-label-selector", "not a selector!"]);
    support::wait_for("the controller to exit", CHANGE_TIMEOUT, || {
        let running = controller.is_running();
        async move {
            if running {
                Err("still running".to_string())
            } else {
                Ok(())
            }
        }
    })
    .await;
    let log = std::fs::read_to_string(&controller.log)?;
    assert!(
        log.contains("--watch-label-selector \"not a selector!\" is refused by the API server"),
        "{log}"
    );
    env.cleanup().await;
    Ok(())
}

/// A shard reads an application afresh at each reconcile only while it is
/// still of the shard: one that moved away since the watch brought it is
/// the other shard's, and two instances never plan it at once. The API
/// server matches the shard's selector, as it does for the watch.
#[tokio::test(flavor = "multi_thread")]
async fn a_shard_no_longer_reads_an_application_moved_to_another() -> TestResult {
    use nodepool_fanout::runtime::shards::read_if_served;
    let env = TestEnv::new("moved").await;
    ensure_crd(&env.client).await;
    let apps: Api<NodePoolApplication> = Api::namespaced(env.client.clone(), &env.namespace);
    apply_app(&env, &sharded_app(&env, "app", "one")).await?;
    apply_app(&env, &sharded_app(&env, "beside", "one")).await?;
    let one = format!("{}=one", naming::LABEL_SHARD);
    let unsharded = format!("!{}", naming::LABEL_SHARD);
    let name_of = |app: Option<NodePoolApplication>| app.and_then(|a| a.metadata.name);
    assert_eq!(name_of(read_if_served(&apps, "app", Some(&one)).await?).as_deref(), Some("app"));
    assert_eq!(name_of(read_if_served(&apps, "app", Some(&unsharded)).await?), None);
    // Moved to the main shard (its label taken off).
    let mut moved = sharded_app(&env, "app", "one");
    moved["metadata"]["labels"] = json!({});
    apply_app(&env, &moved).await?;
    assert_eq!(name_of(read_if_served(&apps, "app", Some(&one)).await?), None, "shard one still reads it");
    assert_eq!(name_of(read_if_served(&apps, "app", Some(&unsharded)).await?).as_deref(), Some("app"));
    // Its neighbour, still of shard one, is read by its own name alone.
    assert_eq!(name_of(read_if_served(&apps, "beside", Some(&one)).await?).as_deref(), Some("beside"));
    // An instance that serves every shard reads it as a plain get; gone, it is none.
    assert_eq!(name_of(read_if_served(&apps, "app", None).await?).as_deref(), Some("app"));
    assert_eq!(name_of(read_if_served(&apps, "gone", Some(&one)).await?), None);
    env.cleanup().await;
    Ok(())
}
