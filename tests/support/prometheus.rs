//! The local plane's Prometheus, as the tests and benches that judge
//! pools by their metrics reach it: its URL, and the directory of
//! file-based service discovery it reads its targets from.

use std::path::PathBuf;

/// Its base URL, written by `cluster.sh up`.
pub fn url() -> String {
    let file = state_dir().join("prometheus-url");
    let url = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("the local plane's Prometheus is not up ({}: {e})", file.display()));
    url.trim().to_string()
}

/// Where a test writes a targets file (`<name>.json`, written whole then
/// renamed) for Prometheus to scrape.
pub fn targets_dir() -> PathBuf {
    let dir = state_dir().join("prometheus/targets");
    std::fs::create_dir_all(&dir).expect("the targets directory");
    dir
}

fn state_dir() -> PathBuf {
    super::kubeconfig().parent().expect("the kubeconfig's directory").to_path_buf()
}
