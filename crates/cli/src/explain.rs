//! `driftreactor explain`: the report line of each event of the given files and why
//! (README, "Explain an event"): the identifiers the normalizer extracted, the state
//! index entries they matched and what the guards refused, the router's fallback
//! scan, the decider's deciding step and, per matched resource, the `[[policy]]` rule
//! that gave its action. The explanation is `driftreactor_pipeline::explain`; this
//! module loads the states and policy as `replay` does and prints it, redacted.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use driftreactor_decide::Policy;
use driftreactor_notify::Redactor;
use driftreactor_pipeline::explain::{Explanation, explain_input};
use driftreactor_pipeline::{Pipeline, Replay, inputs};

/// Output format of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Readable text, one block per event.
    Text,
    /// One JSON object per event, one per line (JSON Lines).
    Json,
}

/// Arguments of `driftreactor explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Event files: a CloudTrail record or log file, an Event Grid / CloudEvents
    /// event or batch, a GCP audit log entry, asset feed message or Pub/Sub push
    /// envelope, JSON Lines of any of these (as `replay` reads them).
    #[arg(value_name = "EVENT_FILE", required = true)]
    inputs: Vec<PathBuf>,
    /// Terraform state files, directories of them, or state URLs, named as `replay
    /// --state` names them. May be repeated.
    #[arg(long = "state", value_name = "[NAME=]FILE|DIR|URL")]
    states: Vec<PathBuf>,
    /// The config file whose `[[workspaces]]`, `[[workspace_sets]]`, `[principals]`
    /// and `[[policy]]` are read.
    #[arg(long, value_name = "TOML")]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// Explains every event of the inputs; exit status 0 when every input parsed, 1 when
/// some were rejected (as `replay`).
///
/// # Errors
/// When the config or a state cannot be loaded, the policy does not compile, or stdout
/// cannot be written (exit status 2).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (config, estate) = crate::graph::load_estate(args.config.as_deref(), &args.states)?;
    let policy = Policy::compile(&config.policy_config()).with_context(|| {
        format!(
            "invalid policy in {}",
            args.config
                .as_deref()
                .map_or("the default config".into(), |p| p.display().to_string())
        )
    })?;
    let redactor = Redactor::new(estate.secrets);
    let mut replay = Replay::new(Pipeline::new(Arc::new(estate.graph), policy));
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut rejected = 0usize;
    let mut failed: Option<anyhow::Error> = None;
    for input in &args.inputs {
        // Files and folders as `replay` reads them.
        inputs::each_event_file(
            input,
            inputs::DEFAULT_MAX_EVENT_FILE_BYTES,
            |name, bytes| {
                if failed.is_some() {
                    return;
                }
                let bytes = match bytes {
                    Ok(bytes) => bytes,
                    Err(reason) => {
                        rejected += 1;
                        eprintln!("driftreactor: {name}: {}", redactor.text(&reason));
                        return;
                    }
                };
                for e in explain_input(&mut replay, &name, &bytes) {
                    rejected += usize::from(e.rejected.is_some());
                    if let Err(err) = print(&mut out, &redactor, &e, args.format) {
                        failed = Some(err);
                        return;
                    }
                }
            },
        );
        if let Some(err) = failed.take() {
            return Err(err.context("cannot write to stdout"));
        }
    }
    out.flush()?;
    Ok(if rejected > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints one explanation, every string passed through the states' redactor.
fn print(
    out: &mut impl Write,
    redactor: &Redactor,
    e: &Explanation,
    format: Format,
) -> anyhow::Result<()> {
    match format {
        Format::Json => {
            let value = redactor.json(&serde_json::to_value(e)?);
            serde_json::to_writer(&mut *out, &value)?;
            out.write_all(b"\n")?;
        }
        Format::Text => {
            out.write_all(redactor.text(&e.to_text()).as_bytes())?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}
