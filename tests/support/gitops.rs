//! Helpers for the GitOps tests: a Git repository on the local control
//! plane's Git server, committed to as a user does, and the Flux objects
//! that deliver it (a `GitRepository` and a `Kustomization`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::Api;
use serde_json::{json, Value};

use super::{condition, kubeconfig, wait_for, TestEnv};

/// How long Flux may take to fetch a commit, apply it and see its health.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(240);

/// The directory of the control plane the tests use, beside its kubeconfig.
fn cluster_dir() -> PathBuf {
    kubeconfig()
        .parent()
        .expect("the kubeconfig is in the cluster's directory")
        .to_path_buf()
}

/// A path in the directory of the control plane the tests use, where
/// `hack/cluster.sh up` keeps what its servers serve (the Git server's
/// repositories under `git`, the S3 server's buckets under `s3`).
pub fn cluster_path(relative: &str) -> PathBuf {
    cluster_dir().join(relative)
}

/// What `hack/cluster.sh up` wrote of one of its services (`git-server`,
/// `oci-registry`), failing loudly when the control plane has none.
pub fn service_address(service: &str) -> String {
    let file = cluster_dir().join(service);
    std::fs::read_to_string(&file).map(|s| s.trim().to_string()).unwrap_or_else(|e| {
        panic!(
            "the control plane has no {service} ({}: {e}); `hack/cluster.sh up` starts one",
            file.display()
        )
    })
}

/// A repository on the Git server, with a work tree of the test's own that
/// commits and pushes over smart HTTP, as a user's `git push` does.
pub struct GitRepo {
    work: PathBuf,
    /// The URL Flux clones from.
    pub url: String,
}

impl GitRepo {
    /// Creates an empty bare repository `<name>.git` on the server.
    pub fn create(name: &str) -> Self {
        let bare = cluster_dir().join("git").join(format!("{name}.git"));
        git(Path::new("."), &["init", "--quiet", "--bare", "-b", "main", &bare.to_string_lossy()]);
        let url = format!("{}/{name}.git", service_address("git-server"));
        let work = std::env::temp_dir().join(format!("nodepool-fanout-e2e-git-{name}"));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).expect("create the work tree");
        git(&work, &["init", "--quiet", "-b", "main"]);
        git(&work, &["remote", "add", "origin", &url]);
        GitRepo { work, url }
    }

    /// Writes a file of the work tree (YAML is JSON, so objects are written
    /// as one JSON document each, separated as YAML documents).
    pub fn write(&self, path: &str, objects: &[Value]) {
        let file = self.work.join(path);
        std::fs::create_dir_all(file.parent().expect("a file in a folder")).expect("create the folder");
        let docs: Vec<String> =
            objects.iter().map(|o| serde_json::to_string_pretty(o).expect("json")).collect();
        std::fs::write(&file, docs.join("\n---\n")).expect("write the file");
    }

    /// Copies a folder of this repository (a fixture chart) into the work
    /// tree at `path`.
    pub fn copy_dir(&self, from: &Path, path: &str) {
        let to = self.work.join(path);
        std::fs::create_dir_all(&to).expect("create the folder");
        for entry in std::fs::read_dir(from).expect("read the folder") {
            let entry = entry.expect("a folder entry");
            let name = entry.file_name();
            let target = format!("{path}/{}", name.to_string_lossy());
            match entry.file_type().expect("a file type").is_dir() {
                true => self.copy_dir(&entry.path(), &target),
                false => {
                    std::fs::copy(entry.path(), self.work.join(&target)).expect("copy the file");
                }
            }
        }
    }

    /// Removes a file from the work tree.
    pub fn remove(&self, path: &str) {
        std::fs::remove_file(self.work.join(path)).expect("remove the file");
    }

    /// Commits everything and pushes it over HTTP; returns the commit's hash.
    pub fn commit_and_push(&self, message: &str) -> String {
        git(&self.work, &["add", "--all"]);
        git(
            &self.work,
            &[
                "-c",
                "user.name=e2e",
                "-c",
                "user.email=e2e@nodepool-fanout.test",
                "commit",
                "--quiet",
                "-m",
                message,
            ],
        );
        git(&self.work, &["push", "--quiet", "origin", "HEAD:main"]);
        git(&self.work, &["rev-parse", "HEAD"]).trim().to_string()
    }
}

impl Drop for GitRepo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("git could not be run: install Git");
    assert!(
        output.status.success(),
        "git {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn gitrepository_resource() -> ApiResource {
    ApiResource {
        group: "source.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        kind: "GitRepository".into(),
        plural: "gitrepositories".into(),
    }
}

pub fn kustomization_resource() -> ApiResource {
    ApiResource {
        group: "kustomize.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
        kind: "Kustomization".into(),
        plural: "kustomizations".into(),
    }
}

pub fn ocirepository_resource() -> ApiResource {
    ApiResource {
        group: "source.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        kind: "OCIRepository".into(),
        plural: "ocirepositories".into(),
    }
}

/// Server-side applies a namespaced object of `resource` in the test's
/// namespace.
pub async fn apply_object(env: &TestEnv, resource: &ApiResource, object: &Value) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &env.namespace, resource);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(name, &PatchParams::apply("e2e-user").force(), &Patch::Apply(object))
        .await?;
    Ok(())
}

/// Asks Flux to reconcile an object now, as `flux reconcile` does.
pub async fn request_reconcile(env: &TestEnv, resource: &ApiResource, name: &str) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &env.namespace, resource);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let patch =
        json!({ "metadata": { "annotations": { "reconcile.fluxcd.io/requestedAt": now.to_string() } } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// A GitRepository of `repo`'s `main` and a Kustomization of `path` in it,
/// pruning and waiting on the health of what it applies, as a user's
/// `flux bootstrap` layout has them.
pub async fn deliver(env: &TestEnv, name: &str, repo: &GitRepo, path: &str) -> Result<(), kube::Error> {
    let source = json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": { "name": name, "namespace": env.namespace },
        "spec": { "url": repo.url, "interval": "1m", "ref": { "branch": "main" } }
    });
    apply_object(env, &gitrepository_resource(), &source).await?;
    let kustomization = json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": { "name": name, "namespace": env.namespace },
        "spec": {
            "interval": "1m", "retryInterval": "5s", "timeout": "3m",
            "path": path, "prune": true, "wait": true,
            "sourceRef": { "kind": "GitRepository", "name": name }
        }
    });
    apply_object(env, &kustomization_resource(), &kustomization).await
}

/// Fetches the new commit and applies it now, as `flux reconcile
/// kustomization --with-source` does.
pub async fn reconcile_now(env: &TestEnv, name: &str) -> Result<(), kube::Error> {
    request_reconcile(env, &gitrepository_resource(), name).await?;
    request_reconcile(env, &kustomization_resource(), name).await
}

/// Waits until the Kustomization has applied `commit` (or, for a failure,
/// attempted it) and its Ready condition has `status`; returns it.
pub async fn wait_kustomization(env: &TestEnv, name: &str, commit: &str, status: &str) -> Value {
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), &env.namespace, &kustomization_resource());
    let what = format!("Kustomization {name} at {commit} with Ready={status}");
    wait_for(&what, DELIVERY_TIMEOUT, || {
        let api = api.clone();
        async move {
            let object = api.get(name).await.map_err(|e| e.to_string())?;
            let value = serde_json::to_value(&object).map_err(|e| e.to_string())?;
            // A Ready=True is of this commit only once it is the applied
            // one: while a commit is attempted, Ready may still be the last.
            let revision = match status {
                "True" => "/status/lastAppliedRevision",
                _ => "/status/lastAttemptedRevision",
            };
            let attempted = value.pointer(revision).and_then(Value::as_str).unwrap_or("");
            let ready = condition(&value, "Ready").cloned().unwrap_or_default();
            if attempted.ends_with(commit) && ready["status"] == status {
                Ok(value)
            } else {
                Err(format!("attempted {attempted:?}, Ready {ready}"))
            }
        }
    })
    .await
}
