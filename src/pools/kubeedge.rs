//! KubeEdge's `NodeGroup` (`nodegroups.apps.kubeedge.io`, v1alpha1): its
//! members are `spec.nodes` and the nodes `spec.matchLabels` selects, and
//! KubeEdge's controller labels each of them
//! `apps.kubeedge.io/belonging-to=<group>`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::kind::PoolObjects;

/// The node label KubeEdge puts on every node of a group.
pub const NODE_LABEL: &str = "apps.kubeedge.io/belonging-to";

pub struct KubeEdge;

impl PoolObjects for KubeEdge {
    fn group(&self) -> &'static str {
        "apps.kubeedge.io"
    }
    fn kind(&self) -> &'static str {
        "NodeGroup"
    }
    fn crd(&self) -> &'static str {
        "nodegroups.apps.kubeedge.io"
    }
    fn provider(&self) -> &'static str {
        "KubeEdge"
    }
    fn node_selector(&self, name: &str, _: Option<&Value>) -> BTreeMap<String, String> {
        BTreeMap::from([(NODE_LABEL.to_string(), name.to_string())])
    }
}
