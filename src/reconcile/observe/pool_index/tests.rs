//! The pool index answers for what its pools carry, and a pool that
//! changes its labels is found under the new ones only. That the writer
//! keeps it in step with the cache through events and re-lists is the
//! property test of `runtime::changes`.

use serde_json::json;

use super::*;
use crate::pools::kind::OPENYURT;

fn pool(name: &str, labels: serde_json::Value) -> Arc<CachedPool> {
    Arc::new(CachedPool::from_object(
        &OPENYURT,
        serde_json::from_value(json!({
            "apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
            "metadata": { "name": name, "labels": labels }
        }))
        .unwrap(),
    ))
}

fn values(values: &[&str]) -> BTreeSet<String> {
    values.iter().map(|v| v.to_string()).collect()
}

fn names(pools: Vec<Arc<CachedPool>>) -> Vec<String> {
    let mut names: Vec<String> = pools.iter().map(|p| p.pool.name.clone()).collect();
    names.sort();
    names
}

#[test]
fn a_pool_is_found_under_the_labels_it_carries_now() {
    let (hz, sh) = (pool("hz", json!({ "region": "east" })), pool("sh", json!({ "region": "east" })));
    let index = PoolIndex::of([Arc::clone(&hz), Arc::clone(&sh)]);
    assert_eq!(names(index.labelled("region", &values(&["east"]))), ["hz", "sh"]);
    assert_eq!(index.count("region", &values(&["east", "west"])), 2);
    let moved = pool("hz", json!({ "region": "west", "tier": "edge" }));
    index.replace(Some(&hz), Some(&moved));
    assert_eq!(names(index.labelled("region", &values(&["east"]))), ["sh"]);
    assert_eq!(names(index.labelled("region", &values(&["east", "west"]))), ["hz", "sh"]);
    assert_eq!(names(index.labelled("tier", &values(&["edge"]))), ["hz"]);
    index.replace(Some(&sh), None);
    assert!(index.labelled("region", &values(&["east"])).is_empty());
    assert_eq!(index.count("region", &values(&["east"])), 0, "an empty set is dropped");
    index.rebuild([pool("bj", json!({ "region": "east" }))]);
    assert_eq!(names(index.labelled("region", &values(&["east", "west"]))), ["bj"]);
}

/// Every change of a pool, and every list made again, gives the index a
/// version it never had: a plan at rest over pools of any namespace
/// (sites that are clusters) knows when one changed.
#[test]
fn every_change_gives_a_new_version() {
    let hz = pool("hz", json!({ "region": "east" }));
    let index = PoolIndex::of([Arc::clone(&hz)]);
    let mut seen = vec![index.version()];
    let moved = pool("hz", json!({ "region": "west" }));
    index.replace(Some(&hz), Some(&moved));
    seen.push(index.version());
    index.replace(Some(&moved), None);
    seen.push(index.version());
    index.rebuild([Arc::clone(&hz)]);
    seen.push(index.version());
    let mut distinct = seen.clone();
    distinct.dedup();
    assert_eq!(distinct, seen, "a version came back: {seen:?}");
}
