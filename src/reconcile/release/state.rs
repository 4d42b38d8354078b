//! Reading a HelmRelease's status the way Flux means it: what a pool's
//! release is doing, from the application's point of view.
//!
//! A release counts as ready only when Flux has seen its latest spec: a
//! Ready=True left over from the previous generation says nothing about the
//! spec this controller just wrote.

use serde_json::Value;

use crate::api::naming;

/// What a pool's release is doing, from the application's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ReleaseState {
    Ready,
    /// Flux is working on it, or has not yet seen the latest spec.
    Progressing,
    /// Blocked on something outside the release: its source or a dependency.
    Waiting,
    /// A Helm action failed; Flux may still retry or remediate.
    Failed,
    /// Needs a person: Flux gave up, or the pool's config is wrong.
    Stalled,
    /// Nothing reported yet.
    Unknown,
    /// No node of the pool is Ready; whatever Flux says of its release is
    /// no verdict on the chart.
    Offline,
}

impl ReleaseState {
    /// Its name, as `get` and the status print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Progressing => "Progressing",
            Self::Waiting => "Waiting",
            Self::Failed => "Failed",
            Self::Stalled => "Stalled",
            Self::Unknown => "Unknown",
            Self::Offline => "Offline",
        }
    }
}

/// A classified HelmRelease status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseStatus {
    pub state: ReleaseState,
    pub reason: String,
    pub message: String,
    pub chart_version: Option<String>,
    /// Whether Flux has reconciled the release's current generation.
    pub observed_latest: bool,
    /// Since when it is Ready (RFC 3339), while it is: when the controller
    /// first saw it Ready on its latest spec ([`ready_recorded`](Self::ready_recorded)),
    /// or, until that is marked, when Flux says its Ready condition last
    /// turned True.
    pub ready_since: Option<String>,
    /// The controller's mark of when it first saw the release Ready on its
    /// latest spec ([`naming::ANNOTATION_READY_AT`]), when the release
    /// carries one made since its last write (its `written-at`).
    pub ready_recorded: Option<String>,
    /// The failures of its metric checks over the soak that mark began
    /// ([`naming::ANNOTATION_CHECK_FAILURES`]), as the release keeps them;
    /// only with the mark.
    pub checks_recorded: Option<String>,
    /// Helm has deployed a release of it: a snapshot of Flux's
    /// `status.history` is `deployed` (or `superseded` since). Its chart's
    /// objects were created then, so a later write of it is no first
    /// install. A failed install is not: Helm may have failed before it
    /// created anything (a pre-install hook, a missing CRD), so its
    /// objects whose names do not vary by pool may not exist yet.
    pub deployed_before: bool,
    /// The chart version of the latest release Helm deployed (`deployed`,
    /// or `superseded` since), as Flux's `status.history` gives it. The
    /// objects that version adds exist then, so a later upgrade to it is
    /// not the first: a pool whose update to other values waits on Helm
    /// does not make its version new again (see the rollout's
    /// `new_chart_alone`).
    pub deployed_version: Option<String>,
}

const FAILED_REASONS: &[&str] = &[
    "InstallFailed",
    "UpgradeFailed",
    "TestFailed",
    "RollbackFailed",
    "UninstallFailed",
    "RemediationFailed",
];
const WAITING_REASONS: &[&str] = &["ArtifactFailed", "SourceNotReady", "DependencyNotReady"];

/// Whether `reason` is one Flux only waits on for this release: its
/// chart's source or a dependency (`WAITING_REASONS`), or, for a release
/// of this cluster, Helm's storage that this cluster's API server could
/// not give (`StateError`: read before any Helm action, so nothing of the
/// chart was judged). Read as failed, an API server's restart failed a
/// first install under way and let the next pool install beside it (the
/// fault soak, seed 31337, once the checker judged first installs). For a
/// site cluster the same reason is its own network's or kubeconfig's
/// ([`unreachable_since`]).
fn only_waits(release: &Value, reason: &str) -> bool {
    WAITING_REASONS.contains(&reason)
        || (reason == REASON_STATE_ERROR && release.pointer("/spec/kubeConfig").is_none_or(Value::is_null))
}

/// Reasons Flux gives while it is still working: never a verdict on the spec.
const PROGRESSING_REASONS: &[&str] = &["Progressing", "ProgressingWithRetry"];

/// The release's mark of when the controller first saw it Ready
/// ([`naming::ANNOTATION_READY_AT`]), with the check failures kept beside
/// it, unless it was made before the release's last write: a mark that is
/// no time, or a write time that is none, reads as no mark and no write
/// time respectively.
fn ready_mark(release: &Value) -> Option<(String, Option<String>)> {
    let annotations = release.pointer("/metadata/annotations")?;
    let time = |key: &str| {
        let text = annotations.get(key)?.as_str()?;
        Some((text, text.parse::<k8s_openapi::jiff::Timestamp>().ok()?))
    };
    let (text, marked) = time(naming::ANNOTATION_READY_AT)?;
    let written = time(naming::ANNOTATION_WRITTEN_AT).map(|(_, t)| t);
    let checks = annotations.get(naming::ANNOTATION_CHECK_FAILURES).and_then(Value::as_str);
    written
        .is_none_or(|w| marked >= w)
        .then(|| (text.to_string(), checks.map(str::to_string)))
}

/// The statuses of Helm's history of a release that say Helm deployed it
/// (and, superseded, that it deployed a later one on top).
pub const DEPLOYED_STATUSES: &[&str] = &["deployed", "superseded"];

/// The conditions of Flux's that [`classify`] reads; the release cache
/// keeps these alone. A release with none of them is one helm-controller
/// has not reported on, whatever others it carries.
pub const READ_CONDITIONS: &[&str] = &["Ready", "Stalled", "Reconciling"];

/// Classifies a HelmRelease object as returned by the API server.
pub fn classify(release: &Value) -> ReleaseStatus {
    let generation = release.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = release.pointer("/status/observedGeneration").and_then(Value::as_i64);
    let conditions = release.pointer("/status/conditions").and_then(Value::as_array);
    let find = |kind: &str| conditions.and_then(|c| c.iter().find(|c| c["type"] == kind));
    let ready = find("Ready");
    let ready_generation = ready.and_then(|c| c.get("observedGeneration")).and_then(Value::as_i64);
    let text = |c: &Value, key: &str| c.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    // Whenever a reconcile ends in an error (a failed install or upgrade
    // being retried, but also a missing valuesFrom Secret, a chart that
    // cannot be loaded, a client that cannot be built…) Flux leaves
    // status.observedGeneration behind (at -1 for a release never installed),
    // yet stamps the Ready condition it sets with the generation it tried.
    // So a Ready=False for the current generation is about the current spec,
    // whatever its reason: helm-controller adds reasons over time, and a list
    // of them here would hide every new one as "progressing" forever.
    let failing_now = generation.is_some()
        && ready_generation == generation
        && ready.is_some_and(|c| {
            c["status"] == "False" && !PROGRESSING_REASONS.contains(&text(c, "reason").as_str())
        });
    let observed_latest = failing_now
        || (generation.is_some()
            && observed == generation
            && ready_generation.is_none_or(|g| Some(g) == generation));
    let ready_recorded = ready_mark(release);
    let deployed = latest_deployed(release);
    let status = |state, reason: &str, message: String| ReleaseStatus {
        state,
        reason: reason.to_string(),
        message,
        chart_version: chart_version(release),
        observed_latest,
        ready_since: ready.filter(|c| c["status"] == "True").and_then(|c| {
            let flux = || c.get("lastTransitionTime").and_then(Value::as_str).map(str::to_string);
            let recorded = ready_recorded.as_ref().map(|(at, _)| at.clone());
            recorded.filter(|_| observed_latest).or_else(flux)
        }),
        ready_recorded: ready_recorded.as_ref().map(|(at, _)| at.clone()),
        checks_recorded: ready_recorded.as_ref().and_then(|(_, checks)| checks.clone()),
        deployed_before: deployed.is_some(),
        deployed_version: deployed.and_then(|s| s["chartVersion"].as_str()).map(str::to_string),
    };
    let from = |state, c: &Value| status(state, &text(c, "reason"), text(c, "message"));
    // Flux's Stalled says only that it gave up ("Failed to install after 1
    // attempt(s)"); the Ready condition still holds why.
    let stalled_with_cause = |stalled: &Value, ready: Option<&Value>| {
        let mut message = text(stalled, "message");
        if let Some(cause) = ready.filter(|r| r["status"] == "False").map(|r| text(r, "message")) {
            if !cause.is_empty() && cause != message {
                message = format!("{message}: {cause}");
            }
        }
        status(ReleaseState::Stalled, &text(stalled, "reason"), message)
    };

    let read =
        |c: &Value| c.get("type").and_then(Value::as_str).is_some_and(|t| READ_CONDITIONS.contains(&t));
    if !conditions.is_some_and(|c| c.iter().any(read)) {
        return status(
            ReleaseState::Unknown,
            "NotObserved",
            "helm-controller has not reported on this release yet".into(),
        );
    }
    // A site cluster that does not answer is no verdict on the release:
    // what Helm last did there stands, and nothing is known of it since.
    // Read as failed, a site cut off while its update soaked freed its
    // slot of maxUnavailable, and came back soaking beside the next pool.
    if let Some(ready) = ready.filter(|_| unreachable_since(release).is_some()) {
        return from(ReleaseState::Unknown, ready);
    }
    if let Some(ready) = ready.filter(|_| failing_now) {
        // Reconciling=True beside it only says that Flux retries.
        return match find("Stalled").filter(|c| c["status"] == "True") {
            Some(stalled) => stalled_with_cause(stalled, Some(ready)),
            None if only_waits(release, &text(ready, "reason")) => from(ReleaseState::Waiting, ready),
            None => from(ReleaseState::Failed, ready),
        };
    }
    // A Stalled left from an older generation may be cured by the new spec.
    if !observed_latest {
        let message =
            format!("waiting for helm-controller to reconcile generation {}", generation.unwrap_or_default());
        return status(ReleaseState::Progressing, "Progressing", message);
    }
    if let Some(c) = find("Stalled").filter(|c| c["status"] == "True") {
        return stalled_with_cause(c, ready);
    }
    let Some(ready) = ready else {
        return status(ReleaseState::Unknown, "NotObserved", "the release has no Ready condition yet".into());
    };
    let reason = text(ready, "reason");
    match ready["status"].as_str() {
        Some("True") => from(ReleaseState::Ready, ready),
        Some("False") if FAILED_REASONS.contains(&reason.as_str()) => from(ReleaseState::Failed, ready),
        Some("False") if only_waits(release, &reason) => from(ReleaseState::Waiting, ready),
        _ if find("Reconciling").is_some_and(|c| c["status"] == "True") => {
            from(ReleaseState::Progressing, ready)
        }
        Some("False") => from(ReleaseState::Failed, ready),
        _ => from(ReleaseState::Progressing, ready),
    }
}

/// The reason helm-controller gives when it could not read the release's
/// state from Helm's storage, before any Helm action
/// (`internal/reconcile/atomic_release.go`): "Could not determine release
/// state: failed to retrieve last release from storage: … Get
/// \"https://…\": <error>". That read is the first request a reconcile
/// makes to the site cluster, so a site that does not answer says so
/// here, and only here: a Helm action that runs out of time on a site
/// that answers (a wait, a hook, a chart download from the hub) ends in
/// the same network words but with reason `InstallFailed` or
/// `UpgradeFailed`, or `ArtifactFailed`, and is the chart's failure.
pub const REASON_STATE_ERROR: &str = "StateError";

/// Go's network errors, as a `StateError` message ends with them when the
/// site cluster does not answer. A wrong CA (`x509: …`) or refused
/// credentials are not here: they are the kubeconfig's fault, which no
/// waiting mends, so the site fails.
const UNREACHABLE: &[&str] = &[
    "connect: connection refused",
    "net/http: TLS handshake timeout",
    "Client.Timeout exceeded",
    "i/o timeout",
    "connect: no route to host",
    "connect: network is unreachable",
    "connection reset by peer",
    "context deadline exceeded",
];

/// Since when the site cluster a release installs into has not answered,
/// as its Ready condition says; `None` for a release of this cluster (no
/// `spec.kubeConfig`), one whose site answers, or one whose Helm action
/// failed (whatever its words: see [`REASON_STATE_ERROR`]).
pub fn unreachable_since(release: &Value) -> Option<k8s_openapi::jiff::Timestamp> {
    release.pointer("/spec/kubeConfig")?;
    let conditions = release.pointer("/status/conditions")?.as_array()?;
    let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
    let message = ready["message"].as_str()?;
    let could_not_reach = ready["status"] == "False"
        && ready["reason"] == REASON_STATE_ERROR
        && UNREACHABLE.iter().any(|m| message.contains(m));
    if !could_not_reach {
        return None;
    }
    ready["lastTransitionTime"].as_str()?.parse().ok()
}

/// Since when a release being deleted has waited on a site cluster that
/// does not answer: it carries a deletion time and a `spec.kubeConfig`,
/// is not suspended, and its Ready condition ends in a network error,
/// whatever the reason (`UninstallFailed`, `StateError`,
/// `ConfigFactoryErr`: by then the only Helm action left is the
/// uninstall, and no chart of ours can fail it with those words). From
/// the later of the deletion and the condition's transition: a Ready that
/// was False for another cause before says nothing of the site.
/// helm-controller retries such an uninstall for ever, so the release
/// stays Terminating until someone lets it go (see
/// [`naming::ANNOTATION_UNINSTALL_SKIPPED`](crate::api::naming::ANNOTATION_UNINSTALL_SKIPPED)).
pub fn uninstall_blocked_since(release: &Value) -> Option<k8s_openapi::jiff::Timestamp> {
    let deleted: k8s_openapi::jiff::Timestamp =
        release.pointer("/metadata/deletionTimestamp")?.as_str()?.parse().ok()?;
    release.pointer("/spec/kubeConfig")?;
    if release.pointer("/spec/suspend") == Some(&Value::Bool(true)) {
        return None;
    }
    let conditions = release.pointer("/status/conditions")?.as_array()?;
    let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
    let message = ready["message"].as_str()?;
    if ready["status"] != "False" || !UNREACHABLE.iter().any(|m| message.contains(m)) {
        return None;
    }
    let changed: k8s_openapi::jiff::Timestamp = ready["lastTransitionTime"].as_str()?.parse().ok()?;
    Some(changed.max(deleted))
}

/// The newest entry of Flux's `status.history` that Helm deployed.
fn latest_deployed(release: &Value) -> Option<&Value> {
    release
        .pointer("/status/history")
        .and_then(Value::as_array)?
        .iter()
        .find(|s| DEPLOYED_STATUSES.contains(&s["status"].as_str().unwrap_or_default()))
}

/// The chart version of the latest release Helm made, else the one Flux last tried.
fn chart_version(release: &Value) -> Option<String> {
    release
        .pointer("/status/history/0/chartVersion")
        .or_else(|| release.pointer("/status/lastAttemptedRevision"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[cfg(test)]
mod tests;
