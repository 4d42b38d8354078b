//! OpenYurt's `NodePool` (`nodepools.apps.openyurt.io`): yurt-manager labels
//! every node of a pool `apps.openyurt.io/nodepool=<pool>`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::kind::PoolObjects;

/// The node label OpenYurt puts on every node of a pool.
pub const NODE_LABEL: &str = "apps.openyurt.io/nodepool";

pub struct OpenYurt;

impl PoolObjects for OpenYurt {
    fn group(&self) -> &'static str {
        "apps.openyurt.io"
    }
    fn kind(&self) -> &'static str {
        "NodePool"
    }
    fn crd(&self) -> &'static str {
        "nodepools.apps.openyurt.io"
    }
    fn provider(&self) -> &'static str {
        "OpenYurt"
    }
    fn node_selector(&self, name: &str, _: Option<&Value>) -> BTreeMap<String, String> {
        BTreeMap::from([(NODE_LABEL.to_string(), name.to_string())])
    }
}
