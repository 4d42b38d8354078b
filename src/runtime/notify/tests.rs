use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::*;

fn app_ref() -> ObjectReference {
    ObjectReference {
        api_version: Some("apps.fanout.dev/v1alpha1".into()),
        kind: Some("NodePoolApplication".into()),
        name: Some("ingress".into()),
        namespace: Some("edge".into()),
        uid: Some("7c3d7f0e-1111-2222-3333-444455556666".into()),
        resource_version: Some("4242".into()),
        ..ObjectReference::default()
    }
}

fn at() -> Timestamp {
    "2026-11-26T09:30:00.123456789Z".parse().unwrap()
}

fn halted() -> Transition {
    Transition {
        warning: true,
        reason: "RolloutHalted".into(),
        action: "Rollout",
        message: "revision 5d2c1f0a: pool \"hz\" failed".into(),
        release: None,
        pool: None,
    }
}

#[test]
fn the_event_is_the_json_flux_event_server_reads() {
    let event = FluxEvent::of(&app_ref(), &halted(), Some("5d2c1f0a"), at(), Some("nodepool-fanout-7d9c-x2"));
    assert_eq!(
        serde_json::to_value(&event).unwrap(),
        json!({
            "involvedObject": {
                "apiVersion": "apps.fanout.dev/v1alpha1",
                "kind": "NodePoolApplication",
                "name": "ingress",
                "namespace": "edge",
                "uid": "7c3d7f0e-1111-2222-3333-444455556666",
                "resourceVersion": "4242"
            },
            "severity": "error",
            "timestamp": "2026-11-26T09:30:00Z",
            "message": "revision 5d2c1f0a: pool \"hz\" failed",
            "reason": "RolloutHalted",
            "metadata": { "apps.fanout.dev/revision": "5d2c1f0a" },
            "reportingController": "nodepool-fanout",
            "reportingInstance": "nodepool-fanout-7d9c-x2"
        })
    );
}

#[test]
fn nothing_empty_is_sent() {
    let event = FluxEvent::of(&app_ref(), &Transition::suspended("r", true), None, at(), None);
    let sent = serde_json::to_value(&event).unwrap();
    assert!(sent.get("metadata").is_some(), "the release is named: {sent}");
    let quiet = Transition {
        release: None,
        ..Transition::suspended("r", true)
    };
    let sent = serde_json::to_value(FluxEvent::of(&app_ref(), &quiet, None, at(), None)).unwrap();
    assert!(sent.get("metadata").is_none(), "{sent}");
    assert!(sent.get("reportingInstance").is_none(), "{sent}");
    assert_eq!(sent["severity"], "info");
}

#[test]
fn a_pools_event_names_the_pool_and_its_release() {
    let event = FluxEvent::of(
        &app_ref(),
        &Transition::apply_failed("hz", "ingress-hz-1a2b", "NameClash", "taken"),
        Some("5d2c1f0a"),
        at(),
        None,
    );
    let keys: Vec<(&str, &str)> = event.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        keys,
        [
            ("apps.fanout.dev/helmrelease", "ingress-hz-1a2b"),
            ("apps.fanout.dev/pool", "hz"),
            ("apps.fanout.dev/revision", "5d2c1f0a"),
        ]
    );
    assert_eq!(event.severity, "error");
}

#[test]
fn metadata_keys_are_of_our_api_group_or_the_event_server_drops_them() {
    use kube::Resource;
    let group = crate::api::NodePoolApplication::group(&());
    assert_eq!(METADATA_PREFIX, format!("{group}/"));
    for key in metadata(Some("r"), Some("p"), Some("h")).keys() {
        assert!(key.starts_with(METADATA_PREFIX), "{key}");
        let name = key.trim_start_matches(METADATA_PREFIX);
        // The event server drops these, and takes `token` out of what it forwards.
        assert!(!["checksum", "digest", "token"].contains(&name), "{key}");
    }
    assert!(metadata(None, None, None).is_empty());
}

#[test]
fn warnings_are_errors_and_the_rest_info() {
    assert_eq!(severity(true), "error");
    assert_eq!(severity(false), "info");
}

#[test]
fn timestamps_are_whole_seconds_in_utc() {
    assert_eq!(timestamp(at()), "2026-11-26T09:30:00Z");
}

#[test]
fn only_what_may_succeed_later_is_retried() {
    use Outcome::*;
    for (answer, expected) in [
        (Answer::Status(202), Verdict::Final(Delivered)),
        (Answer::Status(200), Verdict::Final(Delivered)),
        (Answer::Status(429), Verdict::Final(Duplicate)),
        (Answer::Status(400), Verdict::Final(Refused)),
        (Answer::Status(413), Verdict::Final(Refused)),
        (Answer::Status(404), Verdict::Final(Refused)),
        (Answer::Status(501), Verdict::Final(Refused)),
        (Answer::Status(500), Verdict::Retry),
        (Answer::Status(502), Verdict::Retry),
        (Answer::Status(503), Verdict::Retry),
        (Answer::Unreachable, Verdict::Retry),
    ] {
        assert_eq!(verdict(answer), expected, "{answer:?}");
    }
}

#[test]
fn retries_back_off_and_end() {
    let waits: Vec<Option<Duration>> = (0..5).map(retry_wait).collect();
    let s = Duration::from_secs;
    assert_eq!(waits, [Some(s(1)), Some(s(2)), Some(s(4)), None, None]);
    assert_eq!(RETRIES, 3);
}

#[test]
fn the_address_must_be_plain_http() {
    let ok = parse_address("http://notification-controller.flux-system.svc.cluster.local./").unwrap();
    assert_eq!(ok.host_str(), Some("notification-controller.flux-system.svc.cluster.local."));
    assert!(parse_address("http://127.0.0.1:16458").is_ok());
    for (addr, says) in [
        ("https://notification-controller.flux-system/", "plain HTTP"),
        ("notification-controller:80", "not an http:// URL"),
        ("127.0.0.1:9090", "not a URL"),
        ("", "not a URL"),
    ] {
        let e = parse_address(addr).expect_err(addr).to_string();
        assert!(e.contains(says) && e.contains("--events-addr"), "{addr}: {e}");
    }
}

/// An event server answering each POST with the next of `answers` (the
/// last one ever after), counting them.
async fn event_server(answers: Vec<u16>) -> (reqwest::Url, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let code = answers[n.min(answers.len() - 1)];
            async move { axum::http::StatusCode::from_u16(code).unwrap() }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap()).parse().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, hits)
}

#[tokio::test]
async fn a_5xx_is_tried_again_and_a_duplicate_or_refusal_is_not() {
    let event = FluxEvent::of(&app_ref(), &halted(), Some("5d2c1f0a"), at(), None);
    let http = reqwest::Client::new();
    for (answers, outcome, attempts) in [
        (vec![503, 202], Outcome::Delivered, 2),
        (vec![429], Outcome::Duplicate, 1),
        (vec![400], Outcome::Refused, 1),
    ] {
        let (url, hits) = event_server(answers.clone()).await;
        assert_eq!(deliver(&http, &url, &event).await, outcome, "{answers:?}");
        assert_eq!(hits.load(Ordering::SeqCst), attempts, "{answers:?}");
    }
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_without_waiting() {
    let metrics = Arc::new(Metrics::default());
    // Nothing listens on port 9 of the loopback: every send fails, slowly
    // enough (retries) that the queue fills.
    let notifier = Notifier::start("http://127.0.0.1:9/".parse().unwrap(), metrics.clone());
    let started = std::time::Instant::now();
    for _ in 0..QUEUE_CAPACITY + 10 {
        notifier.notify(&app_ref(), &halted(), None);
    }
    assert!(started.elapsed() < Duration::from_secs(1), "notify waited: {:?}", started.elapsed());
    let dropped = counted(&metrics, "dropped", "error");
    // The task may have taken one off the queue before it filled.
    assert!((9..=10).contains(&dropped), "{dropped} dropped: {}", metrics.encode().unwrap());
    notifier.drain(Duration::from_millis(10)).await;
}

/// An Info Event, as a rollout's progress is reported.
fn progressed() -> Transition {
    Transition {
        warning: false,
        reason: "RolloutProgressed".into(),
        action: "Rollout",
        message: "revision 5d2c1f0a: wave 1 of 3 done".into(),
        release: None,
        pool: None,
    }
}

/// How many notifications `metrics` counted as `result`, of `severity`.
fn counted(metrics: &Metrics, result: &str, severity: &str) -> usize {
    let text = metrics.encode().unwrap();
    let series = format!(r#"nodepool_fanout_notifications_total{{result="{result}",severity="{severity}"}}"#);
    text.lines()
        .filter(|l| l.starts_with(&series))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<usize>().ok())
        .sum()
}

#[tokio::test]
async fn under_a_dead_endpoint_a_warning_is_never_dropped_for_an_info() {
    let metrics = Arc::new(Metrics::default());
    // Nothing listens on port 9 of the loopback: the first event is in
    // its retries (seconds) while the rest queue up.
    let notifier = Notifier::start("http://127.0.0.1:9/".parse().unwrap(), metrics.clone());
    for _ in 0..QUEUE_CAPACITY + 10 {
        notifier.notify(&app_ref(), &progressed(), None);
    }
    for _ in 0..5 {
        notifier.notify(&app_ref(), &halted(), None);
    }
    assert_eq!(counted(&metrics, "dropped", "error"), 0, "{}", metrics.encode().unwrap());
    // The task may have taken one off the queue before it filled.
    let info = counted(&metrics, "dropped", "info");
    assert!((14..=15).contains(&info), "{info} Info dropped: {}", metrics.encode().unwrap());
    notifier.drain(Duration::from_millis(10)).await;
}

#[tokio::test]
async fn a_drain_sends_what_is_queued_and_stops() {
    let (url, hits) = event_server(vec![202]).await;
    let metrics = Arc::new(Metrics::default());
    let notifier = Notifier::start(url, metrics.clone());
    notifier.notify(&app_ref(), &progressed(), None);
    notifier.notify(&app_ref(), &halted(), None);
    notifier.drain(Duration::from_secs(5)).await;
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    assert_eq!((counted(&metrics, "delivered", "info"), counted(&metrics, "delivered", "error")), (1, 1));
    notifier.notify(&app_ref(), &halted(), None);
    assert_eq!(hits.load(Ordering::SeqCst), 2, "nothing is queued once drained");
}
