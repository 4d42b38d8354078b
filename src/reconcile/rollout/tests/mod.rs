//! Unit tests of `rollout`.

mod failures;
mod first_install;
mod new_chart;
mod offline;
mod pacing;
mod properties;
mod rollback;
mod settings;
mod waves;

use super::*;
use crate::api::Rollout;
use crate::reconcile::release::state::{ReleaseState, ReleaseStatus};
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
        ready_recorded: None,
        checks_recorded: None,
        deployed_before: false,
        deployed_version: None,
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
                window_closes: None,
                release: match kind {
                    Kind::Missing => Release::Missing,
                    Kind::Behind(i) => Release::Behind(&self.statuses[*i]),
                    Kind::Current(i, written) => Release::Current {
                        status: &self.statuses[*i],
                        written: written.map(ts),
                        resumed: None,
                    },
                },
                stamp: self.stamps.get(name).copied().unwrap_or_default(),
                suspended: self.suspended.contains(name),
                refused_before: self.refused.contains(name),
                last_written: self.last_written.get(name).map(|s| ts(*s)),
                analysis: None,
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
