//! The hand-off from the journal to the remediator, with its durable requeue
//! (kube-runtime's way: the runner owns its requeue through a store trait).
//!
//! * The service asks [`Hook::requeue_record`] for what to keep with each event that has
//!   an action, and the journal stores it as a `pending` remediation in the event's own
//!   commit: the typed [`Processed`] event itself, its request parameters redacted.
//! * After the commit and the bus acknowledgement the service hands every newly
//!   recorded event to [`Hook::committed`], which queues it (bounded, never waiting: a
//!   full queue drops the hand-off and says so, [`Handoff::Dropped`]; the event stays
//!   `pending` in the journal).
//! * One [`Forwarder`] task owns the [`Remediator`] and submits from that queue. At
//!   start it first resubmits every still `pending` event in journal order; it records
//!   in the [`RemediationLog`] the work items each submitted event fed, and marks them
//!   finished as the remediator completes them ([`Remediator::subscribe_completed`]),
//!   also while it shuts down. It also lifts escalations ([`Hook::clear`]).
//!
//! The [`RemediationLog`] is the journal's remediation bookkeeping: it is implemented
//! for `driftreactor_journal::SharedJournal`, so any journal backend behind
//! `driftreactor_journal::JournalStore` serves it.

use std::future::Future;

use driftreactor_decide::{Action, Verdict};
use driftreactor_event::{Provider, ResourceKey};
use driftreactor_journal::{
    DriftStatus, DriftUpdate, JournalStore, PendingRemediation, SharedJournal,
};
use driftreactor_notify::Redactor;
use driftreactor_pipeline::Processed;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::item::Mode;
use crate::key::WorkKey;
use crate::runner::{Completed, Remediator};

/// Journaled events waiting for the remediator, beyond which hand-offs are dropped
/// (logged and counted) rather than delaying acknowledgements.
pub const HANDOFF_QUEUE: usize = 1024;

/// How long [`Hook::clear`] waits for a place in the remediator's queue, in seconds.
pub const CLEAR_TIMEOUT_SECS: u64 = 10;

/// One journaled event whose remediation had not finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The event's provider (`None` when the stored name is not one this build knows).
    pub provider: Option<Provider>,
    /// The event id.
    pub event_id: String,
    /// What [`Hook::requeue_record`] gave for it (a [`Processed`] as JSON).
    pub request: String,
    /// When the event was received, when the log knows it (several replicas: pending
    /// work older than its settle window and three claim intervals is taken over).
    pub received_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The durable bookkeeping of unfinished remediations: what the [`Forwarder`] reads
/// at start and writes as it submits and completes work. Implemented for
/// `driftreactor_journal::SharedJournal` (the journal's `remediations` tables).
pub trait RemediationLog: Send + Sync + 'static {
    /// The store's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Every `pending` remediation, oldest first (journal order).
    ///
    /// # Errors
    /// When the store cannot be read.
    fn pending(&self) -> impl Future<Output = Result<Vec<Pending>, Self::Error>> + Send;

    /// The event (provider, id) was submitted and fed the work items `keys`; with
    /// none, it is done at once (e.g. the echo of our own apply).
    ///
    /// # Errors
    /// When the store cannot be written (the event stays pending).
    fn submitted(
        &self,
        provider: Provider,
        event_id: String,
        keys: Vec<ResourceKey>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// The work item `key` reached a terminal state with `event_ids` as its evidence.
    /// Returns how many events became done.
    ///
    /// # Errors
    /// When the store cannot be written (the events stay pending).
    fn finished(
        &self,
        key: &WorkKey,
        event_ids: Vec<String>,
    ) -> impl Future<Output = Result<u64, Self::Error>> + Send;

    /// Moves the drift row of an address along its lifecycle
    /// (`driftreactor_journal::DriftStatus`) and records the attempt's outcome on the
    /// work items of `update.event_ids`.
    ///
    /// # Errors
    /// When the store cannot be written (the row keeps its status).
    fn drift_status(
        &self,
        update: DriftUpdate,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Closes the store once the remediator has stopped (everything written before).
    fn close(&self) -> impl Future<Output = ()> + Send;
}

impl RemediationLog for SharedJournal {
    type Error = driftreactor_journal::Error;

    async fn pending(&self) -> Result<Vec<Pending>, Self::Error> {
        Ok(JournalStore::pending_remediations(&**self)
            .await?
            .into_iter()
            .map(|p: PendingRemediation| Pending {
                provider: serde_json::from_value(p.provider.into()).ok(),
                event_id: p.event_id,
                request: p.request,
                received_at: chrono::DateTime::parse_from_rfc3339(&p.received_at)
                    .ok()
                    .map(|t| t.with_timezone(&chrono::Utc)),
            })
            .collect())
    }

    async fn submitted(
        &self,
        provider: Provider,
        event_id: String,
        keys: Vec<ResourceKey>,
    ) -> Result<(), Self::Error> {
        JournalStore::remediation_submitted(&**self, provider, event_id, keys)
            .await
            .map(drop)
    }

    async fn finished(&self, key: &WorkKey, event_ids: Vec<String>) -> Result<u64, Self::Error> {
        JournalStore::remediation_finished(
            &**self,
            key.workspace.to_string(),
            key.address.to_string(),
            event_ids,
        )
        .await
    }

    async fn drift_status(&self, update: DriftUpdate) -> Result<(), Self::Error> {
        JournalStore::set_drift_status(&**self, update)
            .await
            .map(drop)
    }

    async fn close(&self) {
        JournalStore::close(&**self).await;
    }
}

/// What [`Hook::committed`] did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// Queued for the forwarder (counted `remediation_handoffs_total{result="queued"}`).
    Queued,
    /// Nothing to do for this event (no action).
    Skipped,
    /// Not taken: the queue is full or the forwarder stopped (counted
    /// `remediation_handoffs_total{result="dropped"}`; the event stays in the journal,
    /// as a `pending` remediation when [`Hook::requeue_record`] gave one, which the
    /// forwarder resubmits at its next start).
    Dropped,
}

/// Why [`Hook::clear`] could not lift an escalation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClearError {
    /// Remediation has stopped (the service is shutting down).
    #[error("remediation has stopped")]
    Stopped,
    /// The remediation queue stayed full for the wait allowed.
    #[error("the remediation queue is full; retry later")]
    Busy,
}

/// What to keep with an event in the journal to resubmit it to the remediator after a
/// restart: the [`Processed`] event itself as JSON, its request parameters redacted
/// with `redactor` (the states' secrets and secret-looking keys). `None` for an event
/// without an action or an ignored one (nothing to resubmit).
pub fn requeue_record(item: &Processed, redactor: &Redactor) -> Option<String> {
    if item.action == Action::None || item.verdict == Verdict::Ignored {
        return None;
    }
    let mut item = item.clone();
    if let Some(raw) = item.event.request.take() {
        item.event.request = serde_json::from_str::<serde_json::Value>(raw.get())
            .ok()
            .and_then(|v| serde_json::value::to_raw_value(&redactor.json(&v)).ok());
    }
    // The diff's `after` values come from the same request.
    item.event.diff = item.event.diff.take().map(|d| redactor.diff(d));
    serde_json::to_string(&item).ok()
}

/// A request to the forwarder task.
enum Cmd {
    Submit(Box<Processed>),
    Clear {
        workspace: String,
        address: String,
        done: oneshot::Sender<()>,
    },
    Reconcile {
        workspace: String,
        address: String,
        mode: Mode,
        done: oneshot::Sender<()>,
    },
    SetWorkspaces {
        workspaces: Vec<crate::Workspace>,
        done: oneshot::Sender<crate::WorkspaceChange>,
    },
}

/// The service's side of the hand-off: queues decided events for the [`Forwarder`].
/// Cheap to clone.
#[derive(Clone)]
pub struct Hook {
    tx: mpsc::Sender<Cmd>,
    redactor: Redactor,
    completed: broadcast::Sender<Completed>,
    waits: broadcast::Sender<crate::Waiting>,
    waiting: crate::runner::WaitingNow,
    backstop: crate::runner::Backstop,
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("queued", &(self.tx.max_capacity() - self.tx.capacity()))
            .finish_non_exhaustive()
    }
}

impl Hook {
    /// The backstop's plan of `workspace` under the remediator's hold of it
    /// ([`Remediator::backstop_plan`]).
    ///
    /// # Errors
    /// [`crate::BackstopError`].
    pub async fn backstop_plan(
        &self,
        workspace: &str,
    ) -> Result<(crate::BackstopPlan, crate::WorkspaceHold), crate::BackstopError> {
        self.backstop.plan(workspace).await
    }

    /// See [`requeue_record`] (with the remediator's redactor). Pure.
    pub fn requeue_record(&self, item: &Processed) -> Option<String> {
        requeue_record(item, &self.redactor)
    }

    /// Queues one committed event for the remediator; never waits. `source` names the
    /// source in log lines.
    pub fn committed(&self, source: &str, item: Processed) -> Handoff {
        // The journal stored later entries of an already recorded change as ignored.
        if item.verdict == Verdict::Ignored || item.action == Action::None {
            return Handoff::Skipped;
        }
        let event_id = item.event.id.clone();
        match self.tx.try_send(Cmd::Submit(Box::new(item))) {
            Ok(()) => Handoff::Queued,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(source = %source, event_id = %event_id, capacity = HANDOFF_QUEUE,
                    "The remediation queue is full; this event is journaled but not remediated.");
                Handoff::Dropped
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::warn!(source = %source, event_id = %event_id,
                    "Remediation has stopped; this event is journaled but not remediated.");
                Handoff::Dropped
            }
        }
    }

    /// Lifts an escalation of (workspace, address), waiting at most
    /// [`CLEAR_TIMEOUT_SECS`] for a place in the queue. The drift row becomes `open`.
    ///
    /// # Errors
    /// [`ClearError::Stopped`] when the forwarder stopped, [`ClearError::Busy`] when the
    /// queue stayed full.
    pub async fn clear(&self, workspace: &str, address: &str) -> Result<(), ClearError> {
        let (done, rx) = oneshot::channel();
        let cmd = Cmd::Clear {
            workspace: workspace.to_owned(),
            address: address.to_owned(),
            done,
        };
        self.send(cmd, rx).await
    }

    /// Asks for a targeted plan of (workspace, address) now
    /// ([`Remediator::reconcile`]) with `mode`; the drift row becomes `remediating`.
    /// Waits like [`Hook::clear`].
    ///
    /// # Errors
    /// As [`Hook::clear`].
    pub async fn reconcile(
        &self,
        workspace: &str,
        address: &str,
        mode: Mode,
    ) -> Result<(), ClearError> {
        let (done, rx) = oneshot::channel();
        let cmd = Cmd::Reconcile {
            workspace: workspace.to_owned(),
            address: address.to_owned(),
            mode,
            done,
        };
        self.send(cmd, rx).await
    }

    /// Replaces the remediated workspaces ([`Remediator::set_workspaces`]: added
    /// ones are remediated, removed ones' pending work is not started), waiting at
    /// most [`CLEAR_TIMEOUT_SECS`] for a place in the queue. `serve` calls
    /// it after each re-listing of `[[workspace_sets]]` with every remediating
    /// workspace (fixed and listed).
    ///
    /// # Errors
    /// [`ClearError::Stopped`] when the forwarder stopped, [`ClearError::Busy`] when the
    /// queue stayed full.
    pub async fn set_workspaces(
        &self,
        workspaces: impl IntoIterator<Item = crate::Workspace>,
    ) -> Result<crate::WorkspaceChange, ClearError> {
        let (done, rx) = oneshot::channel();
        let cmd = Cmd::SetWorkspaces {
            workspaces: workspaces.into_iter().collect(),
            done,
        };
        let timeout = std::time::Duration::from_secs(CLEAR_TIMEOUT_SECS);
        match tokio::time::timeout(timeout, self.tx.send(cmd)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(ClearError::Stopped),
            Err(_) => return Err(ClearError::Busy),
        }
        rx.await.map_err(|_| ClearError::Stopped)
    }

    /// Work waiting for Terraform's state lock, as it happens
    /// ([`Remediator::subscribe_waiting`]).
    pub fn subscribe_waiting(&self) -> broadcast::Receiver<crate::Waiting> {
        self.waits.subscribe()
    }

    /// The workspaces whose work waits now ([`Remediator::waiting`]), for
    /// `/v1/resources` and `/readyz`.
    pub fn waiting(&self) -> Vec<crate::Waiting> {
        crate::runner::waiting_now(&self.waiting)
    }

    /// Every attempt's outcome ([`Completed`], also for failed attempts that are
    /// retried), for metrics; subscribe once at start. A subscriber more than 1024
    /// behind loses the oldest.
    pub fn subscribe_completed(&self) -> broadcast::Receiver<Completed> {
        self.completed.subscribe()
    }

    async fn send(&self, cmd: Cmd, rx: oneshot::Receiver<()>) -> Result<(), ClearError> {
        let timeout = std::time::Duration::from_secs(CLEAR_TIMEOUT_SECS);
        match tokio::time::timeout(timeout, self.tx.send(cmd)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(ClearError::Stopped),
            Err(_) => return Err(ClearError::Busy),
        }
        rx.await.map_err(|_| ClearError::Stopped)
    }
}

/// The task that owns the [`Remediator`] and feeds it from the [`Hook`]'s queue. It
/// first resubmits the log's `pending` remediations (in journal order), records the
/// work items each submitted event fed, and marks them finished as the remediator
/// completes them (also while it shuts down). See the module docs.
pub struct Forwarder {
    hook: Hook,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder").finish_non_exhaustive()
    }
}

impl Forwarder {
    /// Reads the log's pending remediations, then starts the task (inside a tokio
    /// runtime) that resubmits them and forwards the hook's queue to `remediator`.
    /// Await it before the service journals anything new, so the pending list is the
    /// one of the previous run.
    ///
    /// # Errors
    /// The log's error when the pending list cannot be read (nothing is started).
    pub async fn start<L: RemediationLog>(
        remediator: Remediator,
        log: L,
    ) -> Result<Self, L::Error> {
        let pending = log.pending().await?;
        Ok(Self::spawn(remediator, log, pending))
    }

    /// Starts the task with `pending` (from [`RemediationLog::pending`]) to resubmit
    /// first.
    pub fn spawn<L: RemediationLog>(remediator: Remediator, log: L, pending: Vec<Pending>) -> Self {
        let (tx, mut rx) = mpsc::channel::<Cmd>(HANDOFF_QUEUE);
        let (stop, mut stopped) = oneshot::channel::<()>();
        let redactor = remediator.redactor().clone();
        let mut completed = remediator.subscribe_completed();
        let completed_tx = remediator.completed_sender();
        let (waits, waiting) = remediator.wait_handles();
        let backstop = remediator.backstop();
        // Several replicas: the runner records outcomes itself under the workspace's
        // lease; this task looks for pending work of replicas that died.
        let cluster = remediator
            .cluster()
            .map(|c| (c.claim_interval(), remediator_settle(&remediator, c)));
        let task = tokio::spawn(async move {
            let mut sweep = tokio::time::interval(
                cluster.map_or(std::time::Duration::from_secs(3600), |(every, _)| every),
            );
            sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            if !pending.is_empty() {
                tracing::info!(
                    count = pending.len(),
                    "Resubmitting journaled events whose remediation had not finished."
                );
            }
            for p in pending {
                match serde_json::from_str::<Processed>(&p.request) {
                    Ok(item) => submit(&remediator, &log, &item).await,
                    Err(e) => {
                        tracing::error!(event_id = %p.event_id, error = %e,
                            "Cannot read a journaled remediation request; it is not resubmitted.");
                        if let Some(provider) = p.provider {
                            let _ = log.submitted(provider, p.event_id, Vec::new()).await;
                        }
                    }
                }
                while let Ok(c) = completed.try_recv() {
                    if cluster.is_none() {
                        finished(&log, c).await;
                    }
                }
            }
            loop {
                tokio::select! {
                    biased;
                    _ = &mut stopped => break,
                    c = completed.recv() => match c {
                        Ok(_) if cluster.is_some() => {}
                        Ok(c) => finished(&log, c).await,
                        Err(broadcast::error::RecvError::Lagged(n)) => tracing::warn!(
                            missed = n,
                            "Remediation bookkeeping fell behind; the missed events stay pending and are resubmitted after a restart."
                        ),
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                    cmd = rx.recv() => match cmd {
                        Some(Cmd::Submit(item)) => submit(&remediator, &log, &item).await,
                        Some(Cmd::Clear { workspace, address, done }) => {
                            remediator.clear(&workspace, &address).await;
                            set_status(&log, &workspace, &address, DriftStatus::Open, &[DriftStatus::Escalated]).await;
                            let _ = done.send(());
                        }
                        Some(Cmd::Reconcile { workspace, address, mode, done }) => {
                            remediator.reconcile(&workspace, &address, mode).await;
                            set_status(&log, &workspace, &address, DriftStatus::Remediating, &[]).await;
                            let _ = done.send(());
                        }
                        Some(Cmd::SetWorkspaces { workspaces, done }) => {
                            if let Ok(change) = remediator.set_workspaces(workspaces).await {
                                let _ = done.send(change);
                            }
                        }
                        None => break,
                    },
                    _ = sweep.tick(), if cluster.is_some() => {
                        if let Some((_, older_than)) = cluster {
                            take_over(&remediator, &log, older_than).await;
                        }
                    }
                }
            }
            let pending = rx.len();
            if pending > 0 {
                tracing::warn!(
                    pending,
                    "Stopping: journaled events not yet handed to the remediator stay pending; they are resubmitted at the next start."
                );
            }
            tracing::info!("Stopping remediation: waiting for running plans / applies.");
            // Running plans / applies finish; record what they complete.
            let shutdown = remediator.shutdown();
            tokio::pin!(shutdown);
            loop {
                tokio::select! {
                    () = &mut shutdown => break,
                    Ok(c) = completed.recv() => if cluster.is_none() {
                        finished(&log, c).await;
                    },
                }
            }
            while let Ok(c) = completed.try_recv() {
                if cluster.is_none() {
                    finished(&log, c).await;
                }
            }
            log.close().await;
            tracing::info!("Remediation stopped.");
        });
        Self {
            hook: Hook {
                tx,
                backstop,
                redactor,
                completed: completed_tx,
                waits,
                waiting,
            },
            stop,
            task,
        }
    }

    /// The hook that queues events for this forwarder.
    pub fn hook(&self) -> &Hook {
        &self.hook
    }

    /// The remediator's redactor (shared with its PR client and Slack).
    pub fn redactor(&self) -> &Redactor {
        &self.hook.redactor
    }

    /// Stops taking work and shuts the remediator down (running IaC commands finish,
    /// their completions are recorded), then closes the log.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        drop(self.hook);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "The remediation task ended unexpectedly.");
        }
    }
}

/// How old a pending event must be before this replica takes it over from whoever
/// received it: its settle window plus three claim intervals.
fn remediator_settle(r: &Remediator, c: &crate::Cluster) -> std::time::Duration {
    r.settle() + 3 * c.claim_interval()
}

/// Several replicas: submits the log's pending events received more than
/// `older_than` ago to this replica's remediator (a replica that received them may
/// have died); its batches take the workspace's lease, and work another replica
/// finished meanwhile is dropped there.
async fn take_over<L: RemediationLog>(
    remediator: &Remediator,
    log: &L,
    older_than: std::time::Duration,
) {
    let pending = match log.pending().await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "Cannot read the journal's pending remediations.");
            return;
        }
    };
    let cutoff = chrono::Utc::now() - chrono::Duration::from_std(older_than).unwrap_or_default();
    let mut n = 0usize;
    for p in pending {
        if p.received_at.is_none_or(|t| t > cutoff) {
            continue;
        }
        if let Ok(item) = serde_json::from_str::<Processed>(&p.request) {
            submit(remediator, log, &item).await;
            n += 1;
        }
    }
    if n > 0 {
        tracing::debug!(
            events = n,
            "Submitted pending journaled work older than its settle window."
        );
    }
}

/// Submits one event and records the work items it fed (none: it is done at once,
/// e.g. the echo of our own apply).
async fn submit<L: RemediationLog>(remediator: &Remediator, log: &L, item: &Processed) {
    let event = &item.event;
    match remediator
        .submit(event, &item.decision(), &item.dependents)
        .await
    {
        Ok(s) => {
            // Only an `open` row (the event's commit (re)opened it): a late
            // resubmission (a restarted replica's pending list, a takeover sweep) of an
            // event whose work another replica finished meanwhile must not move a
            // `reverted` / `resolved` row back to `remediating`, where nothing would
            // move it on (the batch finds the work done and records no outcome).
            let open = [DriftStatus::Open];
            for k in &s.keys {
                set_status(
                    log,
                    &k.workspace,
                    &k.address,
                    DriftStatus::Remediating,
                    &open,
                )
                .await;
            }
            if s.own_echoes > 0 {
                // The echo of our own apply (re)opened the rows of addresses we
                // reverted: they are as we applied them.
                for m in &item.matches {
                    if !s
                        .keys
                        .iter()
                        .any(|k| *k.workspace == *m.workspace && *k.address == *m.address)
                    {
                        let open = [DriftStatus::Open];
                        set_status(log, &m.workspace, &m.address, DriftStatus::Reverted, &open)
                            .await;
                    }
                }
            }
            let keys = s
                .keys
                .iter()
                .map(|k| ResourceKey::new(k.workspace.to_string(), k.address.to_string()))
                .collect();
            if let Err(e) = log.submitted(event.provider, event.id.clone(), keys).await {
                tracing::warn!(event_id = %event.id, error = %e,
                    "Cannot record the remediation's work items; the event stays pending.");
            }
        }
        Err(e) => {
            tracing::error!(event_id = %event.id, error = %e, "Cannot submit to the remediator.");
        }
    }
}

/// Moves the drift row of (workspace, address) to `status` (no outcome recorded),
/// when it is in one of `only_from` (empty: any).
async fn set_status<L: RemediationLog>(
    log: &L,
    workspace: &str,
    address: &str,
    status: DriftStatus,
    only_from: &[DriftStatus],
) {
    let update = DriftUpdate {
        workspace: workspace.to_owned(),
        address: address.to_owned(),
        status,
        reason: None,
        outcome: None,
        event_ids: Vec::new(),
        started: None,
        only_from: only_from.to_vec(),
    };
    if let Err(e) = log.drift_status(update).await {
        tracing::warn!(workspace, address, error = %e, "Cannot record the drift's status.");
    }
}

/// Records an attempt's outcome on the drift row and the work items of its events,
/// and marks the events of a finished work item finished in the journal: what
/// [`finished`] does, for the runner, which records it itself under the workspace's
/// lease when several replicas share the journal.
pub(crate) async fn record_completed(journal: &SharedJournal, c: Completed) {
    let key = c.key.to_string();
    let update = DriftUpdate {
        workspace: c.key.workspace.to_string(),
        address: c.key.address.to_string(),
        status: c.status,
        reason: c.reason.clone(),
        outcome: Some(c.result.as_str().to_owned()),
        event_ids: c.event_ids.clone(),
        started: Some(c.started),
        only_from: Vec::new(),
    };
    if let Err(e) = journal.set_drift_status(update).await {
        tracing::warn!(key = %key, error = %e, "Cannot record the drift's status.");
    }
    if !c.finished {
        return;
    }
    let (ws, addr) = (c.key.workspace.to_string(), c.key.address.to_string());
    if let Err(e) = journal.remediation_finished(ws, addr, c.event_ids).await {
        tracing::warn!(key = %key, error = %e,
            "Cannot mark the remediation finished; its events stay pending and are taken over later.");
    }
}

/// Records an attempt's outcome on the drift row and the work items of its events,
/// and marks the events of a finished work item finished in the log.
async fn finished<L: RemediationLog>(log: &L, c: Completed) {
    let key = c.key.to_string();
    let update = DriftUpdate {
        workspace: c.key.workspace.to_string(),
        address: c.key.address.to_string(),
        status: c.status,
        reason: c.reason.clone(),
        outcome: Some(c.result.as_str().to_owned()),
        event_ids: c.event_ids.clone(),
        started: Some(c.started),
        only_from: Vec::new(),
    };
    if let Err(e) = log.drift_status(update).await {
        tracing::warn!(key = %key, error = %e, "Cannot record the drift's status.");
    }
    if !c.finished {
        return;
    }
    match log.finished(&c.key, c.event_ids).await {
        Ok(n) => {
            tracing::debug!(key = %key, outcome = c.outcome, events_done = n, "Remediation finished.")
        }
        Err(e) => tracing::warn!(key = %key, error = %e,
            "Cannot mark the remediation finished; its events stay pending and are resubmitted after a restart."),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use driftreactor_event::{DriftEvent, MatchKind, MatchRecord};

    use super::*;

    /// A [`RemediationLog`] that records the drift status updates it is given.
    #[derive(Default)]
    struct StatusLog(Mutex<Vec<DriftUpdate>>);

    impl RemediationLog for Arc<StatusLog> {
        type Error = std::convert::Infallible;

        async fn pending(&self) -> Result<Vec<Pending>, Self::Error> {
            Ok(Vec::new())
        }
        async fn submitted(
            &self,
            _: Provider,
            _: String,
            _: Vec<ResourceKey>,
        ) -> Result<(), Self::Error> {
            Ok(())
        }
        async fn finished(&self, _: &WorkKey, _: Vec<String>) -> Result<u64, Self::Error> {
            Ok(0)
        }
        async fn drift_status(&self, update: DriftUpdate) -> Result<(), Self::Error> {
            self.0.lock().unwrap().push(update);
            Ok(())
        }
        async fn close(&self) {}
    }

    fn drift_of_web(id: &str) -> Processed {
        Processed {
            event: DriftEvent::new(Provider::Aws, id),
            verdict: Verdict::Drift,
            reason: None,
            action: Action::Revert,
            matches: vec![MatchRecord {
                workspace: "prod".into(),
                address: "aws_security_group.web".into(),
                kind: MatchKind::Primary,
                action: Action::Revert,
            }],
            dependents: Vec::new(),
            repeated: None,
        }
    }

    /// Three replicas, one killed and restarted: a drift row another replica had
    /// brought to `reverted` (the event's work finished there) was set back to
    /// `remediating` by a late resubmission of the same event (the restarted replica's
    /// pending list, read before the other finished), and stayed there: the batch
    /// found the work done and recorded no outcome. Submitting moves only an `open`
    /// row to `remediating`.
    #[tokio::test]
    async fn a_late_resubmission_does_not_move_a_finished_drift_back_to_remediating() {
        let remediator = Remediator::builder(crate::RemediationConfig {
            settle_secs: 3600,
            ..Default::default()
        })
        .spawn();
        let log = Arc::new(StatusLog::default());
        submit(&remediator, &log, &drift_of_web("late-1")).await;
        let updates = log.0.lock().unwrap().clone();
        let remediating: Vec<&DriftUpdate> = updates
            .iter()
            .filter(|u| u.status == DriftStatus::Remediating)
            .collect();
        assert_eq!(remediating.len(), 1, "{updates:?}");
        assert_eq!(remediating[0].address, "aws_security_group.web");
        assert_eq!(remediating[0].only_from, [DriftStatus::Open], "{updates:?}");
        remediator.shutdown().await;
    }

    /// What the journal keeps to resubmit an event has its request parameters redacted
    /// (state secrets and secret-looking keys) and gives back the same decision and
    /// blast radius.
    #[test]
    fn the_resubmit_request_is_redacted_and_round_trips_the_decision() {
        let mut event = DriftEvent::new(Provider::Aws, "e1");
        event.request = Some(
            serde_json::value::to_raw_value(&serde_json::json!({
                "groupId": "sg-0123",
                "masterUserPassword": "hunter2",
                "description": "token from state: s3cr3t-from-state",
            }))
            .unwrap(),
        );
        // The diff's new values come from the same request: redacted too.
        event.diff = Some(driftreactor_event::Diff::known(
            vec![driftreactor_event::AttributeChange::new(
                "tags[\"note\"]",
                serde_json::Value::Null,
                "s3cr3t-from-state".into(),
            )],
            driftreactor_event::ChangesFrom::Event,
        ));
        let item = Processed {
            event,
            verdict: Verdict::Drift,
            reason: None,
            action: Action::Revert,
            matches: vec![MatchRecord {
                workspace: "prod".into(),
                address: "aws_security_group.web".into(),
                kind: MatchKind::Related,
                action: Action::Revert,
            }],
            dependents: vec![ResourceKey::new("prod", "aws_instance.app")],
            repeated: None,
        };
        let redactor = Redactor::new(vec!["s3cr3t-from-state".to_owned()]);
        let json = requeue_record(&item, &redactor).unwrap();
        assert!(!json.contains("hunter2"), "{json}");
        assert!(!json.contains("s3cr3t-from-state"), "{json}");
        assert!(json.contains("sg-0123"), "{json}");
        assert!(json.contains(r#""path":"tags[\"note\"]""#), "{json}");
        let back = serde_json::from_str::<Processed>(&json).unwrap();
        assert_eq!(
            (back.event.provider, back.event.id.as_str()),
            (Provider::Aws, "e1")
        );
        assert_eq!(back.decision(), item.decision());
        assert_eq!(back.dependents.len(), 1);
        assert_eq!(back.dependents[0].address, "aws_instance.app");
        // An event without an action keeps nothing to resubmit.
        let none = Processed {
            action: Action::None,
            ..item
        };
        assert_eq!(requeue_record(&none, &redactor), None);
    }
}
