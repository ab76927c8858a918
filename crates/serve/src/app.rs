//! `driftreactor serve` as one call: the pipeline as the model, the remediator behind
//! the after-commit hook, the compiled-in pull sources, see `docs/serve.md`.
//!
//! [`launch`] opens every workspace's state source and reads each state once
//! ([`StateSet::open`]: `[[workspaces]]` and the `[[workspace_sets]]` listed once),
//! and builds them ([`PipelineLoader::read`]); their sensitive values seed the
//! remediator's redactor and the same parse becomes the first model. The remediation memory (attempts, escalations,
//! our applies, open PRs) and the bookkeeping of unfinished remediation live in the
//! journal's file, so they survive a restart: the [`Forwarder`] is started (and the
//! journal's `pending` list read) before the service journals anything new. On
//! shutdown, [`App::wait`] stops the sources and the pipeline task first, then the
//! remediator (running plans / applies finish and their completions are recorded).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use driftreactor_config::Config;
use driftreactor_journal::{JournalLock, SharedJournal};
use driftreactor_notify::Redactor;
use driftreactor_remediate::handoff::{ClearError, Forwarder, Hook};
use driftreactor_remediate::{GitSource, Remediator, Workspace};
use tokio_util::sync::CancellationToken;

use crate::loader::PipelineLoader;
use crate::model::LoadError;
use crate::{
    AfterCommit, LockTable, Running, ServeError, ServeOptions, SourceRegistry, StateSet,
    WorkspaceTable,
};
use driftreactor_pipeline::estate::{self, LoadOptions, StateInput};

/// Why [`launch`] could not start the sidecar, or it stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    /// The service itself (config, states, journal, sources, listen address, server).
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// The remediator could not be set up from the config.
    #[error("cannot set up remediation")]
    Remediation(#[source] driftreactor_remediate::SetupError),
    /// The journal (shared by the service and the remediation bookkeeping) could not
    /// be opened.
    #[error("cannot open the journal")]
    Journal(#[source] driftreactor_journal::Error),
    /// The journal's unfinished remediations could not be read.
    #[error("cannot read the unfinished remediations from the journal")]
    Pending(#[source] driftreactor_journal::Error),
    /// Another process holds the journal (its pid named), or its lock file could not
    /// be taken.
    #[error(transparent)]
    Locked(#[from] driftreactor_journal::LockError),
}

/// A started sidecar: the service and, with remediation on, the forwarder task.
#[derive(Debug)]
pub struct App {
    running: Running,
    remediation: Option<Forwarder>,
    /// This process's lock on the journal file, released when the app is dropped;
    /// `None` on PostgreSQL (several replicas share it).
    _lock: Option<JournalLock>,
}

impl App {
    /// The address the HTTP server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.running.local_addr()
    }

    /// Terraform's state locks as the last reload tick saw them (see
    /// [`Running::state_locks`]).
    pub fn state_locks(&self) -> crate::LockTable {
        self.running.state_locks()
    }

    /// The current workspaces, name → settings (see [`Running::workspaces`]).
    pub fn workspaces(&self) -> crate::WorkspaceTable {
        self.running.workspaces()
    }

    /// The token that stops the service when cancelled (see
    /// [`crate::shutdown_on_signal`]).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.running.shutdown_token()
    }

    /// Waits until the service stopped (after the shutdown token fired), then stops
    /// the remediator gracefully: nothing more is handed on once the sources and the
    /// pipeline task have stopped.
    ///
    /// # Errors
    /// [`AppError::Serve`] when the server failed.
    pub async fn wait(self) -> Result<(), AppError> {
        let result = self.running.wait().await;
        if let Some(f) = self.remediation {
            f.stop().await;
        }
        Ok(result?)
    }
}

/// Remediation runs when some workspace can be planned (`dir` or `[workspaces.git]`)
/// or `[remediation]` is present; otherwise serve is detect-only.
pub fn remediation_enabled(config: &Config) -> bool {
    config.remediation.is_some()
        || config
            .workspaces
            .iter()
            .any(|w| w.dir.is_some() || w.git.is_some())
        || config
            .workspace_sets
            .iter()
            .any(|s| s.dir.is_some() || s.git.is_some())
}

/// Starts the sidecar from `config`: states, remediation (when
/// [`remediation_enabled`]), journal, the sources of `registry`, the HTTP server on
/// `listen` (or `[server] listen`). Must be called inside a multi-threaded tokio
/// runtime.
///
/// # Errors
/// [`AppError`] for anything that prevents start-up; nothing keeps running then. A
/// config section that does not fit names the config file; a journal file another
/// process holds is [`AppError::Locked`], naming the journal and that process's pid.
pub async fn launch(
    config: Config,
    listen: Option<SocketAddr>,
    registry: SourceRegistry,
) -> Result<App, AppError> {
    // All of the config first, before any state is read.
    crate::check::check(&config, &registry, crate::check::CheckMode::Build)
        .map_err(ServeError::ConfigFile)?;
    // One process per journal file: refused before anything else is opened. A
    // PostgreSQL journal is shared by design (no file to lock).
    let journal_cfg = crate::journal_config(&config)?;
    let lock = match journal_cfg.url {
        None => Some(JournalLock::acquire(&journal_cfg.path)?),
        Some(_) => None,
    };
    let remediation = remediation_enabled(&config);
    let server: crate::ServerConfig = config
        .section("server", config.server.as_ref())
        .map_err(ServeError::ConfigFile)?;
    let mut loader = PipelineLoader::from_config(&config).with_load_threads(server.load_threads());
    // Every workspace's state, read once through its source (file, object store,
    // HCP Terraform, command; the workspace sets listed once).
    let states = StateSet::open(&config)
        .await
        .map_err(|e| ServeError::ConfigFile(e.to_config_error(&config)))?;
    // The remediator asks `states.locks()` whether a workspace's state is locked (an
    // apply is running) before it plans, and follows `states.workspaces()` (workspace
    // sets re-listed); both stay current once the service runs.
    // The states' sensitive values are read in any mode: every string the service
    // stores or answers passes the state redactor, also without remediation.
    let estate = read_states(states.states(), loader.load_threads())
        .await
        .map_err(|e| match &e {
            ServeError::Model(crate::model::LoadError::State { workspace, source }) => {
                crate::check::state_error(
                    &config,
                    workspace,
                    driftreactor_source::registry::chain(&**source),
                )
                .map_or(e, ServeError::ConfigFile)
            }
            _ => e,
        })?;
    let mut journal = None;
    let (remediation, redactor) = if remediation {
        // One journal handle for the service, the bookkeeping and the memory; the
        // forwarder closes it once the remediator stopped (after the service).
        let shared = driftreactor_journal::connect(&crate::journal_config(&config)?)
            .await
            .map_err(AppError::Journal)?;
        journal = Some(shared.clone());
        let forwarder = start_remediation(
            &config,
            estate.secrets.clone(),
            shared,
            states.locks(),
            states.workspaces(),
        )
        .await?;
        let redactor = forwarder.redactor().clone();
        (Some(forwarder), redactor)
    } else {
        tracing::info!(
            "Remediation is off (no workspace has a `dir` and there is no [remediation] section): detect-only."
        );
        (None, Redactor::new(estate.secrets.clone()))
    };
    // Secrets of resources added or rotated since start-up reach the redactor too.
    let sink = redactor.clone();
    loader = loader.with_secrets(move |secrets| sink.add_secrets(secrets));
    loader.prime(estate);
    let after_commit = remediation
        .as_ref()
        .map(|f| Arc::new(f.hook().clone()) as Arc<dyn AfterCommit>);
    let config_path = config.path.clone();
    let started = crate::start(ServeOptions {
        config,
        loader: Arc::new(loader),
        registry,
        listen,
        after_commit,
        journal,
        redactor: Some(redactor),
        states: Some(states),
    })
    .await;
    match started {
        Ok(running) => Ok(App {
            running,
            remediation,
            _lock: lock,
        }),
        Err(e) => {
            if let Some(f) = remediation {
                f.stop().await;
            }
            // Name the file, as the config crate's own errors do.
            Err(match (e, config_path) {
                (ServeError::Config { field, reason }, Some(path)) => {
                    ServeError::ConfigFile(driftreactor_config::Error::Invalid {
                        path,
                        field,
                        reason,
                    })
                    .into()
                }
                (e, _) => e.into(),
            })
        }
    }
}

/// Builds the states once (graph and sensitive values), on a blocking thread.
async fn read_states(
    states: Vec<StateInput>,
    threads: usize,
) -> Result<driftreactor_pipeline::Estate, ServeError> {
    let options = LoadOptions {
        secrets: true,
        threads,
    };
    tokio::task::spawn_blocking(move || estate::load_inputs(&states, options))
        .await
        .map_err(|e| ServeError::Model(LoadError::Aborted(e.to_string())))?
        .map_err(|e| ServeError::Model(crate::loader::load_error(e)))
}

/// The remediator with `secrets` in its redactor, its memory and bookkeeping on the
/// journal's file, and the forwarder that feeds it (pending work resubmitted first).
/// It checks `locks` before each plan and apply, and follows `workspaces` when the
/// config has `[[workspace_sets]]`.
async fn start_remediation(
    config: &Config,
    secrets: Vec<String>,
    bookkeeping: SharedJournal,
    locks: LockTable,
    workspaces: WorkspaceTable,
) -> Result<Forwarder, AppError> {
    // The remediation memory is the same journal handle (it implements `StateStore`).
    let store = bookkeeping.clone();
    // Plan files stay in the service's data directory (the SQLite journal's folder;
    // with PostgreSQL, which has no file, the config file's folder), not in a
    // per-process temporary folder a crash would leave behind.
    let journal = crate::journal_config(config)?;
    let data_dir = match journal.url {
        None => journal.path.parent().map(Path::to_path_buf),
        Some(_) => config
            .path
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf),
    }
    .filter(|d| !d.as_os_str().is_empty())
    .unwrap_or_else(|| PathBuf::from("."));
    // Absolute: the IaC tool runs in the workspace's folder and would resolve a
    // relative `-out=` plan file there.
    let data_dir = std::path::absolute(&data_dir).unwrap_or(data_dir);
    // Several replicas share a PostgreSQL journal: one remediation per workspace at a
    // time, under the workspace's lease (driftreactor_remediate::cluster).
    let cluster = match crate::journal_config(config)?.url {
        Some(_) => {
            let cfg = driftreactor_remediate::RemediationConfig::from_config(config, false)
                .unwrap_or_default();
            Some(
                driftreactor_remediate::Cluster::new(
                    bookkeeping.clone(),
                    crate::replica::replica_id(),
                    std::time::Duration::from_secs(cfg.lease_ttl_secs.max(1)),
                    std::time::Duration::from_secs(cfg.claim_interval_secs.max(1)),
                )
                .observe(crate::replica::lease_observer()),
            )
        }
        None => None,
    };
    if cluster.is_some() {
        tracing::info!(replica = %crate::replica::replica_id(),
            "Shared journal: remediation runs under workspace leases.");
    }
    let remediator = Remediator::builder_from_config(config, secrets, false)
        .map_err(AppError::Remediation)?
        .default_plan_dir(data_dir.join("driftreactor-plans"))
        // `[workspaces.git]` cache clones and plan worktrees (wp-git).
        .default_git_dir(data_dir.join("driftreactor-git"))
        .store(Arc::new(store))
        .cluster(cluster)
        .state_locks(Arc::new(RemediationLocks(locks)))
        .spawn();
    // The workspaces the sets found at start, before any work reaches the remediator:
    // the journal's pending remediations are resubmitted by `Forwarder::start`, and
    // one of a listed workspace that ran before `follow_workspaces`'s first update
    // would find no `dir` ("cannot revert") and end in a pull request / notification.
    if !config.workspace_sets.is_empty() {
        let current = remediated_workspaces(config, &workspaces.current());
        if let Err(e) = remediator.set_workspaces(current).await {
            tracing::warn!(error = %e, "Could not hand the listed workspaces to the remediator at start.");
        }
    }
    let forwarder = Forwarder::start(remediator, bookkeeping)
        .await
        .map_err(AppError::Pending)?;
    if !config.workspace_sets.is_empty() {
        tokio::spawn(follow_workspaces(
            config.clone(),
            workspaces,
            forwarder.hook().clone(),
        ));
    }
    Ok(forwarder)
}

/// serve's state-lock snapshot as the remediator's gate
/// ([`driftreactor_remediate::StateLocks`]): the lock each workspace's state source
/// reported at the last reload tick.
struct RemediationLocks(LockTable);

impl driftreactor_remediate::StateLocks for RemediationLocks {
    fn lock(&self, workspace: &str) -> Option<driftreactor_remediate::StateLock> {
        self.0
            .lock(workspace)
            .map(|l| driftreactor_remediate::StateLock {
                id: l.id,
                who: l.who,
                operation: l.operation,
                created: l.created,
            })
    }
}

/// Hands the remediator every remediating workspace (the fixed `[[workspaces]]` and
/// those the `[[workspace_sets]]` found) now and after each re-listing that changed
/// them, until the state set or the remediator stops.
async fn follow_workspaces(config: Config, table: WorkspaceTable, hook: Hook) {
    let mut changes = table.subscribe();
    loop {
        let current = changes.borrow_and_update().clone();
        let workspaces = remediated_workspaces(&config, &current);
        match hook.set_workspaces(workspaces).await {
            Ok(change) => {
                if !(change.added.is_empty()
                    && change.removed.is_empty()
                    && change.changed.is_empty())
                {
                    tracing::info!(added = ?change.added, changed = ?change.changed, removed = ?change.removed,
                        "Remediated workspaces updated from the workspace sets.");
                }
            }
            Err(ClearError::Stopped) => return,
            Err(e) => {
                tracing::warn!(error = %e, "Could not hand the re-listed workspaces to the remediator; trying again at the next change.");
            }
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

/// The remediator's view of `current` (workspace name → its config): a workspace
/// with `[workspaces.git]` / `[workspace_sets.git]` plans in its repository, one with
/// `dir` there, one with neither is not remediated. A workspace whose Git settings do
/// not read is left out, with a warning naming it (the config check refuses such
/// settings at start, so this only guards a change of environment).
fn remediated_workspaces(
    config: &Config,
    current: &std::collections::BTreeMap<String, driftreactor_config::WorkspaceConfig>,
) -> Vec<Workspace> {
    let mut out = Vec::new();
    for (name, ws) in current {
        let git = match config.workspaces.iter().position(|w| &w.name == name) {
            Some(i) => GitSource::from_config(config, i),
            // A listed workspace carries its set's `git` table: the first set with the
            // same table gives the same source.
            None => match config.workspace_sets.iter().position(|s| s.git == ws.git) {
                Some(i) => GitSource::from_workspace_set(config, i),
                None => Ok(None),
            },
        };
        match git {
            Ok(Some(source)) => out.push(Workspace::from_git(ws, source)),
            Ok(None) => out.extend(Workspace::from_config(ws)),
            Err(e) => tracing::warn!(workspace = %name, error = %e,
                "Workspace left out of remediation: its Git settings do not read."),
        }
    }
    out
}
