//! Sign-in with OpenID Connect, built in: the authorization code flow with
//! PKCE (`openidconnect` checks the ID token's signature, issuer,
//! audience, expiry and nonce), and a session kept in a cookie the
//! console encrypts and authenticates (AES-GCM, `axum-extra`'s private
//! cookies) under a key derived from `CONSOLE_SESSION_KEY`, so replicas
//! given one key take each other's sessions and nobody can forge one.
//!
//! The user and groups are read from the ID token's claims as the API
//! server's own `--oidc-*` flags read them (a claim for the user, one for
//! the groups, a prefix for each), so the names the console impersonates
//! are the names the cluster's RBAC already binds. Nobody is signed in as
//! a `system:` user or group, and a user read from `email` needs
//! `email_verified`, as the API server asks.
//!
//! The provider is asked for its configuration at each sign-in (one per
//! person per session): its signing keys may have rotated since the last.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use axum_extra::extract::cookie::{Cookie, Key, PrivateCookieJar, SameSite};
use base64::Engine;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use subtle::ConstantTimeEq;

use super::identity::{is_system, Impersonate};

mod provider_http;
pub use provider_http::HttpError;
use provider_http::{http_client, Http};

/// The session's cookie. Over TLS it takes the `__Host-` prefix, which
/// browsers keep to the console's own host, path `/` and `Secure`.
const SESSION: &str = "nodepool-fanout-session";
const SESSION_SECURE: &str = "__Host-nodepool-fanout-session";
/// The cookie of a sign-in under way: its state, nonce and PKCE verifier.
const PENDING: &str = "nodepool-fanout-sign-in";
/// How long a person has to sign in at the provider.
const PENDING_LIFETIME: Duration = Duration::from_secs(600);
/// The most a browser keeps of one cookie, with its name and attributes.
const COOKIE_MAX: usize = 4000;

/// The path the provider sends the browser back to.
pub const CALLBACK_PATH: &str = "/auth/callback";

/// Which claims name the user and the groups, as the API server's
/// `--oidc-username-claim`, `--oidc-username-prefix`,
/// `--oidc-groups-claim` and `--oidc-groups-prefix`.
#[derive(Debug, Clone)]
pub struct Claims {
    pub username: String,
    pub username_prefix: String,
    pub groups: String,
    pub groups_prefix: String,
}

/// Where and how the console signs people in.
#[derive(Debug, Clone)]
pub struct Provider {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back: the console's own
    /// address as the browser reaches it, with [`CALLBACK_PATH`].
    pub redirect: String,
    /// Asked for beside `openid` (`profile`, `email`, `groups`...).
    pub scopes: Vec<String>,
    pub claims: Claims,
    /// How long a session lasts before the person signs in again.
    pub lifetime: Duration,
    /// A PEM bundle of the certificate authorities the provider's TLS
    /// certificate is checked against, besides the system's.
    pub ca: Option<Vec<u8>>,
}

/// The console's sign-in: the provider, the HTTP client that talks to it
/// and the key the cookies are sealed with.
#[derive(Clone)]
pub struct SignIn {
    provider: Provider,
    issuer: IssuerUrl,
    redirect: RedirectUrl,
    http: Http,
    key: Key,
    /// Cookies marked `Secure`: the browser reaches the console over TLS.
    secure: bool,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("issuer", &self.provider.issuer)
            .finish_non_exhaustive()
    }
}

/// Who signed in, as the session cookie keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub user: String,
    pub groups: Vec<String>,
    /// Seconds since the epoch.
    pub expires: u64,
    /// Drawn at sign-in: the forms' tokens are of this sign-in only.
    #[serde(default)]
    pub id: String,
}

/// A sign-in under way.
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    state: String,
    nonce: String,
    verifier: String,
    /// The console's page to come back to.
    back: String,
}

/// Why the console cannot sign people in as configured.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--oidc-issuer-url {0:?} is no URL: give the issuer exactly as the provider's tokens name it")]
    Issuer(String),
    #[error(
        "--oidc-redirect-url {0:?} is no URL: give the console's address as browsers reach it, with the \
         path /auth/callback"
    )]
    Redirect(String),
    #[error("--oidc-redirect-url {0} must end with /auth/callback, the path the console serves it on")]
    RedirectPath(String),
    #[error("--oidc-ca-file holds no PEM certificate the console can read: {0}")]
    Ca(String),
    #[error("cannot build the HTTP client that talks to the OpenID provider: {0}")]
    Client(String),
    #[error(
        "CONSOLE_SESSION_KEY is {0} bytes: give at least 32 random ones (openssl rand -hex 32), the same \
         to every replica"
    )]
    Key(usize),
}

/// Why one sign-in failed: said to the person on the page, and logged.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("cannot read the OpenID provider's configuration at {issuer}: {reason}. Try again shortly")]
    Discovery { issuer: String, reason: String },
    #[error(
        "this sign-in was not started here, or took longer than ten minutes: sign in again (cookies must \
         be allowed for the console)"
    )]
    NoPending,
    #[error("the provider's answer is not for this sign-in (its state differs): sign in again")]
    State,
    #[error("the provider refused the sign-in: {0}")]
    Refused(String),
    #[error("the provider's token endpoint did not take the sign-in's code: {0}. Sign in again")]
    Exchange(String),
    #[error("the provider sent no ID token: is the client an OpenID Connect client with the openid scope?")]
    NoIdToken,
    #[error("the provider's ID token does not hold: {0}")]
    IdToken(String),
    #[error(
        "the ID token has no claim {0:?} to name you by (the console's --oidc-username-claim): ask your \
         administrator which claim the provider sends"
    )]
    NoUser(String),
    #[error("the ID token's email is not verified (email_verified), so it cannot name you")]
    EmailNotVerified,
    #[error("refused: the provider names {0}, which the console never acts as")]
    System(String),
    #[error(
        "your session would not fit in a cookie ({0} groups): ask your administrator to limit the groups \
         the provider sends (--oidc-groups-claim, or the client's group filter)"
    )]
    TooLarge(usize),
}

impl SignIn {
    /// The sign-in `provider` describes, its cookies sealed under `key`
    /// (the bytes of `CONSOLE_SESSION_KEY`, at least 32).
    pub fn new(provider: Provider, key: &[u8]) -> Result<Self, ConfigError> {
        if key.len() < 32 {
            return Err(ConfigError::Key(key.len()));
        }
        let issuer = IssuerUrl::new(provider.issuer.clone())
            .map_err(|_| ConfigError::Issuer(provider.issuer.clone()))?;
        let redirect = RedirectUrl::new(provider.redirect.clone())
            .map_err(|_| ConfigError::Redirect(provider.redirect.clone()))?;
        if redirect.url().path() != CALLBACK_PATH {
            return Err(ConfigError::RedirectPath(provider.redirect.clone()));
        }
        let secure = redirect.url().scheme() == "https";
        let http = http_client(provider.ca.as_deref())?;
        Ok(Self {
            provider,
            issuer,
            redirect,
            http,
            key: Key::derive_from(key),
            secure,
        })
    }

    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    fn session_cookie(&self) -> &'static str {
        match self.secure {
            true => SESSION_SECURE,
            false => SESSION,
        }
    }

    fn jar(&self, headers: &HeaderMap) -> PrivateCookieJar {
        PrivateCookieJar::from_headers(headers, self.key.clone())
    }

    /// The session a request carries, if it is good and not expired.
    pub fn session(&self, headers: &HeaderMap) -> Option<Session> {
        self.session_at(headers, SystemTime::now())
    }

    pub fn session_at(&self, headers: &HeaderMap, now: SystemTime) -> Option<Session> {
        let cookie = self.jar(headers).get(self.session_cookie())?;
        let session: Session = serde_json::from_str(cookie.value()).ok()?;
        (session.expires > seconds(now)).then_some(session)
    }

    /// A cookie of `name` and `value` as the console sets them: for the
    /// console alone, never to scripts, sent on top-level navigations
    /// from the provider (`Lax`), `Secure` over TLS.
    fn cookie(
        &self,
        name: &'static str,
        value: String,
        path: &'static str,
        max_age: Duration,
    ) -> Cookie<'static> {
        Cookie::build((name, value))
            .path(path)
            .http_only(true)
            .same_site(SameSite::Lax)
            .secure(self.secure)
            .max_age(cookie::time::Duration::seconds(max_age.as_secs() as i64))
            .build()
    }

    async fn client(&self) -> Result<SignInClient, SignInError> {
        let http = self.http_client();
        let metadata =
            CoreProviderMetadata::discover_async(self.issuer.clone(), &http).await.map_err(|e| {
                SignInError::Discovery {
                    issuer: self.provider.issuer.clone(),
                    reason: crate::runtime::notify::with_causes(&e),
                }
            })?;
        let secret = self.provider.client_secret.clone().map(ClientSecret::new);
        Ok(CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.provider.client_id.clone()),
            secret,
        )
        .set_redirect_uri(self.redirect.clone()))
    }

    /// Starts a sign-in that comes back to the console's page `back`:
    /// the cookie of the sign-in under way, and the provider's address to
    /// send the browser to.
    pub async fn begin(
        &self,
        headers: &HeaderMap,
        back: &str,
    ) -> Result<(PrivateCookieJar, String), SignInError> {
        let client = self.client().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.provider.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        let pending = Pending {
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            verifier: verifier.secret().clone(),
            back: local_path(back),
        };
        let value = serde_json::to_string(&pending).unwrap_or_default();
        let jar = self.jar(headers).add(self.cookie(PENDING, value, "/auth", PENDING_LIFETIME));
        Ok((jar, url.to_string()))
    }

    /// Finishes the sign-in the provider sent the browser back from: the
    /// session cookie set (the sign-in's own cookie taken back), the page
    /// to go back to, and who signed in.
    pub async fn finish(
        &self,
        headers: &HeaderMap,
        answer: &Callback,
    ) -> Result<(PrivateCookieJar, String, Session), SignInError> {
        let jar = self.jar(headers);
        let pending: Pending = jar
            .get(PENDING)
            .and_then(|c| serde_json::from_str(c.value()).ok())
            .ok_or(SignInError::NoPending)?;
        let jar = jar.remove(Cookie::build(PENDING).path("/auth"));
        if let Some(error) = &answer.error {
            let description = answer.error_description.as_deref().unwrap_or_default();
            return Err(SignInError::Refused(format!("{error} {description}").trim().to_string()));
        }
        let state = answer.state.as_deref().unwrap_or_default();
        if !bool::from(state.as_bytes().ct_eq(pending.state.as_bytes())) {
            return Err(SignInError::State);
        }
        let code = answer.code.clone().unwrap_or_default();
        let client = self.client().await?;
        let http = self.http_client();
        let tokens = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| SignInError::Exchange(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier))
            .request_async(&http)
            .await
            .map_err(|e| SignInError::Exchange(crate::runtime::notify::with_causes(&e)))?;
        let id_token = tokens.id_token().ok_or(SignInError::NoIdToken)?;
        id_token
            .claims(&client.id_token_verifier(), &Nonce::new(pending.nonce))
            .map_err(|e| SignInError::IdToken(e.to_string()))?;
        // Checked above; read as JSON so that any claim can name the user
        // and groups, as the API server reads them.
        let claims =
            payload(&id_token.to_string()).ok_or_else(|| SignInError::IdToken("unreadable".into()))?;
        let (user, groups) = person(&claims, &self.provider.claims)?;
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| SignInError::IdToken(format!("no random session id: {e}")))?;
        let session = Session {
            user,
            groups,
            expires: seconds(SystemTime::now() + self.provider.lifetime),
            id: hex::encode(id),
        };
        let count = session.groups.len();
        let cookie = self.session_cookie_of(&session);
        // Sealed (a nonce and a tag added, then base64), the value grows
        // by a third: a session a browser would drop is refused here,
        // where the person learns why.
        if (cookie.value().len() + 28).div_ceil(3) * 4 + 120 > COOKIE_MAX {
            return Err(SignInError::TooLarge(count));
        }
        let jar = jar.add(cookie);
        Ok((jar, pending.back, session))
    }

    /// The session's cookie, before it is sealed.
    fn session_cookie_of(&self, session: &Session) -> Cookie<'static> {
        let value = serde_json::to_string(session).unwrap_or_default();
        self.cookie(self.session_cookie(), value, "/", self.provider.lifetime)
    }

    /// The `Cookie` header a browser signed in as `session` sends back:
    /// the session sealed under this console's key.
    pub fn cookie_header(&self, session: &Session) -> String {
        use axum::response::IntoResponse;
        let jar = PrivateCookieJar::new(self.key.clone()).add(self.session_cookie_of(session));
        let response = jar.into_response();
        let set = response.headers().get(axum::http::header::SET_COOKIE);
        let set = set.and_then(|v| v.to_str().ok()).unwrap_or_default();
        set.split(';').next().unwrap_or_default().to_string()
    }

    /// Signs out: the session cookie taken back.
    pub fn sign_out(&self, headers: &HeaderMap) -> PrivateCookieJar {
        self.jar(headers).remove(Cookie::build(self.session_cookie()).path("/"))
    }
}

/// What the provider sends the browser back with.
#[derive(Debug, Default, Deserialize)]
pub struct Callback {
    pub code: Option<String>,
    pub state: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

type SignInClient = openidconnect::core::CoreClient<
    openidconnect::EndpointSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointMaybeSet,
    openidconnect::EndpointMaybeSet,
>;

fn seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// A path of the console itself, never another site's (`//elsewhere`,
/// `https://...`): where a sign-in may come back to.
pub fn local_path(back: &str) -> String {
    let local = back.starts_with('/') && !back.starts_with("//") && !back.starts_with("/\\");
    match local {
        true => back.to_string(),
        false => "/".to_string(),
    }
}

/// The claims of a JWT whose signature was checked already.
fn payload(jwt: &str) -> Option<Value> {
    let part = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The user and groups `claims` name, as the API server would read them.
pub fn person(claims: &Value, names: &Claims) -> Result<(String, Vec<String>), SignInError> {
    let user = claims
        .get(&names.username)
        .and_then(Value::as_str)
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| SignInError::NoUser(names.username.clone()))?;
    if names.username == "email" && claims.get("email_verified").and_then(Value::as_bool) != Some(true) {
        return Err(SignInError::EmailNotVerified);
    }
    let user = format!("{}{}", names.username_prefix, user.trim());
    // A list of names, or one name, as the API server takes either.
    let groups: Vec<String> = match claims.get(&names.groups) {
        Some(Value::Array(groups)) => groups.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        Some(Value::String(group)) => vec![group.clone()],
        _ => Vec::new(),
    };
    let groups: Vec<String> = groups
        .into_iter()
        .filter(|g| !g.trim().is_empty())
        .map(|g| format!("{}{}", names.groups_prefix, g.trim()))
        .collect();
    if is_system(&user) {
        return Err(SignInError::System(format!("the user {user}")));
    }
    if let Some(group) = groups.iter().find(|g| is_system(g)) {
        return Err(SignInError::System(format!("the group {group}")));
    }
    Ok((user, groups))
}

impl Session {
    /// Whom the console impersonates for this session.
    pub fn impersonate(&self) -> Impersonate {
        Impersonate {
            user: self.user.clone(),
            groups: self.groups.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
