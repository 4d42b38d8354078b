//! What a timed write cost the local plane, both sides read in one run:
//! the CPU each of the plane's processes used, and what the API server
//! served (requests by verb and resource, watch events and their bytes),
//! between two readings. The benches print a column a write, so that
//! the controller's write and a raw client's differ in plain sight.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The plane's processes shown apart; the rest are summed as one.
const SHOWN: [&str; 5] = [
    "kube-apiserver",
    "etcd",
    "helm-controller",
    "kube-controller-manager",
    "writer",
];
/// The API server's figures compared, for these resources.
const RESOURCES: [&str; 2] = ["helmreleases", "leases"];

/// The row of the API server's checks of its watch cache against etcd
/// (the local plane turns them off; a write that bore one shows it).
const CHECKS: &str = "watch caches checked against etcd";

/// One reading: CPU seconds by process, and the API server's counters.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    cpu: BTreeMap<String, f64>,
    served: BTreeMap<String, f64>,
}

/// Reads the plane now; `writer` is the process that writes (the
/// controller, or this bench for a raw client).
pub async fn read(client: &kube::Client, writer: u32) -> Reading {
    let mut cpu = BTreeMap::new();
    let by_group = cpu_by_group();
    for (name, group) in plane_processes() {
        let shown = if SHOWN.contains(&name.as_str()) {
            name.as_str()
        } else {
            "rest of the plane"
        };
        *cpu.entry(shown.to_string()).or_insert(0.0) += by_group.get(&group).copied().unwrap_or(0.0);
    }
    cpu.insert("writer".into(), super::bench::cpu_seconds(writer));
    let request = http::Request::get("/metrics").body(Vec::new()).expect("a GET of /metrics");
    let text = client.request_text(request).await.expect("the API server's /metrics");
    Reading {
        cpu,
        served: served(&text),
    }
}

/// The most the plane may use, in cores, and still be quiet (it idles at
/// about 0.06 on the development machine).
const QUIET_CORES: f64 = 0.25;
/// The window over which the plane must stay under [`QUIET_CORES`].
const QUIET_WINDOW: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits until the plane is quiet: its processes together use under
/// [`QUIET_CORES`] over [`QUIET_WINDOW`]. A timed write must not share the
/// two cores with what an earlier one left behind: the garbage collector
/// still walking the dependents of a deleted namespace's application (a
/// few thousand GETs of Leases over a minute), helm-controller letting go
/// of deleted releases. Such work landed in one write's figures or
/// another's from run to run, as much as a tenth of a write. Says how long
/// it waited; fails after `at_most`.
pub async fn quiet(at_most: std::time::Duration) -> std::time::Duration {
    let start = std::time::Instant::now();
    let plane = || -> f64 {
        let by_group = cpu_by_group();
        (plane_processes().iter())
            .map(|(_, group)| by_group.get(group).copied().unwrap_or(0.0))
            .sum()
    };
    loop {
        let before = plane();
        tokio::time::sleep(QUIET_WINDOW).await;
        let used = plane() - before;
        if used < QUIET_CORES * QUIET_WINDOW.as_secs_f64() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < at_most,
            "the plane is still busy after {at_most:?}: {used:.2} CPU s in the last {QUIET_WINDOW:?}"
        );
    }
}

/// How long each profile of the API server lasts unless
/// `PROFILE_SECONDS` says: the first 30 s of a timed write, so that every
/// column's profile covers the same span of a saturated plane (the
/// quickest write of 10,000 takes about 35 s).
const PROFILE_SECONDS: u32 = 30;

/// A CPU profile of the API server being taken, if `PROFILE_API_SERVER`
/// names a directory: the bench starts one as a timed write starts, and
/// it lands in `<dir>/<name>.pb.gz`, for `go tool pprof -top
/// -diff_base <floor>.pb.gz <controller>.pb.gz` to say where the API
/// server's CPU went for one writer's requests against another's. The
/// API server serves it from `/debug/pprof/profile` (its `--profiling`,
/// on by default), sampling at 100 Hz.
pub struct Profile(Option<tokio::task::JoinHandle<()>>);

/// Starts a profile of the API server named `name`, when asked for.
pub fn profile(client: &kube::Client, name: &str) -> Profile {
    let Some(dir) = std::env::var_os("PROFILE_API_SERVER").map(PathBuf::from) else {
        return Profile(None);
    };
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
    let seconds: u32 = std::env::var("PROFILE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(PROFILE_SECONDS);
    let (client, path) = (client.clone(), dir.join(format!("{name}.pb.gz")));
    Profile(Some(tokio::spawn(async move {
        use http_body_util::BodyExt;
        let uri = format!("/debug/pprof/profile?seconds={seconds}");
        let request = http::Request::get(uri).body(Vec::new()).expect("a GET of a profile");
        let response = client.send(request.map(kube::client::Body::from)).await;
        let response = response.unwrap_or_else(|e| panic!("the API server's profile: {e}"));
        // An error's body is no profile: a file of it would mislead pprof's reader.
        assert!(
            response.status().is_success(),
            "the API server's profile: {} (is its --profiling off?)",
            response.status()
        );
        let body = response.into_body().collect().await;
        let body = body.unwrap_or_else(|e| panic!("the API server's profile: {e}")).to_bytes();
        std::fs::write(&path, body).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    })))
}

impl Profile {
    /// Waits for the profile to be written, if one is being taken.
    pub async fn finish(self) {
        if let Some(task) = self.0 {
            task.await.expect("the API server's profile is written");
        }
    }
}

/// The plane's components, each by name with its process group (a
/// component is started as the leader of a group of its own), from their
/// pid files.
fn plane_processes() -> Vec<(String, u32)> {
    let pids = state_dir().join("pids");
    let entries = std::fs::read_dir(&pids)
        .unwrap_or_else(|e| panic!("the local plane's processes ({}): {e}; is it up?", pids.display()));
    (entries.flatten())
        .filter_map(|entry| {
            let file = entry.file_name().to_string_lossy().to_string();
            let name = file.strip_suffix(".pid")?.to_string();
            let group = std::fs::read_to_string(entry.path()).ok()?.trim().parse().ok()?;
            Some((name, group))
        })
        .collect()
}

impl Reading {
    /// The rows of what was used since `before`: (what, how much).
    pub fn since(&self, before: &Reading) -> Vec<(String, String)> {
        let mut rows = Vec::new();
        let mut total = 0.0;
        for name in SHOWN.iter().copied().chain(["rest of the plane"]) {
            let used =
                self.cpu.get(name).copied().unwrap_or(0.0) - before.cpu.get(name).copied().unwrap_or(0.0);
            total += used;
            rows.push((format!("CPU s: {name}"), format!("{used:.1}")));
        }
        rows.push(("CPU s: in all".into(), format!("{total:.1}")));
        for (key, value) in &self.served {
            let used = value - before.served.get(key).copied().unwrap_or(0.0);
            let shown = if key.ends_with("bytes") {
                format!("{:.1} MiB", used / 1024.0 / 1024.0)
            } else {
                format!("{used:.0}")
            };
            rows.push((key.clone(), shown));
        }
        rows
    }
}

/// The API server's counters for [`RESOURCES`]: requests by verb (every
/// response code summed), watch events and their bytes.
fn served(text: &str) -> BTreeMap<String, f64> {
    // Shown even when the API server makes no such check.
    let mut served = BTreeMap::from([(CHECKS.to_string(), 0.0)]);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else { continue };
        let Some((name, labels)) = series.split_once('{') else {
            continue;
        };
        let label = |key: &str| label(labels, key);
        // The API server's checks of its watch cache against etcd, of
        // every resource: each lists the resource whole from both.
        if name == "apiserver_storage_consistency_checks_total" {
            *served.entry(CHECKS.to_string()).or_insert(0.0) += value;
            continue;
        }
        let Some(resource) = label("resource").filter(|r| RESOURCES.contains(r)) else {
            continue;
        };
        let key = match name {
            "apiserver_request_total" => match label("verb") {
                Some(verb) => format!("{resource}: {verb}"),
                None => continue,
            },
            "apiserver_watch_events_total" => format!("{resource}: watch events sent"),
            "apiserver_watch_events_sizes_sum" => format!("{resource}: watch event bytes"),
            _ => continue,
        };
        *served.entry(key).or_insert(0.0) += value;
    }
    served
}

/// The value of the label `key` among a series' `labels` as the
/// Prometheus text format writes them (`verb="create",resource="…"`).
pub fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    let from = labels.find(&format!("{key}=\""))? + key.len() + 2;
    labels[from..].split('"').next()
}

/// The CPU seconds of every process so far, summed by process group
/// (a plane component is started as the leader of a group of its own):
/// /proc read once a reading, each process's stat once.
fn cpu_by_group() -> BTreeMap<u32, f64> {
    let mut by_group = BTreeMap::new();
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return by_group;
    };
    for pid in processes.flatten().filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok()) {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields = stat_fields(&stat);
        if let Some(group) = fields.get(2).and_then(|g| g.parse::<u32>().ok()) {
            *by_group.entry(group).or_insert(0.0) += super::bench::cpu_of(&fields);
        }
    }
    by_group
}

/// The fields of /proc/<pid>/stat after the command name, which ends at the last ')'.
pub fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest)
        .unwrap_or("")
        .split_whitespace()
        .collect()
}

fn state_dir() -> PathBuf {
    super::kubeconfig().parent().expect("the kubeconfig's directory").to_path_buf()
}

/// Prints one table: a column a write, a row a figure.
pub fn print_table(heads: &[&str], columns: &[Vec<(String, String)>]) {
    let mut rows: Vec<String> = Vec::new();
    for column in columns {
        for (what, _) in column {
            if !rows.contains(what) {
                rows.push(what.clone());
            }
        }
    }
    print_row("what the plane did during each write", heads);
    for what in rows {
        let values: Vec<&str> = (columns.iter())
            .map(|column| column.iter().find(|(w, _)| *w == what).map_or("0", |(_, v)| v.as_str()))
            .collect();
        print_row(&what, &values);
    }
}

/// One row of a table of writes side by side: its label, then a cell a
/// write, so that a bench's own rows line up with [`print_table`]'s.
pub fn print_row(label: &str, cells: &[impl std::fmt::Display]) {
    print!("{label:<44}");
    for cell in cells {
        print!(" {cell:>14}");
    }
    println!();
}
