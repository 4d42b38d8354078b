//! `nodepool-fanout get`: one line per pool of each application, as `flux
//! get` prints one per Flux object: the pool, its Ready nodes, its
//! HelmRelease, the state Flux reports of it, the chart version and Helm
//! revision it runs, and Flux's message. Each line is a pool of the
//! application's fleet report ([`crate::reconcile::fleet`]), as the
//! controller's status and Events read it, built from the cluster.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use crate::api::{naming, NodePoolApplication, PoolKind};
use crate::pools::nodes::{self, Membership, NodeCount};
use crate::reconcile::fleet::{self, FleetReport, PoolReport};
use crate::reconcile::observe::helmrelease_resource;
use crate::reconcile::plan::{self, ObservedRelease};
use crate::reconcile::release_state::{ReleaseState, ReleaseStatus};
use crate::reconcile::rollout::settings;
use k8s_openapi::jiff::Timestamp;

/// `get`'s flags.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// One application; every application of the namespace when not given.
    pub name: Option<String>,
    /// The namespace; the kubeconfig context's when not given.
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only pools whose release is not Ready (offline pools aside), and
    /// pools that have no release.
    #[arg(long)]
    pub failing: bool,
    /// `wide` adds the reason, the release's Helm name and whether it is
    /// suspended; `json` prints the rows as a JSON array.
    #[arg(short, long, value_enum)]
    pub output: Option<Output>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Wide,
    Json,
}

/// One pool of one application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRow {
    pub namespace: String,
    pub application: String,
    pub pool: String,
    /// Ready nodes out of the pool's nodes, e.g. `2/3`.
    pub nodes: String,
    /// The HelmRelease's name; empty when the pool has none.
    pub release: String,
    /// Ready, Progressing, Waiting, Failed, Stalled, Unknown or Offline.
    pub state: String,
    pub reason: String,
    pub chart_version: String,
    /// The Helm release's revision (its history's latest).
    pub revision: Option<i64>,
    pub message: String,
    pub suspended: bool,
    /// When the pool's last Ready node (or its site's control plane or
    /// connection) went down, while none is up; it reads `Offline` once it
    /// has been down for the application's `rollout.offlineAfter`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_since: Option<String>,
}

impl PoolRow {
    fn failing(&self) -> bool {
        !matches!(self.state.as_str(), "Ready" | "Offline")
    }
}

/// The rows of one application: its fleet report ([`observed_report`]),
/// a row per pool, with the Helm revision and suspension read from each
/// pool's HelmRelease.
pub fn rows(app: &NodePoolApplication, releases: &[Value], node_list: &[Node]) -> Vec<PoolRow> {
    rows_counted(app, releases, &node_counts(app, node_list), Timestamp::now())
}

/// As [`rows`], with each site's nodes (or control plane) counted already.
pub fn rows_counted(
    app: &NodePoolApplication,
    releases: &[Value],
    counts: &BTreeMap<String, NodeCount>,
    now: Timestamp,
) -> Vec<PoolRow> {
    let helm: BTreeMap<&str, Helm> = releases
        .iter()
        .filter_map(|r| Some((r.pointer("/metadata/name")?.as_str()?, Helm::of(r))))
        .collect();
    rows_of(app, &observed_report(app, releases, counts, now), &helm)
}

/// Each pool's nodes, as the controller counts them.
pub fn node_counts<'a>(
    app: &NodePoolApplication,
    node_list: impl IntoIterator<Item = &'a Node>,
) -> BTreeMap<String, NodeCount> {
    let membership = Membership::of(&app.spec.pools, app.spec.placement.node_label.as_deref());
    nodes::count(node_list, &membership)
}

/// What `get` reads of a HelmRelease itself, beside its row of the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Helm {
    /// The Helm release's revision (its history's latest).
    pub revision: Option<i64>,
    /// `spec.suspend`.
    pub suspended: bool,
}

impl Helm {
    fn of(release: &Value) -> Self {
        Self {
            revision: release.pointer("/status/history/0/version").and_then(Value::as_i64),
            suspended: release.pointer("/spec/suspend") == Some(&Value::Bool(true)),
        }
    }
}

/// A row per pool of the report, sorted by pool. A pool with no
/// HelmRelease (a config that fails, a rollout not yet there) reads
/// `None`; a release suspended before helm-controller ever acted on it
/// says so rather than `Unknown`, because it was told not to act.
pub fn rows_of(app: &NodePoolApplication, report: &FleetReport, helm: &BTreeMap<&str, Helm>) -> Vec<PoolRow> {
    let namespace = app.namespace().unwrap_or_default();
    let name = app.name_any();
    let mut rows: Vec<PoolRow> = report
        .pools
        .iter()
        .map(|p| {
            let release = helm.get(p.helm_release.as_str()).copied();
            let Helm { revision, suspended } = release.unwrap_or_default();
            let mut status = ReleaseStatus::clone(&p.status);
            let never_acted = suspended && status.state == ReleaseState::Unknown;
            if never_acted {
                status.reason = "Suspended".to_string();
                status.message = "suspended (spec.suspend): helm-controller does not act on it".to_string();
            }
            let state = match (release, never_acted) {
                (None, _) => "None",
                (Some(_), true) => "Suspended",
                (Some(_), false) => status.state.as_str(),
            };
            PoolRow {
                namespace: namespace.clone(),
                application: name.clone(),
                pool: p.pool.clone(),
                nodes: p.nodes.map(node_text).unwrap_or_else(|| "-".to_string()),
                release: release.map(|_| p.helm_release.clone()).unwrap_or_default(),
                state: state.to_string(),
                reason: status.reason,
                chart_version: status.chart_version.unwrap_or_default(),
                revision,
                message: status.message,
                suspended,
                down_since: p.nodes.filter(|n| n.offline()).and_then(|n| n.changed).map(|t| t.to_string()),
            }
        })
        .collect();
    rows.sort_by(|a, b| a.pool.cmp(&b.pool));
    rows
}

/// How the application's fleet stands, read from the cluster rather than
/// planned: each of its HelmReleases (those carrying its label) as the
/// controller's report reads a release it leaves as it is (pools that
/// reach into a sibling's instance failing, pools with no Ready node
/// offline once down for `rollout.offlineAfter` at `now`, as the rollout
/// counts them), and each pool the application's status lists without a
/// release, in the status's words. The application's status lists at
/// most 40 pools; the HelmReleases and Nodes hold the rest.
pub fn observed_report(
    app: &NodePoolApplication,
    releases: &[Value],
    counts: &BTreeMap<String, NodeCount>,
    now: Timestamp,
) -> FleetReport {
    let nodes_of = |pool: &str| counts.get(pool).copied().unwrap_or_default();
    let offline_after = app
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.offline_after.as_deref())
        .and_then(settings::parse_duration)
        .unwrap_or(settings::DEFAULT_OFFLINE_AFTER);
    // Down since an unknown time counts as offline now, as the rollout counts it.
    let offline = |count: NodeCount| {
        count.offline()
            && count
                .changed
                .is_none_or(|since| since.checked_add(offline_after).is_ok_and(|at| at <= now))
    };
    let observed: Vec<ObservedRelease> = releases.iter().filter_map(ObservedRelease::from_value).collect();
    let isolation: BTreeMap<String, std::sync::Arc<ReleaseStatus>> =
        plan::isolation_failures(&observed).into_iter().map(|o| (o.name, o.status)).collect();
    let mut pools: Vec<PoolReport> = observed
        .into_iter()
        .map(|o| {
            let pool = o.pool.unwrap_or_default();
            let count = nodes_of(&pool);
            let status = isolation.get(&o.name).cloned().unwrap_or(o.status);
            PoolReport {
                status: match offline(count) {
                    true => fleet::offline_status(ReleaseStatus::clone(&status), count, true).into(),
                    false => status,
                },
                pool,
                helm_release: o.name,
                rollout: None,
                nodes: Some(count),
            }
        })
        .collect();
    let with_release: BTreeSet<String> = pools.iter().map(|p| p.pool.clone()).collect();
    let listed = app.status.as_ref().map(|s| s.pools.as_slice()).unwrap_or_default();
    for p in listed.iter().filter(|p| !with_release.contains(&p.pool)) {
        pools.push(PoolReport {
            pool: p.pool.clone(),
            helm_release: p.helm_release.clone(),
            status: ReleaseStatus {
                state: ReleaseState::Waiting,
                reason: p.reason.clone(),
                message: p.message.clone(),
                chart_version: None,
                observed_latest: false,
                ready_since: None,
                installed_before: false,
            }
            .into(),
            rollout: None,
            nodes: Some(nodes_of(&p.pool)),
        });
    }
    pools.sort_by(|a, b| a.pool.cmp(&b.pool));
    FleetReport {
        pools,
        ..FleetReport::default()
    }
}

fn node_text(count: NodeCount) -> String {
    match count.total {
        0 => "-".to_string(),
        _ => count.to_string(),
    }
}

/// The rows as `kubectl get` prints a table: a header, columns padded to
/// their widest cell. The namespace and application columns appear when
/// the rows span several.
pub fn table(rows: &[PoolRow], wide: bool) -> String {
    let namespaces: BTreeSet<&str> = rows.iter().map(|r| r.namespace.as_str()).collect();
    let apps: BTreeSet<(&str, &str)> =
        rows.iter().map(|r| (r.namespace.as_str(), r.application.as_str())).collect();
    let mut header: Vec<&str> = Vec::new();
    if namespaces.len() > 1 {
        header.push("NAMESPACE");
    }
    if apps.len() > 1 {
        header.push("APPLICATION");
    }
    header.extend(["POOL", "NODES", "RELEASE", "STATE", "VERSION", "REVISION"]);
    if wide {
        header.extend(["REASON", "SUSPENDED"]);
    }
    header.push("MESSAGE");
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for r in rows {
        let mut cells: Vec<String> = Vec::new();
        if namespaces.len() > 1 {
            cells.push(r.namespace.clone());
        }
        if apps.len() > 1 {
            cells.push(r.application.clone());
        }
        cells.extend([
            r.pool.clone(),
            r.nodes.clone(),
            dash(&r.release),
            r.state.clone(),
            dash(&r.chart_version),
            r.revision.map_or("-".to_string(), |v| v.to_string()),
        ]);
        if wide {
            cells.extend([dash(&r.reason), r.suspended.to_string()]);
        }
        // One line a pool: Flux's messages may hold newlines.
        cells.push(r.message.split_whitespace().collect::<Vec<_>>().join(" "));
        lines.push(cells);
    }
    let columns = lines[0].len();
    let widths: Vec<usize> = (0..columns)
        .map(|i| lines.iter().map(|l| l[i].chars().count()).max().unwrap_or_default())
        .collect();
    let mut out = String::new();
    for line in lines {
        let mut text = String::new();
        for (i, cell) in line.iter().enumerate() {
            if i + 1 == columns {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}   ", width = widths[i]));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

fn dash(text: &str) -> String {
    match text.is_empty() {
        true => "-".to_string(),
        false => text.to_string(),
    }
}

/// Keeps what `--failing` asks for.
pub fn only_failing(rows: Vec<PoolRow>) -> Vec<PoolRow> {
    rows.into_iter().filter(PoolRow::failing).collect()
}

/// Reads the applications, their releases and the Nodes, and returns the
/// rows: every application of the namespace (or of all, with `-A`), or
/// the one named.
pub async fn fetch(client: &Client, args: &GetArgs) -> Result<Vec<PoolRow>, kube::Error> {
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let apps: Api<NodePoolApplication> = match args.all_namespaces {
        true => Api::all(client.clone()),
        false => Api::namespaced(client.clone(), &namespace),
    };
    let selected: Vec<NodePoolApplication> = match &args.name {
        Some(name) => vec![apps.get(name).await?],
        None => apps.list(&ListParams::default()).await?.items,
    };
    let node_list = Api::<Node>::all(client.clone()).list(&ListParams::default()).await?.items;
    let mut by_app: BTreeMap<(String, String), Vec<PoolRow>> = BTreeMap::new();
    for app in &selected {
        let rows = app_rows(client, app, &node_list).await?;
        by_app.insert((app.namespace().unwrap_or_default(), app.name_any()), rows);
    }
    Ok(by_app.into_values().flatten().collect())
}

/// The rows of one application, read from the cluster: its HelmReleases
/// (those it is the owner of), and its pools' nodes among `node_list` (or
/// its sites' ClusterProfiles).
pub async fn app_rows(
    client: &Client,
    app: &NodePoolApplication,
    node_list: &[Node],
) -> Result<Vec<PoolRow>, kube::Error> {
    let app_namespace = app.namespace().unwrap_or_default();
    let releases: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &app_namespace, &helmrelease_resource());
    let owned = releases
        .list(&ListParams::default().labels(&format!(
            "{}={}",
            naming::LABEL_APPLICATION,
            naming::label_value(&app.name_any())
        )))
        .await?;
    let uid = app.uid();
    let values: Vec<Value> = owned
        .items
        .into_iter()
        // The label value may be cut: the owner reference decides.
        .filter(|r| r.owner_references().iter().any(|o| Some(&o.uid) == uid.as_ref()))
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
    let counts = match app.spec.pools.kind {
        PoolKind::ClusterProfile => site_counts(client, &app_namespace).await?,
        _ => node_counts(app, node_list),
    };
    Ok(rows_counted(app, &values, &counts, Timestamp::now()))
}

/// The health of the site clusters of `namespace`, from their
/// ClusterProfiles; none when the cluster serves no ClusterProfile API.
async fn site_counts(client: &Client, namespace: &str) -> Result<BTreeMap<String, NodeCount>, kube::Error> {
    let objects = &crate::pools::kind::CLUSTER_PROFILE;
    let Ok(group) = kube::discovery::group(client, objects.group()).await else {
        return Ok(BTreeMap::new());
    };
    let Some((resource, _)) = group.recommended_kind(objects.kind()) else {
        return Ok(BTreeMap::new());
    };
    let profiles: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let listed = profiles.list(&ListParams::default()).await?.items;
    let sites: Vec<crate::pools::Pool> =
        listed.iter().map(|p| crate::pools::Pool::from_object(objects, p)).collect();
    Ok(nodes::count_sites(&sites))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(status: Value) -> NodePoolApplication {
        serde_json::from_value(json!({
            "apiVersion": "apps.fanout.dev/v1alpha1", "kind": "NodePoolApplication",
            "metadata": { "name": "gw", "namespace": "edge", "uid": "u1" },
            "spec": { "pools": { "names": ["a", "b", "c", "d"] },
                      "chart": { "spec": { "chart": "ingress-gateway",
                          "sourceRef": { "kind": "HelmRepository", "name": "fixtures" } } },
                      "interval": "10m" },
            "status": status
        }))
        .unwrap()
    }

    fn release(pool: &str, ready: &str, reason: &str, message: &str, revision: i64) -> Value {
        json!({
            "metadata": { "name": format!("gw-{pool}-1234"), "generation": 2,
                          "annotations": { naming::ANNOTATION_POOL_NAME: pool } },
            "spec": {},
            "status": {
                "observedGeneration": 2,
                "conditions": [{ "type": "Ready", "status": ready, "reason": reason, "message": message,
                                 "observedGeneration": 2 }],
                "history": [{ "chartVersion": "1.1.0", "version": revision }]
            }
        })
    }

    fn node(name: &str, pool: &str, ready: bool) -> Node {
        serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "apps.openyurt.io/nodepool": pool } },
            "status": { "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] }
        }))
        .unwrap()
    }

    fn fleet() -> Vec<PoolRow> {
        let app = app(json!({ "pools": [
            { "pool": "d", "helmRelease": "gw-d-5678", "ready": "False", "reason": "InvalidPoolConfig",
              "message": "overrides[0].values: pool.labels.version is not set" }
        ] }));
        let releases = [
            release("a", "True", "UpgradeSucceeded", "Helm upgrade succeeded", 3),
            release("b", "False", "UpgradeFailed", "Helm upgrade failed:\n  timed out", 4),
            release("c", "False", "UpgradeFailed", "timed out waiting for the condition", 2),
        ];
        let nodes = [
            node("a0", "a", true),
            node("a1", "a", false),
            node("b0", "b", true),
            node("c0", "c", false),
        ];
        rows(&app, &releases, &nodes)
    }

    #[test]
    fn pools_sharing_an_object_read_as_the_status_says() {
        let app = app(json!({ "pools": [] }));
        let mut releases = [
            release("a", "True", "InstallSucceeded", "Helm install succeeded", 1),
            release("b", "True", "InstallSucceeded", "Helm install succeeded", 1),
            release("c", "True", "InstallSucceeded", "Helm install succeeded", 1),
        ];
        for release in &mut releases[..2] {
            release["status"]["inventory"] =
                json!({ "entries": [{ "id": "_nginx_networking.k8s.io_IngressClass", "v": "v1" }] });
        }
        let nodes = [
            node("a0", "a", true),
            node("b0", "b", true),
            node("c0", "c", true),
        ];
        let rows = rows(&app, &releases, &nodes);
        let states: Vec<(&str, &str)> = rows.iter().map(|r| (r.state.as_str(), r.reason.as_str())).collect();
        assert_eq!(
            states,
            [
                ("Failed", "SharedObject"),
                ("Failed", "SharedObject"),
                ("Ready", "InstallSucceeded")
            ]
        );
        assert!(rows[0].message.contains("is held by the releases of pools b too"), "{}", rows[0].message);
    }

    #[test]
    fn one_row_per_pool_with_nodes_state_version_and_revision() {
        let rows = fleet();
        let pools: Vec<&str> = rows.iter().map(|r| r.pool.as_str()).collect();
        assert_eq!(pools, ["a", "b", "c", "d"]);
        let a = &rows[0];
        assert_eq!(
            (a.nodes.as_str(), a.state.as_str(), a.chart_version.as_str(), a.revision),
            ("1/2", "Ready", "1.1.0", Some(3))
        );
        assert_eq!(rows[1].state, "Failed");
        // Every node of c is down: an offline site, not a failed release.
        assert_eq!((rows[2].nodes.as_str(), rows[2].state.as_str()), ("0/1", "Offline"));
        // d has no release: its config fails, as the status says.
        assert_eq!((rows[3].release.as_str(), rows[3].state.as_str()), ("", "None"));
        assert!(rows[3].message.contains("pool.labels.version"));
    }

    #[test]
    fn a_release_suspended_before_flux_acted_on_it_says_suspended() {
        let app = app(json!({}));
        let mut never_installed = release("a", "True", "x", "x", 1);
        never_installed["spec"]["suspend"] = json!(true);
        never_installed["status"] = json!({});
        let mut installed = release("b", "True", "UpgradeSucceeded", "Helm upgrade succeeded", 3);
        installed["spec"]["suspend"] = json!(true);
        let rows = rows(&app, &[never_installed, installed], &[]);
        assert_eq!((rows[0].state.as_str(), rows[0].reason.as_str()), ("Suspended", "Suspended"));
        assert!(rows[0].message.contains("spec.suspend"), "{}", rows[0].message);
        // Installed before it was suspended: Flux's verdict stands, marked suspended.
        assert_eq!((rows[1].state.as_str(), rows[1].suspended), ("Ready", true));
    }

    #[test]
    fn failing_keeps_the_pools_that_need_looking_at() {
        let failing: Vec<String> = only_failing(fleet()).into_iter().map(|r| r.pool).collect();
        assert_eq!(failing, ["b", "d"], "offline and ready pools are not failing");
    }

    #[test]
    fn the_table_is_aligned_one_line_a_pool() {
        let text = table(&fleet(), false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].starts_with("POOL   NODES   RELEASE"), "{}", lines[0]);
        assert!(!lines[0].contains("APPLICATION") && !lines[0].contains("NAMESPACE"), "one application");
        let column = lines[0].find("STATE").unwrap();
        for line in &lines[1..] {
            assert!(line.len() > column, "{line}");
        }
        assert_eq!(&lines[2][column..column + 6], "Failed");
        assert!(lines[2].ends_with("Helm upgrade failed: timed out"), "newlines folded: {}", lines[2]);
        assert!(lines[4].contains(" -  "), "no release, no version: {}", lines[4]);
        let wide = table(&fleet(), true);
        let header = wide.lines().next().unwrap();
        assert!(header.find("REASON") < header.find("SUSPENDED") && header.contains("REASON"), "{wide}");
        assert!(wide.lines().nth(2).unwrap().contains("UpgradeFailed"), "{wide}");
    }

    #[test]
    fn several_applications_are_told_apart() {
        let mut rows = fleet();
        rows[0].application = "other".into();
        rows[1].namespace = "site".into();
        let header = table(&rows, false).lines().next().unwrap().to_string();
        assert!(header.starts_with("NAMESPACE   APPLICATION   POOL"), "{header}");
    }

    #[test]
    fn json_keeps_every_field() {
        let text = serde_json::to_value(fleet()).unwrap();
        assert_eq!(text[0]["chartVersion"], "1.1.0");
        assert_eq!(text[0]["revision"], 3);
        assert_eq!(text[3]["revision"], Value::Null);
    }
}
