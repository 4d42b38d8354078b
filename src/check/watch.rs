//! The checker at work on a cluster: every HelmRelease and
//! NodePoolApplication watched (in one namespace, or all), each version
//! judged as it comes, each violation printed at once.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use super::{Checker, Kind, Record, Summary};

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(
        "cannot watch {what}: {source}; check that the cluster serves it and that the checker may list \
         and watch it"
    )]
    Watch {
        what: &'static str,
        #[source]
        source: watcher::Error,
    },
    #[error("cannot read a watched object as JSON: {0}")]
    Decode(#[from] serde_json::Error),
}

/// Watches until `stop` completes, printing each violation to `out` as it
/// is found; the summary of what was judged.
pub async fn run(
    client: Client,
    namespace: Option<&str>,
    stop: impl std::future::Future<Output = ()>,
    mut out: impl FnMut(&str),
) -> Result<Summary, WatchError> {
    let api = |gvk: GroupVersionKind, plural: &str| {
        let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        match namespace {
            Some(ns) => Api::<DynamicObject>::namespaced_with(client.clone(), ns, &resource),
            None => Api::<DynamicObject>::all_with(client.clone(), &resource),
        }
    };
    let releases = api(GroupVersionKind::gvk("helm.toolkit.fluxcd.io", "v2", "HelmRelease"), "helmreleases");
    let apps = api(
        GroupVersionKind::gvk("apps.fanout.dev", "v1alpha1", "NodePoolApplication"),
        "nodepoolapplications",
    );
    // Nodes are of no namespace: whether a pool is offline (see
    // `super::nodes`).
    let nodes = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Node"), "nodes"),
    );
    let config = watcher::Config::default();
    // Backed off and retried: a kube-apiserver restart is one of the
    // faults the checker judges through, never the end of its watch.
    let tagged = |kind: Option<Kind>, what: &'static str, api: Api<DynamicObject>| {
        watcher::watcher(api, config.clone())
            .default_backoff()
            .map_err(move |source| WatchError::Watch { what, source })
            .map_ok(move |event| (kind, event))
    };
    let mut events = futures::stream::select_all([
        tagged(Some(Kind::HelmRelease), "HelmReleases", releases).boxed(),
        tagged(Some(Kind::Application), "NodePoolApplications", apps).boxed(),
        tagged(None, "Nodes", nodes).boxed(),
    ]);
    let mut checker = Checker::new();
    // What each re-list delivers, judged as one once it is done (see
    // `Checker::relisted`): a re-list names only what exists.
    let mut relisted: BTreeMap<Kind, Vec<Record>> = BTreeMap::new();
    let mut nodes_listed: Vec<serde_json::Value> = Vec::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            () = &mut stop => break,
        };
        let Some(event) = next else { break };
        let (kind, event) = match event {
            Ok(event) => event,
            Err(e) => {
                out(&format!("checker: {e}; retrying"));
                continue;
            }
        };
        let Some(kind) = kind else {
            match event {
                Event::Apply(node) => checker.read_node(&serde_json::to_value(&node)?, false),
                Event::Delete(node) => checker.read_node(&serde_json::to_value(&node)?, true),
                Event::Init => nodes_listed.clear(),
                Event::InitApply(node) => nodes_listed.push(serde_json::to_value(&node)?),
                Event::InitDone => checker.nodes_relisted(&std::mem::take(&mut nodes_listed)),
            }
            continue;
        };
        let seen = k8s_openapi::jiff::Timestamp::now();
        let (object, deleted) = match event {
            Event::Apply(object) => (object, false),
            Event::InitApply(object) => {
                relisted.entry(kind).or_default().push(Record {
                    seen,
                    kind,
                    object: serde_json::to_value(&object)?,
                    deleted: false,
                });
                continue;
            }
            Event::Delete(object) => (object, true),
            Event::Init => {
                relisted.insert(kind, Vec::new());
                continue;
            }
            Event::InitDone => {
                let listed = relisted.remove(&kind).unwrap_or_default();
                for violation in checker.relisted(kind, listed, seen) {
                    out(&violation.to_string());
                }
                continue;
            }
        };
        let record = Record {
            seen,
            kind,
            object: serde_json::to_value(&object)?,
            deleted,
        };
        for violation in checker.observe(record) {
            out(&violation.to_string());
        }
    }
    Ok(checker.summary().clone())
}
