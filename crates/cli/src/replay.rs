//! `driftreactor replay`: recorded events → drift report (README, "The replay report").
//!
//! Arguments and printing; finding and reading the inputs, loading the states and
//! building the report lines is `driftreactor_pipeline` ([`inputs`], [`estate`],
//! [`Replay`]), running the remediator `driftreactor_remediate::drain`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use driftreactor_config::Config;
use driftreactor_decide::Policy;
use driftreactor_pipeline::estate::{self, LoadOptions, StateFile};
use driftreactor_pipeline::{Pipeline, Replay, ReportLine, Summary, inputs};

/// Output format of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable table and a summary.
    Table,
    /// One JSON object per event (JSON Lines), the contract tools and tests rely on.
    Json,
}

/// Arguments of `driftreactor replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Terraform state files, or directories holding `*.tfstate` / `*.tfstate.json`
    /// files; each becomes a workspace named after its file (without the extensions).
    #[arg(long = "state", value_name = "FILE|DIR")]
    pub states: Vec<PathBuf>,
    /// The config file (workspaces, principals, policy; see README).
    #[arg(long, value_name = "TOML")]
    pub config: Option<PathBuf>,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// After the report, run the remediator on the decisions (guarded targeted
    /// plan/apply in each workspace's `dir`, pull requests, Slack), exactly as `serve`
    /// would, with the settle window from `[remediation]` (default 0 in replay).
    /// Needs `--config`. Remediation transitions are printed to stderr.
    #[arg(long, requires = "config")]
    pub remediate: bool,
    /// Print the coverage line (share of mutating events with an extracted id and
    /// share attributed to a managed resource) to stderr; the table format prints it
    /// after the counts anyway.
    #[arg(long)]
    pub stats: bool,
    /// Recorded event files (one event, a JSON array, JSON Lines, a CloudTrail log
    /// file or a Pub/Sub push envelope), or directories of `*.json` / `*.jsonl` / `*.ndjson` files.
    #[arg(value_name = "EVENTS", required = true)]
    pub inputs: Vec<PathBuf>,
}

/// Runs the replay; exit status 0 when every input parsed, 1 when some were rejected.
///
/// # Errors
/// When the config or a state cannot be loaded, or an input path cannot be read.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The `--state` files become workspaces named after them; the config's policy is
    // checked against those and its own `[[workspaces]]` together.
    let states = inputs::state_workspaces(&args.states)?;
    let config = match &args.config {
        Some(path) => {
            let names: Vec<String> = states.iter().map(|s| s.workspace.clone()).collect();
            Config::load_with_workspaces(path, &names)?
        }
        None => Config::default(),
    };
    if config.workspaces.is_empty() && states.is_empty() {
        bail!("no state given: pass --state <file-or-dir> or a --config with [[workspaces]]");
    }
    // The config's workspaces, then the `--state` files; each state read once, with
    // its secrets when the remediator will need them for redaction.
    let files: Vec<StateFile> = config
        .workspaces
        .iter()
        .map(|w| StateFile::new(w.name.clone(), w.state.clone()))
        .chain(states)
        .collect();
    let estate = estate::load(
        &files,
        LoadOptions {
            secrets: args.remediate,
        },
    )?;
    let policy = Policy::compile(&config.policy_config())
        .with_context(|| format!("invalid policy in {}", display_config(&config)))?;
    let mut replay =
        Replay::new(Pipeline::new(Arc::new(estate.graph), policy)).keep_evaluated(args.remediate);
    // Set the remediator up before printing anything, so a config it refuses (a
    // missing token variable, say) fails the run before the report starts.
    let remediation = if args.remediate {
        Some(start_remediator(&config, estate.secrets)?)
    } else {
        None
    };

    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let mut summary = Summary::default();
    if args.format == Format::Table {
        writeln!(
            out,
            "{:<44} {:<10} {:<13} {:<32} RESOURCES / REASON",
            "INPUT", "VERDICT", "ACTION", "OPERATION"
        )?;
    }
    for input in &args.inputs {
        // An unreadable input is a rejected line like any bad input: the run goes on.
        for line in replay.process_path(input) {
            summary.add(&line);
            match args.format {
                Format::Json => {
                    serde_json::to_writer(&mut out, &line)?;
                    out.write_all(b"\n")?;
                }
                Format::Table => write_row(&mut out, &line)?,
            }
        }
    }
    if args.format == Format::Table {
        writeln!(
            out,
            "\n{} event{}: {} drift, {} unmanaged, {} ignored, {} rejected",
            summary.events,
            if summary.events == 1 { "" } else { "s" },
            summary.drift,
            summary.unmanaged,
            summary.ignored,
            summary.rejected
        )?;
        writeln!(out, "{}", summary.coverage())?;
    }
    out.flush()?;
    if args.stats {
        eprintln!("{}", summary.coverage());
    }
    drop(out);
    let mut escalated = 0;
    if let Some(remediation) = remediation {
        escalated = remediate(remediation, replay.take_evaluated())?;
    }
    if summary.rejected > 0 {
        eprintln!(
            "driftreactor: some input was rejected ({} of {} events)",
            summary.rejected, summary.events
        );
        return Ok(ExitCode::from(1));
    }
    if escalated > 0 {
        eprintln!("driftreactor: remediation escalated {escalated} item(s): a human must look");
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

/// The remediator and the runtime it runs on.
type Remediation = (tokio::runtime::Runtime, driftreactor_remediate::Remediator);

/// Builds the remediator from the config, redacting `secrets` (the states').
fn start_remediator(config: &Config, secrets: Vec<String>) -> anyhow::Result<Remediation> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let remediator = runtime.block_on(async {
        anyhow::Ok(driftreactor_remediate::Remediator::from_config(
            config, secrets, true,
        )?)
    })?;
    Ok((runtime, remediator))
}

/// Runs the remediator over the evaluated events until every item is reverted,
/// resolved, turned into a pull request, notified or escalated, printing each
/// transition to stderr. Returns the number of escalations.
fn remediate(
    (runtime, remediator): Remediation,
    evaluated: Vec<driftreactor_pipeline::Evaluated>,
) -> anyhow::Result<usize> {
    let drained = runtime.block_on(driftreactor_remediate::drain(remediator, &evaluated, |t| {
        eprintln!("remediation: {}", describe(t))
    }))?;
    eprintln!("remediation: done, {} transitions", drained.transitions);
    Ok(drained.escalated)
}

/// One transition in plain words.
fn describe(t: &driftreactor_notify::Transition) -> String {
    use driftreactor_notify::TransitionKind as K;
    let what = match &t.kind {
        K::NewDrift { action, .. } => format!("new drift ({action})"),
        K::Reverted => "reverted".to_owned(),
        K::PullRequestOpened { url } => format!("pull request opened: {url}"),
        K::Resolved => "resolved".to_owned(),
        K::Escalated { reason } => format!("escalated: {reason}"),
        _ => format!("{:?}", t.kind),
    };
    format!("{} {} {}", t.workspace, t.addresses.join(", "), what)
}

fn display_config(config: &Config) -> String {
    config.path.as_ref().map_or_else(
        || "the command line".to_owned(),
        |p| p.display().to_string(),
    )
}

fn write_row(out: &mut impl Write, line: &ReportLine) -> io::Result<()> {
    let targets = if line.resources.is_empty() {
        line.resource_ids.join(", ")
    } else {
        line.resources
            .iter()
            .map(|r| format!("{}:{} ({})", r.workspace, r.address, r.kind))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let detail = match (&line.reason, targets.is_empty()) {
        (Some(reason), true) => reason.clone(),
        (Some(reason), false) => format!("{reason}: {targets}"),
        (None, _) => targets,
    };
    let input = shorten(&line.input, 44);
    writeln!(
        out,
        "{:<44} {:<10} {:<13} {:<32} {}",
        input,
        line.verdict.as_str(),
        line.action.as_str(),
        shorten(line.operation.as_deref().unwrap_or("-"), 32),
        detail
    )
}

/// Keeps the end of long strings (file names differ at the end).
fn shorten(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_owned();
    }
    let tail: String = s.chars().skip(n - (width - 1)).collect();
    format!("…{tail}")
}
