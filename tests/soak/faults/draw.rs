//! Which fault comes next, drawn from the seed's generator.
use super::*;

impl World {
    /// The next fault, from the seed's generator.
    ///
    /// The fleet hovers around its size: a pool is deleted only while more
    /// than `POOLS` exist, and taken out of the selection or cut off only
    /// while more than `IN_PLAY` are selected and reachable. A soak whose
    /// pools dwindle to one tests nothing a rollout does between pools.
    pub fn draw(&mut self) -> Fault {
        let app = self.rng.random_range(0..APPS.len());
        let live: Vec<usize> =
            (0..self.pools.len()).filter(|&i| !self.deleted.contains(&self.pools[i])).collect();
        let pool = match live.is_empty() {
            true => 0,
            false => live[self.rng.random_range(0..live.len())],
        };
        let name = self.pools.get(pool).cloned().unwrap_or_default();
        let in_play = (live.iter().map(|&i| &self.pools[i]))
            .filter(|p| !self.left.contains(*p) && !self.cut.contains(*p))
            .count();
        let release = self.rng.random_range(0..64);
        if live.is_empty() {
            return self.add_pool(false);
        }
        match self.rng.random_range(0..100) {
            // Sharded, half of these move an application instead.
            0..4 if self.sharded() => Fault::KillController {
                shard: Some(self.shard_of[app]),
            },
            0..8 if self.sharded() => Fault::MoveShard {
                app,
                to: 1 - self.shard_of[app],
            },
            0..8 => Fault::KillController { shard: None },
            8..26 => {
                let level = self.rng.random_range(0..1000);
                let window = self.window_with_change(app, &live);
                // Every fourth good change drawn, unless it closes a window,
                // undoes the application's last change instead: decided by
                // the count, so that the seeds' draws stay as they were.
                match (window, self.good_changes.is_multiple_of(4)) {
                    (None, true) => Fault::Undo { app },
                    _ => Fault::GoodChange { app, level, window },
                }
            }
            26..34 => Fault::BadChange { app },
            34..40 => Fault::Suspend {
                app,
                suspended: self.manifests[app]["spec"]["suspend"] != true,
            },
            40..46 => Fault::Pause {
                app,
                paused: self.manifests[app]["spec"]["rollout"]["paused"] != true,
            },
            46..54 => {
                let broken = self.rng.random_bool(0.3);
                self.add_pool(broken)
            }
            54..58 if live.len() > POOLS => Fault::DeletePool { pool },
            54..58 => self.add_pool(false),
            58..66 => Fault::Relabel {
                pool,
                leaves: !self.left.contains(&name) && in_play > IN_PLAY,
            },
            66..75 => Fault::CutNode {
                pool,
                cut: !self.cut.contains(&name) && in_play > IN_PLAY,
            },
            75..80 => Fault::Window {
                app,
                pool,
                closed: !self.closed[app].contains(&name),
            },
            80..86 => Fault::HandEdit { release },
            86..90 => Fault::DeleteRelease { release },
            90..95 => Fault::Approve {
                stale: self.rng.random_bool(0.3),
            },
            _ => Fault::Restart {
                component: STOPPED[self.rng.random_range(0..STOPPED.len())],
                down: Duration::from_secs(self.rng.random_range(1..15)),
            },
        }
    }

    /// The pool whose window the good change being drawn closes, if any.
    /// The first good change and every third after it close one: the
    /// first pool made that is still there, selected, reachable, not broken
    /// and whose window for `app` is not closed yet. A change meeting a
    /// window closed a while before it is rare in a draw of a few minutes
    /// (the window faults are few, and half of them open), and only it
    /// shows a write outside the windows. Decided by the count, not
    /// drawn, so that the seeds' draws stay as they were.
    fn window_with_change(&mut self, app: usize, live: &[usize]) -> Option<usize> {
        self.good_changes += 1;
        if self.good_changes % 3 != 1 {
            return None;
        }
        live.iter().copied().find(|&i| {
            let name = &self.pools[i];
            !self.left.contains(name)
                && !self.cut.contains(name)
                && !self.broken.contains(name)
                && !self.closed[app].contains(name)
        })
    }

    /// A pool added. Every second pool added whole finds the name of one
    /// application's release taken (each application in turn): decided by
    /// the count, not drawn, so that the seeds' draws stay as they were.
    fn add_pool(&mut self, broken: bool) -> Fault {
        let claimed = match broken {
            true => None,
            false => {
                self.added_whole += 1;
                self.added_whole.is_multiple_of(2).then_some(self.added_whole / 2 % APPS.len())
            }
        };
        Fault::AddPool { broken, claimed }
    }
}
