//! The `NodePoolApplication` custom resource.
//!
//! Field names follow Flux's `HelmRelease` wherever the meaning is the same,
//! so that users who know Flux can read and write this resource without a
//! second vocabulary.

mod chart;
pub mod conditions;
pub mod naming;
mod pools;
pub mod reference;
mod schema;
mod spec;
mod status;

use kube::CustomResourceExt;

pub use chart::*;
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
pub use pools::*;
pub use spec::*;
pub use status::*;

/// Why the CRD could not be written out.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("cannot write the CustomResourceDefinition as YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
}

/// The CustomResourceDefinition as YAML, ready for `kubectl apply -f -`.
pub fn crds_yaml() -> Result<String, CrdError> {
    Ok(serde_saphyr::to_string(&NodePoolApplication::crd())?)
}

#[cfg(test)]
mod tests;
