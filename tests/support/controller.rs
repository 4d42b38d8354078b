//! The controller binary as a test runs it: a process of its own against
//! the test cluster, its log, metrics and probes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{kubeconfig, repo_root};

/// The controller binary, running against the test cluster and watching only
/// one test's namespace; killed when dropped. Its log is
/// `target/e2e-logs/<namespace>.log`.
pub struct RunningController {
    child: std::process::Child,
    pub log: PathBuf,
    /// Where it serves /metrics, /healthz and /readyz.
    pub metrics_addr: std::net::SocketAddr,
    /// Run under `CONTROLLER_WRAPPER`, in a process group of its own.
    wrapped: bool,
}

impl RunningController {
    pub fn start(namespace: &str) -> Self {
        Self::start_with(namespace, &[])
    }

    /// As `start`, with further flags for `nodepool-fanout run`.
    pub fn start_with(namespace: &str, flags: &[&str]) -> Self {
        Self::start_as(namespace, flags, kubeconfig())
    }

    /// As `start_with`, with the identity of another kubeconfig.
    pub fn start_as(namespace: &str, flags: &[&str], kubeconfig: &Path) -> Self {
        Self::start_full(namespace, flags, kubeconfig, &[])
    }

    /// As `start_with`, with further environment variables (POD_NAME…).
    pub fn start_env(namespace: &str, flags: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_full(namespace, flags, kubeconfig(), env)
    }

    fn start_full(namespace: &str, flags: &[&str], kubeconfig: &Path, env: &[(&str, &str)]) -> Self {
        let dir = repo_root().join("target/e2e-logs");
        std::fs::create_dir_all(&dir).expect("cannot create target/e2e-logs");
        let suffix = env
            .iter()
            .find(|(k, _)| *k == "POD_NAME")
            .map(|(_, v)| format!("-{v}"))
            .unwrap_or_default();
        let log = dir.join(format!("{namespace}{suffix}.log"));
        // A restart keeps the log before it as `<name>.log.1`: each
        // instance's log holds its own lines only, which the tests read.
        if log.exists() {
            let _ = std::fs::rename(&log, log.with_extension("log.1"));
        }
        let file = std::fs::File::create(&log).expect("cannot create the controller's log file");
        // Many controllers run at once, one per test: each on a free port.
        let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port");
        use std::os::unix::process::CommandExt;
        let binary = env!("CARGO_BIN_EXE_nodepool-fanout");
        // `CONTROLLER_WRAPPER="heaptrack -o target/profile"` runs the
        // controller under a profiler; the process figures read from /proc
        // are then the wrapper's.
        let wrapper = std::env::var("CONTROLLER_WRAPPER").unwrap_or_default();
        let mut words = wrapper.split_whitespace();
        let wrapped = !wrapper.trim().is_empty();
        let mut command = match words.next() {
            Some(program) => {
                let mut command = Command::new(program);
                command.args(words).arg(binary).process_group(0);
                command
            }
            None => Command::new(binary),
        };
        // The fixture repositories live in flux-system, shared by every
        // test's namespace as one team shares them: cross-namespace
        // references are allowed unless a test says otherwise.
        let tenancy = ["--no-cross-namespace-refs=false"];
        let tenancy = match flags.iter().any(|f| f.starts_with("--no-cross-namespace-refs")) {
            true => &tenancy[..0],
            false => &tenancy[..],
        };
        let child = command
            .args(["run", "--watch-namespace", namespace])
            .args(["--metrics-addr", &metrics_addr.to_string()])
            .args(tenancy)
            .args(flags)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,nodepool_fanout=debug")
            .envs(env.iter().copied())
            .stdout(file.try_clone().expect("log file handle"))
            .stderr(file)
            .spawn()
            .expect("cannot start the nodepool-fanout binary");
        RunningController {
            child,
            log,
            metrics_addr,
            wrapped,
        }
    }

    /// The controller's log so far, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl RunningController {
    /// Whether the process is still alive: it has neither exited nor been
    /// restarted.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The controller's /metrics, in the text exposition format.
    pub async fn scrape(&self) -> String {
        let url = format!("http://{}/metrics", self.metrics_addr);
        let response = reqwest::get(&url).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
        assert!(response.status().is_success(), "GET {url}: {}", response.status());
        response.text().await.unwrap_or_else(|e| panic!("GET {url}: {e}"))
    }

    /// A counter of the controller's metrics, summed over the series
    /// `filter` keeps.
    pub async fn counter(&self, name: &str, filter: impl Fn(&str) -> bool) -> u64 {
        self.scrape()
            .await
            .lines()
            .filter(|l| l.starts_with(name) && filter(l))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// The controller's reconciles so far by what woke them
    /// (`nodepool_fanout_reconcile_wakes_total`).
    pub async fn wakes(&self) -> std::collections::BTreeMap<String, u64> {
        self.scrape()
            .await
            .lines()
            .filter_map(|l| l.strip_prefix("nodepool_fanout_reconcile_wakes_total{cause=\""))
            .filter_map(|l| {
                let (cause, rest) = l.split_once('"')?;
                Some((cause.to_string(), rest.rsplit(' ').next()?.parse().ok()?))
            })
            .collect()
    }

    /// The controller's reconciles so far.
    pub async fn reconciles(&self) -> u64 {
        self.counter("nodepool_fanout_reconciles_total", |_| true).await
    }

    /// Waits until no reconcile happened for `still`, and returns the
    /// count; fails after five minutes of reconciles that never stop (a
    /// reconcile that wakes itself).
    pub async fn quiet(&self, still: Duration) -> u64 {
        let start = Instant::now();
        let mut last = self.reconciles().await;
        loop {
            tokio::time::sleep(still).await;
            let now = self.reconciles().await;
            if now == last {
                return now;
            }
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "reconciles never stop: {} in the last {still:?}\n{}",
                now - last,
                self.log_tail()
            );
            last = now;
        }
    }

    /// The process id, to read its memory and CPU time from /proc.
    #[allow(dead_code)] // read by benches/scale.rs, by no test
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crashing node would: no lease release, no clean-up.
    pub fn kill(&mut self) {
        if self.wrapped {
            // The controller is the wrapper's child: a signal to the group
            // reaches it, and the wrapper then writes out what it recorded.
            let _ = Command::new("kill").args(["-TERM", "--", &format!("-{}", self.child.id())]).status();
        } else {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl RunningController {
    /// Sends SIGTERM, as the kubelet stops a pod, and waits up to `within`
    /// for the process to exit; returns how long it took, or `None` if it
    /// is still running (then it is killed).
    pub fn terminate(&mut self, within: Duration) -> Option<Duration> {
        let start = std::time::Instant::now();
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        while start.elapsed() < within {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill();
        None
    }

    /// The HTTP status of `/readyz`.
    pub async fn readyz(&self) -> u16 {
        let url = format!("http://{}/readyz", self.metrics_addr);
        match reqwest::get(&url).await {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        }
    }
}

impl Drop for RunningController {
    fn drop(&mut self) {
        self.kill();
    }
}
