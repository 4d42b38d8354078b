//! A revision that comes back is rolled out afresh: each rollout has its
//! own number in the application's history, the next after the newest,
//! and a revision that comes back (a change undone, then redone) is
//! renumbered rather than read by its earlier rollout's record
//! (docs/rollouts.md, "A revision that comes back"). So the number the
//! status gives the rollout under way (`status.rollout.number`) never goes
//! down while the application lives: a status that reads a lower number
//! than one it read before reads an earlier rollout's record, with its
//! outcome and its approvals.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{application_key, text, Invariant, Kind, Record, Violation};

/// The highest rollout number each application (namespace, name) has
/// read, with the revision it read it for and the application's uid: an
/// application deleted and made again starts its history afresh.
#[derive(Debug, Default)]
pub(super) struct Numbers(BTreeMap<(String, String), Highest>);

#[derive(Debug)]
struct Highest {
    uid: Option<String>,
    number: i64,
    revision: String,
}

impl Numbers {
    pub(super) fn read_application(&mut self, record: &Record) -> Vec<Violation> {
        debug_assert_eq!(record.kind, Kind::Application);
        let app = &record.object;
        let key = application_key(app);
        if record.deleted {
            self.0.remove(&key);
            return Vec::new();
        }
        let number = app.pointer("/status/rollout/number").and_then(Value::as_i64);
        let (Some(revision), Some(number)) = (text(app, "/status/rollout/revision"), number) else {
            return Vec::new();
        };
        let uid = text(app, "/metadata/uid").map(str::to_string);
        let highest = self.0.get(&key).filter(|h| h.uid == uid);
        let violation = highest.filter(|h| number < h.number).map(|h| Violation {
            invariant: Invariant::Afresh,
            message: format!(
                "{}/{} reads revision {revision} as rollout {number}, after it read rollout {} (revision {}): \
                 an earlier rollout's record read again",
                key.0, key.1, h.number, h.revision
            ),
            objects: vec![format!("NodePoolApplication {}/{}", key.0, key.1)],
            story: Vec::new(),
        });
        if highest.is_none_or(|h| number > h.number) {
            let revision = revision.to_string();
            self.0.insert(
                key,
                Highest {
                    uid,
                    number,
                    revision,
                },
            );
        }
        violation.into_iter().collect()
    }
}
