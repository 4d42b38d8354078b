//! The client's own middleware: it paces requests to the QPS and burst the
//! flags set (`--kube-api-qps`, `--kube-api-burst`, as Flux's controllers
//! and client-go have them), counts every request by verb and resource as
//! `nodepool_fanout_api_requests_total`, and those that fail, by verb,
//! resource and HTTP code, as `nodepool_fanout_api_errors_total`.
//!
//! The count is taken in the client's tower stack, below kube's runtime: it
//! sees every request (watches, per-pool writes that fail without failing
//! the reconcile, leader election, Events), which the reconcile results
//! alone cannot show. A request that gets no answer at all (connection
//! refused, timeout) counts under the code `transport`.

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::{Body, ClientBuilder};
use kube::{Client, Config};
use tower::{Layer, Service};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::runtime::metrics::Metrics;

/// How fast the client may send requests: a token bucket refilled at `qps`
/// per second that holds at most `burst`. Watches take a token to start,
/// not for the events they carry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    pub qps: f32,
    pub burst: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum PaceError {
    #[error("--kube-api-qps must be a positive number of requests per second, not {0}")]
    Qps(f32),
    #[error("--kube-api-burst must be at least 1")]
    Burst,
}

impl Pace {
    fn limiter(self) -> Result<DefaultDirectRateLimiter, PaceError> {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return Err(PaceError::Qps(self.qps));
        }
        let burst = NonZeroU32::new(self.burst).ok_or(PaceError::Burst)?;
        let period = Duration::from_secs_f64(1.0 / f64::from(self.qps));
        let quota = Quota::with_period(period).ok_or(PaceError::Qps(self.qps))?;
        Ok(RateLimiter::direct(quota.allow_burst(burst)))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Pace(#[from] PaceError),
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// A client paced by `pace`, whose requests are counted in `metrics`.
pub async fn client(metrics: Arc<Metrics>, pace: Pace) -> Result<Client, ClientError> {
    let limiter = Arc::new(pace.limiter()?);
    let config = Config::infer().await.map_err(kube::Error::InferConfig)?;
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&CountErrorsLayer { metrics, limiter })
        .build())
}

struct CountErrorsLayer {
    metrics: Arc<Metrics>,
    limiter: Arc<DefaultDirectRateLimiter>,
}

impl<S> Layer<S> for CountErrorsLayer {
    type Service = CountErrors<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountErrors {
            inner,
            metrics: self.metrics.clone(),
            limiter: self.limiter.clone(),
            token: Token::None,
        }
    }
}

pub struct CountErrors<S> {
    inner: S,
    metrics: Arc<Metrics>,
    limiter: Arc<DefaultDirectRateLimiter>,
    token: Token,
}

/// The next request's place in the bucket.
enum Token {
    None,
    Waiting(Pin<Box<dyn Future<Output = ()> + Send>>),
    Held,
}

impl<S, B> Service<Request<Body>> for CountErrors<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    /// Ready once the bucket grants a token: kube's client sends every
    /// request through one buffer, so a request waiting here holds back
    /// those behind it, as the bucket means it to.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.token {
                Token::Held => return self.inner.poll_ready(cx),
                Token::Waiting(wait) => {
                    std::task::ready!(wait.as_mut().poll(cx));
                    self.token = Token::Held;
                }
                Token::None => {
                    let limiter = self.limiter.clone();
                    self.token = Token::Waiting(Box::pin(async move { limiter.until_ready().await }));
                }
            }
        }
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        self.token = Token::None;
        let target = RequestTarget::of(&request);
        let metrics = self.metrics.clone();
        metrics.observe_api_request(target.verb, &target.resource);
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) if response.status().as_u16() >= 400 => {
                    Some(response.status().as_str().to_string())
                }
                Ok(_) => None,
                Err(_) => Some("transport".to_string()),
            };
            if let Some(code) = code {
                metrics.observe_api_error(target.verb, &target.resource, &code);
            }
            result
        })
    }
}

/// What a request does to which resource, in the API server's own terms
/// (`apiserver_request_total` uses the same verbs).
#[derive(Debug, PartialEq, Eq)]
struct RequestTarget {
    verb: &'static str,
    /// `plural.group` as `kubectl api-resources` names it (`pods` for the
    /// core group), with `/subresource` when there is one; `discovery` for
    /// the paths that list APIs.
    resource: String,
}

impl RequestTarget {
    fn of<T>(request: &Request<T>) -> Self {
        let path = request.uri().path();
        let query = request.uri().query().unwrap_or("");
        let (resource, named) = parse_path(path);
        let is_apply = request
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
        let verb = match *request.method() {
            Method::GET if named => "get",
            Method::GET if query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1") => "watch",
            Method::GET => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH if is_apply => "apply",
            Method::PATCH => "patch",
            Method::DELETE if named => "delete",
            Method::DELETE => "deletecollection",
            _ => "other",
        };
        Self { verb, resource }
    }
}

/// The resource a request path addresses and whether it names one object.
///
/// `/api/v1[/namespaces/{ns}]/{plural}[/{name}[/{sub}]]` and
/// `/apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/{sub}]]`;
/// a path of `/api/v1/namespaces[/{name}]` addresses namespaces themselves.
fn parse_path(path: &str) -> (String, bool) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return ("discovery".to_string(), false),
    };
    let rest = match rest {
        ["namespaces", _ns, plural, tail @ ..] => {
            let mut r = vec![*plural];
            r.extend_from_slice(tail);
            r
        }
        other => other.to_vec(),
    };
    let Some((plural, tail)) = rest.split_first() else {
        return ("discovery".to_string(), false);
    };
    let mut resource = match group {
        "" => plural.to_string(),
        group => format!("{plural}.{group}"),
    };
    if let [_name, sub, ..] = tail {
        resource.push('/');
        resource.push_str(sub);
    }
    (resource, !tail.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(method: Method, uri: &str, content_type: Option<&str>) -> RequestTarget {
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(ct) = content_type {
            builder = builder.header(http::header::CONTENT_TYPE, ct);
        }
        RequestTarget::of(&builder.body(()).unwrap())
    }

    fn t(verb: &'static str, resource: &str) -> RequestTarget {
        RequestTarget {
            verb,
            resource: resource.to_string(),
        }
    }

    #[test]
    fn requests_are_named_as_the_api_server_names_them() {
        let cases = [
            (Method::GET, "/api/v1/pods", None, t("list", "pods")),
            (Method::GET, "/api/v1/namespaces/edge/pods/p", None, t("get", "pods")),
            (Method::GET, "/api/v1/namespaces/edge", None, t("get", "namespaces")),
            (Method::GET, "/api/v1/namespaces", None, t("list", "namespaces")),
            (
                Method::GET,
                "/apis/helm.toolkit.fluxcd.io/v2/helmreleases?watch=true&resourceVersion=5",
                None,
                t("watch", "helmreleases.helm.toolkit.fluxcd.io"),
            ),
            (
                Method::PATCH,
                "/apis/helm.toolkit.fluxcd.io/v2/namespaces/edge/helmreleases/ingress-a?fieldManager=x",
                Some("application/apply-patch+yaml"),
                t("apply", "helmreleases.helm.toolkit.fluxcd.io"),
            ),
            (
                Method::PATCH,
                "/apis/apps.nodepool-fanout.io/v1alpha1/namespaces/edge/nodepoolapplications/a/status",
                Some("application/merge-patch+json"),
                t("patch", "nodepoolapplications.apps.nodepool-fanout.io/status"),
            ),
            (
                Method::DELETE,
                "/apis/source.toolkit.fluxcd.io/v1/namespaces/edge/helmcharts/c",
                None,
                t("delete", "helmcharts.source.toolkit.fluxcd.io"),
            ),
            (
                Method::DELETE,
                "/apis/source.toolkit.fluxcd.io/v1/namespaces/edge/helmcharts",
                None,
                t("deletecollection", "helmcharts.source.toolkit.fluxcd.io"),
            ),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/edge/events",
                None,
                t("create", "events.events.k8s.io"),
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/s/leases/l",
                None,
                t("update", "leases.coordination.k8s.io"),
            ),
            (Method::GET, "/apis/apps.openyurt.io/v1beta2", None, t("list", "discovery")),
            (Method::GET, "/apis", None, t("list", "discovery")),
            (Method::GET, "/version", None, t("list", "discovery")),
            (Method::HEAD, "/api/v1/pods", None, t("other", "pods")),
        ];
        for (method, uri, ct, want) in cases {
            assert_eq!(target(method, uri, ct), want, "{uri}");
        }
    }
}
