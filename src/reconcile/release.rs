//! A pool's HelmRelease, from both ends: [`build`] makes the release one
//! pool gets from the application, and [`state`] reads what Flux reports
//! of it. The writes are `apply::release_writes`.

pub mod build;
pub mod state;
