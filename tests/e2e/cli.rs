//! `nodepool-fanout get` and `tree` against the cluster, as an operator
//! runs them: one line per pool (a failing one picked out by `--failing`),
//! JSON for scripts, and the application's charts and releases as a tree.
use crate::support;

use std::process::Command;

use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, pool_status, wait_app, READY_TIMEOUT};
use support::{ensure_crd, kubeconfig, RunningController, TestEnv, TestResult};

fn cli(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_nodepool-fanout"))
        .args(args)
        .env("KUBECONFIG", kubeconfig())
        .output()
        .expect("the nodepool-fanout binary runs");
    assert!(
        output.status.success(),
        "nodepool-fanout {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn get_prints_a_line_per_pool_and_tree_what_the_application_made() -> TestResult {
    let mut env = TestEnv::new("cli").await;
    ensure_crd(&env.client).await;
    let tag = env.prefix.clone();
    let good = env.create_pool("good", &[("e2e", &tag), ("region", "east")], 2).await;
    let bad = env.create_pool("bad", &[("e2e", &tag), ("region", "west")], 1).await;
    let controller = RunningController::start(&env.namespace);
    let result = async {
        // The bad pool's override names a label it does not have: no release.
        let app = ingress_app(
            &env,
            json!({ "overrides": [ { "pools": { "names": [bad] },
                "values": { "controller": { "image": { "tag": "{{pool.labels.version}}" } } } } ] }),
        );
        apply_app(&env, &app).await?;
        let (good_seen, bad_seen) = (good.clone(), bad.clone());
        wait_app(&env, &controller, "good Ready, bad failing", READY_TIMEOUT, move |app| {
            match (pool_status(app, &good_seen), pool_status(app, &bad_seen)) {
                (Some(g), Some(b)) if g["ready"] == "True" && b["ready"] == "False" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;

        let table = cli(&["get", "-n", &env.namespace]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "a header and one line per pool:\n{table}");
        assert!(lines[0].starts_with("POOL") && lines[0].contains("REVISION"), "{table}");
        let line_of = |pool: &str| lines.iter().find(|l| l.starts_with(pool)).copied().unwrap_or_default();
        let good_line = line_of(&good);
        assert!(
            good_line.contains(" 2/2 ") && good_line.contains(" Ready ") && good_line.contains(" 1.0.0 "),
            "{good_line}"
        );
        let bad_line = line_of(&bad);
        assert!(bad_line.contains(" None ") && bad_line.contains("pool.labels.version"), "{bad_line}");

        let failing = cli(&["get", "-n", &env.namespace, "--failing"]);
        let failing_pools: Vec<&str> =
            failing.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
        assert_eq!(failing_pools, [bad.as_str()], "{failing}");

        let rows: Value =
            serde_json::from_str(&cli(&["get", "ingress", "-n", &env.namespace, "-o", "json"]))?;
        let good_row = rows
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["pool"] == good.as_str())
            .cloned()
            .unwrap_or_default();
        assert_eq!(good_row["revision"], 1, "{rows}");
        assert_eq!(good_row["state"], "Ready", "{rows}");

        let tree = cli(&["tree", "ingress", "-n", &env.namespace]);
        let tree_lines: Vec<&str> = tree.lines().collect();
        assert!(
            tree_lines[0].starts_with(&format!("NodePoolApplication/{}/ingress", env.namespace)),
            "{tree}"
        );
        assert!(tree_lines[1].starts_with("└── HelmChart/flux-system/ingress-ingress-gateway-"), "{tree}");
        assert!(
            tree_lines[2].contains("HelmRelease/") && tree_lines[2].contains(&format!("pool {good}")),
            "{tree}"
        );
        assert_eq!(tree_lines.len(), 3, "the bad pool has no release:\n{tree}");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}
