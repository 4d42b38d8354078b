//! Fans a Helm chart out to node pools as one Flux HelmRelease per pool.
//!
//! The folders follow the pipeline, lowest first; a module uses only those
//! beside it or below it:
//! - [`api`]: the `NodePoolApplication` resource, and the names and labels
//!   of what it owns.
//! - [`pools`]: node pools, which of them an application selects, and their
//!   nodes' readiness.
//! - [`values`]: Helm's values merge and the per-pool templates.
//! - [`chart`]: chart sources, version resolution, schema checks and the
//!   shared HelmChart.
//! - [`reconcile`]: observe → plan → apply, one application at a time.
//! - [`runtime`]: the running controller: watches, leader election,
//!   metrics, logs and Events.
//! - [`cli`]: the commands.
//! - [`console`]: the web console (`nodepool-fanout ui`), over what `get`
//!   reads.
//! - [`check`]: the invariant checker (`nodepool-fanout-check`), which
//!   judges the promises of the guides under docs/ from what the API
//!   server records.

// A function past 100 lines holds more than one step; the lint keeps
// them short (the default threshold).
#![warn(clippy::too_many_lines)]

pub mod api;
pub mod chart;
pub mod check;
pub mod cli;
pub mod console;
pub mod pools;
pub mod reconcile;
pub mod runtime;
pub mod tls;
pub mod values;
