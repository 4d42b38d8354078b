//! `nodepool-fanout tree NAME`: what an application made, as `flux tree`
//! shows what a Kustomization applied: the application, the shared charts
//! it made (HelmCharts, pinned OCIRepositories), and under each the
//! HelmReleases that install it, with their pool and state. Releases that
//! name their chart themselves (`--shared-chart=false`) hang from the
//! application. A release's state is its pool's in the fleet report, as
//! `get` prints it.

use std::collections::BTreeMap;

use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;

use crate::api::{naming, NodePoolApplication};
use crate::chart::shared::{self as shared_chart, ChartKind};
use crate::reconcile::fleet::PoolRow;
use crate::reconcile::observe::helmrelease_resource;
use crate::reconcile::release::state::classify;

/// `tree`'s flags.
#[derive(Debug, clap::Args)]
pub struct TreeArgs {
    /// The application.
    pub name: String,
    /// Its namespace; the kubeconfig context's when not given.
    #[arg(short, long)]
    pub namespace: Option<String>,
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn state(object: &Value) -> String {
    let ready = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    match ready {
        Some(c) if c["status"] == "True" => "Ready".to_string(),
        Some(c) => format!("{} ({})", text(c, "/status"), text(c, "/reason")),
        None => "no status".to_string(),
    }
}

/// One release's line: its pool, and its state and version as the fleet
/// report's row says, or as Flux says when no row names it.
fn release_line(r: &Value, rows: &[PoolRow]) -> String {
    let pool = r
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(naming::ANNOTATION_POOL_NAME))
        .and_then(Value::as_str)
        .unwrap_or("?");
    let name = text(r, "/metadata/name");
    let (state, version) = match rows.iter().find(|row| row.release == name) {
        Some(row) => {
            let rollout = row.rollout.as_deref().map(|r| format!(" ({r})")).unwrap_or_default();
            (
                format!("{}{rollout}", row.state),
                Some(row.chart_version.clone()).filter(|v| !v.is_empty()),
            )
        }
        None => {
            let status = classify(r);
            (format!("{:?}", status.state), status.chart_version)
        }
    };
    format!(
        "HelmRelease/{}/{name}  pool {pool}  {state}{}",
        text(r, "/metadata/namespace"),
        version.map(|v| format!("  {v}")).unwrap_or_default()
    )
}

/// The tree as text. `charts` are the application's shared charts,
/// `releases` its HelmReleases, and `rows` its pools as the fleet report
/// says they stand (a release no row names reads as Flux says).
pub fn render_tree(app: &Value, charts: &[Value], releases: &[Value], rows: &[PoolRow]) -> String {
    let mut out = format!(
        "NodePoolApplication/{}/{}  {}\n",
        text(app, "/metadata/namespace"),
        text(app, "/metadata/name"),
        match text(app, "/status/ready") {
            "" => "no status yet".to_string(),
            ready => format!("ready {ready}"),
        }
    );
    // Releases under the chart their chartRef names.
    let mut under: BTreeMap<(String, String, String), Vec<&Value>> = BTreeMap::new();
    let mut direct: Vec<&Value> = Vec::new();
    for release in releases {
        let kind = text(release, "/spec/chartRef/kind");
        let namespace = match text(release, "/spec/chartRef/namespace") {
            "" => text(release, "/metadata/namespace"),
            ns => ns,
        };
        match kind {
            "" => direct.push(release),
            _ => under
                .entry((
                    kind.to_string(),
                    namespace.to_string(),
                    text(release, "/spec/chartRef/name").to_string(),
                ))
                .or_default()
                .push(release),
        }
    }
    let mut branches: Vec<(String, Vec<&Value>)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for chart in charts {
        let key = (
            text(chart, "/kind").to_string(),
            text(chart, "/metadata/namespace").to_string(),
            text(chart, "/metadata/name").to_string(),
        );
        let version = match text(chart, "/kind") {
            "HelmChart" => {
                shared_chart::artifact_version(chart).unwrap_or_else(|| text(chart, "/spec/version").into())
            }
            _ => text(chart, "/status/artifact/revision").to_string(),
        };
        let label = format!("{}/{}/{}  {version}  {}", key.0, key.1, key.2, state(chart));
        branches.push((label, under.get(&key).cloned().unwrap_or_default()));
        seen.insert(key);
    }
    // A chartRef to a chart that is gone (or not ours) still shows.
    for (key, releases) in &under {
        if !seen.contains(key) {
            branches.push((format!("{}/{}/{}  (not found)", key.0, key.1, key.2), releases.clone()));
        }
    }
    let count = branches.len() + direct.len();
    let mut index = 0;
    for (label, releases) in &branches {
        index += 1;
        let last = index == count;
        out.push_str(&format!("{}{label}\n", if last { "└── " } else { "├── " }));
        let indent = if last { "    " } else { "│   " };
        for (i, r) in releases.iter().enumerate() {
            let corner = if i + 1 == releases.len() {
                "└── "
            } else {
                "├── "
            };
            out.push_str(&format!("{indent}{corner}{}\n", release_line(r, rows)));
        }
    }
    for r in direct {
        index += 1;
        let corner = if index == count {
            "└── "
        } else {
            "├── "
        };
        out.push_str(&format!("{corner}{}\n", release_line(r, rows)));
    }
    out
}

/// Reads the application, its shared charts (wherever they are) and its
/// releases, and draws the tree.
pub async fn fetch(client: &Client, args: &TreeArgs) -> Result<String, kube::Error> {
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let app = Api::<NodePoolApplication>::namespaced(client.clone(), &namespace)
        .get(&args.name)
        .await?;
    let uid = app.uid();
    let ours = format!("{}={}", naming::LABEL_MANAGED_BY, naming::MANAGER);
    let mut charts = Vec::new();
    for kind in [ChartKind::HelmChart, ChartKind::OciRepository] {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource());
        for chart in api.list(&ListParams::default().labels(&ours)).await?.items {
            let owner = shared_chart::owner_of::<NodePoolApplication>(&chart);
            if owner
                .is_some_and(|o| o.name == args.name && o.namespace.as_deref() == Some(namespace.as_str()))
            {
                let mut value = serde_json::to_value(&chart).unwrap_or_default();
                value["kind"] = Value::String(kind.as_str().to_string());
                charts.push(value);
            }
        }
    }
    charts.sort_by_key(|c| text(c, "/metadata/name").to_string());
    let releases: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &helmrelease_resource());
    let mut owned: Vec<Value> = releases
        .list(&ListParams::default().labels(&format!(
            "{}={}",
            naming::LABEL_APPLICATION,
            naming::label_value(&args.name)
        )))
        .await?
        .items
        .into_iter()
        .filter(|r| r.owner_references().iter().any(|o| Some(&o.uid) == uid.as_ref()))
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
    owned.sort_by_key(|r| text(r, "/metadata/name").to_string());
    let report = super::get::GetArgs {
        name: Some(args.name.clone()),
        namespace: Some(namespace),
        all_namespaces: false,
        failing: false,
        output: None,
    };
    let rows = super::get::fetch(client, &report).await?;
    let app = serde_json::to_value(&app).unwrap_or_default();
    Ok(render_tree(&app, &charts, &owned, &rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn release(name: &str, pool: &str, chart: Value) -> Value {
        json!({
            "metadata": { "name": name, "namespace": "edge", "generation": 1,
                          "annotations": { naming::ANNOTATION_POOL_NAME: pool } },
            "spec": chart,
            "status": { "observedGeneration": 1, "conditions": [{ "type": "Ready", "status": "True",
                "reason": "UpgradeSucceeded", "message": "ok", "observedGeneration": 1 }],
                "history": [{ "chartVersion": "1.0.0", "version": 1 }] }
        })
    }

    #[test]
    fn releases_hang_under_the_chart_they_install() {
        let app = json!({ "metadata": { "name": "gw", "namespace": "edge" }, "status": { "ready": "2/3" } });
        let chart = json!({ "kind": "HelmChart", "metadata": { "name": "gw-ingress-1", "namespace": "flux-system" },
            "spec": { "version": "1.0.0" },
            "status": { "artifact": { "revision": "1.0.0" },
                        "conditions": [{ "type": "Ready", "status": "True", "reason": "ChartPullSucceeded" }] } });
        let shared = json!({ "chartRef": { "kind": "HelmChart", "name": "gw-ingress-1", "namespace": "flux-system" } });
        let releases = [
            release("gw-a-1", "a", shared.clone()),
            release("gw-b-2", "b", shared),
            release("gw-c-3", "c", json!({ "chart": { "spec": { "chart": "ingress-gateway" } } })),
        ];
        // b's pool is waiting in the rollout: the report says so, not Flux.
        let b = PoolRow {
            namespace: "edge".into(),
            application: "gw".into(),
            pool: "b".into(),
            nodes: "1/1".into(),
            release: "gw-b-2".into(),
            state: "Ready".into(),
            reason: "OutsideWindow".into(),
            chart_version: "1.0.0".into(),
            revision: Some(1),
            message: String::new(),
            suspended: false,
            rollout: Some("Waiting".into()),
            down_since: None,
        };
        let text = render_tree(&app, &[chart], &releases, &[b]);
        let expected = "\
NodePoolApplication/edge/gw  ready 2/3
├── HelmChart/flux-system/gw-ingress-1  1.0.0  Ready
│   ├── HelmRelease/edge/gw-a-1  pool a  Ready  1.0.0
│   └── HelmRelease/edge/gw-b-2  pool b  Ready (Waiting)  1.0.0
└── HelmRelease/edge/gw-c-3  pool c  Ready  1.0.0
";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_chart_that_is_gone_still_shows_its_releases() {
        let app = json!({ "metadata": { "name": "gw", "namespace": "edge" } });
        let pinned = json!({ "chartRef": { "kind": "OCIRepository", "name": "gw-podinfo-9" } });
        let text = render_tree(&app, &[], &[release("gw-a-1", "a", pinned)], &[]);
        assert!(text.contains("└── OCIRepository/edge/gw-podinfo-9  (not found)"), "{text}");
        assert!(text.contains("    └── HelmRelease/edge/gw-a-1  pool a"), "{text}");
        assert!(text.starts_with("NodePoolApplication/edge/gw  no status yet"), "{text}");
    }
}
