//! Pools that are only a node label: every distinct value of the label is
//! a pool named after the value, and its nodes are those carrying it. Its
//! labels, for selectors and templates, are those every node of the pool
//! carries alike (a zone's nodes share their region, say).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use super::nodes::Membership;
use super::Pool;

/// The pools `key` makes of `nodes`, sorted by name.
pub fn pools<'a>(nodes: impl IntoIterator<Item = &'a Node>, key: &str) -> Vec<Pool> {
    let mut by_value: BTreeMap<&str, BTreeMap<String, String>> = BTreeMap::new();
    for node in nodes {
        let Some(labels) = node.metadata.labels.as_ref() else {
            continue;
        };
        let Some(value) = labels.get(key) else {
            continue;
        };
        match by_value.get_mut(value.as_str()) {
            // Keep only what this node shares with the others.
            Some(shared) => shared.retain(|k, v| labels.get(k) == Some(v)),
            None => {
                by_value.insert(value, labels.clone());
            }
        }
    }
    by_value
        .into_iter()
        .map(|(value, labels)| Pool {
            name: value.to_string(),
            namespace: None,
            health: None,
            cluster_ids: Vec::new(),
            labels: labels.into_iter().collect(),
            annotations: Default::default(),
            marks: Membership::Label(key.to_string().into()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;

    use super::*;

    fn node(labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    #[test]
    fn each_value_is_a_pool_with_the_labels_its_nodes_share() {
        const ZONE: &str = "topology.kubernetes.io/zone";
        let nodes = [
            node(&[(ZONE, "a"), ("region", "east"), ("rack", "1")]),
            node(&[(ZONE, "a"), ("region", "east"), ("rack", "2")]),
            node(&[(ZONE, "b"), ("region", "west")]),
            node(&[("region", "east")]),
        ];
        let pools = pools(&nodes, ZONE);
        assert_eq!(pools.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(
            pools[0].label_map(),
            BTreeMap::from([
                (ZONE.to_string(), "a".to_string()),
                ("region".to_string(), "east".to_string())
            ])
        );
        assert_eq!(pools[0].node_selector(), BTreeMap::from([(ZONE.to_string(), "a".to_string())]));
        assert_eq!(pools[1].labels.get("region").unwrap(), "west");
        assert!(super::pools(&nodes, "absent").is_empty());
    }
}
