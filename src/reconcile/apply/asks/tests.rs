//! The asker against servers of the tests' own on the loopback, and the
//! query API's answers as they read.

use super::*;
use crate::reconcile::rollout::analysis::Webhook;

/// A gate of the test's own on the loopback: it refuses until told
/// otherwise, and keeps what it was sent.
#[tokio::test]
async fn a_gate_is_posted_the_application_and_its_pools_and_holds_until_a_2xx() {
    use std::sync::{Arc, Mutex};
    let state: Arc<Mutex<(u16, Vec<serde_json::Value>)>> = Arc::new(Mutex::new((403, Vec::new())));
    let seen = state.clone();
    let router = axum::Router::new().route(
        "/approve",
        axum::routing::post(move |body: String| {
            let seen = seen.clone();
            async move {
                let mut s = seen.lock().expect("state");
                s.1.push(serde_json::from_str(&body).expect("a JSON body"));
                let code = axum::http::StatusCode::from_u16(s.0).expect("a status");
                (code, "change freeze until Monday")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}/approve", listener.local_addr().expect("its address"));
    let server = tokio::spawn(async move { axum::serve(listener, router).await.expect("serves") });
    let ask = Ask {
        pool: "east".into(),
        check: "change-freeze".into(),
        query: String::new(),
        webhook: Some(Webhook {
            url: url.clone(),
            cert_secret: None,
        }),
        by: None,
        pools: vec!["east".into()],
        ready_since: Timestamp::UNIX_EPOCH,
    };
    let body = gate_body("edge", "ingress", "abc123", &ask);
    let asker = Asker::default();
    let held = gate(&asker.plain, &url, &body).await;
    assert_eq!(held, Answer::Unanswered("HTTP 403: change freeze until Monday".into()));
    state.lock().expect("state").0 = 200;
    assert_eq!(gate(&asker.plain, &url, &body).await, Answer::Value(200.0));
    let sent = state.lock().expect("state").1.clone();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["application"], serde_json::json!({ "namespace": "edge", "name": "ingress" }));
    assert_eq!(
        (sent[0]["revision"].as_str(), sent[0]["type"].as_str()),
        (Some("abc123"), Some("PreDone"))
    );
    assert_eq!(
        (sent[0]["pool"].as_str(), &sent[0]["pools"]),
        (Some("east"), &serde_json::json!(["east"]))
    );
    server.abort();
}

/// A gate that answers with a redirect to an address of the cluster's
/// (a metadata service, say) holds: the redirect is not followed, and
/// nothing of the page beyond a short first line reaches the status.
#[tokio::test]
async fn a_redirect_is_not_followed_and_an_answer_is_no_more_than_a_short_reason() {
    let followed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = followed.clone();
    let page = format!("first line \u{1b}[31m{}\nsecret: hunter2", "x".repeat(300));
    let router = axum::Router::new()
        .route("/gate", axum::routing::post(|| async { axum::response::Redirect::temporary("/inside") }))
        .route(
            "/inside",
            axum::routing::any(move || {
                seen.store(true, std::sync::atomic::Ordering::SeqCst);
                async { "followed" }
            }),
        )
        .route(
            "/page",
            axum::routing::post(move || {
                let page = page.clone();
                async move { (axum::http::StatusCode::BAD_GATEWAY, page) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let base = format!("http://{}", listener.local_addr().expect("its address"));
    let server = tokio::spawn(async move { axum::serve(listener, router).await.expect("serves") });
    let asker = Asker::default();
    let body = serde_json::json!({});
    let held = gate(&asker.plain, &format!("{base}/gate"), &body).await;
    assert_eq!(held, Answer::Unanswered("HTTP 307".into()));
    assert!(!followed.load(std::sync::atomic::Ordering::SeqCst), "the redirect was followed");
    let Answer::Unanswered(why) = gate(&asker.plain, &format!("{base}/page"), &body).await else {
        panic!("a 502 holds")
    };
    assert!(why.starts_with("HTTP 502: first line \\u{1b}[31mxxx"), "{why}");
    assert!(why.chars().count() <= 100 && !why.contains("hunter2") && !why.contains('\u{1b}'), "{why}");
    server.abort();
}

/// A host `--check-allowed-hosts` does not admit is never connected to.
#[tokio::test]
async fn a_host_outside_the_allowed_ones_is_not_asked() {
    let asker = Asker::new("prometheus.monitoring".parse().expect("a name"));
    let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().expect("a URI")))
        .expect("a client that is never used");
    let why = asker
        .client_for(&client, "edge", "http://169.254.169.254/latest/meta-data", None)
        .await
        .expect_err("refused");
    assert!(why.contains("169.254.169.254 is not among the hosts"), "{why}");
}

#[test]
fn answers_read_as_one_number_no_data_or_why_not() {
    let vector = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1.5,"0.25"]}]}}"#;
    assert_eq!(answer_of(200, vector), Answer::Value(0.25));
    let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1.5,"3"]}}"#;
    assert_eq!(answer_of(200, scalar), Answer::Value(3.0));
    let empty = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    assert_eq!(answer_of(200, empty), Answer::Empty);
    let nan =
        br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#;
    assert!(matches!(answer_of(200, nan), Answer::Value(v) if v.is_nan()));
    let two = br#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1"]},{"value":[1,"2"]}]}}"#;
    assert!(matches!(answer_of(200, two), Answer::Unanswered(why) if why.contains("2 series")));
    let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#;
    assert!(matches!(answer_of(400, bad), Answer::Unanswered(why) if why.contains("bad_data: parse error")));
    assert!(
        matches!(answer_of(502, b"<html>Bad Gateway</html>"), Answer::Unanswered(why) if why.contains("HTTP 502"))
    );
    let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
    assert!(matches!(answer_of(200, matrix), Answer::Unanswered(why) if why.contains("matrix")));
}
