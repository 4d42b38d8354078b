use super::*;
use serde_json::json;

fn hr(generation: i64, observed: i64, conditions: Value) -> Value {
    json!({
        "metadata": { "generation": generation },
        "status": { "observedGeneration": observed, "conditions": conditions,
                    "history": [{ "chartVersion": "1.0.0", "status": "deployed" }] }
    })
}

fn cond(kind: &str, status: &str, reason: &str) -> Value {
    json!({ "type": kind, "status": status, "reason": reason, "message": format!("{reason} msg") })
}

fn state(release: Value) -> ReleaseState {
    classify(&release).state
}

#[test]
fn ready_when_true_and_current() {
    let s = classify(&hr(2, 2, json!([cond("Ready", "True", "UpgradeSucceeded")])));
    assert_eq!(s.state, ReleaseState::Ready);
    assert_eq!(s.reason, "UpgradeSucceeded");
    assert_eq!(s.chart_version.as_deref(), Some("1.0.0"));
    assert!(s.observed_latest);
}

#[test]
fn stale_ready_is_progressing() {
    let s = classify(&hr(3, 2, json!([cond("Ready", "True", "UpgradeSucceeded")])));
    assert_eq!(s.state, ReleaseState::Progressing);
    assert!(!s.observed_latest);
    assert!(s.message.contains("generation 3"));
}

#[test]
fn ready_condition_from_an_older_generation_is_progressing() {
    let mut c = cond("Ready", "True", "UpgradeSucceeded");
    c["observedGeneration"] = json!(1);
    assert_eq!(state(hr(2, 2, json!([c.clone()]))), ReleaseState::Progressing);
    c["observedGeneration"] = json!(2);
    assert_eq!(state(hr(2, 2, json!([c]))), ReleaseState::Ready);
}

#[test]
fn stalled_is_terminal_when_current() {
    let conditions = json!([
        cond("Ready", "False", "InstallFailed"),
        cond("Stalled", "True", "RetriesExceeded")
    ]);
    let s = classify(&hr(2, 2, conditions.clone()));
    assert_eq!(s.state, ReleaseState::Stalled);
    assert_eq!(s.reason, "RetriesExceeded");
    assert_eq!(s.message, "RetriesExceeded msg: InstallFailed msg", "the cause is kept");
    assert_eq!(state(hr(3, 2, conditions)), ReleaseState::Progressing);
}

#[test]
fn stalled_false_is_ignored() {
    let conditions = json!([
        cond("Ready", "True", "InstallSucceeded"),
        cond("Stalled", "False", "x")
    ]);
    assert_eq!(state(hr(1, 1, conditions)), ReleaseState::Ready);
}

#[test]
fn helm_action_failures_are_failed() {
    for reason in FAILED_REASONS {
        let conditions = json!([
            cond("Ready", "False", reason),
            cond("Reconciling", "True", "Progressing")
        ]);
        assert_eq!(state(hr(1, 1, conditions)), ReleaseState::Failed, "{reason}");
    }
}

#[test]
fn a_failure_retried_before_any_success_is_failed_not_progressing() {
    // What helm-controller reports while it retries a failed first install.
    let mut ready = cond("Ready", "False", "InstallFailed");
    ready["observedGeneration"] = json!(1);
    let mut reconciling = cond("Reconciling", "True", "Progressing");
    reconciling["observedGeneration"] = json!(1);
    let s = classify(&hr(1, -1, json!([reconciling.clone(), ready.clone()])));
    assert_eq!(s.state, ReleaseState::Failed);
    assert_eq!(s.message, "InstallFailed msg");
    assert!(s.observed_latest);
    // The same failure for an older generation says nothing of the new spec.
    assert_eq!(state(hr(2, -1, json!([reconciling, ready]))), ReleaseState::Progressing);
}

/// A condition as helm-controller sets it: stamped with the generation it tried.
fn cond_at(kind: &str, status: &str, reason: &str, generation: i64) -> Value {
    let mut c = cond(kind, status, reason);
    c["observedGeneration"] = json!(generation);
    c
}

/// What helm-controller v1.6 reports when a reconcile of the current
/// generation ends in an error before or after any Helm action: Ready=False
/// stamped with the generation, Reconciling=True left from "Fulfilling
/// prerequisites", status.observedGeneration left behind.
#[test]
fn any_ready_false_for_the_current_generation_is_current() {
    let reconciling = |g| cond_at("Reconciling", "True", "Progressing", g);
    #[rustfmt::skip]
    let table: &[(&str, i64, i64, Value, ReleaseState, &str)] = &[
        // (case, generation, status.observedGeneration, conditions, state, reason)
        ("a missing valuesFrom Secret, never installed", 1, -1,
            json!([reconciling(1), cond_at("Ready", "False", "ValuesError", 1)]),
            ReleaseState::Failed, "ValuesError"),
        ("a missing valuesFrom Secret after a good install", 3, 2,
            json!([reconciling(3), cond_at("Ready", "False", "ValuesError", 3)]),
            ReleaseState::Failed, "ValuesError"),
        ("a reason no list here knows", 1, -1,
            json!([reconciling(1), cond_at("Ready", "False", "ChartMutateError", 1)]),
            ReleaseState::Failed, "ChartMutateError"),
        ("the REST client cannot be built", 2, 1,
            json!([cond_at("Ready", "False", "RESTClientError", 2)]),
            ReleaseState::Failed, "RESTClientError"),
        ("the chart artifact cannot be loaded", 1, -1,
            json!([reconciling(1), cond_at("Ready", "False", "ArtifactFailed", 1)]),
            ReleaseState::Waiting, "ArtifactFailed"),
        ("the source is not ready", 1, -1,
            json!([cond_at("Ready", "False", "SourceNotReady", 1)]),
            ReleaseState::Waiting, "SourceNotReady"),
        ("this cluster's API server could not give Helm its storage", 1, -1,
            json!([reconciling(1), cond_at("Ready", "False", "StateError", 1)]),
            ReleaseState::Waiting, "StateError"),
        ("refused for good: Stalled, with Ready's cause", 1, -1,
            json!([cond_at("Ready", "False", "AccessDenied", 1),
                   cond_at("Stalled", "True", "AccessDenied", 1)]),
            ReleaseState::Stalled, "AccessDenied"),
        ("the same error for an older generation says nothing of the new spec", 2, 1,
            json!([reconciling(2), cond_at("Ready", "False", "ValuesError", 1)]),
            ReleaseState::Progressing, "Progressing"),
        ("a progressing reason is no verdict", 2, 1,
            json!([reconciling(2), cond_at("Ready", "False", "ProgressingWithRetry", 2)]),
            ReleaseState::Progressing, "Progressing"),
        ("Ready=Unknown for the current generation is still progressing", 1, -1,
            json!([reconciling(1), cond_at("Ready", "Unknown", "Progressing", 1)]),
            ReleaseState::Progressing, "Progressing"),
    ];
    for (case, generation, observed, conditions, want, reason) in table {
        let s = classify(&hr(*generation, *observed, conditions.clone()));
        assert_eq!((s.state, s.reason.as_str()), (*want, *reason), "{case}");
        let current = !matches!(want, ReleaseState::Progressing);
        assert_eq!(s.observed_latest, current, "{case}");
        if current {
            assert!(s.message.starts_with(&format!("{reason} msg")), "{case}: Flux's message: {}", s.message);
        }
    }
}

#[test]
fn source_and_dependency_problems_are_waiting() {
    for reason in WAITING_REASONS {
        assert_eq!(
            state(hr(1, 1, json!([cond("Ready", "False", reason)]))),
            ReleaseState::Waiting,
            "{reason}"
        );
    }
}

#[test]
fn reconciling_is_progressing() {
    let conditions = json!([
        cond("Ready", "Unknown", "Progressing"),
        cond("Reconciling", "True", "Progressing")
    ]);
    assert_eq!(state(hr(1, 1, conditions)), ReleaseState::Progressing);
    let conditions = json!([
        cond("Ready", "False", "Whatever"),
        cond("Reconciling", "True", "Progressing")
    ]);
    assert_eq!(state(hr(1, 1, conditions)), ReleaseState::Progressing);
}

#[test]
fn ready_unknown_alone_is_progressing() {
    assert_eq!(
        state(hr(1, 1, json!([cond("Ready", "Unknown", "Progressing")]))),
        ReleaseState::Progressing
    );
}

#[test]
fn other_false_reasons_are_failed() {
    assert_eq!(state(hr(1, 1, json!([cond("Ready", "False", "ValuesError")]))), ReleaseState::Failed);
}

#[test]
fn no_status_is_unknown() {
    assert_eq!(state(json!({ "metadata": { "generation": 1 } })), ReleaseState::Unknown);
    assert_eq!(state(hr(1, 1, json!([]))), ReleaseState::Unknown);
    assert_eq!(
        state(hr(1, 1, json!([cond("Reconciling", "True", "Progressing")]))),
        ReleaseState::Unknown
    );
}

#[test]
fn chart_version_falls_back_to_last_attempted() {
    let release = json!({ "metadata": { "generation": 1 }, "status": { "lastAttemptedRevision": "2.0.0" } });
    assert_eq!(classify(&release).chart_version.as_deref(), Some("2.0.0"));
    // An attempted revision is no Helm release: only a snapshot in the history is.
    assert!(!classify(&release).deployed_before);
    let installed = hr(2, 1, json!([{ "type": "Ready", "status": "True", "observedGeneration": 1 }]));
    assert!(classify(&installed).deployed_before);
    // A failed install (a pre-install hook, say) may have created nothing.
    let mut failed = installed.clone();
    failed["status"]["history"] = json!([{ "chartVersion": "1.0.0", "status": "failed" }]);
    assert!(!classify(&failed).deployed_before);
}

/// A release into a site cluster, with helm-controller's Ready
/// condition as it wrote it.
fn remote(status: &str, reason: &str, message: &str) -> Value {
    json!({
        "metadata": { "generation": 2 },
        "spec": { "kubeConfig": { "secretRef": { "name": "site-1-kubeconfig" } } },
        "status": { "observedGeneration": 2, "conditions": [{ "type": "Ready", "status": status,
            "reason": reason, "message": message, "observedGeneration": 2,
            "lastTransitionTime": "2030-01-01T00:00:00Z" }] }
    })
}

/// What helm-controller said, word for word, of a site cluster it
/// could not reach: its API server stopped, frozen, and a listener
/// that never accepts.
const STATE_ERROR: &str = "Could not determine release state: failed to retrieve last release from \
        storage: query: failed to query with labels: Get \"https://127.0.0.1:17743/api/v1/namespaces/apps/\
        secrets?labelSelector=name%3Dapps-strict%2Cowner%3Dhelm\": ";

#[test]
fn a_site_cluster_that_does_not_answer_is_unreachable_since_then() {
    for error in [
        "dial tcp 127.0.0.1:17743: connect: connection refused",
        "net/http: TLS handshake timeout",
        "net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)",
    ] {
        let release = remote("False", "StateError", &format!("{STATE_ERROR}{error}"));
        assert_eq!(
            unreachable_since(&release),
            Some("2030-01-01T00:00:00Z".parse().unwrap()),
            "{error}"
        );
        // No verdict on the release: neither failed nor Ready.
        let status = classify(&release);
        assert_eq!((status.state, status.reason.as_str()), (ReleaseState::Unknown, "StateError"), "{error}");
    }
}

/// What helm-controller says when a Helm action on a site that answers
/// runs out of time: Helm 3's wait, Helm 4's wait (kstatus, one line a
/// resource, then the context's error), a hook, and the chart download
/// from source-controller on the hub. The words of a timeout, but the
/// site answered: a failed install or upgrade, never an unreachable site.
#[test]
fn a_helm_action_that_times_out_on_a_site_that_answers_is_not_unreachable() {
    let helm3_wait = "Helm upgrade failed for release apps/apps-web with chart podinfo@6.7.1: \
            context deadline exceeded";
    let helm4_wait = "Helm install failed for release apps/apps-web with chart podinfo@6.7.1: \
            resource not ready, name: apps-web, kind: Deployment, status: InProgress\n\
            context deadline exceeded";
    let hook = "Helm upgrade failed for release apps/apps-web with chart podinfo@6.7.1: \
            post-upgrade hooks failed: 1 error occurred:\n\t* context deadline exceeded";
    let download = "Could not load chart: failed to download chart from \
            'http://source-controller.flux-system.svc.cluster.local./helmchart/apps/apps-web/podinfo-6.7.1.tgz': \
            Get \"http://source-controller.flux-system.svc.cluster.local./helmchart/apps/apps-web/podinfo-6.7.1.tgz\": \
            context deadline exceeded (Client.Timeout exceeded while awaiting headers)";
    for (reason, message) in [
        ("UpgradeFailed", helm3_wait),
        ("InstallFailed", helm4_wait),
        ("UpgradeFailed", hook),
        ("ArtifactFailed", download),
    ] {
        assert_eq!(unreachable_since(&remote("False", reason, message)), None, "{reason}: {message}");
    }
    // Helm's own words for a cluster it could not reach during an
    // action are still the action's failure: helm-controller's next
    // attempt reads the release state first, and says StateError then.
    let mid_install = "Helm install failed for release apps/apps-web with chart podinfo@6.7.1: \
            Kubernetes cluster unreachable: Get \"https://127.0.0.1:17743/version\": dial tcp \
            127.0.0.1:17743: connect: connection refused";
    assert_eq!(unreachable_since(&remote("False", "InstallFailed", mid_install)), None);
}

/// A site release being deleted, whose uninstall helm-controller
/// tried: `message` is what it said.
fn deleting(reason: &str, message: &str) -> Value {
    let mut release = remote("False", reason, message);
    release["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:05:00Z");
    release
}

#[test]
fn a_site_release_whose_uninstall_cannot_reach_the_site_is_blocked_since_its_deletion() {
    let uninstall = "Helm uninstall failed for release apps/apps-strict with chart gateway@1.0.0: \
            Kubernetes cluster unreachable: Get \"https://127.0.0.1:17743/version\": dial tcp \
            127.0.0.1:17743: connect: connection refused";
    let since = Some("2030-01-01T00:05:00Z".parse().unwrap());
    assert_eq!(uninstall_blocked_since(&deleting("UninstallFailed", uninstall)), since);
    let state = format!("{STATE_ERROR}dial tcp 127.0.0.1:17743: i/o timeout");
    assert_eq!(uninstall_blocked_since(&deleting("StateError", &state)), since);
    // The site stopped answering after the deletion began.
    let mut later = deleting("UninstallFailed", uninstall);
    later["status"]["conditions"][0]["lastTransitionTime"] = json!("2030-01-01T00:07:00Z");
    assert_eq!(uninstall_blocked_since(&later), Some("2030-01-01T00:07:00Z".parse().unwrap()));
}

#[test]
fn a_release_not_deleted_local_suspended_or_failing_otherwise_is_not_blocked() {
    let refused = "Helm uninstall failed: dial tcp 127.0.0.1:17743: connect: connection refused";
    assert_eq!(uninstall_blocked_since(&remote("False", "UninstallFailed", refused)), None);
    let mut local = deleting("UninstallFailed", refused);
    local["spec"].as_object_mut().unwrap().remove("kubeConfig");
    assert_eq!(uninstall_blocked_since(&local), None);
    let mut suspended = deleting("UninstallFailed", refused);
    suspended["spec"]["suspend"] = json!(true);
    assert_eq!(uninstall_blocked_since(&suspended), None);
    let hook = "Helm uninstall failed: pre-delete hook failed: job failed: BackoffLimitExceeded";
    assert_eq!(uninstall_blocked_since(&deleting("UninstallFailed", hook)), None);
    let wrong_ca = "Helm uninstall failed: tls: failed to verify certificate: x509: certificate \
            signed by unknown authority";
    assert_eq!(uninstall_blocked_since(&deleting("UninstallFailed", wrong_ca)), None);
    let mut ready = deleting("UninstallFailed", refused);
    ready["status"]["conditions"][0]["status"] = json!("True");
    assert_eq!(uninstall_blocked_since(&ready), None);
}

#[test]
fn a_release_state_that_times_out_is_unreachable() {
    let release = remote(
        "False",
        "StateError",
        &format!("{STATE_ERROR}context deadline exceeded (Client.Timeout exceeded while awaiting headers)"),
    );
    assert_eq!(unreachable_since(&release), Some("2030-01-01T00:00:00Z".parse().unwrap()));
}

#[test]
fn a_site_cluster_that_answers_wrongly_or_a_broken_chart_is_not_unreachable() {
    let wrong_ca = format!(
        "{STATE_ERROR}tls: failed to verify certificate: x509: certificate signed by unknown authority"
    );
    let schema = "Helm install failed for release apps-bad/apps-bad-badvalues with chart \
            strict-schema@2.0.0: values don't meet the specifications of the schema(s) in the following \
            chart(s):\nstrict-schema:\n- at '/mode': value must be one of 'edge', 'cloud'";
    for (status, reason, message) in [
        ("False", "StateError", wrong_ca.as_str()),
        ("False", "InstallFailed", schema),
        (
            "True",
            "InstallSucceeded",
            "Helm install succeeded for release apps/apps-strict.v1 with chart strict-schema@2.0.0",
        ),
    ] {
        assert_eq!(unreachable_since(&remote(status, reason, message)), None, "{reason}");
    }
    // A release of this cluster: its API server is this controller's own.
    let mut local = remote("False", "StateError", &format!("{STATE_ERROR}connect: connection refused"));
    local["spec"].as_object_mut().unwrap().remove("kubeConfig");
    assert_eq!(unreachable_since(&local), None);
}

/// Of this cluster, a `StateError` is the API server's own trouble (a
/// restart, etcd not ready yet), read before any Helm action: no verdict
/// on the chart, so the release waits, whatever the words. Of a site
/// cluster, words that are no network's (a wrong CA) are its kubeconfig's
/// fault, which no waiting mends.
#[test]
fn helms_storage_this_cluster_could_not_give_is_waited_on_and_a_sites_wrong_ca_fails() {
    let wrong_ca = format!(
        "{STATE_ERROR}tls: failed to verify certificate: x509: certificate signed by unknown authority"
    );
    for message in [
        format!("{STATE_ERROR}connect: connection refused"),
        "etcdserver: leader changed".into(),
    ] {
        let mut local = remote("False", "StateError", &message);
        local["spec"].as_object_mut().unwrap().remove("kubeConfig");
        assert_eq!(state(local), ReleaseState::Waiting, "{message}");
    }
    assert_eq!(state(remote("False", "StateError", &wrong_ca)), ReleaseState::Failed);
}
