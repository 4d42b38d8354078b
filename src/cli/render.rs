//! `render`: the HelmReleases an application would get, from files and
//! without a cluster, exactly as the controller's first reconcile would
//! write them.

use std::path::PathBuf;

use clap::Args;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::CliError;
use crate::api::NodePoolApplication;
use crate::chart::schema::Chart;
use crate::chart::{shared as shared_chart, version};
use k8s_openapi::api::core::v1::Node;

use crate::api::Pools;
use crate::pools::kind as pool_kinds;
use crate::pools::{node_label, Pool};
use crate::reconcile::plan::{self, Outcome, PlanInput};

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The NodePoolApplication manifest.
    #[arg(short = 'f', long = "file", env = "NODEPOOL_FANOUT_APP_FILE")]
    pub file: PathBuf,
    /// The pools, as `kubectl get nodepools -o yaml` (or nodegroups, nodeunits,
    /// or nodes for kind NodeLabel) prints them, or as several documents.
    #[arg(long, env = "NODEPOOL_FANOUT_POOLS_FILE")]
    pub pools: PathBuf,
    /// Namespace for an application whose manifest names none.
    #[arg(
        short = 'n',
        long,
        env = "NODEPOOL_FANOUT_NAMESPACE",
        default_value = "default"
    )]
    pub namespace: String,
    /// The chart, as a directory or a packaged .tgz: every pool's values are
    /// checked against its values.schema.json, and the releases point at the
    /// shared HelmChart of its version, exactly as the controller writes them.
    #[arg(long, env = "NODEPOOL_FANOUT_CHART")]
    pub chart: Option<PathBuf>,
    /// Also render each pool's manifests with `helm template` (the chart of
    /// --chart) and fail on any object two pools would share and any pod
    /// the placement would not pin to its pool.
    #[arg(long, requires = "chart")]
    pub check_isolation: bool,
    /// The Helm binary --check-isolation runs.
    #[arg(long, env = "NODEPOOL_FANOUT_HELM", default_value = "helm")]
    pub helm: PathBuf,
}

/// What `render` produced: the releases as YAML and what went wrong.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    /// Multi-document YAML of every pool that could be built.
    pub yaml: String,
    /// Pools that failed, each naming the pool and the field; non-empty means failure.
    pub errors: Vec<String>,
    /// Worth telling, not failures (e.g. a named pool that does not exist).
    pub warnings: Vec<String>,
    /// The HelmReleases of `yaml`, one a pool.
    pub releases: Vec<Value>,
}

/// The HelmReleases `plan` would write for an application file and a pools
/// file, as the controller would on its first reconcile.
pub fn render(
    app_yaml: &str,
    pools_yaml: &str,
    namespace: &str,
    chart: Option<&Chart>,
) -> Result<Rendered, CliError> {
    let app = parse_app(app_yaml, namespace)?;
    let pools = parse_pools(pools_yaml, &app.spec.pools)?;
    render_over(&app, &pools, namespace, chart)
}

/// The HelmReleases `plan` would write for `app` over `pools`, as the
/// controller would on its first reconcile (the console's preview).
pub fn render_over(
    app: &NodePoolApplication,
    pools: &[Pool],
    namespace: &str,
    chart: Option<&Chart>,
) -> Result<Rendered, CliError> {
    let mut errors: Vec<String> = match kube::core::cel::validate_cel(app) {
        Ok(()) => Vec::new(),
        Err(e) => vec![format!("the API server would reject this application: {e}")],
    };
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    // The controller points every release at the shared HelmChart of the
    // resolved version: known here from the chart given, or from an exact
    // version in the spec; a range needs the repository's index.
    let version = chart.map(|c| c.version.clone()).or_else(|| {
        let chart = app.spec.chart.as_ref()?;
        chart.spec.version.clone().filter(|v| version::is_exact(v))
    });
    let app_name = app.metadata.name.clone().unwrap_or_default();
    let app_namespace = app.metadata.namespace.clone().unwrap_or_else(|| namespace.to_string());
    let chart_ref = version.map(|v| shared_chart::chart_ref(&app.spec, &app_name, &app_namespace, &v));
    let plan = plan::plan(&PlanInput {
        history: None,
        nodes: None,
        app,
        pools: &pools.iter().collect::<Vec<_>>(),
        owned: Vec::new(),
        others: &plan::ListedReleases::default(),
        now,
        chart_ref: chart_ref.as_ref(),
        chart,
        hold: None,
        unserved: None,
        clock_since: None,
        memo: None,
        // A preview of every pool's release, as the fleet holds them once installed.
        first_install_alone: false,
        analysis: None,
        rendering_changes: Default::default(),
    });
    errors.extend(plan.blocked.iter().cloned());
    errors.extend(
        plan.pools
            .iter()
            .filter(|p| matches!(p.outcome, Outcome::Failed { .. } | Outcome::Conflict { .. }))
            .map(ToString::to_string),
    );
    let mut warnings: Vec<String> = plan
        .missing_pools
        .iter()
        .map(|p| format!("node pool {p:?} is listed but does not exist"))
        .collect();
    if plan.pools.is_empty() && plan.blocked.is_none() {
        warnings.push("no node pool matches spec.pools".to_string());
    }
    warnings.extend(values_from_bypasses_the_rollout(app));
    // As built, without the time of writing: it means nothing in a render,
    // and would make two renders of the same files differ.
    let objects: Vec<Value> = plan.apply.iter().map(|d| d.manifest.value()).collect();
    let yaml = if objects.is_empty() {
        String::new()
    } else {
        serde_saphyr::to_string_multiple(&objects)?
    };
    Ok(Rendered {
        yaml,
        errors,
        warnings,
        releases: objects,
    })
}

/// The application's placement, as `render` reads the file.
pub fn placement_of(app_yaml: &str, namespace: &str) -> Result<crate::api::Placement, CliError> {
    Ok(parse_app(app_yaml, namespace)?.spec.placement)
}

/// An application manifest, its namespace `namespace` when it names none.
pub fn parse_app(yaml: &str, namespace: &str) -> Result<NodePoolApplication, CliError> {
    let value: Value = serde_saphyr::from_str(yaml).map_err(yaml_error("the application manifest"))?;
    let mut app: NodePoolApplication =
        serde_json::from_value(value).map_err(|source| CliError::Manifest {
            what: "the application manifest".into(),
            source,
        })?;
    if app.metadata.name.as_deref().is_none_or(str::is_empty) {
        return Err(CliError::MissingName);
    }
    if app.metadata.namespace.is_none() {
        app.metadata.namespace = Some(namespace.to_string());
    }
    Ok(app)
}

fn yaml_error(what: &'static str) -> impl Fn(serde_saphyr::Error) -> CliError {
    move |source| CliError::Yaml {
        what: what.to_string(),
        source: Box::new(source),
    }
}

/// The pools of an application's kind from several YAML documents, each
/// an object or a `List` of them, as `kubectl get -o yaml` prints them:
/// NodePools, NodeGroups or NodeUnits, or Nodes for kind `NodeLabel`.
/// Objects of other kinds are left out; one with no `kind` is taken to be
/// of the application's.
pub fn parse_pools(yaml: &str, spec: &Pools) -> Result<Vec<Pool>, CliError> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(yaml_error("the pools file"))?;
    let objects: Vec<&Value> = documents
        .iter()
        .filter(|d| !d.is_null())
        .flat_map(|d| match d.get("items").and_then(Value::as_array) {
            Some(items) => items.iter().collect(),
            None => vec![d],
        })
        .collect();
    let Some(kind) = pool_kinds::objects(spec.kind) else {
        let nodes = objects
            .into_iter()
            .filter(|o| o.get("kind").and_then(Value::as_str) == Some("Node"))
            .map(|o| {
                serde_json::from_value::<Node>(o.clone()).map_err(|source| CliError::Manifest {
                    what: "a Node in the pools file".into(),
                    source,
                })
            })
            .collect::<Result<Vec<Node>, _>>()?;
        return Ok(node_label::pools(&nodes, spec.node_label.as_deref().unwrap_or_default()));
    };
    objects
        .into_iter()
        .filter(|o| o.get("kind").is_none() || pool_kinds::kind_of(o) == Some(spec.kind))
        .map(|o| Pool::from_value(kind, o).map_err(CliError::from))
        .collect()
}

#[cfg(test)]
mod tests;

/// A warning for a `Progressive` application that reads `valuesFrom`: an
/// edit of what the ConfigMap or Secret holds changes no release this
/// controller writes, so helm-controller upgrades every pool with it at
/// its next interval, all at once (docs/rollouts.md, "What the revision
/// does not see goes around the rollout").
fn values_from_bypasses_the_rollout(app: &NodePoolApplication) -> Option<String> {
    let progressive =
        (app.spec.rollout.as_ref()).is_some_and(|r| r.strategy == crate::api::RolloutStrategy::Progressive);
    let read = (app.spec.values_from.iter())
        .chain(app.spec.overrides.iter().flat_map(|o| &o.values_from))
        .map(|v| format!("{:?} {}", v.kind, v.name))
        .collect::<std::collections::BTreeSet<_>>();
    (progressive && !read.is_empty()).then(|| {
        format!(
            "valuesFrom ({}): an edit of what it holds reaches every pool at once at helm-controller's \
             next interval, not through the Progressive rollout; to roll a change of it out, give the \
             application a new valuesFrom name",
            read.into_iter().collect::<Vec<_>>().join(", ")
        )
    })
}
