//! What the checker reads: one version of one object as a watch
//! delivered it, and where that object is.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::read::{self, annotation, text};

/// The kinds of object the checker reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    HelmRelease,
    Application,
}

/// Where an object is: its kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::HelmRelease => "HelmRelease",
            Kind::Application => "NodePoolApplication",
        };
        write!(f, "{kind} {}/{}", self.namespace, self.name)
    }
}

/// One version of one object as a watch delivered it.
#[derive(Debug, Clone)]
pub struct Record {
    pub seen: Timestamp,
    pub kind: Kind,
    /// The object as the API server serves it; for a deletion, its last state.
    pub object: Value,
    pub deleted: bool,
}

impl Record {
    pub fn key(&self) -> Key {
        Self::key_of(self.kind, &self.object)
    }

    pub fn key_of(kind: Kind, object: &Value) -> Key {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
        Key {
            kind,
            namespace: text("/metadata/namespace").to_string(),
            name: text("/metadata/name").to_string(),
        }
    }

    /// A line for a violation's story: when, what, and the version.
    pub(super) fn line(&self) -> String {
        let version = self.object.pointer("/metadata/resourceVersion").and_then(Value::as_str);
        let generation = self.object.pointer("/metadata/generation").and_then(Value::as_i64);
        let what = match self.deleted {
            true => "deleted",
            false => "seen",
        };
        // A release's Ready condition and revision, which most rules read.
        let state = match self.kind {
            Kind::HelmRelease => read::ready_condition(&self.object).map(|c| {
                let field = |key: &str| c[key].as_str().unwrap_or("?").to_string();
                let revision =
                    annotation(&self.object, crate::api::naming::ANNOTATION_REVISION).unwrap_or("?");
                format!(", Ready {} {}, revision {revision}", field("status"), field("reason"))
            }),
            // An application's rollout as its status reads it.
            Kind::Application => {
                let field = |pointer: &str| text(&self.object, pointer).unwrap_or("?").to_string();
                let observed = self.object.pointer("/status/observedGeneration").and_then(Value::as_i64);
                Some(format!(
                    ", observed {}, rollout {} {} ({})",
                    observed.map_or("?".to_string(), |g| g.to_string()),
                    field("/status/rollout/phase"),
                    field("/status/rollout/revision"),
                    field("/status/rollout/message").chars().take(200).collect::<String>()
                ))
            }
        };
        format!(
            "{} {} {what} at resourceVersion {} generation {}{}",
            self.seen,
            self.key(),
            version.unwrap_or("?"),
            generation.map_or("?".to_string(), |g| g.to_string()),
            state.unwrap_or_default()
        )
    }
}
