//! A chart kept in an S3-compatible bucket end to end: the local control
//! plane's S3 server serves the folders under its `s3` directory as
//! buckets, a Flux `Bucket` (the generic provider, plain HTTP, no
//! credentials) fetches one, and an application whose `spec.chart` names
//! the Bucket and the chart's path in it fans out through one shared
//! HelmChart that source-controller builds from the Bucket's artifact.
use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject};
use kube::Api;
use serde_json::{json, Value};
use support::apps::{apply_app, ingress_app, releases_by_pool, wait_app, READY_TIMEOUT};
use support::gitops::{apply_object, cluster_path, service_address};
use support::{
    condition, ensure_crd, helmchart_resource, repo_root, wait_for, RunningController, TestEnv, TestResult,
};

/// How long source-controller may take to fetch a new Bucket.
const BUCKET_TIMEOUT: Duration = Duration::from_secs(90);

fn bucket_resource() -> ApiResource {
    ApiResource {
        group: "source.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        kind: "Bucket".into(),
        plural: "buckets".into(),
    }
}

/// A bucket of the plane's S3 server: a folder of its own under the
/// server's root, which the server serves as it is, so a file copied in is
/// an object. Removed with the test, failed or not.
struct S3Bucket {
    dir: PathBuf,
    name: String,
}

impl S3Bucket {
    fn create(name: &str) -> Self {
        let root = cluster_path("s3");
        assert!(
            root.is_dir(),
            "the control plane's S3 server has no bucket folder {}; restart the plane with \
             `hack/cluster.sh down` and `hack/cluster.sh up`",
            root.display()
        );
        let dir = root.join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("create the bucket folder {}: {e}", dir.display()));
        S3Bucket {
            dir,
            name: name.to_string(),
        }
    }

    /// Copies a folder of this repository (a fixture chart) into the bucket,
    /// its files becoming objects under the key prefix `path`.
    fn copy_dir(&self, from: &Path, path: &str) {
        copy_tree(from, &self.dir.join(path));
    }
}

impl Drop for S3Bucket {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the folder");
    for entry in std::fs::read_dir(from).expect("read the folder") {
        let entry = entry.expect("a folder entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy the file");
        }
    }
}

/// A chart kept in a bucket, as teams that publish charts to object storage
/// keep them: `spec.chart` names the Bucket and the chart's path in it, and
/// every pool installs it from there through one shared HelmChart.
#[tokio::test(flavor = "multi_thread")]
async fn a_chart_kept_in_a_bucket_fans_out() -> TestResult {
    // Before anything is created: a plane without an S3 server fails the
    // test here, saying so.
    let endpoint = service_address("s3-server");
    let mut env = TestEnv::new("bucket-chart").await;
    ensure_crd(&env.client).await;
    env.create_region_pools(&["east", "west"]).await;
    let controller = RunningController::start(&env.namespace);
    // The namespace's name is unique and a valid bucket name.
    let bucket = S3Bucket::create(&env.prefix);
    bucket.copy_dir(&repo_root().join("charts-fixtures/ingress-gateway"), "charts/ingress-gateway");
    let result = async {
        let source = json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "Bucket",
            "metadata": { "name": "charts", "namespace": env.namespace },
            "spec": {
                "provider": "generic", "bucketName": bucket.name, "endpoint": endpoint,
                "insecure": true, "interval": "1m"
            }
        });
        apply_object(&env, &bucket_resource(), &source).await?;
        // The Bucket on its own first, so that a server Flux cannot read
        // fails with source-controller's words rather than a silent app.
        let buckets: Api<DynamicObject> =
            Api::namespaced_with(env.client.clone(), &env.namespace, &bucket_resource());
        let fetched = wait_for("the Bucket fetched from the S3 server", BUCKET_TIMEOUT, || {
            let buckets = buckets.clone();
            async move {
                let object = buckets.get("charts").await.map_err(|e| e.to_string())?;
                let value = serde_json::to_value(&object).map_err(|e| e.to_string())?;
                // source-controller may write Ready before the artifact in
                // another status write: wait for both, so the assertion
                // below judges what it fetched, not a half-written status.
                let artifact = value.pointer("/status/artifact/revision").is_some();
                match condition(&value, "Ready") {
                    Some(c) if c["status"] == "True" && artifact => Ok(value),
                    other => Err(format!("Ready is {other:?}, an artifact: {artifact}")),
                }
            }
        })
        .await;
        let revision = fetched.pointer("/status/artifact/revision").and_then(Value::as_str).unwrap_or("");
        assert!(revision.starts_with("sha256:"), "the Bucket has an artifact of its objects: {fetched}");

        let mut app = ingress_app(&env, json!({}));
        app["spec"]["chart"]["spec"] = json!({
            "chart": "./charts/ingress-gateway",
            "sourceRef": { "kind": "Bucket", "name": "charts" }
        });
        apply_app(&env, &app).await?;
        wait_app(&env, &controller, "READY 2/2 from the bucket", READY_TIMEOUT, |app| {
            match (app.pointer("/status/ready"), app.pointer("/status/chartVersion")) {
                (Some(r), Some(v)) if r == "2/2" && v == "1.0.0" => Ok(()),
                other => Err(format!("ready, chartVersion: {other:?}")),
            }
        })
        .await;

        let releases = releases_by_pool(&env).await;
        assert_eq!(releases.len(), 2, "one release per pool: {:?}", releases.keys());
        let charts: std::collections::BTreeSet<(String, String)> = releases
            .values()
            .map(|hr| {
                let chart_ref = &hr["spec"]["chartRef"];
                let namespace = chart_ref["namespace"].as_str().unwrap_or(&env.namespace);
                (namespace.to_string(), chart_ref["name"].as_str().unwrap_or_default().to_string())
            })
            .collect();
        assert_eq!(charts.len(), 1, "every pool shares one HelmChart: {charts:?}");
        for (pool, hr) in &releases {
            assert_eq!(hr["spec"]["chartRef"]["kind"], "HelmChart", "{pool}");
            assert_eq!(condition(hr, "Ready").map(|c| c["status"].clone()), Some(json!("True")), "{pool}");
        }

        // The shared HelmChart is built from the Bucket, at the chart's path.
        let (namespace, name) = charts.into_iter().next().expect("one chart");
        let helmcharts: Api<DynamicObject> =
            Api::namespaced_with(env.client.clone(), &namespace, &helmchart_resource());
        let chart = serde_json::to_value(helmcharts.get(&name).await?)?;
        assert_eq!(
            chart["spec"]["sourceRef"],
            json!({ "kind": "Bucket", "name": "charts" }),
            "HelmChart {namespace}/{name} is built from the Bucket: {chart}"
        );
        assert_eq!(chart["spec"]["chart"], "./charts/ingress-gateway", "{chart}");
        assert_eq!(condition(&chart, "Ready").map(|c| c["status"].clone()), Some(json!("True")), "{chart}");
        assert_eq!(chart.pointer("/status/artifact/revision"), Some(&json!("1.0.0")), "{chart}");
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    }
    .await;
    env.cleanup().await;
    drop(bucket);
    result
}
