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
    let mut served = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else { continue };
        let Some((name, labels)) = series.split_once('{') else {
            continue;
        };
        let label = |key: &str| label(labels, key);
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
    print!("{:<44}", "what the plane did during each write");
    for head in heads {
        print!(" {head:>14}");
    }
    println!();
    for what in rows {
        print!("{what:<44}");
        for column in columns {
            let value = column.iter().find(|(w, _)| *w == what).map_or("0", |(_, v)| v.as_str());
            print!(" {value:>14}");
        }
        println!();
    }
}
