//! Charts: where an application's chart comes from and what it holds.
//! Version resolution as source-controller does it ([`version`]), the
//! index and artifacts source-controller serves ([`source`]), the chart's
//! defaults and values schema ([`schema`]), and the one HelmChart an
//! application's releases share ([`shared`]), each YAML file of them read
//! as Helm reads it ([`yaml`]). Only [`source`] reads from the network; it
//! never writes.

pub mod schema;
pub mod shared;
pub mod source;
pub mod version;
pub mod yaml;
