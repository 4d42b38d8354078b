//! Who acts from the console, and the token that proves a form was sent
//! from the console's own page (CSRF).
//!
//! - [`Identity::Kubeconfig`]: `nodepool-fanout ui` on the loopback acts as
//!   the kubeconfig's user, as `kubectl` does, or as `--as`/`--as-group`
//!   say (Kubernetes impersonation, as `kubectl --as`).
//! - [`Identity::Proxy`]: in the cluster, behind an authenticating proxy
//!   (oauth2-proxy, for one) that signs the user in and passes the user's
//!   name and groups in request headers; each action is done as that user
//!   by impersonation, so the API server's RBAC decides. The console's
//!   right to impersonate is the crown jewel: a `system:` user or group is
//!   never impersonated (no proxy signs people in as one; a request that
//!   names one was forged), nor a request that names its user twice.
//! - [`Identity::Oidc`]: in the cluster, the console signs each person in
//!   itself with OpenID Connect ([`super::signin`]) and keeps who they
//!   are in a sealed session cookie; each action is done as that person
//!   by impersonation, as behind a proxy. No header names anybody.
//! - With no identity the console is read-only and serves no action route.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderName};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// How the console learns who acts.
#[derive(Debug, Clone)]
pub enum Identity {
    /// The kubeconfig's user (`name`, as the API server knows it), or
    /// the user `--as` names, with `--as-group`'s groups.
    Kubeconfig {
        name: String,
        impersonate: Option<Impersonate>,
    },
    /// The user and groups an authenticating proxy passes in headers.
    Proxy { user: HeaderName, groups: HeaderName },
    /// The person the console's own sign-in put in the session cookie.
    Oidc(std::sync::Arc<super::signin::SignIn>),
}

/// A user to act as, and the user's groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonate {
    pub user: String,
    pub groups: Vec<String>,
}

/// The user a request acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The name the Events carry.
    pub name: String,
    /// Whom the API requests impersonate; none for the kubeconfig's own
    /// user.
    pub impersonate: Option<Impersonate>,
    /// The sign-in this request is of (its id, and when it expires), where
    /// the console signed the person in: a form's token is good for that
    /// session only, and never outlives it.
    pub session: Option<(String, u64)>,
}

/// Why a request acts as nobody.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoActor {
    #[error("Nobody is signed in: sign in first.")]
    NotSignedIn,
    #[error(
        "Refused: the request names {0}, which the console never acts as. Kubernetes' own users and \
         groups (system:) come from no sign-in."
    )]
    System(String),
    #[error("Refused: the request names its user more than once.")]
    TwoUsers,
}

/// Kubernetes' own users and groups: `system:masters`, service accounts,
/// nodes. No person signs in as one.
pub(crate) fn is_system(name: &str) -> bool {
    name.starts_with("system:")
}

impl Identity {
    /// Who sends a request with `headers`: nobody when a proxy should
    /// have named the user and did not, or named one the console never
    /// acts as.
    pub fn actor(&self, headers: &HeaderMap) -> Result<Actor, NoActor> {
        match self {
            Self::Kubeconfig { name, impersonate } => Ok(Actor {
                name: impersonate.as_ref().map_or(name.clone(), |i| i.user.clone()),
                impersonate: impersonate.clone(),
                session: None,
            }),
            Self::Oidc(signin) => {
                let session = signin.session(headers).ok_or(NoActor::NotSignedIn)?;
                // Refused at sign-in already; a key that leaked must not
                // make one either.
                if is_system(&session.user) {
                    return Err(NoActor::System(format!("the user {}", session.user)));
                }
                if let Some(group) = session.groups.iter().find(|g| is_system(g)) {
                    return Err(NoActor::System(format!("the group {group}")));
                }
                Ok(Actor {
                    name: session.user.clone(),
                    impersonate: Some(session.impersonate()),
                    session: Some((session.id.clone(), session.expires)),
                })
            }
            Self::Proxy { user, groups } => {
                let mut users = headers.get_all(user).iter();
                let user = users.next().and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or_default();
                if users.next().is_some() {
                    return Err(NoActor::TwoUsers);
                }
                if user.is_empty() {
                    return Err(NoActor::NotSignedIn);
                }
                if is_system(user) {
                    return Err(NoActor::System(format!("the user {user}")));
                }
                let groups: Vec<String> = headers
                    .get_all(groups)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .flat_map(|v| v.split(','))
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(group) = groups.iter().find(|g| is_system(g)) {
                    return Err(NoActor::System(format!("the group {group}")));
                }
                Ok(Actor {
                    name: user.to_string(),
                    impersonate: Some(Impersonate {
                        user: user.to_string(),
                        groups,
                    }),
                    session: None,
                })
            }
        }
    }
}

/// How long a page's forms stay good: a page left open longer asks for a
/// reload.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The shortest key the console takes (`CONSOLE_SESSION_KEY`).
pub const KEY_MIN: usize = 32;

/// The CSRF token of one user: when it expires, and an HMAC-SHA256 of
/// that time, the user and the user's groups under the console's key. A
/// page of the console carries it in each form; another site cannot read
/// it, so cannot forge the form. Replicas given one key
/// (`CONSOLE_SESSION_KEY`, from a Secret) take each other's tokens.
#[derive(Clone)]
pub struct Tokens {
    key: Vec<u8>,
}

/// Why a key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "CONSOLE_SESSION_KEY is {0} bytes: give at least {KEY_MIN} random ones (openssl rand -hex 32), the \
         same to every replica"
    )]
    TooShort(usize),
    #[error("cannot draw the console's key from the operating system: {0}")]
    Random(getrandom::Error),
}

impl Tokens {
    /// A key of this process alone, from the operating system's random
    /// source: tokens are good on this replica only.
    pub fn new() -> Result<Self, KeyError> {
        let mut key = vec![0u8; KEY_MIN];
        getrandom::fill(&mut key).map_err(KeyError::Random)?;
        Ok(Self { key })
    }

    /// The key replicas share.
    pub fn with_key(key: &[u8]) -> Result<Self, KeyError> {
        match key.len() >= KEY_MIN {
            true => Ok(Self { key: key.to_vec() }),
            false => Err(KeyError::TooShort(key.len())),
        }
    }

    pub fn token(&self, actor: &Actor) -> String {
        self.token_at(actor, SystemTime::now())
    }

    /// The token a page served at `now` carries.
    pub fn token_at(&self, actor: &Actor, now: SystemTime) -> String {
        let expires = (now + TOKEN_LIFETIME).duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        // Never past the session it is of.
        let expires = actor.session.as_ref().map_or(expires, |(_, ends)| expires.min(*ends));
        format!("{expires}.{}", hex::encode(self.mac(actor, expires)))
    }

    fn mac(&self, actor: &Actor, expires: u64) -> Vec<u8> {
        // Any key length is taken by HMAC; the error is never returned.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            return Vec::new();
        };
        mac.update(b"nodepool-fanout console csrf\0");
        mac.update(expires.to_string().as_bytes());
        mac.update(&[0]);
        mac.update(actor.name.as_bytes());
        if let Some(i) = &actor.impersonate {
            for group in &i.groups {
                mac.update(&[0]);
                mac.update(group.as_bytes());
            }
        }
        if let Some((id, _)) = &actor.session {
            mac.update(b"\0session\0");
            mac.update(id.as_bytes());
        }
        mac.finalize().into_bytes().to_vec()
    }

    /// Whether `given` is `actor`'s token and has not expired, its MAC
    /// compared in constant time.
    pub fn check(&self, actor: &Actor, given: &str) -> bool {
        self.check_at(actor, given, SystemTime::now())
    }

    pub fn check_at(&self, actor: &Actor, given: &str, now: SystemTime) -> bool {
        let Some((expires, mac)) = given.split_once('.') else {
            return false;
        };
        let (Ok(expires), Ok(mac)) = (expires.parse::<u64>(), hex::decode(mac)) else {
            return false;
        };
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        // Never one that outlives a lifetime from now: the key signed it.
        if expires <= now || expires > now + TOKEN_LIFETIME.as_secs() {
            return false;
        }
        self.mac(actor, expires).ct_eq(&mac).into()
    }
}

/// Whether the browser says the request came from another site
/// (`Sec-Fetch-Site`, sent by every current browser): refused whatever
/// the token, as a second line.
pub fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| !matches!(site, "same-origin" | "none"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn proxy() -> Identity {
        Identity::Proxy {
            user: HeaderName::from_static("x-forwarded-user"),
            groups: HeaderName::from_static("x-forwarded-groups"),
        }
    }

    #[test]
    fn a_proxy_names_the_user_and_groups() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-user", HeaderValue::from_static("alice"));
        headers.append("x-forwarded-groups", HeaderValue::from_static("ops, edge"));
        headers.append("x-forwarded-groups", HeaderValue::from_static("viewers"));
        let actor = proxy().actor(&headers).unwrap();
        assert_eq!(actor.name, "alice");
        assert_eq!(actor.impersonate.unwrap().groups, ["ops", "edge", "viewers"]);
    }

    #[test]
    fn no_user_header_is_no_actor() {
        assert_eq!(proxy().actor(&HeaderMap::new()), Err(NoActor::NotSignedIn));
        let mut blank = HeaderMap::new();
        blank.insert("x-forwarded-user", HeaderValue::from_static("  "));
        assert_eq!(proxy().actor(&blank), Err(NoActor::NotSignedIn));
    }

    #[test]
    fn a_system_user_or_group_or_a_second_user_is_never_impersonated() {
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.append(*name, HeaderValue::from_static(value));
            }
            proxy().actor(&headers)
        };
        let masters = with(&[
            ("x-forwarded-user", "mallory"),
            ("x-forwarded-groups", "ops,system:masters"),
        ]);
        assert_eq!(masters, Err(NoActor::System("the group system:masters".into())));
        let node = with(&[("x-forwarded-user", "system:node:edge-1")]);
        assert_eq!(node, Err(NoActor::System("the user system:node:edge-1".into())));
        let account = with(&[("x-forwarded-user", "  system:serviceaccount:kube-system:default ")]);
        assert!(matches!(account, Err(NoActor::System(_))), "{account:?}");
        let two = with(&[("x-forwarded-user", "alice"), ("x-forwarded-user", "admin")]);
        assert_eq!(two, Err(NoActor::TwoUsers));
        let message = NoActor::System("the group system:masters".into()).to_string();
        assert!(message.contains("system:masters") && message.contains("never acts as"), "{message}");
        // A group that merely mentions system is a group.
        assert!(with(&[
            ("x-forwarded-user", "alice"),
            ("x-forwarded-groups", "systems-team")
        ])
        .is_ok());
    }

    #[test]
    fn the_kubeconfig_user_acts_unless_another_is_named() {
        let own = Identity::Kubeconfig {
            name: "admin".into(),
            impersonate: None,
        };
        let actor = own.actor(&HeaderMap::new()).unwrap();
        assert_eq!((actor.name.as_str(), actor.impersonate), ("admin", None));
        let bob = Impersonate {
            user: "bob".into(),
            groups: vec![],
        };
        let as_bob = Identity::Kubeconfig {
            name: "admin".into(),
            impersonate: Some(bob.clone()),
        };
        assert_eq!(
            as_bob.actor(&HeaderMap::new()).unwrap(),
            Actor {
                name: "bob".into(),
                impersonate: Some(bob),
                session: None
            }
        );
    }

    #[test]
    fn a_token_is_the_users_own() {
        let tokens = Tokens::new().unwrap();
        let alice = Actor {
            name: "alice".into(),
            impersonate: None,
            session: None,
        };
        let bob = Actor {
            name: "bob".into(),
            impersonate: None,
            session: None,
        };
        assert!(tokens.check(&alice, &tokens.token(&alice)));
        assert!(!tokens.check(&bob, &tokens.token(&alice)));
        assert!(!tokens.check(&alice, ""));
        assert!(!Tokens::new().unwrap().check(&alice, &tokens.token(&alice)), "another process's secret");
        let ops = Actor {
            name: "alice".into(),
            impersonate: Some(Impersonate {
                user: "alice".into(),
                groups: vec!["ops".into()],
            }),
            session: None,
        };
        assert!(!tokens.check(&ops, &tokens.token(&alice)), "groups are part of who acts");
    }

    #[test]
    fn a_token_is_of_one_sign_in_and_never_outlives_it() {
        let tokens = Tokens::with_key(&[7u8; 32]).unwrap();
        let now = SystemTime::now();
        let at = |secs: u64| now.duration_since(UNIX_EPOCH).unwrap().as_secs() + secs;
        let signed_in = |id: &str, ends: u64| Actor {
            name: "alice".into(),
            impersonate: Some(Impersonate {
                user: "alice".into(),
                groups: vec![],
            }),
            session: Some((id.into(), ends)),
        };
        let first = signed_in("s1", at(3600));
        let token = tokens.token_at(&first, now);
        assert!(tokens.check_at(&first, &token, now));
        assert!(!tokens.check_at(&signed_in("s2", at(3600)), &token, now), "a form of the sign-in before");
        let expires: u64 = token.split_once('.').unwrap().0.parse().unwrap();
        assert_eq!(expires, at(3600), "it ends with its session, before twelve hours");
        assert!(!tokens.check_at(&first, &token, now + Duration::from_secs(3601)));
    }

    #[test]
    fn a_token_expires_and_a_shared_key_makes_it_good_on_every_replica() {
        let alice = Actor {
            name: "alice".into(),
            impersonate: None,
            session: None,
        };
        let key = [7u8; 32];
        let (one, two) = (Tokens::with_key(&key).unwrap(), Tokens::with_key(&key).unwrap());
        let now = SystemTime::now();
        let token = one.token_at(&alice, now);
        assert!(two.check_at(&alice, &token, now), "another replica with the same key");
        let later = now + TOKEN_LIFETIME + Duration::from_secs(1);
        assert!(!two.check_at(&alice, &token, later), "expired");
        assert!(!Tokens::with_key(&[8u8; 32]).unwrap().check_at(&alice, &token, now), "another key");
        // A token whose expiry was pushed out is not the key's.
        let (_, mac) = token.split_once('.').unwrap();
        let pushed = format!("{}.{mac}", later.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert!(!one.check_at(&alice, &pushed, now));
        for garbage in ["", ".", "12.zz", "abc", "99999999999999999999.00"] {
            assert!(!one.check_at(&alice, garbage, now), "{garbage}");
        }
        let short = Tokens::with_key(b"too short").err().unwrap().to_string();
        assert!(short.contains("9 bytes") && short.contains("openssl rand"), "{short}");
    }

    #[test]
    fn only_same_origin_requests_pass() {
        let with = |site: &'static str| {
            let mut h = HeaderMap::new();
            h.insert("sec-fetch-site", HeaderValue::from_static(site));
            h
        };
        assert!(cross_site(&with("cross-site")));
        assert!(cross_site(&with("same-site")));
        assert!(!cross_site(&with("same-origin")));
        assert!(!cross_site(&HeaderMap::new()), "an old client sends none: the token decides");
    }
}
