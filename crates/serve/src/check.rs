//! The whole-config check every command runs before it does anything (`replay`,
//! `serve`, `validate`, the way Vector's `vector validate` and Terraform's
//! `terraform validate` check everything they will use): every section is read by its
//! owner's parser, whether or not the command uses it, so a typo in `[github]` is
//! refused even while remediation is off, and a broken `[server]` already fails
//! `replay`.
//!
//! What is checked, each error naming the config file, the field and the reason
//! ([`driftreactor_config::Error::Invalid`]):
//! - `[[workspaces]]`: names, `tool` (`terraform` or `tofu`, by the config crate) and
//!   that a `dir` is an existing directory;
//! - `[server]`, `[journal]` (retention included): every key known; the sizes,
//!   limits and timeouts that 0 would turn off or stall (`queue_capacity`,
//!   `max_in_flight`, `max_connections`, `metrics_max_operations`,
//!   `body_limit_bytes`, `header_read_timeout_secs`, `body_read_timeout_secs`,
//!   `push_timeout_secs`, `max_batch`) at least 1;
//! - `[[sources]]`: the type is a push endpoint or a compiled-in pull source, and its
//!   table reads into that source's config; with [`CheckMode::Build`] the push
//!   endpoints are also built (their secret variables or files must be there);
//! - `[remediation]`, `[github]`, `[slack]`, `[mcp]`: every key known and well typed;
//! - `[workspaces.git]`: the URL (https://, ssh://, file://), `ref`, `path`, and that
//!   `token_env` / `ssh_key_file` fit the URL; not both `dir` and `git`.
//!
//! The states themselves are read by the commands (they need them anyway);
//! [`state_error`] names the workspace's field when one cannot be read.

use std::path::{Path, PathBuf};

use driftreactor_config::{Config, Error as ConfigError};
use driftreactor_journal::JournalConfig;
use driftreactor_pipeline::estate::LoadError;

use crate::config::{ServerConfig, SourceSpec, parse_sources};
use crate::{ServeError, SourceRegistry};

/// How far [`check`] goes with the `[[sources]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckMode {
    /// Every source's settings are read, but push endpoints are not built (their
    /// secrets need not be present): `replay`, which starts no source, and
    /// [`crate::start`], which builds the endpoints itself right after.
    Settings,
    /// Push endpoints are built too, as start-up would (their secret variables or
    /// files must be there): `validate` and [`crate::launch`], before any state is read.
    Build,
}

/// One `[[sources]]` entry as [`check`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedSource {
    /// Its name (`name`, else the type plus its position for pull sources, the type
    /// for push endpoints).
    pub name: String,
    /// Its `type`.
    pub kind: String,
    /// A push endpoint (mounted on the server) rather than a pull source.
    pub push: bool,
}

/// What a config that passed [`check`] holds, for `validate`'s summary.
#[derive(Debug, Clone)]
pub struct Checked {
    /// `[server]`.
    pub server: ServerConfig,
    /// `[journal]`, its path resolved against the config file's folder.
    pub journal: JournalConfig,
    /// `[[sources]]`, in order.
    pub sources: Vec<CheckedSource>,
    /// Whether `serve` would remediate ([`crate::app::remediation_enabled`]).
    pub remediation: bool,
}

/// Checks all of `config` (see the module documentation) with the pull source types
/// of `registry`.
///
/// # Errors
/// The first problem found, as [`ConfigError::Invalid`] naming the file, the field and
/// the reason.
pub fn check(
    config: &Config,
    registry: &SourceRegistry,
    mode: CheckMode,
) -> Result<Checked, ConfigError> {
    let path = config.path.clone().unwrap_or_default();
    let invalid = |field: String, reason: String| ConfigError::Invalid {
        path: path.clone(),
        field,
        reason,
    };
    for (i, ws) in config.workspaces.iter().enumerate() {
        if let Some(dir) = &ws.dir
            && !dir.is_dir()
        {
            let reason = if dir.exists() {
                format!("{} is not a directory", dir.display())
            } else {
                format!("{} does not exist", dir.display())
            };
            return Err(invalid(format!("workspaces[{i}].dir"), reason));
        }
    }
    // The backstop plans in the workspace's root: without one it could never run.
    let rootless = config
        .workspaces
        .iter()
        .enumerate()
        .filter(|(_, w)| w.backstop_interval.is_some() && w.dir.is_none() && w.git.is_none())
        .map(|(i, _)| format!("workspaces[{i}].backstop_interval"))
        .chain(
            config
                .workspace_sets
                .iter()
                .enumerate()
                .filter(|(_, s)| {
                    s.backstop_interval.is_some() && s.dir.is_none() && s.git.is_none()
                })
                .map(|(i, _)| format!("workspace_sets[{i}].backstop_interval")),
        )
        .next();
    if let Some(field) = rootless {
        return Err(invalid(
            field,
            "the backstop plans in the workspace's Terraform root: set `dir` or `git` too".into(),
        ));
    }

    let server: ServerConfig = config.section("server", config.server.as_ref())?;
    // `[mcp]`: every key known (`driftreactor mcp`, serve's `/mcp`).
    let _: driftreactor_mcp::McpConfig = config.section("mcp", config.mcp.as_ref())?;
    for (field, value) in [
        ("server.queue_capacity", server.queue_capacity as u64),
        ("server.max_in_flight", server.max_in_flight as u64),
        ("server.max_connections", server.max_connections as u64),
        (
            "server.metrics_max_operations",
            server.metrics_max_operations as u64,
        ),
        ("server.body_limit_bytes", server.body_limit_bytes as u64),
        (
            "server.header_read_timeout_secs",
            server.header_read_timeout_secs,
        ),
        (
            "server.body_read_timeout_secs",
            server.body_read_timeout_secs,
        ),
        ("server.push_timeout_secs", server.push_timeout_secs),
    ] {
        at_least_one(&invalid, field, value)?;
    }
    if let Some(n) = server
        .state_load_threads
        .filter(|&n| n > crate::config::MAX_STATE_LOAD_THREADS)
    {
        return Err(invalid(
            "server.state_load_threads".into(),
            format!(
                "{n} threads is more than {}: beyond a few workers the one thread that reads \
                 and indexes the state is the limit (0: one thread; unset: one fewer than the \
                 CPUs, at most 3)",
                crate::config::MAX_STATE_LOAD_THREADS
            ),
        ));
    }
    let journal = crate::journal_config(config).map_err(|e| named(&path, e))?;
    if let Err(driftreactor_journal::Error::Config { field, reason }) = journal.check() {
        return Err(invalid(format!("journal.{field}"), reason));
    }
    at_least_one(&invalid, "journal.max_batch", journal.max_batch as u64)?;
    at_least_one(
        &invalid,
        "journal.queue_capacity",
        journal.queue_capacity as u64,
    )?;

    let specs = parse_sources(&config.sources).map_err(|e| named(&path, e))?;
    let mut sources = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        let field = format!("sources[{i}]");
        if let Some(push) = crate::push::build(&spec, &field) {
            let kind = match &spec {
                SourceSpec::GcpPush(_) => driftreactor_gcp::push_endpoint::KIND,
                _ => driftreactor_azure::push_endpoint::KIND,
            };
            let name = match (mode, push) {
                (CheckMode::Build, Err(e)) => return Err(named(&path, e)),
                (CheckMode::Build, Ok(p)) => p.name().to_owned(),
                (CheckMode::Settings, _) => kind.to_owned(),
            };
            sources.push(CheckedSource {
                name,
                kind: kind.to_owned(),
                push: true,
            });
            continue;
        }
        let SourceSpec::Pull { kind, name, table } = spec else {
            continue;
        };
        match registry.check(&kind, table) {
            None => {
                let mut known = vec![
                    driftreactor_gcp::push_endpoint::KIND,
                    driftreactor_azure::push_endpoint::KIND,
                ];
                known.extend(registry.kinds());
                return Err(invalid(
                    format!("{field}.type"),
                    format!(
                        "unknown or not compiled-in source type `{kind}` (known: {})",
                        known.join(", ")
                    ),
                ));
            }
            Some(Err(e)) => return Err(invalid(field, e.to_string())),
            Some(Ok(())) => sources.push(CheckedSource {
                name,
                kind,
                push: false,
            }),
        }
    }

    driftreactor_remediate::RemediationConfig::from_config(config, false)?;
    // `[workspaces.git]`: shape, URL and credential kind (the token is read at start).
    driftreactor_remediate::check_git_config(config)?;
    let _: driftreactor_notify::GitHubConfig = config.section("github", config.github.as_ref())?;
    let _: driftreactor_notify::SlackConfig = config.section("slack", config.slack.as_ref())?;
    Ok(Checked {
        server,
        journal,
        sources,
        remediation: crate::app::remediation_enabled(config),
    })
}

/// A state that could not be read, as a config error naming the workspace's `state`
/// field (`workspaces[i].state`) and `reason`, when `workspace` comes from `config`;
/// `None` otherwise (a `--state` file of replay: its error names the file itself).
pub fn state_error(
    config: &Config,
    workspace: &str,
    reason: impl std::fmt::Display,
) -> Option<ConfigError> {
    let i = config.workspaces.iter().position(|w| w.name == workspace)?;
    Some(ConfigError::Invalid {
        path: config.path.clone().unwrap_or_default(),
        field: format!("workspaces[{i}].state"),
        reason: format!("workspace {workspace}: {reason}"),
    })
}

/// [`state_error`] for the state loader's error (`replay`, `validate`).
pub fn estate_error(config: &Config, err: &LoadError) -> Option<ConfigError> {
    let LoadError::State {
        workspace, source, ..
    } = err
    else {
        return None;
    };
    state_error(
        config,
        workspace,
        driftreactor_source::registry::chain(source),
    )
}

fn at_least_one(
    invalid: &impl Fn(String, String) -> ConfigError,
    field: &str,
    value: u64,
) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(invalid(field.to_owned(), "must be at least 1".to_owned()));
    }
    Ok(())
}

/// A serve-side config error as the config crate's error naming `path`.
fn named(path: &Path, e: ServeError) -> ConfigError {
    match e {
        ServeError::ConfigFile(e) => e,
        ServeError::Config { field, reason } => ConfigError::Invalid {
            path: PathBuf::from(path),
            field,
            reason,
        },
        other => ConfigError::Invalid {
            path: PathBuf::from(path),
            field: "sources".into(),
            reason: driftreactor_source::registry::chain(&other),
        },
    }
}
