//! Names, labels and annotations of the HelmReleases an application owns.
//!
//! A release's name is `<app>-<pool>-<hash>`: readable parts first, then a
//! hash of the full, unambiguous pair. The readable parts may be cut to fit
//! Helm's 53-character limit on release names; the hash keeps two different
//! pairs apart even when their readable parts look alike (`a-b` + `c` and
//! `a` + `b-c`). These names are stored in clusters, so the scheme must never
//! change: the tests pin exact outputs.

use sha2::{Digest, Sha256};

/// The application a release belongs to (a label value, see [`label_value`]).
pub const LABEL_APPLICATION: &str = "apps.fanout.dev/application";
/// The pool a release is for (a label value, see [`label_value`]).
pub const LABEL_POOL: &str = "apps.fanout.dev/pool";
/// The pool's full name, which a label value may be too short to hold.
pub const ANNOTATION_POOL_NAME: &str = "apps.fanout.dev/pool-name";
/// Hash of the spec and labels last written, to skip writes that change nothing.
pub const ANNOTATION_SPEC_HASH: &str = "apps.fanout.dev/spec-hash";
/// When the spec-hash above was written (RFC 3339): the start of a
/// rollout's progress deadline for that pool.
pub const ANNOTATION_WRITTEN_AT: &str = "apps.fanout.dev/written-at";
/// When a release suspended with its application was resumed (RFC 3339,
/// the controller's clock): its progress deadline runs again from then.
/// A resume writes the release back as it was, so it keeps its
/// `written-at`: the soak and the proof that its update left its site up
/// still count from that update, and a pool done before the suspension
/// that goes offline after the resume is offline, not failed. Dropped by
/// the next write that moves the release to another spec.
pub const ANNOTATION_RESUMED_AT: &str = "apps.fanout.dev/resumed-at";
/// The application's revision (`status.rollout.revision`) a release was
/// written at. Not part of the spec hash: a revision that leaves a pool's
/// release as it is does not touch it.
pub const ANNOTATION_REVISION: &str = "apps.fanout.dev/revision";
/// What a release read of its pool when it was written (its labels,
/// annotations and node marks), as a short hash: a release of the
/// current revision that differs from what would be written now differs
/// by its pool's own change when this differs, else by the controller's
/// rendering (see `--rendering-changes`). Not part of the spec hash.
pub const ANNOTATION_POOL_INPUTS: &str = "apps.fanout.dev/pool-inputs";
/// The revision a release goes back to if the one it was written at
/// halts under `onFailure: Rollback`: the last that completed on it. Not
/// set on a release whose pool no revision completed on yet.
pub const ANNOTATION_ROLLBACK_REVISION: &str = "apps.fanout.dev/rollback-revision";
/// On a release taken back by a rollback: the failed revision it left.
pub const ANNOTATION_ROLLED_BACK_FROM: &str = "apps.fanout.dev/rolled-back-from";
/// The rollout that wrote a release (its number in the application's
/// history, as `nodepool-fanout history` lists it): a revision that comes
/// back is another rollout, and what an earlier one left on a release
/// (its rollback) is told from what this one did. Not part of the spec
/// hash.
pub const ANNOTATION_ROLLOUT: &str = "apps.fanout.dev/rollout";
/// On an application: `<revision>@<rollout>/<step>[,<step>…]`, an
/// operator's approval of those steps of `spec.rollout.steps` (each by its
/// name, or its position from 1) for that rollout of that revision only
/// (`status.rollout.number`): a change undone and redone is a new rollout,
/// and asks again. It names steps, not waves: waves are numbered over the
/// steps that select pools now, and move when pools come and go. An
/// annotation, not a field of the spec, so that it is given beside
/// GitOps: Flux applies the spec from Git and leaves an annotation it
/// does not manage alone.
pub const ANNOTATION_APPROVE: &str = "apps.fanout.dev/approve";
/// On an application: how many of its releases a person means to have
/// pruned at once (a number). A plan that would prune more than half of
/// the application's releases, and more than this, prunes none of them
/// and says so (reason `PruneHeld`): a selection that drops 999 of 1,000
/// pools is more often a typo than a decommission.
pub const ANNOTATION_ALLOW_PRUNE: &str = "apps.fanout.dev/allow-prune";

/// What an approval names a rollout by: `<revision>@<number>`, the
/// revision and its rollout's number in the history.
pub fn rollout_key(revision: &str, number: i64) -> String {
    format!("{revision}@{number}")
}

/// The steps an approval ([`ANNOTATION_APPROVE`]) lets go for the
/// rollout `key` ([`rollout_key`]): none when it names another rollout
/// (another revision, or an earlier rollout of this one), or does not
/// read.
pub fn approved_steps<'a>(approval: &'a str, key: &str) -> Vec<&'a str> {
    match approval.trim().rsplit_once('/') {
        Some((approved, steps)) if approved == key => {
            steps.split(',').map(str::trim).filter(|s| !s.is_empty()).collect()
        }
        _ => Vec::new(),
    }
}
/// On a pool (a NodePool, a ClusterProfile…): the pool's own maintenance
/// window, as JSON (`{"schedule": "0 2 * * *", "duration": "3h",
/// "timeZone": "America/Chicago"}`), for every application that updates it.
pub const ANNOTATION_MAINTENANCE_WINDOW: &str = "apps.fanout.dev/maintenance-window";
/// Flux's sharding label: an application's value is put on everything made
/// for it, so Flux's sharded controllers, and this controller's
/// `--watch-label-selector`, serve them together.
pub const LABEL_SHARD: &str = "sharding.fluxcd.io/key";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Flux's request to reconcile an object now (`flux reconcile` sets it to
/// a fresh token); handled, the token goes to `status.lastHandledReconcileAt`.
pub const ANNOTATION_REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";
/// With the same token as `requestedAt`: helm-controller upgrades a release
/// even though nothing changed (`flux reconcile helmrelease --force`).
pub const ANNOTATION_FORCE_AT: &str = "reconcile.fluxcd.io/forceAt";
/// With the same token as `requestedAt`: helm-controller forgets a
/// release's failure counts, so a release out of retries tries again
/// (`flux reconcile helmrelease --reset`).
pub const ANNOTATION_RESET_AT: &str = "reconcile.fluxcd.io/resetAt";
/// On a release suspended with its application (`spec.suspend`): set,
/// with `spec.suspend: true`, by the field manager
/// [`SUSPEND_FIELD_MANAGER`] alone, so that resuming takes back exactly
/// what suspending put there.
pub const ANNOTATION_SUSPENDED_WITH_APPLICATION: &str = "apps.fanout.dev/suspended-with-application";
/// The field manager that suspends and resumes releases, apart from the one
/// that writes them: its apply holds only `spec.suspend` and the mark.
pub const SUSPEND_FIELD_MANAGER: &str = "nodepool-fanout-suspend";
/// On a release made inert because another application holds the Helm
/// release it would drive: why. Set, with `spec.suspend: true`, by the
/// field manager [`INERT_FIELD_MANAGER`] alone, so that the release drives
/// nothing (and deleting it uninstalls nothing) until the claim is ours.
pub const ANNOTATION_INERT: &str = "apps.fanout.dev/inert";
/// The field manager that makes a release inert and takes that back.
pub const INERT_FIELD_MANAGER: &str = "nodepool-fanout-inert";
/// On a release deleted while its site cluster does not answer: why
/// helm-controller let it go without uninstalling. Set, with
/// `spec.suspend: true`, by the field manager [`UNINSTALL_SKIPPED_FIELD_MANAGER`]
/// alone: helm-controller skips the uninstall of a suspended release and
/// drops its finalizer, as Flux documents for clusters that are gone.
pub const ANNOTATION_UNINSTALL_SKIPPED: &str = "apps.fanout.dev/uninstall-skipped";
/// The field manager that lets a release being deleted go without its uninstall.
pub const UNINSTALL_SKIPPED_FIELD_MANAGER: &str = "nodepool-fanout-uninstall-skipped";
/// On a release: when the controller first saw it Ready on its latest
/// spec (RFC 3339, the controller's clock, as [`ANNOTATION_WRITTEN_AT`] is),
/// from which its `minReadySeconds` soak, its checks and the proof that an
/// update did not take its site down are counted. Flux's Ready
/// `lastTransitionTime` moves whenever helm-controller rewrites the
/// condition's message while it stays True, so it is read only until this
/// mark is made. A mark older than the release's `written-at` belongs to
/// an earlier write and says nothing. Set, and taken back when the release
/// is no longer Ready on its latest spec, by the field manager
/// [`READY_FIELD_MANAGER`] alone.
pub const ANNOTATION_READY_AT: &str = "apps.fanout.dev/ready-at";
/// The field manager that marks when a release was first seen Ready.
pub const READY_FIELD_MANAGER: &str = "nodepool-fanout-ready";
/// On a release, beside [`ANNOTATION_READY_AT`] and by the same field
/// manager: the failures of its metric checks over the soak that mark
/// began (JSON, by check name: how often it was asked and failed, and its
/// last failure), so that a restart does not count a `failureLimit` afresh.
pub const ANNOTATION_CHECK_FAILURES: &str = "apps.fanout.dev/check-failures";
/// On a claim (a Lease, see [`claim_name`]): the uid of the application
/// that holds it, and the name of the HelmRelease it holds it for.
pub const LABEL_CLAIM_APPLICATION_UID: &str = "apps.fanout.dev/claimed-by-uid";
pub const LABEL_CLAIM_RELEASE: &str = "apps.fanout.dev/claimed-for";
/// On a claim: the Helm release it holds, `<storage namespace>/<name>`.
pub const ANNOTATION_CLAIMED_HELM_RELEASE: &str = "apps.fanout.dev/helm-release";
/// On a claim: the namespace of the application that holds it. A claim
/// lives where its Helm release is stored (its storage namespace), which
/// may be another namespace than its holder's.
pub const ANNOTATION_CLAIMED_BY_NAMESPACE: &str = "apps.fanout.dev/claimed-by-namespace";
/// The request annotations an application passes on to every release, as
/// they are: one `kubectl annotate` of the application acts on the fleet.
pub const FLUX_REQUESTS: [&str; 3] = [ANNOTATION_REQUESTED_AT, ANNOTATION_FORCE_AT, ANNOTATION_RESET_AT];
pub const MANAGER: &str = "nodepool-fanout";

/// Helm refuses longer release names, because it derives other names from them.
pub const MAX_RELEASE_NAME: usize = 53;
pub const MAX_LABEL_VALUE: usize = 63;
const HASH_LEN: usize = 8;

/// The HelmRelease's object name, also its default Helm release name.
pub fn release_name(app: &str, pool: &str) -> String {
    let hash = hex_prefix(&[app, pool], HASH_LEN);
    let budget = MAX_RELEASE_NAME - HASH_LEN - 2;
    let (app_len, pool_len) = split_budget(app.len(), pool.len(), budget);
    let app_part = readable(app, app_len);
    let pool_part = readable(pool, pool_len);
    format!("{app_part}-{pool_part}-{hash}")
}

/// Shares the budget so that neither part is cut while the other has room;
/// when both are long each gets about half.
fn split_budget(app: usize, pool: usize, budget: usize) -> (usize, usize) {
    if app + pool <= budget {
        return (app, pool);
    }
    let half = budget / 2;
    if app <= half {
        (app, budget - app)
    } else if pool <= budget - half {
        (budget - pool, pool)
    } else {
        (half, budget - half)
    }
}

/// Dots become dashes because charts build Service and other DNS-1035 names
/// from the release name; a cut may leave a trailing dash, which is trimmed.
fn readable(name: &str, max: usize) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(max)
        .collect();
    let trimmed = cleaned.trim_matches('-');
    if trimmed.is_empty() {
        "x".to_string()
    } else {
        trimmed.to_string()
    }
}

/// A label value for any name: the name itself when it fits in 63
/// characters, otherwise a cut name with the hash of the whole one.
pub fn label_value(name: &str) -> String {
    if name.len() <= MAX_LABEL_VALUE && is_label_value(name) {
        return name.to_string();
    }
    let hash = hex_prefix(&[name], HASH_LEN);
    let cut: String = name.chars().take(MAX_LABEL_VALUE - HASH_LEN - 1).collect();
    let head = cut.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    if head.is_empty() {
        hash
    } else {
        format!("{head}-{hash}")
    }
}

fn is_label_value(value: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let ends_ok = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    value.chars().all(ok_char) && ends_ok(value.chars().next()) && ends_ok(value.chars().last())
}

/// The first `len` hex digits of the SHA-256 of the parts joined by NUL, a
/// byte no Kubernetes name can contain, so the join is unambiguous.
/// The Helm release a HelmRelease drives, as helm-controller names it:
/// (storage namespace, release name). `spec.releaseName`, or
/// `<targetNamespace>-<name>`, or `<name>`, shortened past 53 characters as
/// Flux shortens it; stored in `spec.storageNamespace`, or the HelmRelease's
/// own namespace. Two HelmReleases with the same pair drive one release.
/// A release into another cluster (`spec.kubeConfig`) is stored there: its
/// storage namespace is prefixed `<cluster>:` ([`cluster_of`]), so that
/// releases of one name in two site clusters are two releases.
pub fn helm_release_of(object: &serde_json::Value) -> Option<(String, String)> {
    let text =
        |pointer: &str| object.pointer(pointer).and_then(serde_json::Value::as_str).filter(|s| !s.is_empty());
    let name = text("/metadata/name")?;
    let namespace = text("/metadata/namespace")?;
    let release = match (text("/spec/releaseName"), text("/spec/targetNamespace")) {
        (Some(release), _) => release.to_string(),
        (None, Some(target)) => format!("{target}-{name}"),
        (None, None) => name.to_string(),
    };
    let storage = text("/spec/storageNamespace").unwrap_or(namespace);
    let release = shorten_release_name(&release);
    Some(match cluster_of(object) {
        Some(cluster) => helm_release_on(&cluster, storage, &release),
        None => (storage.to_string(), release),
    })
}

/// The Helm release `release`, stored in `storage`, of the site cluster
/// `cluster`: the key [`helm_release_of`] gives it.
pub fn helm_release_on(cluster: &str, storage: &str, release: &str) -> (String, String) {
    (format!("{cluster}:{storage}"), release.to_string())
}

/// Whether the storage part of a Helm release's key (as
/// [`helm_release_of`] gives it) is one of a site cluster: a namespace of
/// this cluster holds no `:`.
pub fn is_site_storage(storage: &str) -> bool {
    storage.contains(':')
}

/// The same Helm release as `key` (one of a site cluster, as
/// [`helm_release_of`] gives it), known by another name of its cluster;
/// `None` for a Helm release of this cluster. A namespace holds no `:`, so
/// the storage namespace is what follows the last one.
pub fn same_helm_release_on(key: &(String, String), cluster: &str) -> Option<(String, String)> {
    let (_, storage) = key.0.rsplit_once(':')?;
    Some(helm_release_on(cluster, storage, &key.1))
}

/// A Helm release as a person reads it: `<storage namespace>/<name>`, and
/// for one of a site cluster, which.
pub fn describe_helm_release(key: &(String, String)) -> String {
    match key.0.rsplit_once(':') {
        Some((cluster, storage)) => format!("{storage}/{} in the site cluster of {cluster}", key.1),
        None => format!("{}/{}", key.0, key.1),
    }
}

/// The cluster a HelmRelease installs into, when it is not this one, as
/// its `spec.kubeConfig` names it: the kubeconfig Secret, with its
/// namespace (the HelmRelease's, as Flux reads it), and its key unless it
/// is Flux's default `value` (no key and `value` are one kubeconfig); or
/// the ConfigMap of a workload identity. Only the same Secret is known to
/// be the same cluster here: a site's other names are its profile's
/// ([`crate::pools::cluster_id`]).
pub fn cluster_of(object: &serde_json::Value) -> Option<String> {
    let text = |value: &serde_json::Value, key: &str| {
        value
            .get(key)
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let kube_config = object.pointer("/spec/kubeConfig")?;
    let namespace = object.pointer("/metadata/namespace").and_then(serde_json::Value::as_str)?;
    if let Some(secret) = kube_config.get("secretRef") {
        let name = text(secret, "name")?;
        return Some(match text(secret, "key").filter(|k| k != "value") {
            Some(key) => format!("Secret {namespace}/{name} key {key}"),
            None => format!("Secret {namespace}/{name}"),
        });
    }
    let config_map = kube_config.get("configMapRef")?;
    Some(format!("ConfigMap {namespace}/{}", text(config_map, "name")?))
}

/// Flux's `ShortenName`: names past 53 characters become their first 40
/// characters, `-`, and 12 hex digits of their SHA-256.
pub fn shorten_release_name(name: &str) -> String {
    if name.len() <= MAX_RELEASE_NAME {
        return name.to_string();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    // Release names are DNS names, so characters are bytes, as in Go.
    let prefix: String = name.chars().take(MAX_RELEASE_NAME - 13).collect();
    format!("{prefix}-{}", &hex[..12])
}

pub fn hex_prefix(parts: &[&str], len: usize) -> String {
    let digest = Sha256::digest(parts.join("\0").as_bytes());
    let mut hex = hex::encode(digest);
    hex.truncate(len);
    hex
}

/// The name of the Lease, in the application's namespace, whose create
/// claims one Helm release (storage namespace, release name) for one
/// application: of two applications creating it at once only one can win.
pub fn claim_name(storage_namespace: &str, release: &str) -> String {
    format!("helm-release-{}", hex_prefix(&[storage_namespace, release], 32))
}

/// Whether a string is a DNS-1123 subdomain: what Kubernetes object names
/// and Helm release names must be.
pub fn is_dns1123_subdomain(name: &str, max: usize) -> bool {
    !name.is_empty() && name.len() <= max && name.split('.').all(is_dns1123_label_part)
}

/// Whether a string is a DNS-1123 label, as namespace names must be.
pub fn is_dns1123_label(name: &str) -> bool {
    name.len() <= 63 && is_dns1123_label_part(name)
}

fn is_dns1123_label_part(part: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !part.is_empty()
        && part.chars().all(|c| ok(c) || c == '-')
        && part.chars().next().is_some_and(ok)
        && part.chars().last().is_some_and(ok)
}

#[cfg(test)]
mod tests;
