//! maxUnavailable: under `strategy: Progressive`, the pools the rollout
//! has taken down at once never outnumber `maxUnavailable`. A pool is
//! taken down when a write changes its release's spec (its spec hash:
//! a new revision, a rollback, the pool's own change) while the release
//! was Ready for its generation, and is back once Ready for the new one.
//! A release not Ready before its write was unavailable already:
//! docs/rollouts.md lets those start at once, whatever the slots, and so does a
//! new pool; not one that Flux only waits on (its source, its artifact, a
//! dependency), whose workload runs as before (see [`available_before`]).
//! A pool is back once its new generation has read Ready for
//! `minReadySeconds`, counted from the `lastTransitionTime` of the first
//! Ready condition of that generation the checker saw: the controller
//! counts from when it first saw the release Ready (`ready-at`), which is
//! no earlier, so a pool the controller calls done is back here too. A
//! blip out of Ready and back restarts nothing here (a reconcile may not
//! see it); a soaking pool is down (fourth review, exemption E7).
//! Judged at each pool taken down. A pool offline then (its nodes, see
//! [`Nodes`]) counts neither, as docs/rollouts.md says of offline pools under
//! `offlinePools: Skip`: one a bad revision took down and whose link then
//! went down is left as it is while the next revision goes on (found by
//! the sharded fault soak, seed 267378134, as the checker's own fault).
//! Unless it is under way on the revision the write being judged is at:
//! written at it within its `progressDeadline`, with no failure from Flux
//! yet, it comes back still updating and keeps its slot (exemption E6).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::api::naming;

use super::nodes::Nodes;
use super::read::{ready_condition, WAITING_REASONS};
use super::{
    annotation, application_of_release, available_before, ready_now, text, Invariant, Key, Kind, Record,
    Violation,
};

/// The releases each application (namespace, name) has taken down, each
/// with when its new generation first read Ready, once it has.
#[derive(Debug, Default)]
pub(super) struct Updating(BTreeMap<(String, String), BTreeMap<String, Option<Timestamp>>>);

impl Updating {
    pub(super) fn check_release(
        &mut self,
        objects: &BTreeMap<Key, Value>,
        nodes: &Nodes,
        record: &Record,
        previous: Option<&Value>,
    ) -> Vec<Violation> {
        let release = &record.object;
        let Some((namespace, app)) = application_of_release(release) else {
            return Vec::new();
        };
        let namespace = namespace.to_string();
        let key = (namespace.clone(), app.to_string());
        let name = record.key().name;
        let hash = |r: &Value| annotation(r, naming::ANNOTATION_SPEC_HASH).map(str::to_string);
        let rewritten = previous.is_some_and(|p| hash(p) != hash(release));
        let down = self.0.entry(key.clone()).or_default();
        // Deleted (by hand, or pruned), its pool is no update under way:
        // what comes next is a new release, an install.
        let deleting = record.deleted || release.pointer("/metadata/deletionTimestamp").is_some();
        let takes_down = rewritten && !deleting && previous.is_some_and(available_before);
        if takes_down {
            down.insert(name.clone(), None);
        }
        if deleting {
            down.remove(&name);
        }
        if let Some(ready_since) = down.get_mut(&name).filter(|_| ready_now(release)) {
            ready_since.get_or_insert(ready_transition(release).unwrap_or(record.seen));
        }
        let app_key = Key {
            kind: Kind::Application,
            namespace: namespace.clone(),
            name: app.to_string(),
        };
        let Some(application) = objects.get(&app_key) else {
            return Vec::new();
        };
        let min_ready = min_ready(application);
        // A pool taken down is judged at its write (the controller's
        // `written-at`), which a re-list delivers late: the pools back by
        // then are back.
        let at = match takes_down {
            true => annotation(release, naming::ANNOTATION_WRITTEN_AT)
                .and_then(|t| t.parse::<Timestamp>().ok())
                .map_or(record.seen, |written| written.min(record.seen)),
            false => record.seen,
        };
        // Ready only after `at` (a re-list's news), it was down then.
        let soaked = |since: &Option<Timestamp>| {
            since.is_some_and(|since| {
                Duration::try_from(at.duration_since(since)).is_ok_and(|d| d >= min_ready)
            })
        };
        down.retain(|_, since| !soaked(since));
        // Judged where the rollout decides, at a pool it takes down. The
        // count grows there, and where an offline pool comes back still
        // down: the docs let the rollout count it for nothing while it was
        // offline, so what it wrote meanwhile broke nothing (a canary cut
        // off during its update, the next step written meanwhile, the
        // canary back and not Ready yet).
        if !takes_down {
            return Vec::new();
        }
        // Its nodes as they stood when the write was seen. An offline
        // pool under way on the revision this write is at keeps its slot
        // (docs/rollouts.md, "Offline pools"): it comes back still
        // updating (exemption E6, removed).
        let skipped_after = offline_after(application);
        let revision = annotation(release, naming::ANNOTATION_REVISION);
        let deadline = progress_deadline(application);
        let under_way = |r: &Value| {
            let written =
                annotation(r, naming::ANNOTATION_WRITTEN_AT).and_then(|t| t.parse::<Timestamp>().ok());
            revision.is_some()
                && annotation(r, naming::ANNOTATION_REVISION) == revision
                && !failed_now(r)
                && written
                    .is_some_and(|w| Duration::try_from(at.duration_since(w)).is_ok_and(|d| d < deadline))
        };
        let offline = |name: &&String| {
            let release = Key {
                kind: Kind::HelmRelease,
                namespace: namespace.clone(),
                name: (*name).clone(),
            };
            (objects.get(&release).zip(skipped_after))
                .is_some_and(|(r, after)| nodes.offline(r, after, record.seen) && !under_way(r))
        };
        self.judge(application, &key, offline)
    }

    /// A re-list delivered `listed` (one version of each release), to be
    /// judged in resourceVersion order; `objects` holds what was seen
    /// before. A pool taken down that is Ready now on the spec it was seen
    /// with has been Ready since its condition says, and so was back then,
    /// whatever was written after it: its latest version may come later in
    /// that order than a write the gap hid (Flux wrote its status again),
    /// and reading that write first would count it down still.
    pub(super) fn relisted(&mut self, listed: &[Record], objects: &BTreeMap<Key, Value>) {
        let hash = |r: &Value| annotation(r, naming::ANNOTATION_SPEC_HASH).map(str::to_string);
        for record in listed {
            let release = &record.object;
            let Some((namespace, app)) = application_of_release(release) else {
                continue;
            };
            let before = objects.get(&record.key());
            let same_spec = before.is_some_and(|b| hash(b) == hash(release));
            let Some(down) = self.0.get_mut(&(namespace.to_string(), app.to_string())) else {
                continue;
            };
            if let Some(since) = down.get_mut(&record.key().name).filter(|_| same_spec && ready_now(release))
            {
                since.get_or_insert(ready_transition(release).unwrap_or(record.seen));
            }
        }
    }

    fn judge(
        &self,
        application: &Value,
        key: &(String, String),
        offline: impl Fn(&&String) -> bool,
    ) -> Vec<Violation> {
        let Some(limit) = limit(application) else {
            return Vec::new();
        };
        let names: Vec<&str> = self
            .0
            .get(key)
            .into_iter()
            .flat_map(BTreeMap::keys)
            .filter(|n| !offline(n))
            .map(String::as_str)
            .collect();
        let down = names.len();
        if down <= limit {
            return Vec::new();
        }
        vec![Violation {
            invariant: Invariant::MaxUnavailable,
            message: format!(
                "{}/{} has {down} pools taken down at once ({}), over maxUnavailable {limit}",
                key.0,
                key.1,
                names.join(", ")
            ),
            objects: names.iter().map(|n| format!("HelmRelease {}/{n}", key.0)).collect(),
            story: Vec::new(),
        }]
    }
}

/// `minReadySeconds` of the application's rollout (0 unless said).
fn min_ready(application: &Value) -> Duration {
    let seconds = application.pointer("/spec/rollout/minReadySeconds").and_then(Value::as_u64);
    Duration::from_secs(seconds.unwrap_or_default())
}

/// When a release's Ready condition last turned, as Flux records it.
fn ready_transition(release: &Value) -> Option<Timestamp> {
    ready_condition(release)?.get("lastTransitionTime")?.as_str()?.parse().ok()
}

/// How long a pool's nodes must be down before it counts as offline
/// (`offlineAfter`, 1m unless said), when the application skips offline
/// pools (`offlinePools: Skip`, the default); `None` when it includes
/// them: then an offline pool counts like any other.
pub(super) fn offline_after(application: &Value) -> Option<std::time::Duration> {
    let rollout = application.pointer("/spec/rollout");
    if rollout.and_then(|r| text(r, "/offlinePools")) == Some("Include") {
        return None;
    }
    match rollout.and_then(|r| text(r, "/offlineAfter")) {
        None => Some(std::time::Duration::from_secs(60)),
        Some(after) => crate::reconcile::rollout::parse_duration(after),
    }
}

/// `progressDeadline` of the application's rollout (10m unless said).
pub(super) fn progress_deadline(application: &Value) -> Duration {
    let said = application.pointer("/spec/rollout/progressDeadline").and_then(Value::as_str);
    said.and_then(crate::reconcile::rollout::parse_duration)
        .unwrap_or(Duration::from_secs(600))
}

/// Whether Flux's verdict on a release's current generation is a failure:
/// Ready=False for it, for another cause than work under way, a wait on
/// its source or a dependency (see [`available_before`]), or a site that
/// does not answer (`StateError`), which says nothing of the release.
pub(super) fn failed_now(release: &Value) -> bool {
    const UNDER_WAY: [&str; 3] = ["Progressing", "ProgressingWithRetry", "StateError"];
    let no_verdict = |reason: &Value| UNDER_WAY.iter().chain(&WAITING_REASONS).any(|r| reason == *r);
    let generation = release.pointer("/metadata/generation").and_then(Value::as_i64);
    let conditions = release.pointer("/status/conditions").and_then(Value::as_array);
    let stalled =
        conditions.is_some_and(|c| c.iter().any(|c| c["type"] == "Stalled" && c["status"] == "True"));
    let of_generation = release.pointer("/status/observedGeneration").and_then(Value::as_i64) == generation;
    let failed =
        ready_condition(release).is_some_and(|c| c["status"] == "False" && !no_verdict(&c["reason"]));
    of_generation && (failed || stalled)
}

/// `maxUnavailable` of a Progressive rollout, resolved as docs/rollouts.md says
/// (a count, or a percentage of the selected pools rounded down, at least
/// one); `None` for any other strategy.
fn limit(application: &Value) -> Option<usize> {
    let rollout = application.pointer("/spec/rollout")?;
    if rollout.get("strategy").and_then(Value::as_str) != Some("Progressive") {
        return None;
    }
    let selected = application
        .pointer("/status/selectedPools")
        .and_then(Value::as_u64)
        .unwrap_or_default();
    let limit = match rollout.get("maxUnavailable") {
        None | Some(Value::Null) => 1,
        Some(Value::Number(n)) => n.as_u64().unwrap_or(1) as usize,
        Some(Value::String(s)) => match s.strip_suffix('%') {
            Some(percent) => (percent.trim().parse::<u64>().ok()? * selected / 100) as usize,
            None => s.trim().parse().ok()?,
        },
        Some(_) => return None,
    };
    Some(limit.max(1))
}
