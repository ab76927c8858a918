//! `driftreactor replay`: recorded events → drift report.

use std::process::ExitCode;

/// Arguments of `driftreactor replay`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the replay.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let _ = args;
    Ok(ExitCode::SUCCESS)
}
