//! The history's rules: records numbered in rollout order, outcomes marked
//! once, a returning revision renumbered, and the limit kept without ever
//! forgetting the current or the last complete revision.

use super::*;
use serde_json::json;

fn recorded(revision: &str, number: i64, outcome: Option<&str>) -> Recorded {
    Recorded {
        name: record_name("shop", revision),
        revision: revision.into(),
        number,
        outcome: outcome.map(String::from),
        halted_judgement: None,
        halted_because: None,
        chart_version: None,
        created: None,
        rolled_out_at: None,
    }
}

fn current(revision: &str, phase: RolloutPhase) -> Current<'_> {
    Current {
        revision,
        phase,
        chart_version: Some("1.2.0"),
        judgement: "j2",
        because: None,
        number: None,
    }
}

fn plan_of(cur: Current, records: &[Recorded], limit: usize) -> HistoryWrites {
    plan("shop", cur, records, limit, || json!({ "spec": "as rolled out" }))
}

#[test]
fn a_new_revision_is_recorded_after_the_newest_and_marked_when_it_ends() {
    let records = [recorded("aaa", 1, Some(COMPLETE))];
    let w = plan_of(current("bbb", RolloutPhase::Progressing), &records, 10);
    let record = w.record.unwrap();
    assert_eq!((record.name.as_str(), record.number), ("shop-bbb", 2));
    assert_eq!(record.data, Some(json!({ "spec": "as rolled out" })));
    assert_eq!((record.outcome, record.chart_version.as_deref()), (None, Some("1.2.0")));
    assert_eq!(w.mark, None);
    // Recorded, then complete: marked once.
    let records = [recorded("aaa", 1, Some(COMPLETE)), recorded("bbb", 2, None)];
    let w = plan_of(current("bbb", RolloutPhase::Complete), &records, 10);
    assert_eq!(w.record, None);
    assert_eq!(w.mark, Some(("shop-bbb".to_string(), COMPLETE)));
    let records = [
        recorded("aaa", 1, Some(COMPLETE)),
        recorded("bbb", 2, Some(COMPLETE)),
    ];
    assert!(plan_of(current("bbb", RolloutPhase::Complete), &records, 10).is_empty());
    // Halted: marked so, and the last complete revision is the one before.
    let records = [recorded("aaa", 1, Some(COMPLETE)), recorded("bbb", 2, None)];
    let w = plan_of(current("bbb", RolloutPhase::Halted), &records, 10);
    assert_eq!(w.mark, Some(("shop-bbb".to_string(), HALTED)));
    assert_eq!(last_complete(&records, current("bbb", RolloutPhase::Halted)), Some("aaa"));
    assert_eq!(last_complete(&records, current("bbb", RolloutPhase::Complete)), Some("bbb"));
    assert_eq!(last_complete(&[], current("bbb", RolloutPhase::Progressing)), None);
}

#[test]
fn a_revision_that_comes_back_is_renumbered_as_the_newest_without_new_data() {
    let records = [
        recorded("aaa", 1, Some(COMPLETE)),
        recorded("bbb", 2, Some(HALTED)),
    ];
    let w = plan_of(current("aaa", RolloutPhase::Progressing), &records, 10);
    let record = w.record.unwrap();
    assert_eq!((record.name.as_str(), record.number, record.data), ("shop-aaa", 3, None));
}

#[test]
fn the_limit_forgets_the_oldest_but_never_the_current_or_the_last_complete() {
    let records: Vec<Recorded> = (1..=5)
        .map(|n| recorded(&format!("r{n}"), n, Some(if n == 1 { COMPLETE } else { HALTED })))
        .collect();
    // A sixth revision with a limit of 3: itself, r1 (the last complete)
    // and the newest other, r5.
    let w = plan_of(current("r6", RolloutPhase::Progressing), &records, 3);
    assert_eq!(w.forget, ["shop-r4", "shop-r3", "shop-r2"]);
    // A limit of 1 still keeps both the current and the last complete.
    let w = plan_of(current("r5", RolloutPhase::Halted), &records, 1);
    let mut forgotten = w.forget.clone();
    forgotten.sort();
    assert_eq!(forgotten, ["shop-r2", "shop-r3", "shop-r4"]);
    // Within the limit: nothing forgotten.
    assert!(plan_of(current("r5", RolloutPhase::Halted), &records, 10).forget.is_empty());
}

#[test]
fn record_names_fit_an_object_name() {
    assert_eq!(record_name("shop", "0123456789"), "shop-0123456789");
    let long = "a".repeat(260);
    assert_eq!(record_name(&long, "0123456789").len(), 253);
    assert_eq!(
        record_name(&format!("{}.-x", "b".repeat(240)), "0123456789"),
        format!("{}-0123456789", "b".repeat(240))
    );
}

#[test]
fn a_rolled_back_revision_is_marked_so_and_the_complete_ones_are_rebuilt() {
    let records = [recorded("aaa", 1, Some(COMPLETE)), recorded("bbb", 2, None)];
    for phase in [RolloutPhase::RollingBack, RolloutPhase::RolledBack] {
        let w = plan_of(current("bbb", phase), &records, 10);
        assert_eq!(w.mark, Some(("shop-bbb".to_string(), ROLLED_BACK)));
    }
    let spec = json!({
        "pools": { "names": ["a"] }, "interval": "10m",
        "chart": { "spec": { "chart": "c", "sourceRef": { "kind": "HelmRepository", "name": "r" } } }
    });
    let record =
        |revision: &str, number: i64, outcome: &str, chart: serde_json::Value| -> ControllerRevision {
            serde_json::from_value(json!({
            "metadata": {
                "name": record_name("shop", revision), "namespace": "edge",
                "labels": { LABEL_REVISION: revision },
                "annotations": { ANNOTATION_OUTCOME: outcome },
                "ownerReferences": [{ "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
                    "name": "shop", "uid": "u1", "controller": true }]
            },
            "revision": number,
            "data": { "spec": spec, "chart": chart }
        }))
        .unwrap()
        };
    let objects = [
        record("aaa", 1, COMPLETE, json!({ "kind": "HelmChart", "name": "edge-shop-1" })),
        record("bbb", 2, HALTED, json!(null)),
        record(
            "ccc",
            3,
            COMPLETE,
            json!({ "kind": "HelmChart", "name": "c3", "namespace": "flux-system" }),
        ),
        record("ddd", 4, ROLLED_BACK, json!(null)),
    ];
    let arcs = || objects.iter().cloned().map(std::sync::Arc::new);
    let history = History::of(arcs(), "u1", "edge");
    assert_eq!(history.recorded.len(), 4);
    assert_eq!(history.last_complete("ddd"), Some("ccc"));
    let ccc = history.past("ccc").unwrap().unwrap();
    assert_eq!(ccc.chart_ref.as_ref().map(|c| c.namespace.as_str()), Some("flux-system"), "as recorded");
    assert_eq!(history.last_complete("ccc"), Some("aaa"));
    let aaa = history.past("aaa").unwrap().unwrap();
    assert_eq!(
        aaa.chart_ref.as_ref().map(|c| (c.name.as_str(), c.namespace.as_str())),
        Some(("edge-shop-1", "edge")),
        "beside the source, when the record does not say"
    );
    assert_eq!(aaa.spec.pools.names, ["a"]);
    assert!(history.rolled_back("ddd") && !history.rolled_back("bbb"));
    // Another application's records are not its history.
    assert!(History::of(arcs(), "u2", "edge").recorded.is_empty());
    assert!(history.past("zzz").is_none(), "not recorded");
}

#[test]
fn a_halt_is_recorded_with_what_judged_it() {
    // Halted, judged by j2: marked with it.
    let records = [recorded("aaa", 1, Some(COMPLETE)), recorded("bbb", 2, None)];
    let w = plan_of(current("bbb", RolloutPhase::Halted), &records, 10);
    assert_eq!(
        (w.mark.clone(), w.halted_judgement.as_deref()),
        (Some(("shop-bbb".to_string(), HALTED)), Some("j2"))
    );
    // It holds while j2 judges, not once what judges changes.
    let halted_by = |judgement: &str| Recorded {
        halted_judgement: Some(judgement.to_string()),
        halted_because: None,
        ..recorded("bbb", 2, Some(HALTED))
    };
    let history = History {
        recorded: vec![halted_by("j2")],
        ..History::default()
    };
    assert!(history.halted("bbb", "j2"));
    assert!(!history.halted("bbb", "j3"), "judged otherwise since: the halt is judged again");
    assert!(!history.halted("ccc", "j2"), "another revision");
    // Halted again when judged otherwise: marked with the new judgement.
    let w = plan_of(
        Current {
            judgement: "j3",
            because: None,
            ..current("bbb", RolloutPhase::Halted)
        },
        &[halted_by("j2")],
        10,
    );
    assert_eq!(
        (w.mark, w.halted_judgement.as_deref()),
        (Some(("shop-bbb".to_string(), HALTED)), Some("j3"))
    );
    assert!(plan_of(current("bbb", RolloutPhase::Halted), &[halted_by("j2")], 10).is_empty());
    // A complete mark carries no judgement.
    let w = plan_of(current("bbb", RolloutPhase::Complete), &[halted_by("j2")], 10);
    assert_eq!((w.mark, w.halted_judgement), (Some(("shop-bbb".to_string(), COMPLETE)), None));
}

/// A record that is not the newest is of an earlier rollout of its
/// revision: none of what it says is of the rollout that comes back.
#[test]
fn a_returning_revisions_record_says_nothing_of_its_new_rollout() {
    let history = History {
        recorded: vec![
            recorded("aaa", 3, Some(COMPLETE)),
            Recorded {
                halted_judgement: Some("j2".into()),
                halted_because: None,
                rolled_out_at: Some("2029-12-30T00:00:00Z".into()),
                ..recorded("bbb", 2, Some(HALTED))
            },
            recorded("ccc", 1, Some(ROLLED_BACK)),
        ],
        ..History::default()
    };
    assert!(!history.halted("bbb", "j2"));
    assert!(!history.rolled_back("ccc") && !history.completed("bbb"));
    assert_eq!(history.rolled_out_since("bbb"), None);
    assert!(history.completed("aaa"));
    assert_eq!((history.rollout_number("aaa"), history.rollout_number("bbb")), (3, 4));
    assert_eq!(history.rollout_number("new"), 4);
    assert_eq!(History::default().rollout_number("new"), 1);
}

/// Why a revision halted is marked with the halt, cut to its bound, and
/// read back for this rollout alone: a rolled-back record keeps it, a
/// complete one has none, and an earlier rollout's says nothing.
#[test]
fn a_halt_is_recorded_with_why_and_read_back_for_its_rollout() {
    let records = [recorded("aaa", 1, Some(COMPLETE)), recorded("bbb", 2, None)];
    let long = format!("pool \"p1\": AnalysisFailed: check error-rate failed{}", " …".repeat(2000));
    let because = Current {
        because: Some(&long),
        ..current("bbb", RolloutPhase::RollingBack)
    };
    let w = plan_of(because, &records, 10);
    assert_eq!(w.mark.as_ref().map(|m| m.1), Some(ROLLED_BACK));
    let kept = w.halted_because.expect("why it halted is marked");
    assert!(kept.starts_with("pool \"p1\": AnalysisFailed: check error-rate"), "{kept}");
    assert!(kept.len() <= MAX_HALTED_BECAUSE, "{} bytes", kept.len());
    let complete = Current {
        because: Some("stale"),
        ..current("bbb", RolloutPhase::Complete)
    };
    assert_eq!(plan_of(complete, &records, 10).halted_because, None, "a completion carries no cause");
    let history = |outcome: &str, number: i64| History {
        recorded: vec![
            recorded("aaa", 1, Some(COMPLETE)),
            Recorded {
                halted_because: Some("pool \"p1\": AnalysisFailed".into()),
                ..recorded("bbb", number, Some(outcome))
            },
        ],
        ..History::default()
    };
    assert_eq!(history(ROLLED_BACK, 2).halted_because("bbb"), Some("pool \"p1\": AnalysisFailed"));
    assert_eq!(history(COMPLETE, 2).halted_because("bbb"), None, "complete since");
    let mut earlier = history(HALTED, 2);
    earlier.recorded[0].number = 3;
    assert_eq!(earlier.halted_because("bbb"), None, "an earlier rollout's halt");
}
