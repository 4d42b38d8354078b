//! Automatic rollback (`onFailure: Rollback`): once the revision under
//! way halts (never once it completed), the pools that took it go back to
//! the last revision each was done with, and the revision stays rolled
//! back until the spec changes. Pure and stateless like the rest of the rollout: what each
//! release was written at, and what it would go back to, are stamped on
//! the release itself when it is written.
//!
//! - The pools that took the revision are those whose release was written
//!   at it; a pool whose release the revision left as it was took nothing.
//! - Each goes back to the revision its release's stamp names (see
//!   `ANNOTATION_ROLLBACK_REVISION`): the last it was done with. A pool
//!   installed by the failed revision, or done with none before it, has
//!   nothing to go back to: it stays as it is (removing it is not ours to
//!   decide), and the status names it. When no pool goes back at all, the
//!   rollout is a halt that says why, never a rollback of nothing.
//! - Pools unavailable already (failed, not Ready) go back at once; the
//!   others last wave first, then by name, never more than
//!   `maxUnavailable` going back and not yet Ready at once.
//! - A pool that is down goes back once it is reached again, and a
//!   healthy one outside its maintenance windows once one opens: it took
//!   the revision inside one, and works. A failed pool goes back at once,
//!   whatever its windows: it is broken now.
//! - The pools that never took the revision (behind, new) are held, as
//!   under a halt: the revision is known bad.
//! - Once one release says it was rolled back from the revision, or the
//!   history says so, the revision stays rolled back: its failed pools no
//!   longer carry it, and without this the rollout would start it again,
//!   back and forth.
//!
//! Rollback, end to end, lives in four places, one per step of the
//! reconcile: which revisions were rolled out and what became of each is
//! `reconcile::history` (records as ControllerRevisions); who goes back
//! and when is decided here, with the rest of the rollout; each pool's
//! release rebuilt at the revision it goes back to, and the stamps that
//! say which one that is, are `plan::rollback` and `plan::rollback::stamps`;
//! the records are written by `apply::history`.

use k8s_openapi::jiff::Timestamp;

use super::held::outside_window;
use super::{PoolDecision, PoolInput, PoolRollout, Release, Requeue, Settings};
use crate::api::conditions;
use crate::reconcile::release::state::{ReleaseState, ReleaseStatus};

/// How a pool's release stands to the revision under way, by the stamps
/// it was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stamp {
    /// Not written at this revision: written before it, left as it was by
    /// it, or written before releases were stamped.
    #[default]
    Earlier,
    /// Written at this revision; `can_go_back` when the last revision that
    /// completed had completed on it.
    Took { can_go_back: bool },
    /// Taken back from this revision by a rollback.
    RolledBack,
}

/// Whether `pools` are to be rolled back now: the rollback is asked for,
/// the revision never completed, and it halted now or was rolled back
/// before (then it stays so, whatever its pools say now: a rolled-back
/// revision is never rolled out again).
pub(super) fn applies(settings: &Settings, pools: &[PoolInput], halted: bool) -> bool {
    settings.progressive && settings.rollback && !settings.completed && (halted || before(settings, pools))
}

/// Whether the revision was rolled back before: the history says so, or a
/// release says it was taken back from it.
pub(super) fn before(settings: &Settings, pools: &[PoolInput]) -> bool {
    settings.rolled_back || pools.iter().any(|p| p.stamp == Stamp::RolledBack)
}

/// The pools a rollback covers, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollingBack {
    /// The pools going back or back, whose release was or will be written.
    pub pools: Vec<String>,
    /// Of those, the ones back and Ready on the revision they went back to.
    pub back: usize,
    /// Of those, the ones that wait to be reached again.
    pub unreached: usize,
    /// Pools that took the revision and have nothing to go back to.
    pub stranded: Vec<String>,
    /// Failed pools that carry no stamp of taking the revision (written
    /// before releases were stamped): what they would go back to is not
    /// known, so they stay as they are.
    pub unstamped: Vec<String>,
}

impl RollingBack {
    /// Whether every pool that can go back now is back.
    pub fn done(&self) -> bool {
        self.back + self.unreached == self.pools.len()
    }

    /// Whether no pool goes back, or went back: a rollback that could not
    /// apply, which is said as a halt, never as a rollback.
    pub fn nothing_went_back(&self) -> bool {
        self.pools.is_empty()
    }
}

/// Decides every pool of a rollback, over `states` as measured.
pub(super) fn roll_back(
    settings: &Settings,
    pools: &[PoolInput],
    states: &mut [PoolDecision],
    now: Timestamp,
    requeue: &mut Requeue,
) -> RollingBack {
    let mut going = RollingBack::default();
    let mut candidates = Vec::new();
    let mut busy = 0;
    for (i, (p, d)) in pools.iter().zip(states.iter_mut()).enumerate() {
        match p.stamp {
            Stamp::RolledBack => {
                going.pools.push(p.pool.to_string());
                if d.state == PoolRollout::Offline {
                    going.unreached += 1;
                    continue;
                }
                *d = match status_of(p.release).is_some_and(ready) {
                    true => {
                        going.back += 1;
                        PoolDecision::of(PoolRollout::RolledBack)
                    }
                    false => {
                        busy += 1;
                        PoolDecision::of(PoolRollout::RollingBack)
                    }
                };
            }
            Stamp::Took { can_go_back: true } => {
                going.pools.push(p.pool.to_string());
                if p.offline {
                    going.unreached += 1;
                    *d = unreached(settings);
                    continue;
                }
                // Failed or not Ready yet on the revision: unavailable already.
                let unavailable = matches!(d.state, PoolRollout::Failed | PoolRollout::Updating);
                if p.closed.is_some() && !unavailable {
                    *d = PoolDecision {
                        state: PoolRollout::RollbackPending,
                        ..outside_window(p.closed.as_ref(), now, requeue)
                    };
                    continue;
                }
                candidates.push((i, unavailable));
                *d = PoolDecision::of(PoolRollout::RollbackPending);
            }
            Stamp::Took { can_go_back: false } => going.stranded.push(p.pool.to_string()),
            Stamp::Earlier if d.state == PoolRollout::Failed => going.unstamped.push(p.pool.to_string()),
            Stamp::Earlier => {
                let behind = matches!(
                    d.state,
                    PoolRollout::Pending
                        | PoolRollout::Write
                        | PoolRollout::Waiting
                        | PoolRollout::AwaitingApproval
                        | PoolRollout::Paused
                );
                if behind {
                    *d = PoolDecision::of(PoolRollout::Halted);
                }
            }
        }
    }
    // Unavailable first, then the last wave first, then by name.
    candidates
        .sort_by_key(|&(i, unavailable)| (!unavailable, std::cmp::Reverse(pools[i].wave), pools[i].pool));
    for (i, unavailable) in candidates {
        if unavailable || busy < settings.max_unavailable {
            states[i] = PoolDecision::of(PoolRollout::RollBack);
            busy += 1;
        }
    }
    going
}

fn status_of<'a>(release: Release<'a>) -> Option<&'a ReleaseStatus> {
    match release {
        Release::Missing => None,
        Release::Behind(status) | Release::Current { status, .. } => Some(status),
    }
}

/// Ready on its latest spec: back where it was.
fn ready(status: &ReleaseStatus) -> bool {
    status.state == ReleaseState::Ready && status.observed_latest
}

fn unreached(settings: &Settings) -> PoolDecision {
    let to = settings.back_to.as_deref().unwrap_or_default();
    PoolDecision::noted(
        PoolRollout::RollbackPending,
        conditions::pool_reason::NOT_REACHED,
        format!("the pool is down: it goes back to revision {to} once it is reached again"),
    )
}
