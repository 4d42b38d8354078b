//! A release that carries the current revision yet would be written
//! otherwise now: its pool changed (a label a template reads), or the
//! controller renders it otherwise (a new version). Neither changes the
//! revision; docs/rollouts.md says what becomes of each: a pool's own
//! change after the revision completed is the revision's next rollout,
//! and the controller's alone is held or rolled out as
//! `--rendering-changes` says.

use super::build::{Candidate, Kind};
use super::Owned;
use crate::reconcile::release::build::pool_inputs;

/// What becomes of a release whose revision and pool are as they were
/// when it was written, and that this controller would write otherwise
/// (`--rendering-changes`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum RenderingChanges {
    /// Left as it is until the application's next revision writes it.
    #[default]
    Hold,
    /// Rolled out as the revision's next rollout, pool by pool.
    Rollout,
}

/// What the releases of the current revision that would be written
/// otherwise come to.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Rewrites {
    /// A release of the revision would be written again, for its pool's
    /// own change or (`rollout`) the controller's rendering: once the
    /// revision completed, that is its next rollout.
    pub again: bool,
    /// Releases left as an earlier controller rendered them (`hold`).
    pub held: usize,
}

/// Reads, and under `hold` takes back, the writes of `candidates` that
/// would write a release of `revision` again: those a write restores (a
/// hand edit undone, a resume) are no such writes, nor is a release
/// whose shard moved (its label only), which is written as before.
pub(super) fn rewrites(
    candidates: &mut [Candidate],
    owned: &Owned,
    revision: &str,
    shard: Option<&str>,
    policy: RenderingChanges,
) -> Rewrites {
    let mut found = Rewrites::default();
    for candidate in candidates {
        let Kind::Differs(change) = &candidate.kind else {
            continue;
        };
        let Some(stamps) = owned.get(candidate.release.as_str()).map(|o| &o.stamps) else {
            continue;
        };
        let of_revision = stamps.revision.as_deref() == Some(revision) && stamps.rolled_back_from.is_none();
        if change.restores() || !of_revision {
            continue;
        }
        // A release stamped before pools were is taken as written from
        // its pool as it is: nothing tells otherwise.
        let pool_changed = stamps.pool_inputs.as_ref().is_some_and(|was| *was != pool_inputs(candidate.pool));
        if pool_changed {
            found.again = true;
        } else if stamps.shard.as_deref() != shard {
            // Relabelled for its new shard, as before.
        } else if policy == RenderingChanges::Hold {
            candidate.kind = Kind::Unchanged;
            found.held += 1;
        } else {
            found.again = true;
        }
    }
    found
}
