//! One reconcile of one application: resolve the chart → observe → plan →
//! apply → report.
//!
//! One reconcile reads top to bottom as these steps; the caller (the
//! runtime's reconciler) publishes what the report says.
//!
//! - [`resolve`]: the chart version, its shared HelmChart made sure of,
//!   and the chart read, or why writes wait on it.
//! - [`observe`] reads the watch caches ([`packed`] keeps releases
//!   compressed there; [`changes`] says which applications a watch event
//!   concerns).
//! - [`plan`] decides, purely, what to write, what to prune and what to
//!   report: each pool's release ([`release`]), whether a live release
//!   drifted ([`drift`]), which pools the rollout lets through
//!   ([`rollout`]), whether pools share an object ([`sharing`]), and how
//!   the fleet stands ([`fleet`]).
//! - [`apply`] carries the plan out ([`apply::carry_out`]) with
//!   server-side apply, prunes or orphans ([`orphan`]) only what the
//!   application owns ([`managed_fields`]), claims a Helm release
//!   ([`apply::claim`]) before a HelmRelease first drives it, and returns what
//!   happened.
//! - [`fleet`] says, once, how the fleet stands from the plan and what
//!   apply did: the status, the Events, the metrics' counts and `get`'s
//!   rows all read its report.
//!
//! Nothing under `plan`, `release`, `drift`, `rollout`, `sharing` or
//! `fleet` touches the network: they take plain data and return plain
//! data.

pub mod apply;
pub mod changes;
pub mod drift;
pub mod fleet;
pub mod history;
pub mod managed_fields;
pub mod observe;
pub mod orphan;
pub mod packed;
pub mod plan;
pub mod release;
pub mod release_state;
pub mod resolve;
pub mod rollout;
pub mod sharing;
