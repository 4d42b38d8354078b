//! A headless Chromium from Debian's packages, driven through chromedriver
//! (WebDriver), for the console's browser tests and benchmark.
//! `hack/browser-deps.sh` (run by `make test`) installs both; without them
//! the caller fails, and says how to get them.

use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver on a loopback port it picked itself, stopped when dropped.
pub struct Driver {
    _child: Child,
    url: String,
}

impl Driver {
    pub async fn start() -> Self {
        let mut child = Command::new(CHROMEDRIVER)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER}: {e}; run hack/browser-deps.sh"));
        let mut lines = BufReader::new(child.stdout.take().expect("chromedriver's stdout")).lines();
        let port = tokio::time::timeout(Duration::from_secs(20), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    return rest.trim_end_matches('.').parse::<u16>().ok();
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .expect("chromedriver did not say its port within 20 s");
        // Keep its stdout drained, so that it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Driver {
            _child: child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A headless Chromium session. Root needs `--no-sandbox`.
    pub async fn browser(&self) -> Client {
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": CHROMIUM, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"
            ] }
        });
        let capabilities = capabilities.as_object().cloned().unwrap_or_default();
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("no headless Chromium session ({e}); run hack/browser-deps.sh"))
    }
}
