//! The GitOps path end to end, as a user runs it: node pools and a
//! NodePoolApplication committed to a Git repository, fetched by Flux's
//! source-controller (a `GitRepository` over smart HTTP) and applied by its
//! kustomize-controller (a `Kustomization` with `wait: true` and `prune:
//! true`). kustomize-controller judges the application's health with
//! kstatus, so these tests are also the proof that our conditions read as
//! they should to Flux: Ready only once every pool's release is Ready, a
//! health check that fails at once, with our words, when a pool is broken,
//! and what `kubectl get npa` shows agreeing with both.
use crate::support;

use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, releases_by_pool, wait_app, CHANGE_TIMEOUT, READY_TIMEOUT};
use support::gitops::{
    apply_object, deliver, gitrepository_resource, reconcile_now, wait_kustomization, GitRepo,
};
use support::{
    condition, ensure_crd, kstatus, kubectl, repo_root, wait_for, RunningController, TestEnv, TestResult,
    POOL_LABEL,
};

/// An OpenYurt NodePool as a user commits it.
fn nodepool(name: &str, tag: &str, region: &str) -> Value {
    json!({
        "apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
        "metadata": { "name": name, "labels": { "e2e": tag, "region": region } },
        "spec": { "type": "Edge" }
    })
}

/// What `kubectl get npa` prints for the application: its READY and
/// STATUS columns.
fn kubectl_get_npa(env: &TestEnv) -> (String, String) {
    let out = kubectl(&[
        "get",
        "npa",
        "ingress",
        "-n",
        &env.namespace,
        "-o",
        "custom-columns=READY:.status.ready,STATUS:.status.conditions[?(@.type==\"Ready\")].message",
        "--no-headers",
    ]);
    let line = out.trim();
    let (ready, status) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    (ready.to_string(), status.trim().to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn flux_delivers_an_application_from_git_and_reads_its_health() -> TestResult {
    let mut env = TestEnv::new("gitops").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let (east, west) = (env.pool_name("east"), env.pool_name("west"));
    // The nodes join the pools the commit creates; kwok plays their kubelets.
    for pool in [&east, &west] {
        env.create_node(&format!("{pool}-node-0"), pool).await;
    }
    let controller = RunningController::start(&env.namespace);
    let repo = GitRepo::create(&env.prefix);
    let result = deliver_and_change(&env, &controller, &repo, &tag, [&east, &west]).await;
    env.cleanup().await;
    result
}

async fn deliver_and_change(
    env: &TestEnv,
    controller: &RunningController,
    repo: &GitRepo,
    tag: &str,
    [east, west]: [&String; 2],
) -> TestResult {
    // 1. The first commit: two pools and the application.
    repo.write("clusters/local/pools.yaml", &[nodepool(east, tag, "east"), nodepool(west, tag, "west")]);
    let app = ingress_app(env, json!({}));
    repo.write("clusters/local/ingress.yaml", std::slice::from_ref(&app));
    let first = repo.commit_and_push("Fan the ingress gateway out to east and west");
    deliver(env, "edge", repo, "./clusters/local").await?;
    let delivered = wait_kustomization(env, "edge", &first, "True").await;
    // kstatus let the Kustomization turn Ready: every release must be Ready
    // by then, and kubectl must say the same.
    let releases = releases_by_pool(env).await;
    assert_eq!(releases.len(), 2, "one release per pool: {:?}", releases.keys());
    for (pool, hr) in &releases {
        assert_eq!(
            condition(hr, "Ready").map(|c| c["status"].clone()),
            Some(json!("True")),
            "the Kustomization turned Ready while pool {pool}'s release was not: {delivered}"
        );
    }
    assert_eq!(kubectl_get_npa(env).0, "2/2", "kubectl get npa agrees with the Kustomization");
    for pool in [east, west] {
        let nodes = env.nodes_of(pool).await;
        assert_eq!(nodes.len(), 1, "pool {pool}'s node carries {POOL_LABEL}");
    }

    // 2. A commit that changes the values rolls out to every pool.
    let mut changed = app.clone();
    changed["spec"]["values"]["controller"]["replicas"] = json!(2);
    repo.write("clusters/local/ingress.yaml", std::slice::from_ref(&changed));
    let second = repo.commit_and_push("Two ingress replicas per site");
    reconcile_now(env, "edge").await?;
    wait_kustomization(env, "edge", &second, "True").await;
    let releases = releases_by_pool(env).await;
    for (pool, hr) in &releases {
        assert_eq!(hr["spec"]["values"]["controller"]["replicas"], 2, "pool {pool} got the change");
        assert_eq!(
            condition(hr, "Ready").map(|c| c["status"].clone()),
            Some(json!("True")),
            "pool {pool}'s upgrade is Ready before the Kustomization is"
        );
    }
    assert_eq!(kubectl_get_npa(env).0, "2/2");

    // 3. A commit that breaks one pool: its override names a label the
    // pool does not have. The health check must fail at once, not pass or
    // wait out its timeout, and the application must say why.
    let mut broken = changed.clone();
    broken["spec"]["overrides"] = json!([
        { "pools": { "names": [west] }, "values": { "controller": { "image": { "tag": "{{pool.labels.version}}" } } } }
    ]);
    repo.write("clusters/local/ingress.yaml", &[broken]);
    let third = repo.commit_and_push("Pin west's image to its version label");
    reconcile_now(env, "edge").await?;
    let failed = wait_kustomization(env, "edge", &third, "False").await;
    let ready = condition(&failed, "Ready").cloned().unwrap_or_default();
    assert_eq!(ready["reason"], "HealthCheckFailed", "the health check failed: {ready}");
    let message = ready["message"].as_str().unwrap_or_default();
    // kustomize-controller names the object and kstatus's reading, not the
    // object's own words: those are on the application, below. "Failed
    // early" is the proof that it did not wait out its timeout.
    assert!(
        message.contains("failed early due to stalled resources")
            && message.contains(&format!("NodePoolApplication/{}/ingress", env.namespace)),
        "the Kustomization fails at once, naming the application: {message}"
    );
    let (npa_ready, npa_status) = kubectl_get_npa(env);
    assert!(
        npa_status.contains(west.as_str()) && npa_status.contains("pool.labels.version"),
        "kubectl get npa names the broken pool and the field: {npa_ready} {npa_status}"
    );
    let stalled =
        wait_app(env, controller, "the broken pool reported", CHANGE_TIMEOUT, |app| {
            match condition(app, "Stalled") {
                Some(c) if c["status"] == "True" => Ok(()),
                other => Err(format!("Stalled is {other:?}")),
            }
        })
        .await;
    let stalled_message = condition(&stalled, "Stalled").and_then(|c| c["message"].as_str()).unwrap_or("");
    assert!(stalled_message.contains(west.as_str()), "Stalled names the pool: {stalled_message}");

    // 4. A commit that fixes it turns the Kustomization Ready again.
    repo.write("clusters/local/ingress.yaml", &[changed]);
    let fourth = repo.commit_and_push("Revert west's image pin");
    reconcile_now(env, "edge").await?;
    wait_kustomization(env, "edge", &fourth, "True").await;
    assert_eq!(kubectl_get_npa(env).0, "2/2");

    // 5. A commit that removes the application: Flux prunes it, and its
    // releases go with it; the pools stay, committed as they were.
    repo.remove("clusters/local/ingress.yaml");
    let fifth = repo.commit_and_push("Remove the ingress gateway");
    reconcile_now(env, "edge").await?;
    wait_kustomization(env, "edge", &fifth, "True").await;
    wait_for("every release removed with the application", READY_TIMEOUT, || async {
        let left: Vec<String> = releases_by_pool(env).await.into_keys().collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("releases of {left:?} remain"))
        }
    })
    .await;
    let pools = kubectl(&["get", "nodepools", "-l", &format!("e2e={tag}"), "-o", "name"]);
    assert_eq!(pools.lines().count(), 2, "the pools stay: {pools}");

    // Deleting the Kustomization prunes the pools it applied.
    kubectl(&[
        "delete",
        "kustomization",
        "edge",
        "-n",
        &env.namespace,
        "--wait=true",
        "--timeout=120s",
    ]);
    Ok(())
}

/// A chart kept in a Git repository beside the manifests, as many teams
/// keep their own: `spec.chart` names the GitRepository and the chart's
/// path, and every pool installs it from there through one shared
/// HelmChart.
#[tokio::test(flavor = "multi_thread")]
async fn a_chart_kept_in_git_fans_out() -> TestResult {
    let mut env = TestEnv::new("git-chart").await;
    ensure_crd(&env.client).await;
    env.create_region_pools(&["east", "west"]).await;
    let controller = RunningController::start(&env.namespace);
    let repo = GitRepo::create(&env.prefix);
    repo.copy_dir(&repo_root().join("charts-fixtures/ingress-gateway"), "charts/ingress-gateway");
    repo.commit_and_push("The ingress gateway chart");
    let result = async {
        let source = json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": { "name": "charts", "namespace": env.namespace },
            "spec": { "url": repo.url, "interval": "1m", "ref": { "branch": "main" } }
        });
        apply_object(&env, &gitrepository_resource(), &source).await?;
        let mut app = ingress_app(&env, json!({}));
        app["spec"]["chart"]["spec"] = json!({
            "chart": "./charts/ingress-gateway",
            "sourceRef": { "kind": "GitRepository", "name": "charts" }
        });
        apply_app(&env, &app).await?;
        wait_app(&env, &controller, "READY 2/2 from Git", READY_TIMEOUT, |app| {
            match (app.pointer("/status/ready"), app.pointer("/status/chartVersion")) {
                (Some(r), Some(v)) if r == "2/2" && v == "1.0.0" => Ok(()),
                other => Err(format!("ready, chartVersion: {other:?}")),
            }
        })
        .await;
        let releases = releases_by_pool(&env).await;
        let charts: std::collections::BTreeSet<String> =
            releases.values().map(|hr| hr["spec"]["chartRef"]["name"].to_string()).collect();
        assert_eq!(charts.len(), 1, "every pool shares one HelmChart: {charts:?}");
        for (pool, hr) in &releases {
            assert_eq!(hr["spec"]["chartRef"]["kind"], "HelmChart", "{pool}");
            assert_eq!(condition(hr, "Ready").map(|c| c["status"].clone()), Some(json!("True")), "{pool}");
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}

/// An application no controller has read yet has no status of its own.
/// kstatus takes an object without status for Current, which would let a
/// Kustomization pass its health check before a single release exists:
/// the CRD's default status (observed generation -1, as Flux's own kinds
/// have it) must make the API server hand it out as InProgress.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_application_reads_in_progress_until_it_is_reconciled() -> TestResult {
    let env = TestEnv::new("kstatus-new").await;
    ensure_crd(&env.client).await;
    // No controller runs in this namespace: nothing will write a status.
    let created = apply_app(&env, &ingress_app(&env, json!({}))).await;
    let result = async {
        let created = serde_json::to_value(created?)?;
        assert_eq!(created.pointer("/status/observedGeneration"), Some(&json!(-1)), "{created}");
        assert_eq!(kstatus(&created), "InProgress", "kstatus reads {created}");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}
