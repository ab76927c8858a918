//! The storage seam: [`JournalStore`] is everything the service asks of its journal
//! (recording events, the `/v1` queries, retention, remediation bookkeeping and
//! memory), as one dyn-compatible trait, so a second backend (the PostgreSQL journal
//! for several replicas) plugs in without touching `serve` or `remediate`.
//!
//! [`Journal`] (embedded SQLite) implements it; [`open`] builds the backend the
//! `[journal]` section names and hands it out as a [`SharedJournal`]. Every method
//! has the meaning documented on the SQLite implementation's method of the same name;
//! a backend keeps these contracts:
//!
//! - [`JournalStore::append`] answers only after the entries are durably committed
//!   (the caller acknowledges its bus message on that answer), and an entry whose
//!   `(provider, id)` is already recorded is [`Written::Duplicate`] (the dedupe key
//!   is unique across every process sharing the store).
//! - No decision logic: what is stored is what the caller decided (verdicts, reasons,
//!   actions arrive typed and are stored as they are).
//! - Errors are [`Error`]; a backend other than SQLite reports its own failures as
//!   [`Error::Backend`].

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use driftreactor_event::{Provider, ResourceKey};

use std::time::Duration;

use crate::{
    AddressChanges, ApplyRecord, BackstopRun, ChangeQuery, DriftQuery, DriftRow, DriftTransition,
    DriftUpdate, Entry, EventQuery, EventRow, Journal, JournalConfig, Lease, Listing,
    PendingRemediation, PruneReport, RemediationQuery, RemediationRow, Result, Stamp,
    TransitionQuery, Written,
};

/// A boxed, `Send` future answering a journal call (what keeps [`JournalStore`]
/// dyn-compatible).
pub type JournalFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// The future [`JournalStore::prune_with`] watches: once it is ready, no new batch
/// starts.
pub type StopSignal<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// The journal every part of the service shares (cheap to clone).
pub type SharedJournal = Arc<dyn JournalStore>;

/// What the service needs of a journal backend. Implemented by [`Journal`] (embedded
/// SQLite); see the module documentation for the contracts every backend keeps.
pub trait JournalStore: Send + Sync + std::fmt::Debug + 'static {
    /// Where the journal lives, for logs and `/readyz` (a file path, or a URL with no
    /// password).
    fn location(&self) -> String;

    /// Records `entries` atomically and answers, after the commit, what happened to
    /// each, in order ([`Journal::append`]).
    ///
    /// # Errors
    /// A failed commit (nothing of it is recorded; transient for the caller), or
    /// [`crate::Error::Closed`].
    fn append(&self, entries: Vec<Entry>) -> JournalFuture<'_, Vec<Written>>;

    /// Number of recorded events, without a query ([`Journal::count`]).
    fn count(&self) -> u64;

    /// Storage used, in bytes, when the backend can say cheaply (SQLite: database and
    /// WAL file); `None` otherwise.
    fn size_bytes(&self) -> Option<u64>;

    /// Waits for every write queued before the call, then closes ([`Journal::close`]).
    /// Idempotent.
    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;

    /// `/v1/events` ([`Journal::events`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn events(&self, q: EventQuery) -> JournalFuture<'_, Vec<EventRow>>;

    /// `/v1/drift`: the current drift rows, of one workspace or all
    /// ([`Journal::drift`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn drift(&self, workspace: Option<String>) -> JournalFuture<'_, Vec<DriftRow>>;

    /// `/v1/drift?status=`: drift rows by workspace and status
    /// ([`Journal::drift_with`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn drift_with(&self, q: DriftQuery) -> JournalFuture<'_, Vec<DriftRow>>;

    /// Moves a drift row along its lifecycle and records the attempt's outcome on its
    /// work items ([`Journal::set_drift_status`]); 1 when the row changed.
    ///
    /// # Errors
    /// When the store cannot be written.
    fn set_drift_status(&self, update: DriftUpdate) -> JournalFuture<'_, u64>;

    /// How many addresses are paused (escalated) ([`Journal::paused_count`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn paused_count(&self) -> JournalFuture<'_, u64>;

    /// The drift row of one resource address, if any ([`Journal::drift_of`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn drift_of(&self, workspace: String, address: String) -> JournalFuture<'_, Option<DriftRow>>;

    /// The latest `limit_rows` events that named one resource address
    /// ([`Journal::resource_events`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn resource_events(
        &self,
        workspace: String,
        address: String,
        limit_rows: usize,
    ) -> JournalFuture<'_, Vec<EventRow>>;

    /// `/v1/remediations` ([`Journal::remediations`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn remediations(&self, q: RemediationQuery) -> JournalFuture<'_, Vec<RemediationRow>>;

    /// Deletes events received before `older_than` in batches of `batch_rows`,
    /// stopping before a new batch once `stop` is ready and calling `on_batch` with
    /// each committed batch ([`Journal::prune_with`]).
    ///
    /// # Errors
    /// When a batch fails (batches committed before it stay deleted).
    fn prune_with<'a>(
        &'a self,
        older_than: DateTime<Utc>,
        batch_rows: usize,
        stop: StopSignal<'a>,
        on_batch: &'a mut (dyn FnMut(&PruneReport) + Send),
    ) -> JournalFuture<'a, PruneReport>;

    /// Events whose remediation is still pending ([`Journal::pending_remediations`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn pending_remediations(&self) -> JournalFuture<'_, Vec<PendingRemediation>>;

    /// The event was submitted and fed `targets` ([`Journal::remediation_submitted`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn remediation_submitted(
        &self,
        provider: Provider,
        event_id: String,
        targets: Vec<ResourceKey>,
    ) -> JournalFuture<'_, u64>;

    /// The work item of one address finished with `event_ids` as its evidence
    /// ([`Journal::remediation_finished`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn remediation_finished(
        &self,
        workspace: String,
        address: String,
        event_ids: Vec<String>,
    ) -> JournalFuture<'_, u64>;

    /// Records one attempt or revert stamp ([`Journal::record_stamp`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn record_stamp(
        &self,
        kind: Stamp,
        workspace: String,
        address: String,
        at: DateTime<Utc>,
    ) -> JournalFuture<'_, ()>;

    /// Stamps of `kind` since `since` ([`Journal::stamps_since`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn stamps_since(
        &self,
        kind: Stamp,
        workspace: String,
        address: String,
        since: DateTime<Utc>,
    ) -> JournalFuture<'_, u32>;

    /// Pauses (escalates) an address; `true` when it was not paused before
    /// ([`Journal::record_pause`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn record_pause(
        &self,
        workspace: String,
        address: String,
        reason: String,
    ) -> JournalFuture<'_, bool>;

    /// Why an address is paused, if it is ([`Journal::pause_reason`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn pause_reason(&self, workspace: String, address: String)
    -> JournalFuture<'_, Option<String>>;

    /// Forgets an address's stamps and pause ([`Journal::clear_memory`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn clear_memory(&self, workspace: String, address: String) -> JournalFuture<'_, ()>;

    /// Records one of our own applies ([`Journal::record_apply`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn record_apply(&self, rec: ApplyRecord) -> JournalFuture<'_, ()>;

    /// Our recent applies that covered an address ([`Journal::applies_for`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn applies_for(
        &self,
        workspace: String,
        address: String,
    ) -> JournalFuture<'_, Vec<ApplyRecord>>;

    /// Records an open pull request over `addresses` ([`Journal::record_open_pr`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn record_open_pr(
        &self,
        workspace: String,
        addresses: BTreeSet<String>,
    ) -> JournalFuture<'_, ()>;

    /// Forgets the open pull request over `addresses` ([`Journal::forget_pr`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn forget_pr(&self, workspace: String, addresses: BTreeSet<String>) -> JournalFuture<'_, ()>;

    /// The address sets of open pull requests that include an address
    /// ([`Journal::open_prs_with`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn open_prs_with(
        &self,
        workspace: String,
        address: String,
    ) -> JournalFuture<'_, Vec<BTreeSet<String>>>;

    /// One round trip to the store (`SELECT 1`), answering how long it took: what
    /// `/readyz` shows as the journal's reachability.
    ///
    /// # Errors
    /// When the store does not answer (PostgreSQL unreachable: within
    /// `connect_timeout_secs`), or [`crate::Error::Closed`].
    fn ping(&self) -> JournalFuture<'_, Duration>;

    /// Takes the lease `name` for `holder` for `ttl`: when it is free (never taken,
    /// released or expired; its fencing token grows by one) or already `holder`'s
    /// (extended, same token). `None` while another holder's lease runs
    /// ([`Journal::acquire_lease`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn acquire_lease(
        &self,
        name: String,
        holder: String,
        ttl: Duration,
    ) -> JournalFuture<'_, Option<Lease>>;

    /// Extends `holder`'s lease `name` of fencing token `token` to `ttl` from now;
    /// `None` when it is not theirs any more ([`Journal::renew_lease`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn renew_lease(
        &self,
        name: String,
        holder: String,
        token: u64,
        ttl: Duration,
    ) -> JournalFuture<'_, Option<Lease>>;

    /// Gives up `holder`'s lease `name` of fencing token `token`; `false` when it was
    /// not theirs any more ([`Journal::release_lease`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn release_lease(&self, name: String, holder: String, token: u64) -> JournalFuture<'_, bool>;

    /// The leases `holder` holds now, by name ([`Journal::leases_held`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn leases_held(&self, holder: String) -> JournalFuture<'_, Vec<Lease>>;

    /// Stores `listing` as the latest listing of the workspace set named `set`,
    /// replacing the previous one ([`Journal::put_listing`]). The replica holding the
    /// leader lease writes it; the others follow it.
    ///
    /// # Errors
    /// When the store cannot be written.
    fn put_listing(&self, set: String, listing: Listing) -> JournalFuture<'_, ()>;

    /// The latest stored listing of the workspace set named `set`; `None` when none
    /// was stored yet ([`Journal::get_listing`]).
    ///
    /// # Errors
    /// When the store cannot be read (or the stored row cannot be read back).
    fn get_listing(&self, set: String) -> JournalFuture<'_, Option<Listing>>;

    /// `/v1/changes` (and the MCP tool `recent_changes`): the addresses changed since
    /// `q.since`, grouped by (workspace, address), the most recently changed first,
    /// each with its drift status and its changing events ([`Journal::changes`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn changes(&self, q: ChangeQuery) -> JournalFuture<'_, Vec<AddressChanges>>;

    /// `/v1/stream`: the drift transitions after `q.after` (of `q.workspace`), oldest
    /// first ([`Journal::transitions`]; the log is described in
    /// [`crate::transitions`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn transitions(&self, q: TransitionQuery) -> JournalFuture<'_, Vec<DriftTransition>>;

    /// The id of the latest recorded drift transition; 0 when there is none
    /// ([`Journal::last_transition_id`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn last_transition_id(&self) -> JournalFuture<'_, u64>;

    /// A receiver whose value changes after each commit of this handle that may have
    /// recorded a drift transition ([`Journal::transition_wakeups`]): the live
    /// notification of `/v1/stream`, which then reads [`JournalStore::transitions`].
    /// Commits of other handles or replicas are not seen (read the log again on an
    /// interval to find them).
    fn transition_wakeups(&self) -> tokio::sync::watch::Receiver<u64>;
    /// Stores `run` as the latest backstop pass of `workspace`, replacing the
    /// previous one ([`Journal::put_backstop`]).
    ///
    /// # Errors
    /// When the store cannot be written.
    fn put_backstop(&self, workspace: String, run: BackstopRun) -> JournalFuture<'_, ()>;

    /// The latest backstop pass of `workspace`, if any was stored
    /// ([`Journal::get_backstop`]).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn get_backstop(&self, workspace: String) -> JournalFuture<'_, Option<BackstopRun>>;
}

/// Opens the embedded SQLite journal at `cfg.path` and returns it as the handle every
/// part of the service shares. A PostgreSQL journal ([`JournalConfig::url`]) needs
/// a connection: open it with [`connect`].
///
/// # Errors
/// As [`Journal::open`]; [`crate::Error::Config`] when `cfg.url` is set.
pub fn open(cfg: &JournalConfig) -> Result<SharedJournal> {
    if cfg.url.is_some() {
        return Err(crate::Error::Config {
            field: "url",
            reason: "a PostgreSQL journal is opened with `journal::connect`".into(),
        });
    }
    Ok(Arc::new(Journal::open(cfg)?))
}

/// Opens the journal `cfg` describes: PostgreSQL when [`JournalConfig::url`] is set
/// (connects, then creates or migrates its schema), else the embedded SQLite file at
/// `cfg.path`.
///
/// # Errors
/// As [`Journal::open`] for SQLite; for PostgreSQL [`crate::Error::Config`] (bad URL
/// or password settings, the `postgres` feature off) or [`crate::Error::Backend`]
/// (cannot connect, a migration failed, the schema is newer than this build).
pub async fn connect(cfg: &JournalConfig) -> Result<SharedJournal> {
    match cfg.url.as_deref() {
        None => Ok(Arc::new(Journal::open(cfg)?)),
        #[cfg(feature = "postgres")]
        Some(_) => Ok(Arc::new(crate::postgres::PgJournal::connect(cfg).await?)),
        #[cfg(not(feature = "postgres"))]
        Some(_) => Err(crate::Error::Config {
            field: "url",
            reason: "this build has no PostgreSQL support (cargo feature `postgres` of \
                     driftreactor-journal)"
                .into(),
        }),
    }
}

impl JournalStore for Journal {
    fn location(&self) -> String {
        self.path().display().to_string()
    }
    fn append(&self, entries: Vec<Entry>) -> JournalFuture<'_, Vec<Written>> {
        Box::pin(Journal::append(self, entries))
    }
    fn count(&self) -> u64 {
        Journal::count(self)
    }
    fn size_bytes(&self) -> Option<u64> {
        Some(Journal::size_bytes(self))
    }
    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(Journal::close(self))
    }
    fn events(&self, q: EventQuery) -> JournalFuture<'_, Vec<EventRow>> {
        Box::pin(Journal::events(self, q))
    }
    fn drift(&self, workspace: Option<String>) -> JournalFuture<'_, Vec<DriftRow>> {
        Box::pin(Journal::drift(self, workspace))
    }
    fn drift_with(&self, q: DriftQuery) -> JournalFuture<'_, Vec<DriftRow>> {
        Box::pin(Journal::drift_with(self, q))
    }
    fn set_drift_status(&self, update: DriftUpdate) -> JournalFuture<'_, u64> {
        Box::pin(Journal::set_drift_status(self, update))
    }
    fn paused_count(&self) -> JournalFuture<'_, u64> {
        Box::pin(Journal::paused_count(self))
    }
    fn drift_of(&self, workspace: String, address: String) -> JournalFuture<'_, Option<DriftRow>> {
        Box::pin(Journal::drift_of(self, workspace, address))
    }
    fn resource_events(
        &self,
        workspace: String,
        address: String,
        limit_rows: usize,
    ) -> JournalFuture<'_, Vec<EventRow>> {
        Box::pin(Journal::resource_events(
            self, workspace, address, limit_rows,
        ))
    }
    fn remediations(&self, q: RemediationQuery) -> JournalFuture<'_, Vec<RemediationRow>> {
        Box::pin(Journal::remediations(self, q))
    }
    fn prune_with<'a>(
        &'a self,
        older_than: DateTime<Utc>,
        batch_rows: usize,
        stop: StopSignal<'a>,
        on_batch: &'a mut (dyn FnMut(&PruneReport) + Send),
    ) -> JournalFuture<'a, PruneReport> {
        Box::pin(Journal::prune_with(
            self, older_than, batch_rows, stop, on_batch,
        ))
    }
    fn pending_remediations(&self) -> JournalFuture<'_, Vec<PendingRemediation>> {
        Box::pin(Journal::pending_remediations(self))
    }
    fn remediation_submitted(
        &self,
        provider: Provider,
        event_id: String,
        targets: Vec<ResourceKey>,
    ) -> JournalFuture<'_, u64> {
        Box::pin(Journal::remediation_submitted(
            self, provider, event_id, targets,
        ))
    }
    fn remediation_finished(
        &self,
        workspace: String,
        address: String,
        event_ids: Vec<String>,
    ) -> JournalFuture<'_, u64> {
        Box::pin(Journal::remediation_finished(
            self, workspace, address, event_ids,
        ))
    }
    fn record_stamp(
        &self,
        kind: Stamp,
        workspace: String,
        address: String,
        at: DateTime<Utc>,
    ) -> JournalFuture<'_, ()> {
        Box::pin(Journal::record_stamp(self, kind, workspace, address, at))
    }
    fn stamps_since(
        &self,
        kind: Stamp,
        workspace: String,
        address: String,
        since: DateTime<Utc>,
    ) -> JournalFuture<'_, u32> {
        Box::pin(Journal::stamps_since(self, kind, workspace, address, since))
    }
    fn record_pause(
        &self,
        workspace: String,
        address: String,
        reason: String,
    ) -> JournalFuture<'_, bool> {
        Box::pin(Journal::record_pause(self, workspace, address, reason))
    }
    fn pause_reason(
        &self,
        workspace: String,
        address: String,
    ) -> JournalFuture<'_, Option<String>> {
        Box::pin(Journal::pause_reason(self, workspace, address))
    }
    fn clear_memory(&self, workspace: String, address: String) -> JournalFuture<'_, ()> {
        Box::pin(Journal::clear_memory(self, workspace, address))
    }
    fn record_apply(&self, rec: ApplyRecord) -> JournalFuture<'_, ()> {
        Box::pin(Journal::record_apply(self, rec))
    }
    fn applies_for(
        &self,
        workspace: String,
        address: String,
    ) -> JournalFuture<'_, Vec<ApplyRecord>> {
        Box::pin(Journal::applies_for(self, workspace, address))
    }
    fn record_open_pr(
        &self,
        workspace: String,
        addresses: BTreeSet<String>,
    ) -> JournalFuture<'_, ()> {
        Box::pin(Journal::record_open_pr(self, workspace, addresses))
    }
    fn forget_pr(&self, workspace: String, addresses: BTreeSet<String>) -> JournalFuture<'_, ()> {
        Box::pin(Journal::forget_pr(self, workspace, addresses))
    }
    fn open_prs_with(
        &self,
        workspace: String,
        address: String,
    ) -> JournalFuture<'_, Vec<BTreeSet<String>>> {
        Box::pin(Journal::open_prs_with(self, workspace, address))
    }
    fn ping(&self) -> JournalFuture<'_, Duration> {
        Box::pin(async move {
            let t = std::time::Instant::now();
            self.read("ping", |c| {
                c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))
            })
            .await?;
            Ok(t.elapsed())
        })
    }
    fn acquire_lease(
        &self,
        name: String,
        holder: String,
        ttl: Duration,
    ) -> JournalFuture<'_, Option<Lease>> {
        Box::pin(Journal::acquire_lease(self, name, holder, ttl))
    }
    fn renew_lease(
        &self,
        name: String,
        holder: String,
        token: u64,
        ttl: Duration,
    ) -> JournalFuture<'_, Option<Lease>> {
        Box::pin(Journal::renew_lease(self, name, holder, token, ttl))
    }
    fn release_lease(&self, name: String, holder: String, token: u64) -> JournalFuture<'_, bool> {
        Box::pin(Journal::release_lease(self, name, holder, token))
    }
    fn leases_held(&self, holder: String) -> JournalFuture<'_, Vec<Lease>> {
        Box::pin(Journal::leases_held(self, holder))
    }
    fn put_listing(&self, set: String, listing: Listing) -> JournalFuture<'_, ()> {
        Box::pin(Journal::put_listing(self, set, listing))
    }
    fn put_backstop(&self, workspace: String, run: BackstopRun) -> JournalFuture<'_, ()> {
        Box::pin(Journal::put_backstop(self, workspace, run))
    }
    fn get_backstop(&self, workspace: String) -> JournalFuture<'_, Option<BackstopRun>> {
        Box::pin(Journal::get_backstop(self, workspace))
    }
    fn get_listing(&self, set: String) -> JournalFuture<'_, Option<Listing>> {
        Box::pin(Journal::get_listing(self, set))
    }
    fn changes(&self, q: ChangeQuery) -> JournalFuture<'_, Vec<AddressChanges>> {
        Box::pin(Journal::changes(self, q))
    }
    fn transitions(&self, q: TransitionQuery) -> JournalFuture<'_, Vec<DriftTransition>> {
        Box::pin(Journal::transitions(self, q))
    }
    fn last_transition_id(&self) -> JournalFuture<'_, u64> {
        Box::pin(Journal::last_transition_id(self))
    }
    fn transition_wakeups(&self) -> tokio::sync::watch::Receiver<u64> {
        Journal::transition_wakeups(self)
    }
}
