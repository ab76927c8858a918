//! `driftreactor journal copy`: moves an embedded SQLite journal into PostgreSQL
//! (the logic is `driftreactor_journal::copy`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use driftreactor_journal::{JournalConfig, SslMode};

/// Arguments of `driftreactor journal`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Copy a SQLite journal into an empty PostgreSQL journal (stop `serve` first).
    Copy(CopyArgs),
}

#[derive(Debug, clap::Args)]
struct CopyArgs {
    /// The SQLite journal: `sqlite:PATH` (or a plain path).
    #[arg(long)]
    from: String,
    /// The PostgreSQL journal: `postgres://USER@HOST:PORT/DB` (its schema is created
    /// if needed; it must hold no events).
    #[arg(long)]
    to: String,
    /// The environment variable holding the PostgreSQL password (as `[journal]
    /// password_env`).
    #[arg(long)]
    password_env: Option<String>,
    /// PostgreSQL TLS mode: disable, allow, prefer, require, verify-ca, verify-full.
    #[arg(long, value_parser = parse_sslmode)]
    sslmode: Option<SslMode>,
    /// The CA certificate (PEM) for verify-ca / verify-full.
    #[arg(long)]
    sslrootcert: Option<PathBuf>,
}

fn parse_sslmode(s: &str) -> Result<SslMode, String> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).map_err(|_| {
        format!("`{s}` is not one of disable, allow, prefer, require, verify-ca, verify-full")
    })
}

/// Runs `driftreactor journal …`; prints what was copied on stdout.
///
/// # Errors
/// When a journal cannot be opened or the copy fails (nothing is copied then).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Copy(a) => copy(a),
    }
}

fn copy(a: CopyArgs) -> anyhow::Result<ExitCode> {
    let path = a.from.strip_prefix("sqlite:").unwrap_or(&a.from);
    let path = PathBuf::from(path);
    anyhow::ensure!(
        path.is_file(),
        "--from: no SQLite journal at {}",
        path.display()
    );
    let from = JournalConfig::at(path);
    let to = JournalConfig {
        password_env: a.password_env,
        sslmode: a.sslmode,
        sslrootcert: a.sslrootcert,
        ..JournalConfig::postgres(a.to)
    };
    let shown = driftreactor_journal::redact_url(to.url.as_deref().unwrap_or_default());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime
        .block_on(driftreactor_journal::copy::copy_sqlite_to_postgres(
            &from, &to,
        ))
        .with_context(|| format!("copy {} to {shown}", from.path.display()))?;
    println!("Copied {} to {shown}:", from.path.display());
    for (table, rows) in &report.tables {
        println!("  {table:<32} {rows:>10}");
    }
    Ok(ExitCode::SUCCESS)
}
