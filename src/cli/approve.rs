//! `approve`: lets the wave that awaits approval go, for the revision under
//! way only. It writes the annotation an operator could write with
//! `kubectl annotate` ([`naming::ANNOTATION_APPROVE`]); the controller
//! reads it on its next reconcile.

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
    /// Approve the waves up to this one (as `status.rollout.wave` counts
    /// them, from 1) ahead of time, rather than the wave awaiting approval.
    #[arg(long)]
    pub wave: Option<usize>,
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
        "{name} awaits no approval (rollout {progress}); give --wave to approve a later wave of \
         revision {revision} ahead of time"
    )]
    NotAwaiting {
        name: String,
        progress: String,
        revision: String,
    },
}

/// Approves `args`'s wave; returns what it approved, for the user.
pub async fn approve(client: &Client, args: &ApproveArgs) -> Result<String, ApproveError> {
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let apps: Api<NodePoolApplication> = Api::namespaced(client.clone(), &namespace);
    let app = apps.get(&args.name).await?;
    let (revision, wave) = approval(&app, args.wave)?;
    let value = format!("{revision}/{wave}");
    let patch = json!({ "metadata": { "annotations": { naming::ANNOTATION_APPROVE: value } } });
    apps.patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(format!(
        "approved wave {wave} of revision {revision} of {namespace}/{} ({}={value})",
        app.name_any(),
        naming::ANNOTATION_APPROVE
    ))
}

/// The revision and the wave to approve: the wave that awaits approval,
/// or `wave` of the revision under way. Only from a status that reports
/// on the application's current spec, so an approval never names a
/// revision that is already gone.
pub fn approval(app: &NodePoolApplication, wave: Option<usize>) -> Result<(String, usize), ApproveError> {
    let name = app.name_any();
    let generation = app.metadata.generation.unwrap_or_default();
    let status = app.status.as_ref().filter(|s| s.observed_generation == Some(generation));
    let Some(rollout) = status.and_then(|s| s.rollout.as_ref()) else {
        return Err(ApproveError::NotReported { name, generation });
    };
    let awaiting = match (rollout.phase, rollout.wave.as_deref()) {
        (RolloutPhase::AwaitingApproval, Some(wave)) => wave.split('/').next().and_then(|w| w.parse().ok()),
        (RolloutPhase::AwaitingApproval, None) => Some(1),
        _ => None,
    };
    match wave.or(awaiting) {
        Some(wave) => Ok((rollout.revision.clone(), wave)),
        None => Err(ApproveError::NotAwaiting {
            name,
            progress: rollout.progress.clone(),
            revision: rollout.revision.clone(),
        }),
    }
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
    fn the_wave_awaiting_approval_of_the_reported_revision_is_approved() {
        let awaiting = app(3, 3, RolloutPhase::AwaitingApproval, Some("2/3"));
        assert_eq!(approval(&awaiting, None).unwrap(), ("abc123".to_string(), 2));
        assert_eq!(approval(&awaiting, Some(3)).unwrap(), ("abc123".to_string(), 3));
        let progressing = app(3, 3, RolloutPhase::Progressing, Some("1/3"));
        let err = approval(&progressing, None).unwrap_err().to_string();
        assert!(err.contains("awaits no approval (rollout Progressing 1/4)"), "{err}");
        assert_eq!(approval(&progressing, Some(2)).unwrap(), ("abc123".to_string(), 2));
        // A status of an older spec names a revision that is gone.
        let stale = app(4, 3, RolloutPhase::AwaitingApproval, Some("2/3"));
        let err = approval(&stale, Some(2)).unwrap_err().to_string();
        assert!(err.contains("report on generation 4"), "{err}");
    }
}
