//! Each fault carried out: through the API server, by killing the
//! controller, or by stopping a part of the control plane.
use super::foreign::create_claimant;
use super::*;

impl World {
    pub async fn inject(&mut self, fault: &Fault) {
        self.injected += 1;
        *self.by_kind.entry(fault.kind()).or_default() += 1;
        let env = &self.env;
        match fault {
            Fault::KillController { shard } => {
                let shard = shard.unwrap_or_default();
                drop(self.controllers[shard].take());
                self.start_controller(shard);
            }
            Fault::MoveShard { app, to } => {
                self.shard_of[*app] = *to;
                set_shard(&mut self.manifests[*app], *to);
                apply(&self.env, &self.manifests[*app]).await;
            }
            Fault::GoodChange { app, level, window } => {
                if let Some(pool) = window {
                    let name = self.pools[*pool].clone();
                    self.opened[*app].remove(&name);
                    self.closed[*app].insert(name);
                    self.manifests[*app]["spec"]["rollout"]["windows"] =
                        windows(&self.closed[*app], &self.opened[*app]);
                }
                self.values_before[*app] = Some(self.manifests[*app]["spec"]["values"].clone());
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["values"]["controller"]["config"]["log-level"] = json!(format!("v{level}"));
                if let Some(controller) = manifest["spec"]["values"]["controller"].as_object_mut() {
                    controller.remove("service");
                }
                apply(env, manifest).await;
            }
            Fault::BadChange { app } => {
                self.values_before[*app] = Some(self.manifests[*app]["spec"]["values"].clone());
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["values"]["controller"]["service"] = json!({ "port": 70000 });
                apply(env, manifest).await;
            }
            Fault::Undo { app } => {
                let values = &mut self.manifests[*app]["spec"]["values"];
                if let Some(before) = self.values_before[*app].as_mut() {
                    std::mem::swap(values, before);
                    apply(env, &self.manifests[*app]).await;
                }
            }
            Fault::Suspend { app, suspended } => {
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["suspend"] = json!(suspended);
                apply(env, manifest).await;
            }
            Fault::Pause { app, paused } => {
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["rollout"]["paused"] = json!(paused);
                apply(env, manifest).await;
            }
            Fault::AddPool { broken, claimed } => {
                // Not while the other seed's soak has the API server down:
                // making a pool and its node is no fault of its own, and
                // the support code that makes them stops at a refusal.
                let _one_at_a_time = RESTARTS.lock().await;
                let tag = env.prefix.clone();
                let short = format!("p{}", self.pools.len());
                if let Some(app) = claimed {
                    let name = naming::release_name(APPS[*app].0, &env.pool_name(&short));
                    if create_claimant(env, &name).await {
                        self.claimants.push(name);
                    }
                }
                let mut labels = vec![("e2e", tag.as_str()), ("region", "east")];
                if *broken {
                    labels.push((BROKEN, "true"));
                }
                let name = self.env.create_pool(&short, &labels, 1).await;
                if *broken {
                    self.broken.insert(name.clone());
                }
                self.pools.push(name);
            }
            Fault::DeletePool { pool } => {
                let name = self.pools[*pool].clone();
                let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
                let _ = pools.delete(&name, &DeleteParams::default()).await;
                self.left.remove(&name);
                self.cut.remove(&name);
                self.deleted.insert(name);
            }
            Fault::Relabel { pool, leaves } => {
                let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &nodepool_resource());
                let label = match leaves {
                    true => Value::Null,
                    false => json!(env.prefix),
                };
                let patch = json!({ "metadata": { "labels": { "e2e": label } } });
                let name = self.pools[*pool].clone();
                let _ = pools.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await;
                match leaves {
                    true => self.left.insert(name),
                    false => self.left.remove(&name),
                };
            }
            Fault::CutNode { pool, cut } => {
                // Listing the pool's nodes stops at a refusal too.
                let _one_at_a_time = RESTARTS.lock().await;
                let name = self.pools[*pool].clone();
                for node in env.nodes_of(&name).await {
                    match cut {
                        true => cut_off(env, &node).await,
                        false => reconnect(env, &node).await,
                    }
                }
                match cut {
                    true => self.cut.insert(name),
                    false => self.cut.remove(&name),
                };
            }
            Fault::HandEdit { release } => {
                if let Some(name) = nth_release(env, *release).await {
                    let patch = json!({ "spec": { "values": { "controller": { "config": { "log-level": "by-hand" } } } } });
                    let params = PatchParams {
                        field_manager: Some("soak-hand".into()),
                        ..PatchParams::default()
                    };
                    let _ = releases(env).patch(&name, &params, &Patch::Merge(&patch)).await;
                }
            }
            Fault::DeleteRelease { release } => {
                if let Some(name) = nth_release(env, *release).await {
                    let _ = releases(env).delete(&name, &DeleteParams::default()).await;
                }
            }
            Fault::Window { app, pool, closed } => {
                let name = self.pools[*pool].clone();
                match closed {
                    true => {
                        self.closed[*app].insert(name.clone());
                        self.opened[*app].remove(&name);
                    }
                    false => {
                        self.closed[*app].remove(&name);
                        self.opened[*app].insert(name);
                    }
                }
                let manifest = &mut self.manifests[*app];
                manifest["spec"]["rollout"]["windows"] = windows(&self.closed[*app], &self.opened[*app]);
                apply(env, manifest).await;
            }
            Fault::Approve { stale } => {
                let revision = self.gate_revision().await;
                if let Some(r) = revision.clone().filter(|r| !self.gate_revisions.contains(r)) {
                    self.gate_revisions.push(r);
                }
                let approved = match stale {
                    false => revision,
                    true => self.gate_revisions.iter().rev().find(|r| Some(*r) != revision.as_ref()).cloned(),
                };
                let approved = approved.unwrap_or_else(|| "0000000000@1".into());
                approve(env, &format!("{approved}/rest")).await;
            }
            Fault::Restart {
                component: QUERY_API,
                down,
            } => self.query_api.stop_for(*down),
            Fault::Restart { component, down } => {
                let _one_at_a_time = RESTARTS.lock().await;
                cluster(&["stop", component]).await;
                tokio::time::sleep(*down).await;
                cluster(&["start", component]).await;
            }
        }
    }

    /// The revision the gated application's status names now.
    async fn gate_revision(&self) -> Option<String> {
        let apps: Api<NodePoolApplication> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let app = apps.get(APPS[GATE].0).await.ok()?;
        let rollout = app.status?.rollout.filter(|r| !r.revision.is_empty())?;
        Some(naming::rollout_key(&rollout.revision, rollout.number?))
    }
}

/// The `n`th HelmRelease of the namespace (modulo how many there are), by name.
async fn nth_release(env: &TestEnv, n: usize) -> Option<String> {
    let list = releases(env).list(&ListParams::default()).await.ok()?;
    // Ours only: the foreign release is the soak's witness, never its target.
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter(|r| !r.owner_references().is_empty())
        .filter_map(|r| r.metadata.name)
        .collect();
    names.sort();
    (!names.is_empty()).then(|| names[n % names.len()].clone())
}

/// Cuts a kwok node off as a lost link would: kwok stops answering for it
/// and its Ready condition turns False.
async fn cut_off(env: &TestEnv, node: &str) {
    let nodes: Api<Node> = Api::all(env.client.clone());
    let unmanaged = json!({ "metadata": { "annotations": { "kwok.x-k8s.io/node": null } } });
    let _ = nodes.patch(node, &PatchParams::default(), &Patch::Merge(&unmanaged)).await;
    let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let not_ready = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "False", "reason": "NodeStatusUnknown", "message": "link down (soak)",
        "lastTransitionTime": now
    }] } });
    let _ = nodes
        .patch_status(node, &PatchParams::default(), &Patch::Strategic(&not_ready))
        .await;
}

/// An application's windows: one that never opens (February 29th, in
/// 2028 next) for the pools `closed` names, one always open for those
/// `opened` names.
fn windows(closed: &BTreeSet<String>, opened: &BTreeSet<String>) -> Value {
    let window = |schedule: &str, pools: &BTreeSet<String>| json!({ "schedule": schedule, "duration": "1m", "pools": { "names": pools } });
    let mut windows = Vec::new();
    if !closed.is_empty() {
        windows.push(window("0 0 29 2 *", closed));
    }
    if !opened.is_empty() {
        windows.push(window("* * * * *", opened));
    }
    json!(windows)
}
