//! The durable event journal: every event the sidecar handles is recorded here once,
//! and the journal is the dedupe key that makes redelivery harmless.
//!
//! Embedded SQLite (rusqlite, bundled) in WAL mode with `synchronous=FULL`. One
//! dedicated writer thread owns the write connection and is fed by a bounded channel;
//! it group-commits (everything queued, up to [`JournalConfig::max_batch`] entries,
//! waiting at most [`JournalConfig::max_batch_delay_ms`] for more) and answers each
//! caller only after `COMMIT` returned. Callers acknowledge their bus message only
//! after that answer, so a crash at any moment loses nothing: an unacknowledged
//! message comes back from the bus and [`Journal::append`] reports it as
//! [`Written::Duplicate`].
//!
//! Why `synchronous=FULL` and not `NORMAL`: with WAL, `NORMAL` survives a process
//! crash (kill -9) but can lose the last commits on power loss or a kernel panic,
//! and those events were already acknowledged on the bus, so they would be gone for
//! good. Group commit amortizes the extra fsync.
//!
//! The raw payload is never stored (it may hold secrets: request parameters,
//! tokens); only its SHA-256 and the normalized summary fields are.
//!
//! Remediation bookkeeping (schema version 2): an event appended with an
//! [`Entry::remediation`] request is also recorded as a `pending` remediation in the
//! same transaction, and stays so until the work items it fed finished; see
//! [`Journal::pending_remediations`], [`Journal::remediation_submitted`],
//! [`Journal::remediation_finished`]. The request is stored as the caller gives it
//! (`serve` redacts the event's request parameters first).
//!
//! Remediation memory (schema version 3): what the remediator remembers per address
//! between work items (attempts, reverts, pauses, our applies, open pull requests), as
//! plain data; see [`Journal::record_stamp`], [`Journal::record_pause`],
//! [`Journal::record_apply`], [`Journal::record_open_pr`] and their readers. The
//! remediator implements its `StateStore` trait on [`Journal`] with them.
//!
//! Drift lifecycle (schema version 4): each drift row's [`DriftStatus`] (`open`,
//! `remediating`, `reverted`, `pull_request_open`, `escalated`, `resolved`) with its
//! time and reason, as the remediator reports it; see [`Journal::drift_with`] and
//! [`Journal::set_drift_status`]. A drift event reopens its row.
//!
//! Drift transitions (schema version 7): every lifecycle transition of a drift row
//! (opened, reopened, each status change) in a durable, ordered log written in the
//! transaction of the change, for `/v1/stream`; see [`transitions`],
//! [`JournalStore::transitions`] and [`JournalStore::transition_wakeups`]. What changed
//! since a time, grouped by address: [`Journal::changes`] (`/v1/changes`).
//!
//! Schema: this crate is the one owner of the database file: one module opens every
//! connection (pragmas included) and migrates every table with versioned migrations
//! (`rusqlite_migration`, `PRAGMA user_version`); an older file is upgraded in place.
//!
//! Retention: [`Journal::prune`] deletes events older than a cutoff in short batches
//! through the same writer thread, keeping what remediation and `/v1/drift` still
//! need; `serve` runs it every [`JournalConfig::prune_interval_secs`] with
//! [`JournalConfig::retain_days`]. A pruned event id is no longer a duplicate.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use driftreactor_journal::{Entry, Journal, JournalConfig, Written};
//! use driftreactor_event::Provider;
//! let dir = tempfile::tempdir().unwrap();
//! let journal = Journal::open(&JournalConfig::at(dir.path().join("j.sqlite"))).unwrap();
//! let e = Entry::new(Provider::Aws, "evt-1", "test");
//! assert!(matches!(journal.append(vec![e.clone()]).await.unwrap()[0], Written::Recorded(_)));
//! assert_eq!(journal.append(vec![e]).await.unwrap()[0], Written::Duplicate);
//! assert_eq!(journal.count(), 1);
//! journal.close().await;
//! # });
//! ```
//!
//! The service uses the journal through [`JournalStore`] (a [`SharedJournal`] from
//! [`open`]): the seam where a PostgreSQL journal for several replicas plugs in (see
//! `docs/ARCHITECTURE.md`, "Where to add …").

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use driftreactor_event::{Action, Change, Provider, Reason, Verdict};
pub use driftreactor_event::{Decided, MatchRecord, ResourceKey};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

mod backstop;
mod changes;
#[cfg(feature = "postgres")]
pub mod copy;
mod lease;
mod lifecycle;
mod listing;
pub mod lock;
mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
mod prune;
mod query;
mod remediation;
mod schema;
mod store;
pub mod transitions;
mod writer;

pub use backstop::{BACKSTOP_SOURCE, BackstopRun, FoundBy};
pub use changes::{AddressChanges, ChangeEvent, ChangeQuery, MAX_EVENTS_PER_ADDRESS};
pub use lease::Lease;
pub use lifecycle::{DriftQuery, DriftStatus, DriftUpdate};
pub use listing::{ListedWorkspace, Listing};
pub use lock::{JournalLock, LockError};
pub use memory::{ApplyRecord, MAX_APPLIES, MAX_STAMPS, Stamp};
pub use prune::{DEFAULT_PRUNE_BATCH, PruneReport};
pub use query::{
    DriftRow, EventQuery, EventRow, RemediationQuery, RemediationRow, RemediationTarget,
};
pub use remediation::PendingRemediation;
pub use store::{JournalFuture, JournalStore, SharedJournal, StopSignal, connect, open};
pub use transitions::{DriftTransition, TransitionKind, TransitionQuery};

/// Result of a journal operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a journal operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database file could not be opened or set up.
    #[error("failed to open journal {path}: {source}")]
    Open {
        /// The SQLite file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A statement failed (disk full, I/O error, corruption); transient for callers:
    /// do not acknowledge, let the bus redeliver.
    #[error("journal {op} failed: {source}")]
    Sqlite {
        /// What was being done (`commit`, `insert`, `query events`).
        op: &'static str,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The group-commit transaction this append was part of failed (the message
    /// names the statement and SQLite's error); nothing of it is recorded. Transient.
    #[error("journal write failed: {0}")]
    Batch(String),
    /// The journal was closed (the process is shutting down).
    #[error("journal is closed")]
    Closed,
    /// The schema could not be brought up to date (a migration failed; nothing of it
    /// is applied).
    #[error("failed to migrate journal {path}: {source}")]
    Migrate {
        /// The SQLite file.
        path: PathBuf,
        /// The migration's error (naming SQLite's).
        #[source]
        source: rusqlite_migration::Error,
    },
    /// A storage backend other than the embedded SQLite file failed (its own error,
    /// named by the operation); transient for callers, as [`Error::Sqlite`].
    #[error("journal {op} failed: {source}")]
    Backend {
        /// What was being done.
        op: &'static str,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The `[journal]` settings do not describe a journal this build can open (an
    /// unknown URL scheme, a password both in the URL and in `password_env`, a
    /// missing environment variable, the `postgres` feature off); `field` names the
    /// setting.
    #[error("journal.{field}: {reason}")]
    Config {
        /// The `[journal]` key.
        field: &'static str,
        /// What is wrong with it (never a password).
        reason: String,
    },
    /// The database was written by a newer driftreactor (schema `user_version`).
    #[error("journal {path} has schema version {found}, this build reads up to {supported}")]
    Schema {
        /// The SQLite file.
        path: PathBuf,
        /// `PRAGMA user_version` found.
        found: i64,
        /// Highest version this build knows.
        supported: i64,
    },
}

/// `[journal]`: where and how the journal writes.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JournalConfig {
    /// The SQLite file (created if missing). Relative paths are resolved against the
    /// config file's directory by the caller. Default `driftreactor-journal.sqlite`.
    /// Ignored when [`JournalConfig::url`] is set.
    pub path: PathBuf,
    /// A PostgreSQL journal instead of the SQLite file:
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=…]` (the libpq URL;
    /// `postgresql://` too). Needs the `postgres` feature (on in the `driftreactor`
    /// binary). `None` (default): the SQLite file at [`JournalConfig::path`].
    pub url: Option<String>,
    /// The environment variable holding the PostgreSQL password (instead of putting
    /// it in [`JournalConfig::url`]; setting both is refused). Default none.
    pub password_env: Option<String>,
    /// PostgreSQL TLS mode, as libpq names it: `disable`, `allow`, `prefer`,
    /// `require`, `verify-ca`, `verify-full`. Overrides a `sslmode` in the URL;
    /// neither: `prefer` (libpq's default).
    pub sslmode: Option<SslMode>,
    /// The CA certificate file (PEM) `verify-ca` / `verify-full` check the server
    /// against (libpq's `sslrootcert`; the URL may carry it too). Default: the
    /// webpki roots.
    pub sslrootcert: Option<PathBuf>,
    /// Most PostgreSQL connections this process keeps (pool size). Default 8.
    pub max_connections: u32,
    /// How long a PostgreSQL operation waits for a connection (connecting included)
    /// before it fails, in seconds: what an append waits, at most, while the database
    /// is unreachable before it is refused (and nothing is acknowledged). Default 5.
    pub connect_timeout_secs: u64,
    /// Most entries committed in one transaction (group commit). Default 512.
    pub max_batch: usize,
    /// How long the writer waits for more entries after the first one before it
    /// commits, in milliseconds. 0 commits whatever is queued at once. Default 2.
    pub max_batch_delay_ms: u64,
    /// Capacity of the bounded queue of append requests in front of the writer
    /// thread; appenders wait (backpressure) when it is full. Default 1024.
    pub queue_capacity: usize,
    /// How long journaled events are kept, in days (counted from `received_at`);
    /// older ones are pruned ([`Journal::prune`]) except what remediation and the
    /// drift table still need. 0 keeps events forever. The journal is the dedupe
    /// key, so this must outlast the longest time a bus can redeliver a message;
    /// `serve` refuses 1 to 13 (SQS keeps messages up to 14 days). Default 30.
    pub retain_days: u64,
    /// How often `serve` prunes, in seconds (the first run is at start-up). At least
    /// 1; ignored with `retain_days = 0`. Default 3600.
    pub prune_interval_secs: u64,
}

impl std::fmt::Debug for JournalConfig {
    /// As the derived form, with the URL's password (if any) replaced by `***`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalConfig")
            .field("path", &self.path)
            .field("url", &self.url.as_deref().map(redact_url))
            .field("password_env", &self.password_env)
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("max_connections", &self.max_connections)
            .field("connect_timeout_secs", &self.connect_timeout_secs)
            .field("max_batch", &self.max_batch)
            .field("max_batch_delay_ms", &self.max_batch_delay_ms)
            .field("queue_capacity", &self.queue_capacity)
            .field("retain_days", &self.retain_days)
            .field("prune_interval_secs", &self.prune_interval_secs)
            .finish()
    }
}

/// `url` with the password of its `user:password@` part replaced by `***` (for logs,
/// `/readyz` and errors); anything else is returned as it is.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// PostgreSQL's TLS modes (libpq's `sslmode`), in the spelling libpq uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// Plain first, TLS if the server insists.
    Allow,
    /// TLS when the server offers it, else plain (libpq's default).
    Prefer,
    /// TLS, certificate not checked.
    Require,
    /// TLS, the certificate chain checked against the CA (`sslrootcert`).
    VerifyCa,
    /// As `verify-ca`, and the host name must match the certificate.
    VerifyFull,
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            path: PathBuf::from("driftreactor-journal.sqlite"),
            url: None,
            password_env: None,
            sslmode: None,
            sslrootcert: None,
            max_connections: 8,
            connect_timeout_secs: 5,
            max_batch: 512,
            max_batch_delay_ms: 2,
            queue_capacity: 1024,
            retain_days: 30,
            prune_interval_secs: 3600,
        }
    }
}

impl JournalConfig {
    /// The defaults, with the SQLite file at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            ..Self::default()
        }
    }

    /// Checks the PostgreSQL settings without connecting: `url` is a `postgres://` or
    /// `postgresql://` URL, the password is not both in it and in `password_env`, the
    /// `password_env` variable is set, `max_connections` and `connect_timeout_secs`
    /// are at least 1. Nothing to check for SQLite.
    ///
    /// # Errors
    /// [`Error::Config`] naming the key and the reason (never the password).
    pub fn check(&self) -> Result<()> {
        let Some(url) = self.url.as_deref() else {
            return Ok(());
        };
        let shown = redact_url(url);
        let bad = |field, reason: String| Err(Error::Config { field, reason });
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return bad(
                "url",
                format!("`{shown}` is not a postgres:// or postgresql:// URL"),
            );
        }
        if let Some(var) = self.password_env.as_deref() {
            if shown != url {
                return bad(
                    "password_env",
                    "the URL has a password too; keep one of them".into(),
                );
            }
            if std::env::var_os(var).is_none() {
                return bad(
                    "password_env",
                    format!("environment variable `{var}` is not set"),
                );
            }
        }
        if self.max_connections == 0 {
            return bad("max_connections", "must be at least 1".into());
        }
        if self.connect_timeout_secs == 0 {
            return bad("connect_timeout_secs", "must be at least 1 second".into());
        }
        Ok(())
    }

    /// The defaults, with the PostgreSQL journal at `url`.
    pub fn postgres(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::default()
        }
    }
}

/// One event to record: the normalized summary and the decision, never the raw
/// payload (only its SHA-256, see [`sha256_hex`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The provider; with `id` the dedupe key.
    pub provider: Provider,
    /// The bus-unique event id (DriftEvent `id`).
    pub id: String,
    /// The source that delivered it (`aws_sqs`, `gcp_pubsub_push`, …).
    pub source: String,
    /// The bus's message id (SQS `MessageId`, Pub/Sub `messageId`), for tracing.
    pub message_id: String,
    /// When the sidecar received it, UTC.
    pub received_at: DateTime<Utc>,
    /// When the change happened per the provider, UTC.
    pub occurred_at: Option<DateTime<Utc>>,
    /// Lowercase hex SHA-256 of the payload bytes the event came from.
    pub payload_sha256: String,
    /// Service (`ec2.amazonaws.com`).
    pub service: String,
    /// Operation (event name).
    pub operation: String,
    /// The kind of change, or none when the event is not a resource change.
    pub change: Option<Change>,
    /// The principal's most specific identity, when known.
    pub principal: Option<String>,
    /// Canonical ids of the changed resources.
    pub resource_ids: Vec<String>,
    /// `drift`, `unmanaged` or `ignored`.
    pub verdict: Verdict,
    /// The reason for `ignored` / unattributed `unmanaged`.
    pub reason: Option<Reason>,
    /// The event-level action.
    pub action: Action,
    /// Matched managed resources.
    pub matches: Vec<MatchRecord>,
    /// Dependents of the matches.
    pub dependents: Vec<ResourceKey>,
    /// Key shared by several log entries of one change (GCP operation id). When an
    /// event of the same provider and key is already recorded, the entry is recorded
    /// with [`Entry::repeated`] instead of its own verdict, reason and action.
    pub correlation_key: Option<String>,
    /// What to record instead of this entry's verdict, reason and action when an
    /// earlier event of its [`Entry::correlation_key`] is already recorded: the
    /// caller's rule for a later report of one change (the decider's
    /// `Decision::repeated`: `ignored` / `duplicate` for drift and unmanaged changes).
    /// `None`: always record as given. The journal applies it; it decides nothing.
    #[serde(default)]
    pub repeated: Option<Decided>,
    /// What the remediation hook needs to resubmit this event after a restart (its
    /// own JSON, opaque to the journal; `None` when the event has no action or
    /// remediation is off). Recorded as `pending` in the same transaction as the
    /// event, unless the journal stores the event as `ignored`; see
    /// [`Journal::pending_remediations`]. It is stored as given: redact it first.
    /// Not recorded when the entry is recorded with [`Entry::repeated`].
    #[serde(default)]
    pub remediation: Option<String>,
}

impl Entry {
    /// A minimal entry (verdict `unmanaged`, action `notify`, received now), for
    /// builders and tests.
    pub fn new(provider: Provider, id: impl Into<String>, source: impl Into<String>) -> Self {
        Self {
            provider,
            id: id.into(),
            source: source.into(),
            message_id: String::new(),
            received_at: Utc::now(),
            occurred_at: None,
            payload_sha256: String::new(),
            service: String::new(),
            operation: String::new(),
            change: None,
            principal: None,
            resource_ids: Vec::new(),
            verdict: Verdict::Unmanaged,
            reason: None,
            action: Action::Notify,
            matches: Vec::new(),
            dependents: Vec::new(),
            correlation_key: None,
            repeated: None,
            remediation: None,
        }
    }
}

/// What [`Journal::append`] did with one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Newly recorded and committed, with the verdict, reason and action as stored
    /// (the entry's own, or its [`Entry::repeated`] when an earlier event of its
    /// correlation key was already recorded).
    Recorded(Decided),
    /// Already recorded before (same provider and id): nothing written.
    Duplicate,
}

/// Whether recording this may have opened or reopened a drift row (a transition).
pub(crate) fn may_open_drift(w: &Written) -> bool {
    matches!(w, Written::Recorded(d) if d.verdict == Verdict::Drift)
}

/// Lowercase hex SHA-256 of `bytes` (the [`Entry::payload_sha256`] format).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    use std::fmt::Write;
    let digest = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

pub(crate) struct AppendRequest {
    entries: Vec<Entry>,
    answer: oneshot::Sender<Result<Vec<Written>>>,
}

/// Work for the writer thread outside the event appends (remediation bookkeeping,
/// retention batches): runs in its own transaction, in queue order with the appends.
pub(crate) type Job = Box<dyn FnOnce(&rusqlite::Transaction<'_>) -> Result<u64> + Send>;

pub(crate) enum Request {
    Append(AppendRequest),
    Exec(Job, oneshot::Sender<Result<u64>>),
    Close(oneshot::Sender<()>),
}

struct Inner {
    tx: mpsc::Sender<Request>,
    path: PathBuf,
    rows: Arc<AtomicU64>,
    reader: Arc<std::sync::Mutex<rusqlite::Connection>>,
    /// Counts this handle's commits that may have recorded a drift transition
    /// ([`JournalStore::transition_wakeups`]).
    wake: tokio::sync::watch::Sender<u64>,
}

/// A handle on the journal; cheap to clone, all clones share one writer thread.
#[derive(Clone)]
pub struct Journal {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl Journal {
    /// Opens (creating if needed) the journal at `cfg.path`, migrates its schema (every
    /// table, remediation memory included; an older file is upgraded in place) and
    /// starts the writer thread.
    ///
    /// # Errors
    /// [`Error::Open`] when the file cannot be opened or set up, [`Error::Migrate`] when
    /// its schema cannot be brought up to date, [`Error::Schema`] when it was written by
    /// a newer version.
    pub fn open(cfg: &JournalConfig) -> Result<Self> {
        let path = cfg.path.clone();
        let write = schema::open(&path, true)?;
        let rows: u64 = write
            .query_row("SELECT count(*) FROM events", [], |r| r.get::<_, i64>(0))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|source| Error::Open {
                path: path.clone(),
                source,
            })?;
        let reader = schema::open(&path, false)?;
        let rows = Arc::new(AtomicU64::new(rows));
        let (tx, rx) = mpsc::channel(cfg.queue_capacity.max(1));
        writer::spawn(write, rx, cfg, rows.clone()).map_err(|e| Error::Open {
            path: path.clone(),
            source: rusqlite::Error::ToSqlConversionFailure(Box::new(e)),
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                tx,
                path,
                rows,
                reader: Arc::new(std::sync::Mutex::new(reader)),
                wake: tokio::sync::watch::Sender::new(0),
            }),
        })
    }

    /// The SQLite file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Records `entries` atomically (one transaction, possibly shared with other
    /// callers' entries) and returns, after `COMMIT`, what happened to each, in order.
    /// An entry whose (provider, id) is already recorded, or appears earlier in the
    /// same call, is [`Written::Duplicate`].
    ///
    /// # Errors
    /// [`Error::Sqlite`] when the transaction failed (nothing of it is recorded),
    /// [`Error::Closed`] after [`Journal::close`].
    pub async fn append(&self, entries: Vec<Entry>) -> Result<Vec<Written>> {
        if entries.is_empty() {
            return Ok(Vec::new());
        }
        let (answer, wait) = oneshot::channel();
        self.inner
            .tx
            .send(Request::Append(AppendRequest { entries, answer }))
            .await
            .map_err(|_| Error::Closed)?;
        let written = wait.await.map_err(|_| Error::Closed)??;
        if written.iter().any(may_open_drift) {
            self.wake_transitions();
        }
        Ok(written)
    }

    /// Tells the readers of [`Journal::transition_wakeups`] that a commit may have
    /// recorded a drift transition.
    pub(crate) fn wake_transitions(&self) {
        self.inner.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes after each commit of this handle that may have recorded
    /// a drift transition (a drift event, a status change): wait on it, then read
    /// [`Journal::transitions`]. Only this handle's commits are seen.
    pub fn transition_wakeups(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.wake.subscribe()
    }

    /// Number of recorded events (kept in memory; no query).
    pub fn count(&self) -> u64 {
        self.inner.rows.load(Ordering::Relaxed)
    }

    /// Size in bytes of the database file plus its WAL file.
    pub fn size_bytes(&self) -> u64 {
        let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = self.inner.path.clone().into_os_string();
        wal.push("-wal");
        len(&self.inner.path) + len(Path::new(&wal))
    }

    /// Waits for every append queued before this call to commit, then stops the writer
    /// thread. Later appends fail with [`Error::Closed`]. Idempotent.
    pub async fn close(&self) {
        let (tx, rx) = oneshot::channel();
        if self.inner.tx.send(Request::Close(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Runs `job` on the writer thread in its own transaction, after everything queued
    /// before it; answers after `COMMIT`.
    async fn exec(&self, job: Job) -> Result<u64> {
        let (answer, wait) = oneshot::channel();
        self.inner
            .tx
            .send(Request::Exec(job, answer))
            .await
            .map_err(|_| Error::Closed)?;
        wait.await.map_err(|_| Error::Closed)?
    }

    async fn read<T, F>(&self, op: &'static str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let reader = self.inner.reader.clone();
        tokio::task::spawn_blocking(move || {
            // A poisoned lock only means a panic in another query; the connection
            // itself is still usable.
            let conn = reader.lock().unwrap_or_else(|p| p.into_inner());
            f(&conn).map_err(|source| Error::Sqlite { op, source })
        })
        .await
        .map_err(|_| Error::Closed)?
    }
}

#[cfg(test)]
mod contract;
#[cfg(test)]
mod tests;
#[cfg(all(test, feature = "postgres"))]
mod tests_pg;
