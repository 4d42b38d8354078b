//! What an operator may do from the console, each done with the acting
//! user's own rights (the API server's RBAC decides), each the write a
//! `kubectl` or `flux` user would make, and each leaving an Event on the
//! application that names the user:
//!
//! | action | the write |
//! |---|---|
//! | pause, resume the rollout | `spec.rollout.paused`, by server-side apply as the field manager `nodepool-fanout-console` |
//! | reconcile now | `reconcile.fluxcd.io/requestedAt`, as `flux reconcile` |
//! | approve the waiting wave | `apps.fanout.dev/approve`, as `nodepool-fanout approve` |
//! | suspend, resume one pool | the pool's HelmRelease's `spec.suspend`, as `flux suspend hr` |
//!
//! When Git holds `spec.rollout.paused`, the apply is refused as a
//! conflict with Flux's field manager, and the console says to change it
//! in Git, where it would otherwise be put back.

use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Config, Resource};
use serde_json::json;

use super::identity::Actor;
use crate::api::{naming, NodePoolApplication};
use crate::cli::approve;
use crate::reconcile::observe::helmrelease_resource;

/// The console's field manager for what it writes.
pub const FIELD_MANAGER: &str = "nodepool-fanout-console";

/// One thing an operator asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Pause,
    Resume,
    Reconcile,
    Approve,
    SuspendPool,
    ResumePool,
}

impl Action {
    /// From the last part of the action's path.
    pub fn of_path(word: &str) -> Option<Self> {
        Some(match word {
            "pause" => Self::Pause,
            "resume" => Self::Resume,
            "reconcile" => Self::Reconcile,
            "approve" => Self::Approve,
            "suspend" => Self::SuspendPool,
            "resume-pool" => Self::ResumePool,
            _ => return None,
        })
    }

    /// The Event's reason.
    fn reason(self) -> &'static str {
        match self {
            Self::Pause => "RolloutPausedByUser",
            Self::Resume => "RolloutResumedByUser",
            Self::Reconcile => "ReconcileRequestedByUser",
            Self::Approve => "WaveApprovedByUser",
            Self::SuspendPool => "PoolSuspendedByUser",
            Self::ResumePool => "PoolResumedByUser",
        }
    }
}

/// Why an action was not done.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error(
        "the API server refused it as {user}: {message} (ask for the right, or act as a user who has it)"
    )]
    Refused { user: String, message: String },
    #[error(
        "spec.rollout.paused is set in Git (the field is held by {message}): change it there, or \
         Flux puts it back"
    )]
    HeldByGit { message: String },
    #[error(
        "fields of it are held by another field manager ({message}): change them where they are kept \
         (in Git, if Flux applies the application), or copy the YAML there"
    )]
    HeldElsewhere { message: String },
    #[error("{0}")]
    NotNow(String),
    #[error("cannot act as {user}: {source}")]
    Client { user: String, source: kube::Error },
    #[error("the cluster could not be written: {0}")]
    Cluster(kube::Error),
}

/// Acts as users on one cluster.
pub struct Actions {
    /// The console's own configuration, to impersonate from.
    config: Config,
    /// The console's own client: Events are recorded with it, so that a
    /// user who may pause a rollout need not also create Events.
    client: Client,
    recorder: Recorder,
}

/// What an action is done to: an application, or one of its pools.
#[derive(Debug, Clone)]
pub struct Target {
    pub namespace: String,
    pub name: String,
    /// The pool, and its HelmRelease (empty when it has none), for the
    /// pool actions.
    pub pool: Option<(String, String)>,
}

impl Actions {
    pub fn new(config: Config, client: Client) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            config,
            client,
        }
    }

    /// A client that acts as `actor`.
    fn client_of(&self, actor: &Actor) -> Result<Client, ActionError> {
        let Some(who) = &actor.impersonate else {
            return Ok(self.client.clone());
        };
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(who.user.clone());
        config.auth_info.impersonate_groups = (!who.groups.is_empty()).then(|| who.groups.clone());
        Client::try_from(config).map_err(|source| ActionError::Client {
            user: actor.name.clone(),
            source,
        })
    }

    /// Does `action` to `target` as `actor`, and records an Event naming
    /// the user; returns what was done, in words.
    pub async fn act(&self, actor: &Actor, action: Action, target: &Target) -> Result<String, ActionError> {
        let client = self.client_of(actor)?;
        let Target {
            namespace,
            name,
            pool,
        } = target;
        let apps: Api<NodePoolApplication> = Api::namespaced(client.clone(), namespace);
        let refused = |e: kube::Error| refusal(actor, e);
        let app = apps.get(name).await.map_err(refused)?;
        let done = match action {
            Action::Pause | Action::Resume => {
                let paused = action == Action::Pause;
                let patch = json!({
                    "apiVersion": NodePoolApplication::api_version(&()), "kind": NodePoolApplication::kind(&()),
                    "spec": { "rollout": { "paused": paused } }
                });
                apps.patch(name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&patch))
                    .await
                    .map_err(refused)?;
                let verb = if paused { "paused" } else { "resumed" };
                format!("{} {verb} the rollout of {namespace}/{name}", actor.name)
            }
            Action::Reconcile => {
                let at = Timestamp::now().to_string();
                annotate(&apps, name, naming::ANNOTATION_REQUESTED_AT, &at).await.map_err(refused)?;
                format!("{} requested a reconcile of {namespace}/{name} ({at})", actor.name)
            }
            Action::Approve => {
                let (rollout, step) =
                    approve::approval(&app, None).map_err(|e| ActionError::NotNow(e.to_string()))?;
                let value = approve::annotation(&app, &rollout, &step);
                annotate(&apps, name, naming::ANNOTATION_APPROVE, &value).await.map_err(refused)?;
                format!("{} approved step {step} of rollout {rollout} of {namespace}/{name}", actor.name)
            }
            Action::SuspendPool | Action::ResumePool => {
                let suspend = action == Action::SuspendPool;
                let Some((pool, release)) = pool.as_ref().filter(|(_, release)| !release.is_empty()) else {
                    return Err(ActionError::NotNow("the pool has no HelmRelease yet".into()));
                };
                let releases: Api<DynamicObject> =
                    Api::namespaced_with(client, namespace, &helmrelease_resource());
                let patch = json!({ "spec": { "suspend": suspend } });
                let params = PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PatchParams::default()
                };
                releases.patch(release, &params, &Patch::Merge(&patch)).await.map_err(refused)?;
                let verb = if suspend { "suspended" } else { "resumed" };
                format!("{} {verb} pool {pool} of {namespace}/{name} (HelmRelease {release})", actor.name)
            }
        };
        self.record(action, &app, &done).await;
        Ok(done)
    }

    /// Applies `app` as `actor` (server-side apply, the console's field
    /// manager, never forced: a field another manager holds, Flux's from
    /// Git, is a conflict to resolve there), and records an Event.
    pub async fn apply_application(
        &self,
        actor: &Actor,
        app: &NodePoolApplication,
    ) -> Result<String, ActionError> {
        let client = self.client_of(actor)?;
        let namespace = app.metadata.namespace.clone().unwrap_or_default();
        let name = app.metadata.name.clone().unwrap_or_default();
        let apps: Api<NodePoolApplication> = Api::namespaced(client, &namespace);
        let mut manifest = serde_json::to_value(app).map_err(|e| ActionError::NotNow(e.to_string()))?;
        if let Some(object) = manifest.as_object_mut() {
            object.remove("status");
        }
        let applied = apps.patch(&name, &PatchParams::apply(FIELD_MANAGER), &Patch::Apply(&manifest)).await;
        let applied = applied.map_err(|e| match e {
            kube::Error::Api(status) if status.code == 409 => ActionError::HeldElsewhere {
                message: status.message,
            },
            other => refusal(actor, other),
        })?;
        let done = format!("{} applied {namespace}/{name}", actor.name);
        self.record_reason("ApplicationAppliedByUser", "Apply", &applied, &done).await;
        Ok(done)
    }

    /// Deletes the application `namespace/name` as `actor`, and records an
    /// Event.
    pub async fn delete_application(
        &self,
        actor: &Actor,
        namespace: &str,
        name: &str,
    ) -> Result<String, ActionError> {
        let client = self.client_of(actor)?;
        let apps: Api<NodePoolApplication> = Api::namespaced(client, namespace);
        let refused = |e: kube::Error| refusal(actor, e);
        let app = apps.get(name).await.map_err(refused)?;
        apps.delete(name, &Default::default()).await.map_err(refused)?;
        let done = format!("{} deleted {namespace}/{name}", actor.name);
        self.record_reason("ApplicationDeletedByUser", "Delete", &app, &done).await;
        Ok(done)
    }

    async fn record(&self, action: Action, app: &NodePoolApplication, note: &str) {
        self.record_reason(action.reason(), &format!("{action:?}"), app, note).await;
    }

    async fn record_reason(&self, reason: &str, action: &str, app: &NodePoolApplication, note: &str) {
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(format!("{note}, from the console")),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &app.object_ref(&())).await {
            tracing::warn!(error = %e, "the console's Event was not recorded");
        }
    }
}

async fn annotate(
    apps: &Api<NodePoolApplication>,
    name: &str,
    key: &str,
    value: &str,
) -> Result<(), kube::Error> {
    let patch = json!({ "metadata": { "annotations": { key: value } } });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    apps.patch(name, &params, &Patch::Merge(&patch)).await.map(|_| ())
}

fn refusal(actor: &Actor, e: kube::Error) -> ActionError {
    match e {
        kube::Error::Api(status) if status.code == 403 => ActionError::Refused {
            user: actor.name.clone(),
            message: status.message,
        },
        kube::Error::Api(status) if status.code == 409 => ActionError::HeldByGit {
            message: status.message,
        },
        other => ActionError::Cluster(other),
    }
}
