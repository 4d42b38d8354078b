//! A control plane of a test binary's own, for the tests that stop its
//! parts. Not a module of `support`: only the binaries that start one
//! include it, beside `support` (`#[path = "support/private_cluster.rs"]`),
//! so the end-to-end binary on the shared control plane does not carry it.

use std::path::PathBuf;
use std::process::Command;

use crate::support::{repo_root, PRIVATE_KUBECONFIG};

/// A control plane of one test binary's own, on its own loopback ports and
/// state directory (`target/local-cluster-<name>`), for tests that stop its
/// parts: an outage there disturbs no other test. Once it is up, every
/// client, kubectl and controller of the binary uses it. Stopped when
/// dropped.
pub struct PrivateCluster {
    dir: PathBuf,
    port_base: u16,
}

impl PrivateCluster {
    /// Starts it; `port_base` is the base of 20 ports (base+1 to base+20), clear of the
    /// shared control plane's 16441–16460.
    pub fn up(name: &str, port_base: u16) -> Self {
        let cluster = PrivateCluster {
            dir: repo_root().join(format!("target/local-cluster-{name}")),
            port_base,
        };
        cluster.run(&["up"]);
        let kubeconfig = cluster.dir.join("kubeconfig");
        assert!(
            PRIVATE_KUBECONFIG.set(kubeconfig).is_ok(),
            "a test binary has at most one private control plane"
        );
        cluster
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
