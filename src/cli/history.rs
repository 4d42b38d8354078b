//! `history`: an application's recorded revisions, oldest first, as
//! `kubectl rollout history` lists a DaemonSet's: the number, the revision
//! as `status.rollout.revision` names it, when it was recorded, its chart
//! version, and what became of its rollout.

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::api::{naming, NodePoolApplication};
use crate::reconcile::history::Recorded;

/// `history`'s flags.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    /// The application.
    pub name: String,
    /// The namespace; the kubeconfig context's when not given.
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HistoryRow {
    pub number: i64,
    pub revision: String,
    pub recorded: String,
    pub chart_version: String,
    /// Complete, Halted, the current rollout's phase, or Superseded.
    pub outcome: String,
}

/// Reads `args`'s application and its records.
pub async fn fetch(client: &Client, args: &HistoryArgs) -> Result<Vec<HistoryRow>, kube::Error> {
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let app = Api::<NodePoolApplication>::namespaced(client.clone(), &namespace)
        .get(&args.name)
        .await?;
    let records: Api<ControllerRevision> = Api::namespaced(client.clone(), &namespace);
    let selector = format!("{}={}", naming::LABEL_APPLICATION, naming::label_value(&app.name_any()));
    let listed = records.list(&ListParams::default().labels(&selector)).await?;
    let uid = app.uid().unwrap_or_default();
    let recorded: Vec<Recorded> = listed.items.iter().filter_map(|r| Recorded::of(r, &uid)).collect();
    Ok(rows(&app, recorded))
}

/// The rows of `recorded`, oldest first: the revision under way says its
/// phase, an earlier one with no outcome was superseded.
pub fn rows(app: &NodePoolApplication, mut recorded: Vec<Recorded>) -> Vec<HistoryRow> {
    recorded.sort_by_key(|r| r.number);
    let current = app.status.as_ref().and_then(|s| s.rollout.as_ref());
    recorded
        .into_iter()
        .map(|r| {
            let under_way = current.filter(|c| c.revision == r.revision).map(|c| c.phase.as_str());
            let outcome = match (under_way, r.outcome) {
                (Some(phase), _) => phase.to_string(),
                (None, Some(outcome)) => outcome,
                (None, None) => "Superseded".to_string(),
            };
            HistoryRow {
                number: r.number,
                revision: r.revision,
                recorded: r.created.unwrap_or_default(),
                chart_version: r.chart_version.unwrap_or_default(),
                outcome,
            }
        })
        .collect()
}

/// The rows as a table.
pub fn table(rows: &[HistoryRow]) -> String {
    let mut lines = vec![["REVISION", "NAME", "RECORDED", "CHART VERSION", "OUTCOME"]
        .map(String::from)
        .to_vec()];
    for r in rows {
        lines.push(vec![
            r.number.to_string(),
            r.revision.clone(),
            r.recorded.clone(),
            r.chart_version.clone(),
            r.outcome.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..5).map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0)).collect();
    lines
        .iter()
        .map(|l| {
            let cells: Vec<String> = l.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            format!("{}\n", cells.join("   ").trim_end())
        })
        .collect()
}

/// Says that `history` found nothing, and why that may be.
pub fn empty_message(name: &str) -> String {
    format!(
        "{name} has no recorded revisions yet: the controller records each revision as it starts \
         rolling it out (ControllerRevisions labelled {}={name})",
        naming::LABEL_APPLICATION
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{NodePoolApplicationStatus, RolloutPhase, RolloutStatus};
    use crate::reconcile::history;

    fn record(revision: &str, number: i64, outcome: Option<&str>) -> Recorded {
        Recorded {
            name: history::record_name("edge", revision),
            revision: revision.into(),
            number,
            outcome: outcome.map(String::from),
            halted_judgement: None,
            halted_because: None,
            chart_version: Some("0.3.0".into()),
            created: Some(format!("2026-11-25T20:0{number}:00Z")),
            rolled_out_at: None,
        }
    }

    #[test]
    fn rows_go_oldest_first_and_say_what_became_of_each_revision() {
        let mut app: NodePoolApplication = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "edge" },
            "spec": { "pools": {}, "interval": "5m" }
        }))
        .unwrap();
        app.status = Some(NodePoolApplicationStatus {
            rollout: Some(RolloutStatus {
                revision: "ccc".into(),
                phase: RolloutPhase::AwaitingApproval,
                ..RolloutStatus::default()
            }),
            ..NodePoolApplicationStatus::default()
        });
        let rows = rows(
            &app,
            vec![
                record("ccc", 4, None),
                record("aaa", 1, Some("Complete")),
                record("bbb", 2, None),
                record("ddd", 3, Some("Halted")),
            ],
        );
        let outcomes: Vec<(i64, &str)> = rows.iter().map(|r| (r.number, r.outcome.as_str())).collect();
        assert_eq!(
            outcomes,
            [
                (1, "Complete"),
                (2, "Superseded"),
                (3, "Halted"),
                (4, "AwaitingApproval")
            ]
        );
        let text = table(&rows);
        assert!(
            text.starts_with("REVISION   NAME   RECORDED               CHART VERSION   OUTCOME\n"),
            "{text}"
        );
        assert!(
            text.contains("1          aaa    2026-11-25T20:01:00Z   0.3.0           Complete\n"),
            "{text}"
        );
    }
}
