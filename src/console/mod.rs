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
pub mod actions;
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

/// Who may act from the console; `ui`'s `--identity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IdentityMode {
    /// The kubeconfig's user, or the user `--as` names.
    Kubeconfig,
    /// The user an authenticating proxy names in `--user-header`.
    Proxy,
    /// Each person, signed in by the console with OpenID Connect
    /// (`--oidc-*`).
    Oidc,
    /// Nobody: the console is read-only and has no action routes.
    None,
}

/// `ui`'s flags.
#[derive(Debug, clap::Args)]
pub struct UiArgs {
    /// Where to listen. The loopback, unless the console runs behind an
    /// authenticating proxy.
    #[arg(long, default_value = "127.0.0.1:8090", env = "CONSOLE_ADDRESS")]
    pub address: SocketAddr,
    /// Host names the console answers to besides its own (on the
    /// loopback: localhost, 127.0.0.1, [::1] and the address it listens
    /// on), as `kubectl proxy --accept-hosts`; any other `Host` gets
    /// nothing, so a page that rebinds its name to the loopback cannot
    /// act as you. Comma-separated or repeated. Given away from the
    /// loopback, only these names are answered.
    #[arg(long, value_delimiter = ',', env = "CONSOLE_ALLOWED_HOSTS")]
    pub allowed_hosts: Vec<String>,
    /// Only this namespace's applications; every namespace's when not given.
    #[arg(short, long, env = "CONSOLE_NAMESPACE")]
    pub namespace: Option<String>,
    /// Who acts: `kubeconfig` (the default: you, as kubectl acts),
    /// `proxy` (each user as an authenticating proxy names them, by
    /// impersonation) or `none` (read-only).
    #[arg(long, value_enum, default_value = "kubeconfig", env = "CONSOLE_IDENTITY")]
    pub identity: IdentityMode,
    /// Act as this user, as `kubectl --as` does (with `--identity kubeconfig`).
    #[arg(long = "as")]
    pub as_user: Option<String>,
    /// Act with this group, as `kubectl --as-group` does; repeatable.
    #[arg(long = "as-group")]
    pub as_groups: Vec<String>,
    /// The key the forms' CSRF tokens are signed with, at least 32 bytes,
    /// the same on every replica (from a Secret); one of this process
    /// alone when not given. Give it in the environment: a flag would
    /// show in the process list.
    #[arg(
        long = "session-key",
        env = "CONSOLE_SESSION_KEY",
        hide = true,
        hide_env_values = true
    )]
    pub session_key: Option<String>,
    /// The header the proxy names the user in (with `--identity proxy`).
    #[arg(long, default_value = "X-Forwarded-User", env = "CONSOLE_USER_HEADER")]
    pub user_header: axum::http::HeaderName,
    /// The header the proxy lists the user's groups in, comma-separated.
    #[arg(long, default_value = "X-Forwarded-Groups", env = "CONSOLE_GROUPS_HEADER")]
    pub groups_header: axum::http::HeaderName,
    #[command(flatten)]
    pub oidc: OidcArgs,
}

/// `ui`'s sign-in flags (with `--identity oidc`), named and read as the
/// API server's own `--oidc-*` flags, so that the names the console
/// impersonates are the ones the cluster's RBAC binds.
#[derive(Debug, Clone, clap::Args)]
pub struct OidcArgs {
    /// The provider's issuer, exactly as its tokens name it
    /// (`https://dex.example.com`).
    #[arg(long = "oidc-issuer-url", env = "CONSOLE_OIDC_ISSUER_URL")]
    pub issuer_url: Option<String>,
    /// The console's client ID at the provider.
    #[arg(long = "oidc-client-id", env = "CONSOLE_OIDC_CLIENT_ID")]
    pub client_id: Option<String>,
    /// The client's secret, for a confidential client; a public client
    /// signs in with PKCE alone. Give it in the environment.
    #[arg(
        long = "oidc-client-secret",
        env = "CONSOLE_OIDC_CLIENT_SECRET",
        hide = true,
        hide_env_values = true
    )]
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back: the console's address as
    /// browsers reach it, with the path /auth/callback
    /// (`https://fleet.example.com/auth/callback`). On the loopback,
    /// `http://<--address>/auth/callback` when not given.
    #[arg(long = "oidc-redirect-url", env = "CONSOLE_OIDC_REDIRECT_URL")]
    pub redirect_url: Option<String>,
    /// The ID token's claim that names the user, as the API server's flag.
    #[arg(
        long = "oidc-username-claim",
        default_value = "sub",
        env = "CONSOLE_OIDC_USERNAME_CLAIM"
    )]
    pub username_claim: String,
    /// Put before every user name (`oidc:`), as the API server's flag.
    #[arg(
        long = "oidc-username-prefix",
        default_value = "",
        env = "CONSOLE_OIDC_USERNAME_PREFIX"
    )]
    pub username_prefix: String,
    /// The ID token's claim that lists the user's groups.
    #[arg(
        long = "oidc-groups-claim",
        default_value = "groups",
        env = "CONSOLE_OIDC_GROUPS_CLAIM"
    )]
    pub groups_claim: String,
    /// Put before every group name, as the API server's flag.
    #[arg(
        long = "oidc-groups-prefix",
        default_value = "",
        env = "CONSOLE_OIDC_GROUPS_PREFIX"
    )]
    pub groups_prefix: String,
    /// Scopes asked for besides `openid` (Dex sends groups for `groups`);
    /// comma-separated or repeated.
    #[arg(
        long = "oidc-extra-scope",
        value_delimiter = ',',
        default_value = "profile,email",
        env = "CONSOLE_OIDC_EXTRA_SCOPES"
    )]
    pub extra_scopes: Vec<String>,
    /// A PEM file of the certificate authorities that sign the provider's
    /// TLS certificate, besides the system's.
    #[arg(long = "oidc-ca-file", env = "CONSOLE_OIDC_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// How long a sign-in lasts (`8h`, `30m`).
    #[arg(long = "session-lifetime", default_value = "8h", value_parser = humantime::parse_duration, env = "CONSOLE_SESSION_LIFETIME")]
    pub session_lifetime: std::time::Duration,
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
            .route("/apps/{namespace}/{name}/actions/{action}", post(act_on_app))
            .route("/apps/{namespace}/{name}/pools/{pool}/actions/{action}", post(act_on_pool))
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

/// An action's form: its CSRF token, and the query of the page it was
/// sent from.
#[derive(Debug, Deserialize)]
struct ActionForm {
    csrf: String,
    #[serde(default)]
    back: String,
}

async fn act_on_app(
    State(console): State<Console>,
    Path((namespace, name, action)): Path<(String, String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    let back = pages::app_path(&namespace, &name);
    let target = Target {
        namespace,
        name,
        pool: None,
    };
    act(&console, &headers, &form, &action, target, back).await
}

async fn act_on_pool(
    State(console): State<Console>,
    Path((namespace, name, pool, action)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Response {
    let back = pages::pool_path(&namespace, &name, &pool);
    let viewer = match console.reader(&headers) {
        Ok(viewer) => viewer,
        Err(why) => return signed_out(&why),
    };
    let release = match console.find(&viewer, &namespace, &name).await {
        Ok(app) => app.pools.iter().find(|p| p.row.pool == pool).map(|p| p.row.release.clone()),
        Err(response) => return response,
    };
    let Some(release) = release else {
        let what = format!("{namespace}/{name} has no pool {pool}.");
        return (StatusCode::NOT_FOUND, html(pages::not_found(&what))).into_response();
    };
    let target = Target {
        namespace,
        name,
        pool: Some((pool, release)),
    };
    act(&console, &headers, &form, &action, target, back).await
}

/// Checks who asks and that the form is the console's own, does the
/// action, and sends the user back to the page with what was done.
async fn act(
    console: &Console,
    headers: &HeaderMap,
    form: &ActionForm,
    action: &str,
    target: Target,
    back: String,
) -> Response {
    let refuse = |status: StatusCode, why: &str| (status, html(pages::refused(why, &back))).into_response();
    let Some(steering) = &console.steering else {
        return refuse(StatusCode::NOT_FOUND, "This console is read-only.");
    };
    let Some(action) = Action::of_path(action) else {
        return refuse(StatusCode::NOT_FOUND, "No such action.");
    };
    if identity::cross_site(headers) {
        return refuse(StatusCode::FORBIDDEN, "Refused: the request came from another site.");
    }
    let actor: Actor = match steering.identity.actor(headers) {
        Ok(actor) => actor,
        Err(e @ identity::NoActor::NotSignedIn) => return refuse(StatusCode::UNAUTHORIZED, &e.to_string()),
        Err(e) => {
            tracing::warn!(error = %e, "a console action named a user the console never acts as");
            return refuse(StatusCode::FORBIDDEN, &e.to_string());
        }
    };
    if !steering.tokens.check(&actor, &form.csrf) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Refused: the form is stale or not the console's own. Reload the page.",
        );
    }
    match steering.actions.act(&actor, action, &target).await {
        Ok(done) => {
            tracing::info!(user = %actor.name, ?action, "{done}");
            // Back to the page as it was: its own path (never one the form
            // names), its grouping and filters, and what was done.
            let kept: PageQuery = serde_urlencoded::from_str(&form.back).unwrap_or_default();
            let notice = serde_urlencoded::to_string([("notice", done.as_str())]).unwrap_or_default();
            let query = [kept.kept(), notice]
                .into_iter()
                .filter(|q| !q.is_empty())
                .collect::<Vec<_>>()
                .join("&");
            Redirect::to(&format!("{back}?{query}")).into_response()
        }
        Err(e) => {
            let status = match &e {
                ActionError::Refused { .. } => StatusCode::FORBIDDEN,
                ActionError::HeldByGit { .. }
                | ActionError::HeldElsewhere { .. }
                | ActionError::NotNow(_) => StatusCode::CONFLICT,
                ActionError::Client { .. } | ActionError::Cluster(_) => StatusCode::BAD_GATEWAY,
            };
            tracing::info!(user = %actor.name, ?action, error = %e, "a console action was not done");
            refuse(status, &format!("Not done: {e}"))
        }
    }
}

/// The console's own sign-in: to the provider, back from it, and out.
mod account {
    use super::*;

    #[derive(Debug, Deserialize)]
    pub(super) struct SignInQuery {
        #[serde(default)]
        back: String,
    }

    fn signin(console: &Console) -> Option<&signin::SignIn> {
        match &console.steering.as_ref()?.identity {
            Identity::Oidc(signin) => Some(signin),
            _ => None,
        }
    }

    fn failed(e: &signin::SignInError) -> Response {
        tracing::warn!(error = %e, "a sign-in failed");
        let status = match e {
            signin::SignInError::Discovery { .. } | signin::SignInError::Exchange(_) => {
                StatusCode::BAD_GATEWAY
            }
            _ => StatusCode::FORBIDDEN,
        };
        (status, html(pages::sign_in_failed(&e.to_string()))).into_response()
    }

    /// To the provider, to come back to the page `back` names.
    pub(super) async fn sign_in(
        State(console): State<Console>,
        Query(query): Query<SignInQuery>,
        headers: HeaderMap,
    ) -> Response {
        let Some(signin) = signin(&console) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        match signin.begin(&headers, &query.back).await {
            Ok((jar, to)) => (jar, Redirect::to(&to)).into_response(),
            Err(e) => failed(&e),
        }
    }

    /// Back from the provider: signed in, to the page the sign-in began on.
    pub(super) async fn callback(
        State(console): State<Console>,
        Query(answer): Query<signin::Callback>,
        headers: HeaderMap,
    ) -> Response {
        let Some(signin) = signin(&console) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        match signin.finish(&headers, &answer).await {
            Ok((jar, back, session)) => {
                tracing::info!(user = %session.user, groups = ?session.groups, "signed in");
                (jar, Redirect::to(&back)).into_response()
            }
            Err(e) => failed(&e),
        }
    }

    #[derive(Debug, Deserialize)]
    pub(super) struct SignOutForm {
        csrf: String,
    }

    /// Signed out: the session cookie taken back. The form is the
    /// console's own, as every action's.
    pub(super) async fn sign_out(
        State(console): State<Console>,
        headers: HeaderMap,
        Form(form): Form<SignOutForm>,
    ) -> Response {
        let (Some(signin), Some(steering)) = (signin(&console), &console.steering) else {
            return StatusCode::NOT_FOUND.into_response();
        };
        if identity::cross_site(&headers) {
            return (
                StatusCode::FORBIDDEN,
                html(pages::refused("Refused: the request came from another site.", "/")),
            )
                .into_response();
        }
        if let Ok(actor) = steering.identity.actor(&headers) {
            if !steering.tokens.check(&actor, &form.csrf) {
                let why = "Refused: the form is stale or not the console's own. Reload the page.";
                return (StatusCode::FORBIDDEN, html(pages::refused(why, "/"))).into_response();
            }
            tracing::info!(user = %actor.name, "signed out");
        }
        (signin.sign_out(&headers), html(pages::signed_out_done())).into_response()
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
