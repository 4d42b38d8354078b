//! One plan carried out: suspensions first, then releases made inert, then
//! the prunes, then the writes (claimed first where they start to drive a
//! Helm release). Every failure is kept with the pool it concerns, so a
//! refused pool never stops the others, and the caller reports all of it.
//!
//! The prunes go before the writes because the plan counts a pool that
//! left as no longer updating: a write that takes its `maxUnavailable`
//! slot must reach the API server after the release leaving, or the
//! record shows one pool more down than the rollout allows.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use tracing::{debug, warn};

use crate::api::NodePoolApplication;
use crate::reconcile::apply::claim::{self, Claim, ClaimApis};
use crate::reconcile::fleet::{Done, WriteRefused};
use crate::reconcile::observe::CachedRelease;
use crate::reconcile::plan::{DesiredRelease, ObservedRelease, Writes};

use super::{
    delete_observed, mark_ready, orphan_release, set_inert, set_suspended, skip_uninstall, write_release,
    ApplyError, SharedCharts,
};

/// HelmReleases written at once: releases are independent objects, and
/// writing them in parallel keeps a fan-out to hundreds of pools close to
/// the API server's own pace.
pub const APPLY_CONCURRENCY: usize = 16;

/// Where a plan is carried out: the application, the APIs of its namespace
/// and the caches a write consults.
pub struct Target<'a> {
    pub app: &'a NodePoolApplication,
    pub releases: &'a Api<DynamicObject>,
    pub leases: &'a Api<Lease>,
    pub applications: &'a Api<NodePoolApplication>,
    /// The release cache: whether our fields on a release are still
    /// recorded as a create's.
    pub cached: &'a Store<CachedRelease>,
    /// The shared charts, for a release orphaned with its chart.
    pub charts: &'a SharedCharts,
    /// `deletionPolicy: Orphan`: releases leaving are orphaned, not deleted.
    pub orphan: bool,
}

/// What carrying out a plan did.
#[derive(Debug, Default)]
pub struct Applied {
    /// In the order it happened.
    pub done: Vec<Done>,
    /// The pools whose write was refused, for the status.
    pub refused: Vec<WriteRefused>,
    /// Releases written or pruned, whether or not it succeeded: the charts
    /// the others use are still needed.
    pub touched: HashSet<String>,
    /// The first failure, which makes the reconcile retry.
    pub first_error: Option<ApplyError>,
    /// How many writes and deletes failed.
    pub failures: usize,
    /// The pools whose release changed between observe and its write, which
    /// was therefore not made (see [`ApplyError::ChangedMeanwhile`]).
    pub changed_meanwhile: Vec<String>,
}

impl Applied {
    fn failed(&mut self, error: ApplyError) {
        self.failures += 1;
        self.first_error.get_or_insert(error);
    }

    /// The step's failure, when a write or delete failed.
    pub fn failure(&mut self) -> Option<crate::reconcile::ReconcileError> {
        let first = self.first_error.take()?;
        Some(crate::reconcile::ReconcileError::Releases {
            failed: self.failures,
            first,
        })
    }

    /// The releases created (written where observe saw none).
    pub fn created(&self) -> Vec<String> {
        (self.done.iter())
            .filter_map(|done| match done {
                Done::Written {
                    release,
                    existed: false,
                    ..
                } => Some(release.clone()),
                _ => None,
            })
            .collect()
    }

    /// The releases not written because an object of their name is not
    /// ours (`NameClash`): they may be written once it goes.
    pub fn names_taken(&self) -> Vec<String> {
        (self.done.iter())
            .filter_map(|done| match done {
                Done::WriteFailed { release, reason, .. } if *reason == "NameClash" => Some(release.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Carries out `writes` for the application of `target`, whose releases
/// observe saw as `owned`.
pub async fn carry_out(target: &Target<'_>, writes: Writes, owned: &[Arc<ObservedRelease>]) -> Applied {
    let mut applied = Applied::default();
    // Looked up once per write: a scan of the list per write was a
    // quadratic walk at ten thousand pools.
    let owned: ByName = owned.iter().map(|o| (o.name.as_str(), o.as_ref())).collect();
    let owned = &owned;
    let Writes {
        resume,
        suspend,
        inert,
        apply,
        prune: to_prune,
        skip_uninstall: to_skip,
        ready_marks,
    } = writes;
    switch_suspension(target, resume, suspend, owned, &mut applied).await;
    for (release, message) in &inert {
        let uid = uid_of(owned, release);
        if let Err(e) = set_inert(target.releases, release, uid.as_deref(), Some(message)).await {
            warn!(release = %release, error = %e, "cannot make the release inert");
            applied.failed(e);
        }
    }
    prune(target, &to_prune, owned, &mut applied).await;
    write_all(target, apply, owned, &mut applied).await;
    for skipped in to_skip {
        let uid = uid_of(owned, &skipped.release);
        match skip_uninstall(target.releases, &skipped, uid.as_deref()).await {
            Ok(()) => applied.done.push(Done::UninstallSkipped {
                pool: skipped.pool,
                release: skipped.release,
                since: skipped.since,
                after: skipped.after,
            }),
            Err(e) => {
                warn!(release = %skipped.release, error = %e, "cannot let the release go without its uninstall");
                applied.failed(e);
            }
        }
    }
    mark_all_ready(target, ready_marks, owned, &mut applied).await;
    applied
}

/// The marks of when releases were first seen Ready, made last (see
/// [`Writes::ready_marks`]). One that fails is made at a later reconcile;
/// until then the release soaks from when Flux says it turned Ready.
async fn mark_all_ready(
    target: &Target<'_>,
    marks: Vec<crate::reconcile::plan::ReadyMark>,
    owned: &ByName<'_>,
    applied: &mut Applied,
) {
    let releases = target.releases;
    let marked: Vec<_> = futures::stream::iter(marks)
        .map(|mark| async move {
            let uid = uid_of(owned, &mark.release);
            let result = mark_ready(releases, &mark, uid.as_deref()).await;
            (mark.release, result)
        })
        .buffer_unordered(APPLY_CONCURRENCY)
        .collect()
        .await;
    for (release, result) in marked {
        if let Err(e) = result {
            warn!(release = %release, error = %e, "cannot mark when the release turned Ready");
            applied.failed(e);
        }
    }
}

/// Resumed: the suspension taken back before anything else is written;
/// suspended: the releases suspended, the only write made.
async fn switch_suspension(
    target: &Target<'_>,
    resume: Vec<String>,
    suspend: Vec<String>,
    owned: &ByName<'_>,
    applied: &mut Applied,
) {
    let switches: Vec<(String, bool, Option<String>)> = (resume.into_iter().map(|name| (name, false)))
        .chain(suspend.into_iter().map(|name| (name, true)))
        .map(|(name, suspend)| {
            let uid = uid_of(owned, &name);
            (name, suspend, uid)
        })
        .collect();
    let releases = target.releases;
    let switched: Vec<_> = futures::stream::iter(switches)
        .map(|(release, suspend, uid)| switch_one(releases, release, suspend, uid))
        .buffer_unordered(APPLY_CONCURRENCY)
        .collect()
        .await;
    for (release, suspended, result) in switched {
        match result {
            Ok(()) => applied.done.push(Done::Suspended { release, suspended }),
            Err(e) => {
                warn!(release = %release, error = %e, "cannot suspend or resume the release");
                applied.failed(e);
            }
        }
    }
}

async fn switch_one(
    releases: &Api<DynamicObject>,
    release: String,
    suspend: bool,
    uid: Option<String>,
) -> (String, bool, Result<(), ApplyError>) {
    let result = set_suspended(releases, &release, uid.as_deref(), suspend).await;
    (release, suspend, result)
}

/// The releases observe saw, by name.
type ByName<'a> = HashMap<&'a str, &'a ObservedRelease>;

/// The uid observe saw on an owned release: writes are made to that
/// object, not to a newer one of the same name.
fn uid_of(owned: &ByName, name: &str) -> Option<String> {
    owned.get(name).and_then(|o| o.uid.clone())
}

/// The releases to write, in parallel. Each write's future is made only
/// when a slot frees (an unstarted future already takes its whole size),
/// and each desired release is dropped once written: at ten thousand
/// pools, holding either for the whole fan-out was tens of megabytes.
async fn write_all(
    target: &Target<'_>,
    desired: Vec<DesiredRelease>,
    owned: &ByName<'_>,
    applied: &mut Applied,
) {
    let namespace = target.app.namespace().unwrap_or_default();
    let claims = ClaimApis {
        leases: target.leases,
        applications: target.applications,
        releases: target.releases,
    };
    let (app, claims) = (target.app, &claims);
    let results: Vec<_> = futures::stream::iter(desired)
        .map(|desired| {
            let exists = owned.contains_key(desired.name.as_str());
            let owned_by_update = exists
                && (target.cached)
                    .get(&ObjectRef::new(&desired.name).within(&namespace))
                    .is_some_and(|cached| cached.owned_by_update);
            let uid = uid_of(owned, &desired.name);
            write_one(claims, app, desired, uid, exists, owned_by_update)
        })
        .buffer_unordered(APPLY_CONCURRENCY)
        .collect()
        .await;
    for (release, pool, drift, existed, result) in results {
        match result {
            Ok(()) => applied.done.push(Done::Written {
                pool,
                release: release.clone(),
                existed,
                drift,
            }),
            // Not a failure: the change that stopped it wakes the next
            // reconcile, which decides again.
            Err(ApplyError::ChangedMeanwhile { .. }) => {
                debug!(pool = %pool, release = %release, "not written: the release changed since it was read");
                applied.changed_meanwhile.push(pool);
            }
            Err(e) => {
                // One pool's failure does not stop the others.
                warn!(pool = %pool, error = %e, "apply failed");
                applied.refused.push(WriteRefused {
                    pool: pool.clone(),
                    reason: e.category().to_string(),
                    message: e.to_string(),
                    retriable: e.retriable(),
                });
                applied.done.push(Done::WriteFailed {
                    pool,
                    release: release.clone(),
                    reason: e.category(),
                    message: e.to_string(),
                });
                applied.failed(e);
            }
        }
        applied.touched.insert(release);
    }
}

/// Writes one release (see [`write_claimed`]), and says which.
async fn write_one(
    claims: &ClaimApis<'_>,
    app: &NodePoolApplication,
    desired: DesiredRelease,
    uid: Option<String>,
    exists: bool,
    owned_by_update: bool,
) -> (String, String, Option<String>, bool, Result<(), ApplyError>) {
    let result = write_claimed(claims, app, &desired, uid.as_deref(), exists, owned_by_update).await;
    let DesiredRelease {
        name, pool, drift, ..
    } = desired;
    (name, pool, drift, exists, result)
}

/// Writes one release, claiming first the Helm release it starts to drive
/// (see [`claim`]). A claim another application holds refuses the write,
/// and makes the existing release, if any, inert.
async fn write_claimed(
    claims: &ClaimApis<'_>,
    app: &NodePoolApplication,
    desired: &DesiredRelease,
    uid: Option<&str>,
    exists: bool,
    owned_by_update: bool,
) -> Result<(), ApplyError> {
    if let Some(key) = &desired.claim {
        if let Claim::HeldBy(holder) = claim::claim(claims, key, app, &desired.name).await? {
            let refused = ApplyError::HelmReleaseClaimed {
                helm_release: format!("{}/{}", key.0, key.1),
                holder,
            };
            if exists && !desired.lift_inert {
                set_inert(claims.releases, &desired.name, uid, Some(&refused.to_string())).await?;
            }
            return Err(refused);
        }
    }
    let object = desired.object();
    let decided_on = desired.decided_on.as_deref();
    write_release(claims.releases, &desired.name, object, exists, owned_by_update, decided_on).await?;
    if desired.lift_inert {
        set_inert(claims.releases, &desired.name, uid, None).await?;
    }
    if let Some(drove) = &desired.drove {
        claim::release(claims.leases, &app.uid().unwrap_or_default(), &desired.name, Some(drove), None)
            .await?;
    }
    Ok(())
}

/// The owned releases whose pool left: deleted, or orphaned under
/// `deletionPolicy: Orphan`; either way what they drove is free for others.
async fn prune(target: &Target<'_>, prune: &[String], owned: &ByName<'_>, applied: &mut Applied) {
    let app_uid = target.app.uid().unwrap_or_default();
    for release in prune.iter().filter_map(|name| owned.get(name.as_str())) {
        let pool = release.pool.clone().unwrap_or_default();
        let uid = release.uid.as_deref().unwrap_or_default();
        let done = match target.orphan {
            true => orphan_release(target.releases, target.charts, &release.name, target.app).await,
            false => delete_observed(target.releases, "HelmRelease", &release.name, uid).await,
        };
        let done = match done {
            Ok(()) => {
                let stored_in = release.helm_release.as_ref().map(|(storage, _)| storage.as_str());
                claim::release(target.leases, &app_uid, &release.name, None, stored_in).await
            }
            failed => failed,
        };
        let name = release.name.clone();
        match done {
            Ok(()) if target.orphan => applied.done.push(Done::Orphaned { pool, release: name }),
            Ok(()) => applied.done.push(Done::Pruned { pool, release: name }),
            Err(e) => {
                warn!(release = %release.name, error = %e, "prune failed");
                applied.failed(e);
            }
        }
    }
    applied.touched.extend(prune.iter().cloned());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The releases a reconcile created, for the next one to wait for in
    /// the cache: those written where observe saw none, not those updated,
    /// refused or pruned.
    #[test]
    fn created_are_the_releases_written_where_none_was_seen() {
        let written = |release: &str, existed| Done::Written {
            pool: format!("p-{release}"),
            release: release.into(),
            existed,
            drift: None,
        };
        let applied = Applied {
            done: vec![
                written("new-1", false),
                written("updated", true),
                Done::WriteFailed {
                    pool: "p".into(),
                    release: "refused".into(),
                    reason: "NameClash",
                    message: String::new(),
                },
                Done::Pruned {
                    pool: "p".into(),
                    release: "gone".into(),
                },
                written("new-2", false),
            ],
            ..Applied::default()
        };
        assert_eq!(applied.created(), ["new-1", "new-2"]);
        assert_eq!(applied.names_taken(), ["refused"]);
    }
}
