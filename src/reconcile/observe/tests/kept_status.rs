//! What the release cache keeps of Flux's status: what planning reads of
//! it, and nothing planning would read otherwise.

use super::*;
use crate::reconcile::fleet;
use crate::reconcile::observe::cached::kept_view;
use crate::reconcile::release::state::{classify, ReleaseStatus};

/// A release's status as the application's status and Events show it:
/// its message cut to the head and tail they show.
fn shown(status: &ReleaseStatus) -> ReleaseStatus {
    let cut = fleet::status::cut(&status.message, fleet::status::MAX_LISTED_MESSAGE);
    ReleaseStatus {
        message: cut,
        ..status.clone()
    }
}

/// `release("gw-hz", …)` of the application `u1` with these conditions.
fn with_conditions(conditions: Value) -> DynamicObject {
    let mut release = release("gw-hz", "edge", Some("u1"));
    release.data["status"]["conditions"] = conditions;
    release
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({ "type": type_, "status": status, "reason": reason, "message": message,
            "observedGeneration": 2, "lastTransitionTime": "2026-11-28T10:00:00Z" })
}

/// A Helm error of `len` bytes, its cause at the end as Go writes it.
fn long_error(len: usize, cause: &str) -> String {
    let head = "Could not determine release state: failed to retrieve last release from storage: ";
    format!("{head}{}{cause}", "x".repeat(len - head.len() - cause.len()))
}

/// Planning classifies the release the cache keeps as it classifies the
/// whole release, for every verdict Flux's conditions can give: Ready,
/// failed, waiting, stalled with its cause, retrying, and a site that
/// does not answer behind a message of kilobytes. The message is the
/// same as far as anyone is shown it.
#[test]
fn the_release_kept_is_classified_as_the_whole_release() {
    let released = condition("Released", "True", "InstallSucceeded", &"Helm install succeeded ".repeat(20));
    let tested = condition("TestSuccess", "True", "TestSucceeded", "Helm test succeeded");
    let shapes = [
        json!([
            condition("Ready", "True", "UpgradeSucceeded", "ok"),
            released.clone(),
            tested
        ]),
        json!([condition(
            "Ready",
            "False",
            "UpgradeFailed",
            &long_error(6_000, ": field is immutable")
        )]),
        json!([
            condition("Ready", "False", "ArtifactFailed", "no chart"),
            released.clone()
        ]),
        json!([
            condition("Ready", "False", "InstallFailed", "timed out waiting for the condition"),
            condition("Stalled", "True", "RetriesExceeded", "Failed to install after 1 attempt(s)"),
            condition("Remediated", "True", "UninstallSucceeded", "uninstalled"),
        ]),
        json!([
            condition("Ready", "Unknown", "Progressing", "upgrading"),
            condition("Reconciling", "True", "Progressing", "upgrading"),
        ]),
        json!([condition(
            "Ready",
            "False",
            "StateError",
            &long_error(4_000, ": dial tcp 10.0.0.1:6443: connect: connection refused")
        )]),
    ];
    for conditions in shapes {
        let whole = with_conditions(conditions.clone());
        let value = serde_json::to_value(&whole).unwrap();
        let kept = kept_view(whole.clone());
        let cached = CachedRelease::from_object(whole);
        assert_eq!(shown(&classify(&kept)), shown(&classify(&value)), "{conditions}");
        let observed = cached.observed.expect("a release of an application is observed");
        assert_eq!(shown(&observed.status), shown(&classify(&value)), "{conditions}");
        assert_eq!(
            crate::reconcile::release::state::unreachable_since(&kept),
            crate::reconcile::release::state::unreachable_since(&value)
        );
    }
}

/// Of Flux's conditions the cache keeps Ready, Stalled and Reconciling,
/// each with what planning reads of it, and a message of kilobytes as
/// its head and its tail, which holds the cause.
#[test]
fn the_cache_keeps_the_conditions_read_and_the_head_and_tail_of_a_long_message() {
    let mut ready = condition("Ready", "False", "UpgradeFailed", &long_error(6_000, ": field is immutable"));
    ready["unknownField"] = json!("dropped");
    let whole = with_conditions(json!([
        ready,
        condition("Released", "False", "UpgradeFailed", &long_error(6_000, ": field is immutable")),
        condition("Stalled", "True", "RetriesExceeded", "Failed to upgrade after 1 attempt(s)"),
        condition("TestSuccess", "True", "TestSucceeded", "ok"),
    ]));
    let kept = kept_view(whole);
    let conditions = kept["status"]["conditions"].as_array().expect("conditions kept");
    let types: Vec<&str> = conditions.iter().filter_map(|c| c["type"].as_str()).collect();
    assert_eq!(types, ["Ready", "Stalled"]);
    let ready = &conditions[0];
    let keys: Vec<&String> = ready.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "lastTransitionTime",
            "message",
            "observedGeneration",
            "reason",
            "status",
            "type"
        ]
    );
    let message = ready["message"].as_str().unwrap();
    assert!(message.len() <= fleet::status::MAX_LISTED_MESSAGE, "{} bytes", message.len());
    assert!(message.starts_with("Could not determine release state"), "{message}");
    assert!(message.ends_with(": field is immutable"), "{message}");
    assert_eq!(conditions[1]["message"], "Failed to upgrade after 1 attempt(s)");
}

/// Whether Helm ever deployed a release, and at which chart version it
/// last did, reads the same from the cache as
/// from the whole release, whatever Helm's history holds: an install
/// under way, a failed upgrade on top of a deployed release, a release
/// superseded, one that only ever failed, none. The cache keeps at most
/// two of Helm's releases.
#[test]
fn whether_helm_ever_deployed_the_release_reads_the_same_from_the_cache() {
    let snapshot = |version: i64, status: &str| {
        json!({ "chartVersion": format!("1.0.{version}"), "version": version, "status": status, "digest": "sha256:…",
                "firstDeployed": "2026-11-28T10:00:00Z", "namespace": "edge", "name": "gw" })
    };
    let histories = [
        json!([]),
        json!([snapshot(1, "pending-install")]),
        json!([snapshot(1, "deployed")]),
        json!([snapshot(2, "pending-upgrade"), snapshot(1, "deployed")]),
        json!([
            snapshot(3, "failed"),
            snapshot(2, "failed"),
            snapshot(1, "superseded")
        ]),
        json!([snapshot(2, "failed"), snapshot(1, "failed")]),
        json!([
            snapshot(4, "deployed"),
            snapshot(3, "superseded"),
            snapshot(2, "superseded")
        ]),
    ];
    let mut deployed = 0;
    let mut versions = std::collections::BTreeSet::new();
    for history in histories {
        let mut whole = with_conditions(json!([condition("Ready", "Unknown", "Progressing", "upgrading")]));
        whole.data["status"]["history"] = history.clone();
        let value = serde_json::to_value(&whole).unwrap();
        let kept = kept_view(whole);
        assert_eq!(classify(&kept).deployed_before, classify(&value).deployed_before, "{history}");
        assert_eq!(classify(&kept).deployed_version, classify(&value).deployed_version, "{history}");
        assert_eq!(
            kept.pointer("/status/history/0/version"),
            value.pointer("/status/history/0/version"),
            "{history}"
        );
        let entries = kept.pointer("/status/history").and_then(Value::as_array).map_or(0, Vec::len);
        assert!(entries <= 2, "{entries} of Helm's releases kept of {history}");
        deployed += usize::from(classify(&value).deployed_before);
        versions.extend(classify(&value).deployed_version);
    }
    assert_eq!(deployed, 4, "the histories cover deployed and never deployed");
    assert_eq!(
        versions.len(),
        2,
        "the histories cover a deployed version latest and one behind failures: {versions:?}"
    );
}

/// A condition of Flux's, drawn: any type the cache keeps or drops, any
/// status, a reason of each kind planning tells apart, a message short or
/// of kilobytes (with an unreachable site's cause, or none), of the
/// release's latest generation or the one before.
fn any_condition() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let types = prop::sample::select(vec![
        "Ready",
        "Released",
        "Stalled",
        "Reconciling",
        "TestSuccess",
        "Remediated",
    ]);
    let statuses = prop::sample::select(vec!["True", "False", "Unknown"]);
    let reasons = prop::sample::select(vec![
        "UpgradeSucceeded",
        "InstallFailed",
        "UpgradeFailed",
        "ArtifactFailed",
        "SourceNotReady",
        "DependencyNotReady",
        "Progressing",
        "ProgressingWithRetry",
        "RetriesExceeded",
        "StateError",
    ]);
    let messages = prop::sample::select(vec![
        "ok".to_string(),
        long_error(3_000, ": field is immutable"),
        long_error(5_000, ": dial tcp 10.0.0.1:6443: connect: connection refused"),
    ]);
    (types, statuses, reasons, messages, 1..=2i64).prop_map(|(type_, status, reason, message, generation)| {
        json!({ "type": type_, "status": status, "reason": reason, "message": message,
                "observedGeneration": generation, "lastTransitionTime": "2026-11-28T10:00:00Z" })
    })
}

/// One of Helm's releases as Flux's history lists it, drawn.
fn any_snapshot() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let statuses = prop::sample::select(vec![
        "deployed",
        "superseded",
        "failed",
        "pending-install",
        "pending-upgrade",
        "uninstalled",
    ]);
    (1..6i64, statuses, prop::sample::select(vec!["1.0.0", "1.1.0"])).prop_map(|(version, status, chart)| {
        json!({ "chartVersion": chart, "version": version, "status": status, "digest": "sha256:…",
                "firstDeployed": "2026-11-28T10:00:00Z", "namespace": "edge", "name": "gw" })
    })
}

proptest::proptest! {
    /// Whatever Flux's status holds together (its conditions, Helm's
    /// history, the generation it observed) and whatever the controller's
    /// marks say, planning reads the release the cache keeps as it reads
    /// the whole release. Written after a trim of Helm's history dropped
    /// each release's status, and every pool read as never installed: a
    /// hand-written shape per case had covered the conditions alone.
    #[test]
    fn any_release_kept_is_read_as_the_whole_release(
        conditions in proptest::collection::vec(any_condition(), 0..5),
        history in proptest::collection::vec(any_snapshot(), 0..5),
        observed in proptest::option::of(1..=2i64),
        ready_at in proptest::option::of(proptest::sample::select(vec!["2026-11-28T09:00:00Z", "2026-11-28T11:00:00Z"])),
    ) {
        let mut whole = with_conditions(json!(conditions));
        whole.data["status"]["history"] = json!(history);
        match observed {
            Some(generation) => whole.data["status"]["observedGeneration"] = json!(generation),
            None => drop(whole.data["status"].as_object_mut().map(|s| s.remove("observedGeneration"))),
        }
        let annotations = whole.metadata.annotations.get_or_insert_with(Default::default);
        annotations.insert(crate::api::naming::ANNOTATION_WRITTEN_AT.into(), "2026-11-28T10:00:00Z".into());
        if let Some(at) = ready_at {
            annotations.insert(crate::api::naming::ANNOTATION_READY_AT.into(), at.into());
            annotations.insert(crate::api::naming::ANNOTATION_CHECK_FAILURES.into(), "latency=1".into());
        }
        let value = serde_json::to_value(&whole).unwrap();
        let kept = kept_view(whole.clone());
        proptest::prop_assert_eq!(shown(&classify(&kept)), shown(&classify(&value)));
        let observed = CachedRelease::from_object(whole).observed.expect("a release of an application is observed");
        let read = ObservedRelease::from_value(&value).expect("the whole release reads");
        proptest::prop_assert_eq!(shown(&observed.status), shown(&read.status));
        proptest::prop_assert_eq!(observed.helm_revision, read.helm_revision);
        proptest::prop_assert_eq!(observed.unreachable_since, read.unreachable_since);
        proptest::prop_assert_eq!(&observed.stamps, &read.stamps);
        proptest::prop_assert_eq!(observed.written_at.as_ref().map(|w| &w.text), read.written_at.as_ref().map(|w| &w.text));
    }
}
