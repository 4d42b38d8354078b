//! Someone else's HelmReleases in the soak's namespace: the foreign one,
//! the claimants of our releases' names, and what was done to them.
use super::*;

/// A HelmRelease of someone else's in the soak's namespace, labelled as
/// if it were the first application's (copied labels are common) but owned
/// by none, and suspended so that Flux leaves it be: nothing of ours may
/// write or delete it (docs/isolation.md, "Bad input and ownership").
const FOREIGN: &str = "someone-elses";

pub(super) async fn create_foreign(env: &TestEnv) {
    let labels = json!({ LABEL_APPLICATION: APPS[0].0, naming::LABEL_POOL: "elsewhere" });
    create_someone_elses(env, FOREIGN, labels)
        .await
        .expect("the foreign HelmRelease is created");
}

/// Someone else's HelmRelease under `name`, which one of our releases
/// would take: owned by none, suspended so that Flux leaves it be.
/// Whether it was made.
pub(super) async fn create_claimant(env: &TestEnv, name: &str) -> bool {
    // Refused under a restart: part of the weather, and nothing to judge.
    match create_someone_elses(env, name, json!({})).await {
        Ok(()) => true,
        Err(e) => {
            println!("  (claimant not made: {e})");
            false
        }
    }
}

/// A HelmRelease of someone else's: owned by no application, written by
/// their own field manager, suspended so that Flux leaves it be.
async fn create_someone_elses(env: &TestEnv, name: &str, labels: Value) -> Result<(), kube::Error> {
    let theirs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": name, "namespace": env.namespace, "labels": labels },
        "spec": { "interval": "1h", "suspend": true, "chart": { "spec": { "chart": "someone-elses",
            "sourceRef": { "kind": "HelmRepository", "name": "someone-elses" } } } }
    }))
    .expect("a HelmRelease in JSON");
    let params = PostParams {
        field_manager: Some("someone-else".into()),
        ..PostParams::default()
    };
    releases(env).create(&params, &theirs).await.map(|_| ())
}

impl World {
    /// What is wrong with someone else's releases now, if anything (the
    /// foreign one, and the claimants not yet given up): gone, rewritten,
    /// or written by one of our field managers.
    pub async fn foreign_touched(&self) -> Option<String> {
        if let Some(what) = self.claimants_touched.first() {
            return Some(what.clone());
        }
        for name in std::iter::once(FOREIGN).chain(self.claimants.iter().map(String::as_str)) {
            if let Some(what) = touched(&self.env, name).await {
                return Some(what);
            }
        }
        None
    }
}

/// What is wrong with someone else's HelmRelease `name`, if anything.
pub(super) async fn touched(env: &TestEnv, name: &str) -> Option<String> {
    let what = format!("HelmRelease {}/{name}, owned by no application", env.namespace);
    let foreign = match releases(env).get_opt(name).await {
        Ok(Some(foreign)) => foreign,
        Ok(None) => return Some(format!("{what}, was deleted")),
        // The API server restarting: no answer is no verdict.
        Err(_) => return None,
    };
    if foreign.metadata.generation != Some(1) {
        return Some(format!("{what}, was rewritten (generation {:?})", foreign.metadata.generation));
    }
    if !foreign.owner_references().is_empty() {
        return Some(format!("{what}, was adopted"));
    }
    let ours: Vec<String> = (foreign.metadata.managed_fields.iter().flatten())
        .filter_map(|m| m.manager.clone())
        .filter(|m| m.starts_with(naming::MANAGER))
        .collect();
    (!ours.is_empty()).then(|| format!("{what}, was written by {}", ours.join(", ")))
}
