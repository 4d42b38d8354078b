//! The floors the controller's write is measured against: its very
//! releases and claims written again by plain parallel requests.

use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::{reflector, watcher};
use kube::{Api, ResourceExt};
use nodepool_fanout::api::{naming, NodePoolApplication};
use serde_json::json;

use crate::support::bench::{let_go, secs, PARALLEL, TIMEOUT};
use crate::support::{helmrelease_resource, plane_meter, TestEnv};

/// How a raw client writes the controller's releases again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Raw {
    /// One POST a release.
    Create,
    /// One server-side apply a release, as the controller changes them.
    Apply,
    /// The release's claim Lease created first, then the release: the two
    /// creates the controller makes for a release that drives a Helm
    /// release for the first time (see `reconcile::apply::claim`).
    ClaimThenCreate,
    /// As `ClaimThenCreate`, with a watch of the namespace's HelmReleases
    /// open and cached, as the controller watches what it writes (it must,
    /// to know each release's health): the floor of a controller.
    ClaimThenCreateWatched,
}

/// The controller's releases, written again by plain parallel requests in
/// namespaces of their own, once for each of `floors` in turn: created
/// (POST), server-side applied as the controller writes them, and created
/// after the claim Lease the controller made for each. The floors for
/// writing exactly what the controller writes: each namespace holds a
/// copy of `app`, never reconciled (the controller is stopped), and the
/// releases and claims carry its owner reference as the controller's
/// carry `app`'s. An owner costs the plane: the garbage collector follows
/// every object that names one, and each watch event carries it. Returns
/// each floor's time and what the plane did during it.
pub(crate) async fn raw_writes(
    app: &NodePoolApplication,
    releases: &Api<DynamicObject>,
    leases: &Api<Lease>,
    pools: usize,
    floors: &[Raw],
) -> Vec<(Duration, Vec<(String, String)>)> {
    let listed = releases.list(&ListParams::default()).await.expect("list the controller's releases");
    assert_eq!(listed.items.len(), pools, "the controller's releases");
    let claims = leases.list(&ListParams::default()).await.expect("list the controller's claims");
    let claim_of = |release: &str| {
        (claims.items.iter())
            .find(|l| l.labels().get(naming::LABEL_CLAIM_RELEASE).map(String::as_str) == Some(release))
            .unwrap_or_else(|| panic!("the controller made no claim for {release}"))
    };
    let mut measured = Vec::new();
    for &raw_mode in floors {
        let prefix = match raw_mode {
            Raw::Create => "scale-create",
            Raw::Apply => "scale-apply",
            Raw::ClaimThenCreate => "scale-claimed",
            Raw::ClaimThenCreateWatched => "scale-watched",
        };
        let raw = TestEnv::new(prefix).await;
        let api: Api<DynamicObject> =
            Api::namespaced_with(raw.client.clone(), &raw.namespace, &helmrelease_resource());
        let raw_leases: Api<Lease> = Api::namespaced(raw.client.clone(), &raw.namespace);
        let owner = raw_owner(&raw, app).await;
        let objects: Vec<(DynamicObject, Lease)> = listed
            .items
            .iter()
            .map(|r| {
                let value = json!({
                    "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                    "metadata": {
                        "name": r.metadata.name, "namespace": raw.namespace,
                        "labels": r.metadata.labels, "annotations": r.metadata.annotations,
                        "ownerReferences": owner.of(r.owner_references())
                    },
                    "spec": r.data["spec"]
                });
                let claim = claim_of(&r.name_any());
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: claim.metadata.name.clone(),
                        namespace: Some(raw.namespace.clone()),
                        labels: claim.metadata.labels.clone(),
                        annotations: claim.metadata.annotations.clone(),
                        owner_references: Some(owner.of(claim.owner_references())),
                        ..ObjectMeta::default()
                    },
                    spec: claim.spec.clone(),
                };
                (serde_json::from_value(value).expect("HelmRelease manifest"), lease)
            })
            .collect();
        let (post, patch) = (PostParams::default(), PatchParams::apply("raw-client"));
        // Each write starts as the controller's did: helm-controller idle.
        let waited = crate::support::bench::helm_controller_idle(&raw.client).await;
        let quiet = plane_meter::quiet(TIMEOUT).await;
        println!(
            "({raw_mode:?}: helm-controller caught up {}, the plane quiet {} before it)",
            secs(waited),
            secs(quiet)
        );
        let watch = match raw_mode {
            Raw::ClaimThenCreateWatched => Some(watch_releases(api.clone()).await),
            _ => None,
        };
        let before = plane_meter::read(&raw.client, std::process::id()).await;
        let profile = plane_meter::profile(&raw.client, &format!("{}-{raw_mode:?}", measured.len() + 2));
        let start = Instant::now();
        let results: Vec<Result<(), kube::Error>> = stream::iter(objects.iter())
            .map(|(o, lease)| {
                let (api, raw_leases, post, patch) = (&api, &raw_leases, &post, &patch);
                async move {
                    match raw_mode {
                        Raw::Create => api.create(post, o).await.map(drop),
                        Raw::Apply => {
                            let name = o.metadata.name.as_deref().unwrap_or_default();
                            api.patch(name, patch, &Patch::Apply(o)).await.map(drop)
                        }
                        Raw::ClaimThenCreate | Raw::ClaimThenCreateWatched => {
                            raw_leases.create(post, lease).await?;
                            api.create(post, o).await.map(drop)
                        }
                    }
                }
            })
            .buffer_unordered(PARALLEL)
            .collect()
            .await;
        let took = start.elapsed();
        measured.push((took, plane_meter::read(&raw.client, std::process::id()).await.since(&before)));
        profile.finish().await;
        if let Some(watch) = watch {
            watch.abort();
        }
        if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
            panic!("raw write failed: {e}");
        }
        let_go(&raw.client, &raw.namespace).await;
        raw.cleanup().await;
    }
    measured
}

/// A copy of an application in a raw namespace, never reconciled.
struct RawOwner {
    /// The uid of the application the controller's objects name.
    theirs: String,
    /// The uid of its copy.
    uid: String,
}

impl RawOwner {
    /// The owner references of one of the controller's objects, each to
    /// its application made one to the copy, the rest as they were.
    fn of(&self, references: &[OwnerReference]) -> Vec<OwnerReference> {
        assert!(
            references.iter().any(|r| r.uid == self.theirs),
            "the controller's objects name their application as owner"
        );
        (references.iter())
            .map(|r| match r.uid == self.theirs {
                true => OwnerReference {
                    uid: self.uid.clone(),
                    ..r.clone()
                },
                false => r.clone(),
            })
            .collect()
    }
}

/// A copy of `app` in the raw namespace.
async fn raw_owner(raw: &TestEnv, app: &NodePoolApplication) -> RawOwner {
    let apps: Api<NodePoolApplication> = Api::namespaced(raw.client.clone(), &raw.namespace);
    let copy = NodePoolApplication::new(&app.name_any(), app.spec.clone());
    let copy = apps.create(&PostParams::default(), &copy).await.expect("create the raw owner");
    RawOwner {
        theirs: app.uid().expect("the application's uid"),
        uid: copy.uid().expect("the raw owner's uid"),
    }
}

/// A cache of `api`'s HelmReleases, kept by a watch as the controller
/// keeps its own, once its first list is in: the task to abort when done.
async fn watch_releases(api: Api<DynamicObject>) -> tokio::task::JoinHandle<()> {
    let writer = reflector::store::Writer::new(helmrelease_resource());
    let reader = writer.as_reader();
    let events = reflector(writer, watcher(api, watcher::Config::default()));
    let task = tokio::spawn(events.for_each(|_| async {}));
    reader.wait_until_ready().await.expect("the raw client's watch lists the releases");
    task
}
