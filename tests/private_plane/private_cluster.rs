//! A control plane of one test's own, for the tests that stop its parts.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

use crate::support::{repo_root, RunningController, TestEnv, SHARED_PLANE_REFUSED};

/// A control plane of one test's own, on its own loopback ports and state
/// directory (`target/local-cluster-<name>`), for a test that stops its
/// parts: an outage there disturbs no other test. Its kubeconfig goes to
/// the test's clients and controllers by argument (`env`, `controller`),
/// never through the process's environment, so the planes of the tests of
/// this binary run side by side. Stopped when dropped.
pub struct PrivateCluster {
    dir: PathBuf,
    port_base: u16,
    kubeconfig: PathBuf,
}

impl PrivateCluster {
    /// Starts it; `port_base` is the base of 20 ports (base+1 to base+20),
    /// clear of the shared control plane's 16441–16460 and of the other
    /// private planes'.
    pub fn up(name: &str, port_base: u16) -> Self {
        // From here on, a helper that would reach the shared plane fails.
        SHARED_PLANE_REFUSED.store(true, Ordering::SeqCst);
        let dir = repo_root().join(format!("target/local-cluster-{name}"));
        let cluster = PrivateCluster {
            kubeconfig: dir.join("kubeconfig"),
            dir,
            port_base,
        };
        // One plane starts at a time: a cold cache then builds the plane's
        // binaries once rather than into the same directories at once, and
        // start-ups do not compete for the cores. Once up, planes run side
        // by side. A start that failed (and panicked) does not stop the next.
        static STARTING: Mutex<()> = Mutex::new(());
        let starting = STARTING.lock().unwrap_or_else(PoisonError::into_inner);
        cluster.run(&["up"]);
        drop(starting);
        cluster
    }

    /// A test's namespace on this plane (`TestEnv::new`, here).
    pub async fn env(&self, test: &str) -> TestEnv {
        TestEnv::on(test, &self.kubeconfig).await
    }

    /// The controller on this plane, watching `namespace`, with further
    /// flags for `nodepool-fanout run`.
    pub fn controller(&self, namespace: &str, flags: &[&str]) -> RunningController {
        RunningController::start_as(namespace, flags, &self.kubeconfig)
    }

    /// Stops one component: `kube-apiserver`, `helm-controller`, …
    pub fn stop(&self, component: &str) {
        self.run(&["stop", component]);
    }

    /// Starts a stopped component again and waits until it serves.
    pub fn start(&self, component: &str) {
        self.run(&["start", component]);
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(repo_root().join("hack/cluster.sh"));
        command
            .args(args)
            .env("LOCAL_CLUSTER_DIR", &self.dir)
            .env("LOCAL_CLUSTER_PORT_BASE", self.port_base.to_string())
            // No site clusters: these tests stop the hub's parts, and sites would slow their start.
            .env("LOCAL_CLUSTER_SITES", "0")
            .env_remove("KUBECONFIG");
        command
    }

    fn run(&self, args: &[&str]) {
        let output = self.command(args).output().expect("hack/cluster.sh could not be run");
        assert!(
            output.status.success(),
            "hack/cluster.sh {} of {} exited {}:\n{}",
            args.join(" "),
            self.dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = self.command(&["down"]).output();
    }
}
