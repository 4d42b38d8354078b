//! The stand-in for helm-controller: each generation of the bench's
//! releases marked Ready, as helm-controller would, a second after it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use serde_json::{json, Value};

use super::{STAND_IN_DELAY, STAND_IN_PARALLEL};

/// The stand-in for helm-controller: it watches the bench's HelmReleases
/// and, for each generation not yet marked Ready, writes the status
/// helm-controller writes on a successful install or upgrade, one second
/// after it saw the generation.
pub struct StandIn {
    patches: Arc<AtomicU64>,
    error: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StandIn {
    pub fn start(releases: Api<DynamicObject>) -> Self {
        let patches = Arc::new(AtomicU64::new(0));
        let error = Arc::new(Mutex::new(None));
        let task = tokio::spawn(stand_in(releases, patches.clone(), error.clone()));
        StandIn { patches, error, task }
    }

    pub fn patches(&self) -> u64 {
        self.patches.load(Ordering::Relaxed)
    }

    /// Why it failed, if it did: a release it could not mark Ready would
    /// stall the rollout.
    pub fn error(&self) -> Option<String> {
        self.error.lock().expect("the stand-in's error").clone()
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

/// A release generation the stand-in marks Ready once `due`.
struct Due {
    name: String,
    generation: i64,
    due: tokio::time::Instant,
}

async fn stand_in(releases: Api<DynamicObject>, patches: Arc<AtomicU64>, error: Arc<Mutex<Option<String>>>) {
    let (queue, due) = futures::channel::mpsc::unbounded::<Due>();
    let watch = {
        let (releases, error) = (releases.clone(), error.clone());
        async move {
            // The last generation queued per release: the stand-in's own
            // status patches and the controller's metadata writes are no
            // new generation.
            let mut queued: HashMap<String, i64> = HashMap::new();
            let mut events = std::pin::pin!(watcher(releases, watcher::Config::default())
                .default_backoff()
                .applied_objects());
            loop {
                let release = match events.try_next().await {
                    Ok(Some(release)) => release,
                    Ok(None) => return,
                    Err(e) => {
                        *error.lock().expect("the stand-in's error") = Some(format!("watch: {e}"));
                        return;
                    }
                };
                let (Some(name), Some(generation)) =
                    (release.metadata.name.clone(), release.metadata.generation)
                else {
                    continue;
                };
                if release.metadata.deletion_timestamp.is_some()
                    || ready_for(&release.data, generation)
                    || queued.get(&name) == Some(&generation)
                {
                    continue;
                }
                queued.insert(name.clone(), generation);
                let due = tokio::time::Instant::now() + STAND_IN_DELAY;
                let _ = queue.unbounded_send(Due {
                    name,
                    generation,
                    due,
                });
            }
        }
    };
    // The queue is in the order seen, so each waits out its own delay in
    // turn without holding a patch slot.
    let mark = due
        .then(|d| async move {
            tokio::time::sleep_until(d.due).await;
            d
        })
        .map(|d| {
            let (releases, patches, error) = (&releases, &patches, &error);
            async move {
                match mark_ready(releases, &d.name, d.generation).await {
                    Ok(()) => {
                        patches.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        *error.lock().expect("the stand-in's error") =
                            Some(format!("release {}: {e}", d.name));
                    }
                }
            }
        })
        .buffer_unordered(STAND_IN_PARALLEL)
        .for_each(|()| async {});
    futures::join!(watch, mark);
}

/// Whether the release carries `Ready=True` stamped with `generation`.
fn ready_for(release: &Value, generation: i64) -> bool {
    release
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .is_some_and(|c| c["status"] == "True" && c["observedGeneration"] == generation)
}

/// Writes the status helm-controller writes once it installed or upgraded
/// the release's `generation`: the generation observed, a Helm history
/// entry of the chart version, and `Ready` and `Released` True for it.
/// Tried three times, as a transient API error is no verdict on the
/// controller; the release is read again first, so that a newer
/// generation is not marked by an older one.
async fn mark_ready(releases: &Api<DynamicObject>, name: &str, generation: i64) -> Result<(), kube::Error> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = async {
            let release = releases.get(name).await?;
            if release.metadata.generation != Some(generation) || ready_for(&release.data, generation) {
                return Ok(());
            }
            let status = installed_status(&release, generation);
            releases
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&json!({ "status": status })))
                .await
                .map(drop)
        }
        .await;
        match result {
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(_) if attempt < 3 => tokio::time::sleep(Duration::from_secs(1)).await,
            other => return other,
        }
    }
}

/// The status of `release` after a successful Helm install (no history
/// yet) or upgrade of `generation`, as helm-controller writes it.
fn installed_status(release: &DynamicObject, generation: i64) -> Value {
    let spec = &release.data["spec"];
    let status = &release.data["status"];
    let name = release.metadata.name.clone().unwrap_or_default();
    let namespace = release.metadata.namespace.clone().unwrap_or_default();
    let target = spec["targetNamespace"].as_str().unwrap_or(&namespace).to_string();
    let helm_name = spec["releaseName"]
        .as_str()
        .map_or_else(|| format!("{target}-{name}"), str::to_string);
    let chart = spec.pointer("/chart/spec/chart").and_then(Value::as_str).unwrap_or_default();
    let version = spec.pointer("/chart/spec/version").and_then(Value::as_str).unwrap_or("*");
    let history: Vec<Value> = status["history"].as_array().cloned().unwrap_or_default();
    let (action, reason) = match history.is_empty() {
        true => ("install", "InstallSucceeded"),
        false => ("upgrade", "UpgradeSucceeded"),
    };
    let helm_version = history.first().and_then(|h| h["version"].as_i64()).unwrap_or(0) + 1;
    let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let first_deployed = history.last().and_then(|h| h["firstDeployed"].as_str()).unwrap_or(&now).to_string();
    let digest = format!("sha256:{generation:064x}");
    let snapshot = json!({
        "name": helm_name, "namespace": target, "version": helm_version, "status": "deployed",
        "chartName": chart, "chartVersion": version, "appVersion": version,
        "digest": digest, "configDigest": digest,
        "firstDeployed": first_deployed, "lastDeployed": now
    });
    // helm-controller keeps the last five releases.
    let history: Vec<Value> = std::iter::once(snapshot).chain(history).take(5).collect();
    let message =
        format!("Helm {action} succeeded for release {target}/{helm_name}.v{helm_version} with chart {chart}@{version}");
    let condition = |kind: &str| {
        json!({
            "type": kind, "status": "True", "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": now
        })
    };
    json!({
        "observedGeneration": generation,
        "lastAttemptedGeneration": generation,
        "lastAttemptedRevision": version,
        "lastAttemptedReleaseAction": action,
        "lastAttemptedConfigDigest": digest,
        "history": history,
        "conditions": [condition("Ready"), condition("Released")]
    })
}
