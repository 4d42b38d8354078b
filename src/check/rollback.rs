//! A rollback takes back only what took the revision, to where each pool
//! was: a release written rolled back from R (newly so) carried R in its
//! version before, and goes back to the revision that version named as
//! its last done one (`apps.fanout.dev/rollback-revision`); a release
//! that had none (installed by R, or done with nothing before it) is not
//! taken back (docs/rollouts.md, "Automatic rollback").
//!
//! Judged on each write against the version before it, which the watch
//! delivers, but not on a re-list: the version before the gap may not be
//! the one the rollback wrote over (E5).

use serde_json::Value;

use crate::api::naming;

use super::{annotation, Record, Violation};

/// The violation a release's write shows, if any: a rollback of a pool
/// that did not take the revision, or to another than its last done one.
pub(super) fn check_release(record: &Record, previous: Option<&Value>, relisting: bool) -> Vec<Violation> {
    let release = &record.object;
    let Some(from) = annotation(release, naming::ANNOTATION_ROLLED_BACK_FROM) else {
        return Vec::new();
    };
    let rollout = |r: &Value| annotation(r, naming::ANNOTATION_ROLLOUT).map(str::to_string);
    let already = previous.is_some_and(|p| {
        annotation(p, naming::ANNOTATION_ROLLED_BACK_FROM) == Some(from) && rollout(p) == rollout(release)
    });
    if already || relisting {
        return Vec::new();
    }
    let to = annotation(release, naming::ANNOTATION_REVISION);
    let before = previous.and_then(|p| annotation(p, naming::ANNOTATION_REVISION));
    let last_done = previous.and_then(|p| annotation(p, naming::ANNOTATION_ROLLBACK_REVISION));
    let wrong = match (before, last_done) {
        (b, _) if b != Some(from) => Some(format!(
            "its version before carried revision {}, not {from}: it did not take it",
            before.unwrap_or("none (no version before)")
        )),
        (_, None) => Some(format!("it had nothing to go back to (no revision was done on it before {from})")),
        (_, Some(done)) if Some(done) != to => Some(format!(
            "it went back to {}, not to {done}, the last revision it was done with",
            to.unwrap_or("no revision")
        )),
        _ => None,
    };
    wrong
        .map(|why| Violation {
            invariant: super::Invariant::RollbackTakesBack,
            message: format!("{} was written rolled back from revision {from}, but {why}", record.key()),
            objects: vec![record.key().to_string()],
            story: Vec::new(),
        })
        .into_iter()
        .collect()
}
