//! The application's conditions as Flux's health checks read them: every
//! roll-up case of `tests/offline/kstatus/cases.rs` is computed by
//! `status::rollup` and handed to Flux's kstatus library itself
//! (fluxcd/cli-utils, built as `kstatus` with the local control plane), which
//! must read it as the case says. A person who must act sees Failed at once,
//! not InProgress until a timeout.
use crate::support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodepool_fanout::api::{RolloutPhase, RolloutStatus};
use nodepool_fanout::reconcile::fleet::status::{rollup, PoolReport, RollupInput};
use nodepool_fanout::reconcile::release::state::{ReleaseState, ReleaseStatus};
use nodepool_fanout::reconcile::rollout::PoolRollout;
use serde_json::json;

#[path = "kstatus/cases.rs"]
mod cases;

#[test]
fn flux_kstatus_reads_every_rollup_case_as_expected() {
    let now = Time("2030-01-01T00:00:00Z".parse().expect("a timestamp"));
    let mut objects = Vec::new();
    for case in cases::CASES {
        let pools = cases::reports(case);
        let missing: Vec<String> = case.missing.iter().map(|m| m.to_string()).collect();
        let status = rollup(&RollupInput {
            pools: &pools,
            missing: &missing,
            blocker: case.blocker.map(|(r, m)| (r.to_string(), m.to_string())),
            held: case.held.map(|(r, m)| (r.to_string(), m.to_string())),
            failed_step: case.failed_step.map(|(r, m)| (r.to_string(), m.to_string())),
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
        objects.push(object);
    }
    let read = support::kstatus_all(&objects);
    let wrong: Vec<String> = cases::CASES
        .iter()
        .zip(&read)
        .filter(|(case, got)| case.kstatus != got.as_str())
        .map(|(case, got)| format!("{}: kstatus reads {got}, want {}", case.name, case.kstatus))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
