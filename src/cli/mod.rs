//! The command line: print the CRD, preview the HelmReleases an application
//! would get ([`render`](mod@render)), show an application's pools ([`get`]) or what it
//! made ([`tree`]) from the cluster, or run the controller
//! ([`crate::runtime::controller`], its flags in [`crate::runtime::options`]);
//! `render --check-isolation` also renders every pool through Helm
//! ([`isolation`]).
//! Commands only read and print; what they show is computed below them.

pub mod approve;
pub mod get;
pub mod history;
pub mod isolation;
pub mod render;
pub mod tree;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::api;
use crate::chart::schema::{Chart, ChartError};
use crate::pools::PoolError;
pub use crate::runtime::options::{LogFormat, RunArgs};
pub use render::{parse_pools, render, RenderArgs, Rendered};

#[derive(Debug, Parser)]
#[command(
    name = "nodepool-fanout",
    version,
    about = "Fans a Helm chart out to node pools, one Flux HelmRelease per pool"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the NodePoolApplication CustomResourceDefinition as YAML.
    Crd {
        /// Print the API reference instead: the CRD's schema as Markdown,
        /// as in docs/reference/api.md.
        #[arg(long)]
        reference: bool,
    },
    /// Print the HelmReleases an application would get, without a cluster.
    Render(RenderArgs),
    /// Print one line per pool of each application (as `flux get`): nodes,
    /// release, state, chart version, Helm revision, message.
    Get(get::GetArgs),
    /// Print what an application made (as `flux tree`): its shared charts
    /// and the HelmReleases under each.
    Tree(tree::TreeArgs),
    /// List an application's recorded revisions (as `kubectl rollout
    /// history`): number, revision, when, chart version, outcome.
    History(history::HistoryArgs),
    /// Let the wave that awaits approval go, for the revision under way
    /// (writes the apps.fanout.dev/approve annotation).
    Approve(approve::ApproveArgs),
    /// Serve the fleet console on the loopback, reading the cluster and
    /// acting (pause, resume, reconcile, approve, suspend) as the
    /// kubeconfig's user, or as `--as` names; `--identity oidc` signs each
    /// person in; `--identity none` for a read-only console.
    Ui(Box<crate::console::UiArgs>),
    /// Run the controller against the cluster in KUBECONFIG or in-cluster config.
    Run(RunArgs),
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{what} is not valid YAML: {source}")]
    Yaml {
        what: String,
        source: Box<serde_saphyr::Error>,
    },
    #[error("{what}: {source}")]
    Manifest { what: String, source: serde_json::Error },
    #[error("the application manifest needs metadata.name")]
    MissingName,
    #[error("pools file: {0}")]
    Pool(#[from] PoolError),
    #[error("cannot write YAML: {0}")]
    WriteYaml(#[from] serde_saphyr::SerializeError),
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
    #[error(transparent)]
    Crd(#[from] api::CrdError),
    #[error("--chart {path}: {source}")]
    Chart { path: PathBuf, source: ChartError },
    #[error(transparent)]
    Controller(#[from] crate::runtime::controller::StartError),
    #[error("cannot reach the cluster (check KUBECONFIG and the current context): {0}")]
    Connect(#[source] kube::Error),
    #[error("cannot read from the cluster: {0}")]
    Cluster(#[source] kube::Error),
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Check(#[from] isolation::CheckError),
    #[error(transparent)]
    Approve(#[from] approve::ApproveError),
    #[error(transparent)]
    Console(#[from] crate::console::ConsoleError),
}

/// Runs one command; returns whether it succeeded.
pub async fn execute(cli: Cli, out: &mut impl Write, err: &mut impl Write) -> Result<bool, CliError> {
    match cli.command {
        Command::Crd { reference } => {
            let text = if reference {
                api::reference::api_reference()
            } else {
                api::crds_yaml()?
            };
            out.write_all(text.as_bytes())?;
            Ok(true)
        }
        Command::Render(args) => {
            let app = read(&args.file)?;
            let pools = read(&args.pools)?;
            let chart = match &args.chart {
                Some(path) => Some(Chart::load(path).map_err(|source| CliError::Chart {
                    path: path.clone(),
                    source,
                })?),
                None => None,
            };
            let mut rendered = render(&app, &pools, &args.namespace, chart.as_ref())?;
            if let (true, Some(path), Some(chart)) = (args.check_isolation, &args.chart, &chart) {
                let (pools, warnings) =
                    isolation::render_with_helm(&args.helm, path, &rendered.releases, &chart.values)?;
                let placement = render::placement_of(&app, &args.namespace)?;
                let findings = isolation::check(&pools, &placement);
                rendered.warnings.extend(warnings.into_iter().chain(findings.warnings));
                rendered.errors.extend(findings.errors);
            }
            out.write_all(rendered.yaml.as_bytes())?;
            for line in rendered.warnings.iter().map(|w| format!("warning: {w}")) {
                writeln!(err, "{line}")?;
            }
            for line in rendered.errors.iter().map(|e| format!("error: {e}")) {
                writeln!(err, "{line}")?;
            }
            Ok(rendered.errors.is_empty())
        }
        Command::Get(args) => {
            let client = kube::Client::try_default().await.map_err(CliError::Connect)?;
            let mut rows = get::fetch(&client, &args).await.map_err(CliError::Cluster)?;
            if args.failing {
                rows = get::only_failing(rows);
            }
            match args.output {
                Some(get::Output::Json) => {
                    serde_json::to_writer_pretty(&mut *out, &rows)?;
                    writeln!(out)?;
                }
                Some(get::Output::Wide) => out.write_all(get::table(&rows, true).as_bytes())?,
                None if rows.is_empty() => writeln!(err, "no pools found")?,
                None => out.write_all(get::table(&rows, false).as_bytes())?,
            }
            Ok(true)
        }
        Command::Tree(args) => {
            let client = kube::Client::try_default().await.map_err(CliError::Connect)?;
            out.write_all(tree::fetch(&client, &args).await.map_err(CliError::Cluster)?.as_bytes())?;
            Ok(true)
        }
        Command::History(args) => {
            let client = kube::Client::try_default().await.map_err(CliError::Connect)?;
            let rows = history::fetch(&client, &args).await.map_err(CliError::Cluster)?;
            match rows.is_empty() {
                true => writeln!(err, "{}", history::empty_message(&args.name))?,
                false => out.write_all(history::table(&rows).as_bytes())?,
            }
            Ok(true)
        }
        Command::Approve(args) => {
            let client = kube::Client::try_default().await.map_err(CliError::Connect)?;
            writeln!(out, "{}", approve::approve(&client, &args).await?)?;
            Ok(true)
        }
        Command::Ui(args) => {
            let config = kube::Config::infer()
                .await
                .map_err(|e| CliError::Connect(kube::Error::InferConfig(e)))?;
            writeln!(out, "{}", crate::console::start::banner(&args))?;
            out.flush()?;
            crate::console::start::run(&args, config).await?;
            Ok(true)
        }
        Command::Run(args) => {
            crate::runtime::controller::run(args).await?;
            Ok(true)
        }
    }
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::Read {
        path: path.to_path_buf(),
        source,
    })
}
