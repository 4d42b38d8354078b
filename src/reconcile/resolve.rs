//! The chart step of a reconcile, before observe: the version the
//! application resolves to, the shared HelmChart (or pinned OCIRepository)
//! of that version made sure of, and its chart read; or the [`Hold`] that
//! says why writes must wait, for a transient one until source-controller
//! gets there, for a permanent one until a person acts.

use std::sync::Arc;

use kube::{Client, ResourceExt};

use crate::api::conditions;
use crate::api::naming;
use crate::api::{ChartReference, NodePoolApplication};
use crate::chart::schema::Chart;
use crate::chart::shared::{self as shared_chart, ChartRef};
use crate::chart::source::{artifact_of, oci_revision, Resolved, SourceError, Sources};
use crate::chart::version;
use crate::reconcile::apply;
use crate::reconcile::plan::Hold;

/// What the chart step reads and writes through.
pub struct Charts<'a> {
    pub client: &'a Client,
    pub sources: &'a Sources,
    /// `--shared-chart`: the application makes one HelmChart per version
    /// for all its releases; without it each release makes its own, and
    /// there is nothing to resolve here.
    pub shared: bool,
    /// `--no-cross-namespace-refs`: a source in another namespace holds
    /// every write, as Flux refuses it.
    pub no_cross_namespace_refs: bool,
}

/// The chart the application's releases use, or why they wait; `None`
/// when each release makes its own chart.
pub async fn resolve(charts: &Charts<'_>, app: &NodePoolApplication) -> Option<Result<SharedChart, Hold>> {
    let namespace = app.namespace().unwrap_or_default();
    let refused = charts
        .no_cross_namespace_refs
        .then(|| shared_chart::cross_namespace_reference(&app.spec, &namespace))
        .flatten();
    match (refused, charts.shared) {
        (Some(message), _) => Some(Err(Hold {
            reason: conditions::reason::CROSS_NAMESPACE_REF_FORBIDDEN.into(),
            message,
            transient: false,
        })),
        (None, true) => Some(shared_chart(charts, app).await),
        (None, false) => None,
    }
}

/// The shared HelmChart of the version an application resolves to, its
/// chart, and, for an OCI HelmRepository, the HelmChart that resolves it.
pub struct SharedChart {
    pub chart_ref: ChartRef,
    pub chart: Arc<Chart>,
    pub resolver: Option<ChartRef>,
}

/// Resolves the chart version, makes sure the shared HelmChart of that
/// version exists, and reads its artifact; or says why writes must wait.
async fn shared_chart(ctx: &Charts<'_>, app: &NodePoolApplication) -> Result<SharedChart, Hold> {
    let name = app.name_any();
    let namespace = app.namespace().unwrap_or_default();
    let spec = &app.spec;
    let shard = app.labels().get(naming::LABEL_SHARD).map(String::as_str);
    let chart_spec = match (&spec.chart, &spec.chart_ref) {
        (Some(chart), _) => &chart.spec,
        (None, Some(reference)) => return pinned_oci_chart(ctx, app, reference, shard).await,
        (None, None) => {
            return Err(Hold {
                reason: conditions::reason::CHART_MISSING.into(),
                message: "neither spec.chart nor spec.chartRef is set: set one, as in a HelmRelease".into(),
                transient: false,
            })
        }
    };
    let wanted = chart_spec.version.clone().filter(|v| !v.is_empty()).unwrap_or_else(|| "*".into());
    let mut resolver = None;
    let version = match shared_chart::needs_resolution(spec) {
        false => chart_spec.version.clone().unwrap_or_else(|| "*".into()),
        true => match ctx.sources.resolve_version(chart_spec, &namespace).await.map_err(hold)? {
            Resolved::Version(version) => version,
            Resolved::InRegistry if version::is_exact(&wanted) => wanted,
            Resolved::InRegistry => {
                let by = shared_chart::resolver_ref(spec, &name, &namespace, &wanted);
                let desired = shared_chart::with_shard(
                    shared_chart::helmchart(spec, &name, &namespace, &wanted, &by),
                    shard,
                );
                let helmchart = ensure_chart(ctx, &by, &desired).await?;
                // Its artifact, ready and of its latest spec, says which
                // tag the range resolved to.
                artifact_of(&helmchart, "HelmChart").map_err(hold)?;
                let version = shared_chart::artifact_version(&helmchart).ok_or_else(|| Hold {
                    reason: conditions::reason::SOURCE_NOT_READY.into(),
                    message: format!(
                        "HelmChart {}/{} has an artifact with no revision; waiting for source-controller",
                        by.namespace, by.name
                    ),
                    transient: true,
                })?;
                resolver = Some(by);
                version
            }
        },
    };
    let chart_ref = shared_chart::chart_ref(spec, &name, &namespace, &version);
    let desired = shared_chart::with_shard(
        shared_chart::helmchart(spec, &name, &namespace, &version, &chart_ref),
        shard,
    );
    let helmchart = ensure_chart(ctx, &chart_ref, &desired).await?;
    let chart = ctx.sources.chart(&helmchart).await.map_err(hold)?;
    Ok(SharedChart {
        chart_ref,
        chart,
        resolver,
    })
}

/// For a `spec.chartRef`: the user's OCIRepository's current artifact,
/// pinned by digest in an OCIRepository of the application's, and the
/// chart in it. Each revision the user's resolves to gets its own pinned
/// copy, so the releases move to it as the rollout lets them.
async fn pinned_oci_chart(
    ctx: &Charts<'_>,
    app: &NodePoolApplication,
    reference: &ChartReference,
    shard: Option<&str>,
) -> Result<SharedChart, Hold> {
    let name = app.name_any();
    let namespace = app.namespace().unwrap_or_default();
    let source = ctx.sources.oci_source(reference, &namespace).await.map_err(hold)?;
    let (tag, digest) = oci_revision(&source).ok_or_else(|| Hold {
        reason: conditions::reason::SOURCE_NOT_READY.into(),
        message: format!(
            "OCIRepository {}/{} has an artifact with no digest in its revision; waiting for source-controller",
            shared_chart::source_namespace(&app.spec, &namespace),
            reference.name
        ),
        transient: true,
    })?;
    let chart_ref = shared_chart::chart_ref(&app.spec, &name, &namespace, &format!("{tag}@{digest}"));
    let desired = shared_chart::with_shard(
        shared_chart::pinned_ocirepository(&name, &namespace, &source, &digest, &chart_ref),
        shard,
    );
    let pinned = ensure_chart(ctx, &chart_ref, &desired).await?;
    let chart = ctx.sources.chart(&pinned).await.map_err(hold)?;
    Ok(SharedChart {
        chart_ref,
        chart,
        resolver: None,
    })
}

/// A chart source that is not ready says why the writes wait: until
/// source-controller gets there, or until a person fixes the source.
fn hold(e: SourceError) -> Hold {
    Hold {
        reason: e.reason().to_string(),
        message: e.to_string(),
        transient: !e.needs_user(),
    }
}

/// Creates or updates one of the application's shared charts.
async fn ensure_chart(
    ctx: &Charts<'_>,
    chart: &ChartRef,
    desired: &serde_json::Value,
) -> Result<serde_json::Value, Hold> {
    // A refusal no retry mends (a name another object holds, forbidden,
    // invalid) needs a person: Stalled, not retried every few seconds.
    apply::ensure_chart(ctx.client, chart, desired).await.map_err(|e| Hold {
        reason: e.category().to_string(),
        message: e.to_string(),
        transient: e.retriable(),
    })
}
