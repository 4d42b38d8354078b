//! A pool's check failures over one soak, kept on its release
//! ([`naming::ANNOTATION_CHECK_FAILURES`]) beside the mark of when that
//! soak began: the answers themselves live in the controller's memory,
//! which a restart, a failover or a shard move empties, and a
//! `failureLimit` counted afresh would let a pool that failed its check
//! soak again and pass (fourth review, item 7). Only failures are kept,
//! so a soak that passes writes nothing of them: a check's record is kept
//! from its first failure on, with how often it was asked by then and
//! what it answered last time it failed.

use k8s_openapi::jiff::Timestamp;
use litemap::LiteMap;
use serde_json::{json, Map, Value};

use super::{Answer, CheckRecord, PoolRecords};

#[cfg(doc)]
use crate::api::naming;

/// The records of `pool` worth keeping on its release: each check that
/// failed, with its counts and its last failure. `None` when none failed.
pub fn to_annotation(pool: &PoolRecords) -> Option<String> {
    let mut kept = Map::new();
    for (name, record) in pool.checks.iter().filter(|(_, r)| r.failures > 0) {
        let mut check = json!({ "asked": record.asked, "failures": record.failures });
        if let Some((at, answer)) = &record.last_failure {
            check["at"] = json!(at.to_string());
            if let Answer::Value(v) = answer {
                check["value"] = json!(v.to_string());
            }
        }
        kept.insert(name.clone(), check);
    }
    (!kept.is_empty()).then(|| Value::Object(kept).to_string())
}

/// The records kept on a release for the soak of `revision` that began
/// at `ready_since`: what [`to_annotation`] wrote, each check's last
/// failure read back as it was answered. A text that is not what it
/// wrote (edited by hand) keeps nothing.
pub fn from_annotation(text: &str, revision: &str, ready_since: Timestamp) -> PoolRecords {
    let mut checks = LiteMap::new();
    let kept: Map<String, Value> = serde_json::from_str(text).unwrap_or_default();
    for (name, check) in kept {
        let count = |key: &str| check.get(key).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
        let Some(failures) = count("failures").filter(|f| *f > 0) else {
            continue;
        };
        let at = check.get("at").and_then(Value::as_str).and_then(|t| t.parse::<Timestamp>().ok());
        let answer = match check.get("value").and_then(Value::as_str).map(str::parse::<f64>) {
            Some(Ok(v)) => Answer::Value(v),
            _ => Answer::Empty,
        };
        let last_failure = at.map(|at| (at, answer));
        let record = CheckRecord {
            asked: count("asked").unwrap_or(failures).max(failures),
            failures,
            last: last_failure.clone(),
            last_failure,
            unanswered_since: None,
        };
        checks.insert(name, record);
    }
    PoolRecords {
        revision: revision.to_string(),
        ready_since: Some(ready_since),
        checks,
    }
}

/// Whether `memory` holds a failure `kept` does not: then what is kept
/// on the release is behind, and written again.
pub fn behind(kept: Option<&PoolRecords>, memory: &PoolRecords) -> bool {
    memory.checks.iter().any(|(name, record)| {
        let kept = kept.and_then(|k| k.checks.get(name)).map_or(0, |r| r.failures);
        record.failures > kept
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_kept_on_the_release_read_back_as_they_were_counted() {
        let at: Timestamp = "2030-01-01T00:01:00Z".parse().unwrap();
        let since: Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
        let mut pool = PoolRecords {
            revision: "r2".into(),
            ready_since: Some(since),
            checks: LiteMap::new(),
        };
        let record = |failures, answer| CheckRecord {
            asked: 5,
            failures,
            last_failure: (failures > 0).then_some((at, answer)),
            last: None,
            unanswered_since: None,
        };
        pool.checks.insert("passing".to_string(), record(0, Answer::Empty));
        assert_eq!(to_annotation(&pool), None, "a soak that passes keeps nothing");
        pool.checks.insert("error-rate".to_string(), record(2, Answer::Value(0.25)));
        pool.checks.insert("no-data".to_string(), record(1, Answer::Empty));
        pool.checks.insert("nan".to_string(), record(1, Answer::Value(f64::NAN)));
        let text = to_annotation(&pool).unwrap();
        let back = from_annotation(&text, "r2", since);
        assert_eq!(back.checks.len(), 3, "{text}");
        let error_rate = &back.checks.get("error-rate").unwrap();
        assert_eq!((error_rate.asked, error_rate.failures), (5, 2));
        assert_eq!(error_rate.last_failure, Some((at, Answer::Value(0.25))));
        assert_eq!(back.checks.get("no-data").unwrap().last_failure, Some((at, Answer::Empty)));
        let nan = &back.checks.get("nan").unwrap().last_failure;
        assert!(matches!(nan, Some((_, Answer::Value(v))) if v.is_nan()), "{nan:?}");
        assert!(!behind(Some(&back), &pool), "all kept");
        pool.checks.get_mut("no-data").unwrap().failures = 2;
        assert!(behind(Some(&back), &pool), "a new failure is written");
        assert_eq!(from_annotation("not json", "r2", since).checks.len(), 0);
    }
}
