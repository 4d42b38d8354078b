//! Shards laid out a namespace each, over sites that are clusters: the
//! layout the scaling guide gives for 100,000 sites. One instance a
//! shard, each run with `--watch-namespace` its namespace and its shard
//! selector, serving one application over its namespace's
//! ClusterProfiles. Run at two shards and at four, the same sites a shard:
//! what a shard holds (`nodepool_fanout_cached_objects`), its memory and
//! its CPU should not move with the number of other shards.

use std::time::Instant;

use kube::api::DynamicObject;
use kube::Api;
use nodepool_fanout::api::naming;
use serde_json::json;

use super::shards::row;
use crate::support::apps::{app_named, apply_app};
use crate::support::bench::{controller_flags, create_all, let_go, process_figures, secs, wait};
use crate::support::{clusterprofile_resource, helmrelease_resource, RunningController, TestEnv};

struct Shard {
    key: &'static str,
    env: TestEnv,
    controller: RunningController,
}

/// `keys.len()` shards of `sites_each` ClusterProfiles each, a namespace
/// a shard.
pub async fn site_shards(keys: &[&'static str], sites_each: usize) {
    println!();
    let count = keys.len();
    println!(
        "{count} shards over sites that are clusters, a namespace each: {} ClusterProfiles in all, \
         {sites_each} a shard, one controller each (--watch-namespace)",
        sites_each * count
    );
    let mut shards = Vec::new();
    for &key in keys {
        let env = TestEnv::new(&format!("site-shard-{key}")).await;
        crate::support::ensure_crd(&env.client).await;
        create_profiles(&env, sites_each).await;
        let selector = format!("{}={key}", naming::LABEL_SHARD);
        let mut flags = controller_flags("1h");
        flags.extend(["--watch-label-selector", selector.as_str()]);
        let controller = RunningController::start_env(&env.namespace, &flags, &[("POD_NAME", key)]);
        shards.push(Shard { key, env, controller });
    }
    let start = Instant::now();
    for shard in &shards {
        let env = &shard.env;
        let mut app = app_named(
            &format!("sites-{}", shard.key),
            &env.namespace,
            "ingress-gateway",
            "1.0.0",
            json!({
                "pools": { "kind": "ClusterProfile", "selector": { "matchLabels": { "e2e": env.prefix } } },
                "helmRelease": { "suspend": true }
            }),
        );
        app["metadata"]["labels"] = json!({ naming::LABEL_SHARD: shard.key });
        apply_app(env, &app).await.expect("apply a shard's application");
    }
    let mut written_in = Vec::new();
    for shard in &shards {
        let releases: Api<DynamicObject> =
            Api::namespaced_with(shard.env.client.clone(), &shard.env.namespace, &helmrelease_resource());
        wait("a shard to write its releases", &shard.controller, || async {
            (crate::support::bench::count(&releases).await == sites_each).then_some(())
        })
        .await;
        written_in.push(start.elapsed());
    }
    for shard in &shards {
        shard.controller.quiet(super::QUIET).await;
    }
    println!();
    row("", keys.iter().map(|k| format!("shard {k}")).collect());
    let mut held = Vec::new();
    let mut figures = Vec::new();
    let mut reconciles = Vec::new();
    for shard in &shards {
        let cached = |kind: &'static str, how: &'static str| {
            move |line: &str| line.contains(&format!(r#"kind="{kind}""#)) && line.contains(how)
        };
        let held_by =
            |kind, how| shard.controller.counter("nodepool_fanout_cached_objects", cached(kind, how));
        let (profiles, whole, cut) = (
            held_by("ClusterProfile", "").await,
            held_by("HelmRelease", r#"held="whole""#).await,
            held_by("HelmRelease", r#"held="cut down""#).await,
        );
        held.push((profiles, whole, cut));
        let woken_by_releases = shard
            .controller
            .counter("nodepool_fanout_reconcile_wakes_total", |l| l.contains(r#"cause="HelmRelease""#))
            .await;
        reconciles.push((shard.controller.reconciles().await, woken_by_releases));
        figures.push(process_figures(shard.controller.pid()));
    }
    row(
        &format!("its {sites_each} releases written (all at once)"),
        written_in.iter().map(|d| secs(*d)).collect(),
    );
    row("ClusterProfiles it holds", held.iter().map(|h| h.0.to_string()).collect());
    row(
        "HelmReleases it holds, whole / cut down",
        held.iter().map(|h| format!("{} / {}", h.1, h.2)).collect(),
    );
    row(
        "peak RSS (goal: at most 100 MiB a shard)",
        figures.iter().map(|(rss, _)| format!("{:.1} MiB", *rss as f64 / 1024.0)).collect(),
    );
    row("CPU time", figures.iter().map(|(_, cpu)| format!("{cpu:.1} s")).collect());
    row(
        "reconciles, of them woken by its releases' events",
        reconciles.iter().map(|(all, releases)| format!("{all}, {releases}")).collect(),
    );
    for (shard, (profiles, whole, cut)) in shards.iter().zip(&held) {
        assert_eq!(
            (*profiles as usize, *whole as usize, *cut),
            (sites_each, sites_each, 0),
            "shard {} holds its own sites and releases alone",
            shard.key
        );
    }
    println!("each shard holds its own {sites_each} profiles and releases, and nothing of the other shards'");

    for shard in shards {
        drop(shard.controller);
        let_go(&shard.env.client, &shard.env.namespace).await;
        shard.env.cleanup().await;
    }
}

/// `count` ClusterProfiles in the test's namespace, each marked with its
/// tag; no kubeconfig Secret, since the releases are suspended.
async fn create_profiles(env: &TestEnv, count: usize) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &clusterprofile_resource());
    let profiles = (0..count).map(|i| {
        serde_json::from_value(json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": { "name": format!("site-{i:05}"), "labels": { "e2e": env.prefix } },
            "spec": { "displayName": format!("site-{i:05}"), "clusterManager": { "name": "bench" } }
        }))
        .expect("ClusterProfile manifest")
    });
    create_all(&api, profiles).await;
}
