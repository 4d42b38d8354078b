//! Fans a Helm chart out to OpenYurt node pools as one Flux HelmRelease per
//! pool. Everything but `controller` is pure: the modules compute what should
//! exist, and the controller makes it so.

pub mod api;
pub mod api_errors;
pub mod apply;
pub mod backoff;
pub mod changes;
pub mod chart;
pub mod cli;
pub mod controller;
pub mod drift;
pub mod events;
pub mod managed_fields;
pub mod naming;
pub mod nodes;
pub mod observe;
pub mod orphan;
pub mod packed;
pub mod plan;
pub mod pools;
pub mod release;
pub mod rollout;
pub mod shared_chart;
pub mod source;
pub mod status;
pub mod telemetry;
pub mod template;
pub mod throttle;
pub mod values;
pub mod values_from;
pub mod version;
