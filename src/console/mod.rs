//! The fleet console: every application with its chart, versions, `READY
//! n/m` and rollout, and each application's pools as a grid of cells,
//! grouped by a label, filtered by state and text, each cell opening the
//! pool's detail. `nodepool-fanout ui` serves it on the loopback with the
//! user's own kubeconfig identity, as `kubectl proxy` does.
//!
//! It reads what `nodepool-fanout get` reads (each application's status
//! and its fleet report, [`crate::cli::get`]), so the console, the CLI and
//! the status never disagree. It is read-only: it serves no route that
//! writes. Every page is sent with a content security policy that allows
//! no inline script or style, and with no caching.

pub mod pages;
pub mod source;
pub mod view;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::future::BoxFuture;
use serde::Deserialize;

use view::{AppView, CellState, Filter};

/// Where the console reads the fleet from.
pub trait Source: Send + Sync + 'static {
    /// Every application the console shows, each with its pools.
    fn applications(&self) -> BoxFuture<'_, Result<Vec<AppView>, SourceError>>;
}

/// Why the fleet could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(
        "cannot read from the cluster as the kubeconfig's user (check KUBECONFIG, the current \
         context, and that the user may list NodePoolApplications, HelmReleases and Nodes): {0}"
    )]
    Cluster(#[from] kube::Error),
    #[error(
        "the cluster serves no NodePoolApplications: install the CustomResourceDefinition \
         (kubectl apply --server-side -k crds/, or the Helm chart)"
    )]
    NoApplications,
}

/// Why the console could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("cannot listen on {address}: {source} (is another process using it? pick one with --address)")]
    Listen {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("the console stopped: {0}")]
    Serve(std::io::Error),
}

/// `ui`'s flags.
#[derive(Debug, clap::Args)]
pub struct UiArgs {
    /// Where to listen; the loopback, as the console acts with your own
    /// kubeconfig identity.
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub address: SocketAddr,
    /// Only this namespace's applications; every namespace's when not given.
    #[arg(short, long)]
    pub namespace: Option<String>,
}

/// The console's routes over `source`.
pub fn router(source: Arc<dyn Source>) -> Router {
    Router::new()
        .route("/", get(landing))
        .route("/apps/{namespace}/{name}", get(application))
        .route("/apps/{namespace}/{name}/pools/{pool}", get(pool))
        .route("/static/console.css", get(stylesheet))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|| async { (StatusCode::NOT_FOUND, html(pages::not_found("No such page."))) })
        .layer(axum::middleware::map_response(secure))
        .with_state(source)
}

/// Serves the console on `address` until the process is stopped.
pub async fn serve(address: SocketAddr, source: Arc<dyn Source>) -> Result<(), ConsoleError> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| ConsoleError::Listen { address, source })?;
    axum::serve(listener, router(source)).await.map_err(ConsoleError::Serve)
}

/// The content security policy: the console's own stylesheet, nothing
/// inline, no frames, forms only to itself.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn html(markup: maud::Markup) -> Html<String> {
    Html(markup.into_string())
}

type Shared = State<Arc<dyn Source>>;

async fn read(source: &dyn Source) -> Result<Vec<AppView>, Response> {
    source.applications().await.map_err(|e| {
        tracing::warn!(error = %e, "the console cannot read the fleet");
        (StatusCode::SERVICE_UNAVAILABLE, html(pages::unavailable(&e.to_string()))).into_response()
    })
}

async fn landing(State(source): Shared) -> Response {
    match read(source.as_ref()).await {
        Ok(apps) => html(pages::landing(&apps)).into_response(),
        Err(response) => response,
    }
}

/// The grid's filter, as the form sends it; an empty field is no filter.
#[derive(Debug, Default, Deserialize)]
struct FilterQuery {
    group: Option<String>,
    state: Option<String>,
    q: Option<String>,
}

impl FilterQuery {
    fn filter(self) -> Filter {
        let given = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
        Filter {
            group: given(self.group),
            state: given(self.state).and_then(|s| CellState::of_word(&s)),
            text: given(self.q),
        }
    }
}

async fn find(source: &dyn Source, namespace: &str, name: &str) -> Result<AppView, Response> {
    let apps = read(source).await?;
    apps.into_iter().find(|a| a.namespace == namespace && a.name == name).ok_or_else(|| {
        let what = format!("No NodePoolApplication {namespace}/{name} is visible to you.");
        (StatusCode::NOT_FOUND, html(pages::not_found(&what))).into_response()
    })
}

async fn application(
    State(source): Shared,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<FilterQuery>,
) -> Response {
    match find(source.as_ref(), &namespace, &name).await {
        Ok(app) => html(pages::application(&app, &query.filter())).into_response(),
        Err(response) => response,
    }
}

async fn pool(
    State(source): Shared,
    Path((namespace, name, pool)): Path<(String, String, String)>,
) -> Response {
    let app = match find(source.as_ref(), &namespace, &name).await {
        Ok(app) => app,
        Err(response) => return response,
    };
    match app.pools.iter().find(|p| p.row.pool == pool) {
        Some(found) => html(pages::pool(&app, found)).into_response(),
        None => {
            let what = format!("{namespace}/{name} has no pool {pool}.");
            (StatusCode::NOT_FOUND, html(pages::not_found(&what))).into_response()
        }
    }
}

async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("console.css"))
}

#[cfg(test)]
mod tests;
