//! An offline pool is never counted done: a revision is complete only when
//! every selected pool is done with it, and while a pool that is offline
//! is behind on it the rollout reads `AwaitingOffline`, never `Complete`
//! (docs/rollouts.md, "Offline pools"). Read as complete, the revision
//! became a rollback target and lifted its own halt, and each returning
//! site took a revision never judged on it (the fourth review, item 2).
//!
//! Judged at each version of an application that reads its current
//! revision R `Complete`: no release of it on a pool offline then (every
//! node its release is pinned to not Ready for `offlineAfter`, 60 s under
//! `offlinePools: Include`) may carry another revision, or one taken back
//! from R. The release watch runs apart from the application's, so the
//! judgement waits until a release newer than that version is seen (the
//! watch has delivered every release version before it); a release
//! changed since then may have been behind or not, and is no evidence
//! either way. A release being deleted (its pool left) is no pool of the
//! revision.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::halt::resource_version;
use super::max_unavailable::offline_after;
use super::nodes::Nodes;
use super::{
    annotation, application_key, owned_release_of, taken_revision, text, Invariant, Key, Kind, Record,
    Violation,
};
use crate::api::naming;

/// What an offline pool counts as offline after under `Include`.
const INCLUDED_OFFLINE_AFTER: Duration = Duration::from_secs(60);

/// One application version that read its revision complete, to be judged
/// once the release watch has passed it.
#[derive(Debug, Clone)]
struct Completion {
    application: (String, String),
    revision: String,
    version: u64,
    seen: Timestamp,
    offline_after: Duration,
}

/// The completions not judged yet, in the order they were read.
#[derive(Debug, Default)]
pub(super) struct OfflineDone(Vec<Completion>);

/// How many completions wait at most: a release watch that never moves
/// would otherwise keep every one.
const WAITING: usize = 256;

impl OfflineDone {
    /// Notes an application version that reads its current revision complete.
    pub(super) fn read_application(&mut self, record: &Record) {
        let app = &record.object;
        let current = app.pointer("/status/observedGeneration") == app.pointer("/metadata/generation");
        let complete = text(app, "/status/rollout/phase") == Some("Complete");
        let (Some(revision), Some(version), true, false) = (
            text(app, "/status/rollout/revision"),
            resource_version(app),
            current && complete,
            record.deleted,
        ) else {
            return;
        };
        if self.0.len() >= WAITING {
            self.0.remove(0);
        }
        self.0.push(Completion {
            application: application_key(app),
            revision: revision.to_string(),
            version,
            seen: record.seen,
            offline_after: offline_after(app).unwrap_or(INCLUDED_OFFLINE_AFTER),
        });
    }

    /// Reads a release's record: the completions it shows the release watch
    /// has passed are judged against the releases as they stood then.
    pub(super) fn read_release(
        &mut self,
        objects: &BTreeMap<Key, Value>,
        nodes: &Nodes,
        record: &Record,
    ) -> Vec<Violation> {
        let Some(now) = resource_version(&record.object) else {
            return Vec::new();
        };
        let (passed, waiting): (Vec<Completion>, Vec<Completion>) =
            std::mem::take(&mut self.0).into_iter().partition(|c| c.version < now);
        self.0 = waiting;
        passed.iter().flat_map(|c| judge(c, objects, nodes)).collect()
    }
}

/// The releases of an offline pool behind on a completed revision.
fn judge(completion: &Completion, objects: &BTreeMap<Key, Value>, nodes: &Nodes) -> Vec<Violation> {
    let (namespace, app) = &completion.application;
    let behind = objects.iter().filter(|(key, release)| {
        key.kind == Kind::HelmRelease
            && release.pointer("/metadata/deletionTimestamp").is_none()
            && owned_release_of(release).is_some_and(|(ns, a)| ns == namespace && a == app)
            && resource_version(release).is_some_and(|v| v <= completion.version)
            && nodes.offline(release, completion.offline_after, completion.seen)
            && taken_revision(release) != Some(completion.revision.as_str())
    });
    behind
        .map(|(key, release)| Violation {
            invariant: Invariant::OfflineNeverDone,
            message: format!(
                "{namespace}/{app} read revision {} Complete (resourceVersion {}) while {key}, of a pool \
                 offline then, carried revision {}: a revision is complete only when every selected pool \
                 is done with it, and an offline pool behind keeps it AwaitingOffline",
                completion.revision,
                completion.version,
                annotation(release, naming::ANNOTATION_REVISION).unwrap_or("none"),
            ),
            objects: vec![format!("NodePoolApplication {namespace}/{app}"), key.to_string()],
            story: Vec::new(),
        })
        .collect()
}
