//! KubeEdge's `NodeGroup` (`nodegroups.apps.kubeedge.io`, v1alpha1): its
//! members are `spec.nodes` and the nodes `spec.matchLabels` selects, and
//! KubeEdge's controller labels each of them
//! `apps.kubeedge.io/belonging-to=<group>`.

use super::kind::PoolObjects;
use super::nodes::Membership;

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
    fn membership(&self) -> Membership {
        Membership::Label(NODE_LABEL.to_string())
    }
}
