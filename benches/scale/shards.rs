//! Shards side by side: one controller instance a shard, each with
//! `--watch-label-selector sharding.fluxcd.io/key=<its shard>`, each
//! serving one application over its share of the pools. Prints each
//! shard's figures, and proves that no release was written by two: each
//! shard's creates are exactly its own releases, together they are every
//! release there is, and none wrote a release again once written. Run at
//! two shards over 2 × N pools and four over 4 × N/2, to show whether a
//! shard's memory follows its own fleet (it keeps the others' releases
//! cut down).

use std::time::{Duration, Instant};

use kube::api::{DynamicObject, ListParams};
use kube::Api;
use nodepool_fanout::api::naming;
use serde_json::json;

use crate::support::apps::{app_named, apply_app};
use crate::support::bench::{clean_up, controller_flags, create_pools, process_figures, secs, wait};
use crate::support::{helmrelease_resource, nodepool_resource, RunningController, TestEnv};

struct Shard {
    key: &'static str,
    controller: RunningController,
    written_in: Duration,
}

/// `keys.len()` shards of `pools_each` pools each.
pub async fn shards(keys: &[&'static str], pools_each: usize) {
    println!();
    let count = keys.len();
    println!(
        "{count} shards: {} pools in all, {pools_each} a shard, one controller each",
        pools_each * count
    );
    let env = TestEnv::new("shards").await;
    crate::support::ensure_crd(&env.client).await;
    let pool_api: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &helmrelease_resource());
    let mut shards = Vec::new();
    for &key in keys {
        let names: Vec<String> = (0..pools_each).map(|i| env.pool_name(&format!("{key}{i}"))).collect();
        // The shard is the pools' region: one tag for every pool of the
        // bench, which `clean_up` removes.
        create_pools(&pool_api, &names, &env.prefix, &[key]).await;
        let selector = format!("{}={key}", naming::LABEL_SHARD);
        let mut flags = controller_flags("1h");
        flags.extend(["--watch-label-selector", selector.as_str()]);
        let controller = RunningController::start_env(&env.namespace, &flags, &[("POD_NAME", key)]);
        shards.push(Shard {
            key,
            controller,
            written_in: Duration::ZERO,
        });
    }
    // Every pool in the cluster is cached by every shard: a run's figures
    // hold only if no pool of another run is left.
    let in_cluster = crate::support::bench::count(&pool_api).await;
    println!("created {} NodePools; {in_cluster} in the cluster", pools_each * count);
    assert_eq!(in_cluster, pools_each * count, "NodePools of another run are still in the cluster");
    let start = Instant::now();
    for shard in &shards {
        let mut app = app_named(
            &format!("fleet-{}", shard.key),
            &env.namespace,
            "ingress-gateway",
            "1.0.0",
            json!({
                "pools": { "selector": { "matchLabels": { "e2e": env.prefix, "region": shard.key } } },
                "helmRelease": { "suspend": true }
            }),
        );
        app["metadata"]["labels"] = json!({ naming::LABEL_SHARD: shard.key });
        apply_app(&env, &app).await.expect("apply a shard's application");
    }
    for shard in &mut shards {
        let mine = ListParams::default().labels(&format!("{}={}", naming::LABEL_SHARD, shard.key));
        wait("a shard to write its releases", &shard.controller, || async {
            (count_with(&releases, &mine).await == pools_each).then_some(())
        })
        .await;
        shard.written_in = start.elapsed();
    }
    for shard in &shards {
        shard.controller.quiet(super::QUIET).await;
    }

    // Every release, by its shard label and its owner.
    let all = releases.list_metadata(&ListParams::default()).await.expect("list the releases");
    let mut owned = vec![0usize; count];
    for release in &all.items {
        let key = release.metadata.labels.as_ref().and_then(|l| l.get(naming::LABEL_SHARD));
        let owner = release
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.name.clone());
        let i = keys.iter().position(|k| key.map(String::as_str) == Some(*k));
        match i.filter(|&i| owner.as_deref() == Some(format!("fleet-{}", keys[i]).as_str())) {
            Some(i) => owned[i] += 1,
            None => panic!("release {:?} is of no one shard: {key:?} {owner:?}", release.metadata.name),
        }
    }
    assert_eq!(owned, vec![pools_each; count], "each shard's releases");
    println!();
    row("", keys.iter().map(|k| format!("shard {k}")).collect());
    let mut figures = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let created = release_requests(&shard.controller, &["create"]).await;
        let rewritten = release_requests(&shard.controller, &["update", "patch", "apply", "delete"]).await;
        assert_eq!(created as usize, owned[i], "shard {}: one create per release of its own", shard.key);
        assert_eq!(rewritten, 0, "shard {}: no release written again", shard.key);
        let (rss, cpu) = process_figures(shard.controller.pid());
        figures.push(Figures {
            written_in: shard.written_in,
            created,
            rewritten,
            rss,
            cpu,
            reconciles: shard.controller.reconciles().await,
        });
    }
    let both = |f: fn(&Figures) -> String| figures.iter().map(f).collect::<Vec<_>>();
    row(&format!("its {pools_each} releases written (all at once)"), both(|f| secs(f.written_in)));
    row("HelmReleases it created", both(|f| f.created.to_string()));
    row("HelmReleases it wrote again or deleted", both(|f| f.rewritten.to_string()));
    row(
        "peak RSS (goal: at most 100 MiB a shard)",
        both(|f| format!("{:.1} MiB", f.rss as f64 / 1024.0)),
    );
    row("CPU time", both(|f| format!("{:.1} s", f.cpu)));
    row("reconciles", both(|f| f.reconciles.to_string()));
    println!(
        "every one of the {} releases carries one shard's label and its application's owner reference; \
         each shard created exactly its own, and wrote none twice",
        all.items.len()
    );

    drop(shards);
    clean_up(env).await;
}

/// One line of a table of shards: a label, then a cell a shard.
pub(super) fn row(label: &str, cells: Vec<String>) {
    let cells: String = cells.iter().map(|c| format!(" {c:>12}")).collect();
    println!("{label:<52}{cells}");
}

/// One shard's figures.
struct Figures {
    written_in: Duration,
    created: u64,
    rewritten: u64,
    rss: u64,
    cpu: f64,
    reconciles: u64,
}

/// The controller's requests on HelmReleases of these verbs.
async fn release_requests(controller: &RunningController, verbs: &[&str]) -> u64 {
    controller
        .counter("nodepool_fanout_api_requests_total", |l| {
            l.contains("resource=\"helmreleases.")
                && verbs.iter().any(|v| l.contains(&format!("verb=\"{v}\"")))
        })
        .await
}

/// The objects of `api` that `params` selects, listed by pages: the API
/// server gives no remaining count for a list with a label selector.
async fn count_with(api: &Api<DynamicObject>, params: &ListParams) -> usize {
    let mut counted = 0;
    let mut page = params.clone().limit(1000);
    loop {
        let Ok(list) = api.list_metadata(&page).await else {
            return 0;
        };
        counted += list.items.len();
        match list.metadata.continue_ {
            Some(token) if !token.is_empty() => page = page.continue_token(&token),
            _ => return counted,
        }
    }
}
