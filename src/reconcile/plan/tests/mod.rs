//! Unit tests of `plan`.

mod clusters;
mod drift;
mod isolation;
mod memo;
mod releases;
mod requests;
mod rest;
mod rollback;
mod rollout;
mod safety;
mod suspend;
mod windows;

use super::*;
use crate::api::{ConditionStatus, RolloutPhase};
use crate::pools::nodes::NodeCount;
use crate::reconcile::rollout::analysis::{Answer, Answers, PoolRecords, Records, Verdict};
use serde_json::{json, Value};
use std::time::Duration;

fn app(spec: Value) -> NodePoolApplication {
    let mut base = json!({
        "pools": { "selector": { "matchLabels": { "region": "east" } } },
        "chart": { "spec": { "chart": "ingress-gateway", "version": "1.0.0",
            "sourceRef": { "kind": "HelmRepository", "name": "fixtures", "namespace": "flux-system" } } },
        "interval": "10m",
        "values": { "controller": { "replicas": 1, "ingressClass": { "name": "{{pool.name}}" } } },
        "placement": { "valuesPaths": ["controller.nodeSelector"] }
    });
    for (k, v) in spec.as_object().unwrap() {
        base[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
        "metadata": { "name": "gw", "namespace": "edge", "uid": "uid-1", "generation": 3 },
        "spec": base
    }))
    .unwrap()
}

fn pool(name: &str, region: &str) -> Pool {
    Pool {
        name: name.into(),
        labels: crate::pools::Labels::from_iter([("region".to_string(), region.to_string())]),
        ..Pool::named(name)
    }
}

fn pools() -> Vec<Pool> {
    vec![
        pool("hangzhou", "east"),
        pool("shanghai", "east"),
        pool("beijing", "north"),
    ]
}

fn now() -> Time {
    Time("2030-01-01T00:00:00Z".parse().unwrap())
}

/// A plan's input, said by what each part is: the application `of`
/// which it is, the pools it is planned `over`, the releases it is
/// `owning`, and the names of HelmReleases it does not own `beside` it;
/// at [`now`], with the nodes not looked at and no chart to check values
/// against.
struct Scenario<'a> {
    app: &'a NodePoolApplication,
    pools: &'a [Pool],
    owned: Vec<ObservedRelease>,
    others: ListedReleases,
    nodes: Option<&'a BTreeMap<String, NodeCount>>,
    hold: Option<Hold>,
    unserved: Option<&'a str>,
    history: Option<&'a History>,
    /// As the controller plans: the first install goes alone. Off in
    /// the scenarios of other rules, which start from a fleet's releases.
    first_install_alone: bool,
    answers: Option<Answers<'a>>,
    /// `--rendering-changes`: `hold`, the controller's default.
    rendering_changes: crate::reconcile::plan::RenderingChanges,
    now: Time,
}

impl<'a> Scenario<'a> {
    fn of(app: &'a NodePoolApplication) -> Self {
        Scenario {
            app,
            pools: &[],
            owned: Vec::new(),
            others: ListedReleases::default(),
            nodes: None,
            hold: None,
            unserved: None,
            history: None,
            first_install_alone: false,
            answers: None,
            rendering_changes: Default::default(),
            now: now(),
        }
    }

    /// Planned at another time than [`now`].
    fn at(mut self, now: &str) -> Self {
        self.now = Time(now.parse().unwrap());
        self
    }

    /// Planned as the controller plans: the application's first install
    /// goes to one pool alone.
    fn planned_by_the_controller(mut self) -> Self {
        self.first_install_alone = true;
        self
    }

    /// Planned by a controller run with `--rendering-changes=rollout`.
    fn rolling_out_rendering_changes(mut self) -> Self {
        self.rendering_changes = crate::reconcile::plan::RenderingChanges::Rollout;
        self
    }

    /// What the metric checks answered, or what the status says of them.
    fn answered(mut self, answers: Answers<'a>) -> Self {
        self.answers = Some(answers);
        self
    }

    /// The application's revision history.
    fn recorded(mut self, history: &'a History) -> Self {
        self.history = Some(history);
        self
    }

    fn over(mut self, pools: &'a [Pool]) -> Self {
        self.pools = pools;
        self
    }

    fn owning(mut self, owned: Vec<ObservedRelease>) -> Self {
        self.owned = owned;
        self
    }

    /// HelmReleases of the namespace this application does not own.
    fn beside(mut self, names: &[&str]) -> Self {
        self.others.names.extend(names.iter().map(|s| s.to_string()));
        self
    }

    /// Helm releases other applications' HelmReleases drive:
    /// `(HelmRelease, Helm release in "edge", created)`.
    fn beside_drivers_of(mut self, taken: &[(&str, &str, &str)]) -> Self {
        for (release, helm_release, created) in taken {
            self.others.names.insert(release.to_string());
            let by = TakenRelease {
                name: release.to_string(),
                namespace: None,
                application: Some("other".into()),
                created: Some(created.to_string()),
            };
            self.others.taken.insert(("edge".to_string(), helm_release.to_string()), by);
        }
        self
    }

    /// Each pool's nodes, as observe counts them.
    fn with_nodes(mut self, nodes: &'a BTreeMap<String, NodeCount>) -> Self {
        self.nodes = Some(nodes);
        self
    }

    /// The chart holds every write back.
    fn held(mut self, hold: Hold) -> Self {
        self.hold = Some(hold);
        self
    }

    /// The cluster serves no API for the application's kind of pool.
    fn unserved(mut self, message: &'a str) -> Self {
        self.unserved = Some(message);
        self
    }

    fn plan(self) -> Plan {
        plan(&PlanInput {
            history: self.history,
            nodes: self.nodes,
            app: self.app,
            pools: &self.pools.iter().collect::<Vec<_>>(),
            owned: self.owned.into_iter().map(Arc::new).collect(),
            others: &self.others,
            now: self.now,
            chart_ref: None,
            chart: None,
            hold: self.hold,
            unserved: self.unserved,
            clock_since: None,
            memo: None,
            first_install_alone: self.first_install_alone,
            analysis: self.answers,
            rendering_changes: self.rendering_changes,
        })
    }
}

fn desired(plan: &Plan, pool: &str) -> Value {
    plan.apply
        .iter()
        .find(|d| d.pool == pool)
        .unwrap_or_else(|| panic!("{pool} not applied: {plan:#?}"))
        .object()
}

/// The application's condition of this type, if the plan sets one.
fn condition(plan: &Plan, kind: &str) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    plan.status().conditions.into_iter().find(|c| c.type_ == kind)
}

fn outcome<'a>(plan: &'a Plan, pool: &str) -> &'a Outcome {
    &plan.pools.iter().find(|p| p.pool == pool).unwrap().outcome
}

/// The record of `revision`, rolled out as the `number`th, with its outcome.
fn record(revision: &str, number: i64, outcome: Option<&str>) -> crate::reconcile::history::Recorded {
    crate::reconcile::history::Recorded {
        name: format!("gw-{revision}"),
        revision: revision.to_string(),
        number,
        outcome: outcome.map(String::from),
        halted_judgement: None,
        halted_because: None,
        chart_version: Some("1.0.0".into()),
        created: None,
        rolled_out_at: None,
    }
}

fn applied_pools(plan: &Plan) -> Vec<&str> {
    plan.apply.iter().map(|d| d.pool.as_str()).collect()
}

fn ready_release(name: &str, pool: &str, hash: &str) -> ObservedRelease {
    ObservedRelease {
        name: name.into(),
        uid: None,
        pool: Some(pool.into()),
        spec_hash: Some(hash.into()),
        resource_version: None,
        generation: Some(1),
        status: ReleaseStatus {
            state: ReleaseState::Ready,
            reason: "UpgradeSucceeded".into(),
            message: "ok".into(),
            chart_version: Some("1.0.0".into()),
            observed_latest: true,
            ready_since: None,
            ready_recorded: None,
            checks_recorded: None,
            deployed_before: true,
            deployed_version: None,
        }
        .into(),
        chart_ref: None,
        helm_release: None,
        created: None,
        written_at: None,
        resumed_at: None,
        stamps: Default::default(),
        live: None,
        suspended_with_app: false,
        inert: false,
        helm_revision: None,
        inventory: Vec::new(),
        unreachable_since: None,
        deleting: false,
        suspended: false,
        uninstall_blocked_since: None,
        cluster: None,
    }
}
