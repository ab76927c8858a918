//! `driftreactor mcp`: the MCP server over stdio (README, "MCP"), for an MCP client
//! (Claude Desktop, VS Code, an agent framework) that starts it as a child process.
//!
//! The states are loaded once, as `replay` and `graph` load them (the config's
//! `[[workspaces]]` / `[[workspace_sets]]` and `--state`); the policy is the
//! config's; the journal tools read the journal `[journal]` names (or serve's default
//! journal file next to the config, when it exists). No remediator runs here: the
//! write tools are served by `serve`'s `/mcp` only. The tools themselves are
//! [`driftreactor_mcp`].

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use driftreactor_config::Config;
use driftreactor_decide::Policy;
use driftreactor_mcp::{DriftTools, McpConfig, StaticBackend};
use driftreactor_notify::Redactor;
use driftreactor_pipeline::Pipeline;

/// Arguments of `driftreactor mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file: `[[workspaces]]`, `[[workspace_sets]]`, the policy,
    /// `[journal]`, `[mcp]`.
    #[arg(long, short = 'c', value_name = "TOML", env = "DRIFTREACTOR_CONFIG")]
    config: Option<PathBuf>,
    /// More Terraform states (files, directories, URLs), named as `replay --state`
    /// names them (`NAME=FILE|URL`). May be repeated.
    #[arg(long = "state", value_name = "[NAME=]FILE|DIR|URL")]
    states: Vec<PathBuf>,
}

/// Serves MCP over stdin / stdout until the client closes stdin (exit status 0).
///
/// # Errors
/// When the config, a state, the policy or the journal cannot be loaded (before
/// anything is read from stdin), or the MCP handshake fails.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let states = crate::replay::state_args(&args.states)?;
    let config = match &args.config {
        Some(path) => {
            let names: Vec<String> = states.iter().map(|s| s.name.clone()).collect();
            let config = Config::load_with_workspaces(path, &names)?;
            driftreactor_serve::check::check(
                &config,
                &crate::serve::registry(),
                driftreactor_serve::check::CheckMode::Settings,
            )?;
            config
        }
        None => Config::default(),
    };
    if config.workspaces.is_empty() && config.workspace_sets.is_empty() && states.is_empty() {
        bail!(
            "no state given: pass --config with [[workspaces]] or [[workspace_sets]], or --state <file-dir-or-url>"
        );
    }
    let mcp: McpConfig = config.section("mcp", config.mcp.as_ref())?;
    if mcp.write_tools {
        tracing::warn!(
            "[mcp] write_tools: no remediator runs in `driftreactor mcp`; reconcile and clear are served by serve's /mcp only."
        );
    }
    let estate = crate::replay::load_states(&config, states)?;
    let redactor = Redactor::new(estate.secrets);
    let policy = Policy::compile(&config.policy_config()).with_context(|| {
        format!(
            "invalid policy in {}",
            config.path.as_deref().map_or_else(
                || "the command line".to_owned(),
                |p| p.display().to_string()
            )
        )
    })?;
    let pipeline = Pipeline::new(Arc::new(estate.graph), policy);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let journal = open_journal(&config).await?;
        let backend = StaticBackend::new(pipeline, redactor, journal.clone());
        let tools = DriftTools::new(Arc::new(backend), &mcp);
        let served = driftreactor_mcp::serve_stdio(tools).await;
        if let Some(j) = journal {
            j.close().await;
        }
        served?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The journal the journal tools read: the one `[journal]` names, or serve's default
/// SQLite file next to the config when that file exists; `None` when neither.
async fn open_journal(
    config: &Config,
) -> anyhow::Result<Option<driftreactor_journal::SharedJournal>> {
    let cfg = driftreactor_serve::journal_config(config)?;
    if config.journal.is_none() && (config.path.is_none() || !cfg.path.is_file()) {
        return Ok(None);
    }
    let journal = driftreactor_journal::connect(&cfg)
        .await
        .with_context(|| format!("cannot open the journal {}", location(&cfg)))?;
    Ok(Some(journal))
}

/// Where a journal is, without a password.
fn location(cfg: &driftreactor_journal::JournalConfig) -> String {
    match &cfg.url {
        Some(url) => driftreactor_journal::redact_url(url),
        None => cfg.path.display().to_string(),
    }
}
