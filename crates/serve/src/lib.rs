//! The driftreactor sidecar: sources and push endpoints → pipeline → journal → ack,
//! and the HTTP API.
//!
//! ```text
//!  pull sources (aws_sqs, gcp_pubsub, azure_event_grid_namespace)  ─┐   bounded channel
//!  push endpoints (POST /push/gcp, POST|OPTIONS /push/azure)       ─┼─► pipeline task ─► Model::process ─► Journal::append ─► Ack
//!                                                                   │      (arc-swap load of the current model)    (group commit)
//!  state reload (conditional read + lock of each workspace every N s, workspace sets re-listed) ── ArcSwap::store ──┘
//!  retention (every prune_interval_secs) ── Journal::prune: batches on the journal's writer thread
//!  HTTP API: /healthz /readyz /metrics /v1/events /v1/drift /v1/remediations /v1/resources/{ws}/{address}
//!            /v1/resources?cloud_id= /v1/graph/{ws}/{address}/dependents|dependencies
//!  MCP:      /mcp (streamable HTTP, bearer token; the tools of driftreactor_mcp over this service)
//!            /v1/changes?since= /v1/stream (Server-Sent Events of the drift transitions)
//! ```
//!
//! [`start`] sets everything up and returns a [`Running`] service bound to its
//! address; [`Running::wait`] returns after the shutdown token fired (see
//! [`shutdown_on_signal`]) and everything in flight finished or was released.
//!
//! A message is acknowledged (a push answered 200, a pull message deleted) only after
//! its events are committed to the journal; a redelivered event is acknowledged as a
//! duplicate without being recorded twice. See `docs/serve.md`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use driftreactor_config::Config;
use driftreactor_journal::{JournalConfig, SharedJournal};
use driftreactor_notify::Redactor;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub mod app;
pub mod auth;
mod backstop;
pub mod check;
pub mod config;
pub mod hook;
mod http;
pub mod loader;
mod mcp;
pub mod metrics;
pub mod model;
mod outcomes;
mod push;
mod readiness;
pub mod reload;
pub mod replica;
mod retention;
mod sources;
mod spool;
mod state;
pub mod states;
mod stream;
mod worker;

pub use app::{App, AppError, launch};
pub use config::{AzurePushConfig, GcpPushConfig, OidcConfig, Retention, ServerConfig, SourceSpec};
pub use driftreactor_journal::{JournalLock, LockError};
pub use driftreactor_journal::{MatchRecord, ResourceKey};
pub use driftreactor_source as source;
pub use hook::{AfterCommit, BoxFuture, ClearError, Handoff};
pub use loader::{PipelineLoader, PipelineModel};
pub use model::{
    BoxError, Input, LoadError, Loaded, Model, ModelLoader, Processed, ResourceInfo, StateInfo,
};
pub use sources::{BuildError, BuildFuture, Registration, SourceBuilder, SourceRegistry};
pub use states::{LockTable, StateSet, WorkspaceTable};

/// Capacity of each pull source's own channel in front of the shared pipeline channel,
/// in messages. Small: the shared channel ([`ServerConfig::queue_capacity`]) is the
/// real buffer; this only decouples a source from the forwarder that tags its
/// messages with the source name.
const SOURCE_CHANNEL: usize = 16;

/// Why the service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A config section does not fit.
    #[error("invalid config: {field}: {reason}")]
    Config {
        /// The TOML path (`server.listen`, `sources[1].oidc`).
        field: String,
        /// Plain-words reason.
        reason: String,
    },
    /// The config file itself could not be read.
    #[error(transparent)]
    ConfigFile(#[from] driftreactor_config::Error),
    /// The journal could not be opened.
    #[error(transparent)]
    Journal(#[from] driftreactor_journal::Error),
    /// The state graph could not be loaded at start-up.
    #[error("cannot load the state graph: {0}")]
    Model(#[source] LoadError),
    /// A workspace's state could not be read, or a workspace set listed, at start-up
    /// (names the workspace or set, the location and the store's answer).
    #[error("cannot read the states: {0}")]
    States(#[source] states::Error),
    /// A pull source could not be built.
    #[error("cannot start source {name}: {source}")]
    Source {
        /// The source name.
        name: String,
        /// Why (boxed: the TOML error is large).
        #[source]
        source: Box<driftreactor_source::BuildError>,
    },
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP server failed.
    #[error("HTTP server failed: {0}")]
    Http(#[source] std::io::Error),
}

impl From<driftreactor_source::push::PushConfigError> for ServeError {
    fn from(e: driftreactor_source::push::PushConfigError) -> Self {
        ServeError::Config {
            field: e.field,
            reason: e.reason,
        }
    }
}

impl ServeError {
    pub(crate) fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ServeError::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// The lifecycle of one source's task, for `/readyz` (a running pull source may
/// still be reported `degraded`: see [`readiness`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SourceState {
    Running,
    Stopped,
    Failed,
}

impl SourceState {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            SourceState::Running => "running",
            SourceState::Stopped => "stopped",
            SourceState::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SourceStatus {
    kind: String,
    state: SourceState,
    error: Option<String>,
    /// Push endpoints only: how pushes are authenticated
    /// ([`driftreactor_source::push::PushEndpoint::authentication`]).
    authentication: Option<&'static str>,
    /// The receive health the source records on (pull sources that report).
    health: Option<driftreactor_source::SourceHealth>,
}

/// What every task shares.
pub(crate) struct Ctx {
    journal: SharedJournal,
    state: ArcSwap<Loaded>,
    metrics: metrics::Metrics,
    sources: std::sync::Mutex<BTreeMap<String, SourceStatus>>,
    loader: Arc<dyn ModelLoader>,
    server: ServerConfig,
    after_commit: Option<Arc<dyn AfterCommit>>,
    /// Redacts what the service stores and answers (see [`ServeOptions::redactor`]).
    redactor: Redactor,
    /// What `/readyz` shows of the states (locations, locks, errors, workspace sets),
    /// as of the last reload tick.
    states: Arc<ArcSwap<states::StatesReport>>,
    /// The leader lease singletons run under (journal pruning, workspace-set
    /// listing): always leading on
    /// the embedded journal, [`replica::Leader::spawn`] on a shared one.
    leader: replica::Leader,
    /// `[mcp]`: whether `/mcp` offers the write tools, and its token variable.
    mcp: driftreactor_mcp::McpConfig,
    /// The open `/v1/stream` streams' bound, settings and shutdown.
    streams: stream::Streams,
}

/// Everything [`start`] needs.
pub struct ServeOptions {
    /// The loaded config file (`[server]`, `[journal]`, `[[sources]]` are read here).
    pub config: Config,
    /// Builds the model from the workspaces' states (start-up and reloads).
    pub loader: Arc<dyn ModelLoader>,
    /// Builders of the pull source types this binary supports.
    pub registry: SourceRegistry,
    /// Overrides `[server] listen` (e.g. `127.0.0.1:0` in tests).
    pub listen: Option<SocketAddr>,
    /// Gets every newly journaled event after its commit and acknowledgement (the
    /// remediator); `None`: detect-only.
    pub after_commit: Option<Arc<dyn AfterCommit>>,
    /// The journal to record into, shared with its other users (the remediator's
    /// bookkeeping and memory), who close it after the service stopped; `None`: the
    /// service opens the journal `[journal]` names and closes it when it stops.
    pub journal: Option<SharedJournal>,
    /// The state redactor (the states' sensitive values) that every journaled string,
    /// rejection reason and metric label passes; `None`: one without known secrets
    /// (secret-looking `key=value` pairs are still redacted).
    pub redactor: Option<Redactor>,
    /// The workspaces with their states already read ([`StateSet::open`], as
    /// [`launch`] does to seed the remediator's redactor); `None`: [`start`] opens and
    /// reads them from `config` (`[[workspaces]]`, `[[workspace_sets]]`).
    pub states: Option<StateSet>,
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("registry", &self.registry)
            .field("listen", &self.listen)
            .field("after_commit", &self.after_commit.is_some())
            .field("redactor", &self.redactor)
            .finish_non_exhaustive()
    }
}

/// A started service.
#[derive(Debug)]
pub struct Running {
    local_addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ServeError>>,
    journal: SharedJournal,
    locks: LockTable,
    workspaces: WorkspaceTable,
}

impl Running {
    /// Terraform's state locks as the last reload tick saw them: "is workspace W's
    /// state locked now?" ([`LockTable::lock`]), cheap and without I/O.
    pub fn state_locks(&self) -> LockTable {
        self.locks.clone()
    }

    /// The current workspaces (`[[workspaces]]` and what the workspace sets found at
    /// their last listing), name → settings, with change notification.
    pub fn workspaces(&self) -> WorkspaceTable {
        self.workspaces.clone()
    }

    /// The address the HTTP server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The token that stops the service when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// The journal (for inspection).
    pub fn journal(&self) -> &SharedJournal {
        &self.journal
    }

    /// Waits until the service stopped (after the shutdown token fired).
    ///
    /// # Errors
    /// [`ServeError::Http`] when the server failed.
    pub async fn wait(self) -> Result<(), ServeError> {
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(ServeError::Http(std::io::Error::other(e.to_string()))),
        }
    }

    /// Fires the shutdown token and waits for the service to stop.
    ///
    /// # Errors
    /// As [`Running::wait`].
    pub async fn stop(self) -> Result<(), ServeError> {
        self.shutdown.cancel();
        self.wait().await
    }
}

/// The SIGTERM and SIGINT handlers of the service, installed before anything is
/// bound: from [`ShutdownSignals::install`] on, these signals no longer end the
/// process abruptly but are kept until [`ShutdownSignals::cancel_on`] turns them into
/// a graceful shutdown (a signal that arrives while the service is still starting
/// stops it as soon as it has started).
#[derive(Debug)]
pub struct ShutdownSignals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    /// Installs the handlers. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// The I/O error when a handler cannot be installed.
    pub fn install() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Self {})
        }
    }

    /// Cancels `token` on the first SIGTERM or SIGINT (also one received before this
    /// call); returns early when `token` is cancelled otherwise.
    pub async fn cancel_on(self, token: CancellationToken) {
        #[cfg(unix)]
        {
            let Self { mut term, mut int } = self;
            tokio::select! {
                _ = int.recv() => tracing::info!("SIGINT received; shutting down."),
                _ = term.recv() => tracing::info!("SIGTERM received; shutting down."),
                () = token.cancelled() => return,
            }
        }
        #[cfg(not(unix))]
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = token.cancelled() => return,
            }
        }
        token.cancel();
    }
}

/// Cancels `token` on SIGTERM or SIGINT (Ctrl-C). The handlers are installed when this
/// is called; to have them in place before the server is bound, use
/// [`ShutdownSignals::install`] before [`start`] / [`launch`].
pub async fn shutdown_on_signal(token: CancellationToken) {
    match ShutdownSignals::install() {
        Ok(s) => s.cancel_on(token).await,
        Err(e) => {
            tracing::error!(error = %e, "Cannot listen for SIGTERM / SIGINT; only Ctrl-C stops the service.");
            let _ = tokio::signal::ctrl_c().await;
            token.cancel();
        }
    }
}

/// The lease time to live of `[remediation] lease_ttl_secs` (its default when the
/// section is absent or does not fit: `check` reports that).
pub(crate) fn lease_ttl(config: &Config) -> Duration {
    let cfg =
        driftreactor_remediate::RemediationConfig::from_config(config, false).unwrap_or_default();
    Duration::from_secs(cfg.lease_ttl_secs.max(1))
}

/// The `[journal]` section with its path resolved against the config file's directory
/// and its retention settings checked ([`Retention::from_journal`]).
///
/// # Errors
/// [`ServeError::ConfigFile`] naming the file, the field and the reason when the
/// section does not fit or its retention is refused.
pub fn journal_config(config: &Config) -> Result<JournalConfig, ServeError> {
    let mut cfg: JournalConfig = config.section("journal", config.journal.as_ref())?;
    journal_retention(config, &cfg)?;
    if let Some(base) = config.path.as_deref().and_then(Path::parent)
        && cfg.url.is_none()
        && cfg.path.is_relative()
    {
        cfg.path = base.join(&cfg.path);
    }
    if let (Some(base), Some(ca)) = (
        config.path.as_deref().and_then(Path::parent),
        cfg.sslrootcert.as_mut(),
    ) && ca.is_relative()
    {
        *ca = base.join(&*ca);
    }
    Ok(cfg)
}

/// The retention `serve` runs `cfg` (the `[journal]` section of `config`) with;
/// `None`: events are kept forever.
fn journal_retention(
    config: &Config,
    cfg: &JournalConfig,
) -> Result<Option<Retention>, ServeError> {
    Retention::from_journal(cfg, config.path.as_deref().unwrap_or(Path::new("")))
}

/// Reads the config, loads the model, opens the journal, builds the sources, binds
/// the server and starts every task.
///
/// # Errors
/// Any [`ServeError`] that prevents start-up; nothing keeps running then.
pub async fn start(opts: ServeOptions) -> Result<Running, ServeError> {
    let ServeOptions {
        config,
        loader,
        registry,
        listen,
        after_commit,
        journal,
        redactor,
        states,
    } = opts;
    // Settings only: the push endpoints are built (and their errors named) below.
    check::check(&config, &registry, check::CheckMode::Settings)?;
    let redactor = redactor.unwrap_or_default();
    let server: ServerConfig = config.section("server", config.server.as_ref())?;
    let journal_cfg = journal_config(&config)?;
    let retention = journal_retention(&config, &journal_cfg)?;
    let specs = config::parse_sources(&config.sources)?;
    let mcp: driftreactor_mcp::McpConfig = config.section("mcp", config.mcp.as_ref())?;

    let mut pushes = Vec::new();
    let mut pulls = Vec::new();
    for (i, spec) in specs.into_iter().enumerate() {
        let field = format!("sources[{i}]");
        if let Some(push) = push::build(&spec, &field) {
            pushes.push(push?);
            continue;
        }
        match spec {
            SourceSpec::GcpPush(_) | SourceSpec::AzurePush(_) => {}
            SourceSpec::Pull { kind, name, table } => {
                let Some(build) = registry.builder(&kind) else {
                    let mut known: Vec<&str> = vec![
                        driftreactor_gcp::push_endpoint::KIND,
                        driftreactor_azure::push_endpoint::KIND,
                    ];
                    known.extend(registry.kinds());
                    return Err(ServeError::config(
                        format!("{field}.type"),
                        format!(
                            "unknown or not compiled-in source type `{kind}` (known: {})",
                            known.join(", ")
                        ),
                    ));
                };
                let source = build(table).await.map_err(|source| ServeError::Source {
                    name: name.clone(),
                    source: Box::new(source),
                })?;
                pulls.push((name, kind, source));
            }
        }
    }
    {
        let mut paths = std::collections::BTreeSet::new();
        for p in &pushes {
            let path = p.path();
            if !paths.insert(path.to_owned()) {
                return Err(ServeError::config(
                    "sources",
                    format!("two push endpoints use the path `{path}`"),
                ));
            }
        }
    }

    let states = match states {
        Some(s) => s,
        None => StateSet::open(&config).await.map_err(|e| {
            if config.path.is_some() {
                ServeError::ConfigFile(e.to_config_error(&config))
            } else {
                ServeError::States(e)
            }
        })?,
    };
    let load = loader.clone();
    let inputs = states.states();
    let loaded = tokio::task::spawn_blocking(move || load.load(&inputs))
        .await
        .map_err(|e| ServeError::Model(LoadError::Aborted(e.to_string())))?
        .map_err(|e| match &e {
            LoadError::State { workspace, source } => check::state_error(
                &config,
                workspace,
                driftreactor_source::registry::chain(&**source),
            )
            .map_or(ServeError::Model(e), ServeError::ConfigFile),
            _ => ServeError::Model(e),
        })?;
    for s in &loaded.states {
        tracing::info!(workspace = %s.workspace, serial = s.serial, lineage = %s.lineage, "Loaded state.");
    }
    // A journal handed in is closed by its owner; one opened here closes at shutdown.
    let (journal, owned) = match journal {
        Some(j) => (j, false),
        None => (driftreactor_journal::connect(&journal_cfg).await?, true),
    };
    tracing::info!(journal = %journal.location(), "Journal open.");
    let addr = listen.unwrap_or(server.listen);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;

    let metrics = metrics::Metrics::with_max_operations(server.metrics_max_operations);
    metrics.init_known(
        &pushes
            .iter()
            .map(|p| metrics::KnownSource {
                name: p.name().to_owned(),
                provider: Some(p.provider()),
                push: true,
            })
            .chain(pulls.iter().map(|(name, kind, _)| metrics::KnownSource {
                name: name.clone(),
                provider: sources::provider_of(kind),
                push: false,
            }))
            .collect::<Vec<_>>(),
    );
    // deploy (issue 13): the states just loaded are current.
    metrics.mark_states_checked(
        loaded.states.iter().map(|s| s.workspace.as_str()),
        std::time::SystemTime::now(),
    );
    metrics.set_state_locks(
        states
            .entries
            .iter()
            .map(|e| (e.ws.name(), e.lock.is_some())),
    );
    if pushes.is_empty() && pulls.is_empty() {
        tracing::warn!(
            "No [[sources]] configured: nothing will be received (the HTTP API still answers)."
        );
    }
    let mut statuses = BTreeMap::new();
    for p in &pushes {
        let authentication = p.authentication();
        if authentication == auth::UNAUTHENTICATED {
            tracing::warn!(
                source = %p.name(),
                path = %p.path(),
                "Push endpoint {}.",
                auth::UNAUTHENTICATED_WARNING
            );
        }
        statuses.insert(
            p.name().to_owned(),
            SourceStatus {
                authentication: Some(authentication),
                ..SourceStatus::running(p.kind(), None)
            },
        );
    }
    let token = CancellationToken::new();
    // Several replicas share a PostgreSQL journal: singletons run on the leader.
    let leader = match journal_cfg.url {
        Some(_) => replica::Leader::spawn(
            journal.clone(),
            replica::LEADER_LEASE,
            replica::replica_id(),
            lease_ttl(&config),
            token.clone(),
        ),
        None => replica::Leader::single(),
    };
    tokio::spawn(replica::ping_loop(journal.clone(), token.clone()));
    let ctx = Arc::new(Ctx {
        journal: journal.clone(),
        state: ArcSwap::from_pointee(loaded),
        metrics,
        sources: std::sync::Mutex::new(statuses),
        loader,
        server: server.clone(),
        after_commit,
        redactor,
        states: states.report(),
        leader,
        mcp,
        streams: stream::Streams::new(
            server.max_streams,
            (server.stream_poll_secs > 0).then(|| Duration::from_secs(server.stream_poll_secs)),
            Duration::from_secs(server.stream_keep_alive_secs.max(1)),
            token.clone(),
        ),
    });
    let locks = states.locks();
    let workspaces = states.workspaces();
    let (tx, rx) = mpsc::channel(server.queue_capacity.max(1));
    let worker = tokio::spawn(worker::run(rx, ctx.clone()));
    outcomes::spawn(ctx.clone(), token.clone());

    let mut source_tasks = Vec::new();
    for (name, kind, source) in pulls {
        if let Ok(mut m) = ctx.sources.lock() {
            m.insert(name.clone(), SourceStatus::running(&kind, source.health()));
        }
        let (stx, mut srx) = mpsc::channel(SOURCE_CHANNEL);
        let main_tx = tx.clone();
        let tag: Arc<str> = name.clone().into();
        tokio::spawn(async move {
            while let Some(msg) = srx.recv().await {
                if main_tx
                    .send(worker::Envelope {
                        source: tag.clone(),
                        msg,
                    })
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
        let run = source.run(stx, token.child_token());
        let ctx2 = ctx.clone();
        source_tasks.push(tokio::spawn(async move {
            let result = run.await;
            let (state, error) = match result {
                Ok(()) => (SourceState::Stopped, None),
                Err(e) => {
                    tracing::error!(source = %name, error = %e, "Source stopped with an error.");
                    (SourceState::Failed, Some(e.to_string()))
                }
            };
            if let Ok(mut m) = ctx2.sources.lock()
                && let Some(s) = m.get_mut(&name)
            {
                s.state = state;
                s.error = error;
            }
        }));
        tracing::info!(source_type = %kind, "Source started.");
    }

    // The periodic backstop (issue 15): workspaces with `backstop_interval`, on the
    // leader, through the remediator.
    tokio::spawn(backstop::run(
        ctx.clone(),
        states.workspaces(),
        token.clone(),
    ));
    let mut states = states;
    if journal_cfg.url.is_some() {
        // Several replicas: the leader lists the workspace sets, the others follow.
        states.share(states::SharedListing {
            journal: journal.clone(),
            leader: ctx.leader.clone(),
            holder: replica::replica_id().to_owned(),
        });
    }
    // The reload task owns the state set and its spool folder: the folder is removed
    // when the task ends at shutdown (awaited below), or here when there is no reload.
    let reload = if server.state_reload_secs > 0 {
        Some(tokio::spawn(reload::run(
            ctx.clone(),
            states,
            Duration::from_secs(server.state_reload_secs),
            token.clone(),
        )))
    } else {
        if !config.workspace_sets.is_empty() {
            tracing::warn!(
                "state_reload_secs = 0: states are not reloaded and [[workspace_sets]] are not listed again."
            );
        }
        drop(states);
        None
    };

    let prune = match retention {
        Some(r) => {
            tracing::info!(
                retain_days = journal_cfg.retain_days,
                interval_secs = r.interval.as_secs(),
                "Journal retention on."
            );
            Some(tokio::spawn(retention::run(ctx.clone(), r, token.clone())))
        }
        None => {
            tracing::info!("Journal retention off (retain_days = 0): events are kept forever.");
            None
        }
    };

    let app = http::router(
        state::AppState {
            ctx: ctx.clone(),
            tx: tx.clone(),
        },
        pushes,
        server.body_limit_bytes,
    );
    drop(tx);
    let http_token = token.clone();
    let limits = http::Limits {
        header_read_timeout: Duration::from_secs(server.header_read_timeout_secs.max(1)),
        max_connections: server.max_connections.max(1),
    };
    let http = tokio::spawn(http::serve(listener, app, limits, http_token));
    tracing::info!(addr = %local_addr, "Listening.");

    let grace = Duration::from_secs(server.shutdown_grace_secs);
    let stop = token.clone();
    let journal2 = journal.clone();
    let task = tokio::spawn(async move {
        stop.cancelled().await;
        let deadline = tokio::time::Instant::now() + grace;
        let mut result = Ok(());
        let http_abort = http.abort_handle();
        match tokio::time::timeout_at(deadline, http).await {
            Ok(Ok(Err(e))) => result = Err(ServeError::Http(e)),
            Err(_) => {
                tracing::warn!(
                    "Shutdown grace elapsed with pushes in flight; they were not acknowledged."
                );
                http_abort.abort();
            }
            _ => {}
        }
        for t in source_tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout_at(deadline, t).await.is_err() {
                abort.abort();
            }
        }
        let worker_abort = worker.abort_handle();
        if tokio::time::timeout_at(deadline, worker).await.is_err() {
            tracing::warn!(
                "Shutdown grace elapsed; unanswered messages are released for redelivery."
            );
            worker_abort.abort();
        }
        if let Some(reload) = reload {
            // It stops at the cancellation, mid-tick too; then its spool folder goes.
            let abort = reload.abort_handle();
            if tokio::time::timeout_at(deadline, reload).await.is_err() {
                abort.abort();
            }
        }
        if let Some(prune) = prune {
            // Stops after the batch it is writing; aborting only drops the wait, the
            // batch still commits before the close below.
            let abort = prune.abort_handle();
            if tokio::time::timeout_at(deadline, prune).await.is_err() {
                abort.abort();
            }
        }
        if owned {
            journal2.close().await;
        }
        tracing::info!("Stopped.");
        result
    });
    Ok(Running {
        local_addr,
        shutdown: token,
        task,
        journal,
        locks,
        workspaces,
    })
}
