//! The flags of `run`: what the running controller watches, how fast it
//! may talk to the API server, and how it reports. Each flag also reads an
//! environment variable, as Flux's controllers' do from their Deployment.

use clap::Args;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Watch only this namespace; all namespaces when not given.
    #[arg(long, env = "NODEPOOL_FANOUT_WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// How often every application is reconciled even when nothing changed, e.g. `5m`.
    #[arg(long, env = "NODEPOOL_FANOUT_RESYNC", default_value = "5m", value_parser = humantime::parse_duration)]
    pub resync: std::time::Duration,
    /// Let every release share one HelmChart per resolved chart version
    /// (`true`), or give each release its own `chart.spec` as Flux does by
    /// default (`false`).
    #[arg(long, env = "NODEPOOL_FANOUT_SHARED_CHART", default_value_t = true, action = clap::ArgAction::Set)]
    pub shared_chart: bool,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, env = "NODEPOOL_FANOUT_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: std::net::SocketAddr,
    /// `text` for people, `json` for log pipelines.
    #[arg(long, env = "NODEPOOL_FANOUT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Reconcile only while holding the `nodepool-fanout` Lease, so that
    /// replicas stand by and take over within seconds of the leader's loss.
    #[arg(long, env = "NODEPOOL_FANOUT_LEADER_ELECTION", default_value_t = false, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Namespace of the Lease; the pod's own namespace in a cluster.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub leader_election_namespace: String,
    /// Reconcile only the applications whose labels match, as Flux's
    /// controllers shard by `sharding.fluxcd.io/key`: e.g.
    /// `sharding.fluxcd.io/key=shard1` for a shard, and
    /// `!sharding.fluxcd.io/key` for the instance serving the rest.
    #[arg(long, env = "NODEPOOL_FANOUT_WATCH_LABEL_SELECTOR")]
    pub watch_label_selector: Option<String>,
    /// Refuse applications whose chart source or dependencies are in
    /// another namespace, as Flux's `--no-cross-namespace-refs` does. On by
    /// default: otherwise anyone who may create an application makes this
    /// controller create HelmCharts and OCIRepositories in any namespace
    /// they name, fetched with that namespace's credentials. Turn it off
    /// (`=false`) where one team owns every namespace and shares sources
    /// from one, such as flux-system.
    #[arg(long, env = "NODEPOOL_FANOUT_NO_CROSS_NAMESPACE_REFS", default_value_t = true, action = clap::ArgAction::Set)]
    pub no_cross_namespace_refs: bool,
    /// Applications reconciled at once, as Flux's `--concurrent`. Each
    /// reconcile writes its pools' HelmReleases in parallel besides.
    #[arg(long, env = "NODEPOOL_FANOUT_CONCURRENT", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrent: u16,
    /// Requests per second to the Kubernetes API, as Flux's `--kube-api-qps`.
    /// A fan-out to N new pools takes about N / QPS seconds once the burst
    /// is spent.
    #[arg(long, env = "NODEPOOL_FANOUT_KUBE_API_QPS", default_value_t = 50.0)]
    pub kube_api_qps: f32,
    /// Requests the client may send at once above the QPS, as Flux's
    /// `--kube-api-burst`.
    #[arg(long, env = "NODEPOOL_FANOUT_KUBE_API_BURST", default_value_t = 300)]
    pub kube_api_burst: u32,
    /// Flux notification-controller's event server, as Flux's
    /// `--events-addr`: every Event recorded on an application is also sent
    /// there, for Flux Alerts to route. In a Flux install:
    /// `http://notification-controller.flux-system.svc.cluster.local./`.
    /// Not given: Events are recorded only.
    #[arg(long, env = "NODEPOOL_FANOUT_EVENTS_ADDR")]
    pub events_addr: Option<String>,
    /// The hosts metric checks and webhook gates may name, comma
    /// separated: host names (`prometheus.monitoring`, `*.ci.example.com`)
    /// and address ranges (`10.20.0.0/16`); a name not listed is asked
    /// only at its addresses in a listed range. Empty (the default): any
    /// host. Lock it down where application authors are not trusted with
    /// the controller's network reach, as Flux's `--no-remote-bases`.
    #[arg(long, env = "NODEPOOL_FANOUT_CHECK_ALLOWED_HOSTS", default_value = "")]
    pub check_allowed_hosts: crate::reconcile::apply::asks::Reach,
    /// What becomes of a release that carries its application's current
    /// revision, whose pool is as it was when it was written, and that
    /// this controller renders otherwise (a controller upgrade changed
    /// what releases are): `hold` (the default) leaves it as it is until
    /// the application's next revision, so that an upgrade alone changes
    /// no site; `rollout` rolls the difference out as the revision's next
    /// rollout, pool by pool (docs/rollouts.md, "A new controller version").
    #[arg(long, env = "NODEPOOL_FANOUT_RENDERING_CHANGES", value_enum, default_value_t = crate::reconcile::plan::RenderingChanges::Hold)]
    pub rendering_changes: crate::reconcile::plan::RenderingChanges,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}
