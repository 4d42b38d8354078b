//! `nodepool-fanout get`: one line per pool of each application, as `flux
//! get` prints one per Flux object: the pool, its Ready nodes, its
//! HelmRelease, the state Flux reports of it, where it stands in the
//! rollout, the chart version and Helm revision it runs, and Flux's
//! message. Each line is a pool of the application's fleet report, made
//! by the controller's own observe and plan over what the cluster holds
//! ([`crate::reconcile::fleet::observed`]), so that `get`, the console and
//! the status read alike.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};

use crate::api::{NodePoolApplication, PoolKind};
use crate::pools::kind;
use crate::reconcile::fleet::observed;
pub use crate::reconcile::fleet::PoolRow;
use crate::reconcile::observe::{self, helmrelease_resource, Caches, Lists};

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
    header.extend([
        "POOL", "NODES", "RELEASE", "STATE", "ROLLOUT", "VERSION", "REVISION",
    ]);
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
            dash(r.rollout.as_deref().unwrap_or_default()),
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

/// Keeps what `--failing` asks for: pools whose release is not Ready
/// (offline pools aside), and pools that have no release.
pub fn only_failing(rows: Vec<PoolRow>) -> Vec<PoolRow> {
    rows.into_iter().filter(PoolRow::failing).collect()
}

/// Reads the applications, and what their reports are made of (their
/// namespaces' HelmReleases and revision records, the pool objects of
/// their kinds, the Nodes), and returns the rows: every application of the
/// namespace (or of all, with `-A`), or the one named.
pub async fn fetch(client: &Client, args: &GetArgs) -> Result<Vec<PoolRow>, kube::Error> {
    let namespace = args.namespace.clone().unwrap_or_else(|| client.default_namespace().to_string());
    let apps: Api<NodePoolApplication> = match args.all_namespaces {
        true => Api::all(client.clone()),
        false => Api::namespaced(client.clone(), &namespace),
    };
    let mut selected: Vec<NodePoolApplication> = match &args.name {
        Some(name) => vec![apps.get(name).await?],
        None => apps.list(&ListParams::default()).await?.items,
    };
    selected.sort_by_key(|a| (a.namespace(), a.name_any()));
    let caches = Caches::of_lists(lists(client, &selected).await?);
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    Ok(selected
        .iter()
        .flat_map(|app| observed::observe(&caches, app, now.clone()).rows(app))
        .collect())
}

/// What the reports of `apps` are made of, one list each.
async fn lists(client: &Client, apps: &[NodePoolApplication]) -> Result<Lists, kube::Error> {
    let mut lists = Lists {
        nodes: Api::<Node>::all(client.clone()).list(&ListParams::default()).await?.items,
        ..Lists::default()
    };
    let kinds: BTreeSet<PoolKind> = apps.iter().map(|a| a.spec.pools.kind).collect();
    for pool_kind in kinds {
        let Some(objects) = kind::objects(pool_kind) else {
            continue;
        };
        match crate::runtime::pool_resource(client, objects, None).await {
            Ok(api) => {
                let listed = Api::<DynamicObject>::all_with(client.clone(), &api);
                let items = listed.list(&ListParams::default()).await?.items;
                lists.pools.insert(pool_kind, (api, items));
            }
            Err(_) => {
                lists.unserved.insert(pool_kind, observe::not_served_message(pool_kind));
            }
        }
    }
    let namespaces: BTreeSet<String> = apps.iter().filter_map(|a| a.namespace()).collect();
    for namespace in &namespaces {
        let releases =
            Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &helmrelease_resource());
        lists.releases.extend(releases.list(&ListParams::default()).await?.items);
        // A person who may not read the revision records still gets the
        // rows, without what only the history says (a halt or rollback
        // recorded, the last complete revision).
        let records: Api<ControllerRevision> = Api::namespaced(client.clone(), namespace);
        match records.list(&ListParams::default()).await {
            Ok(listed) => lists.history.extend(listed.items),
            Err(kube::Error::Api(e)) if e.code == 403 => {
                tracing::warn!(%namespace, "may not list ControllerRevisions: rows without the rollout's history");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(lists)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A row as the fleet report gives it.
    fn row(pool: &str, state: &str, message: &str) -> PoolRow {
        PoolRow {
            namespace: "edge".into(),
            application: "gw".into(),
            pool: pool.into(),
            nodes: "1/1".into(),
            release: format!("gw-{pool}-1234"),
            state: state.into(),
            reason: "UpgradeSucceeded".into(),
            chart_version: "1.1.0".into(),
            revision: Some(3),
            message: message.into(),
            suspended: false,
            rollout: Some("Done".into()),
            down_since: None,
        }
    }

    fn fleet() -> Vec<PoolRow> {
        let mut failed = row("b", "Failed", "Helm upgrade failed:\n  timed out");
        failed.reason = "UpgradeFailed".into();
        let offline = PoolRow {
            nodes: "0/1".into(),
            rollout: Some("Offline".into()),
            ..row("c", "Offline", "no node of the pool is Ready")
        };
        let none = PoolRow {
            release: String::new(),
            chart_version: String::new(),
            revision: None,
            rollout: Some("Pending".into()),
            reason: "InvalidPoolConfig".into(),
            ..row("d", "None", "overrides[0].values: pool.labels.version is not set")
        };
        vec![row("a", "Ready", "Helm upgrade succeeded"), failed, offline, none]
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
        let rollout = lines[0].find("ROLLOUT").unwrap();
        assert_eq!(&lines[4][rollout..rollout + 7], "Pending", "{text}");
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
        assert_eq!(text[0]["rollout"], "Done");
        assert_eq!(text[3]["revision"], Value::Null);
    }
}
