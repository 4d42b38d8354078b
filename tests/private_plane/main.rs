//! The tests that stop or remove a part of a control plane (the API
//! server, helm-controller, a CRD): each would break the other tests'
//! requests on the shared plane, so each starts a control plane of its own
//! (`PrivateCluster`) on its own ports and state directory, and stops it
//! when it ends. One test binary, one module per test, so the crate is
//! linked once for all of them.
//!
//! Each plane's kubeconfig reaches the test's clients and the controller it
//! starts by argument, never through the process's `KUBECONFIG`, so the
//! tests run side by side, each on its plane; the planes start one at a
//! time. A plane that cannot start fails its test with the component's
//! log tail.
//!
//! One test: `cargo test --test private_plane flux_outage::`.

#[path = "../support/mod.rs"]
#[allow(dead_code, unused_imports)] // this binary uses a part of the shared helpers
mod support;

mod private_cluster;

mod apiserver_outage;
mod flux_outage;
mod pool_api_missing;
mod source_outage;
