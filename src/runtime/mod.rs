//! The running controller, around [`crate::reconcile`]. It may use every
//! module below it; nothing below imports it.
//!
//! - [`controller`] wires it together: the watches and their caches
//!   (`watches`), which applications each event wakes (`changes` says
//!   which events matter to planning and to whom, `triggers` wakes them,
//!   through `index`), the kinds of pool served (`pool_apis`), the
//!   leadership (`leader`), and one reconcile (`reconciler`);
//! - pacing: retries ([`backoff`]), wakes ([`throttle`]), and the API
//!   client, paced and counted ([`api_client`]);
//! - what operators read: [`metrics`], the HTTP endpoints ([`server`]),
//!   and [`logs`]; the Events an application gets are published from what
//!   [`crate::reconcile::fleet`] says of it, and also sent to Flux's
//!   notification-controller ([`notify`]).

pub mod api_client;
mod asking;
pub mod backoff;
mod changes;
mod context;
pub mod controller;
mod index;
mod leader;
pub mod logs;
pub mod metrics;
pub mod notify;
pub mod options;
mod pool_apis;
pub(crate) use pool_apis::pool_resource;
mod reconciler;
pub mod server;
pub mod shards;
pub mod throttle;
mod triggers;
mod watches;
pub mod woken;
