//! A round of asks as the requests that carry them: a webhook gate or a
//! check of one pool is a request of its own, while the asks of a check
//! asked once for many pools (`by`) go together, a bounded number of
//! pools a request, and its answer is split back into each pool's.

use std::collections::HashMap;

use serde_json::Value;

use super::answer_of;
use crate::reconcile::rollout::analysis::{render_pools, Answer, Ask};

/// The most pools one batched query names: its regular expression, a few
/// kilobytes, stays well within what a query API reads.
pub const MAX_POOLS: usize = 200;

/// One request of a round.
#[derive(Debug)]
pub enum Request {
    /// A gate posted, or a query for one pool.
    One(Ask),
    /// One query for `asks`' pools, whose series carry label `by`.
    Batch {
        by: String,
        query: String,
        asks: Vec<Ask>,
    },
}

/// The requests that carry `asks`: those of one batched check with one
/// query go together, [`MAX_POOLS`] at a time, in the order first asked.
pub fn requests(asks: &[Ask]) -> Vec<Request> {
    let mut requests = Vec::new();
    let mut groups: Vec<(&str, &str, &str, Vec<&Ask>)> = Vec::new();
    let mut index: HashMap<(&str, &str, &str), usize> = HashMap::new();
    for ask in asks {
        match ask.by.as_deref().filter(|_| ask.webhook.is_none()) {
            None => requests.push(Request::One(ask.clone())),
            Some(by) => {
                let key = (ask.check.as_str(), ask.query.as_str(), by);
                let at = *index.entry(key).or_insert_with(|| {
                    groups.push((key.0, key.1, key.2, Vec::new()));
                    groups.len() - 1
                });
                groups[at].3.push(ask);
            }
        }
    }
    for (_, query, by, asks) in groups {
        for chunk in asks.chunks(MAX_POOLS) {
            let pools: Vec<&str> = chunk.iter().map(|a| a.pool.as_str()).collect();
            requests.push(Request::Batch {
                by: by.to_string(),
                query: render_pools(query, &pools),
                asks: chunk.iter().map(|a| (*a).clone()).collect(),
            });
        }
    }
    requests
}

/// Each ask of a batch with its answer, from what the query API answered
/// (`status`, `body`): a pool's value is the sample whose label `by` is
/// its name; a pool with none has no data; with more than one, no answer.
/// An answer that is no vector (an error, a scalar) is every pool's. And
/// an answer with series none of which names a pool asked answered a
/// question not asked (`by` is not the label the query keeps, say): no
/// answer for any, never "no data", which `onEmpty: Pass` would pass.
pub fn split(asks: Vec<Ask>, by: &str, status: u16, body: &[u8]) -> Vec<(Ask, Answer)> {
    let (samples, series) = match samples_by(status, body, by) {
        Ok(samples) => samples,
        Err(answer) => return asks.into_iter().map(|a| (a, answer.clone())).collect(),
    };
    if series > 0 && !asks.iter().any(|a| samples.contains_key(a.pool.as_str())) {
        let why = Answer::Unanswered(format!(
            "{series} series, none with {by} naming a pool asked: the query must keep the label {by} \
             (aggregate it by {by}, e.g. sum by ({by}) (…))"
        ));
        return asks.into_iter().map(|a| (a, why.clone())).collect();
    }
    asks.into_iter()
        .map(|ask| {
            let answer = match samples.get(ask.pool.as_str()).map(Vec::as_slice) {
                None | Some([]) => Answer::Empty,
                Some([one]) => one.clone(),
                Some(many) => Answer::Unanswered(format!(
                    "{} series have {by}=\"{}\": the query must answer one number per pool (aggregate it \
                     by {by}, e.g. sum by ({by}) (…))",
                    many.len(),
                    ask.pool
                )),
            };
            (ask, answer)
        })
        .collect()
}

/// The samples of an instant vector by their label `by`, and how many
/// series it has; what every pool gets when the answer is no such vector.
type Samples = (HashMap<String, Vec<Answer>>, usize);
fn samples_by(status: u16, body: &[u8], by: &str) -> Result<Samples, Answer> {
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        return Err(answer_of(status, body));
    };
    let data = &json["data"];
    if json["status"] != "success" || data["resultType"] != "vector" {
        return Err(match answer_of(status, body) {
            Answer::Value(_) | Answer::Empty => Answer::Unanswered(format!(
                "a result of type {}: a check with by must answer an instant vector with the label {by}",
                data["resultType"].as_str().unwrap_or("none")
            )),
            why => why,
        });
    }
    let Some(result) = data["result"].as_array() else {
        return Err(Answer::Unanswered("a vector without a result".into()));
    };
    let mut samples: HashMap<String, Vec<Answer>> = HashMap::new();
    for sample in result {
        let Some(pool) = sample["metric"][by].as_str() else {
            continue;
        };
        let value = sample["value"].get(1).and_then(Value::as_str).and_then(|v| v.parse::<f64>().ok());
        let answer =
            value.map_or_else(|| Answer::Unanswered("a sample that is not a number".into()), Answer::Value);
        samples.entry(pool.to_string()).or_default().push(answer);
    }
    Ok((samples, result.len()))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn ask(pool: &str, check: &str, by: Option<&str>) -> Ask {
        Ask {
            pool: pool.into(),
            check: check.into(),
            query: r#"sum by (site) (errors{site=~"{{pools}}"})"#.into(),
            webhook: None,
            by: by.map(String::from),
            pools: vec![pool.into()],
            ready_since: Timestamp::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_batched_checks_asks_go_in_one_query_per_chunk_and_others_alone() {
        let mut asks: Vec<Ask> = (0..MAX_POOLS + 1)
            .map(|i| ask(&format!("p{i}.east"), "errors", Some("site")))
            .collect();
        asks.push(ask("alone", "latency", None));
        let requests = requests(&asks);
        assert_eq!(requests.len(), 3, "{requests:?}");
        assert!(matches!(&requests[0], Request::One(a) if a.pool == "alone"));
        let Request::Batch { by, query, asks } = &requests[1] else {
            panic!("a batch: {requests:?}")
        };
        assert_eq!((by.as_str(), asks.len()), ("site", MAX_POOLS));
        // Each name a literal of the regular expression, escaped for PromQL.
        assert!(query.starts_with(r#"sum by (site) (errors{site=~"p0\\.east|p1\\.east|"#), "{query}");
        let Request::Batch { asks, query, .. } = &requests[2] else {
            panic!("a batch: {requests:?}")
        };
        assert_eq!(asks.len(), 1);
        assert!(query.contains(&format!(r#""p{MAX_POOLS}\\.east""#)), "{query}");
    }

    #[test]
    fn a_batched_answer_is_split_by_the_label_and_a_missing_pool_has_no_data() {
        let (a, b, c, d) = (
            ask("a", "e", Some("site")),
            ask("b", "e", Some("site")),
            ask("c", "e", Some("site")),
            ask("d", "e", Some("site")),
        );
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"site":"a"},"value":[1,"0.5"]},
            {"metric":{"site":"b"},"value":[1,"0"]},
            {"metric":{"site":"d"},"value":[1,"1"]},
            {"metric":{"site":"d"},"value":[1,"2"]},
            {"metric":{"other":"c"},"value":[1,"9"]}]}}"#;
        let answers: HashMap<String, Answer> = split(vec![a, b, c, d], "site", 200, body)
            .into_iter()
            .map(|(ask, answer)| (ask.pool, answer))
            .collect();
        assert_eq!(answers["a"], Answer::Value(0.5));
        assert_eq!(answers["b"], Answer::Value(0.0));
        assert_eq!(answers["c"], Answer::Empty, "a pool without its series has no data");
        assert!(matches!(&answers["d"], Answer::Unanswered(why) if why.contains("2 series have site=\"d\"")));
    }

    /// `by: site` where the query keeps `instance`: every series is
    /// someone else's, so no pool is answered, and none has "no data".
    #[test]
    fn series_that_name_no_pool_asked_answer_none() {
        let (a, b) = (ask("a", "e", Some("site")), ask("b", "e", Some("site")));
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"instance":"a"},"value":[1,"0.5"]},
            {"metric":{"site":"z"},"value":[1,"0"]}]}}"#;
        for (_, answer) in split(vec![a.clone(), b.clone()], "site", 200, body) {
            assert!(
                matches!(&answer, Answer::Unanswered(why) if why.contains("2 series, none with site naming a pool")),
                "{answer:?}"
            );
        }
        // No series at all is no data, as for a check of one pool.
        let empty = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        for (_, answer) in split(vec![a, b], "site", 200, empty) {
            assert_eq!(answer, Answer::Empty);
        }
    }

    #[test]
    fn an_error_or_a_scalar_is_every_pools_answer() {
        let (a, b) = (ask("a", "e", Some("site")), ask("b", "e", Some("site")));
        let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        for (_, answer) in split(vec![a.clone(), b.clone()], "site", 400, bad) {
            assert!(matches!(&answer, Answer::Unanswered(why) if why.contains("bad_data")), "{answer:?}");
        }
        let scalar = br#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#;
        for (_, answer) in split(vec![a.clone(), b.clone()], "site", 200, scalar) {
            assert!(
                matches!(&answer, Answer::Unanswered(why) if why.contains("instant vector with the label site")),
                "{answer:?}"
            );
        }
        for (_, answer) in split(vec![a, b], "site", 502, b"Bad Gateway") {
            assert!(matches!(&answer, Answer::Unanswered(why) if why.contains("HTTP 502")), "{answer:?}");
        }
    }
}
