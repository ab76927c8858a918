//! `driftreactor validate`: checks a config file the way every command reads it, loads
//! every state (through its source: a file, an object store, HCP Terraform, a
//! `state_command`; each `[[workspace_sets]]` listed once), and prints what it found (Vector's `vector validate`, Terraform's
//! `terraform validate`). Exit 0 when valid, 2 when not (the error names the file,
//! the field and the reason).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use driftreactor_config::Config;
use driftreactor_pipeline::estate;
use driftreactor_serve::check::{self, CheckMode};
use driftreactor_serve::states;

/// Arguments of `driftreactor validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file to check.
    #[arg(long, short = 'c', env = "DRIFTREACTOR_CONFIG")]
    pub config: PathBuf,
    /// Also build every pull source (credentials, clients and the first call its bus
    /// needs, e.g. the SQS queue URL) and open the journal, as `serve` would at start.
    #[arg(long)]
    pub connect: bool,
}

/// Checks the config, loads the states and prints a summary on stdout.
///
/// # Errors
/// The first problem found (the binary prints it and exits 2).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let registry = crate::serve::registry();
    let checked = check::check(&config, &registry, CheckMode::Build)?;
    // Every workspace's state through its source (files, object stores, HCP
    // Terraform, commands; the workspace sets listed once): an error names the file,
    // the field, the workspace, the location and the store's answer.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (workspaces, fetched) = runtime
        .block_on(states::read_all(&config))
        .map_err(|e| e.to_config_error(&config))?;
    drop(runtime);
    // The `[[policy]] workspace` globs against every name, the sets' listed ones
    // included (loading checks them only when there is no set).
    let names: Vec<&str> = workspaces.iter().map(|w| w.name()).collect();
    config.check_policy_workspaces(&names)?;
    let inputs: Vec<_> = fetched.into_iter().map(|f| f.state).collect();
    let estate = estate::load_bytes(
        &inputs,
        driftreactor_serve::ServerConfig::load_options(&config, false)?,
    )
    .map_err(|e| match check::estate_error(&config, &e) {
        Some(named) => anyhow::Error::new(named),
        None => anyhow::Error::new(e),
    })?;
    if args.connect {
        connect(&config, &registry)?;
    }

    let mut out = std::io::stdout().lock();
    writeln!(out, "{}: valid", args.config.display())?;
    writeln!(out, "workspaces: {}", estate.states.len())?;
    for (meta, ws) in estate.states.iter().zip(&workspaces) {
        let dir = ws.config.dir.as_ref().map_or_else(
            || "no dir: detect only".to_owned(),
            |d| format!("dir {}", d.display()),
        );
        let set = ws
            .set
            .as_ref()
            .map_or_else(String::new, |s| format!(", from workspace set {s}"));
        writeln!(
            out,
            "  {}: {} instance{}, serial {}, {} ({}{})",
            meta.workspace,
            meta.instances,
            if meta.instances == 1 { "" } else { "s" },
            meta.serial,
            ws.location(),
            dir,
            set
        )?;
    }
    if !config.workspace_sets.is_empty() {
        writeln!(out, "workspace sets: {}", config.workspace_sets.len())?;
        for set in &config.workspace_sets {
            let found = workspaces
                .iter()
                .filter(|w| w.set.as_deref() == Some(set.name.as_str()))
                .count();
            writeln!(
                out,
                "  {}: {} workspaces, every {} s",
                set.name, found, set.list_interval_secs
            )?;
        }
    }
    writeln!(out, "sources: {}", checked.sources.len())?;
    for s in &checked.sources {
        let how = if s.push { "push" } else { "pull" };
        writeln!(out, "  {} ({}, {how})", s.name, s.kind)?;
    }
    writeln!(out, "policy rules: {}", config.policy.len())?;
    match checked.journal.url.as_deref() {
        Some(url) => writeln!(out, "journal: {}", driftreactor_journal::redact_url(url))?,
        None => writeln!(out, "journal: {}", checked.journal.path.display())?,
    }
    writeln!(
        out,
        "remediation: {}",
        if checked.remediation {
            "on"
        } else {
            "off (detect only)"
        }
    )?;
    if args.connect {
        writeln!(
            out,
            "connect: every pull source was built and the journal opened"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds each pull source and opens the journal (then closes both).
fn connect(config: &Config, registry: &driftreactor_serve::SourceRegistry) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        for (i, spec) in driftreactor_serve::config::parse_sources(&config.sources)?
            .into_iter()
            .enumerate()
        {
            if let driftreactor_serve::SourceSpec::Pull { kind, name, table } = spec {
                let build = registry
                    .builder(&kind)
                    .ok_or_else(|| anyhow::anyhow!("sources[{i}].type: unknown `{kind}`"))?;
                build(table)
                    .await
                    .map_err(|e| anyhow::anyhow!("sources[{i}] ({name}): {e}"))?;
            }
        }
        let journal =
            driftreactor_journal::connect(&driftreactor_serve::journal_config(config)?).await?;
        journal.close().await;
        anyhow::Ok(())
    })
}
