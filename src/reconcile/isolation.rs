//! One instance per pool, checked. Two ways a pool can reach into a
//! sibling's instance, both read from what helm-controller reports:
//!
//! - Helm refused to install or upgrade a pool's release because an object
//!   it renders exists and belongs to another Helm release (every release
//!   we write refuses to take objects over, see `release::build::refuse_takeover`).
//!   Helm's message names the object and the release that holds it; the
//!   pool's message then names the pool that holds it and what to change.
//! - Two pools' releases both list one object in `status.inventory` (an
//!   object taken over before releases refused it, or with takeover
//!   allowed). Each such pool fails, naming the object and the other pools.
//!
//! Pure: plain data in, plain data out.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

/// An object as helm-controller's inventory names it:
/// `<namespace>_<name>_<group>_<kind>` (the namespace empty for a
/// cluster-scoped object, the group empty for the core group; a `:` in a
/// name is written `__`, as Flux's inventory writes RBAC names).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectId {
    pub namespace: String,
    pub name: String,
    pub group: String,
    pub kind: String,
}

impl ObjectId {
    /// Reads an inventory entry's `id`; `None` when it is not of that form.
    pub fn parse(id: &str) -> Option<Self> {
        let (namespace, rest) = id.split_once('_')?;
        let (rest, kind) = rest.rsplit_once('_')?;
        let (name, group) = rest.rsplit_once('_')?;
        (!name.is_empty() && !kind.is_empty()).then(|| Self {
            namespace: namespace.to_string(),
            name: name.replace("__", ":"),
            group: group.to_string(),
            kind: kind.to_string(),
        })
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.group.as_str() {
            "" => self.kind.clone(),
            group => format!("{}.{group}", self.kind),
        };
        match self.namespace.as_str() {
            "" => write!(f, "{kind} {} (cluster-scoped)", self.name),
            namespace => write!(f, "{kind} {namespace}/{}", self.name),
        }
    }
}

/// Objects that more than one pool's release holds, each with the pools
/// that hold it, in pool order. `releases` gives each pool with the
/// inventory entry ids of its release.
pub fn shared_objects<'a>(
    releases: impl IntoIterator<Item = (&'a str, &'a [String])>,
) -> BTreeMap<&'a str, Vec<&'a str>> {
    // Hashed while every release's inventory goes in (tens of objects a
    // release, at thousands of releases), ordered only for the few shared.
    let mut holders: std::collections::HashMap<&str, Vec<&str>> = std::collections::HashMap::new();
    for (pool, inventory) in releases {
        for id in inventory {
            let pools = holders.entry(id.as_str()).or_default();
            if !pools.contains(&pool) {
                pools.push(pool);
            }
        }
    }
    holders
        .into_iter()
        .filter(|(_, pools)| pools.len() > 1)
        .map(|(id, mut pools)| {
            pools.sort_unstable();
            (id, pools)
        })
        .collect()
}

/// The failure a pool gets for the objects it shares: `shared` is what
/// [`shared_objects`] found, and the pool's own entries are looked up in
/// it. `None` when the pool shares nothing.
pub fn sharing_message(pool: &str, shared: &BTreeMap<&str, Vec<&str>>) -> Option<String> {
    let mine: Vec<(&str, Vec<&str>)> = shared
        .iter()
        .filter(|(_, pools)| pools.contains(&pool))
        .map(|(id, pools)| (*id, pools.iter().copied().filter(|p| *p != pool).collect()))
        .collect();
    let (id, others) = mine.first()?;
    let object = ObjectId::parse(id).map_or_else(|| id.to_string(), |o| o.to_string());
    let more = match mine.len() {
        1 => String::new(),
        n => format!(" (and {} more objects)", n - 1),
    };
    Some(format!(
        "{object}{more} is held by the releases of pools {} too: every pool's release has applied \
         it, so the pools share one object (whichever wrote last owns it, and the first release \
         removed deletes it for all); make its name unique per pool with a {{{{pool.name}}}} \
         template in the value that names it, or give each pool its own targetNamespace",
        others.join(", "),
    ))
}

/// An object Helm would not take over from another Helm release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// As Helm names it: `IngressClass "nginx" in namespace ""`.
    pub kind: String,
    pub name: String,
    pub namespace: String,
    /// The Helm release that holds it, when Helm said.
    pub holder: Option<String>,
}

impl Refusal {
    fn object(&self) -> String {
        match self.namespace.as_str() {
            "" => format!("{} {} (cluster-scoped)", self.kind, self.name),
            namespace => format!("{} {namespace}/{}", self.kind, self.name),
        }
    }
}

/// Helm's words for an object it will not take over, with the release
/// that holds it when the annotation check says so (Helm 3 and 4 alike:
/// `pkg/action/validate.go`'s `ownershipConflict` and `requireValue`).
static REFUSAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(\S+) "([^"]*)" in namespace "([^"]*)" exists and cannot be imported into the current release: invalid ownership metadata(?:[^\n]*?key "meta\.helm\.sh/release-name" must equal "[^"]*": current value is "([^"]*)")?"#,
    )
    .unwrap_or_else(|e| unreachable!("a constant pattern: {e}"))
});

/// Every object Helm's message says it would not take over.
pub fn refusals(message: &str) -> Vec<Refusal> {
    REFUSAL
        .captures_iter(message)
        .map(|c| Refusal {
            kind: c[1].to_string(),
            name: c[2].to_string(),
            namespace: c[3].to_string(),
            holder: c.get(4).map(|m| m.as_str().to_string()),
        })
        .collect()
}

/// A pool's failure message when Helm refused to take over an object:
/// which pool (or which other Helm release) holds it, and how to make the
/// name the pool's own. `pool_of` maps a Helm release name of this
/// application to its pool. `None` when Helm's message is of another kind.
pub fn refusal_message(helm_message: &str, pool_of: impl Fn(&str) -> Option<String>) -> Option<String> {
    let found = refusals(helm_message);
    let first = found.first()?;
    let holder = match first.holder.as_deref() {
        Some(release) => match pool_of(release) {
            Some(pool) => format!("the release of pool {pool} (Helm release {release}) holds it"),
            None => format!("Helm release {release}, not one of this application's, holds it"),
        },
        None => "another Helm release holds it".to_string(),
    };
    let more = match found.len() {
        1 => String::new(),
        n => format!(" (and {} more objects)", n - 1),
    };
    Some(format!(
        "{}{more} exists and is not taken over: {holder}. Make its name unique per pool with a \
         {{{{pool.name}}}} template in the value that names it, or give each pool its own \
         targetNamespace. Helm said: {helm_message}",
        first.object()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn inventory_ids_read_as_helm_controller_writes_them() {
        let class = ObjectId::parse("_nginx_networking.k8s.io_IngressClass").unwrap();
        assert_eq!(
            (class.namespace.as_str(), class.name.as_str(), class.group.as_str(), class.kind.as_str()),
            ("", "nginx", "networking.k8s.io", "IngressClass")
        );
        assert_eq!(class.to_string(), "IngressClass.networking.k8s.io nginx (cluster-scoped)");
        let map = ObjectId::parse("edge_gw-config__ConfigMap").unwrap();
        assert_eq!(map.to_string(), "ConfigMap edge/gw-config");
        // RBAC names with colons, as Flux's inventory transcodes them.
        let role = ObjectId::parse("_system__controller__gw_rbac.authorization.k8s.io_ClusterRole").unwrap();
        assert_eq!(role.name, "system:controller:gw");
        assert_eq!(ObjectId::parse("no-separators"), None);
        assert_eq!(ObjectId::parse("ns__group_"), None);
    }

    #[test]
    fn objects_two_pools_hold_are_found_and_nothing_else() {
        let a = ids(&["_nginx_networking.k8s.io_IngressClass", "edge-a_gw__ConfigMap"]);
        let b = ids(&["_nginx_networking.k8s.io_IngressClass", "edge-b_gw__ConfigMap"]);
        let c = ids(&["edge-c_gw__ConfigMap"]);
        let shared = shared_objects([("b", b.as_slice()), ("a", a.as_slice()), ("c", c.as_slice())]);
        assert_eq!(shared.len(), 1, "{shared:?}");
        assert_eq!(shared["_nginx_networking.k8s.io_IngressClass"], vec!["a", "b"]);
        let message = sharing_message("a", &shared).unwrap();
        assert!(message.starts_with("IngressClass.networking.k8s.io nginx (cluster-scoped) is held by the releases of pools b too"), "{message}");
        assert!(message.contains("{{pool.name}}"), "{message}");
        assert_eq!(sharing_message("c", &shared), None);
        // One release listing an object twice shares it with nobody.
        let twice = ids(&["ns_x__ConfigMap", "ns_x__ConfigMap"]);
        assert!(shared_objects([("a", twice.as_slice())]).is_empty());
    }

    #[test]
    fn a_pool_sharing_several_objects_names_the_first_and_counts_the_rest() {
        let a = ids(&[
            "_x_rbac.authorization.k8s.io_ClusterRole",
            "_y_rbac.authorization.k8s.io_ClusterRoleBinding",
        ]);
        let shared = shared_objects([("a", a.as_slice()), ("b", a.as_slice()), ("c", a.as_slice())]);
        let message = sharing_message("b", &shared).unwrap();
        assert!(message.starts_with("ClusterRole.rbac.authorization.k8s.io x (cluster-scoped) (and 1 more objects) is held by the releases of pools a, c too"), "{message}");
    }

    const HELM: &str = "Helm install failed for release edge/edge-gw-b with chart ingress-nginx@4.15.1: \
        Unable to continue with install: IngressClass \"nginx\" in namespace \"\" exists and cannot be \
        imported into the current release: invalid ownership metadata; annotation validation error: \
        key \"meta.helm.sh/release-name\" must equal \"edge-gw-b\": current value is \"edge-gw-a\"";

    #[test]
    fn helms_refusal_is_read_with_the_release_that_holds_the_object() {
        assert_eq!(
            refusals(HELM),
            vec![Refusal {
                kind: "IngressClass".into(),
                name: "nginx".into(),
                namespace: String::new(),
                holder: Some("edge-gw-a".into())
            }]
        );
        // Joined errors, one a line (Helm 4), the second without a holder.
        let two = "ClusterRole \"x\" in namespace \"\" exists and cannot be imported into the current release: \
            invalid ownership metadata; label validation error: missing key \"app.kubernetes.io/managed-by\": must be set to \"Helm\"\n\
            ConfigMap \"y\" in namespace \"edge\" exists and cannot be imported into the current release: \
            invalid ownership metadata; annotation validation error: key \"meta.helm.sh/release-name\" must equal \"r\": current value is \"s\"";
        let found = refusals(two);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].name.as_str(), found[0].holder.as_deref()), ("x", None));
        assert_eq!((found[1].namespace.as_str(), found[1].holder.as_deref()), ("edge", Some("s")));
        assert!(refusals("install retries exhausted").is_empty());
    }

    #[test]
    fn the_refusal_names_the_pool_that_holds_the_object_and_keeps_helms_words() {
        let pool_of = |release: &str| (release == "edge-gw-a").then(|| "a".to_string());
        let message = refusal_message(HELM, pool_of).unwrap();
        assert!(
            message.starts_with(
                "IngressClass nginx (cluster-scoped) exists and is not taken over: the release of pool a \
                 (Helm release edge-gw-a) holds it. Make its name unique per pool"
            ),
            "{message}"
        );
        assert!(message.ends_with(HELM), "Helm's own words stay: {message}");
        let foreign = refusal_message(HELM, |_| None).unwrap();
        assert!(
            foreign.contains("Helm release edge-gw-a, not one of this application's, holds it"),
            "{foreign}"
        );
        assert_eq!(refusal_message("UpgradeFailed: timed out", pool_of), None);
    }
}
