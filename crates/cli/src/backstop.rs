//! `driftreactor backstop`: one pass of the periodic backstop from the command line
//! (README, "The backstop"): a whole-root plan of each workspace (or `--workspace W`),
//! each drifted address as a report line (the replay report's shape, `input`
//! `backstop:<workspace>`), then the coverage summary: which drift no event announced
//! (read from the `[journal]` when it is configured), which announced drift the plan
//! no longer shows.
//!
//! Report only: the journal is read, never written (a running `serve` owns it), and
//! nothing is remediated unless `--remediate` (then the remediator handles each
//! drift per policy, as `replay --remediate` does).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use driftreactor_config::Config;
use driftreactor_decide::Policy;
use driftreactor_notify::Redactor;
use driftreactor_pipeline::{Evaluated, Pipeline, ReportLine, Summary};
use driftreactor_remediate::backstop::{self as bs, Announced, Coverage};
use serde::Serialize;

use crate::replay::Format;

/// Arguments of `driftreactor backstop`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file (workspaces with a `dir` or `git` root, principals, policy,
    /// `[journal]` for the coverage).
    #[arg(long, value_name = "TOML")]
    pub config: PathBuf,
    /// Only this workspace (default: every `[[workspaces]]` entry with a `dir` or
    /// `git` root).
    #[arg(long, value_name = "NAME")]
    pub workspace: Option<String>,
    /// Report format: a table, or JSON Lines (one report line per drifted address,
    /// then one `{"workspace", "coverage"}` object per workspace).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// After the report, let the remediator handle each drift per policy (revert,
    /// pull request, notify), exactly as `serve` would. Transitions go to stderr.
    #[arg(long)]
    pub remediate: bool,
}

/// The coverage summary of one workspace (the JSON format's last object per
/// workspace).
#[derive(Debug, Serialize)]
struct CoverageLine<'a> {
    workspace: &'a str,
    coverage: &'a CoverageSummary,
}

#[derive(Debug, Serialize)]
struct CoverageSummary {
    /// Drifted addresses the plan found.
    drifted: Vec<String>,
    /// Of them, the ones no event announced (`null`: no journal to tell).
    unannounced: Option<Vec<String>>,
    /// Addresses an event announced whose drift the plan no longer shows.
    announced_not_drifted: Option<Vec<String>>,
    /// Drift the code accepts (`no-op` in the plan): not events.
    accepted: Vec<String>,
}

fn summarize(plan: &bs::BackstopPlan, coverage: Option<&Coverage>) -> CoverageSummary {
    CoverageSummary {
        drifted: plan
            .drift
            .drifted
            .iter()
            .map(|d| d.address.clone())
            .collect(),
        unannounced: coverage.map(|c| c.unannounced().map(|d| d.address.clone()).collect()),
        announced_not_drifted: coverage.map(|c| c.announced_not_drifted.clone()),
        accepted: plan.drift.accepted.clone(),
    }
}

/// Runs one pass; exit status 0 when every workspace was planned, 1 when one could
/// not be (named on stderr), 3 when `--remediate` escalated something.
///
/// # Errors
/// When the config, a state, the policy or the remediator's settings cannot be
/// loaded, or `--workspace` names no workspace with a root.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    driftreactor_serve::check::check(
        &config,
        &crate::serve::registry(),
        driftreactor_serve::check::CheckMode::Settings,
    )?;
    let names: Vec<String> = config
        .workspaces
        .iter()
        .filter(|w| w.dir.is_some() || w.git.is_some())
        .filter(|w| args.workspace.as_ref().is_none_or(|n| &w.name == n))
        .map(|w| w.name.clone())
        .collect();
    if names.is_empty() {
        match &args.workspace {
            Some(n) => bail!(
                "--workspace {n}: {} has no [[workspaces]] entry named {n} with a `dir` or `git` root to plan in",
                args.config.display()
            ),
            None => bail!(
                "{}: no [[workspaces]] entry has a `dir` or `git` root to plan in",
                args.config.display()
            ),
        }
    }
    let estate = crate::replay::load_states(&config, Vec::new())?;
    let redactor = Redactor::new(estate.secrets.clone());
    let policy = Policy::compile(&config.policy_config())
        .with_context(|| format!("invalid policy in {}", args.config.display()))?;
    let pipeline = Pipeline::new(Arc::new(estate.graph), policy);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let remediator = runtime.block_on(async {
        anyhow::Ok(driftreactor_remediate::Remediator::from_config(
            &config,
            estate.secrets.clone(),
            true,
        )?)
    })?;
    let journal = runtime.block_on(open_journal(&config))?;

    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if args.format == Format::Table {
        writeln!(
            out,
            "{:<44} {:<10} {:<13} {:<32} RESOURCES / REASON",
            "INPUT", "VERDICT", "ACTION", "OPERATION"
        )?;
    }
    let mut summary = Summary::default();
    let mut evaluated: Vec<Evaluated> = Vec::new();
    let mut failed = 0usize;
    let mut summaries = Vec::new();
    for ws in &names {
        let (plan, hold) = match runtime.block_on(remediator.backstop_plan(ws)) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("driftreactor: backstop: {}", redactor.text(&e.to_string()));
                failed += 1;
                continue;
            }
        };
        // Report only (or `--remediate` after the report): nothing to hold off.
        drop(hold);
        let coverage = match &journal {
            Some(j) => Some(runtime.block_on(async {
                let previous = j.get_backstop(ws.clone()).await?;
                bs::journal_coverage(&**j, &plan, previous.as_ref()).await
            })?),
            None => None,
        };
        let input = format!("backstop:{ws}");
        for d in &plan.drift.drifted {
            let Some(event) = bs::drift_event(ws, plan.started, d) else {
                eprintln!(
                    "driftreactor: backstop: {ws}: {} drifted ({}: no supported cloud)",
                    d.address, d.resource_type
                );
                continue;
            };
            let ev = pipeline.evaluate_address(event, ws, &d.address);
            let line = ReportLine::from_evaluated(input.clone(), &ev);
            summary.add(&line);
            // As replay prints its lines: the states' secrets and secret-looking
            // values redacted, the plan's attribute changes included.
            let line = crate::replay::redact_line(&redactor, line);
            match args.format {
                Format::Json => {
                    serde_json::to_writer(&mut out, &line)?;
                    out.write_all(b"\n")?;
                }
                Format::Table => crate::replay::write_row(&mut out, &line)?,
            }
            evaluated.push(ev);
        }
        summaries.push((ws.clone(), summarize(&plan, coverage.as_ref()), coverage));
    }
    for (ws, s, coverage) in &summaries {
        match args.format {
            Format::Json => {
                serde_json::to_writer(
                    &mut out,
                    &CoverageLine {
                        workspace: ws,
                        coverage: s,
                    },
                )?;
                out.write_all(b"\n")?;
            }
            Format::Table => write_coverage(&mut out, ws, s, coverage.as_ref())?,
        }
    }
    out.flush()?;
    drop(out);
    if let Some(j) = journal {
        runtime.block_on(j.close());
    }
    let mut escalated = 0;
    if args.remediate {
        let drained =
            runtime.block_on(driftreactor_remediate::drain(remediator, &evaluated, |t| {
                eprintln!("remediation: {}", crate::replay::describe(t))
            }))?;
        eprintln!("remediation: done, {} transitions", drained.transitions);
        escalated = drained.escalated;
    } else {
        runtime.block_on(remediator.shutdown());
    }
    if failed > 0 {
        eprintln!("driftreactor: the backstop could not plan {failed} workspace(s)");
        return Ok(ExitCode::from(1));
    }
    if escalated > 0 {
        eprintln!("driftreactor: remediation escalated {escalated} item(s): a human must look");
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

/// The `[journal]` the coverage is read from: `None` without a `[journal]` section,
/// or when its SQLite file does not exist yet (nothing was ever journaled).
async fn open_journal(
    config: &Config,
) -> anyhow::Result<Option<driftreactor_journal::SharedJournal>> {
    if config.journal.is_none() {
        return Ok(None);
    }
    let cfg = driftreactor_serve::journal_config(config)?;
    if cfg.url.is_none() && !cfg.path.exists() {
        return Ok(None);
    }
    Ok(Some(driftreactor_journal::connect(&cfg).await?))
}

fn write_coverage(
    out: &mut impl Write,
    ws: &str,
    s: &CoverageSummary,
    coverage: Option<&Coverage>,
) -> io::Result<()> {
    writeln!(
        out,
        "\nbackstop {ws}: {} drifted, {} accepted by the code",
        s.drifted.len(),
        s.accepted.len()
    )?;
    let Some(c) = coverage else {
        return writeln!(
            out,
            "  coverage: no [journal] to compare with (which drift no event announced is unknown)"
        );
    };
    for (d, how) in &c.drifted {
        let said = match how {
            Announced::Event => "announced by an event",
            Announced::New => "UNANNOUNCED: no event announced it",
            Announced::Again => "UNANNOUNCED: no event announced it (found by an earlier backstop)",
        };
        writeln!(out, "  {:<60} {said}", d.address)?;
    }
    for a in &c.announced_not_drifted {
        writeln!(
            out,
            "  {a:<60} announced by an event, no longer drifted (reverted, or a no-op)"
        )?;
    }
    Ok(())
}
