//! The one trait every kind of pool object implements: which API serves
//! its pools, and which labels mark the nodes of a pool. Pools that are
//! only a node label have no object and live in [`super::node_label`].

use std::collections::BTreeMap;

use kube::api::ObjectMeta;
use serde_json::Value;

use crate::api::PoolKind;

use super::kubeedge::KubeEdge;
use super::nodes::Membership;
use super::openyurt::OpenYurt;
use super::superedge::SuperEdge;

/// A kind of pool that is an object of its own, served by a framework's
/// CustomResourceDefinition.
pub trait PoolObjects: Sync {
    /// The API group the pools are served in, e.g. `apps.openyurt.io`.
    fn group(&self) -> &'static str;
    /// The kind of the pool objects, e.g. `NodePool`.
    fn kind(&self) -> &'static str;
    /// The CustomResourceDefinition to install when the cluster serves no
    /// such kind, e.g. `nodepools.apps.openyurt.io`.
    fn crd(&self) -> &'static str;
    /// Who installs it, for the condition that asks for it.
    fn provider(&self) -> &'static str;
    /// How the framework's own controller labels the nodes of a pool.
    fn membership(&self) -> Membership;
}

/// The kind's pool objects, or `None` for pools that are a node label.
pub fn objects(kind: PoolKind) -> Option<&'static dyn PoolObjects> {
    match kind {
        PoolKind::OpenYurt => Some(&OpenYurt),
        PoolKind::KubeEdge => Some(&KubeEdge),
        PoolKind::SuperEdge => Some(&SuperEdge),
        PoolKind::NodeLabel => None,
    }
}

/// The kinds whose pools are objects, in a fixed order.
pub const OBJECT_KINDS: [PoolKind; 3] = [PoolKind::OpenYurt, PoolKind::KubeEdge, PoolKind::SuperEdge];

/// Which kind a manifest is, from its `apiVersion` group and `kind`.
pub fn kind_of(object: &Value) -> Option<PoolKind> {
    let group = object.get("apiVersion")?.as_str()?.split('/').next()?;
    let kind = object.get("kind")?.as_str()?;
    OBJECT_KINDS
        .into_iter()
        .find(|k| objects(*k).is_some_and(|o| o.group() == group && o.kind() == kind))
}

/// The name, labels and annotations planning reads of a pool object.
pub fn read_meta(metadata: &ObjectMeta) -> (String, BTreeMap<String, String>, BTreeMap<String, String>) {
    (
        metadata.name.clone().unwrap_or_default(),
        metadata.labels.clone().unwrap_or_default(),
        metadata.annotations.clone().unwrap_or_default(),
    )
}
