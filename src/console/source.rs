//! The fleet as the cluster holds it, read with the caller's own identity:
//! each application, its pools as `nodepool-fanout get` reads them, and
//! the labels of its pool objects (to group the grid by).

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};

use super::view::AppView;
use super::{Source, SourceError};
use crate::api::{NodePoolApplication, PoolKind};
use crate::cli::get;

/// Reads the cluster of `client`: the applications of `namespace`, or of
/// every namespace.
pub struct ClusterSource {
    pub client: Client,
    pub namespace: Option<String>,
}

impl Source for ClusterSource {
    fn applications(&self) -> BoxFuture<'_, Result<Vec<AppView>, SourceError>> {
        Box::pin(async move {
            let apps: Api<NodePoolApplication> = match &self.namespace {
                Some(namespace) => Api::namespaced(self.client.clone(), namespace),
                None => Api::all(self.client.clone()),
            };
            let mut listed = match apps.list(&ListParams::default()).await {
                Ok(list) => list.items,
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    return Err(SourceError::NoApplications)
                }
                Err(e) => return Err(e.into()),
            };
            listed.sort_by_key(|a| (a.namespace(), a.name_any()));
            let nodes = Api::<Node>::all(self.client.clone()).list(&ListParams::default()).await?.items;
            let mut labels_by_kind: BTreeMap<PoolKind, Vec<DynamicObject>> = BTreeMap::new();
            for kind in listed.iter().map(|a| a.spec.pools.kind).collect::<std::collections::BTreeSet<_>>() {
                labels_by_kind.insert(kind, self.pool_objects(kind).await);
            }
            let mut views = Vec::with_capacity(listed.len());
            for app in &listed {
                let rows = get::app_rows(&self.client, app, &nodes).await?;
                let kind = app.spec.pools.kind;
                let namespace = app.namespace().unwrap_or_default();
                let labels: BTreeMap<String, BTreeMap<String, String>> = labels_by_kind[&kind]
                    .iter()
                    .filter(|o| o.metadata.namespace.as_deref().is_none_or(|ns| ns == namespace))
                    .map(|o| (o.name_any(), o.labels().clone()))
                    .collect();
                views.push(AppView::of(app, rows, &labels));
            }
            Ok(views)
        })
    }
}

impl ClusterSource {
    /// The pool objects of `kind`, for their labels; none when the cluster
    /// serves no such kind or the user may not list it (the grid then has
    /// nothing to group by, and says no more).
    async fn pool_objects(&self, kind: PoolKind) -> Vec<DynamicObject> {
        let Some(objects) = crate::pools::kind::objects(kind) else {
            return Vec::new();
        };
        let Ok(resource) = crate::runtime::pool_resource(&self.client, objects).await else {
            return Vec::new();
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(e) => {
                tracing::debug!(error = %e, "pool objects not readable: the grid has no labels to group by");
                Vec::new()
            }
        }
    }
}
