//! Plan: what stops a plan or a pool: selectors, limits, the schema, taken Helm releases, empty selections.

use super::releases::with_chart;
use super::*;

#[test]
fn invalid_selector_blocks_everything() {
    let a =
        app(json!({ "pools": { "selector": { "matchExpressions": [{ "key": "k", "operator": "Near" }] } } }));
    let owned = vec![ready_release("anything", "hangzhou", "h")];
    let plan = Scenario::of(&a).over(&pools()).owning(owned).plan();
    assert!(plan.apply.is_empty() && plan.prune.is_empty() && plan.pools.is_empty());
    assert!(plan.blocked.as_deref().unwrap().starts_with("pools: selector: operator \"Near\""));
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert_eq!(stalled.reason, "InvalidSelector");
}

#[test]
fn invalid_override_selector_blocks_everything() {
    let a = app(
        json!({ "overrides": [{ "pools": { "selector": { "matchExpressions": [{ "key": "k", "operator": "In" }] } } }] }),
    );
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(plan.apply.is_empty());
    assert!(plan.blocked.as_deref().unwrap().starts_with("overrides[0].pools: "), "{:?}", plan.blocked);
}

#[test]
fn missing_named_pools_are_reported() {
    let a = app(json!({ "pools": { "names": ["hangzhou", "atlantis"] } }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert_eq!(plan.missing_pools, ["atlantis"]);
    assert_eq!(applied_pools(&plan), ["hangzhou"]);
}

#[test]
fn status_rolls_up_observed_states() {
    let a = app(json!({}));
    let first = Scenario::of(&a).over(&pools()).plan();
    let mut owned: Vec<_> =
        first.apply.iter().map(|d| ready_release(&d.name, &d.pool, &d.spec_hash)).collect();
    std::sync::Arc::make_mut(&mut owned[1].status).state = ReleaseState::Failed;
    std::sync::Arc::make_mut(&mut owned[1].status).reason = "InstallFailed".into();
    let plan = Scenario::of(&a).over(&pools()).owning(owned).plan();
    let s = &plan.status();
    assert_eq!((s.selected_pools, s.ready_pools, s.ready.as_str()), (2, 1, "1/2"));
    assert_eq!(s.observed_generation, Some(3));
    assert_eq!(s.pools.len(), 2);
    assert_eq!(s.pools[0].ready, ConditionStatus::True);
    assert_eq!(s.pools[1].ready, ConditionStatus::False);
    let ready = s.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "InstallFailed");
    assert_eq!(ready.last_transition_time, now());
}

#[test]
fn observed_release_reads_annotations_and_status() {
    let object = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": { "name": "gw-hz-1", "generation": 2,
            "labels": { "apps.fanout.dev/pool": "hz-label" },
            "annotations": { "apps.fanout.dev/pool-name": "hz", "apps.fanout.dev/spec-hash": "abc" } },
        "status": { "observedGeneration": 2, "conditions": [{ "type": "Ready", "status": "True", "reason": "InstallSucceeded", "message": "" }] }
    });
    let dynamic: kube::api::DynamicObject = serde_json::from_value(object.clone()).unwrap();
    let o = ObservedRelease::from_value(&serde_json::to_value(&dynamic).unwrap()).unwrap();
    assert_eq!(
        (o.name.as_str(), o.pool.as_deref(), o.spec_hash.as_deref()),
        ("gw-hz-1", Some("hz"), Some("abc"))
    );
    assert_eq!(o.generation, Some(2));
    assert_eq!(o.status.state, ReleaseState::Ready);
    assert_eq!(ObservedRelease::from_value(&object), Some(o));
}

#[test]
fn observed_release_falls_back_to_the_pool_label() {
    let object = json!({ "metadata": { "name": "r", "labels": { "apps.fanout.dev/pool": "hz" } } });
    assert_eq!(ObservedRelease::from_value(&object).unwrap().pool.as_deref(), Some("hz"));
    assert_eq!(ObservedRelease::from_value(&json!({ "metadata": { "name": "r" } })), None);
}

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

fn needs_password() -> Chart {
    Chart {
        compiled: Default::default(),
        name: "db".into(),
        version: "1.0.0".into(),
        values: json!({ "replicas": 1 }),
        schema: Some(json!({
            "type": "object",
            "required": ["password"],
            "additionalProperties": false,
            "properties": {
                "password": { "type": "string", "minLength": 8 },
                "replicas": { "type": "integer" },
                "nodeSelector": { "type": "object" }
            }
        })),
    }
}

#[test]
fn a_required_key_a_secret_supplies_is_not_a_failure() {
    let from_secret = json!([{ "kind": "Secret", "name": "db-credentials" }]);
    let a = app(json!({ "values": { "replicas": 2 }, "valuesFrom": from_secret,
            "placement": { "valuesPaths": [] } }));
    let plan = with_chart(&a, vec![], &needs_password());
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"], "{:?}", plan.pools);
    // Without valuesFrom the same values are refused, naming the key.
    let a = app(json!({ "values": { "replicas": 2 }, "placement": { "valuesPaths": [] } }));
    let plan = with_chart(&a, vec![], &needs_password());
    let Outcome::Failed { field, message } = outcome(&plan, "hangzhou") else {
        panic!("{:?}", outcome(&plan, "hangzhou"))
    };
    assert_eq!(field, "values");
    assert!(message.contains("password") && message.contains("required"), "{message}");
}

#[test]
fn with_values_from_a_wrong_type_or_forbidden_key_inline_still_fails() {
    let from_secret = json!([{ "kind": "Secret", "name": "db-credentials" }]);
    for (values, rule) in [
        (json!({ "replicas": "two" }), "type"),
        (json!({ "password": "short" }), "minLength"),
        (json!({ "colour": "blue" }), "additionalProperties"),
    ] {
        let a = app(json!({ "values": values, "valuesFrom": from_secret,
                "placement": { "valuesPaths": [] } }));
        let plan = with_chart(&a, vec![], &needs_password());
        let Outcome::Failed { message, .. } = outcome(&plan, "shanghai") else {
            panic!("{values}: {:?}", outcome(&plan, "shanghai"))
        };
        assert!(message.contains(&format!("({rule})")), "{values}: {message}");
        assert!(!message.contains("(required)"), "the missing password is not reported: {message}");
    }
}

#[test]
fn a_target_path_may_set_a_value_the_inline_values_get_wrong() {
    // Flux sets a targetPath value over everything, the inline values included.
    let token = json!([{ "kind": "Secret", "name": "db", "valuesKey": "pw", "targetPath": "password" }]);
    let a = app(json!({ "values": { "password": "short" }, "valuesFrom": token,
            "placement": { "valuesPaths": [] } }));
    assert_eq!(applied_pools(&with_chart(&a, vec![], &needs_password())), ["hangzhou", "shanghai"]);
}

fn with_taken(app: &NodePoolApplication, owned: Vec<ObservedRelease>, taken: &[(&str, &str, &str)]) -> Plan {
    Scenario::of(app).over(&pools()).owning(owned).beside_drivers_of(taken).plan()
}

#[test]
fn a_helm_release_another_application_drives_is_refused_naming_it() {
    // Both applications render releaseName {{pool.name}}, in one namespace.
    let a = app(json!({ "releaseName": "{{pool.name}}" }));
    let plan = with_taken(&a, vec![], &[("other-hangzhou-1234", "hangzhou", "2030-01-01T00:00:00Z")]);
    let Outcome::HelmReleaseTaken { helm_release, by } = outcome(&plan, "hangzhou") else {
        panic!("{:?}", outcome(&plan, "hangzhou"))
    };
    assert_eq!(helm_release, "edge/hangzhou");
    assert_eq!(by.application.as_deref(), Some("other"));
    assert_eq!(applied_pools(&plan), ["shanghai"], "the other pools go on");
    let reported = plan.status().pools.iter().find(|p| p.pool == "hangzhou").unwrap().clone();
    assert_eq!(reported.reason, "ReleaseNameConflict");
    assert!(reported
        .message
        .contains("HelmRelease other-hangzhou-1234 of NodePoolApplication other"));
    assert!(plan.has_errors());
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert_eq!(stalled.status, "True");
}

#[test]
fn the_older_of_two_releases_driving_one_helm_release_keeps_it_and_neither_is_deleted() {
    let a = app(json!({ "releaseName": "{{pool.name}}" }));
    let mine = naming::release_name("gw", "hangzhou");
    let mut observed = ready_release(&mine, "hangzhou", "old-hash");
    observed.helm_release = Some(("edge".into(), "hangzhou".into()));
    observed.created = Some("2030-01-01T00:00:00Z".into());
    // Ours is older: it goes on being written.
    let later = [("other-hangzhou-1234", "hangzhou", "2030-01-02T00:00:00Z")];
    let plan = with_taken(&a, vec![observed.clone()], &later);
    assert_eq!(outcome(&plan, "hangzhou"), &Outcome::Planned);
    // Ours is newer: refused, and kept, not pruned (its deletion would
    // uninstall the Helm release both drive).
    let earlier = [("other-hangzhou-1234", "hangzhou", "2029-12-31T00:00:00Z")];
    let plan = with_taken(&a, vec![observed.clone()], &earlier);
    assert!(matches!(outcome(&plan, "hangzhou"), Outcome::HelmReleaseTaken { .. }));
    assert!(plan.prune.is_empty(), "{:?}", plan.prune);
    assert!(!applied_pools(&plan).contains(&"hangzhou"));
    // ...and made inert, so that helm-controller stops alternating between
    // the two sets of values; once inert, it is not marked again.
    let inert: Vec<&str> = plan.inert.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(inert, [mine.as_str()]);
    assert!(
        plan.inert[0].1.contains("already driven by HelmRelease other-hangzhou-1234"),
        "{:?}",
        plan.inert
    );
    observed.inert = true;
    let plan = with_taken(&a, vec![observed], &earlier);
    assert!(plan.inert.is_empty(), "{:?}", plan.inert);
}

#[test]
fn a_release_is_claimed_before_it_first_drives_a_helm_release_and_only_then() {
    let a = app(json!({ "releaseName": "{{pool.name}}" }));
    // One pool: the rollout lets every write through.
    let one = [pool("hangzhou", "east")];
    let key = |pool: &str| Some(("edge".to_string(), pool.to_string()));
    let desired_of = |plan: &Plan, pool: &str| {
        plan.apply
            .iter()
            .find(|d| d.pool == pool)
            .cloned()
            .unwrap_or_else(|| panic!("{plan:#?}"))
    };
    // New: claimed.
    let plan = Scenario::of(&a).over(&one).plan();
    assert_eq!(desired_of(&plan, "hangzhou").claim, key("hangzhou"));
    // Driving it already, with a new spec: not claimed again.
    let mine = naming::release_name("gw", "hangzhou");
    let mut observed = ready_release(&mine, "hangzhou", "old-hash");
    observed.helm_release = key("hangzhou");
    let plan = Scenario::of(&a).over(&one).owning(vec![observed.clone()]).plan();
    let written = desired_of(&plan, "hangzhou");
    assert_eq!((written.claim, written.drove, written.lift_inert), (None, None, false));
    // A new releaseName: the new one claimed, the old one let go after.
    observed.helm_release = key("old-name");
    let written = desired_of(&Scenario::of(&a).over(&one).owning(vec![observed.clone()]).plan(), "hangzhou");
    assert_eq!((written.claim, written.drove), (key("hangzhou"), key("old-name")));
    // Inert, and free now: claimed and woken, even with its spec unchanged.
    let hash = desired_of(&plan, "hangzhou").spec_hash;
    let mut inert = ready_release(&mine, "hangzhou", &hash);
    inert.helm_release = key("hangzhou");
    inert.inert = true;
    let written = desired_of(&Scenario::of(&a).over(&one).owning(vec![inert.clone()]).plan(), "hangzhou");
    assert_eq!((written.claim.clone(), written.lift_inert), (key("hangzhou"), true));
    assert!(written.restores(), "waking an inert release is no step of a rollout");
    inert.inert = false;
    let plan = Scenario::of(&a).over(&one).owning(vec![inert]).plan();
    assert!(!applied_pools(&plan).contains(&"hangzhou"), "the same spec, not inert: nothing to write");
}

#[test]
fn distinct_helm_releases_do_not_clash() {
    // The default release names include the application's name.
    let plan =
        with_taken(&app(json!({})), vec![], &[("other-hangzhou-1234", "hangzhou", "2030-01-01T00:00:00Z")]);
    assert_eq!(applied_pools(&plan), ["hangzhou", "shanghai"]);
}

#[test]
fn a_selection_matching_nothing_prunes_nothing_and_stalls() {
    // A typo in the selector: every site would be uninstalled.
    let a = app(json!({ "pools": { "selector": { "matchLabels": { "regoin": "east" } } } }));
    let hz = naming::release_name("gw", "hangzhou");
    let sh = naming::release_name("gw", "shanghai");
    let owned = vec![
        ready_release(&hz, "hangzhou", "h1"),
        ready_release(&sh, "shanghai", "h2"),
    ];
    let plan = Scenario::of(&a).over(&pools()).owning(owned).plan();
    assert!(plan.prune.is_empty(), "{:?}", plan.prune);
    assert!(plan.apply.is_empty());
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert_eq!(stalled.reason, "NoPoolsSelected");
    assert!(
        stalled.message.contains(r#"selector {"matchLabels":{"regoin":"east"}}"#),
        "{}",
        stalled.message
    );
    assert!(stalled.message.contains("2 HelmRelease(s)"), "{}", stalled.message);
    // The releases left in place are still reported as they are.
    let reported: Vec<String> = plan.status().pools.iter().map(|p| p.pool.clone()).collect();
    assert_eq!(reported, ["hangzhou", "shanghai"]);
    assert_eq!(plan.status().ready, "2/2");
    assert!(plan.has_errors());
}

#[test]
fn named_pools_that_all_vanished_prune_nothing_either() {
    let a = app(json!({ "pools": { "names": ["atlantis"] } }));
    let hz = naming::release_name("gw", "hangzhou");
    let plan = Scenario::of(&a)
        .over(&pools())
        .owning(vec![ready_release(&hz, "hangzhou", "h1")])
        .plan();
    assert!(plan.prune.is_empty());
    let stalled = plan.status().conditions.iter().find(|c| c.type_ == "Stalled").unwrap().clone();
    assert!(stalled.message.contains("names [atlantis]"), "{}", stalled.message);
}

#[test]
fn a_selection_matching_nothing_with_nothing_to_protect_is_not_stalled() {
    let a = app(json!({ "pools": { "selector": { "matchLabels": { "region": "mars" } } } }));
    let plan = Scenario::of(&a).over(&pools()).plan();
    assert!(plan.blocked.is_none());
    assert!(
        plan.status().conditions.iter().all(|c| c.type_ != "Stalled"),
        "{:?}",
        plan.status().conditions
    );
}

#[test]
fn one_pool_left_in_the_selection_still_prunes_the_others() {
    // Only a selection of nothing is taken for a typo.
    let a = app(json!({ "pools": { "names": ["hangzhou"] } }));
    let sh = naming::release_name("gw", "shanghai");
    let plan = Scenario::of(&a)
        .over(&pools())
        .owning(vec![ready_release(&sh, "shanghai", "h2")])
        .plan();
    assert_eq!(plan.prune, [sh]);
}

#[test]
fn pools_of_a_kind_the_cluster_does_not_serve_stall_and_prune_nothing() {
    let a = app(json!({}));
    let owned = vec![ready_release("ingress-hz", "hz", "h")];
    let message = "spec.pools.kind is KubeEdge, but the cluster serves no NodeGroup API";
    let plan = Scenario::of(&a).owning(owned).unserved(message).plan();
    assert!(plan.apply.is_empty() && plan.prune.is_empty(), "{plan:?}");
    let stalled = plan
        .status()
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .expect("stalled")
        .clone();
    assert_eq!((stalled.reason.as_str(), stalled.message.as_str()), ("PoolApiMissing", message));
}

fn held(app: &NodePoolApplication, owned: Vec<ObservedRelease>, transient: bool) -> Plan {
    let hold = Hold {
        reason: "SourceNotReady".into(),
        message: "HelmChart edge/gw-1-0-0 is not ready: fetching the index".into(),
        transient,
    };
    Scenario::of(app).over(&pools()).owning(owned).held(hold).plan()
}

#[test]
fn a_chart_hold_says_its_reason_in_the_conditions_and_stalls_only_when_a_person_must_act() {
    let a = app(json!({}));
    // Passing by itself: Reconciling, with the source's own reason and words.
    let plan = held(&a, vec![], true);
    assert!(plan.apply.is_empty());
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "SourceNotReady"));
    assert!(ready.message.contains("fetching the index"), "{}", ready.message);
    let reconciling = condition(&plan, "Reconciling").unwrap();
    assert_eq!(reconciling.reason, "SourceNotReady");
    assert!(reconciling.message.contains("HelmChart edge/gw-1-0-0"), "{}", reconciling.message);
    assert!(condition(&plan, "Stalled").is_none());
    // Needing a person: Stalled, not Reconciling.
    let plan = held(&a, vec![], false);
    let stalled = condition(&plan, "Stalled").unwrap();
    assert_eq!(stalled.reason, "SourceNotReady");
    assert!(condition(&plan, "Reconciling").is_none());
    // Nothing waiting on it (every release already as planned): the
    // application is not held back by a source it does not need now.
    let built = Scenario::of(&a).over(&pools()).plan();
    let owned: Vec<ObservedRelease> =
        built.apply.iter().map(|d| ready_release(&d.name, &d.pool, &d.spec_hash)).collect();
    let plan = held(&a, owned, true);
    let ready = condition(&plan, "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Succeeded"), "{}", ready.message);
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

#[test]
fn a_woken_inert_release_that_is_behind_takes_its_turn_in_the_rollout() {
    use super::rollout::{fleet, progressive};
    let a = progressive(json!({ "paused": true }));
    // Every pool behind; p3's release was made inert, and what held its
    // Helm release is gone.
    let first = Scenario::of(&a).over(&fleet()).plan();
    let owned: Vec<ObservedRelease> = first
        .apply
        .iter()
        .map(|d| ObservedRelease {
            inert: d.pool == "p3",
            ..ready_release(&d.name, &d.pool, "old")
        })
        .collect();
    let plan = Scenario::of(&a).over(&fleet()).owning(owned.clone()).plan();
    assert!(plan.apply.is_empty(), "paused, yet written: {:?}", applied_pools(&plan));
    assert_eq!(outcome(&plan, "p3"), &Outcome::Deferred(PoolRollout::Paused));
    // Its turn come, it is written at the revision like any other: a
    // new time and new stamps, and the inert mark taken back.
    let resumed = progressive(json!({ "maxUnavailable": 5 }));
    let plan = Scenario::of(&resumed).over(&fleet()).owning(owned).plan();
    let p3 = plan.apply.iter().find(|d| d.pool == "p3").unwrap();
    assert!(p3.lift_inert && !p3.restores(), "{p3:?}");
    assert_eq!(p3.written_at, now().0.to_string());
    let revision = plan.status().rollout.unwrap().revision;
    assert_eq!(p3.stamps.revision.as_deref(), Some(revision.as_str()));
}
