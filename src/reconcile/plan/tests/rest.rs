//! A reconcile that ends without planning ([`at_rest`]) misses nothing:
//! over random sequences of events and clock steps (releases turning
//! Ready or not or upgrading, pools' nodes going down and up, maintenance windows put
//! on and taken off, pools added and removed, new values), with the
//! status written back as the controller writes it, whenever the input is
//! found at rest the plan from scratch writes nothing, reports the status
//! the application has, and foresees no change of the clock's before the
//! rest ends. And every plan made is the plan from scratch.
use super::*;
use crate::api::naming;
use crate::pools::nodes::Counted;
use crate::reconcile::packed::PackedJson;
use crate::reconcile::plan::rest;
use crate::reconcile::plan::tests::rollout::progressive;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

#[derive(Debug, Clone)]
enum Event {
    /// The clock moves on this many seconds.
    Tick(u16),
    /// The release of the pool turns Ready, or not.
    Ready(usize, bool),
    /// The release of the pool is being upgraded: not Ready, not failed.
    Upgrading(usize),
    /// The pool's one node turns Ready, or not.
    Node(usize, bool),
    /// The pool's maintenance window: none, or open ten minutes an hour.
    Window(usize, bool),
    AddPool,
    RemovePool(usize),
    /// New values: a new revision to roll out.
    Values(u8),
}

fn event() -> impl Strategy<Value = Event> {
    let pool = 0..6usize;
    prop_oneof![
        3 => (1..900u16).prop_map(Event::Tick),
        2 => (pool.clone(), any::<bool>()).prop_map(|(i, ready)| Event::Ready(i, ready)),
        1 => pool.clone().prop_map(Event::Upgrading),
        1 => (pool.clone(), any::<bool>()).prop_map(|(i, up)| Event::Node(i, up)),
        1 => (pool.clone(), any::<bool>()).prop_map(|(i, on)| Event::Window(i, on)),
        1 => Just(Event::AddPool),
        1 => pool.prop_map(Event::RemovePool),
        1 => (0..3u8).prop_map(Event::Values),
    ]
}

/// The fleet as the cluster holds it between two reconciles.
struct World {
    app: NodePoolApplication,
    pools: Vec<Pool>,
    releases: BTreeMap<String, Value>,
    nodes: BTreeMap<String, NodeCount>,
    now: Timestamp,
    next_pool: usize,
    resource_version: u64,
}

impl World {
    fn new(pools: usize) -> Self {
        let app = progressive(json!({
            "maxUnavailable": 1, "minReadySeconds": 30, "progressDeadline": "5m", "offlineAfter": "1m"
        }));
        let mut world = World {
            app,
            pools: Vec::new(),
            releases: BTreeMap::new(),
            nodes: BTreeMap::new(),
            now: now().0,
            next_pool: 0,
            resource_version: 0,
        };
        for _ in 0..pools {
            world.add_pool();
        }
        world
    }

    fn add_pool(&mut self) {
        let name = format!("p{}", self.next_pool);
        self.next_pool += 1;
        self.nodes.insert(name.clone(), self.count(true));
        self.pools.push(pool(&name, "east"));
    }

    fn count(&self, up: bool) -> NodeCount {
        NodeCount {
            ready: u32::from(up),
            total: 1,
            changed: Some(self.now),
            of: Counted::Nodes,
        }
    }

    /// The same world at another time.
    fn at(&self, now: Timestamp) -> World {
        World {
            app: self.app.clone(),
            pools: self.pools.clone(),
            releases: self.releases.clone(),
            nodes: self.nodes.clone(),
            now,
            next_pool: self.next_pool,
            resource_version: self.resource_version,
        }
    }

    fn bump(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    fn nth_pool(&self, i: usize) -> Option<String> {
        (!self.pools.is_empty()).then(|| self.pools[i % self.pools.len()].name.clone())
    }

    /// The release of pool `pool`, if it has one.
    fn release_of(&self, pool: &str) -> Option<String> {
        let of_pool = |r: &&Value| r["metadata"]["labels"][naming::LABEL_POOL] == json!(pool);
        self.releases
            .values()
            .find(of_pool)
            .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
    }

    fn upgrading(&self) -> Value {
        json!({ "observedGeneration": 1, "conditions": [{
            "type": "Ready", "status": "Unknown", "reason": "Progressing",
            "message": "upgrading", "observedGeneration": 1,
            "lastTransitionTime": self.now.to_string()
        }]})
    }

    fn status(&self, ready: bool) -> Value {
        json!({ "observedGeneration": 1, "conditions": [{
            "type": "Ready", "status": if ready { "True" } else { "False" },
            "reason": if ready { "UpgradeSucceeded" } else { "UpgradeFailed" },
            "message": "as drawn", "observedGeneration": 1,
            "lastTransitionTime": self.now.to_string()
        }]})
    }

    fn happen(&mut self, event: &Event) {
        match event {
            Event::Tick(seconds) => self.now += SignedDuration::from_secs(i64::from(*seconds)),
            Event::Ready(i, _) | Event::Upgrading(i) => {
                let Some(name) = self.nth_pool(*i).and_then(|pool| self.release_of(&pool)) else {
                    return;
                };
                let status = match event {
                    Event::Ready(_, ready) => self.status(*ready),
                    _ => self.upgrading(),
                };
                let rv = self.bump();
                let release = self.releases.get_mut(&name).unwrap();
                release["metadata"]["resourceVersion"] = json!(rv);
                release["status"] = status;
            }
            Event::Node(i, up) => {
                if let Some(pool) = self.nth_pool(*i) {
                    let count = self.count(*up);
                    self.nodes.insert(pool, count);
                }
            }
            Event::Window(i, on) => {
                if self.pools.is_empty() {
                    return;
                }
                let n = self.pools.len();
                let annotations = &mut self.pools[i % n].annotations;
                match on {
                    true => annotations.insert(
                        naming::ANNOTATION_MAINTENANCE_WINDOW.into(),
                        r#"{"schedule": "0 * * * *", "duration": "10m"}"#.into(),
                    ),
                    false => annotations.remove(naming::ANNOTATION_MAINTENANCE_WINDOW),
                };
            }
            Event::AddPool => self.add_pool(),
            Event::RemovePool(i) if !self.pools.is_empty() => {
                let n = self.pools.len();
                let gone = self.pools.remove(i % n);
                self.nodes.remove(&gone.name);
            }
            Event::Values(v) => {
                self.app.spec.values = Some(json!({ "controller": { "replicas": 1 }, "v": v }));
                self.app.metadata.generation = self.app.metadata.generation.map(|g| g + 1);
            }
            Event::RemovePool(_) => {}
        }
    }

    fn owned(&self) -> Vec<Arc<ObservedRelease>> {
        (self.releases.values())
            .map(|live| ObservedRelease {
                live: Some(PackedJson::from_value(live)),
                ..ObservedRelease::from_value(live).unwrap()
            })
            .map(Arc::new)
            .collect()
    }

    /// `f` of the input of a reconcile now, with `memo`.
    fn with_input<T>(&self, memo: Option<&Memo>, f: impl FnOnce(&PlanInput) -> T) -> T {
        let others = ListedReleases::default();
        f(&PlanInput {
            history: None,
            nodes: Some(&self.nodes),
            app: &self.app,
            pools: &self.pools.iter().collect::<Vec<_>>(),
            owned: self.owned(),
            others: &others,
            now: Time(self.now),
            chart_ref: None,
            chart: None,
            hold: None,
            unserved: None,
            clock_since: None,
            memo,
            first_install_alone: true,
            analysis: None,
            rendering_changes: Default::default(),
        })
    }

    /// The plan carried out, as the API server and helm-controller would
    /// (a release written is Ready at once), and the status written back
    /// when it changed but for timestamps, as the controller writes it.
    fn carry_out(&mut self, plan: &Plan) {
        for desired in &plan.apply {
            let mut live = desired.object();
            live["metadata"]["resourceVersion"] = json!(self.bump());
            live["metadata"]["generation"] = json!(1);
            live["status"] = self.status(true);
            self.releases.insert(desired.name.clone(), live);
        }
        for name in &plan.prune {
            self.releases.remove(name);
        }
        for mark in &plan.ready_marks {
            let Some(live) = self.releases.get_mut(&mark.release) else {
                continue;
            };
            let annotations = &mut live["metadata"]["annotations"];
            match &mark.at {
                Some(at) => annotations[crate::api::naming::ANNOTATION_READY_AT] = json!(at),
                None => {
                    _ = annotations
                        .as_object_mut()
                        .map(|a| a.remove(crate::api::naming::ANNOTATION_READY_AT))
                }
            }
            let rv = self.bump();
            self.releases.get_mut(&mark.release).unwrap()["metadata"]["resourceVersion"] = json!(rv);
        }
        let before = self.app.status.clone().unwrap_or_default();
        let after = plan.status();
        if !crate::reconcile::fleet::events::same_ignoring_timestamps(&before, &after) {
            self.app.status = Some(after);
            self.app.metadata.resource_version = Some(self.bump());
        }
    }
}

/// Reconciles the world through `events` as the controller does, and
/// checks each reconcile that ends at rest against the plan from scratch.
/// How many ended at rest.
fn at_rest_misses_nothing(pools: usize, events: &[Event]) -> Result<usize, TestCaseError> {
    let mut world = World::new(pools);
    let mut memo: Option<Memo> = None;
    let mut rested = 0;
    for event in events {
        let kept = memo.as_ref().and_then(|m| m.rest());
        if let Some(kept) = kept.filter(|kept| world.with_input(None, |input| at_rest(input, kept)).is_some())
        {
            rested += 1;
            let (scratch, left) = world.with_input(None, |input| {
                let scratch = plan(input);
                let left = rest::of(input, &scratch);
                (scratch, left)
            });
            prop_assert!(
                left.is_some(),
                "at rest after {event:?}, but the plan from scratch is not: {scratch:?}"
            );
            // What the plan from scratch foresees before the rest ends
            // (a window opening, a soak ending) changes nothing either: at
            // that very time, the plan is still at rest with the status.
            let horizon = scratch.requeue_after.map(|after| world.now + after);
            if let Some(horizon) = horizon.filter(|h| *h < kept.until()) {
                let then = world.at(horizon);
                let left = then.with_input(None, |input| rest::of(input, &plan(input)));
                prop_assert!(
                    left.is_some(),
                    "at {horizon}, foreseen after {event:?}, the plan is no longer at rest"
                );
            }
        } else {
            let with_memo = world.with_input(memo.as_ref(), plan);
            let from_scratch = world.with_input(None, plan);
            prop_assert_eq!(&with_memo, &from_scratch, "after {:?}", event);
            world.carry_out(&with_memo);
            memo = Some(with_memo.memo);
        }
        world.happen(event);
    }
    Ok(rested)
}

#[test]
fn a_reconcile_at_rest_misses_nothing_the_plan_from_scratch_would_do() {
    let rested = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = TestRunner::new(ProptestConfig::with_cases(500));
    let scenario = (0..5usize, prop::collection::vec(event(), 1..40));
    let result = runner.run(&scenario, |(pools, events)| {
        let n = at_rest_misses_nothing(pools, &events)?;
        rested.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Not vacuous: the sequences drawn rest often enough to have been judged.
    let rested = rested.into_inner();
    assert!(rested >= 100, "only {rested} reconciles ended at rest over 150 sequences");
}

/// Sequences the property found, kept: a soak that ends a second before
/// the rollout asked to be woken (the rest held past it, and the next
/// pool's write waited), and a halted rollout woken for a window's opening
/// that changes nothing.
#[test]
fn the_sequences_the_property_found_hold() {
    use Event::*;
    let soak_ends = [
        AddPool,
        Tick(126),
        Tick(474),
        Window(3, true),
        RemovePool(0),
        Values(0),
        Ready(2, false),
        Ready(0, true),
        Tick(30),
        Tick(1),
    ];
    let halted_window = [
        Tick(372),
        Tick(257),
        Tick(878),
        Window(0, true),
        Tick(527),
        Tick(509),
        Values(0),
        Ready(1, false),
        Tick(661),
        Tick(467),
        Tick(529),
        Tick(1),
    ];
    for (pools, events) in [(3, &soak_ends[..]), (4, &halted_window[..])] {
        if let Err(e) = at_rest_misses_nothing(pools, events) {
            panic!("{e}");
        }
    }
}

/// The property above is not vacuous: a fleet rolled out and left alone
/// rests, and the clock alone ends the rest when a soak ends.
#[test]
fn a_fleet_left_alone_rests_until_the_clock_changes_something() {
    let events = [1, 1, 5, 5, 5, 5, 100].map(Event::Tick);
    let rested = at_rest_misses_nothing(3, &events).unwrap();
    assert!(rested >= 3, "only {rested} reconciles ended at rest");

    // Written and Ready now: the first pool soaks for 30 s.
    let mut world = World::new(1);
    let first = world.with_input(None, plan);
    world.carry_out(&first);
    world.now += SignedDuration::from_secs(1);
    let soaking = world.with_input(None, plan);
    world.carry_out(&soaking);
    let settled = world.with_input(None, plan);
    let kept = settled.memo.rest().cloned().expect("a soak that writes nothing is at rest");
    let at = world.with_input(None, |input| at_rest(input, &kept)).expect("nothing changed");
    let left = at.requeue_after;
    assert!(left <= Duration::from_secs(30) && left >= Duration::from_secs(28), "{left:?}");
    world.now += SignedDuration::from_secs(31);
    assert_eq!(world.with_input(None, |input| at_rest(input, &kept)), None, "the soak ended");
    let done = world.with_input(None, plan);
    assert_ne!(
        done.status().rollout.map(|r| r.phase),
        settled.status().rollout.map(|r| r.phase),
        "the plan after the soak is another"
    );
}

/// Any change of the input ends the rest: a pool's label, a release's
/// version, a pool's nodes, the application.
#[test]
fn any_change_of_the_input_ends_the_rest() {
    let mut world = World::new(2);
    for _ in 0..3 {
        let planned = world.with_input(None, plan);
        world.carry_out(&planned);
        world.now += SignedDuration::from_secs(40);
    }
    let settled = world.with_input(None, plan);
    let kept = settled.memo.rest().cloned().expect("the fleet is rolled out and at rest");
    let rests = |world: &World| world.with_input(None, |input| at_rest(input, &kept)).is_some();
    assert!(rests(&world));
    type Change = (&'static str, fn(&mut World));
    let changes: [Change; 4] = [
        ("a pool's label", |w| {
            w.pools[0].labels.insert("zone".into(), "a".into());
        }),
        ("a release's version", |w| w.happen(&Event::Ready(1, true))),
        ("a pool's nodes", |w| w.happen(&Event::Node(0, false))),
        ("the application", |w| {
            w.app.metadata.annotations = Some([("note".to_string(), "x".to_string())].into());
        }),
    ];
    for (what, change) in changes {
        let mut changed = world.at(world.now);
        change(&mut changed);
        assert!(!rests(&changed), "{what} changed, and the rest held");
    }
}
