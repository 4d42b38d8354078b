//! Which cluster a site is, as the cluster inventory API identifies it
//! across namespaces and cluster sets. One cluster may be described by many
//! ClusterProfiles: a cluster manager such as OCM publishes a profile for a
//! cluster in every namespace bound to its cluster set, and two managers
//! may each publish one. A site's release must be known for the cluster it
//! installs into, not for the profile or the kubeconfig Secret that led
//! there, or two applications drive one Helm release on one cluster.
//!
//! Pure: reads a profile object, nothing else.

use std::collections::BTreeMap;

use serde_json::Value;

/// The label every ClusterProfile carries with its cluster manager's name
/// (KEP 4322; `LabelClusterManagerKey` of the cluster inventory API).
pub const LABEL_CLUSTER_MANAGER: &str = "x-k8s.io/cluster-manager";

/// The ClusterProperty (KEP 2149) naming the cluster within its cluster
/// set, which a profile may list in `status.properties`.
pub const PROPERTY_CLUSTER_ID: &str = "cluster.clusterset.k8s.io";
/// The earlier name of the same property in KEP 2149.
pub const PROPERTY_CLUSTER_ID_OLD: &str = "id.k8s.io";
/// The ClusterProperty (KEP 2149) naming the cluster set.
pub const PROPERTY_CLUSTER_SET: &str = "clusterset.k8s.io";

/// The names a ClusterProfile gives its cluster, each enough to know the
/// cluster in any namespace: two profiles that share one describe one
/// cluster. In the order they are trusted:
///
/// - its KEP 2149 id within its cluster set (`cluster.clusterset.k8s.io`,
///   or the older `id.k8s.io`), with the set's name when the profile
///   lists `clusterset.k8s.io`: a cluster is in one cluster set at most;
/// - its cluster manager and its name: KEP 4322 asks every manager to keep
///   a cluster's name unique, and to label the profile
///   `x-k8s.io/cluster-manager` (else `spec.clusterManager.name`, which the
///   API requires);
/// - the API server its access providers give (`status.accessProviders`,
///   and the deprecated `credentialProviders`), where two managers of one
///   cluster meet.
///
/// `name` and `labels` are the profile's own; `profile` is the object, of
/// which its `spec` and `status` are read. Empty for an object that is no
/// ClusterProfile (no manager, no name).
pub fn of_profile(name: &str, labels: &BTreeMap<String, String>, profile: &Value) -> Vec<String> {
    let text = |pointer: &str| profile.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty());
    let property = |name: &str| {
        let properties = profile.pointer("/status/properties")?.as_array()?;
        let found = properties.iter().find(|p| p["name"] == name)?;
        found["value"].as_str().filter(|v| !v.is_empty())
    };
    let mut ids = Vec::new();
    if let Some(id) = property(PROPERTY_CLUSTER_ID).or_else(|| property(PROPERTY_CLUSTER_ID_OLD)) {
        ids.push(match property(PROPERTY_CLUSTER_SET) {
            Some(set) => format!("cluster {id} of cluster set {set}"),
            None => format!("cluster {id}"),
        });
    }
    let manager = labels
        .get(LABEL_CLUSTER_MANAGER)
        .map(String::as_str)
        .filter(|m| !m.is_empty())
        .or_else(|| text("/spec/clusterManager/name"));
    if let (Some(manager), false) = (manager, name.is_empty()) {
        ids.push(format!("cluster {name} of manager {manager}"));
    }
    let providers = ["/status/accessProviders", "/status/credentialProviders"];
    for provider in providers.iter().filter_map(|p| profile.pointer(p)?.as_array()).flatten() {
        if let Some(server) = provider.pointer("/cluster/server").and_then(Value::as_str) {
            let server = format!("cluster at {}", server.trim_end_matches('/'));
            if server.len() > "cluster at ".len() && !ids.contains(&server) {
                ids.push(server);
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What `Pool` reads of a profile object, as it hands it over.
    fn names(profile: &Value) -> Vec<String> {
        let name = profile.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let labels: BTreeMap<String, String> =
            serde_json::from_value(profile.pointer("/metadata/labels").cloned().unwrap_or(json!({})))
                .unwrap();
        of_profile(name, &labels, profile)
    }

    /// A profile as OCM publishes it in one namespace bound to a cluster set.
    fn published(namespace: &str) -> Value {
        json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": { "name": "store-1", "namespace": namespace,
                          "labels": { LABEL_CLUSTER_MANAGER: "open-cluster-management" } },
            "spec": { "clusterManager": { "name": "open-cluster-management" } },
            "status": {
                "properties": [
                    { "name": PROPERTY_CLUSTER_ID, "value": "9d3c0a7e-kube-system-uid" },
                    { "name": PROPERTY_CLUSTER_SET, "value": "stores" }
                ],
                "accessProviders": [{ "name": "ocm", "cluster": { "server": "https://store-1.example:6443/" } }]
            }
        })
    }

    #[test]
    fn one_cluster_published_in_two_namespaces_has_the_same_names() {
        let ids = names(&published("team-a"));
        assert_eq!(
            ids,
            [
                "cluster 9d3c0a7e-kube-system-uid of cluster set stores",
                "cluster store-1 of manager open-cluster-management",
                "cluster at https://store-1.example:6443",
            ]
        );
        assert_eq!(names(&published("team-b")), ids);
    }

    #[test]
    fn two_managers_of_one_cluster_meet_at_its_api_server() {
        let karmada = json!({
            "metadata": { "name": "member-7" },
            "spec": { "clusterManager": { "name": "karmada" } },
            "status": { "credentialProviders": [{ "name": "token", "cluster": { "server": "https://store-1.example:6443" } }] }
        });
        let ids = names(&karmada);
        assert_eq!(
            ids,
            [
                "cluster member-7 of manager karmada",
                "cluster at https://store-1.example:6443"
            ]
        );
        assert!(names(&published("team-a")).iter().any(|id| ids.contains(id)));
    }

    #[test]
    fn the_older_id_property_counts_and_other_clusters_differ() {
        let mut old = published("team-a");
        old["status"]["properties"] = json!([{ "name": PROPERTY_CLUSTER_ID_OLD, "value": "abc" }]);
        assert_eq!(names(&old)[0], "cluster abc");
        let mut other = published("team-a");
        other["metadata"]["name"] = json!("store-2");
        other["status"] = json!({});
        let ids = names(&other);
        assert_eq!(ids, ["cluster store-2 of manager open-cluster-management"]);
        assert!(!names(&published("team-a")).iter().any(|id| ids.contains(id)));
    }

    #[test]
    fn an_object_that_names_no_cluster_has_no_name() {
        assert!(names(&json!({ "metadata": { "name": "hz" } })).is_empty());
        assert!(names(&json!({})).is_empty());
    }
}
