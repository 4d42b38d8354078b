//! What a person does, and what the soak undoes, once the faults stop:
//! approvals, halted revisions requested again, every part running again.
use super::foreign::touched;
use super::*;

impl World {
    /// What a person does for a rollout awaiting approval: approves the
    /// step it waits on, for its revision.
    pub async fn approve_what_awaits(&self) {
        let apps: Api<NodePoolApplication> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let Ok(app) = apps.get(APPS[GATE].0).await else {
            return;
        };
        let Some(rollout) = app.status.and_then(|s| s.rollout) else {
            return;
        };
        if let (Some(step), Some(number)) = (rollout.awaiting_step, rollout.number) {
            let key = nodepool_fanout::api::naming::rollout_key(&rollout.revision, number);
            approve(&self.env, &format!("{key}/{step}")).await;
        }
    }

    /// What a person does for a rollout halted or rolled back once the
    /// faults stopped (a node cut during the healing revision's update
    /// halts it, and a halt holds): requests a reconcile, which is a new
    /// revision, once per halted revision. Returns what was requested.
    pub async fn request_what_halted(&mut self) -> Vec<String> {
        let apps: Api<NodePoolApplication> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let Ok(list) = apps.list(&ListParams::default()).await else {
            return Vec::new();
        };
        let mut requested = Vec::new();
        for app in list.items {
            let name = app.metadata.name.clone().unwrap_or_default();
            let generation = app.metadata.generation;
            // Of the spec as it is now: not a halt of the revision the healing replaced.
            let Some(status) = app.status.filter(|s| s.observed_generation == generation) else {
                continue;
            };
            let Some(rollout) = status.rollout else { continue };
            let halted = matches!(rollout.phase, RolloutPhase::Halted | RolloutPhase::RolledBack);
            if !halted || !self.requested.insert(rollout.revision.clone()) {
                continue;
            }
            let token = Timestamp::now().to_string();
            let patch = json!({ "metadata": { "annotations": { naming::ANNOTATION_REQUESTED_AT: token } } });
            let params = PatchParams {
                field_manager: Some("soak-operator".into()),
                ..PatchParams::default()
            };
            if apps.patch(&name, &params, &Patch::Merge(&patch)).await.is_ok() {
                requested.push(format!("{name} (revision {} {:?})", rollout.revision, rollout.phase));
            }
        }
        requested
    }

    /// Faults stop: every part of the control plane running, every node
    /// reconnected, every application resumed with a new good revision
    /// (one halted or rolled back by an innocent fault, a node cut during
    /// its update, stays so by design until a new revision), the
    /// controller running.
    pub async fn heal(&mut self) {
        {
            // The other seed's soak may still be restarting parts.
            let _one_at_a_time = RESTARTS.lock().await;
            for component in COMPONENTS {
                cluster(&["start", component]).await;
            }
            self.query_api.stop_for(Duration::ZERO);
            for pool in self.cut.clone() {
                for node in self.env.nodes_of(&pool).await {
                    reconnect(&self.env, &node).await;
                }
            }
        }
        self.cut.clear();
        let pools: Api<DynamicObject> = Api::all_with(self.env.client.clone(), &nodepool_resource());
        let mended = json!({ "metadata": { "labels": { BROKEN: null } } });
        for pool in std::mem::take(&mut self.broken) {
            let _ = pools.patch(&pool, &PatchParams::default(), &Patch::Merge(&mended)).await;
        }
        // Their owner gives the names up: our releases may take them now.
        for claimant in std::mem::take(&mut self.claimants) {
            if let Some(what) = touched(&self.env, &claimant).await {
                self.claimants_touched.push(what);
            }
            let _ = releases(&self.env).delete(&claimant, &DeleteParams::default()).await;
        }
        self.closed = Default::default();
        self.opened = Default::default();
        for manifest in &mut self.manifests {
            manifest["spec"]["suspend"] = json!(false);
            if let Some(rollout) = manifest["spec"]["rollout"].as_object_mut() {
                rollout.remove("windows");
            }
            manifest["spec"]["rollout"]["paused"] = json!(false);
            if let Some(controller) = manifest["spec"]["values"]["controller"].as_object_mut() {
                controller.remove("service");
            }
            manifest["spec"]["values"]["controller"]["config"]["log-level"] = json!("healed");
            apply(&self.env, manifest).await;
        }
        for shard in 0..self.controllers.len() {
            if self.controllers[shard].is_none() {
                self.start_controller(shard);
            }
        }
    }

    /// The namespace and pools removed, with the controllers still
    /// running so that the applications' finalizers go.
    pub async fn finish(self) {
        let controllers = self.controllers;
        self.env.cleanup().await;
        drop(controllers);
    }
}
