//! Unit tests of `rollout`.

mod properties;
mod rollback;

use super::*;
use crate::api::Rollout;
use std::collections::{BTreeMap, BTreeSet};

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_900_000_000 + secs).unwrap()
}

fn now() -> Timestamp {
    ts(10_000)
}

fn status(state: ReleaseState, observed_latest: bool, ready_since: Option<i64>) -> ReleaseStatus {
    ReleaseStatus {
        state,
        reason: format!("{state:?}"),
        message: format!("{state:?} message"),
        chart_version: None,
        observed_latest,
        ready_since: ready_since.map(|s| ts(s).to_string()),
        installed_before: false,
    }
}

fn ready() -> ReleaseStatus {
    status(ReleaseState::Ready, true, Some(0))
}

/// Pools described as (name, wave, offline, release).
struct Fleet {
    statuses: Vec<ReleaseStatus>,
    pools: Vec<(String, usize, bool, Kind)>,
    /// When each offline pool went offline, by pool name, when known.
    offline_since: BTreeMap<String, i64>,
    /// Pools whose maintenance windows are closed.
    closed: BTreeMap<String, Closed>,
    /// What each pool's release was written at, when not earlier.
    stamps: BTreeMap<String, Stamp>,
    /// Offline pools out of reach (no node's clock says since when).
    unreached: BTreeSet<String>,
    /// Pools whose release is suspended.
    suspended: BTreeSet<String>,
    /// Pools whose last write the API server refused.
    refused: BTreeSet<String>,
    /// When each pool's release was last written, at whatever revision.
    last_written: BTreeMap<String, i64>,
}

#[derive(Clone, Copy)]
enum Kind {
    Missing,
    Behind(usize),
    Current(usize, Option<i64>),
}

impl Fleet {
    fn new() -> Self {
        Self {
            statuses: Vec::new(),
            pools: Vec::new(),
            offline_since: BTreeMap::new(),
            closed: BTreeMap::new(),
            stamps: BTreeMap::new(),
            unreached: BTreeSet::new(),
            suspended: BTreeSet::new(),
            refused: BTreeSet::new(),
            last_written: BTreeMap::new(),
        }
    }

    /// The API server refused the last write of pool `name`'s release.
    fn refused(mut self, name: &str) -> Self {
        self.refused.insert(name.to_string());
        self
    }

    /// The pool `name`'s release is suspended.
    /// The pool `name`'s release was last written at `secs`, at whatever revision.
    fn last_written(mut self, name: &str, secs: i64) -> Self {
        self.last_written.insert(name.to_string(), secs);
        self
    }

    fn suspended(mut self, name: &str) -> Self {
        self.suspended.insert(name.to_string());
        self
    }

    /// The pool `name` is out of reach since `secs` (a site helm-controller
    /// cannot reach): down, with no node's time for it.
    fn unreached_since(mut self, name: &str, secs: i64) -> Self {
        self.unreached.insert(name.to_string());
        self.down_since(name, secs)
    }

    /// The pool `name`'s release was written with `stamp`.
    fn stamped(mut self, name: &str, stamp: Stamp) -> Self {
        self.stamps.insert(name.to_string(), stamp);
        self
    }

    /// The pool `name`'s windows are closed until `opens`.
    fn window_closed(mut self, name: &str, opens: Option<i64>, holds_installs: bool) -> Self {
        let closed = Closed {
            opens: opens.map(ts),
            holds_installs,
            unreadable: None,
        };
        self.closed.insert(name.to_string(), closed);
        self
    }

    /// The pool `name` is offline, since `secs`.
    fn down_since(mut self, name: &str, secs: i64) -> Self {
        for pool in self.pools.iter_mut().filter(|p| p.0 == name) {
            pool.2 = true;
        }
        self.offline_since.insert(name.to_string(), secs);
        self
    }

    fn add(mut self, name: &str, wave: usize, offline: bool, kind: Kind, s: Option<ReleaseStatus>) -> Self {
        let kind = match (kind, s) {
            (Kind::Behind(_), Some(s)) => {
                self.statuses.push(s);
                Kind::Behind(self.statuses.len() - 1)
            }
            (Kind::Current(_, written), Some(s)) => {
                self.statuses.push(s);
                Kind::Current(self.statuses.len() - 1, written)
            }
            (kind, _) => kind,
        };
        self.pools.push((name.to_string(), wave, offline, kind));
        self
    }
    fn new_pool(self, name: &str) -> Self {
        self.add(name, 0, false, Kind::Missing, None)
    }
    fn behind(self, name: &str, wave: usize, s: ReleaseStatus) -> Self {
        self.add(name, wave, false, Kind::Behind(0), Some(s))
    }
    fn current(self, name: &str, wave: usize, s: ReleaseStatus, written: i64) -> Self {
        self.add(name, wave, false, Kind::Current(0, Some(written)), Some(s))
    }
    fn offline(self, name: &str, s: ReleaseStatus) -> Self {
        self.add(name, 0, true, Kind::Behind(0), Some(s))
    }

    fn decide(&self, settings: &Settings, waves: usize) -> Decision {
        let inputs: Vec<PoolInput> = self
            .pools
            .iter()
            .map(|(name, wave, offline, kind)| PoolInput {
                pool: name,
                wave: *wave,
                offline: *offline,
                offline_since: self
                    .offline_since
                    .get(name)
                    .map(|s| ts(*s))
                    .filter(|_| !self.unreached.contains(name)),
                down_since: self.offline_since.get(name).map(|s| ts(*s)),
                closed: self.closed.get(name).cloned(),
                release: match kind {
                    Kind::Missing => Release::Missing,
                    Kind::Behind(i) => Release::Behind(&self.statuses[*i]),
                    Kind::Current(i, written) => Release::Current {
                        status: &self.statuses[*i],
                        written: written.map(ts),
                    },
                },
                stamp: self.stamps.get(name).copied().unwrap_or_default(),
                suspended: self.suspended.contains(name),
                refused_before: self.refused.contains(name),
                last_written: self.last_written.get(name).map(|s| ts(*s)),
            })
            .collect();
        decide(settings, &inputs, waves, now())
    }
}

fn progressive() -> Settings {
    Settings {
        progressive: true,
        ..Settings::default()
    }
}

fn written(d: &Decision) -> Vec<&str> {
    pools_where(d, |p| p.state == PoolRollout::Write)
}

/// The pools whose decision is `wanted`, in name order.
fn pools_where(d: &Decision, wanted: impl Fn(&PoolDecision) -> bool) -> Vec<&str> {
    d.pools.iter().filter(|(_, p)| wanted(p)).map(|(k, _)| k.as_str()).collect()
}

fn five_behind() -> Fleet {
    ["a", "b", "c", "d", "e"].iter().fold(Fleet::new(), |f, n| f.behind(n, 0, ready()))
}

#[test]
fn all_at_once_writes_every_pool() {
    let d = five_behind().new_pool("f").decide(&Settings::default(), 1);
    assert_eq!(written(&d), ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(d.updated, 6);
}

#[test]
fn progressive_starts_one_pool_in_name_order() {
    let d = five_behind().decide(&progressive(), 1);
    assert_eq!(written(&d), ["a"]);
    assert_eq!(d.state("b"), Some(PoolRollout::Pending));
    assert_eq!((d.updated, d.done, d.total), (1, 0, 5));
    assert_eq!(d.phase, RolloutPhase::Progressing);
}

#[test]
fn max_unavailable_caps_pools_updating_at_once() {
    let settings = Settings {
        max_unavailable: 2,
        ..progressive()
    };
    let d = five_behind().decide(&settings, 1);
    assert_eq!(written(&d), ["a", "b"]);
    // One still updating: one more starts.
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 9_990)
        .behind("b", 0, ready())
        .behind("c", 0, ready())
        .decide(&settings, 1);
    assert_eq!(written(&d), ["b"]);
    assert_eq!(d.state("c"), Some(PoolRollout::Pending));
}

#[test]
fn a_decision_waits_on_releases_only_while_updates_wait_for_a_slot() {
    let a_under_way_b_behind = || {
        Fleet::new()
            .current("a", 0, status(ReleaseState::Progressing, true, None), 9_990)
            .behind("b", 0, ready())
    };
    let d = five_behind().decide(&progressive(), 1);
    assert_eq!(d.waits_on_releases(1), Some(1), "b to e wait for a, written now");
    let d = a_under_way_b_behind().decide(&progressive(), 1);
    assert_eq!(d.waits_on_releases(1), Some(1), "b waits for a's slot");
    let d = a_under_way_b_behind().decide(&Settings::default(), 1);
    assert_eq!(d.waits_on_releases(1), None, "AllAtOnce holds nothing back");
    let paused = Settings {
        paused: true,
        ..progressive()
    };
    let d = a_under_way_b_behind().decide(&paused, 1);
    assert_eq!(d.phase, RolloutPhase::Paused);
    assert_eq!(d.waits_on_releases(1), None, "paused: a person, not a release, moves it on");
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 9_990)
        .decide(&progressive(), 1);
    assert_eq!(d.waits_on_releases(1), None, "the last pool under way: nothing waits");
    let d = Fleet::new()
        .current("a", 0, ready(), 0)
        .current("b", 0, status(ReleaseState::Progressing, true, None), 9_990)
        .behind("c", 1, ready())
        .decide(&progressive(), 2);
    assert_eq!(d.state("c"), Some(PoolRollout::Pending));
    assert_eq!(d.waits_on_releases(1), Some(1), "the next wave waits for b");
}

#[test]
fn a_tenth_of_the_slots_or_every_release_under_way_is_worth_a_look() {
    let settings = Settings {
        max_unavailable: 40,
        ..progressive()
    };
    let under_way = |fleet: Fleet, n: usize| {
        (0..n).fold(fleet, |f, i| {
            f.current(&format!("u{i:02}"), 0, status(ReleaseState::Progressing, true, None), 9_990)
        })
    };
    let d = under_way(Fleet::new(), 40).behind("z", 0, ready()).decide(&settings, 1);
    assert_eq!(d.waits_on_releases(40), Some(4), "40 slots: 4 verdicts");
    let d = under_way(Fleet::new(), 3).behind("z", 1, ready()).decide(&settings, 2);
    assert_eq!(d.waits_on_releases(40), Some(3), "the wave's last 3: all of them");
}

#[test]
fn decisions_looked_up_in_order_or_not_are_each_pools_own() {
    let d = five_behind().decide(&progressive(), 1);
    let mut in_order = d.in_order();
    let asked = ["a", "aa", "b", "d", "c", "e", "a", "z"];
    let found: Vec<Option<PoolRollout>> = asked.iter().map(|p| in_order.get(p).map(|d| d.state)).collect();
    let expected: Vec<Option<PoolRollout>> = asked.iter().map(|p| d.state(p)).collect();
    assert_eq!(found, expected);
    assert_eq!(found.iter().filter(|s| s.is_none()).count(), 2, "aa and z are no pools of it");
}

#[test]
fn the_next_pool_starts_once_the_previous_is_done() {
    let d = Fleet::new()
        .current("a", 0, ready(), 0)
        .behind("b", 0, ready())
        .behind("c", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Done));
    assert_eq!(written(&d), ["b"]);
    assert_eq!((d.updated, d.done), (2, 1));
}

#[test]
fn a_ready_release_of_an_older_generation_is_still_updating() {
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Ready, false, Some(0)), 9_999)
        .behind("b", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert!(written(&d).is_empty());
}

#[test]
fn min_ready_seconds_holds_the_next_pool_and_asks_to_look_again() {
    let settings = Settings {
        min_ready: Duration::from_secs(30),
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Ready, true, Some(9_990)), 9_980)
        .behind("b", 0, ready())
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Soaking));
    assert!(written(&d).is_empty(), "soaking counts as unavailable");
    assert_eq!(d.requeue_after, Some(Duration::from_secs(21)));
    // Ready long enough.
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Ready, true, Some(9_970)), 9_960)
        .behind("b", 0, ready())
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Done));
    assert_eq!(written(&d), ["b"]);
}

#[test]
fn a_flux_failure_halts_at_max_failures_zero() {
    for state in [ReleaseState::Failed, ReleaseState::Stalled] {
        let d = Fleet::new()
            .current("a", 0, status(state, true, None), 9_990)
            .behind("b", 0, ready())
            .new_pool("c")
            .decide(&progressive(), 1);
        assert_eq!(d.phase, RolloutPhase::Halted, "{state:?}");
        assert_eq!(d.failed, ["a"]);
        assert_eq!(d.state("b"), Some(PoolRollout::Halted));
        assert_eq!(d.state("c"), Some(PoolRollout::Halted), "a new pool is not given a bad revision");
        assert!(written(&d).is_empty());
    }
}

#[test]
fn a_failure_of_an_older_generation_is_not_counted() {
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Stalled, false, None), 9_990)
        .behind("b", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert_ne!(d.phase, RolloutPhase::Halted);
}

#[test]
fn failures_up_to_max_failures_are_tolerated() {
    let settings = Settings {
        max_failures: 1,
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Failed, true, None), 9_990)
        .behind("b", 0, ready())
        .decide(&settings, 1);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(written(&d), ["b"], "a failed pool does not hold a place among the unavailable");
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Failed, true, None), 9_990)
        .current("b", 0, status(ReleaseState::Stalled, true, None), 9_990)
        .behind("c", 0, ready())
        .decide(&settings, 1);
    assert_eq!(d.phase, RolloutPhase::Halted);
    assert_eq!(d.failed, ["a", "b"]);
}

#[test]
fn the_progress_deadline_fails_a_pool_and_says_why() {
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 10_000 - 600)
        .behind("b", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Failed));
    let failure = d.pools["a"].note.as_ref().unwrap();
    assert_eq!(failure.reason, "ProgressDeadlineExceeded");
    let why = failure.message.as_str();
    assert!(why.contains("progressDeadline (10m)"), "{why}");
    // The time of the update, not the time since: the status holding
    // it must not change from one reconcile to the next.
    assert!(why.contains("of its update at 20"), "{why}");
    assert!(!why.contains("ago") && !why.contains("after its update"), "{why}");
    assert_eq!(d.phase, RolloutPhase::Halted);
    // Before the deadline: look again when it passes.
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Waiting, true, None), 10_000 - 500)
        .decide(&progressive(), 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert_eq!(d.requeue_after, Some(Duration::from_secs(101)));
}

#[test]
fn a_deadline_is_not_counted_across_two_clocks() {
    // Written 10 min ago by the previous leader's clock, a minute before
    // this replica took the lead: counted from the lead, not failed.
    let settings = Settings {
        clock_since: Some(ts(10_000 - 60)),
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 10_000 - 600)
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert_eq!(d.requeue_after, Some(Duration::from_secs(541)));
    // Written after the lead, by this clock: counted from the write.
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 10_000 - 30)
        .decide(&settings, 1);
    assert_eq!(d.requeue_after, Some(Duration::from_secs(571)));
    // A whole deadline past the lead fails it as ever.
    let settings = Settings {
        clock_since: Some(ts(10_000 - 600)),
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 10_000 - 900)
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Failed));
}

#[test]
fn waves_go_in_order_and_the_last_holds_pools_of_no_step() {
    let fleet = Fleet::new()
        .behind("z-canary", 0, ready())
        .behind("a", 1, ready())
        .behind("b", 1, ready());
    let settings = Settings {
        max_unavailable: 5,
        ..progressive()
    };
    let d = fleet.decide(&settings, 2);
    assert_eq!(written(&d), ["z-canary"], "wave 1 first, whatever the names");
    assert_eq!(d.wave, Some((1, 2)));
    let d = Fleet::new()
        .current("z-canary", 0, ready(), 0)
        .behind("a", 1, ready())
        .behind("b", 1, ready())
        .decide(&settings, 2);
    assert_eq!(written(&d), ["a", "b"]);
    assert_eq!(d.wave, Some((2, 2)));
    // A wave not yet done holds the next, even with room.
    let d = Fleet::new()
        .current("z-canary", 0, status(ReleaseState::Progressing, true, None), 9_999)
        .behind("a", 1, ready())
        .decide(&settings, 2);
    assert!(written(&d).is_empty());
}

#[test]
fn a_tolerated_failure_finishes_its_wave() {
    let settings = Settings {
        max_failures: 1,
        ..progressive()
    };
    let d = Fleet::new()
        .current("canary", 0, status(ReleaseState::Failed, true, None), 9_999)
        .behind("a", 1, ready())
        .decide(&settings, 2);
    assert_eq!(written(&d), ["a"]);
}

#[test]
fn unhealthy_pools_go_first_whatever_their_wave() {
    let d = Fleet::new()
        .behind("a", 0, ready())
        .behind("b", 1, status(ReleaseState::Stalled, true, None))
        .behind("c", 1, status(ReleaseState::Progressing, true, None))
        .decide(&progressive(), 2);
    assert_eq!(written(&d), ["b", "c"], "already unavailable: updating them costs nothing");
    assert_eq!(d.state("a"), Some(PoolRollout::Pending), "and they fill maxUnavailable");
    // A generation Flux has not observed yet is no verdict: it waits its turn.
    let d = Fleet::new()
        .behind("a", 0, ready())
        .behind("c", 1, status(ReleaseState::Progressing, false, None))
        .decide(&progressive(), 2);
    assert_eq!(written(&d), ["a"]);
}

/// Found by the fault soak (seed 98979945): a revision superseded while a
/// pool's update to it was under way. That pool is behind the new
/// revision and not judged by Flux yet; counting its slot free started a
/// healthy pool beside it: two pools down under `maxUnavailable: 1`.
#[test]
fn an_update_under_way_of_a_superseded_revision_keeps_its_slot() {
    let upgrading = || status(ReleaseState::Progressing, false, None);
    let superseded = || {
        Fleet::new()
            .behind("p0", 0, ready())
            .behind("p2", 0, upgrading())
            .behind("p3", 0, ready())
    };
    let d = superseded().last_written("p2", 9_990).decide(&progressive(), 1);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(d.state("p2"), Some(PoolRollout::Pending), "it waits for Flux's verdict");
    // Suspended, Helm upgrades nothing: no slot taken.
    let d = superseded().last_written("p2", 9_990).suspended("p2").decide(&progressive(), 1);
    assert_eq!(written(&d), ["p0"]);
    // Written past its progressDeadline (or resumed, its spec unchanged
    // for long): no update under way, and no slot held for ever.
    let d = superseded().last_written("p2", 10_000 - 601).decide(&progressive(), 1);
    assert_eq!(written(&d), ["p0"]);
    // Once Flux judges it Ready, the rollout goes on one pool at a time.
    let d = Fleet::new()
        .behind("p0", 0, ready())
        .behind("p2", 0, ready())
        .behind("p3", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(written(&d), ["p0"]);
}

#[test]
fn a_new_revision_supersedes_a_halted_one() {
    // The failed pool carries the old revision now: it is behind,
    // unhealthy, and goes first; the failure no longer counts.
    let d = Fleet::new()
        .behind("a", 0, status(ReleaseState::Stalled, true, None))
        .behind("b", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(written(&d), ["a"]);
    assert!(d.failed.is_empty());
}

#[test]
fn new_pools_install_at_once() {
    let d = five_behind().new_pool("new").decide(&progressive(), 1);
    assert_eq!(written(&d), ["a", "new"]);
}

#[test]
fn paused_starts_no_update_but_lets_running_ones_finish_and_new_pools_install() {
    let settings = Settings {
        paused: true,
        ..progressive()
    };
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Progressing, true, None), 9_999)
        .behind("b", 0, ready())
        .behind("c", 0, status(ReleaseState::Failed, true, None))
        .new_pool("new")
        .decide(&settings, 1);
    assert_eq!(d.state("a"), Some(PoolRollout::Updating));
    assert_eq!(d.state("b"), Some(PoolRollout::Paused));
    assert_eq!(d.state("c"), Some(PoolRollout::Paused));
    assert_eq!(written(&d), ["new"]);
    assert_eq!(d.phase, RolloutPhase::Paused);
    // Paused applies to AllAtOnce too.
    let d = five_behind().decide(
        &Settings {
            paused: true,
            ..Settings::default()
        },
        1,
    );
    assert!(written(&d).is_empty());
    assert_eq!(d.phase, RolloutPhase::Paused);
}

#[test]
fn paused_with_nothing_behind_is_complete() {
    let settings = Settings {
        paused: true,
        ..progressive()
    };
    let d = Fleet::new().current("a", 0, ready(), 0).decide(&settings, 1);
    assert_eq!(d.phase, RolloutPhase::Complete);
}

#[test]
fn offline_pools_are_skipped_and_count_for_nothing() {
    let d = Fleet::new()
        .offline("down", status(ReleaseState::Failed, true, None))
        .behind("up", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    assert_eq!(written(&d), ["up"], "an offline pool blocks nothing");
    assert_eq!(d.total, 1);
    assert!(d.failed.is_empty());
    // Once the others are done the rollout is complete.
    let d = Fleet::new()
        .offline("down", ready())
        .current("up", 0, ready(), 0)
        .decide(&progressive(), 1);
    assert_eq!(d.phase, RolloutPhase::Complete);
    // An offline pool's timed-out upgrade is not a failure either, when it
    // was offline before the update was written (at second 0).
    let d = Fleet::new()
        .add("down", 0, true, Kind::Current(0, Some(0)), Some(status(ReleaseState::Failed, true, None)))
        .down_since("down", -60)
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    assert_ne!(d.phase, RolloutPhase::Halted);
    // New and offline: nothing installed until a node is Ready.
    let d = Fleet::new()
        .add("down", 0, true, Kind::Missing, None)
        .decide(&Settings::default(), 1);
    assert!(written(&d).is_empty());
}

#[test]
fn include_writes_offline_pools() {
    let settings = Settings {
        skip_offline: false,
        ..Settings::default()
    };
    let d = Fleet::new().offline("down", ready()).decide(&settings, 1);
    assert_eq!(written(&d), ["down"]);
}

#[test]
fn everything_done_is_complete() {
    let d = Fleet::new()
        .current("a", 0, ready(), 0)
        .current("b", 0, ready(), 0)
        .decide(&progressive(), 1);
    assert_eq!(d.phase, RolloutPhase::Complete);
    assert_eq!((d.updated, d.done, d.total), (2, 2, 2));
    assert_eq!(d.requeue_after, None);
    let s = d.status("abc", &progressive());
    assert_eq!(s.progress, "Complete 2/2");
}

#[test]
fn the_status_names_failed_pools_and_the_wave() {
    let d = Fleet::new()
        .current("a", 0, status(ReleaseState::Failed, true, None), 9_999)
        .behind("b", 1, ready())
        .decide(&progressive(), 2);
    let s = d.status("rev1", &progressive());
    assert_eq!(s.phase, RolloutPhase::Halted);
    assert_eq!(s.progress, "Halted 0/2 (1 failed)");
    assert!(s.message.contains("(a)") && s.message.contains("maxFailures 0"), "{}", s.message);
    let d = five_behind().decide(&progressive(), 1);
    assert_eq!(d.status("r", &progressive()).message, "0 of 5 pools done, 1 updated");
}

#[test]
fn settings_resolve_percentages_of_the_selected_pools() {
    let spec: Rollout = serde_json::from_value(serde_json::json!({
        "strategy": "Progressive", "maxUnavailable": "25%", "maxFailures": "10%",
        "minReadySeconds": 30, "progressDeadline": "1h30m", "paused": true, "offlinePools": "Include",
        "offlineAfter": "2m"
    }))
    .unwrap();
    let s = Settings::new(Some(&spec), 10).unwrap();
    assert_eq!(
        s,
        Settings {
            progressive: true,
            max_unavailable: 2,
            max_failures: 1,
            min_ready: Duration::from_secs(30),
            progress_deadline: Duration::from_secs(5400),
            paused: true,
            skip_offline: false,
            offline_after: Duration::from_secs(120),
            awaiting_approval: BTreeSet::new(),
            wave_steps: Vec::new(),
            approved_steps: Vec::new(),
            clock_since: None,
            rollback: false,
            back_to: None,
            cannot_go_back: Vec::new(),
            rolled_back: false,
            halted_before: false,
            completed: false,
            first_install_alone: false,
        }
    );
    // Rounded down, yet at least one pool may update.
    assert_eq!(Settings::new(Some(&spec), 3).unwrap().max_unavailable, 1);
    assert_eq!(Settings::new(Some(&spec), 3).unwrap().max_failures, 0);
    assert_eq!(Settings::new(None, 3).unwrap(), Settings::default());
    let spec: Rollout = serde_json::from_value(serde_json::json!({ "maxUnavailable": "3" })).unwrap();
    assert_eq!(Settings::new(Some(&spec), 10).unwrap().max_unavailable, 3, "a count in quotes is a count");
}

#[test]
fn bad_settings_name_the_field() {
    for (spec, field) in [
        (serde_json::json!({ "maxUnavailable": "lots" }), "rollout.maxUnavailable"),
        (serde_json::json!({ "maxFailures": -1 }), "rollout.maxFailures"),
        (serde_json::json!({ "progressDeadline": "soon" }), "rollout.progressDeadline"),
        (serde_json::json!({ "offlineAfter": "a while" }), "rollout.offlineAfter"),
        (serde_json::json!({ "minReadySeconds": -5 }), "rollout.minReadySeconds"),
    ] {
        let spec: Rollout = serde_json::from_value(spec).unwrap();
        assert_eq!(Settings::new(Some(&spec), 4).unwrap_err().field, field);
    }
}

#[test]
fn durations_read_as_flux_writes_them() {
    assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
    assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(parse_duration("later"), None);
}

#[test]
fn a_pool_that_goes_offline_after_its_update_counts_as_failed() {
    // "down" got the revision at second 9,000 and lost its nodes at 9,100,
    // while "next" waits its turn: the rollout halts there.
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Progressing, false, None), 9_000)
        .down_since("down", 9_100)
        .behind("next", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Failed));
    assert_eq!(d.failed, ["down"]);
    assert_eq!(d.phase, RolloutPhase::Halted);
    assert_eq!(d.state("next"), Some(PoolRollout::Halted), "no further pool is touched");
    let failure = d.pools["down"].note.as_ref().unwrap();
    assert_eq!(failure.reason, "OfflineAfterUpdate");
    // Ready only after it went down is no proof either (Helm's wait on
    // pods that were up a moment longer).
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Ready, true, Some(9_200)), 9_000)
        .down_since("down", 9_100)
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Failed));
    assert!(failure.message.contains("after its update at"), "{}", failure.message);
    // It frees no slot either: with two allowed, one more starts, not two.
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Ready, true, Some(9_050)), 9_000)
        .down_since("down", 9_100)
        .behind("b", 0, ready())
        .behind("c", 0, ready())
        .decide(
            &Settings {
                max_failures: 1,
                max_unavailable: 2,
                min_ready: Duration::from_secs(60),
                ..progressive()
            },
            1,
        );
    assert_eq!(
        d.state("down"),
        Some(PoolRollout::Failed),
        "Ready for 50 s of minReadySeconds 60: not done"
    );
    assert_eq!(d.phase, RolloutPhase::Progressing);
    assert_eq!(written(&d), ["b", "c"], "a failed pool is not busy; the budget allows one failure");
}

#[test]
fn a_pool_offline_before_its_update_or_long_after_keeps_being_skipped() {
    let cases = [
        // Offline since before the revision was written to it.
        (status(ReleaseState::Progressing, false, None), 9_000, Some(8_000)),
        // Done with the revision (Ready, minReadySeconds 0), then went down.
        (status(ReleaseState::Ready, true, Some(9_010)), 9_000, Some(9_700)),
        // No time known for when it went down.
        (status(ReleaseState::Progressing, false, None), 9_000, None),
    ];
    for (i, (s, written_at, down)) in cases.into_iter().enumerate() {
        let mut fleet = Fleet::new().current("down", 0, s, written_at).behind("next", 0, ready());
        match down {
            Some(since) => fleet = fleet.down_since("down", since),
            None => fleet.pools[0].2 = true,
        }
        let d = fleet.decide(&progressive(), 1);
        assert_eq!(d.state("down"), Some(PoolRollout::Offline), "case {i}");
        assert_eq!(written(&d), ["next"], "case {i}: an offline pool blocks nothing");
    }
    // Offline on the previous revision: skipped, as before.
    let d = Fleet::new()
        .behind("down", 0, status(ReleaseState::Failed, true, None))
        .down_since("down", 9_900)
        .behind("next", 0, ready())
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    assert_eq!(written(&d), ["next"]);
}

#[test]
fn releases_flux_has_not_judged_since_a_resume_do_not_all_start_at_once() {
    // Resumed after a suspension: Flux has not observed the generation the
    // suspension bumped, so none reads Ready; none is a verdict either.
    let unjudged = || status(ReleaseState::Progressing, false, None);
    let d = ["a", "b", "c", "d"]
        .iter()
        .fold(Fleet::new(), |f, n| f.behind(n, 0, unjudged()))
        .decide(&progressive(), 1);
    assert_eq!(written(&d), ["a"], "maxUnavailable 1: one pool at a time");
    // Flux's verdict that a release of the previous revision fails is one.
    let d = Fleet::new()
        .behind("a", 0, ready())
        .behind("b", 0, status(ReleaseState::Failed, true, None))
        .behind("c", 0, unjudged())
        .decide(&progressive(), 1);
    assert_eq!(written(&d), ["b"], "unavailable already, it starts at once and takes the slot");
}

#[test]
fn a_pool_down_for_less_than_offline_after_is_waited_for_not_skipped_or_failed() {
    // Down 30 s ago, of a minute's grace: its update waits, the others go.
    let d = Fleet::new()
        .behind("flapping", 0, ready())
        .down_since("flapping", 9_970)
        .behind("steady", 0, ready())
        .decide(&Settings::default(), 1);
    assert_eq!(d.state("flapping"), Some(PoolRollout::Waiting));
    assert_eq!(written(&d), ["steady"]);
    assert_eq!(d.total, 2, "still counted");
    assert_eq!(d.phase, RolloutPhase::Progressing, "not complete without it");
    assert_eq!(d.requeue_after, Some(Duration::from_secs(31)), "looks again when the grace ends");
    let note = d.pools["flapping"].note.as_ref().unwrap();
    assert_eq!(note.reason, "PoolNotReached");
    assert!(note.message.contains("counts as offline from 2030-03-17T20:33:50Z"), "{}", note.message);
    // Progressive: it holds its wave (the next does not start) without
    // taking a slot of maxUnavailable.
    let settings = Settings {
        max_unavailable: 1,
        ..progressive()
    };
    let d = Fleet::new()
        .behind("a-flapping", 0, ready())
        .down_since("a-flapping", 9_990)
        .behind("b", 0, ready())
        .behind("c-next-wave", 1, ready())
        .decide(&settings, 2);
    assert_eq!(written(&d), ["b"]);
    assert_eq!(d.wave, Some((1, 2)));
    let d = Fleet::new()
        .behind("a-flapping", 0, ready())
        .down_since("a-flapping", 9_990)
        .current("b", 0, ready(), 0)
        .behind("c-next-wave", 1, ready())
        .decide(&settings, 2);
    assert!(written(&d).is_empty(), "the next wave waits for it: {:?}", written(&d));
    assert_eq!(d.wave, Some((1, 2)));
    // Updated just before it went down: not failed within the grace.
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Progressing, false, None), 9_950)
        .down_since("down", 9_960)
        .decide(&progressive(), 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Updating));
    assert!(d.failed.is_empty());
    // Past the grace: offline, and failed if the update took it down.
    let late = Settings {
        offline_after: Duration::from_secs(30),
        ..progressive()
    };
    let d = Fleet::new()
        .current("down", 0, status(ReleaseState::Progressing, false, None), 9_950)
        .down_since("down", 9_960)
        .decide(&late, 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Failed));
    let d = Fleet::new().behind("down", 0, ready()).down_since("down", 9_960).decide(&late, 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    // offlineAfter 0s: offline at once, as before the grace existed.
    let at_once = Settings {
        offline_after: Duration::ZERO,
        ..Settings::default()
    };
    let d = Fleet::new().behind("down", 0, ready()).down_since("down", 9_999).decide(&at_once, 1);
    assert_eq!(d.state("down"), Some(PoolRollout::Offline));
    // A new pool down briefly is not installed onto NotReady nodes yet.
    let d = Fleet::new()
        .add("new", 0, true, Kind::Missing, None)
        .down_since("new", 9_990)
        .decide(&Settings::default(), 1);
    assert_eq!(d.state("new"), Some(PoolRollout::Waiting));
}

#[test]
fn a_wave_awaiting_approval_starts_no_update_and_holds_the_waves_after_it() {
    let settings = Settings {
        max_unavailable: 3,
        awaiting_approval: [1].into(),
        ..progressive()
    };
    let fleet = || {
        Fleet::new()
            .current("a", 0, ready(), 0)
            .behind("b", 1, ready())
            .behind("c", 1, status(ReleaseState::Failed, true, None))
            .behind("d", 2, ready())
            .add("e", 2, false, Kind::Missing, None)
    };
    let d = fleet().decide(&settings, 3);
    assert_eq!(d.state("b"), Some(PoolRollout::AwaitingApproval));
    assert_eq!(d.state("d"), Some(PoolRollout::Pending), "a later wave is only pending");
    // Unavailable already, and new: nothing to break, as always.
    assert_eq!(written(&d), ["c", "e"]);
    assert_eq!(
        (d.phase, d.awaiting_approval, d.wave),
        (RolloutPhase::AwaitingApproval, Some(1), Some((2, 3)))
    );
    let message = d.status("r1", &settings).message;
    assert!(message.contains("wave 2/3 (step 2) awaits approval of revision r1"), "{message}");
    // While an earlier wave is under way, a later gate changes nothing.
    let d = Fleet::new().behind("a", 0, ready()).behind("b", 1, ready()).decide(&settings, 2);
    assert_eq!(written(&d), ["a"]);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    // Approved (no gate): the wave starts.
    let open = Settings {
        awaiting_approval: BTreeSet::new(),
        ..settings.clone()
    };
    let d = fleet().decide(&open, 3);
    assert_eq!(written(&d), ["b", "c", "e"]);
    // Halted or paused comes first.
    let paused = Settings {
        paused: true,
        ..settings
    };
    assert_eq!(fleet().decide(&paused, 3).phase, RolloutPhase::Paused);
}

#[test]
fn a_pool_outside_its_windows_waits_for_the_next_and_the_rollout_looks_again_then() {
    let d = Fleet::new()
        .behind("closed", 0, ready())
        .window_closed("closed", Some(10_600), false)
        .behind("open", 0, ready())
        .new_pool("new")
        .window_closed("new", Some(10_600), false)
        .decide(&Settings::default(), 1);
    assert_eq!(d.state("closed"), Some(PoolRollout::Waiting));
    assert_eq!(written(&d), ["new", "open"], "a new pool installs at once by default");
    assert_eq!(d.requeue_after, Some(Duration::from_secs(601)));
    let note = d.pools["closed"].note.as_ref().unwrap();
    assert_eq!(note.reason, "OutsideMaintenanceWindow");
    assert!(note.message.contains("the next, at 2030-03-17T20:43:20Z"), "{}", note.message);
    assert_eq!(d.phase, RolloutPhase::Progressing);
    // newPools: Wait holds the install too.
    let d = Fleet::new()
        .new_pool("new")
        .window_closed("new", Some(10_600), true)
        .decide(&Settings::default(), 1);
    assert_eq!(d.state("new"), Some(PoolRollout::Waiting));
    // Progressive: it takes no slot, the next pool of its wave goes, and
    // the next wave waits for it.
    let d = Fleet::new()
        .behind("a", 0, ready())
        .window_closed("a", Some(10_600), false)
        .behind("b", 0, ready())
        .behind("c", 1, ready())
        .decide(&progressive(), 2);
    assert_eq!(written(&d), ["b"]);
    let d = Fleet::new()
        .behind("a", 0, ready())
        .window_closed("a", Some(10_600), false)
        .current("b", 0, ready(), 0)
        .behind("c", 1, ready())
        .decide(&progressive(), 2);
    assert!(written(&d).is_empty(), "{:?}", written(&d));
    // Already on the revision: a window has nothing to hold.
    let d = Fleet::new()
        .current("a", 0, ready(), 0)
        .window_closed("a", Some(10_600), true)
        .decide(&progressive(), 1);
    assert_eq!(d.phase, RolloutPhase::Complete);
}

#[test]
fn a_pool_written_at_the_revision_went_down_after_it_whatever_its_nodes_clock_says() {
    // The pool's node reports NotReady at 8,990 by its own clock, which
    // lags: the write at 9,000 was made while the controller saw it up.
    let fleet = || {
        Fleet::new()
            .current("down", 0, status(ReleaseState::Progressing, false, None), 9_000)
            .down_since("down", 8_990)
            .behind("next", 0, ready())
    };
    let took = fleet().stamped("down", Stamp::Took { can_go_back: false }).decide(&progressive(), 1);
    assert_eq!(took.state("down"), Some(PoolRollout::Failed));
    assert_eq!(took.state("next"), Some(PoolRollout::Halted), "the change does not walk on");
    // A release this revision did not write is judged by the node's time.
    let earlier = fleet().decide(&progressive(), 1);
    assert_eq!(earlier.state("down"), Some(PoolRollout::Offline));
}

#[test]
fn a_pool_that_goes_out_of_reach_while_updating_keeps_its_slot() {
    let settings = Settings {
        max_unavailable: 1,
        max_failures: 1,
        offline_after: Duration::from_secs(30),
        ..progressive()
    };
    // "site" took the revision, then its cluster went out of reach (no
    // time known on its nodes' clock) before it was Ready.
    let d = Fleet::new()
        .current("site", 0, status(ReleaseState::Progressing, false, None), 9_800)
        .add("b", 0, false, Kind::Behind(0), Some(ready()))
        .unreached_since("site", 9_850)
        .decide(&settings, 1);
    assert_eq!(d.state("site"), Some(PoolRollout::Offline));
    assert_eq!(written(&d), Vec::<&str>::new(), "its slot is still taken");
    assert_eq!(d.state("b"), Some(PoolRollout::Pending));
    // Done before it went down: it frees its slot.
    let d = Fleet::new()
        .current("site", 0, status(ReleaseState::Ready, true, Some(9_810)), 9_800)
        .add("b", 0, false, Kind::Behind(0), Some(ready()))
        .unreached_since("site", 9_850)
        .decide(&settings, 1);
    assert_eq!(written(&d), ["b"]);
}

/// All at once, as the controller decides over pools of one cluster.
fn first_alone() -> Settings {
    Settings {
        first_install_alone: true,
        ..Settings::default()
    }
}

fn first_install_waiters(d: &Decision) -> Vec<&str> {
    pools_where(d, |p| p.note.as_ref().is_some_and(|n| n.reason == pool_reason::FIRST_INSTALL))
}

#[test]
fn an_applications_first_install_goes_to_one_pool_alone() {
    let fleet = Fleet::new().new_pool("c").new_pool("a").new_pool("b");
    let d = fleet.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["a"]);
    assert_eq!(first_install_waiters(&d), ["b", "c"]);
    assert_eq!(d.state("b"), Some(PoolRollout::Waiting));
    assert_eq!(d.phase, RolloutPhase::Progressing);
    // A verdict on the first is worth a reconcile at once.
    assert_eq!(d.waits_on_releases(1), Some(1));
    // Without the rule (sites that are clusters), every pool at once.
    assert_eq!(written(&fleet.decide(&Settings::default(), 1)), ["a", "b", "c"]);
}

#[test]
fn the_others_wait_while_the_first_install_is_under_way_and_go_once_it_is_judged() {
    let updating = status(ReleaseState::Progressing, false, None);
    let under_way = Fleet::new().current("b", 0, updating, 9_990).new_pool("a").new_pool("c");
    let d = under_way.decide(&first_alone(), 1);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(first_install_waiters(&d), ["a", "c"]);
    let message = &d.pools["a"].note.as_ref().unwrap().message;
    assert!(message.contains("pool \"b\""), "{message}");
    for verdict in [ready(), status(ReleaseState::Failed, true, None)] {
        let judged = Fleet::new().current("b", 0, verdict, 9_990).new_pool("a").new_pool("c");
        assert_eq!(written(&judged.decide(&first_alone(), 1)), ["a", "c"]);
    }
    // Past its progressDeadline, the first is judged failed: no one waits longer.
    let stuck = status(ReleaseState::Progressing, false, None);
    let late = Fleet::new().current("b", 0, stuck, 10_000 - 601).new_pool("a");
    assert_eq!(written(&late.decide(&first_alone(), 1)), ["a"]);
}

#[test]
fn a_fleet_installed_before_or_a_first_pool_that_is_down_holds_no_install_back() {
    // A release behind was installed at an earlier revision: new pools go at once.
    let installed = Fleet::new().behind("b", 0, ready()).new_pool("a").new_pool("c");
    assert_eq!(written(&installed.decide(&first_alone(), 1)), ["a", "b", "c"]);
    // Written at this revision already and not judged yet (all at once, or
    // helm-controller is away), but Helm installed it before: an update
    // of the fleet, which new pools join at once.
    let upgrading = ReleaseStatus {
        installed_before: true,
        ..status(ReleaseState::Progressing, false, None)
    };
    let update = Fleet::new().current("b", 0, upgrading, 9_990).new_pool("a").new_pool("c");
    let d = update.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["a", "c"]);
    assert!(first_install_waiters(&d).is_empty(), "{:?}", d.pools);
    // The first's release is suspended (an override): Helm installs
    // nothing there, and the next goes first.
    let updating = status(ReleaseState::Progressing, false, None);
    let suspended = Fleet::new()
        .current("a", 0, updating, 9_990)
        .new_pool("b")
        .new_pool("c")
        .suspended("a");
    let d = suspended.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["b"]);
    assert_eq!(first_install_waiters(&d), ["c"]);
    // Releases written suspended install nothing: none waits for another.
    let written_suspended = Fleet::new().new_pool("a").new_pool("b").suspended("a").suspended("b");
    assert_eq!(written(&written_suspended.decide(&first_alone(), 1)), ["a", "b"]);
    // The first's write was refused (a bad override): the next goes first,
    // and the refused one is written again, since it may be fixed.
    let refused = Fleet::new().new_pool("a").new_pool("b").new_pool("c").refused("a");
    let d = refused.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["a", "b"]);
    assert_eq!(first_install_waiters(&d), ["c"]);
    // The first in order is down: the next goes first.
    let down = Fleet::new().new_pool("a").new_pool("b").new_pool("c").down_since("a", 9_990);
    let d = down.decide(&first_alone(), 1);
    assert_eq!(written(&d), ["b"]);
    assert_eq!(first_install_waiters(&d), ["c"]);
}

#[test]
fn the_first_install_goes_in_rollout_order() {
    let waves = Fleet::new()
        .add("a", 1, false, Kind::Missing, None)
        .add("z", 0, false, Kind::Missing, None);
    assert_eq!(written(&waves.decide(&first_alone(), 2)), ["z"]);
}

/// Found by the fault soak (seed 41): a halted revision's failed pool left
/// the selection (or recovered), no pool failed any more, and the revision
/// walked on. The history's halt holds it while any pool is to be written.
#[test]
fn a_recorded_halt_holds_though_no_pool_fails_now() {
    let halted_before = Settings {
        halted_before: true,
        ..progressive()
    };
    let fleet = Fleet::new()
        .current("recovered", 0, ready(), 9_000)
        .behind("next", 0, ready())
        .new_pool("new");
    let d = fleet.decide(&halted_before, 1);
    assert_eq!(d.phase, RolloutPhase::Halted);
    assert!(written(&d).is_empty(), "{:?}", d.pools);
    assert_eq!(d.state("next"), Some(PoolRollout::Halted));
    assert_eq!(d.state("new"), Some(PoolRollout::Halted), "the revision is known bad");
    let message = d.status("r", &halted_before).message;
    assert!(message.contains("halted earlier") && message.contains("request a reconcile"), "{message}");
    // Without the record, the same fleet goes on.
    assert_eq!(written(&fleet.decide(&progressive(), 1)), ["new", "next"]);
    // Every pool done with the revision: nothing is held, it is complete.
    let done = Fleet::new().current("a", 0, ready(), 9_000).current("b", 0, ready(), 9_000);
    assert_eq!(done.decide(&halted_before, 1).phase, RolloutPhase::Complete);
}

#[test]
fn a_gate_holds_every_wave_after_it_though_its_own_pools_are_done_or_gone() {
    let settings = Settings {
        max_unavailable: 3,
        awaiting_approval: [1].into(),
        wave_steps: vec!["canary".into(), "gate".into(), "3".into()],
        ..progressive()
    };
    // Wave 1's pools were new and installed at once (done), or left:
    // wave 2 waits for wave 1's approval all the same.
    let fleet = || {
        Fleet::new()
            .current("a", 0, ready(), 0)
            .current("b", 1, ready(), 0)
            .behind("c", 2, ready())
    };
    for d in [
        fleet().decide(&settings, 3),
        Fleet::new().current("a", 0, ready(), 0).behind("c", 2, ready()).decide(&settings, 3),
    ] {
        assert_eq!(d.state("c"), Some(PoolRollout::AwaitingApproval));
        assert!(written(&d).is_empty(), "{:?}", written(&d));
        assert_eq!(
            (d.phase, d.awaiting_approval, d.awaiting_step.as_deref()),
            (RolloutPhase::AwaitingApproval, Some(1), Some("gate"))
        );
    }
    let open = Settings {
        awaiting_approval: BTreeSet::new(),
        ..settings
    };
    assert_eq!(written(&fleet().decide(&open, 3)), ["c"]);
}
