//! `nodepool-fanout ui`: connects as the kubeconfig says (in a Pod, as its
//! own service account), starts the watch caches, decides who may act, and
//! serves until the process is stopped.

use std::sync::Arc;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::PostParams;
use kube::{Api, Client, Config};

use super::access::{Access, Reviews};
use super::actions::Actions;
use super::cache::CacheSource;
use super::hosts::{self, AllowedHosts};
use super::identity::{Identity, Impersonate, KeyError, Tokens, KEY_MIN};
use super::signin::{self, Claims, Provider, SignIn};
use super::{router_with, ConsoleError, IdentityMode, Steering, UiArgs};

/// What `ui` says when it starts: where, over what, and who acts.
pub fn banner(args: &UiArgs) -> String {
    let scope = args
        .namespace
        .as_deref()
        .map_or("every namespace".to_string(), |n| format!("namespace {n}"));
    let who = match (args.identity, &args.as_user) {
        (IdentityMode::None, _) => "read-only".to_string(),
        (IdentityMode::Kubeconfig, None) => "acting as the kubeconfig's user".to_string(),
        (IdentityMode::Kubeconfig, Some(user)) => format!("acting as {user}"),
        (IdentityMode::Proxy, _) => format!("acting as the user the proxy names in {}", args.user_header),
        (IdentityMode::Oidc, _) => format!(
            "signing each person in with {}",
            args.oidc.issuer_url.as_deref().unwrap_or("the OpenID provider")
        ),
    };
    format!("console on http://{} ({scope}, {who})", args.address)
}

/// Serves the console as `args` say, with `config`'s identity for reading.
pub async fn run(args: &UiArgs, config: Config) -> Result<(), ConsoleError> {
    may_listen(args.identity, args.address)?;
    let client = Client::try_from(config.clone()).map_err(ConsoleError::WhoAmI)?;
    let steering = match args.identity {
        IdentityMode::None => None,
        mode => Some(Arc::new(Steering {
            identity: identity(args, mode, &client).await?,
            tokens: tokens(args)?,
            actions: Actions::new(config, client.clone()),
        })),
    };
    let listener =
        tokio::net::TcpListener::bind(args.address)
            .await
            .map_err(|source| ConsoleError::Listen {
                address: args.address,
                source,
            })?;
    let source = CacheSource::start(client.clone(), args.namespace.clone()).await;
    // A person acting by impersonation reads as themselves too: behind a
    // proxy, and as `--as` names (as kubectl --as reads).
    let impersonated = match &steering {
        Some(s) => matches!(
            &s.identity,
            Identity::Proxy { .. }
                | Identity::Oidc(_)
                | Identity::Kubeconfig {
                    impersonate: Some(_),
                    ..
                }
        ),
        None => false,
    };
    let access = impersonated.then(|| Reviews::new(client.clone()) as Arc<dyn Access>);
    let mut routes = router_with(source, steering, access);
    let behind_proxy = args.identity == IdentityMode::Proxy;
    if let Some(names) = AllowedHosts::of_console(args.address, behind_proxy, &args.allowed_hosts) {
        routes = hosts::only(routes, names);
    }
    axum::serve(listener, routes).await.map_err(ConsoleError::Serve)
}

/// A console that acts listens on the loopback only: behind a proxy, the
/// proxy names the user, so whoever else reached the console could name
/// any; as the kubeconfig's user, whoever reached it would act as you.
pub fn may_listen(identity: IdentityMode, address: std::net::SocketAddr) -> Result<(), ConsoleError> {
    if address.ip().is_loopback() {
        return Ok(());
    }
    match identity {
        IdentityMode::Proxy => Err(ConsoleError::ProxyNotOnLoopback(address)),
        IdentityMode::Kubeconfig => Err(ConsoleError::ActsOffLoopback(address)),
        // It signs each person in itself: reaching it names nobody.
        IdentityMode::Oidc | IdentityMode::None => Ok(()),
    }
}

/// The key of the forms' tokens: the one replicas share, or one of this
/// process alone.
fn tokens(args: &UiArgs) -> Result<Tokens, ConsoleError> {
    match &args.session_key {
        Some(key) => Ok(Tokens::with_key(key.as_bytes())?),
        None => {
            if matches!(args.identity, IdentityMode::Proxy | IdentityMode::Oidc) {
                tracing::warn!(
                    "no CONSOLE_SESSION_KEY: a form is good on this replica only; give every replica \
                     one key from a Secret"
                );
            }
            Ok(Tokens::new()?)
        }
    }
}

async fn identity(args: &UiArgs, mode: IdentityMode, client: &Client) -> Result<Identity, ConsoleError> {
    Ok(match mode {
        IdentityMode::Oidc => Identity::Oidc(Arc::new(sign_in(args)?)),
        IdentityMode::Proxy => Identity::Proxy {
            user: args.user_header.clone(),
            groups: args.groups_header.clone(),
        },
        _ => Identity::Kubeconfig {
            name: who_am_i(client).await?,
            impersonate: args.as_user.clone().map(|user| Impersonate {
                user,
                groups: args.as_groups.clone(),
            }),
        },
    })
}

/// The kubeconfig's user as the API server knows it, as `kubectl auth
/// whoami` asks.
async fn who_am_i(client: &Client) -> Result<String, ConsoleError> {
    let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(ConsoleError::WhoAmI)?;
    Ok(review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_else(|| "the kubeconfig's user".to_string()))
}

/// The console's own sign-in, as the `--oidc-*` flags say.
pub fn sign_in(args: &UiArgs) -> Result<SignIn, ConsoleError> {
    let oidc = &args.oidc;
    let issuer = oidc.issuer_url.clone().ok_or(ConsoleError::OidcMissing(
        "--oidc-issuer-url, the provider's issuer exactly as its tokens name it",
    ))?;
    let client_id = (oidc.client_id.clone())
        .ok_or(ConsoleError::OidcMissing("--oidc-client-id, the console's client at the provider"))?;
    let on_loopback = args.address.ip().is_loopback();
    let redirect = match (&oidc.redirect_url, on_loopback) {
        (Some(url), _) => url.clone(),
        (None, true) => format!("http://{}{}", args.address, signin::CALLBACK_PATH),
        (None, false) => return Err(ConsoleError::OidcMissing(
            "--oidc-redirect-url, the console's address as browsers reach it with the path /auth/callback",
        )),
    };
    let key = match (&args.session_key, on_loopback) {
        (Some(key), _) => key.as_bytes().to_vec(),
        // On the loopback, one person's console: a key of its own is fine.
        (None, true) => {
            let mut key = vec![0u8; KEY_MIN];
            getrandom::fill(&mut key).map_err(KeyError::Random)?;
            key
        }
        (None, false) => return Err(ConsoleError::OidcNeedsKey),
    };
    let ca = match &oidc.ca_file {
        Some(path) => Some(std::fs::read(path).map_err(|source| ConsoleError::OidcCa {
            path: path.clone(),
            source,
        })?),
        None => None,
    };
    let provider = Provider {
        issuer,
        client_id,
        client_secret: oidc.client_secret.clone().filter(|s| !s.is_empty()),
        redirect,
        scopes: oidc
            .extra_scopes
            .iter()
            .filter(|s| !s.is_empty() && *s != "openid")
            .cloned()
            .collect(),
        claims: Claims {
            username: oidc.username_claim.clone(),
            username_prefix: oidc.username_prefix.clone(),
            groups: oidc.groups_claim.clone(),
            groups_prefix: oidc.groups_prefix.clone(),
        },
        lifetime: oidc.session_lifetime,
        ca,
    };
    Ok(SignIn::new(provider, &key)?)
}
