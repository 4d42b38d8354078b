//! `nodepool-fanout-check`: watches a cluster and judges the promises of
//! the guides under docs/ from what its API server records (see
//! [`nodepool_fanout::check`]). Prints each violation as it is found and,
//! at the end, how many times each invariant was judged and broken; exits
//! 1 when any was broken.

use std::time::Duration;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Judges nodepool-fanout's promises from what the API server records"
)]
struct Args {
    /// Watch this namespace only (all namespaces when absent).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Stop after this long, e.g. `10m` (until interrupted when absent).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("nodepool-fanout-check: no cluster to watch ({e}): set KUBECONFIG");
            return std::process::ExitCode::from(2);
        }
    };
    // Until the duration passes or the checker is interrupted: either
    // way the summary of what was judged is printed.
    let stop = async {
        match args.duration {
            Some(duration) => tokio::select! {
                () = tokio::time::sleep(duration) => {}
                _ = tokio::signal::ctrl_c() => {}
            },
            None => drop(tokio::signal::ctrl_c().await),
        }
    };
    let namespace = args.namespace.as_deref();
    let summary = nodepool_fanout::check::watch::run(client, namespace, stop, |v| println!("{v}")).await;
    match summary {
        Ok(summary) => {
            print!("{summary}");
            let broken: u64 = summary.violations.values().sum();
            std::process::ExitCode::from(u8::from(broken > 0))
        }
        Err(e) => {
            eprintln!("nodepool-fanout-check: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
