//! The nodes, as the checker reads them: which are Ready, and since when
//! the others are not. docs/rollouts.md says a pool offline (every node
//! of it not Ready for `offlineAfter`) counts neither as unavailable nor
//! as failed: its release is left as it is, and the rollout goes on
//! without it. The invariants that count pools taken down ask here whether
//! a pool is offline, in the checker's own words: the nodes its release is
//! pinned to (the placement post-renderer's `nodeSelector`), and their
//! `Ready` condition.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::text;

/// One node: its labels, and since when it has not been Ready (`None`
/// while it is).
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeState {
    labels: BTreeMap<String, String>,
    down_since: Option<Timestamp>,
}

/// Every node, by name.
#[derive(Debug, Default)]
pub struct Nodes(BTreeMap<String, NodeState>);

impl Nodes {
    /// Reads one version of a node, or its deletion.
    pub fn read(&mut self, node: &Value, deleted: bool) {
        let Some(name) = text(node, "/metadata/name") else {
            return;
        };
        if deleted {
            self.0.remove(name);
            return;
        }
        let labels = node
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|l| l.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default();
        let conditions = node.pointer("/status/conditions").and_then(Value::as_array);
        let ready = conditions.and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
        // Not Ready since its Ready condition last changed; a node with no
        // Ready condition yet has never been Ready, and counts as down
        // from an unknown time, which no grace has run out on.
        let down_since = match ready {
            Some(c) if c["status"] == "True" => None,
            Some(c) => {
                Some(text(c, "/lastTransitionTime").and_then(|t| t.parse().ok()).unwrap_or(Timestamp::MAX))
            }
            None => Some(Timestamp::MAX),
        };
        self.0.insert(name.to_string(), NodeState { labels, down_since });
    }

    /// What a re-list delivered: every node there is.
    pub fn relisted(&mut self, nodes: &[Value]) {
        self.0.clear();
        for node in nodes {
            self.read(node, false);
        }
    }

    /// Whether the pool `release` is pinned to is offline at `at`: it has
    /// nodes, and none has been Ready for `after`. A release pinned to no
    /// node of this cluster (a site cluster's) never is.
    pub fn offline(&self, release: &Value, after: Duration, at: Timestamp) -> bool {
        let Some(selector) = pinned_to(release) else {
            return false;
        };
        let mut pool = self
            .0
            .values()
            .filter(|n| selector.iter().all(|(k, v)| n.labels.get(k) == Some(v)))
            .peekable();
        let after = k8s_openapi::jiff::SignedDuration::try_from(after).unwrap_or_default();
        let since_long_enough = |since: Timestamp| since.checked_add(after).is_ok_and(|t| t <= at);
        pool.peek().is_some() && pool.all(|n| n.down_since.is_some_and(since_long_enough))
    }
}

/// The `nodeSelector` a release's placement post-renderer pins its bare
/// Pods to (every pod template is pinned the same), if it has one: a
/// kustomize patch of kind `Pod`, written as YAML.
fn pinned_to(release: &Value) -> Option<BTreeMap<String, String>> {
    let renderers = release.pointer("/spec/postRenderers")?.as_array()?;
    let patches = renderers
        .iter()
        .filter_map(|r| r.pointer("/kustomize/patches")?.as_array())
        .flatten();
    patches
        .filter(|p| p.pointer("/target/kind").and_then(Value::as_str) == Some("Pod"))
        .filter_map(|p| serde_saphyr::from_str::<Value>(p.get("patch")?.as_str()?).ok())
        .find_map(|body| {
            let selector = body.pointer("/spec/nodeSelector")?.as_object()?;
            let selector: BTreeMap<String, String> = selector
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect();
            (!selector.is_empty()).then_some(selector)
        })
}
