//! Where each workspace's state comes from, for `serve`, `replay` and `validate`: one
//! loading path for every kind of workspace.
//!
//! Every workspace, whatever its backend, is a `driftreactor_state::StateSource`
//! ([`open_workspace`]): a local file, an object in S3 / GCS / Azure Blob Storage, an
//! HCP Terraform / Terraform Enterprise workspace (`tfe://`), or a `state_command`. A
//! `[[workspace_sets]]` entry is listed ([`discover`]) into one workspace per state
//! found. The bytes each source returns are built into the graph by
//! [`driftreactor_pipeline::estate::load_bytes`] (one parse gives the graph, the
//! states' facts and their sensitive values). Fetching is asynchronous I/O and lives
//! here; the graph building stays pure in the pipeline crate.
//!
//! `serve` keeps a [`StateSet`]: the workspaces with their sources, the **last good
//! state** of each, as a file in the spool (`crate::spool`: streamed there by its
//! source, never held whole in memory; a rebuild after one workspace changed downloads
//! only that one and reads the others' files, and a workspace that cannot be read now
//! keeps its last good state in every new graph), the version last tried (so a bad object is not downloaded again until it
//! changes), Terraform's lock as last seen, and the workspace sets with their last
//! listing. The reload task (`crate::reload`) is its only writer; readers get
//! snapshots: [`LockTable`] (is workspace W's state locked now?), [`WorkspaceTable`]
//! (the current workspaces, name → config) and the `/readyz` report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use driftreactor_config::{Config, WorkspaceConfig, WorkspaceSetConfig};
use driftreactor_journal::{ListedWorkspace, Listing, SharedJournal};
use driftreactor_pipeline::estate::{SpooledState, StateBytes, StateInput};
use driftreactor_state::{
    ErrorKind, Fetch, LockInfo, SourceError, StateLister, StateLocation, StateSource, Version,
};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;
use tokio::sync::watch;

use crate::replica::Leader;
use crate::spool::{Spool, SpoolFile};

/// A follower lists a set itself once the stored listing is older than this many
/// `list_interval_secs` (the leader is gone, or cannot list or write): a dead leader
/// never freezes a set.
pub const STALE_LISTING_INTERVALS: u32 = 3;

/// The `set` label of `driftreactor_workspace_set_listings_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct SetLabels {
    set: String,
}

/// Workspace-set listings this process ran itself, by set (process-wide, registered by
/// [`crate::metrics::Metrics`]).
pub(crate) static SET_LISTINGS: std::sync::LazyLock<Family<SetLabels, Counter>> =
    std::sync::LazyLock::new(Family::default);

/// How long a `state_command` may run before its process group is killed, seconds
/// (`terraform state pull` of a large state over a slow backend included).
pub const STATE_COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

/// How many workspaces are read (or looked at for their lock) at once.
pub const READ_CONCURRENCY: usize = 16;

/// Why a workspace's state or a workspace set could not be opened, listed or read.
/// Each message names the workspace (or set), the location (a path or URL, never a
/// credential) and the store's answer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A workspace's state source could not be opened or read.
    #[error("workspace {workspace}: {source}")]
    Workspace {
        /// The workspace name.
        workspace: String,
        /// The config field (`workspaces[2].state`, `workspace_sets[0].state`).
        field: String,
        /// The state source's error: location, kind and the store's answer.
        #[source]
        source: SourceError,
    },
    /// A workspace set could not be listed.
    #[error("workspace set {set}: cannot list {}: {}", source.location, source.message)]
    List {
        /// The set's name.
        set: String,
        /// The config field (`workspace_sets[0].state`).
        field: String,
        /// The lister's error.
        #[source]
        source: SourceError,
    },
    /// The spool folder for the workspaces' last good states could not be made.
    #[error("cannot make the state spool folder in {dir}: {reason}")]
    Spool {
        /// Where it was to be made (`[server] state_spool_dir`, or the system
        /// temporary folder).
        dir: String,
        /// The reason.
        reason: String,
    },
    /// Two workspaces have the same name (a set found a workspace `[[workspaces]]`
    /// already names, or two sets found the same name).
    #[error("workspace {workspace} is defined twice (by {first} and by {second})")]
    Duplicate {
        /// The name.
        workspace: String,
        /// Where it was first defined (`[[workspaces]]` or `workspace set NAME`).
        first: String,
        /// The config field of the second definition.
        field: String,
        /// Where it was found again.
        second: String,
    },
}

impl Error {
    /// The config field the error is about (`workspaces[i].state`,
    /// `workspace_sets[i].state`).
    pub fn field(&self) -> &str {
        match self {
            Error::Workspace { field, .. }
            | Error::List { field, .. }
            | Error::Duplicate { field, .. } => field,
            Error::Spool { .. } => "server.state_spool_dir",
        }
    }

    /// The store's kind of failure, when a store answered.
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            Error::Workspace { source, .. } | Error::List { source, .. } => Some(source.kind),
            Error::Duplicate { .. } | Error::Spool { .. } => None,
        }
    }

    /// The error as the config crate's error naming `config`'s file, the field and
    /// this error's message (what `validate`, `replay` and `serve` print at start).
    pub fn to_config_error(&self, config: &Config) -> driftreactor_config::Error {
        driftreactor_config::Error::Invalid {
            path: config.path.clone().unwrap_or_default(),
            field: self.field().to_owned(),
            reason: self.to_string(),
        }
    }
}

/// Opens the state source of `ws`: its `state_command` (run in `dir`, else in
/// `base_dir`, the config file's folder, with the workspace's `env`, stopped after
/// [`STATE_COMMAND_TIMEOUT`]), else its `state` location (a path, `s3://`, `gs://`,
/// `az://`, `https://ACCOUNT.blob.core.windows.net/…`, `tfe://` with
/// `tfe_token_env`). Builds clients only: nothing is requested yet.
///
/// # Errors
/// The source's [`SourceError`] (kind `BadLocation`) naming the location.
pub fn open_workspace(
    ws: &WorkspaceConfig,
    base_dir: &Path,
) -> Result<Arc<dyn StateSource>, SourceError> {
    if let Some(argv) = &ws.state_command {
        let dir = ws.dir.clone().unwrap_or_else(|| base_dir.to_owned());
        let source = driftreactor_state::open_command(
            argv.clone(),
            dir,
            ws.env.clone(),
            STATE_COMMAND_TIMEOUT,
        )?;
        return Ok(Arc::from(source));
    }
    let text = ws.state.to_string_lossy();
    let location = StateLocation::parse(&text)?;
    Ok(Arc::from(driftreactor_state::open(
        &location,
        ws.tfe_token_env.as_deref(),
    )?))
}

/// The folder a config's relative paths and `state_command`s without `dir` are
/// resolved against: the config file's folder (the current folder without a file).
pub fn base_dir(config: &Config) -> PathBuf {
    config
        .path
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// One workspace with its state source.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// Its settings: a `[[workspaces]]` entry, or the entry a workspace set made
    /// ([`WorkspaceSetConfig::workspace`]).
    pub config: WorkspaceConfig,
    /// The workspace set that found it; `None` for a `[[workspaces]]` entry.
    pub set: Option<String>,
    /// The config field it comes from (`workspaces[1].state`, `workspace_sets[0].state`).
    pub field: String,
    /// Where its state is read.
    pub source: Arc<dyn StateSource>,
}

impl Workspace {
    /// The workspace name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Where its state is read (path, URL or command), credentials removed.
    pub fn location(&self) -> &str {
        self.source.location()
    }

    fn error(&self, source: SourceError) -> Error {
        Error::Workspace {
            workspace: self.config.name.clone(),
            field: self.field.clone(),
            source,
        }
    }

    /// The outcome of an unconditional read of this workspace's state (`None`: the
    /// store answered "not modified", which only a conditional read may get), errors
    /// naming the workspace, the field and the location.
    fn unconditional<T>(&self, read: Result<Option<T>, SourceError>) -> Result<T, Error> {
        match read {
            Ok(Some(got)) => Ok(got),
            Ok(None) => Err(self.error(SourceError {
                kind: ErrorKind::Other,
                location: self.location().to_owned(),
                message: "the store answered `not modified` to an unconditional read".into(),
            })),
            Err(mut e) => {
                if e.location.is_empty() {
                    e.location = self.location().to_owned();
                }
                Err(self.error(e))
            }
        }
    }
}

/// A `[[workspace_sets]]` entry with its lister.
#[derive(Debug)]
struct Set {
    config: WorkspaceSetConfig,
    field: String,
    lister: Box<dyn StateLister>,
}

impl Set {
    fn open(i: usize, config: &WorkspaceSetConfig) -> Result<Self, Error> {
        let field = format!("workspace_sets[{i}].state");
        let lister = driftreactor_state::lister(
            &config.state,
            &config.tags,
            config.tfe_token_env.as_deref(),
        )
        .map_err(|source| Error::List {
            set: config.name.clone(),
            field: field.clone(),
            source,
        })?;
        Ok(Self {
            config: config.clone(),
            field,
            lister,
        })
    }

    /// The workspaces the set matches now (counted in
    /// `driftreactor_workspace_set_listings_total{set}`).
    async fn list(&self) -> Result<Vec<Workspace>, Error> {
        SET_LISTINGS
            .get_or_create(&SetLabels {
                set: self.config.name.clone(),
            })
            .inc();
        let listed = self.lister.list().await.map_err(|source| Error::List {
            set: self.config.name.clone(),
            field: self.field.clone(),
            source,
        })?;
        Ok(listed
            .into_iter()
            .map(|l| Workspace {
                config: self.config.workspace(&l.workspace, l.source.location()),
                set: Some(self.config.name.clone()),
                field: self.field.clone(),
                source: Arc::from(l.source),
            })
            .collect())
    }

    /// The workspaces of a stored listing, each source opened again from its stored
    /// location as a `[[workspaces]]` entry of the same settings would be (the set's
    /// `tfe_token_env` included). A location that cannot be opened is left out and
    /// named in the second value.
    fn open_listing(&self, listing: &Listing, base: &Path) -> (Vec<Workspace>, Vec<String>) {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for lw in &listing.workspaces {
            let mut config = self.config.workspace("", &lw.location);
            config.name.clone_from(&lw.workspace);
            match open_workspace(&config, base) {
                Ok(source) => out.push(Workspace {
                    config,
                    set: Some(self.config.name.clone()),
                    field: self.field.clone(),
                    source,
                }),
                Err(e) => errors.push(format!(
                    "workspace set {}: stored workspace {}: {e}",
                    self.config.name, lw.workspace
                )),
            }
        }
        (out, errors)
    }
}

/// Where a set's current list came from (`/readyz` `workspace_sets[].source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ListingSource {
    /// This replica listed it (the embedded journal; the leader; at start; a follower
    /// whose stored listing is missing or stale).
    #[default]
    #[serde(rename = "self")]
    Own,
    /// Read from the journal, as the leader replica stored it.
    Journal,
}

/// Several replicas on one journal: the leader lists each workspace set and stores
/// the listing; the others follow the stored listing.
#[derive(Debug, Clone)]
pub(crate) struct SharedListing {
    /// The shared journal.
    pub journal: SharedJournal,
    /// The leader lease.
    pub leader: Leader,
    /// This replica's lease-holder name.
    pub holder: String,
}

/// Adds `found` to `out`, refusing a name already taken.
fn add_unique(out: &mut Vec<Workspace>, found: Workspace) -> Result<(), Error> {
    if let Some(first) = out.iter().find(|w| w.name() == found.name()) {
        let by = |w: &Workspace| match &w.set {
            Some(s) => format!("workspace set {s}"),
            None => "[[workspaces]]".to_owned(),
        };
        return Err(Error::Duplicate {
            workspace: found.config.name.clone(),
            first: by(first),
            field: found.field.clone(),
            second: by(&found),
        });
    }
    out.push(found);
    Ok(())
}

/// Every workspace of `config`: the `[[workspaces]]` in order, then each
/// `[[workspace_sets]]` entry listed once (its workspaces sorted by name).
///
/// # Errors
/// [`Error::Workspace`] for a state location that cannot be opened,
/// [`Error::List`] for a set that cannot be listed, [`Error::Duplicate`] for a name
/// found twice.
pub async fn discover(config: &Config) -> Result<Vec<Workspace>, Error> {
    let base = base_dir(config);
    let mut out = Vec::new();
    for (i, ws) in config.workspaces.iter().enumerate() {
        let field = format!("workspaces[{i}].state");
        let source = open_workspace(ws, &base).map_err(|source| Error::Workspace {
            workspace: ws.name.clone(),
            field: field.clone(),
            source,
        })?;
        add_unique(
            &mut out,
            Workspace {
                config: ws.clone(),
                set: None,
                field,
                source,
            },
        )?;
    }
    for (i, set) in config.workspace_sets.iter().enumerate() {
        for ws in Set::open(i, set)?.list().await? {
            add_unique(&mut out, ws)?;
        }
    }
    Ok(out)
}

/// One workspace's state as read: the bytes (with the workspace name and location)
/// and their version.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The state, for [`driftreactor_pipeline::estate::load_bytes`].
    pub state: StateBytes,
    /// Its version (ETag, generation, serial, hash of a command's output, or a file's
    /// size and modification time).
    pub version: Version,
}

/// Reads every workspace's state once (at most [`READ_CONCURRENCY`] at a time), in
/// the order given.
///
/// # Errors
/// [`Error::Workspace`] for the first workspace (in order) whose state cannot be read,
/// naming the workspace, the location and the store's answer.
pub async fn fetch(workspaces: &[Workspace]) -> Result<Vec<Fetched>, Error> {
    let sources: Vec<Arc<dyn StateSource>> = workspaces.iter().map(|w| w.source.clone()).collect();
    let reads = each(
        sources,
        |source| async move { source.read(None).await },
        task_failed,
    )
    .await;
    workspaces
        .iter()
        .zip(reads)
        .map(|(ws, read)| {
            ws.unconditional(read.map(|fetch| match fetch {
                Fetch::Changed { bytes, version } => Some(Fetched {
                    state: StateBytes::new(ws.name(), ws.location(), bytes),
                    version,
                }),
                Fetch::Unchanged => None,
            }))
        })
        .collect()
}

/// [`discover`] then [`fetch`]: every workspace of `config` with its state, read once
/// (`replay`, `validate`).
///
/// # Errors
/// As [`discover`] and [`fetch`].
pub async fn read_all(config: &Config) -> Result<(Vec<Workspace>, Vec<Fetched>), Error> {
    let workspaces = discover(config).await?;
    let fetched = fetch(&workspaces).await?;
    Ok((workspaces, fetched))
}

/// Terraform's state lock as `/readyz` and `/v1/resources` show it (every field as
/// much as the store says; null when unknown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockReport {
    /// The lock's `ID` (or the locking run).
    pub id: Option<String>,
    /// Who holds it (`user@host`, or the run's creator).
    pub who: Option<String>,
    /// The operation (`OperationTypeApply`, `OperationTypePlan`).
    pub operation: Option<String>,
    /// When it was taken (RFC 3339).
    pub created: Option<String>,
}

impl From<&LockInfo> for LockReport {
    fn from(l: &LockInfo) -> Self {
        Self {
            id: l.id.clone(),
            who: l.who.clone(),
            operation: l.operation.clone(),
            created: l.created.clone(),
        }
    }
}

/// "Who holds workspace W's state lock now?" as a closure ([`LockTable::to_fn`]).
pub type LockFn = Arc<dyn Fn(&str) -> Option<LockInfo> + Send + Sync>;

/// A snapshot view of Terraform's state locks, as the last reload tick saw them
/// (every `state_reload_secs`): cheap to clone and to ask, never blocks on I/O.
///
/// The remediator's `StateLocks` trait (`fn lock(&self, workspace: &str) ->
/// Option<LockInfo>`) is met by [`LockTable::lock`]; [`LockTable::to_fn`] gives the
/// same as a closure.
#[derive(Debug, Clone)]
pub struct LockTable {
    rx: watch::Receiver<Arc<BTreeMap<String, LockInfo>>>,
}

impl LockTable {
    /// Who holds workspace `workspace`'s state lock now (as of the last tick), `None`
    /// when it is not held, unknown (a `state_command`, a local file) or the
    /// workspace is not known.
    pub fn lock(&self, workspace: &str) -> Option<LockInfo> {
        self.rx.borrow().get(workspace).cloned()
    }

    /// Every held lock, by workspace.
    pub fn all(&self) -> Arc<BTreeMap<String, LockInfo>> {
        self.rx.borrow().clone()
    }

    /// [`LockTable::lock`] as a shareable closure.
    pub fn to_fn(&self) -> LockFn {
        let this = self.clone();
        Arc::new(move |w| this.lock(w))
    }

    /// A receiver that sees every change of the lock table (for a task that waits
    /// until a lock is gone).
    pub fn subscribe(&self) -> watch::Receiver<Arc<BTreeMap<String, LockInfo>>> {
        self.rx.clone()
    }
}

/// The current workspaces, name → settings: the `[[workspaces]]` and what the
/// workspace sets found at their last listing (new ones appear, deleted ones go).
#[derive(Debug, Clone)]
pub struct WorkspaceTable {
    rx: watch::Receiver<Arc<BTreeMap<String, WorkspaceConfig>>>,
}

impl WorkspaceTable {
    /// The workspaces now.
    pub fn current(&self) -> Arc<BTreeMap<String, WorkspaceConfig>> {
        self.rx.borrow().clone()
    }

    /// One workspace's settings, when it exists now.
    pub fn get(&self, workspace: &str) -> Option<WorkspaceConfig> {
        self.rx.borrow().get(workspace).cloned()
    }

    /// A receiver that sees every change of the list (`changed().await`), e.g. to
    /// hand the new list to the remediator.
    pub fn subscribe(&self) -> watch::Receiver<Arc<BTreeMap<String, WorkspaceConfig>>> {
        self.rx.clone()
    }
}

/// One workspace on `/readyz` (besides its `serial` / `lineage` from the graph).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkspaceReport {
    /// Where its state is read (path, URL or command), no credential.
    pub location: String,
    /// The workspace set that found it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set: Option<String>,
    /// Terraform's lock, when held ("an apply is running").
    pub lock: Option<LockReport>,
    /// Why the lock could not be looked at, at the last tick.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_error: Option<String>,
    /// Why its state cannot be read or is not a state (the graph keeps its last good
    /// state): shown after [`crate::reload::UNREADABLE_CHECKS`] failed checks in a row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The last successful check of its state, RFC 3339.
    pub last_check: Option<String>,
    /// Not in the graph yet: its state has not been read successfully once.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pending: bool,
}

/// One workspace set on `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetReport {
    /// The set's name.
    pub name: String,
    /// Its pattern, credentials removed.
    pub pattern: String,
    /// The workspaces it found at its last listing.
    pub workspaces: usize,
    /// The last successful listing, RFC 3339.
    pub last_listed: Option<String>,
    /// Why the last listing failed (the previous list stays in use).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where the current list came from: `self` (this replica listed it) or
    /// `journal` (the leader replica's stored listing).
    pub source: ListingSource,
    /// Who ran the listing in use (a replica's lease-holder name).
    pub listed_by: String,
    /// Listings of this set this replica ran itself since its start.
    pub listings: u64,
}

/// What `/readyz` shows of the states, as of the last reload tick.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatesReport {
    /// Per workspace.
    pub workspaces: BTreeMap<String, WorkspaceReport>,
    /// Per workspace set, in config order.
    pub sets: Vec<SetReport>,
    /// Every workspace error and failed listing on one line (`/readyz`
    /// `state_error`); `None` when every state is current.
    pub state_error: Option<String>,
}

fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// One workspace in a [`StateSet`].
#[derive(Debug)]
pub(crate) struct Entry {
    pub ws: Workspace,
    /// The last state that built into the graph (its spool file), and its version.
    pub good: Option<(Arc<SpoolFile>, Version)>,
    /// The version last fetched (good or not): passed as `previous` so that an
    /// unchanged bad object is not downloaded again.
    pub tried: Option<Version>,
    /// Failed checks in a row.
    pub failures: u32,
    /// The last failure's message.
    pub error: Option<String>,
    pub lock: Option<LockInfo>,
    pub lock_error: Option<String>,
    pub last_check: Option<SystemTime>,
}

impl Entry {
    fn new(ws: Workspace) -> Self {
        Self {
            ws,
            good: None,
            tried: None,
            failures: 0,
            error: None,
            lock: None,
            lock_error: None,
            last_check: None,
        }
    }

    /// The state the next graph uses for this workspace (its spool file), when it has
    /// any.
    pub fn good_state(&self) -> Option<StateInput> {
        self.good.as_ref().map(|(file, _)| self.spooled(file))
    }

    /// `file` (this workspace's last good state or a new one) as a build input, named
    /// by the workspace's location.
    pub(crate) fn spooled(&self, file: &SpoolFile) -> StateInput {
        StateInput::Spooled(SpooledState::new(
            self.ws.name(),
            self.ws.location(),
            file.path(),
        ))
    }
}

/// A workspace set in a [`StateSet`] and its last listing.
#[derive(Debug)]
pub(crate) struct SetEntry {
    set: Set,
    pub next_list: tokio::time::Instant,
    pub last_listed: Option<SystemTime>,
    pub error: Option<String>,
    pub members: BTreeSet<String>,
    /// Where the current list came from, and who listed it.
    pub source: ListingSource,
    pub listed_by: String,
    /// Listings this replica ran itself.
    pub listings: u64,
    /// The `listed_at` of the stored listing applied last (a follower applies each
    /// stored listing once).
    pub applied: Option<chrono::DateTime<chrono::Utc>>,
    /// A stale stored listing was already warned about.
    pub warned_stale: bool,
}

impl SetEntry {
    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.set.config.list_interval_secs.max(1))
    }

    pub fn name(&self) -> &str {
        &self.set.config.name
    }
}

/// The live set of workspaces `serve` reloads (see the module documentation): built
/// and read once at start ([`StateSet::open`]), then owned by the reload task.
#[derive(Debug)]
pub struct StateSet {
    pub(crate) entries: Vec<Entry>,
    pub(crate) sets: Vec<SetEntry>,
    locks: watch::Sender<Arc<BTreeMap<String, LockInfo>>>,
    workspaces: watch::Sender<Arc<BTreeMap<String, WorkspaceConfig>>>,
    report: Arc<arc_swap::ArcSwap<StatesReport>>,
    /// Why the last rebuild failed as a whole (not one workspace's state).
    pub(crate) load_error: Option<String>,
    /// The config file's folder (to open stored listings' sources).
    base: PathBuf,
    /// Several replicas on one journal: how listings are shared (`None`: this
    /// process lists every set itself).
    shared: Option<SharedListing>,
    /// Where the workspaces' states are kept between rebuilds.
    pub(crate) spool: Arc<Spool>,
}

impl StateSet {
    /// Opens every workspace of `config` ([`discover`]: the `[[workspace_sets]]` are
    /// listed once), reads each state once into a new spool folder (in `[server]
    /// state_spool_dir`, relative to the config file's folder, else in the system
    /// temporary folder; removed when the set is dropped) and looks at each lock once.
    ///
    /// # Errors
    /// As [`discover`] and [`fetch`]: a workspace that cannot be opened or read, a set
    /// that cannot be listed; [`Error::Spool`] when the spool folder cannot be made;
    /// nothing is kept then. A lock that cannot be looked at is not an error (it is
    /// shown on `/readyz`).
    pub async fn open(config: &Config) -> Result<Self, Error> {
        let mut sets = Vec::new();
        let mut workspaces = Vec::new();
        let base = base_dir(config);
        let spool = open_spool(config, &base)?;
        tracing::debug!(dir = %spool.dir().display(), "Workspace states are kept in the spool folder.");
        for (i, ws) in config.workspaces.iter().enumerate() {
            let field = format!("workspaces[{i}].state");
            let source = open_workspace(ws, &base).map_err(|source| Error::Workspace {
                workspace: ws.name.clone(),
                field: field.clone(),
                source,
            })?;
            add_unique(
                &mut workspaces,
                Workspace {
                    config: ws.clone(),
                    set: None,
                    field,
                    source,
                },
            )?;
        }
        let now = tokio::time::Instant::now();
        for (i, cfg) in config.workspace_sets.iter().enumerate() {
            let set = Set::open(i, cfg)?;
            let found = set.list().await?;
            let members = found.iter().map(|w| w.config.name.clone()).collect();
            for ws in found {
                add_unique(&mut workspaces, ws)?;
            }
            let interval = Duration::from_secs(cfg.list_interval_secs.max(1));
            sets.push(SetEntry {
                set,
                next_list: now + interval,
                last_listed: Some(SystemTime::now()),
                error: None,
                members,
                source: ListingSource::Own,
                listed_by: crate::replica::replica_id().to_owned(),
                listings: 1,
                applied: None,
                warned_stale: false,
            });
        }
        let fetched = fetch_into(&workspaces, &spool).await?;
        let checked = SystemTime::now();
        let mut entries: Vec<Entry> = workspaces
            .into_iter()
            .zip(fetched)
            .map(|(ws, (file, version))| {
                let mut e = Entry::new(ws);
                e.good = Some((Arc::new(file), version.clone()));
                e.tried = Some(version);
                e.last_check = Some(checked);
                e
            })
            .collect();
        let locks = look_at_locks(&entries).await;
        for (e, lock) in entries.iter_mut().zip(locks) {
            match lock {
                Ok(l) => e.lock = l,
                Err(err) => e.lock_error = Some(err.to_string()),
            }
        }
        let this = Self::with(entries, sets, base, spool);
        this.publish(crate::reload::UNREADABLE_CHECKS);
        Ok(this)
    }

    /// `entries` and `sets` with empty lock and workspace tables and an empty report
    /// (nothing published yet), their states kept in `spool`.
    fn with(entries: Vec<Entry>, sets: Vec<SetEntry>, base: PathBuf, spool: Arc<Spool>) -> Self {
        let (locks, _) = watch::channel(Arc::new(BTreeMap::new()));
        let (workspaces, _) = watch::channel(Arc::new(BTreeMap::new()));
        Self {
            entries,
            sets,
            locks,
            workspaces,
            report: Arc::new(arc_swap::ArcSwap::from_pointee(StatesReport::default())),
            load_error: None,
            base,
            shared: None,
            spool,
        }
    }

    /// The states of every workspace, in load order (for the first graph): each its
    /// spool file, named by its location.
    pub fn states(&self) -> Vec<StateInput> {
        self.entries.iter().filter_map(Entry::good_state).collect()
    }

    /// The workspaces' names, in load order.
    pub fn names(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| e.ws.config.name.clone())
            .collect()
    }

    /// The lock snapshot (kept current by the reload task once `serve` runs).
    pub fn locks(&self) -> LockTable {
        LockTable {
            rx: self.locks.subscribe(),
        }
    }

    /// The workspace list (kept current by the reload task once `serve` runs).
    pub fn workspaces(&self) -> WorkspaceTable {
        WorkspaceTable {
            rx: self.workspaces.subscribe(),
        }
    }

    /// The `/readyz` report's handle.
    pub(crate) fn report(&self) -> Arc<arc_swap::ArcSwap<StatesReport>> {
        self.report.clone()
    }

    /// Publishes the snapshots (locks, workspaces, report); errors show once they
    /// failed `show_after` checks in a row.
    pub(crate) fn publish(&self, show_after: u32) {
        self.publish_tables();
        self.publish_report(show_after);
    }

    /// Publishes the lock and workspace tables (the remediator's view) alone. The
    /// reload tick calls it before it swaps in a graph holding a newly listed
    /// workspace, so the remediator hears of the workspace (its `dir`) and of its
    /// lock before any event can be routed to it.
    pub(crate) fn publish_tables(&self) {
        let locks: BTreeMap<String, LockInfo> = self
            .entries
            .iter()
            .filter_map(|e| e.lock.clone().map(|l| (e.ws.config.name.clone(), l)))
            .collect();
        self.locks.send_if_modified(|old| {
            if **old == locks {
                return false;
            }
            *old = Arc::new(locks);
            true
        });
        let workspaces: BTreeMap<String, WorkspaceConfig> = self
            .entries
            .iter()
            .map(|e| (e.ws.config.name.clone(), e.ws.config.clone()))
            .collect();
        self.workspaces.send_if_modified(|old| {
            if **old == workspaces {
                return false;
            }
            *old = Arc::new(workspaces);
            true
        });
    }

    /// Publishes the report (`/readyz`); errors show once they failed `show_after`
    /// checks in a row.
    fn publish_report(&self, show_after: u32) {
        let mut errors = Vec::new();
        let mut report = StatesReport::default();
        for e in &self.entries {
            let error = e
                .error
                .clone()
                .filter(|_| e.failures >= show_after || e.good.is_none());
            if let Some(msg) = &error {
                errors.push(msg.clone());
            }
            report.workspaces.insert(
                e.ws.config.name.clone(),
                WorkspaceReport {
                    location: e.ws.location().to_owned(),
                    set: e.ws.set.clone(),
                    lock: e.lock.as_ref().map(LockReport::from),
                    lock_error: e.lock_error.clone(),
                    error,
                    last_check: e.last_check.map(rfc3339),
                    pending: e.good.is_none(),
                },
            );
        }
        for s in &self.sets {
            if let Some(msg) = &s.error {
                errors.push(msg.clone());
            }
            report.sets.push(SetReport {
                name: s.set.config.name.clone(),
                pattern: s.set.lister.pattern().to_owned(),
                workspaces: s.members.len(),
                last_listed: s.last_listed.map(rfc3339),
                error: s.error.clone(),
                source: s.source,
                listed_by: s.listed_by.clone(),
                listings: s.listings,
            });
        }
        if let Some(msg) = &self.load_error {
            errors.push(msg.clone());
        }
        report.state_error = (!errors.is_empty()).then(|| errors.join("; "));
        self.report.store(Arc::new(report));
    }

    /// Shares the workspace-set listings through `shared` (several replicas on one
    /// journal): from now on [`StateSet::relist`] lists a set only while this replica
    /// leads (and stores each listing), and otherwise follows the stored listing.
    pub(crate) fn share(&mut self, shared: SharedListing) {
        self.shared = Some(shared);
    }

    /// Brings each set's list up to date at `now`, and returns whether the workspace
    /// list changed. New workspaces are added (without a state yet: the next read
    /// fetches it), gone ones removed; a failed listing keeps the previous list and
    /// records the error.
    ///
    /// * One process (no [`StateSet::share`]): lists every set whose interval
    ///   elapsed.
    /// * Several replicas, this one leading: the same, and stores each listing
    ///   (successful or not) in the journal.
    /// * Several replicas, following: reads each set's stored listing (one small
    ///   query per set and tick) and applies a new one; when there is none yet, it is
    ///   older than [`STALE_LISTING_INTERVALS`] intervals, or the journal cannot be
    ///   read, it lists the set itself once its own interval elapsed (without storing
    ///   it).
    pub(crate) async fn relist(&mut self, now: tokio::time::Instant) -> bool {
        let mut changed = false;
        for i in 0..self.sets.len() {
            let due = self.sets[i].next_list <= now;
            let interval = self.sets[i].interval();
            let name = self.sets[i].name().to_owned();
            let shared = self.shared.clone();
            match shared {
                None => {
                    if due {
                        self.sets[i].next_list = now + interval;
                        let found = self.list_own(i).await;
                        changed |= self.apply(i, found);
                    }
                }
                Some(sh) if sh.leader.is_leader() => {
                    if due {
                        self.sets[i].next_list = now + interval;
                        let found = self.list_own(i).await;
                        let listing = self.listing_of(i, &found, &sh.holder);
                        changed |= self.apply(i, found);
                        if let Err(e) = sh.journal.put_listing(name.clone(), listing).await {
                            tracing::warn!(set = %name, error = %e, "Cannot store the workspace set listing; the other replicas list it themselves once it is stale.");
                        }
                    }
                }
                Some(sh) => {
                    let stored = sh.journal.get_listing(name.clone()).await;
                    let max_age = interval * STALE_LISTING_INTERVALS;
                    let fresh = match &stored {
                        Ok(Some(l)) => {
                            let age = (chrono::Utc::now() - l.listed_at)
                                .to_std()
                                .unwrap_or_default();
                            age <= max_age
                        }
                        _ => false,
                    };
                    match stored {
                        Ok(Some(l)) if fresh => {
                            // The leader lists it: our own listing is not due.
                            self.sets[i].next_list = now + interval;
                            self.sets[i].warned_stale = false;
                            if self.sets[i].applied != Some(l.listed_at) {
                                changed |= self.follow(i, &l);
                            }
                        }
                        other => {
                            if due {
                                match &other {
                                    Ok(Some(l)) if !self.sets[i].warned_stale => {
                                        tracing::warn!(set = %name, listed_by = %l.holder, listed_at = %l.listed_at, "The stored workspace set listing is stale (no leader lists it); listing it here.");
                                        self.sets[i].warned_stale = true;
                                    }
                                    Err(e) => {
                                        tracing::warn!(set = %name, error = %e, "Cannot read the stored workspace set listing; listing it here.");
                                    }
                                    _ => {}
                                }
                                self.sets[i].next_list = now + interval;
                                let found = self.list_own(i).await;
                                changed |= self.apply(i, found);
                            }
                        }
                    }
                }
            }
        }
        changed
    }

    /// Lists set `i` here, recording this replica as the lister.
    async fn list_own(&mut self, i: usize) -> Result<Vec<Workspace>, Error> {
        let found = self.sets[i].set.list().await;
        let set = &mut self.sets[i];
        set.listings += 1;
        set.source = ListingSource::Own;
        set.listed_by = crate::replica::replica_id().to_owned();
        set.applied = None;
        found
    }

    /// The listing to store for set `i` after `found`: its workspaces (sorted by
    /// name), or after a failure the list in use with the error.
    fn listing_of(&self, i: usize, found: &Result<Vec<Workspace>, Error>, holder: &str) -> Listing {
        let set = self.sets[i].name();
        let mut workspaces: Vec<ListedWorkspace> = match found {
            Ok(ws) => ws
                .iter()
                .map(|w| ListedWorkspace {
                    workspace: w.config.name.clone(),
                    location: w.location().to_owned(),
                })
                .collect(),
            Err(_) => self
                .entries
                .iter()
                .filter(|e| e.ws.set.as_deref() == Some(set))
                .map(|e| ListedWorkspace {
                    workspace: e.ws.config.name.clone(),
                    location: e.ws.location().to_owned(),
                })
                .collect(),
        };
        workspaces.sort_by(|a, b| a.workspace.cmp(&b.workspace));
        Listing {
            workspaces,
            listed_at: chrono::Utc::now(),
            holder: holder.to_owned(),
            error: found.as_ref().err().map(ToString::to_string),
        }
    }

    /// Applies the stored listing `l` to set `i` (a follower); returns whether the
    /// workspace list changed.
    fn follow(&mut self, i: usize, l: &Listing) -> bool {
        let (found, errors) = self.sets[i].set.open_listing(l, &self.base);
        let name = self.sets[i].name().to_owned();
        tracing::debug!(set = %name, listed_by = %l.holder, workspaces = found.len(), "Following the stored workspace set listing.");
        let changed = self.apply(i, Ok(found));
        let set = &mut self.sets[i];
        set.source = ListingSource::Journal;
        set.listed_by.clone_from(&l.holder);
        set.applied = Some(l.listed_at);
        set.last_listed = Some(SystemTime::from(l.listed_at));
        let mut all: Vec<String> = l.error.iter().cloned().collect();
        all.extend(errors);
        if !all.is_empty() {
            set.error = Some(all.join("; "));
        }
        changed
    }

    /// Applies a listing's outcome to set `i`: new workspaces added, gone ones
    /// removed; a failed listing keeps the previous list and records the error.
    /// Returns whether the workspace list changed.
    fn apply(&mut self, i: usize, found: Result<Vec<Workspace>, Error>) -> bool {
        let mut changed = false;
        let name = self.sets[i].name().to_owned();
        match found {
            Err(e) => {
                tracing::warn!(set = %name, error = %e, "Workspace set listing failed; keeping the previous list.");
                self.sets[i].error = Some(e.to_string());
            }
            Ok(found) => {
                let set = &mut self.sets[i];
                set.error = None;
                set.last_listed = Some(SystemTime::now());
                let names: BTreeSet<String> = found.iter().map(|w| w.config.name.clone()).collect();
                let gone: Vec<String> = set.members.difference(&names).cloned().collect();
                set.members = names;
                for g in &gone {
                    tracing::info!(set = %name, workspace = %g, "Workspace gone from its set.");
                }
                let before = self.entries.len();
                self.entries.retain(|e| {
                    e.ws.set.as_deref() != Some(name.as_str()) || !gone.contains(&e.ws.config.name)
                });
                changed |= self.entries.len() != before;
                for ws in found {
                    match self.entries.iter_mut().find(|e| e.ws.name() == ws.name()) {
                        Some(e) if e.ws.set.as_deref() == Some(name.as_str()) => {
                            // Still there: keep its source (and its versions).
                        }
                        Some(_) => {
                            let msg = format!(
                                "workspace set {name}: found workspace {} that another entry already defines; ignored",
                                ws.name()
                            );
                            tracing::warn!("{msg}");
                            self.sets[i].error = Some(msg);
                        }
                        None => {
                            tracing::info!(set = %name, workspace = %ws.name(), location = %ws.location(), "New workspace in its set.");
                            self.entries.push(Entry::new(ws));
                            changed = true;
                        }
                    }
                }
            }
        }
        changed
    }
}

/// Runs `work` on each of `items`, at most [`READ_CONCURRENCY`] at once (each its own
/// task), and returns the results in the order of `items`. A task that panicked (a
/// bug) answers `panicked(message)`.
async fn each<I, T, F, Fut>(items: Vec<I>, work: F, panicked: fn(String) -> T) -> Vec<T>
where
    I: Send + 'static,
    T: Send + 'static,
    F: Fn(I) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let permits = Arc::new(tokio::sync::Semaphore::new(READ_CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    let n = items.len();
    for (i, item) in items.into_iter().enumerate() {
        let permits = permits.clone();
        let fut = work(item);
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            (i, fut.await)
        });
    }
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((i, r)) => out[i] = Some(r),
            Err(e) => tracing::error!(error = %e, "A state read task failed."),
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| panicked("the state read task stopped unexpectedly".into())))
        .collect()
}

fn task_failed<T>(message: String) -> Result<T, SourceError> {
    Err(SourceError {
        kind: ErrorKind::Other,
        location: String::new(),
        message,
    })
}

/// Looks at every entry's lock, at most [`READ_CONCURRENCY`] at a time, in order.
pub(crate) async fn look_at_locks(entries: &[Entry]) -> Vec<Result<Option<LockInfo>, SourceError>> {
    let sources: Vec<Arc<dyn StateSource>> = entries.iter().map(|e| e.ws.source.clone()).collect();
    each(
        sources,
        |source| async move { source.lock().await },
        task_failed,
    )
    .await
}

/// What one conditional read into the spool gave: `None` when unchanged, else the
/// new file and its version.
pub(crate) type SpoolRead = Result<Option<(SpoolFile, Version)>, SourceError>;

/// Reads every entry conditionally (`previous` = the version last tried) into new
/// files of `spool`, at most [`READ_CONCURRENCY`] at a time, in order.
pub(crate) async fn read_conditionally(entries: &[Entry], spool: &Arc<Spool>) -> Vec<SpoolRead> {
    let jobs: Vec<(Arc<dyn StateSource>, Option<Version>)> = entries
        .iter()
        .map(|e| (e.ws.source.clone(), e.tried.clone()))
        .collect();
    let spool = spool.clone();
    each(
        jobs,
        move |(source, previous)| {
            let spool = spool.clone();
            async move { crate::spool::read_into(&spool, &*source, previous.as_ref()).await }
        },
        task_failed,
    )
    .await
}

/// The spool of `config`: a new folder in `[server] state_spool_dir` (relative to
/// `base`), else in the system temporary folder.
fn open_spool(config: &Config, base: &Path) -> Result<Arc<Spool>, Error> {
    let server: crate::ServerConfig =
        config
            .section("server", config.server.as_ref())
            .map_err(|e| Error::Spool {
                dir: "[server]".into(),
                reason: e.to_string(),
            })?;
    let parent = server.state_spool_dir.map(|d| base.join(d));
    Spool::create(parent.as_deref()).map_err(|e| Error::Spool {
        dir: parent.map_or_else(
            || std::env::temp_dir().display().to_string(),
            |p| p.display().to_string(),
        ),
        reason: e.to_string(),
    })
}

/// Reads every workspace's state once into new files of `spool` (at most
/// [`READ_CONCURRENCY`] at a time), in the order given.
///
/// # Errors
/// [`Error::Workspace`] for the first workspace (in order) whose state cannot be read,
/// naming the workspace, the location and the store's answer.
async fn fetch_into(
    workspaces: &[Workspace],
    spool: &Arc<Spool>,
) -> Result<Vec<(SpoolFile, Version)>, Error> {
    let sources: Vec<Arc<dyn StateSource>> = workspaces.iter().map(|w| w.source.clone()).collect();
    let owned = spool.clone();
    let reads = each(
        sources,
        move |source| {
            let spool = owned.clone();
            async move { crate::spool::read_into(&spool, &*source, None).await }
        },
        task_failed,
    )
    .await;
    workspaces
        .iter()
        .zip(reads)
        .map(|(ws, read)| ws.unconditional(read))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = r#"{"version": 4, "terraform_version": "1.11.4", "serial": 3, "lineage": "l", "outputs": {}, "resources": []}"#;

    #[tokio::test]
    async fn files_and_commands_are_read_through_their_sources() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prod.tfstate"), STATE).unwrap();
        let config = Config::parse(
            "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n\
             [[workspaces]]\nname = \"cmd\"\nstate_command = [\"cat\", \"prod.tfstate\"]\n",
            &dir.path().join("driftreactor.toml"),
        )
        .unwrap();
        let (ws, fetched) = read_all(&config).await.unwrap();
        assert_eq!(ws.len(), 2);
        assert_eq!(fetched[0].state.workspace, "prod");
        assert_eq!(&*fetched[1].state.bytes, STATE.as_bytes());
        assert!(
            ws[1].location().contains("state_command"),
            "{}",
            ws[1].location()
        );
    }

    /// A source whose lock is held by `ci@runner`.
    #[derive(Debug)]
    struct Locked;

    impl StateSource for Locked {
        fn location(&self) -> &str {
            "s3://tfstate/prod.tfstate"
        }
        fn read<'a>(
            &'a self,
            _previous: Option<&'a Version>,
        ) -> driftreactor_state::BoxFuture<'a, Result<Fetch, SourceError>> {
            Box::pin(async { Ok(Fetch::Unchanged) })
        }
        fn lock<'a>(
            &'a self,
        ) -> driftreactor_state::BoxFuture<'a, Result<Option<LockInfo>, SourceError>> {
            Box::pin(async {
                Ok(Some(LockInfo {
                    id: Some("5e1a".into()),
                    who: Some("ci@runner".into()),
                    ..LockInfo::default()
                }))
            })
        }
    }

    /// `text` as the config file `/etc/dr/driftreactor.toml`.
    fn parse(text: &str) -> Config {
        Config::parse(text, Path::new("/etc/dr/driftreactor.toml")).unwrap()
    }

    #[tokio::test]
    async fn the_lock_and_workspace_tables_follow_what_is_published() {
        let config =
            parse("[[workspaces]]\nname = \"prod\"\nstate = \"s3://tfstate/prod.tfstate\"\n");
        let ws = Workspace {
            config: config.workspaces[0].clone(),
            set: None,
            field: "workspaces[0].state".into(),
            source: Arc::new(Locked),
        };
        let mut set = StateSet::with(
            vec![Entry::new(ws)],
            Vec::new(),
            PathBuf::from("/etc/dr"),
            Spool::create(None).unwrap(),
        );
        let table = set.locks();
        let to_fn = table.to_fn();
        let list = set.workspaces();
        assert_eq!(table.lock("prod"), None);
        let seen = look_at_locks(&set.entries).await;
        set.entries[0].lock = seen.into_iter().next().unwrap().unwrap();
        set.publish(3);
        assert_eq!(
            table.lock("prod").unwrap().who.as_deref(),
            Some("ci@runner")
        );
        assert_eq!(to_fn("prod").unwrap().id.as_deref(), Some("5e1a"));
        assert_eq!(table.lock("staging"), None);
        assert_eq!(list.get("prod").unwrap().name, "prod");
        let report = set.report().load_full();
        let prod = &report.workspaces["prod"];
        assert_eq!(prod.location, "s3://tfstate/prod.tfstate");
        assert_eq!(prod.lock.as_ref().unwrap().id.as_deref(), Some("5e1a"));
        // Never read successfully: pending, and its error shows at once.
        assert!(prod.pending);
        set.entries[0].error = Some("workspace prod: s3://tfstate/prod.tfstate: denied".into());
        set.publish(3);
        assert!(
            set.report()
                .load()
                .state_error
                .as_deref()
                .unwrap()
                .contains("denied")
        );
    }

    /// A lister answering its scripted listings in turn (an `Err` is a failed one).
    #[derive(Debug)]
    struct Scripted(std::sync::Mutex<Vec<Result<Vec<&'static str>, &'static str>>>);

    impl StateLister for Scripted {
        fn pattern(&self) -> &str {
            "s3://tfstate/env/*/terraform.tfstate"
        }
        fn list<'a>(
            &'a self,
        ) -> driftreactor_state::BoxFuture<'a, Result<Vec<driftreactor_state::Listed>, SourceError>>
        {
            let next = self.0.lock().unwrap().remove(0);
            Box::pin(async move {
                match next {
                    Ok(names) => Ok(names
                        .into_iter()
                        .map(|n| driftreactor_state::Listed {
                            workspace: n.to_owned(),
                            source: Box::new(Locked),
                        })
                        .collect()),
                    Err(answer) => Err(SourceError {
                        kind: ErrorKind::AccessDenied,
                        location: "s3://tfstate/env/*/terraform.tfstate".into(),
                        message: answer.into(),
                    }),
                }
            })
        }
    }

    /// A state set of one workspace set `envs` (prefix `aws-`, interval 1 s) whose
    /// lister answers `script` in turn, due now.
    fn scripted_set(script: Vec<Result<Vec<&'static str>, &'static str>>) -> StateSet {
        let config = parse(
            "[[workspace_sets]]\nname = \"envs\"\nprefix = \"aws-\"\nstate = \"s3://tfstate/env/*/terraform.tfstate\"\nlist_interval_secs = 1\n",
        );
        let set = Set {
            config: config.workspace_sets[0].clone(),
            field: "workspace_sets[0].state".into(),
            lister: Box::new(Scripted(std::sync::Mutex::new(script))),
        };
        StateSet::with(
            Vec::new(),
            vec![SetEntry {
                set,
                next_list: tokio::time::Instant::now(),
                last_listed: None,
                error: None,
                members: BTreeSet::new(),
                source: ListingSource::Own,
                listed_by: String::new(),
                listings: 0,
                applied: None,
                warned_stale: false,
            }],
            PathBuf::from("/etc/dr"),
            Spool::create(None).unwrap(),
        )
    }

    /// Several replicas on one journal (here one SQLite file): the leader lists and
    /// stores each listing; a follower applies the stored listing without listing
    /// (its lister has no answer scripted: a call would panic), rebuilding each
    /// source from the stored location; once the stored listing is older than three
    /// intervals, the follower lists the set itself.
    #[tokio::test]
    async fn a_follower_applies_the_leaders_stored_listing_and_lists_itself_once_it_is_stale() {
        let dir = tempfile::tempdir().unwrap();
        let journal = driftreactor_journal::connect(&driftreactor_journal::JournalConfig::at(
            dir.path().join("j.sqlite"),
        ))
        .await
        .unwrap();
        let mut leader = scripted_set(vec![Ok(vec!["blue", "green"]), Ok(vec!["green", "white"])]);
        leader.share(SharedListing {
            journal: journal.clone(),
            leader: Leader::single(),
            holder: "replica-a".into(),
        });
        let mut follower = scripted_set(vec![Ok(vec!["black"])]);
        follower.share(SharedListing {
            journal: journal.clone(),
            leader: Leader::never(),
            holder: "replica-b".into(),
        });
        let now = tokio::time::Instant::now();
        assert!(leader.relist(now).await);
        let stored = journal.get_listing("envs".into()).await.unwrap().unwrap();
        assert_eq!(stored.holder, "replica-a");
        assert_eq!(
            stored
                .workspaces
                .iter()
                .map(|w| (w.workspace.as_str(), w.location.as_str()))
                .collect::<Vec<_>>(),
            [
                ("aws-blue", "s3://tfstate/prod.tfstate"),
                ("aws-green", "s3://tfstate/prod.tfstate")
            ]
        );
        assert!(follower.relist(now).await);
        assert_eq!(follower.names(), ["aws-blue", "aws-green"]);
        assert_eq!(
            follower.entries[0].ws.location(),
            "s3://tfstate/prod.tfstate"
        );
        assert_eq!(follower.sets[0].listings, 0, "the follower did not list");
        follower.publish(3);
        let report = follower.report().load_full();
        assert_eq!(report.sets[0].source, ListingSource::Journal);
        assert_eq!(report.sets[0].listed_by, "replica-a");
        // The same stored listing again: nothing to do.
        assert!(!follower.relist(now + Duration::from_secs(5)).await);
        // The leader's next listing reaches the follower at its next tick.
        let later = now + Duration::from_secs(1);
        assert!(leader.relist(later).await);
        assert!(follower.relist(later).await);
        assert_eq!(follower.names(), ["aws-green", "aws-white"]);
        assert_eq!(follower.sets[0].listings, 0);
        // The leader is gone: its last listing is older than three intervals.
        let mut old = journal.get_listing("envs".into()).await.unwrap().unwrap();
        old.listed_at -= chrono::Duration::seconds(4);
        journal.put_listing("envs".into(), old).await.unwrap();
        let much_later = later + Duration::from_secs(5);
        assert!(follower.relist(much_later).await);
        assert_eq!(
            follower.names(),
            ["aws-black"],
            "the follower listed it itself"
        );
        assert_eq!(follower.sets[0].listings, 1);
        follower.publish(3);
        assert_eq!(follower.report().load().sets[0].source, ListingSource::Own);
        journal.close().await;
    }

    #[tokio::test]
    async fn a_relisting_adds_and_removes_workspaces_and_a_failed_one_keeps_the_list() {
        let config = parse(
            "[[workspace_sets]]\nname = \"envs\"\nprefix = \"aws-\"\nstate = \"s3://tfstate/env/*/terraform.tfstate\"\nlist_interval_secs = 1\n",
        );
        let set = Set {
            config: config.workspace_sets[0].clone(),
            field: "workspace_sets[0].state".into(),
            lister: Box::new(Scripted(std::sync::Mutex::new(vec![
                Ok(vec!["blue", "green"]),
                Err("AccessDenied: no s3:ListBucket"),
                Ok(vec!["green", "white"]),
            ]))),
        };
        let now = tokio::time::Instant::now();
        let mut states = StateSet::with(
            Vec::new(),
            vec![SetEntry {
                set,
                next_list: now,
                last_listed: None,
                error: None,
                members: BTreeSet::new(),
                source: ListingSource::Own,
                listed_by: String::new(),
                listings: 0,
                applied: None,
                warned_stale: false,
            }],
            PathBuf::from("/etc/dr"),
            Spool::create(None).unwrap(),
        );
        let list = states.workspaces();
        assert!(states.relist(now).await);
        assert_eq!(states.names(), ["aws-blue", "aws-green"]);
        // Not due yet: nothing is listed.
        assert!(!states.relist(now).await);
        let later = now + Duration::from_secs(1);
        assert!(
            !states.relist(later).await,
            "a failed listing changes nothing"
        );
        assert_eq!(states.names(), ["aws-blue", "aws-green"]);
        states.publish(3);
        let report = states.report().load_full();
        assert!(
            report.sets[0]
                .error
                .as_deref()
                .unwrap()
                .contains("AccessDenied")
        );
        assert!(
            report
                .state_error
                .as_deref()
                .unwrap()
                .contains("workspace set envs")
        );
        assert_eq!(report.sets[0].workspaces, 2);
        assert!(states.relist(later + Duration::from_secs(1)).await);
        assert_eq!(states.names(), ["aws-green", "aws-white"]);
        states.publish(3);
        assert!(states.report().load().sets[0].error.is_none());
        let current = list.current();
        assert_eq!(
            current.keys().collect::<Vec<_>>(),
            ["aws-green", "aws-white"]
        );
        assert_eq!(
            current["aws-white"].state,
            Path::new("s3://tfstate/prod.tfstate"),
            "the workspace's state is the listed object"
        );
    }

    /// `[server] state_spool_dir` (relative to the config file's folder) holds the
    /// spool folder; one that cannot be made there is named with the field.
    #[tokio::test]
    async fn states_are_spooled_in_the_configured_folder() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("prod.tfstate"), STATE).unwrap();
        std::fs::create_dir(dir.path().join("spool")).unwrap();
        let config = |spool: &str| {
            Config::parse(
                &format!(
                    "[[workspaces]]\nname = \"prod\"\nstate = \"prod.tfstate\"\n[server]\nstate_spool_dir = {spool:?}\n"
                ),
                &dir.path().join("driftreactor.toml"),
            )
            .unwrap()
        };
        let set = StateSet::open(&config("spool")).await.unwrap();
        assert!(set.spool.dir().starts_with(dir.path().join("spool")));
        let Some(StateInput::Spooled(s)) = set.states().into_iter().next() else {
            panic!("a spooled state");
        };
        assert!(s.path.starts_with(set.spool.dir()));
        assert_eq!(std::fs::read_to_string(&s.path).unwrap(), STATE);
        assert_eq!(s.origin, set.entries[0].ws.location());
        let folder = set.spool.dir().to_owned();
        drop(set);
        assert!(!folder.exists(), "the folder goes with the state set");

        let err = StateSet::open(&config("missing/spool")).await.unwrap_err();
        assert_eq!(err.field(), "server.state_spool_dir");
        assert!(err.to_string().contains("missing/spool"), "{err}");
    }

    #[tokio::test]
    async fn errors_name_the_workspace_the_field_and_the_location() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::parse(
            "[[workspaces]]\nname = \"prod\"\nstate = \"gone.tfstate\"\n",
            &dir.path().join("driftreactor.toml"),
        )
        .unwrap();
        let err = read_all(&config).await.unwrap_err();
        assert_eq!(err.field(), "workspaces[0].state");
        assert_eq!(err.kind(), Some(ErrorKind::NotFound));
        let text = err.to_config_error(&config).to_string();
        assert!(text.contains("workspace prod"), "{text}");
        assert!(text.contains("gone.tfstate"), "{text}");
        let config = Config::parse(
            "[[workspaces]]\nname = \"prod\"\nstate = \"ftp://x/y\"\n",
            &dir.path().join("driftreactor.toml"),
        )
        .unwrap();
        let err = read_all(&config).await.unwrap_err();
        assert!(err.to_string().contains("unsupported scheme"), "{err}");
    }
}
