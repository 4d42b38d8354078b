//! Planning with the last plan's memo is planning from scratch: over
//! random sequences of events (pools relabelled, annotated, marked,
//! moved, their health changed, added and removed; releases turning Ready
//! or not, edited by hand or deleted; the values, Flux's requests, the
//! shared chart and its schema, the shard label, suspension, the
//! application's name, namespace and uid changed; other HelmReleases
//! taking a release's name or its Helm release, which makes ours inert),
//! each plan with the memo equals the plan without one, and the memo
//! spares the pools nothing happened to. Leaving any input out of the
//! memo's key makes some sequence go wrong.
use super::*;
use crate::chart::schema::Chart;
use crate::chart::shared::{ChartKind, ChartRef};
use crate::pools::nodes::{Membership, SiteHealth};
use crate::reconcile::packed::PackedJson;
use crate::reconcile::plan::memo::dropping;
use proptest::prelude::*;
use proptest::test_runner::{RngAlgorithm, TestError, TestRng, TestRunner};

#[derive(Debug, Clone)]
enum Event {
    Relabel(usize),
    /// The pool's `owner` annotation, which the values read.
    Annotate(usize, u8),
    /// How the pool's nodes are marked: its kind's label, or another.
    Mark(usize, bool),
    /// A site's health: none said, healthy or not.
    Health(usize, Option<bool>),
    PoolNamespace(usize, u8),
    AddPool,
    RemovePool(usize),
    /// The release's status changes: Ready, or not.
    Status(usize, bool),
    /// A hand edit of one of our fields.
    HandEdit(usize),
    DeleteRelease(usize),
    Values(u8),
    Request(u8),
    /// The shared chart the releases point at: none, or one of two.
    SharedChart(u8),
    /// The chart's schema: none, one that takes any values, one that
    /// refuses the gold tier.
    Schema(u8),
    /// The shard label: none, or one of two.
    Shard(u8),
    Suspend(bool),
    /// Another HelmRelease takes a release's name (`true`) or the Helm
    /// release it drives (`false`, and the older wins: ours turns inert).
    Foreign(usize, bool),
    ForeignGone,
    Rename(u8),
    Move(u8),
    Uid(u8),
}

fn event() -> impl Strategy<Value = Event> {
    let pool = 0..8usize;
    prop_oneof![
        pool.clone().prop_map(Event::Relabel),
        (pool.clone(), 0..3u8).prop_map(|(i, n)| Event::Annotate(i, n)),
        (pool.clone(), any::<bool>()).prop_map(|(i, other)| Event::Mark(i, other)),
        (pool.clone(), any::<Option<bool>>()).prop_map(|(i, healthy)| Event::Health(i, healthy)),
        (pool.clone(), 0..2u8).prop_map(|(i, n)| Event::PoolNamespace(i, n)),
        Just(Event::AddPool),
        pool.clone().prop_map(Event::RemovePool),
        (pool.clone(), any::<bool>()).prop_map(|(i, ready)| Event::Status(i, ready)),
        pool.clone().prop_map(Event::HandEdit),
        pool.clone().prop_map(Event::DeleteRelease),
        (0..3u8).prop_map(Event::Values),
        (0..3u8).prop_map(Event::Request),
        (0..3u8).prop_map(Event::SharedChart),
        (0..3u8).prop_map(Event::Schema),
        (0..3u8).prop_map(Event::Shard),
        any::<bool>().prop_map(Event::Suspend),
        (pool, any::<bool>()).prop_map(|(i, name)| Event::Foreign(i, name)),
        Just(Event::ForeignGone),
        (0..2u8).prop_map(Event::Rename),
        (0..2u8).prop_map(Event::Move),
        (0..2u8).prop_map(Event::Uid),
    ]
}

/// The fleet as the cluster holds it between two plans.
struct World {
    app: NodePoolApplication,
    pools: Vec<Pool>,
    /// By release name: the object as the API server holds it.
    releases: BTreeMap<String, Value>,
    chart_ref: Option<ChartRef>,
    chart: Option<Chart>,
    others: ListedReleases,
    next_pool: usize,
    resource_version: u64,
}

impl World {
    fn new(pools: usize, gold: &[bool]) -> Self {
        let app = serde_json::from_value(json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "gw", "namespace": "edge", "uid": "u1", "generation": 1 },
            "spec": {
                "pools": { "selector": { "matchLabels": { "fleet": "x" } } },
                "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0",
                    "sourceRef": { "kind": "HelmRepository", "name": "fixtures" } } },
                "interval": "10m",
                "values": values(0),
                "overrides": [{ "pools": { "selector": { "matchLabels": { "tier": "gold" } } },
                                "values": { "replicas": 3 } }]
            }
        }))
        .unwrap();
        let mut world = World {
            app,
            pools: Vec::new(),
            releases: BTreeMap::new(),
            chart_ref: None,
            chart: None,
            others: ListedReleases::default(),
            next_pool: 0,
            resource_version: 0,
        };
        for i in 0..pools {
            world.add_pool(gold.get(i).copied().unwrap_or_default());
        }
        world
    }

    fn add_pool(&mut self, gold: bool) {
        let name = format!("p{}", self.next_pool);
        self.next_pool += 1;
        let tier = if gold { "gold" } else { "silver" };
        self.pools.push(Pool {
            labels: crate::pools::Labels::from_iter([
                ("fleet".to_string(), "x".to_string()),
                ("tier".to_string(), tier.to_string()),
            ]),
            annotations: [("owner".to_string(), "team-a".to_string())].into_iter().collect(),
            ..Pool::named(name)
        });
    }

    fn bump(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    fn nth_release(&self, i: usize) -> Option<String> {
        let names: Vec<&String> = self.releases.keys().collect();
        (!names.is_empty()).then(|| names[i % names.len()].clone())
    }

    fn nth_pool(&mut self, i: usize) -> Option<&mut Pool> {
        let n = self.pools.len();
        (n > 0).then(|| &mut self.pools[i % n])
    }

    /// Changes the release `i` as `change` says, as a new version of it.
    fn edit_release(&mut self, i: usize, change: impl FnOnce(&mut Value)) {
        if let Some(name) = self.nth_release(i) {
            let rv = self.bump();
            let release = self.releases.get_mut(&name).unwrap();
            release["metadata"]["resourceVersion"] = json!(rv);
            change(release);
        }
    }

    fn happen(&mut self, event: &Event) {
        match event {
            Event::Relabel(i) => {
                if let Some(pool) = self.nth_pool(*i) {
                    let flipped = if pool.labels.get("tier").unwrap() == "gold" {
                        "silver"
                    } else {
                        "gold"
                    };
                    pool.labels.insert("tier".into(), flipped.into());
                }
            }
            Event::Annotate(i, n) => {
                if let Some(pool) = self.nth_pool(*i) {
                    pool.annotations.insert("owner".into(), format!("team-{n}"));
                }
            }
            Event::Mark(i, other) => {
                if let Some(pool) = self.nth_pool(*i) {
                    pool.marks = match other {
                        true => Membership::Label("example.com/site".into()),
                        false => Pool::named("p").marks,
                    };
                }
            }
            Event::Health(i, healthy) => {
                if let Some(pool) = self.nth_pool(*i) {
                    pool.health = healthy.map(|healthy| SiteHealth { healthy, since: None });
                }
            }
            Event::PoolNamespace(i, n) => {
                if let Some(pool) = self.nth_pool(*i) {
                    pool.namespace = Some(format!("ns{n}"));
                }
            }
            Event::AddPool => self.add_pool(false),
            Event::RemovePool(i) if !self.pools.is_empty() => {
                let n = self.pools.len();
                self.pools.remove(i % n);
            }
            Event::Status(i, ready) => self.edit_release(*i, |r| r["status"] = status(*ready)),
            Event::HandEdit(i) => {
                self.edit_release(*i, |r| r["spec"]["values"]["tier"] = json!("edited by hand"))
            }
            Event::DeleteRelease(i) => {
                if let Some(name) = self.nth_release(*i) {
                    self.releases.remove(&name);
                }
            }
            Event::Values(v) => self.app.spec.values = Some(values(*v)),
            Event::Request(token) => {
                let annotations = self.app.metadata.annotations.get_or_insert_with(Default::default);
                annotations.insert(naming::ANNOTATION_REQUESTED_AT.into(), format!("t{token}"));
            }
            Event::SharedChart(n) => {
                self.chart_ref = (*n > 0).then(|| ChartRef {
                    kind: ChartKind::HelmChart,
                    name: format!("gw-{n}"),
                    namespace: "flux-system".into(),
                })
            }
            Event::Schema(n) => self.chart = schema(*n),
            Event::Shard(n) => {
                let labels = self.app.metadata.labels.get_or_insert_with(Default::default);
                match n {
                    0 => labels.remove(naming::LABEL_SHARD),
                    n => labels.insert(naming::LABEL_SHARD.into(), format!("shard{n}")),
                };
            }
            Event::Suspend(suspended) => self.app.spec.suspend = Some(*suspended),
            Event::Foreign(i, by_name) => {
                let Some(name) = self.nth_release(*i) else {
                    return;
                };
                let driven = naming::helm_release_of(&self.releases[&name]);
                match (by_name, driven) {
                    (true, _) => {
                        self.others.names.insert(name);
                    }
                    (false, Some(key)) => {
                        let older = TakenRelease {
                            name: "by-hand".into(),
                            namespace: None,
                            application: Some("other".into()),
                            created: Some("2000-01-01T00:00:00Z".into()),
                        };
                        self.others.taken.insert(key, older);
                    }
                    (false, None) => {}
                }
            }
            Event::ForeignGone => self.others = ListedReleases::default(),
            Event::Rename(n) => self.app.metadata.name = Some(["gw", "gx"][usize::from(*n % 2)].into()),
            Event::Move(n) => {
                self.app.metadata.namespace = Some(["edge", "core"][usize::from(*n % 2)].into())
            }
            Event::Uid(n) => self.app.metadata.uid = Some(format!("u{n}")),
            _ => {}
        }
    }

    fn owned(&self) -> Vec<ObservedRelease> {
        self.releases
            .values()
            .map(|live| ObservedRelease {
                live: Some(PackedJson::from_value(live)),
                ..ObservedRelease::from_value(live).unwrap()
            })
            .collect()
    }

    fn plan(&self, memo: Option<&Memo>) -> Plan {
        plan(&PlanInput {
            history: None,
            nodes: None,
            app: &self.app,
            pools: &self.pools.iter().collect::<Vec<_>>(),
            owned: self.owned().into_iter().map(Arc::new).collect(),
            others: &self.others,
            now: now(),
            chart_ref: self.chart_ref.as_ref(),
            chart: self.chart.as_ref(),
            hold: None,
            unserved: None,
            clock_since: None,
            memo,
            first_install_alone: false,
            analysis: None,
            rendering_changes: Default::default(),
        })
    }

    /// The plan carried out, as the API server and helm-controller would.
    fn carry_out(&mut self, plan: &Plan) {
        for name in &plan.resume {
            self.mark(name, naming::ANNOTATION_SUSPENDED_WITH_APPLICATION, None);
        }
        for desired in &plan.apply {
            let mut live = desired.object();
            live["metadata"]["resourceVersion"] = json!(self.bump());
            live["metadata"]["generation"] = json!(1);
            live["status"] = status(true);
            self.releases.insert(desired.name.clone(), live);
        }
        for name in &plan.suspend {
            self.mark(name, naming::ANNOTATION_SUSPENDED_WITH_APPLICATION, Some("true"));
        }
        for (name, why) in &plan.inert {
            self.mark(name, naming::ANNOTATION_INERT, Some(why));
        }
        for name in &plan.prune {
            self.releases.remove(name);
        }
    }

    /// Suspends the release `name` under `annotation`, or takes that back.
    fn mark(&mut self, name: &str, annotation: &str, value: Option<&str>) {
        let rv = self.bump();
        let Some(release) = self.releases.get_mut(name) else {
            return;
        };
        release["metadata"]["resourceVersion"] = json!(rv);
        let annotations = release["metadata"]["annotations"].as_object_mut().unwrap();
        match value {
            Some(value) => {
                annotations.insert(annotation.into(), json!(value));
                release["spec"]["suspend"] = json!(true);
            }
            None => {
                annotations.remove(annotation);
                if let Some(spec) = release["spec"].as_object_mut() {
                    spec.remove("suspend");
                }
            }
        }
    }
}

/// The application's values: every pool's tier and owner, and the
/// application's namespace, read by templates.
fn values(v: u8) -> Value {
    json!({ "tier": "{{pool.labels.tier}}", "owner": "{{pool.annotations.owner}}",
            "namespace": "{{app.namespace}}", "v": v })
}

/// No chart known (0), a chart whose schema takes any values (1), or one
/// that refuses the gold tier (2).
fn schema(n: u8) -> Option<Chart> {
    let schema = match n {
        0 => return None,
        1 => json!({ "type": "object" }),
        _ => json!({ "type": "object", "properties": { "tier": { "enum": ["silver"] } } }),
    };
    Some(Chart {
        compiled: Default::default(),
        name: "ingress-gateway".into(),
        version: "1.0.0".into(),
        values: json!({}),
        schema: Some(schema),
    })
}

fn status(ready: bool) -> Value {
    json!({ "observedGeneration": 1, "conditions": [{
        "type": "Ready", "status": if ready { "True" } else { "False" },
        "reason": if ready { "UpgradeSucceeded" } else { "UpgradeFailed" },
        "message": "as drawn", "observedGeneration": 1
    }]})
}

/// Plans the world through `events`, with the memo and without, and
/// checks that the two agree at every step.
fn plans_agree(pools: usize, gold: &[bool], events: &[Event]) -> Result<(), TestCaseError> {
    let mut world = World::new(pools, gold);
    let mut memo: Option<Memo> = None;
    for event in events {
        let with_memo = world.plan(memo.as_ref());
        let from_scratch = world.plan(None);
        prop_assert_eq!(&with_memo, &from_scratch, "after {:?}", event);
        world.carry_out(&with_memo);
        memo = Some(with_memo.memo);
        world.happen(event);
    }
    Ok(())
}

type Scenario = (usize, Vec<bool>, Vec<Event>);

fn scenario() -> impl Strategy<Value = Scenario> {
    (0..6usize, prop::collection::vec(any::<bool>(), 6), prop::collection::vec(event(), 1..20))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn a_plan_with_the_memo_is_the_plan_from_scratch((pools, gold, events) in scenario()) {
        plans_agree(pools, &gold, &events)?;
    }
}

#[test]
fn leaving_any_input_out_of_the_memos_key_makes_the_plans_differ() {
    let runner = |cases| {
        let config = ProptestConfig {
            cases,
            max_shrink_iters: 0,
            failure_persistence: None,
            ..ProptestConfig::default()
        };
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
    };
    let check = |(pools, gold, events): Scenario| plans_agree(pools, &gold, &events);
    runner(20).run(&scenario(), check).expect("with every input, the plans agree");
    let inputs = dropping::inputs();
    let expected = [
        "app.chartRef",
        "app.name",
        "app.namespace",
        "app.requests",
        "app.shard",
        "app.spec",
        "pool.annotations",
        "pool.labels",
        "pool.marks",
    ];
    assert_eq!(inputs.iter().copied().collect::<Vec<_>>(), expected, "the key's inputs");
    for input in inputs {
        let found = dropping::without(input, || runner(3000).run(&scenario(), check));
        assert!(matches!(found, Err(TestError::Fail(..))), "{input} left out, and every plan agreed");
    }
}

#[test]
fn the_memo_spares_the_pools_nothing_happened_to() {
    let mut world = World::new(4, &[true, false, true, false]);
    let first = world.plan(None);
    assert_eq!(first.apply.len(), 4);
    assert!(first.memo.is_empty(), "nothing was in place to remember");
    world.carry_out(&first);
    let settled = world.plan(None);
    assert_eq!((settled.apply.len(), settled.memo.len()), (0, 4), "every release holds its spec");
    // One release's status changes: that pool alone is not recalled.
    world.happen(&Event::Status(1, false));
    let memo = settled.memo;
    let changed = world.releases.keys().nth(1).cloned().unwrap();
    let recalled: Vec<&Pool> = world
        .pools
        .iter()
        .filter(|p| {
            let observed = world.owned().into_iter().find(|o| o.pool.as_deref() == Some(p.name.as_str()));
            let app = build::app_info_for_tests(&world.app);
            memo.recall(app, p, crate::reconcile::plan::memo::pool_inputs(p), observed.as_ref())
                .is_some()
        })
        .collect();
    assert_eq!(recalled.len(), 3, "the other three are recalled");
    assert!(recalled.iter().all(|p| !changed.contains(&format!("-{}-", p.name))), "{changed}");
    // Anything in the application's inputs, and every pool is built again.
    world.happen(&Event::Values(2));
    let app = build::app_info_for_tests(&world.app);
    let observed = world.owned();
    assert!(world.pools.iter().all(|p| {
        let o = observed.iter().find(|o| o.pool.as_deref() == Some(p.name.as_str()));
        memo.recall(app, p, crate::reconcile::plan::memo::pool_inputs(p), o).is_none()
    }));
}
