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
    /// Starts chromedriver, trying again twice when it neither says its port
    /// nor stays up: on a loaded two-core machine a first start has been seen
    /// to go quiet. After the third try it fails, with all it printed.
    pub async fn start() -> Self {
        let mut said = Vec::new();
        for attempt in 1..=3 {
            match Self::start_once().await {
                Ok(driver) => return driver,
                Err(failure) => said.push(format!("try {attempt}: {failure}")),
            }
        }
        panic!("chromedriver did not start; run hack/browser-deps.sh\n{}", said.join("\n"))
    }

    async fn start_once() -> Result<Self, String> {
        let mut child = Command::new(CHROMEDRIVER)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER}: {e}; run hack/browser-deps.sh"));
        let mut lines = BufReader::new(child.stdout.take().expect("chromedriver's stdout")).lines();
        // Drained from the start, so that it never blocks on a full pipe
        // while its port is awaited, and kept for a failure's message.
        let mut errors = BufReader::new(child.stderr.take().expect("chromedriver's stderr")).lines();
        let errors = tokio::spawn(async move {
            let mut said = Vec::new();
            while let Ok(Some(line)) = errors.next_line().await {
                said.push(line);
            }
            said
        });
        let mut printed = Vec::new();
        let port = tokio::time::timeout(Duration::from_secs(45), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    return rest.trim_end_matches('.').parse::<u16>().ok();
                }
                printed.push(line);
            }
            None
        })
        .await
        .ok()
        .flatten();
        let Some(port) = port else {
            let _ = child.start_kill();
            let status = child.wait().await.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
            // Its stderr closes with it.
            if let Ok(Ok(said)) = tokio::time::timeout(Duration::from_secs(2), errors).await {
                printed.extend(said);
            }
            return Err(format!("no port within 45 s ({status}); it printed: {printed:?}"));
        };
        // Keep its stdout drained too.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Driver {
            _child: child,
            url: format!("http://127.0.0.1:{port}"),
        })
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
