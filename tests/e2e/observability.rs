//! What the running controller tells a Flux operator's tools: JSON log
//! lines with the keys Flux's controllers log (`controller`, `name`,
//! `namespace`, `reconcileID` at the top level), and, beside our metrics,
//! the ones Flux's dashboards query: `gotk_reconcile_duration_seconds` and
//! `gotk_resource_info` for each application, leadership, and the process;
//! and its reconciles counted by what woke them.
use crate::support;

use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, ready_is, wait_app, READY_TIMEOUT};
use support::{ensure_crd, RunningController, TestEnv, TestResult};

#[tokio::test(flavor = "multi_thread")]
async fn logs_and_metrics_read_as_flux_operators_expect() -> TestResult {
    let mut env = TestEnv::new("observability").await;
    ensure_crd(&env.client).await;
    env.create_region_pools(&["east"]).await;
    let controller = RunningController::start_with(&env.namespace, &["--log-format=json"]);
    let result = async {
        apply_app(&env, &ingress_app(&env, json!({}))).await?;
        wait_app(&env, &controller, "READY 1/1", READY_TIMEOUT, ready_is("1/1")).await;

        let lines: Vec<Value> =
            controller.log_tail().lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
        assert!(!lines.is_empty(), "the log is JSON lines:\n{}", controller.log_tail());
        let inside: Vec<&Value> = lines.iter().filter(|l| l.get("reconcileID").is_some()).collect();
        assert!(!inside.is_empty(), "lines logged in a reconcile carry reconcileID:\n{}", controller.log_tail());
        for line in &inside {
            assert_eq!(line["controller"], "nodepoolapplication", "{line}");
            assert_eq!(line["name"], "ingress", "{line}");
            assert_eq!(line["namespace"], env.namespace.as_str(), "{line}");
            assert!(line["msg"].is_string() && line["level"].is_string() && line["ts"].is_string(), "{line}");
        }

        let scrape = controller.scrape().await;
        let has = |needle: &str| scrape.lines().any(|l| l.starts_with(needle));
        let object = format!(r#"kind="NodePoolApplication",name="ingress",namespace="{}""#, env.namespace);
        assert!(has(&format!("gotk_reconcile_duration_seconds_count{{{object}}}")), "{scrape}");
        let info = format!(
            r#"gotk_resource_info{{customresource_group="apps.fanout.dev",customresource_kind="NodePoolApplication",customresource_version="v1alpha1",exported_namespace="{}",name="ingress",ready="True",suspended="false"}} 1"#,
            env.namespace
        );
        assert!(has(&info), "{info} in\n{scrape}");
        assert!(has(r#"leader_election_master_status{name="nodepool-fanout"} 1"#), "{scrape}");
        assert!(
            has(&format!(r#"nodepool_fanout_offline_pools{{namespace="{}",application="ingress"}} 0"#, env.namespace)),
            "{scrape}"
        );
        // Each reconcile is counted by what woke it: the application's own
        // change first, then its release turning Ready.
        let wakes = controller.wakes().await;
        for cause in ["NodePoolApplication", "HelmRelease"] {
            assert!(wakes.get(cause).is_some_and(|n| *n > 0), "a reconcile woken by {cause}: {wakes:?}");
        }
        for process in ["process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_open_fds "] {
            assert!(has(process), "{process} in\n{scrape}");
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    result
}
