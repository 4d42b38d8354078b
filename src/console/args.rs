//! The `ui` command's flags: where the console listens, whom it shows,
//! and who acts.

use std::net::SocketAddr;

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
