//! How soon a new site is served: the time from a NodePool's create to the
//! HelmRelease the application selecting every pool writes for it, with
//! the application at rest, and with its wake window open (the pool
//! created right after another pool's event).

use std::time::{Duration, Instant};

use kube::api::DynamicObject;
use kube::Api;
use nodepool_fanout::api::naming;

use crate::support::bench::create_pools;
use crate::support::{RunningController, TestEnv};

/// How often the release is looked for.
const POLL: Duration = Duration::from_millis(10);
/// New pools measured in each case.
const TIMES: usize = 3;

/// (at rest, window open): each case's slowest of [`TIMES`].
pub async fn new_pools(
    env: &TestEnv,
    controller: &RunningController,
    pools: &Api<DynamicObject>,
    releases: &Api<DynamicObject>,
    app: &str,
) -> (Duration, Duration) {
    let mut at_rest = Vec::new();
    let mut window_open = Vec::new();
    for i in 0..TIMES {
        controller.quiet(super::QUIET).await;
        at_rest.push(written_after_create(env, pools, releases, app, &format!("new-rest-{i}")).await);
        controller.quiet(super::QUIET).await;
        // A first pool opens the window; the one measured comes within it.
        let opener = env.pool_name(&format!("new-opener-{i}"));
        create_pools(pools, &[opener], &env.prefix, &["r"]).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        window_open.push(written_after_create(env, pools, releases, app, &format!("new-open-{i}")).await);
    }
    println!(
        "new pool -> its release written: at rest {:?}, window open {:?}",
        at_rest.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
        window_open.iter().map(|d| ms(*d)).collect::<Vec<_>>()
    );
    let slowest = |times: &[Duration]| times.iter().copied().max().unwrap_or_default();
    (slowest(&at_rest), slowest(&window_open))
}

async fn written_after_create(
    env: &TestEnv,
    pools: &Api<DynamicObject>,
    releases: &Api<DynamicObject>,
    app: &str,
    suffix: &str,
) -> Duration {
    let pool = env.pool_name(suffix);
    let release = naming::release_name(app, &pool);
    let start = Instant::now();
    create_pools(pools, std::slice::from_ref(&pool), &env.prefix, &["r"]).await;
    loop {
        if releases.get_opt(&release).await.expect("read the release").is_some() {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no release {release} for the new pool {pool}");
        tokio::time::sleep(POLL).await;
    }
}

pub fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}
