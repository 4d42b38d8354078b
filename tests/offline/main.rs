//! The test suites that need no cluster, in one test binary, one module
//! each: the committed CRD and API reference against the Rust types, the
//! commands and manifests of README.md and docs/ against the code,
//! `deploy/` against the image, Flux's kstatus reading the status roll-up,
//! and the property-based fuzzing of the values merge and the template
//! renderer. Some run binaries of the local control plane's build (Flux's
//! kstatus, source-controller) or Go, but none starts or uses a control
//! plane.
//!
//! One suite: `cargo test --test offline fuzz_values::`.

#[path = "../support/mod.rs"]
#[allow(dead_code, unused_imports)] // this binary uses a part of the shared helpers
mod support;

mod crd_drift;
mod deploy;
mod docs;
mod file_size;
mod fuzz_template;
mod fuzz_values;
mod kstatus;
mod mutants;
