//! The application's conditions as Flux's health checks read them: every
//! roll-up case of `tests/kstatus/cases.rs` is computed by
//! `status::rollup` and handed to Flux's kstatus library itself
//! (fluxcd/cli-utils, built as `kstatus` with the local control plane), which
//! must read it as the case says. A person who must act sees Failed at once,
//! not InProgress until a timeout.
mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodepool_fanout::api::{RolloutPhase, RolloutStatus};
use nodepool_fanout::reconcile::release_state::{ReleaseState, ReleaseStatus};
use nodepool_fanout::reconcile::rollout::PoolRollout;
use nodepool_fanout::reconcile::status::{rollup, PoolReport, RollupInput};
use serde_json::json;

#[path = "kstatus/cases.rs"]
mod cases;

#[test]
fn flux_kstatus_reads_every_rollup_case_as_expected() {
    let now = Time("2030-01-01T00:00:00Z".parse().expect("a timestamp"));
    let mut lines = String::new();
    for case in cases::CASES {
        let pools = cases::reports(case);
        let missing: Vec<String> = case.missing.iter().map(|m| m.to_string()).collect();
        let status = rollup(&RollupInput {
            pools: &pools,
            missing: &missing,
            blocker: case.blocker.map(|(r, m)| (r.to_string(), m.to_string())),
            generation: Some(4),
            previous: &[],
            now: &now,
            rollout: cases::rollout(case),
        });
        let object = json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "app", "namespace": "edge", "generation": 4 },
            "status": status,
        });
        lines.push_str(&object.to_string());
        lines.push('\n');
    }
    let checker = support::controlplane_bin().join("kstatus");
    let mut child = Command::new(&checker)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", checker.display()));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(lines.as_bytes())
        .expect("write the cases");
    let output = child.wait_with_output().expect("kstatus ran");
    assert!(output.status.success(), "kstatus failed: {}", String::from_utf8_lossy(&output.stderr));
    let read: Vec<String> = String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect();
    assert_eq!(read.len(), cases::CASES.len(), "one reading per case: {read:?}");
    let wrong: Vec<String> = cases::CASES
        .iter()
        .zip(&read)
        .filter(|(case, got)| case.kstatus != got.as_str())
        .map(|(case, got)| format!("{}: kstatus reads {got}, want {}", case.name, case.kstatus))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
