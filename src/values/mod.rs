//! Values: what each pool's release gets as Helm values. Helm's merge
//! ([`merge`]), the per-pool templates ([`template`]), and what can be
//! judged of values Flux merges in from ConfigMaps and Secrets
//! ([`values_from`]). Pure: nothing here touches the network.

pub mod merge;
pub mod template;
pub mod values_from;
