//! Where the checks' queries and webhook gates may be sent: the
//! controller's `--check-allowed-hosts`, host names (`prometheus.monitoring`,
//! `*.ci.example.com`) and address ranges (`10.20.0.0/16`). Empty, any
//! host. A name not listed may still be asked when every address it
//! resolves to lies in a listed range: the resolver the HTTP client uses
//! keeps only those, so a name cannot be made to resolve elsewhere
//! between the check and the connection.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use ipnet::IpNet;

/// The hosts checks and gates may name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    names: Vec<String>,
    ranges: Vec<IpNet>,
}

/// One entry of `--check-allowed-hosts` that is neither a host name nor
/// an address range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is neither a host name (prometheus.monitoring, *.example.com) nor an address range \
     (10.0.0.0/8, fd00::/8)"
)]
pub struct BadEntry(String);

impl FromStr for Reach {
    type Err = BadEntry;

    /// A comma-separated list; blanks are ignored.
    fn from_str(text: &str) -> Result<Self, BadEntry> {
        let mut reach = Reach::default();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if let Ok(range) = entry.parse::<IpNet>() {
                reach.ranges.push(range);
            } else if let Ok(address) = entry.parse::<IpAddr>() {
                reach.ranges.push(IpNet::from(address));
            } else if is_host_pattern(entry) {
                reach.names.push(entry.to_ascii_lowercase());
            } else {
                return Err(BadEntry(entry.to_string()));
            }
        }
        Ok(reach)
    }
}

/// A DNS name, or `*.` and one.
fn is_host_pattern(entry: &str) -> bool {
    let name = entry.strip_prefix("*.").unwrap_or(entry);
    !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

impl Reach {
    /// Whether any host may be asked.
    pub fn is_open(&self) -> bool {
        self.names.is_empty() && self.ranges.is_empty()
    }

    fn names_allow(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.names.iter().any(|name| match name.strip_prefix("*.") {
            Some(suffix) => {
                host.strip_suffix(suffix).is_some_and(|head| head.ends_with('.') && head.len() > 1)
            }
            None => *name == host,
        })
    }

    fn ranges_allow(&self, address: IpAddr) -> bool {
        self.ranges.iter().any(|range| range.contains(&address))
    }

    /// Whether `url` may be asked, before any connection: a listed name,
    /// an address in a listed range, or a name the resolver will judge by
    /// its addresses. Why not, in the words of the flag, when not.
    pub fn check(&self, url: &reqwest::Url) -> Result<(), String> {
        if self.is_open() {
            return Ok(());
        }
        let refused = |host: &str| {
            format!("{host} is not among the hosts the controller may ask (its --check-allowed-hosts)")
        };
        let Some(host) = url.host_str() else {
            return Err(format!("{url} names no host"));
        };
        let address = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>();
        match address {
            Ok(address) if self.ranges_allow(address) => Ok(()),
            Ok(_) => Err(refused(host)),
            Err(_) if self.names_allow(host) || !self.ranges.is_empty() => Ok(()),
            Err(_) => Err(refused(host)),
        }
    }

    /// The addresses of `name` it may connect to: all of them for a
    /// listed name, else those in a listed range; none is an error.
    fn admit(&self, name: &str, addresses: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, String> {
        if self.is_open() || self.names_allow(name) {
            return Ok(addresses);
        }
        let (kept, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
            addresses.into_iter().partition(|a| self.ranges_allow(a.ip()));
        if kept.is_empty() {
            let refused: Vec<String> = refused.iter().map(|a| a.ip().to_string()).collect();
            return Err(format!(
                "{name} resolves to {}, outside the address ranges the controller may ask (its \
                 --check-allowed-hosts)",
                refused.join(", ")
            ));
        }
        Ok(kept)
    }
}

/// The HTTP client's resolver: the system's, its answers kept to what
/// [`Reach`] admits.
pub struct Resolver(pub Arc<Reach>);

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let reach = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let admitted = reach
                .admit(&host, found)
                .map_err(|why| -> Box<dyn std::error::Error + Send + Sync> { why.into() })?;
            Ok(Box::new(admitted.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> reqwest::Url {
        reqwest::Url::parse(text).expect("a URL")
    }

    #[test]
    fn an_empty_list_lets_any_host_be_asked() {
        let reach: Reach = "".parse().expect("empty");
        assert!(reach.is_open());
        assert_eq!(reach.check(&url("http://169.254.169.254/latest")), Ok(()));
    }

    #[test]
    fn names_and_wildcards_match_whole_labels() {
        let reach: Reach = "prometheus.monitoring, *.ci.example.com".parse().expect("two names");
        assert_eq!(reach.check(&url("http://prometheus.monitoring:9090")), Ok(()));
        assert_eq!(reach.check(&url("https://gate.ci.example.com/approve")), Ok(()));
        for refused in [
            "https://ci.example.com/",
            "https://evilci.example.com/",
            "http://prometheus.monitoring.evil.com/",
            "http://10.0.0.1/",
        ] {
            let why = reach.check(&url(refused)).expect_err(refused);
            assert!(why.contains("--check-allowed-hosts"), "{why}");
        }
    }

    #[test]
    fn addresses_are_judged_by_range_and_names_by_what_they_resolve_to() {
        let reach: Reach = "10.20.0.0/16,fd00::1".parse().expect("ranges");
        assert_eq!(reach.check(&url("http://10.20.3.4:9090")), Ok(()));
        assert_eq!(reach.check(&url("http://[fd00::1]:9090")), Ok(()));
        assert!(reach.check(&url("http://169.254.169.254/")).is_err());
        // A name goes to the resolver, which keeps the addresses in range.
        assert_eq!(reach.check(&url("http://prometheus.monitoring")), Ok(()));
        let at = |ip: &str| SocketAddr::new(ip.parse().expect("an address"), 0);
        assert_eq!(reach.admit("p", vec![at("10.20.0.9"), at("169.254.169.254")]), Ok(vec![at("10.20.0.9")]));
        let why = reach.admit("p", vec![at("169.254.169.254")]).expect_err("outside");
        assert!(why.contains("169.254.169.254"), "{why}");
    }

    #[test]
    fn an_entry_that_is_neither_is_refused() {
        assert!("prometheus.monitoring,http://x".parse::<Reach>().is_err());
        assert!("10.0.0.0/33".parse::<Reach>().is_err());
    }
}
