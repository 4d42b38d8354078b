//! One test's world on the cluster: its namespace, and the pools, nodes
//! and cluster-scoped objects it made.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use super::{client, client_of, nodepool_resource, unique_suffix, POOL_LABEL};

/// One test's world: a namespace and the node pools and nodes it made.
/// `cleanup` removes all of it; a failed test leaves it for inspection
/// until `make cluster-down`.
pub struct TestEnv {
    pub client: Client,
    pub namespace: String,
    /// Prefix of every cluster-scoped name this test makes.
    pub prefix: String,
    pools: Vec<String>,
    nodes: Vec<String>,
    /// Other cluster-scoped objects it made (NodeGroups, NodeUnits).
    objects: Vec<(ApiResource, String)>,
}

impl TestEnv {
    pub async fn new(test: &str) -> Self {
        Self::with_client(test, client().await).await
    }

    /// As `new`, on the cluster of another kubeconfig (a private control
    /// plane's).
    #[allow(dead_code)] // the private planes' binary's, not the shared plane's
    pub async fn on(test: &str, kubeconfig: &Path) -> Self {
        Self::with_client(test, client_of(kubeconfig).await).await
    }

    async fn with_client(test: &str, client: Client) -> Self {
        let prefix = format!("{test}-{}", unique_suffix());
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": { "name": prefix, "labels": { "nodepool-fanout.test/e2e": "true" } }
        }))
        .expect("namespace manifest");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("cannot create namespace {prefix}: {e}"));
        TestEnv {
            client,
            namespace: prefix.clone(),
            prefix,
            pools: Vec::new(),
            nodes: Vec::new(),
            objects: Vec::new(),
        }
    }

    /// The full name of a pool of this test: `<prefix>-<short>`.
    pub fn pool_name(&self, short: &str) -> String {
        format!("{}-{short}", self.prefix)
    }

    /// Creates an OpenYurt NodePool with the given labels and `nodes` kwok
    /// nodes joined to it, and returns the pool's full name.
    pub async fn create_pool(&mut self, short: &str, labels: &[(&str, &str)], nodes: usize) -> String {
        let name = self.pool_name(short);
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        let pool: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apps.openyurt.io/v1beta1",
            "kind": "NodePool",
            "metadata": { "name": name, "labels": labels },
            "spec": { "type": "Edge" }
        }))
        .expect("node pool manifest");
        let pools: Api<DynamicObject> = Api::all_with(self.client.clone(), &nodepool_resource());
        pools
            .create(&PostParams::default(), &pool)
            .await
            .unwrap_or_else(|e| panic!("cannot create node pool {name}: {e}"));
        self.pools.push(name.clone());
        for i in 0..nodes {
            self.create_node(&format!("{name}-node-{i}"), &name).await;
        }
        name
    }

    /// Creates one OpenYurt pool per region, of one kwok node each, named
    /// after the region and labelled `e2e=<prefix>` and `region=<region>`
    /// (what `apps::ingress_app` selects and templates), and returns their
    /// full names.
    pub async fn create_region_pools(&mut self, regions: &[&str]) -> Vec<String> {
        let tag = self.prefix.clone();
        let mut names = Vec::new();
        for region in regions {
            names.push(self.create_pool(region, &[("e2e", &tag), ("region", region)], 1).await);
        }
        names
    }

    /// Creates a kwok node in an OpenYurt pool: kwok turns it Ready and
    /// runs the pods bound to it.
    pub async fn create_node(&mut self, node: &str, pool: &str) {
        self.create_labelled_node(node, &[(POOL_LABEL, pool)]).await;
    }

    /// Creates a kwok node with these labels besides kwok's own. Where a
    /// framework's controller would label a pool's nodes (yurt-manager,
    /// KubeEdge's controller manager, SuperEdge's site-manager), the test
    /// gives the node that label itself, as kwok plays the kubelet.
    pub async fn create_labelled_node(&mut self, node: &str, labels: &[(&str, &str)]) {
        let mut all: BTreeMap<&str, &str> = BTreeMap::from([
            ("kubernetes.io/hostname", node),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("type", "kwok"),
        ]);
        all.extend(labels.iter().copied());
        let manifest: Node = serde_json::from_value(json!({
            "metadata": {
                "name": node,
                "annotations": { "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0" },
                "labels": all
            }
        }))
        .expect("node manifest");
        let api: Api<Node> = Api::all(self.client.clone());
        api.create(&PostParams::default(), &manifest)
            .await
            .unwrap_or_else(|e| panic!("cannot create node {node}: {e}"));
        self.nodes.push(node.to_string());
    }

    /// Names of the nodes of an OpenYurt pool, as the API server lists them.
    pub async fn nodes_of(&self, pool: &str) -> Vec<String> {
        self.nodes_labelled(&format!("{POOL_LABEL}={pool}")).await
    }

    /// Names of the nodes a label selector matches.
    pub async fn nodes_labelled(&self, selector: &str) -> Vec<String> {
        let api: Api<Node> = Api::all(self.client.clone());
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap_or_else(|e| panic!("cannot list nodes {selector}: {e}"));
        list.items.into_iter().filter_map(|n| n.metadata.name).collect()
    }

    /// Creates a cluster-scoped object (a NodeGroup, a NodeUnit) that
    /// `cleanup` deletes.
    pub async fn create_cluster_object(&mut self, resource: &ApiResource, manifest: serde_json::Value) {
        let object: DynamicObject = serde_json::from_value(manifest).expect("object manifest");
        let name = object.metadata.name.clone().expect("the object has a name");
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("cannot create {} {name}: {e}", resource.kind));
        self.objects.push((resource.clone(), name));
    }

    /// Removes the namespace, pools and nodes this test made. The nodes go
    /// last: kwok must still be running the pods when Helm uninstalls them,
    /// or they hang in Terminating.
    pub async fn cleanup(self) {
        let dp = DeleteParams::default();
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let _ = namespaces.delete(&self.namespace, &dp).await;
        let pools: Api<DynamicObject> = Api::all_with(self.client.clone(), &nodepool_resource());
        for p in &self.pools {
            let _ = pools.delete(p, &dp).await;
        }
        for (resource, name) in &self.objects {
            let _ = Api::<DynamicObject>::all_with(self.client.clone(), resource).delete(name, &dp).await;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match namespaces.get_opt(&self.namespace).await {
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(500)).await,
                _ => break,
            }
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        for n in &self.nodes {
            let _ = nodes.delete(n, &dp).await;
        }
    }
}
