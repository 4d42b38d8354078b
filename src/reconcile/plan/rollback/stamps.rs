//! What a release carries of the application's history, stamped on it at
//! each write: the revision it was written at, and the revision it would
//! go back to should that one halt under `onFailure: Rollback`. Kept on
//! the release itself, so that a rollback needs no memory of its own and
//! a restarted controller finds where each pool would go back to.
//!
//! The revision a release goes back to is the last revision its pool was
//! done with (Ready on it for `minReadySeconds`), whether or not the whole
//! fleet completed it: a burst of commits supersedes each revision while
//! it soaks, and the pools that were done with one can still go back to
//! it. A release written before stamps held that, or not done with the
//! revision it carries, goes back to the last revision that completed,
//! when that revision completed on it (it was written at it, or before
//! it); else it keeps what it would go back to from before. A release
//! written for the first time has nothing to go back to.

use serde_json::Value;

use crate::api::naming;
use crate::reconcile::history::Recorded;

/// The stamps on one release.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stamps {
    /// The revision it was written at ([`naming::ANNOTATION_REVISION`]).
    pub revision: Option<String>,
    /// Where it goes back to ([`naming::ANNOTATION_ROLLBACK_REVISION`]).
    pub rollback_revision: Option<String>,
    /// The revision a rollback took it back from ([`naming::ANNOTATION_ROLLED_BACK_FROM`]).
    pub rolled_back_from: Option<String>,
    /// The rollout that wrote it, by its number in the history
    /// ([`naming::ANNOTATION_ROLLOUT`]): a rollback of an earlier rollout
    /// of the revision is told from one of this rollout's.
    pub rollout: Option<i64>,
    /// What it read of its pool when written ([`naming::ANNOTATION_POOL_INPUTS`]):
    /// read, never written from here (the build stamps it).
    pub pool_inputs: Option<String>,
    /// Its shard label ([`naming::LABEL_SHARD`]): read, never written
    /// from here (the build labels it).
    pub shard: Option<String>,
}

impl Stamps {
    /// The stamps of a release's metadata.
    pub fn read(metadata: &Value) -> Self {
        let text = |key: &str| metadata.get("annotations")?.get(key)?.as_str().map(str::to_string);
        Self {
            revision: text(naming::ANNOTATION_REVISION),
            rollback_revision: text(naming::ANNOTATION_ROLLBACK_REVISION),
            rolled_back_from: text(naming::ANNOTATION_ROLLED_BACK_FROM),
            rollout: text(naming::ANNOTATION_ROLLOUT).and_then(|n| n.parse().ok()),
            pool_inputs: text(naming::ANNOTATION_POOL_INPUTS),
            shard: (metadata.get("labels").and_then(|l| l.get(naming::LABEL_SHARD)))
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }

    /// Puts the stamps on a release to write. One left out is dropped from
    /// the release by the server-side apply.
    pub fn write(&self, object: &mut Value) {
        let stamps = [
            (naming::ANNOTATION_REVISION, &self.revision),
            (naming::ANNOTATION_ROLLBACK_REVISION, &self.rollback_revision),
            (naming::ANNOTATION_ROLLED_BACK_FROM, &self.rolled_back_from),
        ];
        for (key, value) in stamps {
            if let Some(value) = value {
                object["metadata"]["annotations"][key] = Value::String(value.clone());
            }
        }
        if let Some(rollout) = self.rollout {
            object["metadata"]["annotations"][naming::ANNOTATION_ROLLOUT] =
                Value::String(rollout.to_string());
        }
    }

    /// These stamps, made by the rollout numbered `rollout` in the history.
    pub fn by(self, rollout: Option<i64>) -> Self {
        Self { rollout, ..self }
    }

    /// These stamps, written over the release that carries `before`: one
    /// that carries the same revision, written by an earlier rollout of it
    /// (a pool's own change after the revision completed, see
    /// docs/rollouts.md), has nothing to go back to. The revision before
    /// this write is this same revision, as it rendered from what the pool
    /// no longer is; the one before that completed on it, and a completed
    /// revision is never taken back.
    pub fn over(mut self, before: Option<&Stamps>) -> Self {
        let of_an_earlier_rollout = before.is_some_and(|b| {
            b.rolled_back_from.is_none()
                && b.revision == self.revision
                && b.rollout.is_some_and(|n| Some(n) != self.rollout)
        });
        if of_an_earlier_rollout {
            self.rollback_revision = None;
        }
        self
    }

    /// The stamps of a release written at `revision` over the release that
    /// carries `before` (`None`: a first write), given the history's
    /// `recorded` revisions, the last that completed, and whether the
    /// release was `done` with the revision it carries (Ready on it for
    /// `minReadySeconds`): then that revision is what it goes back to,
    /// whether or not the whole fleet completed it.
    pub fn next(
        before: Option<&Stamps>,
        revision: &str,
        recorded: &[Recorded],
        last_complete: Option<&str>,
        done: bool,
    ) -> Self {
        let is_recorded = |r: &str| recorded.iter().any(|rec| rec.revision == r);
        let rollback_revision = match before {
            None => None,
            // Rolled back, it holds the revision it went back to.
            Some(b) if b.rolled_back_from.is_some() => b.revision.clone(),
            Some(b) if done && b.revision.as_deref().is_some_and(|r| r != revision && is_recorded(r)) => {
                b.revision.clone()
            }
            Some(b) if completed_on(b.revision.as_deref(), recorded, last_complete) => {
                last_complete.map(str::to_string)
            }
            Some(b) => b.rollback_revision.clone(),
        };
        Self {
            revision: Some(revision.to_string()),
            rollback_revision,
            rolled_back_from: None,
            rollout: None,
            pool_inputs: None,
            shard: None,
        }
    }

    /// The stamps of a release taken back from `failed` to `to`.
    pub fn rolled_back(failed: &str, to: &str) -> Self {
        Self {
            revision: Some(to.to_string()),
            rollback_revision: None,
            rolled_back_from: Some(failed.to_string()),
            rollout: None,
            pool_inputs: None,
            shard: None,
        }
    }
}

/// Whether the last complete revision completed on a release written at
/// `written`: written at it or before it. A release with no stamp was
/// written before releases were stamped, and one whose revision the
/// history no longer holds was written long before: both before.
fn completed_on(written: Option<&str>, recorded: &[Recorded], last_complete: Option<&str>) -> bool {
    let Some(last) = last_complete else {
        return false;
    };
    let number = |revision: &str| recorded.iter().find(|r| r.revision == revision).map(|r| r.number);
    match written.and_then(number) {
        None => true,
        Some(written) => number(last).is_some_and(|last| written <= last),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(revision: &str, number: i64) -> Recorded {
        Recorded {
            name: format!("app-{revision}"),
            revision: revision.into(),
            number,
            outcome: None,
            halted_judgement: None,
            halted_because: None,
            chart_version: None,
            created: None,
            rolled_out_at: None,
        }
    }

    fn written(revision: &str) -> Stamps {
        Stamps {
            revision: Some(revision.into()),
            ..Stamps::default()
        }
    }

    #[test]
    fn a_first_write_has_nothing_to_go_back_to() {
        let recorded = [record("a", 1), record("x", 2)];
        let next = Stamps::next(None, "x", &recorded, Some("a"), false);
        assert_eq!(next, written("x"));
    }

    #[test]
    fn a_release_written_at_or_before_the_last_complete_goes_back_to_it() {
        let recorded = [record("old", 1), record("a", 2), record("x", 3)];
        for before in ["old", "a"] {
            let next = Stamps::next(Some(&written(before)), "x", &recorded, Some("a"), false);
            assert_eq!(next.rollback_revision.as_deref(), Some("a"), "written at {before}");
            assert_eq!(next.revision.as_deref(), Some("x"));
        }
        // Unstamped, or of a revision the history forgot: written before.
        for before in [Stamps::default(), written("forgotten")] {
            let next = Stamps::next(Some(&before), "x", &recorded, Some("a"), false);
            assert_eq!(next.rollback_revision.as_deref(), Some("a"));
        }
    }

    #[test]
    fn a_release_written_at_a_revision_that_never_completed_keeps_its_way_back() {
        let recorded = [record("a", 1), record("w", 2), record("x", 3)];
        let at_w = Stamps {
            revision: Some("w".into()),
            rollback_revision: Some("a".into()),
            rolled_back_from: None,
            rollout: None,
            pool_inputs: None,
            shard: None,
        };
        assert_eq!(
            Stamps::next(Some(&at_w), "x", &recorded, Some("a"), false)
                .rollback_revision
                .as_deref(),
            Some("a")
        );
        // Installed at w: no revision completed on it.
        assert_eq!(
            Stamps::next(Some(&written("w")), "x", &recorded, Some("a"), false).rollback_revision,
            None
        );
    }

    #[test]
    fn a_rolled_back_release_goes_back_to_where_it_went() {
        let recorded = [record("a", 1), record("x", 2), record("y", 3)];
        let back = Stamps::rolled_back("x", "a");
        let next = Stamps::next(Some(&back), "y", &recorded, Some("a"), false);
        assert_eq!(next.rollback_revision.as_deref(), Some("a"));
        assert_eq!(next.rolled_back_from, None);
    }

    #[test]
    fn a_release_done_with_its_revision_goes_back_to_it_whatever_the_fleet_completed() {
        let recorded = [record("a", 1), record("w", 2), record("x", 3)];
        let at_w = Stamps {
            revision: Some("w".into()),
            rollback_revision: Some("a".into()),
            rolled_back_from: None,
            rollout: None,
            pool_inputs: None,
            shard: None,
        };
        let next = Stamps::next(Some(&at_w), "x", &recorded, Some("a"), true);
        assert_eq!(next.rollback_revision.as_deref(), Some("w"));
        // Not done with it (failed, or still soaking): what it had before.
        assert_eq!(
            Stamps::next(Some(&at_w), "x", &recorded, Some("a"), false)
                .rollback_revision
                .as_deref(),
            Some("a")
        );
        // A revision the history forgot cannot be rebuilt: not a way back.
        let forgotten = [record("x", 3)];
        assert_eq!(
            Stamps::next(Some(&at_w), "x", &forgotten, None, true).rollback_revision.as_deref(),
            Some("a")
        );
    }

    #[test]
    fn with_no_complete_revision_there_is_nothing_to_go_back_to() {
        let recorded = [record("w", 1), record("x", 2)];
        assert_eq!(Stamps::next(Some(&written("w")), "x", &recorded, None, false).rollback_revision, None);
    }

    #[test]
    fn stamps_are_read_as_they_are_written() {
        let stamps = Stamps {
            revision: Some("a".into()),
            rollback_revision: Some("b".into()),
            rolled_back_from: Some("c".into()),
            rollout: Some(4),
            pool_inputs: None,
            shard: None,
        };
        let mut object = serde_json::json!({ "metadata": { "name": "r" } });
        stamps.write(&mut object);
        assert_eq!(Stamps::read(&object["metadata"]), stamps);
        let mut partial = serde_json::json!({ "metadata": {} });
        written("a").write(&mut partial);
        assert_eq!(partial["metadata"]["annotations"].as_object().map(|m| m.len()), Some(1));
    }
}
