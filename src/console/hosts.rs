//! The names the console answers to. A console on the loopback acts as
//! the kubeconfig's user, so a page of another site that rebinds its own
//! name to 127.0.0.1 (DNS rebinding) would be same-origin with it, read
//! its CSRF token and act as the user. The browser still sends the
//! attacker's name in `Host`: a request whose `Host` is not one of the
//! console's own names gets nothing, as `kubectl proxy --accept-hosts`
//! refuses it.
//!
//! On the loopback the console answers to `localhost`, `127.0.0.1`,
//! `[::1]` and the address it listens on, and to the names
//! `--allowed-hosts` adds; elsewhere only when `--allowed-hosts` is
//! given. Behind an authenticating proxy the name is the proxy's own, and
//! the proxy signs each request in: no check unless names are given.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;

/// The host names a console answers to, lower case, without port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts(BTreeSet<String>);

impl AllowedHosts {
    /// The names a console listening on `address` answers to, with
    /// `extra`; `None` when any name is let through (not on the loopback,
    /// or behind a proxy, and no name given).
    pub fn of_console(address: SocketAddr, behind_proxy: bool, extra: &[String]) -> Option<Self> {
        let loopback = address.ip().is_loopback();
        if extra.is_empty() && (!loopback || behind_proxy) {
            return None;
        }
        let mut names: BTreeSet<String> = extra.iter().map(|n| normalize(n)).collect();
        if loopback {
            let own = match address {
                SocketAddr::V4(a) => a.ip().to_string(),
                SocketAddr::V6(a) => format!("[{}]", a.ip()),
            };
            names.extend(["localhost".to_string(), "127.0.0.1".into(), "[::1]".into(), own]);
        }
        Some(Self(names))
    }

    /// Whether a request naming `host` (a `Host` header: a name, an IPv4
    /// address or a bracketed IPv6 one, with or without a port) is let in.
    pub fn allows(&self, host: &str) -> bool {
        self.0.contains(&normalize(host))
    }

    fn listed(&self) -> String {
        self.0.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// A host name as compared: lower case, no port, no trailing dot.
fn normalize(host: &str) -> String {
    let host = host.trim();
    let name = match host.strip_prefix('[') {
        // [::1]:8090 → [::1]
        Some(rest) => rest.split_once(']').map_or(host.to_string(), |(ip, _)| format!("[{ip}]")),
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name.to_string(),
            _ => host.to_string(),
        },
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `router`, answering only requests that name one of `hosts`.
pub fn only(router: Router, hosts: AllowedHosts) -> Router {
    let hosts = Arc::new(hosts);
    router.layer(axum::middleware::from_fn(move |request: Request, next: Next| {
        let hosts = Arc::clone(&hosts);
        async move {
            // HTTP/1.1 names it in Host, HTTP/2 in the request's authority.
            let named = request
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
                .or_else(|| request.uri().authority().map(|a| a.to_string()));
            match named {
                Some(host) if hosts.allows(&host) => next.run(request).await,
                _ => refused(&hosts),
            }
        }
    }))
}

fn refused(hosts: &AllowedHosts) -> Response {
    let message = format!(
        "This console answers to {} only. If you reached it by another name, add that name with \
         --allowed-hosts.\n",
        hosts.listed()
    );
    let mut response = (StatusCode::FORBIDDEN, message).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> AllowedHosts {
        AllowedHosts::of_console("127.0.0.1:8090".parse().unwrap(), false, &[]).unwrap()
    }

    #[test]
    fn the_loopback_console_answers_to_its_own_names_only() {
        let hosts = loopback();
        for own in [
            "localhost:8090",
            "LOCALHOST",
            "127.0.0.1:8090",
            "[::1]:8090",
            "localhost.",
            "[::1]",
        ] {
            assert!(hosts.allows(own), "{own}");
        }
        for foreign in [
            "evil.example:8090",
            "127.0.0.1.nip.io:8090",
            "localhost.evil.example",
            "",
            "[::2]:8090",
        ] {
            assert!(!hosts.allows(foreign), "{foreign}");
        }
    }

    #[test]
    fn allowed_hosts_add_names_and_switch_the_check_on_anywhere() {
        let wide: SocketAddr = "0.0.0.0:8090".parse().unwrap();
        assert_eq!(AllowedHosts::of_console(wide, false, &[]), None, "in the cluster: no names given");
        assert_eq!(
            AllowedHosts::of_console("127.0.0.1:8090".parse().unwrap(), true, &[]),
            None,
            "behind a proxy, the name is the proxy's own"
        );
        let named = AllowedHosts::of_console(wide, false, &["Console.Example.com".into()]).unwrap();
        assert!(named.allows("console.example.com:443"));
        assert!(!named.allows("localhost"), "not on the loopback: only the names given");
        let laptop =
            AllowedHosts::of_console("127.0.0.2:8090".parse().unwrap(), false, &["fleet.local".into()])
                .unwrap();
        assert!(
            laptop.allows("fleet.local:8090")
                && laptop.allows("127.0.0.2:8090")
                && laptop.allows("localhost")
        );
        let v6 = AllowedHosts::of_console("[::1]:8090".parse().unwrap(), false, &[]).unwrap();
        assert!(v6.allows("[::1]:8090") && !v6.allows("::1"));
    }
}
