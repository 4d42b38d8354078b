//! The fleet console: every application with its chart, versions, `READY
//! n/m` and rollout, and each application's pools as a grid of cells,
//! grouped by a label, filtered by state and text, each cell opening the
//! pool's detail. `nodepool-fanout ui` serves it on the loopback with the
//! user's own kubeconfig identity, as `kubectl proxy` does; in the cluster
//! it runs as a Deployment of its own behind an authenticating proxy.
//!
//! - [`cache`] keeps the fleet in watch caches and builds each page from
//!   the fleet report `nodepool-fanout get` builds, so the console, the
//!   CLI and the status never disagree;
//! - [`live`] tells open pages that the fleet changed (server-sent events,
//!   batched), and they fetch themselves again;
//! - [`identity`] says who acts, and guards each form with a CSRF token;
//! - [`signin`] signs people in with OpenID Connect and keeps their
//!   session in a sealed cookie;
//! - [`access`] says which namespaces each person may read, as their own
//!   RBAC does;
//! - [`hosts`] answers only requests that name the console by one of its
//!   own names (no DNS rebinding of the loopback console);
//! - [`actions`] pauses, resumes, reconciles, approves and suspends, as
//!   the acting user; with no identity there is no action route at all;
//! - [`view`] and [`pages`] say what is shown, and how.
//!
//! Every page is sent with a content security policy that allows only the
//! console's own stylesheet and script, and with no caching.

pub mod access;
mod account;
mod action_routes;
pub mod actions;
mod args;
pub mod cache;
pub mod editor;
pub mod hosts;
pub mod identity;
pub mod live;
pub mod pages;
pub mod signin;
pub mod start;
pub mod view;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::future::BoxFuture;
use serde::Deserialize;
use tokio::sync::watch;

use actions::{Action, ActionError, Actions, Target};
pub use args::{IdentityMode, OidcArgs, UiArgs};
use identity::{Actor, Identity, Tokens};
use view::{AppView, CellState, Filter};

/// Where the console reads the fleet from.
pub trait Source: Send + Sync + 'static {
    /// Every application the console shows, each with its pools.
    fn applications(&self) -> BoxFuture<'_, Result<Vec<AppView>, SourceError>>;

    /// One application, if it is visible.
    fn application<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<AppView>, SourceError>> {
        Box::pin(async move {
            let apps = self.applications().await?;
            Ok(apps.into_iter().find(|a| a.namespace == namespace && a.name == name))
        })
    }

    /// A count that moves whenever the fleet changes.
    fn changes(&self) -> watch::Receiver<u64>;

    /// The applications (`namespace/name`) changed since the count was
    /// `since`; `None` when anything may have (a Node or a pool changed,
    /// a watch listed again, or too many to name), or when not known.
    fn changed_since(&self, _since: u64) -> Option<Vec<String>> {
        None
    }

    /// The application object itself, if it is there.
    fn object<'a>(
        &'a self,
        _namespace: &'a str,
        _name: &'a str,
    ) -> BoxFuture<'a, Result<Option<crate::api::NodePoolApplication>, SourceError>> {
        Box::pin(async { Ok(None) })
    }

    /// The pools of `app`'s kind the cluster holds now (the objects of its
    /// kind, or its Nodes by their label): what a preview selects from.
    fn pools_of<'a>(
        &'a self,
        _app: &'a crate::api::NodePoolApplication,
    ) -> BoxFuture<'a, Result<Vec<crate::pools::Pool>, SourceError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// The conditions, history and Events of the HelmRelease `release` of
    /// `namespace`; none known by default.
    fn pool_detail<'a>(
        &'a self,
        _namespace: &'a str,
        _release: &'a str,
    ) -> BoxFuture<'a, Result<view::PoolDetail, SourceError>> {
        Box::pin(async { Ok(view::PoolDetail::default()) })
    }
}

/// Why the fleet could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(
        "cannot read from the cluster (check KUBECONFIG, the current context, and that the user \
         may list and watch NodePoolApplications, HelmReleases and Nodes): {0}"
    )]
    NotListed(String),
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
    #[error("{0}")]
    Key(#[from] identity::KeyError),
    #[error("cannot ask the API server who the kubeconfig's user is (kubectl auth whoami): {0}")]
    WhoAmI(kube::Error),
    #[error(
        "with --identity proxy the console listens on the loopback only (--address 127.0.0.1:8090, not \
         {0}), behind an authenticating proxy in the same Pod: whoever reaches the console can name any \
         user in its headers (deploy/console/proxy runs it so)"
    )]
    ProxyNotOnLoopback(SocketAddr),
    #[error(
        "acting as the kubeconfig's user, the console listens on the loopback only (not {0}): whoever \
         reached it would act as you. Give --identity none for a read-only console, or --identity oidc \
         to sign each person in"
    )]
    ActsOffLoopback(SocketAddr),
    #[error("with --identity oidc, give {0}")]
    OidcMissing(&'static str),
    #[error(
        "with --identity oidc away from the loopback, give CONSOLE_SESSION_KEY (at least 32 random bytes, \
         from a Secret, the same to every replica): a key of one process alone signs everybody out at \
         each restart and is refused by every other replica"
    )]
    OidcNeedsKey,
    #[error("cannot read --oidc-ca-file {path}: {source}")]
    OidcCa {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Oidc(#[from] signin::ConfigError),
}

/// Who acts, their tokens, and what acting does.
pub struct Steering {
    pub identity: Identity,
    pub tokens: Tokens,
    pub actions: Actions,
}

/// The console's state: where it reads, who may steer (none: read-only),
/// what each person may read (none: whatever the console reads), and the
/// live streams open.
#[derive(Clone)]
struct Console {
    source: Arc<dyn Source>,
    steering: Option<Arc<Steering>>,
    access: Option<Arc<dyn access::Access>>,
    streams: Arc<live::Streams>,
}

/// Whose eyes a page is for.
enum Viewer {
    /// Whatever the console reads: read-only, or the kubeconfig's own user.
    All,
    /// A person, who sees what their RBAC lets them list.
    Person(identity::Impersonate),
    /// Nobody signed in, or somebody the console never acts as: nothing.
    Nobody(identity::NoActor),
}

/// What a page offers the user who reads it: the forms and their token,
/// and a way to sign out where the console signed them in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controls {
    pub user: String,
    pub token: String,
    pub sign_out: bool,
}

/// The console's routes over `source`; with `steering`, its action routes
/// too.
pub fn router(source: Arc<dyn Source>, steering: Option<Arc<Steering>>) -> Router {
    router_with(source, steering, None)
}

/// As [`router`], each person who acts by impersonation reading only what
/// `access` lets them.
pub fn router_with(
    source: Arc<dyn Source>,
    steering: Option<Arc<Steering>>,
    access: Option<Arc<dyn access::Access>>,
) -> Router {
    let mut routes = Router::new()
        .route("/", get(landing))
        .route("/apps/{namespace}/{name}", get(application))
        .route("/apps/{namespace}/{name}/pools/{pool}", get(pool))
        .route("/events", get(live::events))
        .route("/static/console.css", get(stylesheet))
        .route("/static/console.js", get(script))
        .route("/healthz", get(|| async { "ok" }));
    if steering.is_some() {
        routes = routes
            .route("/apps/{namespace}/{name}/actions/{action}", post(action_routes::act_on_app))
            .route("/apps/{namespace}/{name}/pools/{pool}/actions/{action}", post(action_routes::act_on_pool))
            .route("/new", get(editor::new_application))
            .route("/editor", post(editor::submit))
            .route("/editor/pools", post(editor::selected_pools))
            .route("/editor/form", post(editor::from_fields))
            .route("/apps/{namespace}/{name}/edit", get(editor::edit_application))
            .route("/apps/{namespace}/{name}/delete", get(editor::delete_page).post(editor::delete));
    }
    if steering.as_ref().is_some_and(|s| matches!(s.identity, Identity::Oidc(_))) {
        routes = routes
            .route("/auth/sign-in", get(account::sign_in))
            .route(signin::CALLBACK_PATH, get(account::callback))
            .route("/auth/sign-out", post(account::sign_out));
    }
    routes
        .fallback(|| async { (StatusCode::NOT_FOUND, html(pages::not_found("No such page."))) })
        .layer(axum::middleware::map_response(secure))
        .with_state(Console {
            source,
            steering,
            access,
            streams: Arc::default(),
        })
}

/// The content security policy: the console's own stylesheet and script,
/// its own event stream, nothing inline, no frames, forms only to itself.
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

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

fn unavailable(e: SourceError) -> Response {
    tracing::warn!(error = %e, "the console cannot read the fleet");
    (StatusCode::SERVICE_UNAVAILABLE, html(pages::unavailable(&e.to_string()))).into_response()
}

impl Console {
    /// The controls the reader of a page gets: none when read-only, or
    /// when the proxy named nobody.
    fn controls(&self, headers: &HeaderMap) -> Option<Controls> {
        let steering = self.steering.as_ref()?;
        let actor = steering.identity.actor(headers).ok()?;
        Some(Controls {
            token: steering.tokens.token(&actor),
            user: actor.name,
            sign_out: matches!(steering.identity, Identity::Oidc(_)),
        })
    }

    /// Whose eyes the request is for.
    fn viewer(&self, headers: &HeaderMap) -> Viewer {
        let (Some(steering), Some(_)) = (&self.steering, &self.access) else {
            return Viewer::All;
        };
        match steering.identity.actor(headers) {
            Ok(Actor {
                impersonate: Some(person),
                ..
            }) => Viewer::Person(person),
            Ok(_) => Viewer::All,
            Err(e) => Viewer::Nobody(e),
        }
    }

    /// Whose eyes the request is for, or why they are nobody here.
    fn reader(&self, headers: &HeaderMap) -> Result<Viewer, identity::NoActor> {
        match self.viewer(headers) {
            Viewer::Nobody(why) => Err(why),
            viewer => Ok(viewer),
        }
    }

    /// Whether `viewer` may read `namespace`'s applications.
    async fn may_read(&self, viewer: &Viewer, namespace: &str) -> bool {
        match (viewer, &self.access) {
            (Viewer::All, _) => true,
            (Viewer::Person(person), Some(access)) => access.may_read(person, namespace).await,
            _ => false,
        }
    }

    /// The application, if it is there and `viewer` may read it: one the
    /// viewer may not read is the same page as one that is not there.
    async fn find(&self, viewer: &Viewer, namespace: &str, name: &str) -> Result<AppView, Response> {
        let found = match self.may_read(viewer, namespace).await {
            true => self.source.application(namespace, name).await,
            false => Ok(None),
        };
        match found {
            Ok(Some(app)) => Ok(app),
            Ok(None) => {
                let what = format!("No NodePoolApplication {namespace}/{name} is visible to you.");
                Err((StatusCode::NOT_FOUND, html(pages::not_found(&what))).into_response())
            }
            Err(e) => Err(unavailable(e)),
        }
    }
}

/// The page of whoever is nobody here: nothing of the fleet.
fn signed_out(why: &identity::NoActor) -> Response {
    (StatusCode::UNAUTHORIZED, html(pages::signed_out(&why.to_string()))).into_response()
}

impl Console {
    /// A page asked for by nobody: where the console signs people in,
    /// nobody signed in goes to sign in, and comes back to `uri`.
    fn sign_in_first(&self, why: &identity::NoActor, uri: &axum::http::Uri) -> Response {
        let signs_in = (self.steering.as_ref()).is_some_and(|s| matches!(s.identity, Identity::Oidc(_)));
        match (why, signs_in) {
            (identity::NoActor::NotSignedIn, true) => {
                let back = uri.path_and_query().map_or("/", |p| p.as_str());
                let query = serde_urlencoded::to_string([("back", back)]).unwrap_or_default();
                Redirect::to(&format!("/auth/sign-in?{query}")).into_response()
            }
            _ => signed_out(why),
        }
    }
}

async fn landing(State(console): State<Console>, uri: axum::http::Uri, headers: HeaderMap) -> Response {
    let viewer = match console.reader(&headers) {
        Ok(viewer) => viewer,
        Err(why) => return console.sign_in_first(&why, &uri),
    };
    let mut apps = match console.source.applications().await {
        Ok(apps) => apps,
        Err(e) => return unavailable(e),
    };
    // One answer per namespace, however many applications it holds.
    let namespaces: std::collections::BTreeSet<String> = apps.iter().map(|a| a.namespace.clone()).collect();
    let mut readable = std::collections::BTreeSet::new();
    for namespace in namespaces {
        if console.may_read(&viewer, &namespace).await {
            readable.insert(namespace);
        }
    }
    apps.retain(|a| readable.contains(&a.namespace));
    html(pages::landing(&apps, console.controls(&headers).as_ref())).into_response()
}

/// The grid's filter, as the form sends it; an empty field is no filter.
/// `notice` is what the last action did.
#[derive(Debug, Default, Deserialize, serde::Serialize)]
struct PageQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    q: Option<String>,
    #[serde(skip_serializing)]
    notice: Option<String>,
}

impl PageQuery {
    /// The page's own query, the notice left out, to come back to after
    /// an action.
    fn kept(&self) -> String {
        serde_urlencoded::to_string(self).unwrap_or_default()
    }

    fn filter(&self) -> Filter {
        let given = |v: &Option<String>| v.clone().filter(|v| !v.trim().is_empty());
        Filter {
            group: given(&self.group),
            state: given(&self.state).and_then(|s| CellState::of_word(&s)),
            text: given(&self.q),
        }
    }
}

async fn application(
    State(console): State<Console>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let viewer = match console.reader(&headers) {
        Ok(viewer) => viewer,
        Err(why) => return console.sign_in_first(&why, &uri),
    };
    match console.find(&viewer, &namespace, &name).await {
        Ok(app) => {
            let page = pages::Page {
                controls: console.controls(&headers),
                notice: query.notice.clone(),
                query: query.kept(),
            };
            html(pages::application(&app, &query.filter(), &page)).into_response()
        }
        Err(response) => response,
    }
}

async fn pool(
    State(console): State<Console>,
    Path((namespace, name, pool)): Path<(String, String, String)>,
    Query(query): Query<PageQuery>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let viewer = match console.reader(&headers) {
        Ok(viewer) => viewer,
        Err(why) => return console.sign_in_first(&why, &uri),
    };
    let app = match console.find(&viewer, &namespace, &name).await {
        Ok(app) => app,
        Err(response) => return response,
    };
    match app.pools.iter().find(|p| p.row.pool == pool) {
        Some(found) => {
            let detail = match found.row.release.as_str() {
                "" => view::PoolDetail::default(),
                release => match console.source.pool_detail(&namespace, release).await {
                    Ok(detail) => detail,
                    Err(e) => return unavailable(e),
                },
            };
            let page = pages::Page {
                controls: console.controls(&headers),
                query: query.kept(),
                notice: query.notice,
            };
            html(pages::pool(&app, found, &detail, &page)).into_response()
        }
        None => {
            let what = format!("{namespace}/{name} has no pool {pool}.");
            (StatusCode::NOT_FOUND, html(pages::not_found(&what))).into_response()
        }
    }
}

async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("console.css"))
}

async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("console.js"))
}

#[cfg(test)]
mod tests;
