//! The HTTP client that talks to the provider: TLS with the system's
//! roots and the configured ones, a timeout, and no redirect followed.

use std::time::Duration;

use super::{ConfigError, SignIn};

/// The client that talks to the provider: HTTP/1.1, TLS with ring and
/// the system's roots (and `ca`'s), plain HTTP for a loopback provider.
pub(super) type Http = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    http_body_util::Full<bytes::Bytes>,
>;

pub(super) fn http_client(ca: Option<&[u8]>) -> Result<Http, ConfigError> {
    let tls = crate::tls::client_config(ca).map_err(|e| match e {
        crate::tls::TlsError::Config(why) => ConfigError::Client(why),
        other => ConfigError::Ca(other.to_string()),
    })?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector))
}

/// Why a request to the provider got no answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Request(#[from] hyper_util::client::legacy::Error),
    #[error("reading the answer: {0}")]
    Body(#[from] hyper::Error),
    #[error("no answer within {} s", PROVIDER_TIMEOUT.as_secs())]
    Timeout,
}

/// How long the provider has to answer one request.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

impl SignIn {
    /// openidconnect's HTTP client: each request sent with hyper, as a
    /// boxed future of its own (a future borrowing the client is not
    /// `Send` for every lifetime, which axum's handlers must be). The
    /// provider's redirects are never followed: one could point the
    /// console at any address (SSRF), as openidconnect's documentation
    /// warns.
    pub(super) fn http_client(&self) -> impl Fn(openidconnect::HttpRequest) -> HttpFuture + Send + Sync {
        let http = self.http.clone();
        move |request| Box::pin(send(http.clone(), request))
    }
}

type HttpFuture = futures::future::BoxFuture<'static, Result<openidconnect::HttpResponse, HttpError>>;

/// One request of openidconnect's.
async fn send(
    http: Http,
    request: openidconnect::HttpRequest,
) -> Result<openidconnect::HttpResponse, HttpError> {
    use http_body_util::BodyExt;
    let request = request.map(|body| http_body_util::Full::new(bytes::Bytes::from(body)));
    let exchange = async {
        let response = http.request(request).await?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes().to_vec();
        Ok::<_, HttpError>(axum::http::Response::from_parts(parts, body))
    };
    tokio::time::timeout(PROVIDER_TIMEOUT, exchange)
        .await
        .map_err(|_| HttpError::Timeout)?
}
