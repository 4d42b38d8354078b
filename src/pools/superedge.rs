//! SuperEdge's `NodeUnit` (`nodeunits.site.superedge.io`, v1alpha2): its
//! members are `spec.nodes` and the nodes `spec.selector` selects.
//! SuperEdge's site-manager adds `<unit>: nodeunits.superedge.io` to the
//! unit's `spec.setNode.labels` (beside any the unit sets) and puts those
//! labels on every member node, so that label marks a unit's nodes
//! whatever else the unit sets.

use super::kind::PoolObjects;
use super::nodes::Membership;

/// The value of the label `<unit>` that site-manager puts on every node of
/// a unit.
pub const NODE_LABEL_VALUE: &str = "nodeunits.superedge.io";

pub struct SuperEdge;

impl PoolObjects for SuperEdge {
    fn group(&self) -> &'static str {
        "site.superedge.io"
    }
    fn kind(&self) -> &'static str {
        "NodeUnit"
    }
    fn crd(&self) -> &'static str {
        "nodeunits.site.superedge.io"
    }
    fn provider(&self) -> &'static str {
        "SuperEdge"
    }
    fn membership(&self) -> Membership {
        Membership::Marker(NODE_LABEL_VALUE)
    }
}
