//! Plan: Helm releases another application drives or claims, and which
//! of two releases driving one keeps it.
use super::*;

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
