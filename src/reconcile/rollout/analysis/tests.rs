use super::*;
use proptest::prelude::*;

use crate::api::{Analysis, MetricCheck, OnEmpty, PrometheusSource};

const REVISION: &str = "abc123";

fn check(name: &str, query: &str, max: Option<f64>) -> MetricCheck {
    MetricCheck {
        name: name.into(),
        query: query.into(),
        min: None,
        max,
        interval: Some("10s".into()),
        failure_limit: None,
        on_empty: None,
        by: None,
    }
}

fn analysis(checks: Vec<MetricCheck>) -> Analysis {
    Analysis {
        prometheus: Some(PrometheusSource {
            address: "http://prometheus:9090".into(),
            secret_ref: None,
            cert_secret_ref: None,
        }),
        checks,
        wave_checks: Vec::new(),
        webhooks: Vec::new(),
    }
}

fn error_rate() -> Checks {
    Checks::new(&analysis(vec![check(
        "error-rate",
        r#"sum(rate(errors_total{pool="{{pool.name}}"}[1m]))"#,
        Some(0.05),
    )]))
    .expect("reads")
}

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("time")
}

fn pool(name: &str) -> Pool {
    Pool {
        name: name.into(),
        labels: crate::pools::Labels::from_iter([("region".to_string(), "eu \"west\"".to_string())]),
        ..Default::default()
    }
}

/// Records of `answers` (seconds after the soak began, answer) for every check of `checks`.
fn records(checks: &Checks, answers: &[(i64, Answer)]) -> PoolRecords {
    let mut records = PoolRecords {
        revision: REVISION.into(),
        ready_since: Some(t(0)),
        ..Default::default()
    };
    for c in &checks.checks {
        let record = records.checks.entry(c.name.clone()).or_default();
        for (at, answer) in answers {
            record.record(c, t(*at), answer.clone());
        }
    }
    records
}

const DEADLINE: Duration = Duration::from_secs(600);

fn judge(checks: &Checks, records: &PoolRecords, soak_end: i64, now: i64) -> Verdict {
    checks.judge(REVISION, Some(records), t(0), t(soak_end), DEADLINE, t(now))
}

#[test]
fn a_value_within_bounds_at_the_soaks_end_passes() {
    let checks = error_rate();
    let r = records(
        &checks,
        &[
            (0, Answer::Value(0.01)),
            (10, Answer::Value(0.0)),
            (30, Answer::Value(0.02)),
        ],
    );
    assert_eq!(judge(&checks, &r, 30, 30), Verdict::Passed);
}

#[test]
fn a_value_out_of_bounds_fails_the_pool_naming_check_value_and_bound() {
    let checks = error_rate();
    let r = records(&checks, &[(0, Answer::Value(0.01)), (10, Answer::Value(0.4))]);
    match judge(&checks, &r, 60, 10) {
        Verdict::Failed(message) => {
            assert!(message.contains("error-rate"), "{message}");
            assert!(message.contains("0.4"), "{message}");
            assert!(message.contains("max 0.05"), "{message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn failures_up_to_the_limit_are_tolerated_but_do_not_pass() {
    let mut spec = check("error-rate", "errors_total", Some(0.05));
    spec.failure_limit = Some(1);
    let checks = Checks::new(&analysis(vec![spec])).expect("reads");
    let r = records(&checks, &[(0, Answer::Value(0.01)), (30, Answer::Value(0.9))]);
    // One failure is tolerated, but the last answer at the soak's end is
    // out of bounds: asked again, not passed.
    assert!(matches!(judge(&checks, &r, 30, 30), Verdict::Asking { .. }));
    let mut r = r;
    let record = r.checks.get_mut("error-rate").expect("record");
    record.record(&checks.checks[0], t(40), Answer::Value(0.0));
    assert_eq!(judge(&checks, &r, 30, 40), Verdict::Passed);
    record_again(&checks, &mut r, 50, Answer::Value(0.9));
    assert!(matches!(judge(&checks, &r, 30, 50), Verdict::Failed(_)));
}

fn record_again(checks: &Checks, r: &mut PoolRecords, at: i64, answer: Answer) {
    let record = r.checks.get_mut(&checks.checks[0].name).expect("record");
    record.record(&checks.checks[0], t(at), answer);
}

#[test]
fn an_empty_answer_fails_unless_told_otherwise() {
    let checks = error_rate();
    let r = records(&checks, &[(0, Answer::Empty)]);
    match judge(&checks, &r, 30, 0) {
        Verdict::Failed(message) => assert!(message.contains("no data"), "{message}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    let mut spec = check("error-rate", "errors_total", Some(0.05));
    spec.on_empty = Some(OnEmpty::Pass);
    let checks = Checks::new(&analysis(vec![spec])).expect("reads");
    let r = records(&checks, &[(0, Answer::Empty), (30, Answer::Empty)]);
    assert_eq!(judge(&checks, &r, 30, 30), Verdict::Passed);
}

#[test]
fn an_unanswered_check_waits_then_fails_at_the_deadline_and_never_passes() {
    let checks = error_rate();
    let down = || Answer::Unanswered("connection refused".into());
    let r = records(&checks, &[(0, down()), (10, down()), (30, down())]);
    match judge(&checks, &r, 30, 30) {
        Verdict::Asking { message, .. } => assert!(message.contains("connection refused"), "{message}"),
        other => panic!("expected to wait, got {other:?}"),
    }
    let r = records(&checks, &[(0, down()), (600, down())]);
    match judge(&checks, &r, 30, 600) {
        Verdict::Failed(message) => {
            assert!(message.contains("unanswered"), "{message}");
            assert!(message.contains("connection refused"), "{message}");
        }
        other => panic!("expected a failure at the deadline, got {other:?}"),
    }
}

#[test]
fn an_answer_after_an_outage_starts_the_deadline_again() {
    let checks = error_rate();
    let down = || Answer::Unanswered("timeout".into());
    let r = records(&checks, &[(0, down()), (500, Answer::Value(0.0)), (510, down())]);
    assert!(matches!(judge(&checks, &r, 30, 700), Verdict::Asking { .. }));
}

#[test]
fn nothing_passes_before_the_soak_ends_or_before_every_check_was_asked() {
    let checks = error_rate();
    let r = records(&checks, &[(0, Answer::Value(0.0))]);
    assert!(matches!(judge(&checks, &r, 30, 20), Verdict::Asking { .. }));
    let empty = PoolRecords::default();
    assert!(matches!(judge(&checks, &empty, 0, 100), Verdict::Asking { .. }));
}

#[test]
fn records_of_another_revision_or_soak_count_for_nothing() {
    let checks = error_rate();
    let mut r = records(&checks, &[(0, Answer::Value(0.9))]);
    r.revision = "older".into();
    assert!(matches!(judge(&checks, &r, 30, 30), Verdict::Asking { .. }));
    let mut r = records(&checks, &[(0, Answer::Value(0.9))]);
    r.ready_since = Some(t(-100));
    assert!(matches!(judge(&checks, &r, 30, 30), Verdict::Asking { .. }));
}

#[test]
fn a_check_is_due_at_once_every_interval_and_at_the_soaks_end() {
    let checks = error_rate();
    let p = pool("east");
    let due =
        |r: &PoolRecords, end: i64, now: i64| checks.due(&p, REVISION, Some(r), t(0), t(end), t(now)).len();
    assert_eq!(checks.due(&p, REVISION, None, t(0), t(30), t(0)).len(), 1);
    let r = records(&checks, &[(0, Answer::Value(0.0))]);
    assert_eq!(due(&r, 30, 5), 0);
    assert_eq!(due(&r, 30, 10), 1);
    // The soak ends before the interval comes round: asked at its end.
    assert_eq!(due(&r, 4, 4), 1);
    let r = records(&checks, &[(0, Answer::Value(0.0)), (30, Answer::Value(0.0))]);
    assert_eq!(due(&r, 30, 35), 0);
}

#[test]
fn a_query_is_rendered_for_its_pool_with_labels_escaped() {
    let spec = check(
        "by-region",
        r#"up{site="{{pool.name}}",region="{{pool.labels.region}}",rev="{{revision}}"}"#,
        Some(1.0),
    );
    let checks = Checks::new(&analysis(vec![spec])).expect("reads");
    let asks = checks.due(&pool("east"), REVISION, None, t(0), t(30), t(0));
    assert_eq!(asks[0].query, r#"up{site="east",region="eu \"west\"",rev="abc123"}"#);
    promql_parser::parser::parse(&asks[0].query).expect("the rendered query parses");
}

#[test]
fn a_check_by_a_label_keeps_its_pools_for_the_asker_and_names_them_as_a_regex() {
    let mut spec =
        check("errors", r#"sum by (site) (errors{site=~"{{pools}}",rev="{{revision}}"})"#, Some(1.0));
    spec.by = Some("site".into());
    let checks = Checks::new(&analysis(vec![spec.clone()])).expect("reads");
    let asks = checks.due(&pool("east.1"), REVISION, None, t(0), t(30), t(0));
    assert_eq!(asks[0].by.as_deref(), Some("site"));
    assert_eq!(asks[0].query, r#"sum by (site) (errors{site=~"{{pools}}",rev="abc123"})"#);
    let rendered = render_pools(&asks[0].query, &["east.1", "west"]);
    assert_eq!(rendered, r#"sum by (site) (errors{site=~"east\\.1|west",rev="abc123"})"#);
    promql_parser::parser::parse(&rendered).expect("the rendered query parses");

    // A check by a label whose query names no pools would ask the same
    // of every pool: refused, naming the field.
    spec.query = r#"sum by (site) (errors{site="{{pool.name}}"})"#.into();
    let e = Checks::new(&analysis(vec![spec])).expect_err("refused");
    assert_eq!(e.field, "rollout.analysis.checks[0].query");
    assert!(e.message.contains("{{pools}}"), "{}", e.message);
}

#[test]
fn a_query_that_is_not_promql_is_refused_naming_its_check() {
    let spec = check("broken", "sum(rate(errors_total[1m]", Some(1.0));
    let e = Checks::new(&analysis(vec![spec])).expect_err("refused");
    assert_eq!(e.field, "rollout.analysis.checks[0].query");
    assert!(e.message.contains("broken"), "{}", e.message);
    let mut spec = check("fast", "up", Some(1.0));
    spec.interval = Some("100ms".into());
    let e = Checks::new(&analysis(vec![spec])).expect_err("refused");
    assert_eq!(e.field, "rollout.analysis.checks[0].interval");
}

#[test]
fn nan_is_out_of_every_bound() {
    let checks = error_rate();
    assert_eq!(within(&checks.checks[0], &Answer::Value(f64::NAN)), Some(false));
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        (0.0f64..1.0).prop_map(Answer::Value),
        Just(Answer::Empty),
        Just(Answer::Unanswered("down".into())),
    ]
}

proptest! {
    /// Whatever the answers, a pool passes only when every answer it got
    /// at or after the soak's end was within bounds and its failures are
    /// within the limit; it never passes with no answer.
    #[test]
    fn a_pool_passes_only_on_good_answers(
        answers in proptest::collection::vec((0i64..100, answer()), 0..12),
        soak_end in 0i64..60,
        limit in 0u32..3,
    ) {
        let mut answers = answers;
        answers.sort_by_key(|(at, _)| *at);
        let mut spec = check("error-rate", "errors_total", Some(0.5));
        spec.failure_limit = Some(limit);
        let checks = Checks::new(&analysis(vec![spec])).expect("reads");
        let c = &checks.checks[0];
        let r = records(&checks, &answers);
        let now = answers.last().map_or(0, |(at, _)| *at).max(soak_end);
        let failures = answers.iter().filter(|(_, a)| within(c, a) == Some(false)).count();
        match judge(&checks, &r, soak_end, now) {
            Verdict::Passed => {
                let (at, last) = answers.last().expect("an answer");
                prop_assert!(*at >= soak_end);
                prop_assert_eq!(within(c, last), Some(true));
                prop_assert!(failures <= limit as usize);
            }
            Verdict::Failed(_) => {
                let unanswered_long = r.checks.get("error-rate").unwrap().unanswered_since
                    .is_some_and(|since| t(now).duration_since(since).as_secs() >= DEADLINE.as_secs() as i64);
                prop_assert!(failures > limit as usize || unanswered_long);
            }
            Verdict::Asking { .. } => prop_assert!(failures <= limit as usize),
        }
    }
}

/// The error-rate check of east's soak from 0 to 30, as a plan hands it
/// to the asker, with what releases kept of soaks.
fn east_soaking(kept: Vec<(String, PoolRecords)>) -> Analysing {
    let checks = error_rate();
    Analysing {
        source: checks.source.clone(),
        checks: checks.checks.clone(),
        wave_checks: Vec::new(),
        pre_rollout: Vec::new(),
        revision: REVISION.into(),
        asks: checks.due(&pool("east"), REVISION, None, t(0), t(30), t(0)),
        judged: true,
        kept,
    }
}

#[test]
fn answers_are_counted_by_check_and_what_they_came_to_and_folded_per_soak() {
    let analysing = east_soaking(Vec::new());
    let ask = analysing.asks[0].clone();
    let answered = vec![
        (ask.clone(), Answer::Value(0.01)),
        (ask.clone(), Answer::Value(0.9)),
        (ask.clone(), Answer::Unanswered("down".into())),
    ];
    let results: Vec<&str> = analysing.results(&answered).iter().map(|(_, r)| *r).collect();
    assert_eq!(results, ["within", "out_of_bounds", "unanswered"]);
    let stale: Records = [(
        "west".to_string(),
        PoolRecords {
            revision: "older".into(),
            ..Default::default()
        },
    )]
    .into();
    let folded = analysing.fold(stale.clone(), answered, t(1));
    assert!(!folded.contains_key("west"), "records of another revision are let go");
    let east = folded["east"].checks.get("error-rate").unwrap();
    assert_eq!((east.asked, east.failures), (3, 1));
    assert_eq!(east.unanswered_since, Some(t(1)));
}

#[test]
fn a_webhook_gate_holds_for_as_long_as_it_refuses_and_lets_go_on_a_2xx() {
    let spec = Analysis {
        webhooks: vec![crate::api::WebhookGate {
            name: "change-freeze".into(),
            gate: crate::api::GateType::PreDone,
            url: "http://gate:8080/approve".into(),
            interval: Some("5s".into()),
            cert_secret_ref: None,
        }],
        ..analysis(Vec::new())
    };
    let checks = Checks::new(&spec).expect("reads");
    assert!(checks.wave_checks.is_empty());
    let asks = checks.due(&pool("east"), REVISION, None, t(0), t(30), t(0));
    assert_eq!(asks[0].webhook.as_ref().map(|w| w.url.as_str()), Some("http://gate:8080/approve"));
    assert_eq!(asks[0].pools, ["east"]);
    let held = || Answer::Unanswered("HTTP 403: change freeze until Monday".into());
    // Held far past any deadline: a gate holds, it never fails.
    let r = records(&checks, &[(0, held()), (900, held())]);
    match judge(&checks, &r, 30, 900) {
        Verdict::Asking { message, .. } => assert!(message.contains("change freeze"), "{message}"),
        other => panic!("a refusing gate holds: {other:?}"),
    }
    let r = records(&checks, &[(0, held()), (35, Answer::Value(200.0))]);
    assert_eq!(judge(&checks, &r, 30, 35), Verdict::Passed);
    // A 2xx before the soak ended is asked again at its end.
    let r = records(&checks, &[(0, Answer::Value(200.0))]);
    assert!(matches!(judge(&checks, &r, 30, 30), Verdict::Asking { .. }));
}

#[test]
fn a_pre_wave_gate_is_asked_between_waves_with_the_waves_pools() {
    let spec = Analysis {
        webhooks: vec![crate::api::WebhookGate {
            name: "ticket".into(),
            gate: crate::api::GateType::PreWave,
            url: "http://gate:8080/wave".into(),
            interval: None,
            cert_secret_ref: None,
        }],
        ..analysis(Vec::new())
    };
    let checks = Checks::new(&spec).expect("reads");
    assert!(checks.checks.is_empty());
    let wave = Wave {
        name: "canary",
        pools: &["east", "west"],
    };
    let asks = checks.due_wave(wave, REVISION, None, t(0), t(0));
    assert_eq!((asks[0].pool.as_str(), asks[0].check.as_str()), ("wave:canary", "ticket"));
    assert_eq!(asks[0].pools, ["east", "west"]);
    assert_eq!(checks.wave_checks[0].interval, DEFAULT_GATE_INTERVAL);
}

/// A restart empties the memory: the failures the release kept of the
/// soak are where the count goes on from, so a `failureLimit` is not
/// counted afresh (fourth review, item 7).
#[test]
fn the_failures_a_release_kept_are_counted_on_after_a_restart() {
    let soak = east_soaking;
    let ask = soak(Vec::new()).asks[0].clone();
    let failed = vec![(ask.clone(), Answer::Value(0.5))];
    let before_restart = soak(Vec::new()).fold(Records::new(), failed.clone(), t(10));
    let text = super::kept::to_annotation(&before_restart["east"]).expect("a failure to keep");
    let kept = super::kept::from_annotation(&text, REVISION, ask.ready_since);
    let after_restart = soak(vec![("east".to_string(), kept)]).fold(Records::new(), failed, t(20));
    let record = after_restart["east"].checks.get(&ask.check).cloned().unwrap_or_default();
    assert_eq!((record.asked, record.failures), (2, 2), "{record:?}");
    // What the memory holds already is not replaced by what the release kept.
    let kept_again = super::kept::from_annotation(&text, REVISION, ask.ready_since);
    let held = soak(vec![("east".to_string(), kept_again)]).fold(after_restart, Vec::new(), t(30));
    assert_eq!(held["east"].checks.get(&ask.check).map(|r| r.failures), Some(2));
}
