//! The running controller: the watches and the reconcile loop around
//! [`crate::reconcile`] ([`controller`]), retry pacing ([`backoff`],
//! [`throttle`]), the API client's pacing and counting ([`api_errors`]),
//! metrics, health and logs ([`telemetry`]), and the Events an application
//! gets ([`events`]).

pub mod api_errors;
pub mod backoff;
mod context;
pub mod controller;
pub mod events;
mod index;
mod leader;
pub mod options;
mod pool_apis;
mod reconciler;
pub mod telemetry;
pub mod throttle;
mod triggers;
mod watches;
