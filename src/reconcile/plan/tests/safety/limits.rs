//! Plan: rendering limits, of a string, a release and the whole
//! application, and the hostile spec of the review.
use super::*;

#[test]
fn a_string_rendering_past_its_limit_fails_that_pool_naming_field_and_limit() {
    let mut pools = pools();
    pools[1].annotations.insert("notes".into(), "n".repeat(100_000));
    let a = app(json!({ "overrides": [{ "pools": { "names": ["shanghai"] },
            "values": { "notes": "{{pool.annotations.notes}}".repeat(10) } }] }));
    let plan = Scenario::of(&a).over(&pools).plan();
    let Outcome::Failed { field, message } = outcome(&plan, "shanghai") else {
        panic!("{:?}", outcome(&plan, "shanghai"))
    };
    assert_eq!(field, "overrides[0].values.notes");
    assert!(message.starts_with("renders to more than 256 KiB, the limit for one string"), "{message}");
    // The other pools go on.
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
    let reported = plan.status().pools.iter().find(|p| p.pool == "shanghai").unwrap().clone();
    assert_eq!(reported.reason, "InvalidPoolConfig");
}

#[test]
fn a_release_rendering_past_its_limit_fails_naming_the_field_that_passed_it() {
    // Each string fits (200 tags of a 253-character name, 50,600
    // bytes); together they pass the release's limit.
    let values: serde_json::Map<String, Value> =
        (0..24).map(|i| (format!("k{i:02}"), json!("{{app.name}}".repeat(200)))).collect();
    let mut a = app(json!({ "values": values }));
    a.metadata.name = Some("a".repeat(253));
    let plan = Scenario::of(&a).over(&pools()).plan();
    for pool in ["hangzhou", "shanghai"] {
        let Outcome::Failed { field, message } = outcome(&plan, pool) else {
            panic!("{:?}", outcome(&plan, pool))
        };
        assert_eq!(field, "values.k20", "the 21st string passes 1 MiB");
        assert!(message.contains("more than 1024 KiB"), "{message}");
        assert!(message.contains("the limit for one release"), "{message}");
    }
    assert!(plan.apply.is_empty());
}

#[test]
fn plain_strings_count_towards_the_release_limit_too() {
    let one_pool = |values: Value| {
        let mut a = app(json!({ "values": values }));
        a.spec.pools.selector = None;
        a.spec.pools.names = vec!["hangzhou".into()];
        a
    };
    let a = one_pool(json!({ "big": "x".repeat(600 * 1024), "bigger": "y".repeat(600 * 1024) }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!("{:?}", outcome(&plan, "hangzhou"))
    };
    assert_eq!(field, "values.bigger");
    assert!(message.contains("the limit for one release"), "{message}");
    // Below the limit, the same text is written as it is.
    let plan = Scenario::of(&one_pool(json!({ "big": "x".repeat(600 * 1024) })))
        .over(&pools())
        .plan();
    let written = desired(&plan, "hangzhou")["spec"]["values"]["big"].as_str().map(str::len);
    assert_eq!(written, Some(600 * 1024));
}

#[test]
fn the_hostile_spec_of_the_review_is_refused_for_every_pool() {
    // A 253-character name and one value holding `{{app.name}}` 20,000
    // times: 240 KB of spec that rendered to 5 MB a pool.
    let mut a = app(json!({ "values": { "blowup": "{{app.name}}".repeat(20_000) } }));
    a.metadata.name = Some("a".repeat(253));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(plan.apply.is_empty());
    for pool in ["hangzhou", "shanghai"] {
        let Outcome::Failed { field, message } = outcome(&plan, pool) else {
            panic!("{:?}", outcome(&plan, pool))
        };
        assert_eq!(field, "values.blowup");
        assert!(message.contains("holds 20000 `{{`, more than the 256"), "{message}");
    }
}

#[test]
fn an_application_past_its_total_budget_is_refused_whole_and_prunes_nothing() {
    // 200 KiB per pool is within one release's limit; 200 pools of it pass
    // the application's.
    let big = "x".repeat(200 * 1024);
    let a = app(
        json!({ "values": { "blob": big, "controller": { "ingressClass": { "name": "{{pool.name}}" } } } }),
    );
    let many: Vec<Pool> = (0..200).map(|i| pool(&format!("p{i:03}"), "east")).collect();
    let kept = ready_release(&naming::release_name("gw", "p000"), "p000", "old");
    let gone = ready_release(&naming::release_name("gw", "left"), "left", "old");
    let plan = Scenario::of(&a).over(&many).owning(vec![kept, gone]).plan();
    assert!(
        plan.apply.is_empty() && plan.prune.is_empty(),
        "{:?} {:?}",
        applied_pools(&plan),
        plan.prune
    );
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert_eq!(stalled.reason, "ApplicationTooLarge");
    assert!(stalled.message.contains("32 MiB"), "{}", stalled.message);
    assert!(stalled.message.contains("of its 200 pools"), "{}", stalled.message);
    // A tenth of the pools fits.
    let plan = Scenario::of(&a).over(&many[..20]).plan();
    assert_eq!(plan.apply.len(), 20);
}
