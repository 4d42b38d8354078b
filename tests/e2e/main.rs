//! The end-to-end tests on the shared local control plane (the one
//! `hack/cluster.sh up` starts, or the cluster `KUBECONFIG` names): one
//! test binary, one module per area, so the crate is linked once for all of
//! them. Every test makes a namespace and pools of its own, so the tests of
//! all modules run side by side.
//!
//! One area: `cargo test --test e2e rollout::`; one test:
//! `cargo test --test e2e -- --exact rollout::a_change_that_takes_its_pool_offline_halts_the_rollout`.
//!
//! The tests that stop parts of a control plane start a private one each
//! (`PrivateCluster`), so that their outages disturb no test here: they are
//! the binary of their own `tests/private_plane/`.
//!
//! This binary includes `support` with no blanket `dead_code` allowance: a
//! shared helper no test uses any more is a warning here.

#[path = "../support/mod.rs"]
mod support;

mod analysis;
mod apply;
mod bad_input;
mod bucket;
mod chart_ownership;
mod check;
mod cli;
mod console;
mod deletion_safety;
mod docs;
mod drift;
mod fanout;
mod faults;
mod gitops;
mod helm_chart;
mod isolation;
mod leader;
mod monitoring;
mod notifications;
mod observability;
mod oci;
mod pool_events;
mod pool_kinds;
mod rbac;
mod release_claims;
mod requests;
mod rollback;
mod rollout;
mod sharding;
mod shared_chart;
mod signin;
mod sites;
mod smoke;
mod suspend;
mod upstream_charts;
