//! OpenYurt's `NodePool` (`nodepools.apps.openyurt.io`): yurt-manager labels
//! every node of a pool `apps.openyurt.io/nodepool=<pool>`.

use super::kind::PoolObjects;
use super::nodes::Membership;

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
    fn membership(&self) -> Membership {
        Membership::Label(NODE_LABEL.to_string())
    }
}
