//! The application's status within its bounds, a relist after the watch
//! was away, and liveness: settling once complete.
use super::*;

#[test]
fn a_status_past_its_bounds_is_caught_and_one_within_them_is_not() {
    let pool = |i: usize, message: &str| json!({ "pool": format!("p{i}"), "message": message });
    let with_pools = |pools: Vec<Value>| {
        let mut app = application("gw", 10, json!({}), "r1", "Complete", pools.len() as u64);
        app["status"]["pools"] = json!(pools);
        app
    };
    let mut checker = Checker::new();
    let within = with_pools((0..40).map(|i| pool(i, &"m".repeat(1024))).collect());
    let found = seen(&mut checker, 0, Kind::Application, within);
    assert_eq!(of(&found, Invariant::Bounded), 0, "{found:?}");
    let too_many = with_pools((0..41).map(|i| pool(i, "ok")).collect());
    let found = seen(&mut checker, 1, Kind::Application, too_many);
    assert_eq!(of(&found, Invariant::Bounded), 1, "{found:?}");
    let too_long = with_pools(vec![pool(0, &"m".repeat(1025))]);
    let found = seen(&mut checker, 2, Kind::Application, too_long);
    assert_eq!(of(&found, Invariant::Bounded), 1, "{found:?}");
    let mut too_big = with_pools(vec![pool(0, "ok")]);
    too_big["status"]["history"] = json!("x".repeat(70 * 1024));
    let found = seen(&mut checker, 3, Kind::Application, too_big);
    assert_eq!(of(&found, Invariant::Bounded), 1, "{found:?}");
    assert!(found[0].message.contains("over 65536"), "{}", found[0].message);
}

#[test]
fn a_relist_after_the_watch_was_away_reads_what_went_meanwhile_as_deleted() {
    let mut checker = Checker::new();
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "a", 11, 1, "r1", "h1", true));
    seen(&mut checker, 0, Kind::HelmRelease, release("gw", "b", 12, 1, "r1", "h1", true));
    seen(&mut checker, 0, Kind::Application, application("gw", 13, json!({}), "r1", "Complete", 2));
    let a = release("gw", "a", 11, 1, "r1", "h1", true);
    let listed: BTreeSet<Key> = [Record::key_of(Kind::HelmRelease, &a)].into();
    let gone = checker.gone_since_relist(Kind::HelmRelease, &listed, at(1));
    let names: Vec<String> = gone.iter().map(|r| r.key().to_string()).collect();
    assert_eq!(names, ["HelmRelease edge/gw-b"]);
    assert!(gone.iter().all(|r| r.deleted));
}

#[test]
fn an_application_settles_once_complete_ready_and_every_release_at_its_revision() {
    let mut app = application("gw", 10, json!({}), "r2", "Complete", 2);
    app["status"]["readyPools"] = json!(2);
    app["status"]["conditions"] =
        json!([{ "type": "Ready", "status": "True", "message": "2/2 pools ready" }]);
    let a = release("gw", "a", 11, 2, "r2", "h2", true);
    let b = release("gw", "b", 12, 2, "r2", "h2", true);
    assert_eq!(liveness::unsettled(&app, &[a.clone(), b.clone()]), None);
    let behind = release("gw", "b", 12, 1, "r1", "h1", true);
    let why = liveness::unsettled(&app, &[a.clone(), behind]).unwrap();
    assert!(why.contains("gw-b is at revision r1"), "{why}");
    let mut terminating = b.clone();
    terminating["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
    let why = liveness::unsettled(&app, &[a.clone(), terminating]).unwrap();
    assert!(why.contains("being deleted"), "{why}");
    let mut halted = app.clone();
    halted["status"]["rollout"]["phase"] = json!("Halted");
    assert!(liveness::unsettled(&halted, &[a.clone(), b.clone()]).unwrap().contains("Halted"));
    let mut one_ready = app.clone();
    one_ready["status"]["readyPools"] = json!(1);
    assert_eq!(liveness::unsettled(&one_ready, &[a, b]).as_deref(), Some("1 of 2 pools ready"));
    let v = liveness::violation(&app, "it is not Ready", std::time::Duration::from_secs(180));
    assert_eq!(v.invariant, Invariant::Liveness);
    assert!(v.message.contains("edge/gw has not settled 180s"), "{}", v.message);
}
