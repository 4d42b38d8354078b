//! SuperEdge's `NodeUnit` (`nodeunits.site.superedge.io`, v1alpha2): its
//! members are `spec.nodes` and the nodes `spec.selector` selects.
//! SuperEdge's site-manager adds `<unit>: nodeunits.superedge.io` to the
//! unit's `spec.setNode.labels` (beside any the unit sets) and puts those
//! labels on every member node, so that label marks a unit's nodes
//! whatever else the unit sets.

use std::collections::BTreeMap;

use serde_json::Value;

use super::kind::PoolObjects;

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
    fn node_selector(&self, name: &str, _: Option<&Value>) -> BTreeMap<String, String> {
        BTreeMap::from([(name.to_string(), NODE_LABEL_VALUE.to_string())])
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_unit_marks_its_nodes_with_its_name_whatever_labels_it_sets() {
        let default = BTreeMap::from([("site-a".to_string(), NODE_LABEL_VALUE.to_string())]);
        assert_eq!(SuperEdge.node_selector("site-a", Some(&json!({ "type": "edge" }))), default);
        assert_eq!(
            SuperEdge.node_selector("site-a", Some(&json!({ "setNode": { "labels": { "site": "a" } } }))),
            default
        );
    }
}
