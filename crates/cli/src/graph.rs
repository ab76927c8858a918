//! `driftreactor graph`: queries over the state graph with no server (README, "Query
//! the graph"): the transitive dependents / dependencies of an address, with the path
//! to each, and the addresses a cloud identifier maps to.
//!
//! Arguments and printing; the states are loaded as `replay` loads them
//! ([`crate::replay::load_states`]), the queries are `driftreactor_router::query` and
//! `driftreactor_pipeline::find_cloud_id`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use driftreactor_config::Config;
use driftreactor_notify::Redactor;
use driftreactor_pipeline::Estate;
use driftreactor_router::query::{self, Found, PathEntry};
use driftreactor_tfgraph::Graph;

/// Output format of `graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable table.
    Table,
    /// One JSON document.
    Json,
}

/// Arguments of `driftreactor graph`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    query: Query,
}

/// Where the states come from and how to print; shared by every query.
#[derive(Debug, clap::Args)]
struct Common {
    /// Terraform state files, directories of them, or state URLs, named as `replay
    /// --state` names them (`prod.tfstate` → workspace `prod`; `NAME=FILE|URL`).
    /// May be repeated.
    #[arg(long = "state", value_name = "[NAME=]FILE|DIR|URL")]
    states: Vec<PathBuf>,
    /// The config file whose `[[workspaces]]` and `[[workspace_sets]]` are read.
    #[arg(long, value_name = "TOML")]
    config: Option<PathBuf>,
    /// Output format: a table, or one JSON document.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, clap::Subcommand)]
enum Query {
    /// The resources that depend on ADDRESS, directly or transitively, nearest first,
    /// each with the path from ADDRESS.
    Dependents(Walk),
    /// The resources ADDRESS depends on, directly or transitively, nearest first,
    /// each with the path from ADDRESS.
    Dependencies(Walk),
    /// The managed resources, across workspaces, that a cloud identifier (an ARN, an
    /// EC2 id, an Azure resource ID, a GCP self link or full resource name) maps to.
    Find(FindArgs),
}

#[derive(Debug, clap::Args)]
struct Walk {
    #[command(flatten)]
    common: Common,
    /// The workspace of ADDRESS; may be left out when one workspace is loaded.
    #[arg(long, value_name = "NAME")]
    workspace: Option<String>,
    /// How many edges to follow (1: direct only); unlimited when not given (an
    /// answer holds at most 1000 resources).
    #[arg(long, value_name = "N")]
    depth: Option<usize>,
    /// The resource address in Terraform syntax, e.g. `aws_security_group.web` or
    /// `aws_instance.app["blue"]`.
    #[arg(value_name = "ADDRESS")]
    address: String,
}

#[derive(Debug, clap::Args)]
struct FindArgs {
    #[command(flatten)]
    common: Common,
    /// Only the matches of this workspace.
    #[arg(long, value_name = "NAME")]
    workspace: Option<String>,
    /// The cloud identifier.
    #[arg(value_name = "CLOUD_ID")]
    cloud_id: String,
}

/// Runs the query; exit status 0 with an answer (a walk with no resource is an
/// answer), 1 when `find` matched nothing.
///
/// # Errors
/// When the config or a state cannot be loaded, the workspace or address is unknown,
/// or stdout cannot be written (all exit status 2).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.query {
        Query::Dependents(w) => walk(w, Direction::Dependents),
        Query::Dependencies(w) => walk(w, Direction::Dependencies),
        Query::Find(f) => find(f),
    }
}

#[derive(Debug, Clone, Copy)]
enum Direction {
    Dependents,
    Dependencies,
}

impl Direction {
    fn as_str(self) -> &'static str {
        match self {
            Self::Dependents => "dependents",
            Self::Dependencies => "dependencies",
        }
    }
}

/// The graph of the states of `common` and the redactor of their secrets.
fn load(common: &Common) -> anyhow::Result<(Graph, Redactor)> {
    let (_, estate) = load_estate(common.config.as_deref(), &common.states)?;
    Ok((estate.graph, Redactor::new(estate.secrets)))
}

/// The config at `config` (or the default one) and the estate of its workspaces and
/// workspace sets plus the `--state` arguments `states`, each read once, as `replay`
/// reads them (`graph`, `explain`).
///
/// # Errors
/// When the config or a state cannot be loaded, a `--state` workspace is also defined
/// by the config, or nothing names a state.
pub(crate) fn load_estate(
    config: Option<&std::path::Path>,
    states: &[PathBuf],
) -> anyhow::Result<(Config, Estate)> {
    let states = crate::replay::state_args(states)?;
    let config = match config {
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
            config
        }
        None => Config::default(),
    };
    if config.workspaces.is_empty() && config.workspace_sets.is_empty() && states.is_empty() {
        bail!(
            "no state given: pass --state <file-dir-or-url> or a --config with [[workspaces]] or [[workspace_sets]]"
        );
    }
    let estate = crate::replay::load_states(&config, states)?;
    Ok((config, estate))
}

fn walk(args: Walk, direction: Direction) -> anyhow::Result<ExitCode> {
    let (graph, redactor) = load(&args.common)?;
    let workspace = match args.workspace {
        Some(w) => w,
        None => match graph.states() {
            [one] => one.workspace.clone(),
            all => {
                let names: Vec<&str> = all.iter().map(|s| s.workspace.as_str()).collect();
                bail!(
                    "--workspace: {} workspaces are loaded ({}); name the one of {}",
                    names.len(),
                    names.join(", "),
                    args.address
                );
            }
        },
    };
    let entries = match direction {
        Direction::Dependents => query::dependents(&graph, &workspace, &args.address, args.depth),
        Direction::Dependencies => {
            query::dependencies(&graph, &workspace, &args.address, args.depth)
        }
    }?;
    let mut out = io::stdout().lock();
    match args.common.format {
        Format::Json => {
            let doc = serde_json::json!({
                "workspace": workspace,
                "address": args.address,
                "depth": args.depth,
                direction.as_str(): entries,
            });
            writeln!(out, "{}", redactor.json(&doc))?;
        }
        Format::Table => write_walk(&mut out, &redactor, &entries)?,
    }
    out.flush().context("failed to write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

fn write_walk(out: &mut impl Write, redactor: &Redactor, entries: &[PathEntry]) -> io::Result<()> {
    writeln!(
        out,
        "{:<5}  {:<16}  {:<56}  PATH",
        "DEPTH", "WORKSPACE", "ADDRESS"
    )?;
    for e in entries {
        let path: Vec<&str> = e.path.iter().map(|a| &**a).collect();
        writeln!(
            out,
            "{:<5}  {:<16}  {:<56}  {}",
            e.depth,
            redactor.text(&e.workspace),
            redactor.text(&e.address),
            redactor.text(&path.join(" > "))
        )?;
    }
    writeln!(out, "{} resource(s)", entries.len())
}

fn find(args: FindArgs) -> anyhow::Result<ExitCode> {
    let (graph, redactor) = load(&args.common)?;
    if let Some(w) = &args.workspace
        && !graph.states().iter().any(|s| &s.workspace == w)
    {
        let names: Vec<&str> = graph
            .states()
            .iter()
            .map(|s| s.workspace.as_str())
            .collect();
        bail!(
            "--workspace: unknown workspace {w:?} (loaded: {})",
            names.join(", ")
        );
    }
    let mut found: Vec<Found> = driftreactor_pipeline::find_cloud_id(&graph, &args.cloud_id);
    if let Some(w) = &args.workspace {
        found.retain(|f| &*f.workspace == w.as_str());
    }
    let mut out = io::stdout().lock();
    match args.common.format {
        Format::Json => {
            let doc = serde_json::json!({"cloud_id": args.cloud_id, "resources": found});
            writeln!(out, "{}", redactor.json(&doc))?;
        }
        Format::Table => {
            writeln!(out, "{:<16}  {:<56}  MATCH", "WORKSPACE", "ADDRESS")?;
            for f in &found {
                writeln!(
                    out,
                    "{:<16}  {:<56}  {}",
                    redactor.text(&f.workspace),
                    redactor.text(&f.address),
                    f.kind
                )?;
            }
            writeln!(out, "{} resource(s)", found.len())?;
        }
    }
    out.flush().context("failed to write to stdout")?;
    Ok(if found.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
