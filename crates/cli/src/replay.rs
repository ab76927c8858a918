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
use driftreactor_config::{Config, WorkspaceConfig};
use driftreactor_decide::Policy;
use driftreactor_notify::Redactor;
use driftreactor_pipeline::estate;
use driftreactor_pipeline::{Pipeline, Replay, ReportLine, Summary, inputs};
use driftreactor_serve::states;
use driftreactor_state::StateLocation;

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
    /// Terraform state files, directories holding `*.tfstate` / `*.tfstate.json`
    /// files, or state URLs (`s3://BUCKET/KEY`, `gs://BUCKET/OBJECT`,
    /// `az://CONTAINER/BLOB`, `https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB`,
    /// `tfe://[HOST/]ORG/WORKSPACE`, read with the cloud's standard credentials and
    /// endpoint variables). May be repeated. Each becomes a workspace named after its
    /// file or the URL's last part without the extensions (`prod.tfstate` → `prod`);
    /// Terraform's default `terraform.tfstate` is named after its folder or key prefix
    /// part (`s3://b/env/prod/terraform.tfstate` → `prod`); a `tfe://` URL: its
    /// workspace. States of a directory that would get the same name are named by
    /// their path relative to it (`x/prod`, `y/prod`). `NAME=FILE|URL` names the
    /// workspace: when the argument is not an existing path and the part before its
    /// first `=` is `[A-Za-z0-9_.-]+`. Two states with the same name are an error.
    #[arg(long = "state", value_name = "[NAME=]FILE|DIR|URL")]
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
    /// The largest event file read, in bytes (default 268435456, 256 MiB; overrides
    /// `[replay] max_event_file_bytes`). A larger file is one `rejected` line.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_event_file_bytes: Option<u64>,
    /// How many distinct event ids the replay remembers to report a redelivered event
    /// as `duplicate` (default 100000; overrides `[replay] dedupe_window`): an event
    /// whose id comes back after that many or more other distinct ids is reported
    /// again. `0` remembers the whole replay (memory then grows with it, about 36 bytes
    /// an event).
    #[arg(long, value_name = "EVENTS")]
    pub dedupe_window: Option<usize>,
    /// Print the coverage line (share of mutating events with an extracted id and
    /// share attributed to a managed resource) to stderr; the table format prints it
    /// after the counts anyway.
    #[arg(long)]
    pub stats: bool,
    /// Recorded event files (one event, a JSON array, JSON Lines, a CloudTrail log
    /// file or a Pub/Sub push envelope; gzip-compressed or not), or directories of
    /// `*.json` / `*.jsonl` / `*.ndjson` files (and `*.json.gz`, …).
    #[arg(value_name = "EVENTS", required = true)]
    pub inputs: Vec<PathBuf>,
}

/// `[replay]`: how `replay` reads its inputs.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaySection {
    /// The largest event file read, in bytes (at least 1).
    #[serde(default)]
    max_event_file_bytes: Option<u64>,
    /// How many distinct event ids the replay remembers (0: all of them).
    #[serde(default)]
    dedupe_window: Option<usize>,
}

/// Runs the replay; exit status 0 when every input parsed, 1 when some were rejected.
///
/// # Errors
/// When the config or a state cannot be loaded, or an input path cannot be read.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The `--state` files and URLs become workspaces named after them; the config's
    // policy is checked against those and its own `[[workspaces]]` together.
    let states = state_args(&args.states)?;
    let config = match &args.config {
        Some(path) => {
            let names: Vec<String> = states.iter().map(|s| s.name.clone()).collect();
            let config = Config::load_with_workspaces(path, &names)?;
            if let Some(ws) = config.workspaces.iter().find(|w| names.contains(&w.name)) {
                bail!(
                    "--state: workspace {} is defined twice (by [[workspaces]] in {} and by --state); name the --state one with --state NAME=FILE|URL",
                    ws.name,
                    path.display()
                );
            }
            // All of it, as serve and validate check it (sources are read, not built).
            driftreactor_serve::check::check(
                &config,
                &crate::serve::registry(),
                driftreactor_serve::check::CheckMode::Settings,
            )?;
            config
        }
        None => Config::default(),
    };
    let section: ReplaySection = config.section("replay", config.replay.as_ref())?;
    if section.max_event_file_bytes == Some(0) {
        bail!(
            "invalid config file {}: replay.max_event_file_bytes: must be at least 1",
            display_config(&config)
        );
    }
    let cap = args
        .max_event_file_bytes
        .or(section.max_event_file_bytes)
        .unwrap_or(inputs::DEFAULT_MAX_EVENT_FILE_BYTES);
    if config.workspaces.is_empty() && config.workspace_sets.is_empty() && states.is_empty() {
        bail!(
            "no state given: pass --state <file-dir-or-url> or a --config with [[workspaces]] or [[workspace_sets]]"
        );
    }
    // The config's workspaces and workspace sets, then the `--state` files and URLs:
    // each state read once through its source, with its secrets (an event may itself
    // carry one, and every report line passes the state redactor before it is
    // printed).
    let estate = load_states(&config, states)?;
    let redactor = Redactor::new(estate.secrets.clone());
    let policy = Policy::compile(&config.policy_config())
        .with_context(|| format!("invalid policy in {}", display_config(&config)))?;
    let mut replay = Replay::new(Pipeline::new(Arc::new(estate.graph), policy))
        .keep_evaluated(args.remediate)
        .max_event_file_bytes(cap)
        .dedupe_window(
            args.dedupe_window
                .or(section.dedupe_window)
                .unwrap_or(driftreactor_pipeline::DEFAULT_DEDUPE_WINDOW),
        );
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
    // Progress on stderr for a person watching a long replay (never in the report).
    let progress = Progress::start();
    let mut failed: Option<anyhow::Error> = None;
    for input in &args.inputs {
        // An unreadable input is a rejected line like any bad input: the run goes on.
        // Each file's lines are printed as soon as they are made (a large file's a
        // part at a time, as it is streamed).
        // A large file's lines come a part at a time, as it is streamed.
        replay.for_each_part(input, |lines, last| {
            progress.part_done(lines.len(), last);
            if failed.is_some() {
                return;
            }
            for line in lines {
                summary.add(&line);
                let line = redact_line(&redactor, line);
                let written = match args.format {
                    Format::Json => serde_json::to_writer(&mut out, &line)
                        .map_err(anyhow::Error::from)
                        .and_then(|()| out.write_all(b"\n").map_err(anyhow::Error::from)),
                    Format::Table => write_row(&mut out, &line).map_err(anyhow::Error::from),
                };
                if let Err(e) = written {
                    failed = Some(e);
                    return;
                }
            }
        });
        if let Some(e) = failed.take() {
            progress.finish();
            return Err(e.context("cannot write the report to stdout"));
        }
    }
    progress.finish();
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

/// The `--state` arguments as workspaces: a URL (see [`driftreactor_config::is_url`])
/// is one workspace named [`StateLocation::default_workspace`]; a file or folder as
/// [`inputs::state_workspaces`]; `NAME=FILE|URL` (an argument that is not an existing
/// path, with `NAME` of `[A-Za-z0-9_.-]+` before its first `=`) one workspace named
/// `NAME`. Two arguments giving the same name are an error naming both.
pub(crate) fn state_args(paths: &[PathBuf]) -> anyhow::Result<Vec<WorkspaceConfig>> {
    let mut out: Vec<WorkspaceConfig> = Vec::new();
    // The argument each workspace of `out` comes from.
    let mut origins: Vec<String> = Vec::new();
    for p in paths {
        let arg = p.to_string_lossy().into_owned();
        let found = match named_state(p) {
            Some((name, value)) => {
                if !driftreactor_config::is_url(&value) {
                    if value.is_dir() {
                        bail!(
                            "--state {arg}: a name is given to one state file or URL, not to a directory"
                        );
                    }
                    if !value.exists() {
                        bail!(
                            "--state {arg}: state file {} does not exist",
                            value.display()
                        );
                    }
                } else {
                    StateLocation::parse(&value.to_string_lossy())
                        .map_err(|e| anyhow::anyhow!("--state {e}"))?;
                }
                vec![workspace(name, value)]
            }
            None if driftreactor_config::is_url(p) => {
                let location =
                    StateLocation::parse(&arg).map_err(|e| anyhow::anyhow!("--state {e}"))?;
                vec![workspace(location.default_workspace(), p.clone())]
            }
            None => inputs::state_workspaces(std::slice::from_ref(p))?
                .into_iter()
                .map(|f| workspace(f.workspace, f.path))
                .collect(),
        };
        for ws in found {
            if let Some(i) = out.iter().position(|w| w.name == ws.name) {
                bail!(
                    "--state: workspace {} is defined twice (by --state {} and by --state {arg}); name them with --state NAME=FILE|URL",
                    ws.name,
                    origins[i]
                );
            }
            origins.push(arg.clone());
            out.push(ws);
        }
    }
    Ok(out)
}

/// `Some((NAME, VALUE))` for a `--state NAME=VALUE` argument: one that is not an
/// existing path and has a `NAME` of `[A-Za-z0-9_.-]+` before its first `=`.
fn named_state(arg: &std::path::Path) -> Option<(String, PathBuf)> {
    if arg.exists() {
        return None;
    }
    let text = arg.to_str()?;
    let (name, value) = text.split_once('=')?;
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    (valid && !value.is_empty()).then(|| (name.to_owned(), PathBuf::from(value)))
}

/// A workspace of `--state`: its name and its state (path or URL), detect-only.
fn workspace(name: String, state: PathBuf) -> WorkspaceConfig {
    WorkspaceConfig {
        name,
        state,
        state_command: None,
        tfe_token_env: None,
        dir: None,
        tool: None,
        tool_path: None,
        env: std::collections::BTreeMap::new(),
        git: None,
        backstop_interval: None,
    }
}

/// Reads every state of `config` (its `[[workspaces]]`, its `[[workspace_sets]]`
/// listed once) and of `extra` (the `--state` arguments) through its source, and
/// builds them with their sensitive values. A failure names the workspace, the
/// location and the store's answer (and, for the config's own, the file and field).
pub(crate) fn load_states(
    config: &Config,
    extra: Vec<WorkspaceConfig>,
) -> anyhow::Result<driftreactor_pipeline::Estate> {
    let own = config.workspaces.len();
    let mut all = config.clone();
    all.workspaces.extend(extra);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let (_, fetched) = runtime
        .block_on(states::read_all(&all))
        .map_err(|e| state_error(config, own, &e))?;
    let states: Vec<_> = fetched.into_iter().map(|f| f.state).collect();
    let options = driftreactor_serve::ServerConfig::load_options(config, true)?;
    estate::load_bytes(&states, options).map_err(|e| match driftreactor_serve::check::estate_error(
        config, &e,
    ) {
        Some(named) => anyhow::Error::new(named),
        None => anyhow::Error::new(e),
    })
}

/// A state error: naming the config file and field for the config's own workspaces
/// and sets (the first `own` workspaces), else (a `--state` argument) the workspace,
/// location and answer alone.
fn state_error(config: &Config, own: usize, e: &states::Error) -> anyhow::Error {
    // A set found a name a `--state` argument (not a `[[workspaces]]`) gave.
    if let states::Error::Duplicate {
        workspace, second, ..
    } = e
        && !config.workspaces.iter().any(|w| &w.name == workspace)
    {
        return anyhow::anyhow!(
            "--state: workspace {workspace} is defined twice (by --state and by {second}); name the --state one with --state NAME=FILE|URL"
        );
    }
    let from_arg = e
        .field()
        .strip_prefix("workspaces[")
        .and_then(|r| r.split(']').next())
        .and_then(|i| i.parse::<usize>().ok())
        .is_some_and(|i| i >= own);
    if from_arg || config.path.is_none() {
        anyhow::anyhow!("--state: {e}")
    } else {
        anyhow::Error::new(e.to_config_error(config))
    }
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
pub(crate) fn describe(t: &driftreactor_notify::Transition) -> String {
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

/// Longest reason printed, in characters; longer ones are cut (a rejection reason may
/// quote the event).
const MAX_REASON_CHARS: usize = 300;

/// `line` with known secrets (the states' sensitive values) and secret-looking
/// `key=value` values redacted from every string taken from the event, and its
/// reason cut to [`MAX_REASON_CHARS`].
pub(crate) fn redact_line(redactor: &Redactor, mut line: ReportLine) -> ReportLine {
    let r = |s: &mut String| {
        if let std::borrow::Cow::Owned(v) = redactor.text(s) {
            *s = v;
        }
    };
    r(&mut line.input);
    for s in [
        &mut line.event_id,
        &mut line.service,
        &mut line.operation,
        &mut line.principal,
        &mut line.occurred_at,
    ]
    .into_iter()
    .flatten()
    {
        r(s);
    }
    line.resource_ids.iter_mut().for_each(r);
    if let Some(Some(changes)) = &mut line.changes {
        redactor.changes(changes);
    }
    if let Some(reason) = &mut line.reason {
        r(reason);
        if reason.chars().count() > MAX_REASON_CHARS {
            *reason = reason.chars().take(MAX_REASON_CHARS).collect::<String>() + "…";
        }
    }
    line
}

/// One report line as a table row.
pub(crate) fn write_row(out: &mut impl Write, line: &ReportLine) -> io::Result<()> {
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

/// The replay's progress on stderr (`indicatif`): files and events done and events per
/// second, redrawn at most a few times a second; drawn only when stderr is a terminal,
/// so logs, pipes and CI output never see it, and cleared at the end.
struct Progress {
    bar: indicatif::ProgressBar,
    files: std::cell::Cell<u64>,
    events: std::cell::Cell<u64>,
    started: std::time::Instant,
}

impl Progress {
    fn start() -> Self {
        use std::io::IsTerminal as _;
        let bar = if io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr_with_hz(4),
            );
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} replay: {msg} [{elapsed}]")
            {
                bar.set_style(style);
            }
            bar
        } else {
            indicatif::ProgressBar::hidden()
        };
        Self {
            bar,
            files: std::cell::Cell::new(0),
            events: std::cell::Cell::new(0),
            started: std::time::Instant::now(),
        }
    }

    /// `events` more done; one more file when `file_done`.
    fn part_done(&self, events: usize, file_done: bool) {
        if self.bar.is_hidden() {
            return;
        }
        let files = self.files.get() + u64::from(file_done);
        self.files.set(files);
        let total = self.events.get() + events as u64;
        self.events.set(total);
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        self.bar.set_message(format!(
            "{files} files, {total} events, {:.0} events/s",
            total as f64 / secs
        ));
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
