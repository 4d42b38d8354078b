use std::process::ExitCode;

use clap::Parser;
use nodepool_fanout::cli::{self, Cli};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr so that `crd` and `render` keep stdout for YAML.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr());
    match cli::execute(cli, &mut out, &mut err).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
