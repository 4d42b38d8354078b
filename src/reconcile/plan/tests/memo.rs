//! Planning with the last plan's memo is planning from scratch: over
//! random sequences of events (pools relabelled, added and removed,
//! releases turning Ready or not, edited by hand or deleted, the values
//! and Flux's requests changed), each plan with the memo equals the plan
//! without one, and the memo spares the pools nothing happened to.
use super::*;
use crate::reconcile::packed::PackedJson;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Event {
    Relabel(usize),
    AddPool,
    RemovePool(usize),
    /// The release's status changes: Ready, or not.
    Status(usize, bool),
    /// A hand edit of one of our fields.
    HandEdit(usize),
    DeleteRelease(usize),
    Values(u8),
    Request(u8),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (0..8usize).prop_map(Event::Relabel),
        Just(Event::AddPool),
        (0..8usize).prop_map(Event::RemovePool),
        (0..8usize, any::<bool>()).prop_map(|(i, ready)| Event::Status(i, ready)),
        (0..8usize).prop_map(Event::HandEdit),
        (0..8usize).prop_map(Event::DeleteRelease),
        (0..3u8).prop_map(Event::Values),
        (0..3u8).prop_map(Event::Request),
    ]
}

/// The fleet as the cluster holds it between two plans.
struct World {
    app: NodePoolApplication,
    pools: Vec<Pool>,
    /// By release name: the object as the API server holds it.
    releases: BTreeMap<String, Value>,
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
                "values": { "tier": "{{pool.labels.tier}}", "v": 0 },
                "overrides": [{ "pools": { "selector": { "matchLabels": { "tier": "gold" } } },
                                "values": { "replicas": 3 } }]
            }
        }))
        .unwrap();
        let mut world = World {
            app,
            pools: Vec::new(),
            releases: BTreeMap::new(),
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
            labels: [
                ("fleet".to_string(), "x".to_string()),
                ("tier".to_string(), tier.to_string()),
            ]
            .into(),
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

    fn happen(&mut self, event: &Event) {
        match event {
            Event::Relabel(i) if !self.pools.is_empty() => {
                let n = self.pools.len();
                let labels = &mut self.pools[i % n].labels;
                let flipped = if labels["tier"] == "gold" {
                    "silver"
                } else {
                    "gold"
                };
                labels.insert("tier".into(), flipped.into());
            }
            Event::AddPool => self.add_pool(false),
            Event::RemovePool(i) if !self.pools.is_empty() => {
                let n = self.pools.len();
                self.pools.remove(i % n);
            }
            Event::Status(i, ready) => {
                if let Some(name) = self.nth_release(*i) {
                    let rv = self.bump();
                    let release = self.releases.get_mut(&name).unwrap();
                    release["metadata"]["resourceVersion"] = json!(rv);
                    release["status"] = status(*ready);
                }
            }
            Event::HandEdit(i) => {
                if let Some(name) = self.nth_release(*i) {
                    let rv = self.bump();
                    let release = self.releases.get_mut(&name).unwrap();
                    release["metadata"]["resourceVersion"] = json!(rv);
                    release["spec"]["values"]["tier"] = json!("edited by hand");
                }
            }
            Event::DeleteRelease(i) => {
                if let Some(name) = self.nth_release(*i) {
                    self.releases.remove(&name);
                }
            }
            Event::Values(v) => {
                self.app.spec.values = Some(json!({ "tier": "{{pool.labels.tier}}", "v": v }))
            }
            Event::Request(token) => {
                let annotations = self.app.metadata.annotations.get_or_insert_with(Default::default);
                annotations.insert(naming::ANNOTATION_REQUESTED_AT.into(), format!("t{token}"));
            }
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
        let others = ListedReleases::default();
        plan(&PlanInput {
            history: None,
            nodes: None,
            app: &self.app,
            pools: &self.pools.iter().collect::<Vec<_>>(),
            owned: self.owned().into_iter().map(Arc::new).collect(),
            others: &others,
            now: now(),
            chart_ref: None,
            chart: None,
            hold: None,
            unserved: None,
            clock_since: None,
            memo,
        })
    }

    /// The plan carried out, as the API server and helm-controller would.
    fn carry_out(&mut self, plan: &Plan) {
        for desired in &plan.apply {
            let mut live = desired.object();
            live["metadata"]["resourceVersion"] = json!(self.bump());
            live["metadata"]["generation"] = json!(1);
            live["status"] = status(true);
            self.releases.insert(desired.name.clone(), live);
        }
        for name in &plan.prune {
            self.releases.remove(name);
        }
    }
}

fn status(ready: bool) -> Value {
    json!({ "observedGeneration": 1, "conditions": [{
        "type": "Ready", "status": if ready { "True" } else { "False" },
        "reason": if ready { "UpgradeSucceeded" } else { "UpgradeFailed" },
        "message": "as drawn", "observedGeneration": 1
    }]})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    #[test]
    fn a_plan_with_the_memo_is_the_plan_from_scratch(
        pools in 0..6usize,
        gold in prop::collection::vec(any::<bool>(), 6),
        events in prop::collection::vec(event(), 1..14),
    ) {
        let mut world = World::new(pools, &gold);
        let mut memo: Option<Memo> = None;
        for event in &events {
            let with_memo = world.plan(memo.as_ref());
            let from_scratch = world.plan(None);
            prop_assert_eq!(&with_memo, &from_scratch, "after {:?}", event);
            world.carry_out(&with_memo);
            memo = Some(with_memo.memo);
            world.happen(event);
        }
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
