//! `approve`: lets the step that awaits approval go, for the rollout
//! under way only (this rollout of its revision: a change undone and
//! redone is another rollout, and asks again). It writes the annotation an operator could write with
//! `kubectl annotate` ([`naming::ANNOTATION_APPROVE`]); the controller
//! reads it on its next reconcile. An approval names the step it lets go,
//! never a wave number: waves are numbered over the steps that select
//! pools now, and a number would move to another step when pools come and
//! go.

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::api::{naming, NodePoolApplication, RolloutPhase};

/// `approve`'s flags.
#[derive(Debug, clap::Args)]
pub struct ApproveArgs {
    /// The application.
    pub name: String,
    /// The namespace; the kubeconfig context's when not given.
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Approve this step ahead of time (its name, or its position in
    /// spec.rollout.steps from 1), rather than the step awaiting approval.
    #[arg(long)]
    pub step: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    #[error("cannot read or annotate the application: {0}")]
    Cluster(#[from] kube::Error),
    #[error(
        "{name} has no rollout under way to approve yet: wait for the controller to report on \
         generation {generation} (kubectl get npa {name})"
    )]
    NotReported { name: String, generation: i64 },
    #[error(
        "{name} awaits no approval (rollout {progress}); give --step to approve a later step of \
         revision {revision} ahead of time"
    )]
    NotAwaiting {
        name: String,
        progress: String,
        revision: String,
    },
    #[error(
        "{name}'s status does not number its rollout of revision {revision}: the controller that \
         reports on it predates approvals by rollout; upgrade it, then approve again"
    )]
    NotNumbered { name: String, revision: String },
}

/// Approves `args`'s step; returns what it approved, for the user.
pub async fn approve(client: &Client, args: &ApproveArgs) -> Result<String, ApproveError> {
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let apps: Api<NodePoolApplication> = Api::namespaced(client.clone(), &namespace);
    let app = apps.get(&args.name).await?;
    let (rollout, step) = approval(&app, args.step.as_deref())?;
    let value = annotation(&app, &rollout, &step);
    let patch = json!({ "metadata": { "annotations": { naming::ANNOTATION_APPROVE: value } } });
    apps.patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(format!(
        "approved step {step} of rollout {rollout} of {namespace}/{} ({}={value})",
        app.name_any(),
        naming::ANNOTATION_APPROVE
    ))
}

/// The rollout (`<revision>@<number>`, see [`naming::rollout_key`]) and
/// the step to approve: the step that awaits approval, or `step` of the
/// rollout under way. Only from a status that reports on the
/// application's current spec, so an approval never names a revision
/// that is already gone.
pub fn approval(app: &NodePoolApplication, step: Option<&str>) -> Result<(String, String), ApproveError> {
    let name = app.name_any();
    let generation = app.metadata.generation.unwrap_or_default();
    let status = app.status.as_ref().filter(|s| s.observed_generation == Some(generation));
    let Some(rollout) = status.and_then(|s| s.rollout.as_ref()) else {
        return Err(ApproveError::NotReported { name, generation });
    };
    let awaiting = match rollout.phase {
        RolloutPhase::AwaitingApproval => rollout.awaiting_step.clone(),
        _ => None,
    };
    let Some(number) = rollout.number else {
        return Err(ApproveError::NotNumbered {
            name,
            revision: rollout.revision.clone(),
        });
    };
    match step.map(str::to_string).or(awaiting) {
        Some(step) => Ok((naming::rollout_key(&rollout.revision, number), step)),
        None => Err(ApproveError::NotAwaiting {
            name,
            progress: rollout.progress.clone(),
            revision: rollout.revision.clone(),
        }),
    }
}

/// The approval annotation once `step` of `rollout` is approved: the
/// steps of that rollout approved already, and this one.
pub fn annotation(app: &NodePoolApplication, rollout: &str, step: &str) -> String {
    let existing = app.annotations().get(naming::ANNOTATION_APPROVE);
    let mut steps = existing.map(|a| naming::approved_steps(a, rollout)).unwrap_or_default();
    if !steps.contains(&step) {
        steps.push(step);
    }
    format!("{rollout}/{}", steps.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{NodePoolApplicationStatus, RolloutStatus};

    fn app(generation: i64, observed: i64, phase: RolloutPhase, wave: Option<&str>) -> NodePoolApplication {
        let mut app: NodePoolApplication = serde_json::from_value(json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "edge", "namespace": "shop", "generation": generation },
            "spec": { "pools": {}, "interval": "5m", "chart": { "spec": { "chart": "c",
                "sourceRef": { "kind": "HelmRepository", "name": "r" } } } }
        }))
        .unwrap();
        app.status = Some(NodePoolApplicationStatus {
            observed_generation: Some(observed),
            rollout: Some(RolloutStatus {
                revision: "abc123".into(),
                number: Some(4),
                phase,
                wave: wave.map(String::from),
                progress: format!("{} 1/4", phase.as_str()),
                ..RolloutStatus::default()
            }),
            ..NodePoolApplicationStatus::default()
        });
        app
    }

    #[test]
    fn the_step_awaiting_approval_of_the_reported_revision_is_approved() {
        let mut awaiting = app(3, 3, RolloutPhase::AwaitingApproval, Some("2/3"));
        awaiting.status.as_mut().unwrap().rollout.as_mut().unwrap().awaiting_step = Some("east".into());
        assert_eq!(approval(&awaiting, None).unwrap(), ("abc123@4".to_string(), "east".to_string()));
        assert_eq!(approval(&awaiting, Some("west")).unwrap(), ("abc123@4".to_string(), "west".to_string()));
        let progressing = app(3, 3, RolloutPhase::Progressing, Some("1/3"));
        let err = approval(&progressing, None).unwrap_err().to_string();
        assert!(err.contains("awaits no approval (rollout Progressing 1/4)"), "{err}");
        assert_eq!(approval(&progressing, Some("3")).unwrap(), ("abc123@4".to_string(), "3".to_string()));
        // A status of an older spec names a revision that is gone.
        let stale = app(4, 3, RolloutPhase::AwaitingApproval, Some("2/3"));
        let err = approval(&stale, Some("east")).unwrap_err().to_string();
        assert!(err.contains("report on generation 4"), "{err}");
    }

    #[test]
    fn an_approval_adds_its_step_to_those_of_the_same_rollout_only() {
        let mut a = app(3, 3, RolloutPhase::AwaitingApproval, None);
        assert_eq!(annotation(&a, "abc123@4", "east"), "abc123@4/east");
        a.annotations_mut().insert(naming::ANNOTATION_APPROVE.into(), "abc123@4/east".into());
        assert_eq!(annotation(&a, "abc123@4", "west"), "abc123@4/east,west");
        assert_eq!(annotation(&a, "abc123@4", "east"), "abc123@4/east");
        // Another revision's approval is of no use to this one, nor an
        // earlier rollout's of the same revision.
        assert_eq!(annotation(&a, "def456@5", "west"), "def456@5/west");
        assert_eq!(annotation(&a, "abc123@6", "west"), "abc123@6/west");
    }

    #[test]
    fn a_status_that_numbers_no_rollout_is_not_approved_blindly() {
        let mut a = app(3, 3, RolloutPhase::AwaitingApproval, None);
        a.status.as_mut().unwrap().rollout.as_mut().unwrap().number = None;
        let err = approval(&a, Some("east")).unwrap_err().to_string();
        assert!(err.contains("does not number its rollout"), "{err}");
    }
}
