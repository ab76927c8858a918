//! `driftreactor serve`: the long-running sidecar (see `docs/serve.md`).
//!
//! Arguments, the async runtime and the SIGTERM / SIGINT handler; the sidecar itself
//! (pipeline model, remediation hand-off, journal, HTTP API) is
//! [`driftreactor_serve::launch`]. This binary chooses the pull source types compiled
//! in ([`registry`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use driftreactor_config::Config;
use driftreactor_serve::SourceRegistry;

/// Arguments of `driftreactor serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file (`[[workspaces]]`, `[server]`, `[journal]`, `[[sources]]`, …).
    #[arg(long, short = 'c', env = "DRIFTREACTOR_CONFIG")]
    pub config: PathBuf,
    /// Listen address, overriding `[server] listen` (e.g. `0.0.0.0:8080`, or
    /// `127.0.0.1:0` for any free port).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
}

/// Runs the sidecar until SIGTERM / SIGINT, then shuts down gracefully. Prints
/// `driftreactor serve: listening on ADDR` on stdout once the server is bound.
///
/// # Errors
/// When the config, the state, the journal, a source or the listen address cannot be
/// set up, or the server fails.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        // Before anything is bound: a SIGTERM right after `listening on` is a graceful
        // shutdown, never the default disposition's abrupt exit.
        let signals = driftreactor_serve::ShutdownSignals::install()
            .context("cannot install the SIGTERM / SIGINT handlers")?;
        let app = driftreactor_serve::launch(config, args.listen, registry()).await?;
        println!("driftreactor serve: listening on {}", app.local_addr());
        tokio::spawn(signals.cancel_on(app.shutdown_token()));
        app.wait().await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The pull source types compiled into this binary.
pub(crate) fn registry() -> SourceRegistry {
    let mut r = SourceRegistry::new();
    r.add(driftreactor_aws::sqs::registration())
        .add(driftreactor_gcp::pubsub::registration())
        .add(driftreactor_azure::namespace::registration());
    r
}
