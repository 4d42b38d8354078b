//! The first install goes alone: on pools of one cluster, until a release
//! of an application is Ready (or Helm has deployed one), no two of its
//! releases install at once, as docs/isolation.md says ("One instance per
//! pool, really"). Installs that run together each find nothing of a
//! chart's objects whose names do not vary by pool, and each creates them.
//!
//! Judged at each release created while the application has none Ready or
//! deployed: another release of it still installing then is a violation.
//! One installing is neither judged by Flux (Ready=False for its own
//! generation, not for work under way, or Stalled) nor past its
//! `progressDeadline` from its write, nor on a pool offline past
//! `offlineAfter` (such a pool holds no one back), nor suspended, and not
//! deleted. A release of a site cluster (`spec.kubeConfig`) shares no
//! object with another pool's, and is judged by nothing here.

use std::collections::BTreeMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::max_unavailable::{failed_now, offline_after, progress_deadline};
use super::nodes::Nodes;
use super::{
    annotation, application_key, application_of_release, ready_now, Invariant, Key, Record, Violation,
};
use crate::api::naming;
use crate::reconcile::release::state::DEPLOYED_STATUSES;

/// One application's first install, while it lasts.
#[derive(Debug, Default)]
struct FirstInstall {
    /// A release of it was Ready, or Helm deployed one: nothing is judged
    /// again until the application is deleted.
    installed: bool,
    /// Its releases created so far, by name: each one's latest version.
    releases: BTreeMap<String, Value>,
}

/// The first installs, by application (namespace, name).
#[derive(Debug, Default)]
pub(super) struct FirstInstalls {
    by_application: BTreeMap<(String, String), FirstInstall>,
    /// While a re-list of the releases is judged (in resourceVersion
    /// order), the version each listed release reaches, by (namespace,
    /// name), until it is read: one listed at a later version than a
    /// release created in the gap changed in the gap, and how it stood
    /// when the other was created is unknown (E5), so it is no evidence.
    listed_later: BTreeMap<(String, String), u64>,
}

/// Whether Helm ever deployed the release: an entry of Flux's
/// `status.history` that was deployed.
fn deployed(release: &Value) -> bool {
    let history = release.pointer("/status/history").and_then(Value::as_array);
    history.is_some_and(|h| {
        h.iter()
            .any(|entry| DEPLOYED_STATUSES.contains(&entry["status"].as_str().unwrap_or_default()))
    })
}

/// Of a site cluster: installed there through its kubeconfig.
fn of_a_site_cluster(release: &Value) -> bool {
    release.pointer("/spec/kubeConfig").is_some_and(|c| !c.is_null())
}

impl FirstInstalls {
    /// A deleted application forgets its first install: made again, it
    /// installs anew.
    pub(super) fn read_application(&mut self, record: &Record) {
        if record.deleted {
            self.by_application.remove(&application_key(&record.object));
        }
    }

    /// A re-list of the releases is about to be judged: each one's listed
    /// version, until it is read.
    /// A release the listing no longer holds went in the gap: it installs
    /// no more, though its deletion is read only after the listing (found
    /// in review: a release that left in a gap was judged as installing
    /// beside the one created after it went).
    pub(super) fn relisting(&mut self, listed: &[Record]) {
        self.listed_later = listed
            .iter()
            .filter_map(|r| {
                let namespace = super::text(&r.object, "/metadata/namespace")?.to_string();
                let name = super::text(&r.object, "/metadata/name")?.to_string();
                Some(((namespace, name), super::halt::resource_version(&r.object)?))
            })
            .collect();
        let listed_later = &self.listed_later;
        for ((namespace, _), state) in &mut self.by_application {
            state
                .releases
                .retain(|name, _| listed_later.contains_key(&(namespace.clone(), name.clone())));
        }
    }

    /// Reads one record of a release; the violation it shows when it is a
    /// release created while another of its application still installs.
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
        let name = super::text(release, "/metadata/name").unwrap_or_default().to_string();
        self.listed_later.remove(&(namespace.to_string(), name.clone()));
        let version = super::halt::resource_version(release).unwrap_or_default();
        let listed_later = &self.listed_later;
        let known_then = |other: &str| {
            listed_later
                .get(&(namespace.to_string(), other.to_string()))
                .is_none_or(|v| *v <= version)
        };
        let state = self.by_application.entry((namespace.to_string(), app.to_string())).or_default();
        if state.installed {
            return Vec::new();
        }
        if ready_now(release) || deployed(release) {
            state.installed = true;
            state.releases.clear();
            return Vec::new();
        }
        if record.deleted {
            state.releases.remove(&name);
            return Vec::new();
        }
        // First seen with this uid (the checker drops an earlier version
        // of another uid): made now, or while the watch was away.
        let created = previous.is_none();
        let judged = created && !of_a_site_cluster(release) && !suspended(release);
        let application = objects.get(&Key {
            kind: super::Kind::Application,
            namespace: namespace.to_string(),
            name: app.to_string(),
        });
        let mut found = Vec::new();
        if let (true, Some(application)) = (judged, application) {
            let installing: Vec<(&String, &Value)> = state
                .releases
                .iter()
                .filter(|(other, _)| **other != name && known_then(other))
                .filter(|(_, other)| still_installing(other, application, nodes, record.seen))
                .collect();
            if !installing.is_empty() {
                found.push(Violation {
                    invariant: Invariant::FirstInstallAlone,
                    message: format!(
                        "{} was created while {namespace}/{app} had no release Ready or deployed and {} \
                         still installed: a first install goes to one pool alone",
                        record.key(),
                        installing
                            .iter()
                            .map(|(n, r)| format!("{namespace}/{n} ({})", how_it_stands(r)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    objects: std::iter::once(record.key().to_string())
                        .chain(installing.iter().map(|(n, _)| format!("HelmRelease {namespace}/{n}")))
                        .collect(),
                    story: Vec::new(),
                });
            }
        }
        if !of_a_site_cluster(release) {
            state.releases.insert(name, release.clone());
        }
        found
    }
}

/// How a release installing stands, for the violation's reader: its Ready
/// condition and the time it was written.
fn how_it_stands(release: &Value) -> String {
    let ready = super::read::ready_condition(release);
    let field = |key: &str| ready.and_then(|c| c[key].as_str()).unwrap_or("none");
    let written = annotation(release, naming::ANNOTATION_WRITTEN_AT).unwrap_or("never");
    format!("Ready {} {}, written at {written}", field("status"), field("reason"))
}

fn suspended(release: &Value) -> bool {
    release.pointer("/spec/suspend") == Some(&Value::Bool(true))
}

/// Whether a release of a first install still installs at `at`: not
/// suspended, not judged failed by Flux, written less than the
/// application's `progressDeadline` ago, and not on a pool offline past
/// `offlineAfter`. A second of slack on the deadline: the controller's
/// clock writes `written-at`, the API server's stamps what follows.
fn still_installing(release: &Value, application: &Value, nodes: &Nodes, at: Timestamp) -> bool {
    if suspended(release) || failed_now(release) {
        return false;
    }
    let written =
        annotation(release, naming::ANNOTATION_WRITTEN_AT).and_then(|t| t.parse::<Timestamp>().ok());
    let deadline = SignedDuration::try_from(progress_deadline(application)).unwrap_or_default();
    let past_deadline = written
        .and_then(|w| w.checked_add(deadline).ok())
        .is_some_and(|due| due <= at.checked_add(SignedDuration::from_secs(1)).unwrap_or(at));
    let offline = offline_after(application).is_some_and(|after| nodes.offline(release, after, at));
    !past_deadline && !offline
}
