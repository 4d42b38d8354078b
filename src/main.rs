use std::process::ExitCode;

use clap::Parser;
use nodepool_fanout::cli::{self, Cli};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr so that `crd` and `render` keep stdout for YAML.
    let json = matches!(&cli.command, cli::Command::Run(args) if args.log_format == cli::LogFormat::Json);
    nodepool_fanout::telemetry::init_logs(json);
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
