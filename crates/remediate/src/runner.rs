//! The [`Remediator`] handle and its runner task.
//!
//! One task owns all scheduling state (no locks): pending items per key with their
//! settle / backoff deadlines, which workspaces are busy, and the backoff per key.
//! Reconciles run in a `JoinSet`, at most one per workspace and at most
//! `max_parallel_workspaces` at once. Callers talk to it through a bounded channel.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use driftreactor_decide::Decision;
use driftreactor_event::DriftEvent;
use driftreactor_event::ResourceKey;
use driftreactor_journal::DriftStatus;
use driftreactor_notify::{Evidence, GitHub, Matched, Redactor, Slack, Transition};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::config::{RemediationConfig, Workspace};
use crate::guard::PlanVerdict;
use crate::item::{Mode, Submission, WorkItem, is_own_echo, submissions};
use crate::key::WorkKey;
use crate::locks::{SharedLocks, StateLocks, WaitReason, Waiting};
use crate::reconcile::{Batch, Context, Note, Requeue, error_policy, escalate, reconcile};
use crate::store::{MemoryStore, StateStore, recall};

/// Transitions buffered per subscriber before it lags.
const TRANSITION_BUFFER: usize = 1024;

/// The reason given for work of a workspace that is no longer configured
/// ([`Remediator::set_workspaces`]).
const WORKSPACE_GONE: &str =
    "the workspace is no longer configured: the remediation was not started";

/// What [`Remediator::set_workspaces`] changed, by workspace name (sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceChange {
    /// Workspaces that can be remediated from now on.
    pub added: Vec<String>,
    /// Workspaces whose settings changed (their next plan uses the new ones; a
    /// `[workspaces.git]` one gets a new cache setup).
    pub changed: Vec<String>,
    /// Workspaces no longer remediated: work in flight finishes, pending work is not
    /// started (reported as [`Outcome::Notified`] with the reason "the workspace is no
    /// longer configured").
    pub removed: Vec<String>,
}

/// Why a submission was not accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The runner has stopped.
    #[error("the remediator has stopped")]
    Stopped,
}

/// What [`Remediator::submit`] did with an event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Submitted {
    /// Work-item contributions queued (one per targeted address).
    pub queued: usize,
    /// Addresses skipped because the event is the echo of our own apply.
    pub own_echoes: usize,
    /// The work items the event was queued to (`queued` of them).
    pub keys: Vec<WorkKey>,
}

/// A work item's attempt ended: reached a terminal state (reverted, resolved,
/// notified: `done`; a pull request opened or updated: `pull_request`; `escalated`), or
/// failed and will be retried (`finished` false). For bookkeeping and operators:
/// `serve` marks the item's events finished in the journal, moves its drift row along
/// the lifecycle and counts the outcome ([`Remediator::subscribe_completed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// The work item.
    pub key: WorkKey,
    /// Ids of the events among its evidence (at most [`crate::MAX_EVIDENCE`], the
    /// newest; older ones of a very long burst are not listed).
    pub event_ids: Vec<String>,
    /// `done`, `pull_request` or `escalated` once finished; `retry` for a failed
    /// attempt that is retried.
    pub outcome: &'static str,
    /// The work item reached a terminal state (false: it is retried after a backoff).
    pub finished: bool,
    /// What the attempt ended in.
    pub result: Outcome,
    /// Where the drift of the address stands now.
    pub status: DriftStatus,
    /// The guard's verdict on the targeted plan, when one was planned.
    pub verdict: Option<PlanVerdict>,
    /// The plan's summary (changes and their actions), when one was planned.
    pub plan: Option<String>,
    /// Why, for an escalation, a refusal or a failure (redacted).
    pub reason: Option<String>,
    /// When the attempt started.
    pub started: DateTime<Utc>,
}

/// What one attempt on a batch ended in (the `outcome` of
/// `driftreactor_remediations_total`, and of the work items on `/v1/remediations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// A guarded targeted apply succeeded (`reverted`).
    Reverted,
    /// A targeted plan showed no change (`resolved`).
    Resolved,
    /// The policy only notifies, or nothing more could be done than report it
    /// (`notified`).
    Notified,
    /// A pull request was opened or updated (`pull_request`).
    PullRequest,
    /// Automatic remediation was paused, or the address was already paused
    /// (`escalated`).
    Escalated,
    /// The guard refused to apply the plan (`refused`): a pull request, or an
    /// escalation without `[github]`.
    Refused,
    /// The IaC tool, the plan JSON or GitHub failed (`failed`): retried with backoff
    /// when transient, else escalated.
    Failed,
}

impl Outcome {
    /// The snake-case name (metric label value, API and log field).
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Reverted => "reverted",
            Outcome::Resolved => "resolved",
            Outcome::Notified => "notified",
            Outcome::PullRequest => "pull_request",
            Outcome::Escalated => "escalated",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one attempt on a batch ended in, with what the reconcile noted of its plan.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub(crate) result: Outcome,
    pub(crate) status: DriftStatus,
    pub(crate) verdict: Option<PlanVerdict>,
    pub(crate) plan: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) started: DateTime<Utc>,
}

impl Attempt {
    /// The attempt as the requeue alone tells it (no note of the reconcile).
    #[cfg(test)]
    fn of(action: &Requeue) -> Self {
        Self::from_parts(action, None, Note::default(), Utc::now())
    }

    /// Combines the requeue, the reconcile's error (redacted) and its note.
    fn from_parts(
        action: &Requeue,
        error: Option<String>,
        note: Note,
        started: DateTime<Utc>,
    ) -> Self {
        let escalated = matches!(action, Requeue::Escalate(_));
        let result = if error.is_some() {
            Outcome::Failed
        } else {
            match (note.outcome, action) {
                // Never reported: a wait is not an attempt.
                (_, Requeue::Wait { .. }) => Outcome::Failed,
                (Some(Outcome::Refused), _) => Outcome::Refused,
                (_, Requeue::Escalate(_)) => Outcome::Escalated,
                (Some(o), _) => o,
                (None, Requeue::Done) => Outcome::Notified,
                (None, Requeue::Recheck(_)) => Outcome::PullRequest,
                (None, Requeue::After(_)) => Outcome::Failed,
            }
        };
        let status = match result {
            _ if escalated => DriftStatus::Escalated,
            Outcome::Reverted => DriftStatus::Reverted,
            Outcome::Resolved => DriftStatus::Resolved,
            Outcome::Notified => DriftStatus::Open,
            Outcome::PullRequest | Outcome::Refused => DriftStatus::PullRequestOpen,
            Outcome::Escalated => DriftStatus::Escalated,
            Outcome::Failed => DriftStatus::Remediating,
        };
        let reason = match action {
            Requeue::Escalate(r) => Some(r.clone()),
            Requeue::Wait { reason, .. } => Some(reason.to_string()),
            _ => error.or(note.reason),
        };
        Self {
            result,
            status,
            verdict: note.verdict,
            plan: note.plan,
            reason,
            started,
        }
    }
}

enum Msg {
    Submit(Vec<Submission>),
    Idle(oneshot::Sender<()>),
    Clear(WorkKey),
    Reconcile(WorkKey, Mode),
    SetWorkspaces(Vec<Workspace>, oneshot::Sender<WorkspaceChange>),
    /// Hold a workspace (the backstop's plan): granted once no batch runs there.
    Hold(String, oneshot::Sender<Held>),
}

/// Runs backstop plans under the runner's workspace holds ([`Remediator::backstop`]).
#[derive(Debug, Clone)]
pub(crate) struct Backstop {
    tx: mpsc::WeakSender<Msg>,
}

impl Backstop {
    /// See [`Remediator::backstop_plan`].
    pub(crate) async fn plan(
        &self,
        workspace: &str,
    ) -> Result<
        (
            crate::backstop::BackstopPlan,
            crate::backstop::WorkspaceHold,
        ),
        crate::backstop::BackstopError,
    > {
        use crate::backstop::BackstopError;
        let tx = self.tx.upgrade().ok_or(BackstopError::Stopped)?;
        let (reply, rx) = oneshot::channel();
        tx.send(Msg::Hold(workspace.to_owned(), reply))
            .await
            .map_err(|_| BackstopError::Stopped)?;
        drop(tx);
        let Held { hold, ctx } = rx.await.map_err(|_| BackstopError::Stopped)?;
        let plan = crate::reconcile::backstop_plan(&ctx, workspace).await?;
        Ok((plan, hold))
    }
}

/// A granted [`Msg::Hold`]: the hold and the context to plan with.
struct Held {
    hold: crate::backstop::WorkspaceHold,
    ctx: Arc<Context>,
}

/// Builds a [`Remediator`].
#[derive(Debug)]
pub struct RemediatorBuilder {
    cfg: RemediationConfig,
    workspaces: Vec<Workspace>,
    github: Option<GitHub>,
    slack: Option<Slack>,
    redactor: Redactor,
    store: Option<Arc<dyn StateStore>>,
    default_plan_dir: Option<PathBuf>,
    cluster: Option<Arc<crate::Cluster>>,
    default_git_dir: Option<PathBuf>,
    state_locks: Option<SharedLocks>,
}

impl RemediatorBuilder {
    /// Terraform's state locks per workspace ([`StateLocks`]): no plan starts on a
    /// workspace whose lock is held, and a plan during which the lock appeared is
    /// not applied; the work waits `[remediation] lock_wait_secs` and tries again,
    /// not counted as an attempt ([`Remediator::subscribe_waiting`]). Default: none
    /// (no workspace is held back; Terraform's `-lock-timeout` still applies).
    ///
    /// `serve` passes the snapshot its state reload keeps of each workspace's lock
    /// object (`driftreactor_state::StateSource::lock`); [`crate::LockTable`] is a
    /// ready-made snapshot for other embedders and tests.
    pub fn state_locks(mut self, locks: Arc<dyn StateLocks>) -> Self {
        self.state_locks = Some(SharedLocks(locks));
        self
    }
    /// Several replicas on one journal: every batch runs under its workspace's lease
    /// and takes over the workspace's pending work from the journal
    /// ([`crate::cluster`]). `None` (the default): one process.
    pub fn cluster(mut self, cluster: Option<crate::Cluster>) -> Self {
        self.cluster = cluster.map(Arc::new);
        self
    }
    /// The folder of Git caches and worktrees when `[remediation] git_dir` is not set
    /// (serve: next to its journal, in the service's data directory).
    pub fn default_git_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.default_git_dir = Some(dir.into());
        self
    }
    /// The plan folder when `[remediation] plan_dir` is not set (serve: next to its
    /// journal, in the service's data directory).
    pub fn default_plan_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.default_plan_dir = Some(dir.into());
        self
    }
    /// The workspaces that can be planned and applied (at start; replaced later with
    /// [`Remediator::set_workspaces`]).
    pub fn workspaces(mut self, ws: impl IntoIterator<Item = Workspace>) -> Self {
        self.workspaces.extend(ws);
        self
    }
    /// The PR client (`None`: no PRs; refused plans and escalations are only announced).
    pub fn github(mut self, gh: Option<GitHub>) -> Self {
        self.github = gh;
        self
    }
    /// The Slack notifier.
    pub fn slack(mut self, slack: Option<Slack>) -> Self {
        self.slack = slack;
        self
    }
    /// The redactor (secrets from state; see `driftreactor_tfgraph::sensitive_values`).
    pub fn redactor(mut self, r: Redactor) -> Self {
        self.redactor = r;
        self
    }
    /// The memory of attempts / escalations (default: [`MemoryStore`]).
    pub fn store(mut self, s: Arc<dyn StateStore>) -> Self {
        self.store = Some(s);
        self
    }

    /// Starts the runner task (inside a tokio runtime) and returns the handle. Plan
    /// files a crashed run left in the plan folder are deleted first.
    pub fn spawn(mut self) -> Remediator {
        let plan_dir = self
            .cfg
            .plan_dir
            .clone()
            .or(self.default_plan_dir.take())
            .unwrap_or_else(crate::plans::private_default);
        crate::plans::remove_leftovers(&plan_dir);
        self.cfg.plan_dir = Some(plan_dir.clone());
        // A private temporary Git folder (no `git_dir`, no default) goes on shutdown.
        let private_git_dir = (self.cfg.git_dir.is_none() && self.default_git_dir.is_none())
            .then(crate::plans::private_git_default);
        self.cfg.git_dir = self
            .cfg
            .git_dir
            .clone()
            .or(self.default_git_dir.take())
            .or(private_git_dir.clone());
        let (ttx, _) = broadcast::channel(TRANSITION_BUFFER);
        let (ctx_done, _) = broadcast::channel(TRANSITION_BUFFER);
        let store = self
            .store
            .unwrap_or_else(|| Arc::new(MemoryStore::default()));
        let unmanaged_workspace = self
            .cfg
            .unmanaged_workspace
            .clone()
            .or_else(|| (self.workspaces.len() == 1).then(|| self.workspaces[0].name.clone()));
        let mut ctx = Context::new(
            self.cfg.clone(),
            self.workspaces,
            self.github,
            self.slack.clone(),
            self.redactor.clone(),
            store.clone(),
            ttx.clone(),
        );
        ctx.cluster = self.cluster.clone();
        ctx.unmanaged_workspace = unmanaged_workspace.clone();
        ctx.state_locks = self.state_locks.clone();
        let ctx = Arc::new(ctx);
        let (tx, rx) = mpsc::channel(self.cfg.queue_size.max(1));
        let (waits, _) = broadcast::channel(TRANSITION_BUFFER);
        let mut runner = Runner::new(ctx.clone(), ctx_done.clone());
        runner.waits = waits.clone();
        let waiting = runner.waiting.clone();
        for repo in ctx.repos() {
            runner.fetchers.start(repo);
        }
        let task = tokio::spawn(runner.run(rx));
        Remediator {
            tx,
            transitions: ttx,
            completed: ctx_done,
            store,
            redactor: self.redactor,
            grace: ChronoDuration::seconds(
                i64::try_from(self.cfg.own_change_grace_secs).unwrap_or(0),
            ),
            unmanaged_workspace,
            slack: self.slack,
            task: Some(task),
            plan_dir,
            cluster: self.cluster,
            settle: self.cfg.settle(),
            private_git_dir,
            waits,
            waiting,
        }
    }
}

/// The background fetches of the `[workspaces.git]` repositories, by workspace;
/// aborted when dropped (the runner owns them).
#[derive(Debug, Default)]
struct Fetchers(BTreeMap<String, JoinHandle<()>>);

impl Fetchers {
    /// Starts the background fetch of `repo` (none when its interval is zero),
    /// replacing the workspace's earlier one.
    fn start(&mut self, repo: Arc<crate::git::Repo>) {
        let name = repo.workspace().to_owned();
        self.stop(&name);
        if !repo.source().fetch_interval().is_zero() {
            self.0.insert(name, tokio::spawn(fetch_periodically(repo)));
        }
    }

    /// Stops the background fetch of `workspace`, if any.
    fn stop(&mut self, workspace: &str) {
        if let Some(f) = self.0.remove(workspace) {
            f.abort();
        }
    }

    /// Stops every background fetch and waits until they are gone.
    async fn stop_all(&mut self) {
        for (_, f) in std::mem::take(&mut self.0) {
            f.abort();
            let _ = f.await;
        }
    }
}

impl Drop for Fetchers {
    fn drop(&mut self) {
        for f in self.0.values() {
            f.abort();
        }
    }
}

/// The background fetch of one `[workspaces.git]` repository: at once (the first
/// clone), then every `fetch_interval_secs`. Failures are logged; a plan fetches
/// again anyway and fails on its own if the remote is still unreachable.
async fn fetch_periodically(repo: Arc<crate::git::Repo>) {
    let every = repo.source().fetch_interval();
    loop {
        match repo.fetch().await {
            Ok(v) => {
                tracing::debug!(workspace = %repo.workspace(), commit = %v.commit, "Fetched the IaC repository.");
            }
            Err(e) => {
                tracing::warn!(workspace = %repo.workspace(), error = %e, "Background fetch of the IaC repository failed.");
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// The remediator: submit decided events; it coalesces them per (workspace, address),
/// waits the settle window, and reverts (guarded targeted plan + apply), opens / updates
/// PRs or notifies, one IaC run per workspace at a time.
///
/// ```no_run
/// # async fn demo(ev: driftreactor_event::DriftEvent, d: driftreactor_decide::Decision) {
/// use driftreactor_remediate::{Remediator, RemediationConfig};
/// let r = Remediator::builder(RemediationConfig { settle_secs: 0, ..Default::default() }).spawn();
/// r.submit(&ev, &d, &[]).await.unwrap();
/// r.run_until_idle().await;
/// r.shutdown().await;
/// # }
/// ```
#[derive(Debug)]
pub struct Remediator {
    tx: mpsc::Sender<Msg>,
    transitions: broadcast::Sender<Transition>,
    completed: broadcast::Sender<Completed>,
    store: Arc<dyn StateStore>,
    redactor: Redactor,
    grace: ChronoDuration,
    unmanaged_workspace: Option<String>,
    slack: Option<Slack>,
    task: Option<JoinHandle<()>>,
    plan_dir: PathBuf,
    cluster: Option<Arc<crate::Cluster>>,
    settle: Duration,
    /// The Git folder to remove on shutdown (a private temporary one).
    private_git_dir: Option<PathBuf>,
    /// Work that waits (e.g. for Terraform's state lock), as it happens.
    waits: broadcast::Sender<Waiting>,
    /// The latest wait per workspace, while it lasts.
    waiting: WaitingNow,
}

/// The latest [`Waiting`] per workspace, while it lasts (shared by the runner and the
/// handle; never held across an `.await`).
pub(crate) type WaitingNow = Arc<std::sync::Mutex<BTreeMap<String, Waiting>>>;

/// The waits of `now`, sorted by workspace.
pub(crate) fn waiting_now(now: &WaitingNow) -> Vec<Waiting> {
    now.lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .cloned()
        .collect()
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

impl Remediator {
    /// A builder with `cfg`.
    pub fn builder(cfg: RemediationConfig) -> RemediatorBuilder {
        RemediatorBuilder {
            cfg,
            workspaces: Vec::new(),
            github: None,
            slack: None,
            redactor: Redactor::default(),
            store: None,
            default_plan_dir: None,
            cluster: None,
            default_git_dir: None,
            state_locks: None,
        }
    }

    /// Replaces the workspaces the remediator can plan and apply in (as
    /// [`RemediatorBuilder::workspaces`] set them at start), while it runs: new ones
    /// are remediated from now on (a `[workspaces.git]` one gets its cache clone and
    /// background fetch as at start); one whose settings changed uses them from its
    /// next plan; for a removed one, work in flight finishes, and work not started
    /// is not started: each such work item is reported on
    /// [`Remediator::subscribe_completed`] as finished with [`Outcome::Notified`],
    /// the drift left [`DriftStatus::Open`] and the reason "the workspace is no
    /// longer configured", and one log line names the workspace. Later events for a
    /// removed workspace are reported the same way until it is added again.
    ///
    /// `serve` calls it after each re-listing of `[[workspace_sets]]`
    /// with every remediating workspace (the fixed `[[workspaces]]` ones and each
    /// set's current expansion: [`Workspace::from_config`] / [`Workspace::from_git`]
    /// of `WorkspaceSetConfig::workspace`), whether or not the listing changed.
    /// Returns what changed, by name.
    ///
    /// # Errors
    /// [`SubmitError::Stopped`] after shutdown.
    pub async fn set_workspaces(
        &self,
        workspaces: impl IntoIterator<Item = Workspace>,
    ) -> Result<WorkspaceChange, SubmitError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Msg::SetWorkspaces(workspaces.into_iter().collect(), tx))
            .await
            .map_err(|_| SubmitError::Stopped)?;
        rx.await.map_err(|_| SubmitError::Stopped)
    }

    /// A stream of [`Waiting`]: work that did not start a plan, or did not apply
    /// one, because Terraform's state lock of its workspace is held; it is tried
    /// again after [`Waiting::retry_after`]. Subscribe before submitting to see them
    /// all; a subscriber more than 1024 behind loses the oldest.
    pub fn subscribe_waiting(&self) -> broadcast::Receiver<Waiting> {
        self.waits.subscribe()
    }

    /// The workspaces whose work waits now (the latest [`Waiting`] of each, sorted
    /// by workspace), for status pages: an entry lasts until the workspace's next
    /// attempt ends or the workspace is removed.
    pub fn waiting(&self) -> Vec<Waiting> {
        waiting_now(&self.waiting)
    }

    /// The wait stream's sender and the current waits (for the hand-off's [`Hook`]).
    ///
    /// [`Hook`]: crate::handoff::Hook
    pub(crate) fn wait_handles(&self) -> (broadcast::Sender<Waiting>, WaitingNow) {
        (self.waits.clone(), self.waiting.clone())
    }

    /// Submits one decided event with the router's dependents (blast radius). Events
    /// whose decision has no action, and echoes of our own applies, are skipped. Waits
    /// only when the runner's queue is full (backpressure).
    ///
    /// # Errors
    /// [`SubmitError::Stopped`] after shutdown.
    pub async fn submit(
        &self,
        event: &DriftEvent,
        decision: &Decision,
        dependents: &[ResourceKey],
    ) -> Result<Submitted, SubmitError> {
        let all = submissions(
            event,
            decision,
            dependents,
            &self.redactor,
            self.unmanaged_workspace.as_deref(),
        );
        let mut out = Submitted::default();
        let mut keep = Vec::with_capacity(all.len());
        for s in all {
            let applies = recall(
                "read applies",
                self.store
                    .applies_for(&s.key.workspace, &s.key.address)
                    .await,
            );
            if is_own_echo(event, &s.key.address, &applies, self.grace) {
                tracing::info!(key = %s.key, event_id = %s.evidence.event_id, "Ignoring the echo of our own apply.");
                out.own_echoes += 1;
            } else {
                keep.push(s);
            }
        }
        out.queued = keep.len();
        out.keys = keep.iter().map(|s| s.key.clone()).collect();
        if !keep.is_empty() {
            self.tx
                .send(Msg::Submit(keep))
                .await
                .map_err(|_| SubmitError::Stopped)?;
        }
        Ok(out)
    }

    /// Waits until no work is pending or running: every submitted item has been
    /// reverted, resolved, turned into a PR, notified or escalated (scheduled PR
    /// re-checks do not count). Retries with backoff are waited for. For `replay`.
    pub async fn run_until_idle(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Idle(tx)).await.is_ok() {
            let _ = rx.await;
        }
        if let Some(s) = &self.slack {
            s.flush().await;
        }
    }

    /// Clears an escalation: auto-revert of (workspace, address) resumes and its
    /// attempt and revert history is forgotten.
    pub async fn clear(&self, workspace: &str, address: &str) {
        let _ = self
            .tx
            .send(Msg::Clear(WorkKey::new(workspace, address)))
            .await;
    }

    /// Asks for a targeted plan of (workspace, address) now, with `mode` (`Revert`:
    /// plan, guard, apply; `PullRequest`: plan, and a pull request when it shows
    /// drift): work already waiting starts at once; otherwise a new work item starts
    /// with the address's earlier evidence, if any, and a record of the request.
    pub async fn reconcile(&self, workspace: &str, address: &str, mode: Mode) {
        let _ = self
            .tx
            .send(Msg::Reconcile(WorkKey::new(workspace, address), mode))
            .await;
    }

    /// A stream of transitions (new drift, reverted, PR opened, resolved, escalated).
    /// Subscribe before submitting to see them all.
    pub fn subscribe(&self) -> broadcast::Receiver<Transition> {
        self.transitions.subscribe()
    }

    /// A stream of [`Completed`] work items (with the ids of their events), for
    /// bookkeeping of what is finished. Subscribe before submitting to see them all; a
    /// subscriber more than 1024 behind loses the oldest.
    pub fn subscribe_completed(&self) -> broadcast::Receiver<Completed> {
        self.completed.subscribe()
    }

    /// The sender of [`Remediator::subscribe_completed`] (for handles that subscribe
    /// later, e.g. the hand-off's hook).
    pub(crate) fn completed_sender(&self) -> broadcast::Sender<Completed> {
        self.completed.clone()
    }

    /// The redactor shared with the PR client and Slack: secrets added to it
    /// ([`Redactor::add_secrets`], e.g. after a state reload) are redacted everywhere.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The remediation memory (attempts, escalations, applies).
    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.store
    }

    /// Stops accepting work, lets running reconciles finish, posts pending Slack
    /// messages, and ends the runner. Pending (not yet started) items are dropped.
    pub async fn shutdown(mut self) {
        let (tx, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.tx, tx));
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        if let Some(s) = &self.slack {
            s.flush().await;
        }
        // Nothing runs any more: no plan file is needed.
        crate::plans::remove_leftovers(&self.plan_dir);
        crate::plans::remove_if_empty(&self.plan_dir);
        // The runner stopped the background fetches when it ended.
        if let Some(dir) = self.private_git_dir.take() {
            let _ = tokio::fs::remove_dir_all(&dir).await;
        }
    }

    /// Holds `workspace` (waiting until no remediation of it runs; none starts while
    /// the hold lives), then runs the backstop's whole-root plan there
    /// ([`crate::backstop`]): `init` when needed, `plan -detailed-exitcode -out=…`,
    /// `show -json`, in the workspace's `dir` or a clean worktree of its
    /// `[workspaces.git]` repository, with its tool, environment and lock timeout;
    /// never an apply. Returns the drift with the hold still held: keep it until the
    /// drift's events are handed on, so no remediation of the workspace starts
    /// between the plan and their hand-off.
    ///
    /// # Errors
    /// [`crate::backstop::BackstopError`]: no root, Terraform's state lock held (no
    /// plan), the tool or the checkout failed, the plan JSON does not read, stopped.
    pub async fn backstop_plan(
        &self,
        workspace: &str,
    ) -> Result<
        (
            crate::backstop::BackstopPlan,
            crate::backstop::WorkspaceHold,
        ),
        crate::backstop::BackstopError,
    > {
        self.backstop().plan(workspace).await
    }

    /// A handle that runs [`Remediator::backstop_plan`] (for the hand-off's hook); it
    /// does not keep the remediator running: after [`Remediator::shutdown`] it
    /// answers [`crate::BackstopError::Stopped`].
    pub(crate) fn backstop(&self) -> Backstop {
        Backstop {
            tx: self.tx.downgrade(),
        }
    }

    /// The settle window of `[remediation]`.
    pub fn settle(&self) -> Duration {
        self.settle
    }

    /// The coordination with other replicas, when several share the journal.
    pub fn cluster(&self) -> Option<&Arc<crate::Cluster>> {
        self.cluster.as_ref()
    }

    /// The folder plan files are written to (resolved at spawn).
    pub fn plan_dir(&self) -> &std::path::Path {
        &self.plan_dir
    }
}

/// Work of one key not yet started.
#[derive(Debug)]
struct Pending {
    /// The coalesced submissions.
    item: WorkItem,
    /// Not before this instant (settle window or backoff).
    not_before: Instant,
    /// The work is a scheduled re-check (no new events), possibly joined by events
    /// that arrived before it started.
    recheck: bool,
    /// Asked for through the API ([`Remediator::reconcile`]): runs even when another
    /// replica finished the events of its evidence (several replicas).
    requested: bool,
}

/// Where one key's work stands. A running key has no re-check scheduled, and a
/// re-check is only scheduled for a key with nothing pending.
#[derive(Debug)]
enum Phase {
    /// Nothing pending or running; a PR re-check may be scheduled at this instant.
    Idle { recheck_at: Option<Instant> },
    /// Work waiting for its settle window or backoff.
    Waiting(Pending),
    /// Part of a running batch; `next` is work that arrived since it started.
    Running { next: Option<Pending> },
}

#[derive(Debug)]
struct Slot {
    /// Pending, running, or idle.
    phase: Phase,
    /// Evidence of earlier rounds, kept until the drift is resolved or reverted. Empty
    /// exactly while the drift has not been announced yet (the next batch is fresh).
    history: Vec<Evidence>,
    /// Dependents seen over the same rounds.
    deps: BTreeSet<String>,
    /// How the address was matched (kept for re-checks).
    matched: Matched,
    /// Backoff of consecutive transient failures.
    backoff: Option<Steps>,
}

/// A key's retry backoff and how many delays it has handed out.
#[derive(Debug)]
struct Steps {
    backoff: ExponentialBackoff,
    taken: u32,
}

impl Steps {
    /// The next delay.
    fn next(&mut self) -> Option<Duration> {
        self.taken = self.taken.saturating_add(1);
        self.backoff.next()
    }

    /// Gives back the last delay (it was not needed: the batch waited instead of
    /// failing): the backoff as it was before it (jitter drawn anew). `None`: as
    /// before the first.
    fn give_back(self, builder: ExponentialBuilder) -> Option<Self> {
        let taken = self.taken.checked_sub(1).filter(|t| *t > 0)?;
        let mut backoff = builder.build();
        for _ in 0..taken {
            let _ = backoff.next();
        }
        Some(Self { backoff, taken })
    }
}

impl Slot {
    /// Not announced yet: the next batch with this key announces a new drift.
    fn fresh(&self) -> bool {
        self.history.is_empty()
    }

    /// Work waiting to start, if any (also while a batch runs).
    fn pending_mut(&mut self) -> Option<&mut Pending> {
        match &mut self.phase {
            Phase::Waiting(p) | Phase::Running { next: Some(p) } => Some(p),
            Phase::Idle { .. } | Phase::Running { next: None } => None,
        }
    }

    fn has_pending(&self) -> bool {
        matches!(
            self.phase,
            Phase::Waiting(_) | Phase::Running { next: Some(_) }
        )
    }

    /// Drops work that has not started and any scheduled re-check (shutdown).
    fn drop_pending(&mut self) {
        match &mut self.phase {
            Phase::Idle { recheck_at } => *recheck_at = None,
            Phase::Waiting(_) => self.phase = Phase::Idle { recheck_at: None },
            Phase::Running { next } => *next = None,
        }
    }
}

struct Runner {
    ctx: Arc<Context>,
    completed: broadcast::Sender<Completed>,
    slots: BTreeMap<WorkKey, Slot>,
    busy: BTreeSet<String>,
    tasks: JoinSet<TaskOut>,
    idle_waiters: Vec<oneshot::Sender<()>>,
    backoff: ExponentialBuilder,
    /// Background fetches of the `[workspaces.git]` repositories.
    fetchers: Fetchers,
    /// Workspaces removed by [`Remediator::set_workspaces`] (and not added again):
    /// their work is not started.
    retired: BTreeSet<String>,
    /// Where [`Waiting`] goes.
    waits: broadcast::Sender<Waiting>,
    /// The latest wait per workspace.
    waiting: WaitingNow,
    /// Holds asked for per workspace, in order ([`Remediator::backstop_plan`]).
    hold_waiters: BTreeMap<String, std::collections::VecDeque<oneshot::Sender<Held>>>,
    /// Where dropped holds send their workspace.
    release_tx: mpsc::UnboundedSender<String>,
    release_rx: mpsc::UnboundedReceiver<String>,
}

impl Runner {
    fn new(ctx: Arc<Context>, completed: broadcast::Sender<Completed>) -> Self {
        let (release_tx, release_rx) = mpsc::unbounded_channel();
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(ctx.cfg.backoff_min_ms.max(1)))
            .with_max_delay(Duration::from_secs(ctx.cfg.backoff_max_secs.max(1)))
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        Self {
            ctx,
            completed,
            slots: BTreeMap::new(),
            busy: BTreeSet::new(),
            tasks: JoinSet::new(),
            idle_waiters: Vec::new(),
            backoff,
            fetchers: Fetchers::default(),
            retired: BTreeSet::new(),
            waits: broadcast::channel(1).0,
            waiting: WaitingNow::default(),
            hold_waiters: BTreeMap::new(),
            release_tx,
            release_rx,
        }
    }

    /// Grants the holds asked for on workspaces where no batch runs (and no other
    /// hold is granted): the workspace is busy until the hold is dropped.
    fn grant_holds(&mut self) {
        let free: Vec<String> = self
            .hold_waiters
            .keys()
            .filter(|w| !self.busy.contains(*w))
            .cloned()
            .collect();
        for ws in free {
            let Some(queue) = self.hold_waiters.get_mut(&ws) else {
                continue;
            };
            while let Some(waiter) = queue.pop_front() {
                if waiter.is_closed() {
                    continue;
                }
                self.busy.insert(ws.clone());
                let held = Held {
                    hold: crate::backstop::WorkspaceHold::new(ws.clone(), self.release_tx.clone()),
                    ctx: self.ctx.clone(),
                };
                // A requester gone meanwhile drops the hold, which frees the workspace.
                let _ = waiter.send(held);
                break;
            }
            if queue.is_empty() {
                self.hold_waiters.remove(&ws);
            }
        }
    }

    async fn run(mut self, rx: mpsc::Receiver<Msg>) {
        self.serve(rx).await;
        self.fetchers.stop_all().await;
    }

    async fn serve(&mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut open = true;
        loop {
            let now = Instant::now();
            self.fire_rechecks(now);
            self.retire_pending();
            self.grant_holds();
            self.dispatch(now);
            if self.is_idle() {
                for w in self.idle_waiters.drain(..) {
                    let _ = w.send(());
                }
                if !open {
                    return;
                }
            }
            if !open && self.tasks.is_empty() {
                return;
            }
            let wake = self.next_wake();
            tokio::select! {
                msg = rx.recv(), if open => match msg {
                    Some(Msg::Submit(subs)) => self.accept(subs),
                    Some(Msg::Idle(w)) => self.idle_waiters.push(w),
                    Some(Msg::Clear(key)) => {
                        // Awaited here, so that work submitted after the clear sees it.
                        recall("clear", self.ctx.store.clear(&key).await);
                    }
                    Some(Msg::Reconcile(key, mode)) => self.reconcile_now(key, mode),
                    Some(Msg::SetWorkspaces(ws, reply)) => {
                        let _ = reply.send(self.set_workspaces(ws));
                    }
                    Some(Msg::Hold(ws, reply)) => {
                        self.hold_waiters.entry(ws).or_default().push_back(reply);
                    }
                    None => {
                        open = false;
                        // Drop work that has not started; finish what runs.
                        for s in self.slots.values_mut() {
                            s.drop_pending();
                        }
                    }
                },
                Some(ws) = self.release_rx.recv() => {
                    self.busy.remove(&ws);
                }
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => match done {
                    Ok((batch, ran, result)) => self.finished(&batch, &ran, result),
                    Err(e) => tracing::error!(error = %e, "A remediation task ended unexpectedly."),
                },
                () = sleep_until_opt(wake) => {}
            }
        }
    }

    /// [`Remediator::set_workspaces`]: swaps the workspaces in the context, starts
    /// and stops background fetches, and retires removed workspaces (their pending
    /// work is reported by [`Runner::retire_pending`]).
    fn set_workspaces(&mut self, ws: Vec<Workspace>) -> WorkspaceChange {
        let (new_repos, change) = self.ctx.replace_workspaces(ws, true);
        for name in change.removed.iter().chain(&change.changed) {
            self.fetchers.stop(name);
        }
        for repo in new_repos {
            self.fetchers.start(repo);
        }
        for name in change.added.iter().chain(&change.changed) {
            self.retired.remove(name);
        }
        for name in &change.removed {
            self.retired.insert(name.clone());
            self.waiting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(name);
        }
        if change != WorkspaceChange::default() {
            tracing::info!(
                added = ?change.added,
                changed = ?change.changed,
                removed = ?change.removed,
                "The remediated workspaces changed."
            );
        }
        change
    }

    /// Work of removed workspaces that has not started is not started: each item is
    /// reported finished ([`Outcome::Notified`], drift left open, the reason
    /// [`WORKSPACE_GONE`]); scheduled re-checks are cancelled. Work in flight is left
    /// to finish (what it queues next comes back here).
    fn retire_pending(&mut self) {
        if self.retired.is_empty() {
            return;
        }
        let now = Utc::now();
        let mut dropped: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, slot) in &mut self.slots {
            if !self.retired.contains(&*key.workspace) {
                continue;
            }
            match &mut slot.phase {
                Phase::Idle { recheck_at } => *recheck_at = None,
                Phase::Running { .. } => continue,
                Phase::Waiting(_) => {
                    let Phase::Waiting(p) =
                        std::mem::replace(&mut slot.phase, Phase::Idle { recheck_at: None })
                    else {
                        continue;
                    };
                    let _ = self.completed.send(Completed {
                        key: key.clone(),
                        event_ids: p.item.evidence.iter().map(|e| e.event_id.clone()).collect(),
                        outcome: "done",
                        finished: true,
                        result: Outcome::Notified,
                        status: DriftStatus::Open,
                        verdict: None,
                        plan: None,
                        reason: Some(WORKSPACE_GONE.to_owned()),
                        started: now,
                    });
                    dropped
                        .entry(key.workspace.to_string())
                        .or_default()
                        .push(key.address.to_string());
                }
            }
            slot.backoff = None;
            slot.history.clear();
            slot.deps.clear();
        }
        for (workspace, addresses) in dropped {
            tracing::warn!(
                workspace = %workspace,
                addresses = ?addresses,
                reason = WORKSPACE_GONE,
                "Work of a removed workspace was not started."
            );
        }
        self.slots.retain(|_, s| {
            !matches!(s.phase, Phase::Idle { recheck_at: None }) || !s.history.is_empty()
        });
    }

    fn accept(&mut self, subs: Vec<Submission>) {
        let settle = self.ctx.cfg.settle();
        let now = Instant::now();
        for s in subs {
            let slot = self.slots.entry(s.key.clone()).or_insert_with(|| Slot {
                phase: Phase::Idle { recheck_at: None },
                history: Vec::new(),
                deps: BTreeSet::new(),
                matched: s.matched,
                backoff: None,
            });
            if let Some(p) = slot.pending_mut() {
                p.item.merge(s);
                continue;
            }
            // A new burst: the settle window starts now. New events supersede a
            // scheduled re-check.
            let new = Pending {
                item: WorkItem::new(s),
                not_before: now + settle,
                recheck: false,
                requested: false,
            };
            match &mut slot.phase {
                Phase::Running { next } => *next = Some(new),
                _ => slot.phase = Phase::Waiting(new),
            }
        }
    }

    /// [`Remediator::reconcile`]: waiting work starts now; an idle key gets a new
    /// item (its history, or a record of the request, as evidence), due now.
    fn reconcile_now(&mut self, key: WorkKey, mode: Mode) {
        let now = Instant::now();
        let slot = self.slots.entry(key.clone()).or_insert_with(|| Slot {
            phase: Phase::Idle { recheck_at: None },
            history: Vec::new(),
            deps: BTreeSet::new(),
            matched: Matched::Managed(driftreactor_event::MatchKind::Primary),
            backoff: None,
        });
        if let Some(p) = slot.pending_mut() {
            p.not_before = now;
            p.item.mode = p.item.mode.max(mode);
            return;
        }
        let evidence = slot
            .history
            .last()
            .cloned()
            .unwrap_or_else(|| reconcile_request(&self.ctx.redactor));
        let new = Pending {
            item: WorkItem::new(Submission {
                key,
                mode,
                matched: slot.matched,
                evidence,
                dependents: slot.deps.clone(),
                unmanaged: None,
            }),
            not_before: now,
            recheck: false,
            requested: true,
        };
        match &mut slot.phase {
            Phase::Running { next } => *next = Some(new),
            _ => slot.phase = Phase::Waiting(new),
        }
    }

    fn fire_rechecks(&mut self, now: Instant) {
        for (key, slot) in &mut self.slots {
            if let Phase::Idle { recheck_at } = &mut slot.phase
                && recheck_at.is_some_and(|t| t <= now)
            {
                *recheck_at = None;
                let Some(last) = slot.history.last().cloned() else {
                    continue;
                };
                let mut item = WorkItem::new(Submission {
                    key: key.clone(),
                    mode: Mode::PullRequest,
                    matched: slot.matched,
                    evidence: last,
                    dependents: BTreeSet::new(),
                    unmanaged: None,
                });
                item.absorb_history(&slot.history);
                slot.phase = Phase::Waiting(Pending {
                    item,
                    not_before: now,
                    recheck: true,
                    requested: false,
                });
            }
        }
    }

    fn is_idle(&self) -> bool {
        self.tasks.is_empty() && self.slots.values().all(|s| !s.has_pending())
    }

    fn next_wake(&self) -> Option<Instant> {
        self.slots
            .values()
            .filter_map(|s| match &s.phase {
                Phase::Waiting(p) => Some(p.not_before),
                Phase::Idle { recheck_at } => *recheck_at,
                Phase::Running { .. } => None,
            })
            .min()
    }

    /// Starts batches for free workspaces with ready items, within the parallel limit.
    fn dispatch(&mut self, now: Instant) {
        let limit = self.ctx.cfg.max_parallel_workspaces.max(1);
        // workspace → mode → keys ready
        let mut ready: BTreeMap<String, BTreeMap<Mode, Vec<WorkKey>>> = BTreeMap::new();
        for (key, slot) in &self.slots {
            let Phase::Waiting(p) = &slot.phase else {
                continue;
            };
            if p.not_before > now || self.busy.contains(&*key.workspace) {
                continue;
            }
            ready
                .entry(key.workspace.to_string())
                .or_default()
                .entry(p.item.mode)
                .or_default()
                .push(key.clone());
        }
        for (ws, modes) in ready {
            if self.busy.len() >= limit {
                break;
            }
            // Strongest mode first; unmanaged imports one PR per resource.
            let Some((mode, mut keys)) = modes.into_iter().next_back() else {
                continue;
            };
            if mode == Mode::Import {
                keys.truncate(1);
            }
            let mut items = Vec::with_capacity(keys.len());
            let mut fresh = false;
            let mut recheck = true;
            let mut requested = BTreeSet::new();
            for key in keys {
                let Some(slot) = self.slots.get_mut(&key) else {
                    continue;
                };
                if !matches!(slot.phase, Phase::Waiting(_)) {
                    continue;
                }
                let Phase::Waiting(Pending {
                    mut item,
                    recheck: rechecking,
                    requested: asked,
                    ..
                }) = std::mem::replace(&mut slot.phase, Phase::Running { next: None })
                else {
                    continue;
                };
                if asked || rechecking {
                    requested.insert(key.clone());
                }
                fresh |= slot.fresh();
                recheck &= rechecking;
                item.absorb_history(&slot.history);
                item.dependents.extend(slot.deps.iter().cloned());
                slot.history = item.evidence.clone();
                slot.deps = item.dependents.clone();
                slot.matched = item.matched;
                items.push(item);
            }
            if items.is_empty() {
                continue;
            }
            let target = self.ctx.estate().targets.get(&ws).cloned();
            let batch = Arc::new(Batch {
                workspace: ws.clone(),
                mode,
                items,
                fresh,
                recheck,
                fence: None,
                target,
            });
            self.busy.insert(ws);
            let ctx = self.ctx.clone();
            let delay = self.next_backoff(&batch);
            self.tasks.spawn(async move {
                match ctx.cluster.clone() {
                    None => {
                        let (action, attempt) = run_batch(batch.clone(), ctx, delay).await;
                        (batch.clone(), batch, Ok((action, attempt)))
                    }
                    Some(cluster) => {
                        let (ran, result) =
                            run_claimed(batch.clone(), ctx, cluster, requested, delay).await;
                        (batch, ran, result)
                    }
                }
            });
        }
    }

    /// The delay to use if this batch fails transiently: the next step of the backoff
    /// of its first key (all keys of a batch share their fate).
    fn next_backoff(&mut self, batch: &Batch) -> Duration {
        let builder = self.backoff;
        let Some(first) = batch.items.first() else {
            return Duration::from_secs(1);
        };
        let slot = self.slots.get_mut(&first.key);
        slot.and_then(|s| {
            s.backoff
                .get_or_insert_with(|| Steps {
                    backoff: builder.build(),
                    taken: 0,
                })
                .next()
        })
        .unwrap_or(Duration::from_secs(self.ctx.cfg.backoff_max_secs.max(1)))
    }

    #[cfg(test)]
    fn finish(&mut self, batch: &Batch, action: Requeue) {
        let attempt = Attempt::of(&action);
        self.finish_with(batch, action, attempt);
    }

    /// A batch task ended: `ran` is the batch it ran (several replicas: `batch` as
    /// filtered and joined by the journal's pending work), `result` what it ended in.
    fn finished(&mut self, batch: &Batch, ran: &Batch, result: Result<(Requeue, Attempt), Skip>) {
        match result {
            Ok((action, attempt)) => {
                self.finish_with(ran, action, attempt);
                // Work items of this replica that another replica had finished.
                let skipped: Vec<WorkKey> = batch
                    .items
                    .iter()
                    .filter(|i| !ran.items.iter().any(|r| r.key == i.key))
                    .map(|i| i.key.clone())
                    .collect();
                self.skip(&skipped, Skip::Superseded);
            }
            Err(skip) => {
                self.busy.remove(&batch.workspace);
                let keys: Vec<WorkKey> = batch.items.iter().map(|i| i.key.clone()).collect();
                if skip == Skip::Busy {
                    self.wait_for_lease(batch);
                } else {
                    self.skip(&keys, skip);
                }
            }
        }
    }

    /// The workspace's lease is held by another replica: the batch's work waits a
    /// claim interval (merged with what arrived since) and tries again.
    fn wait_for_lease(&mut self, batch: &Batch) {
        let after = self
            .ctx
            .cluster
            .as_ref()
            .map_or(Duration::from_secs(1), |c| c.claim_interval());
        self.wait_again(batch, after, false);
    }

    /// The batch's work waits `after` (merged with what arrived since) and tries
    /// again; no backoff step, nothing reported. `requested`: it runs then even when
    /// another replica finished its events (several replicas).
    fn wait_again(&mut self, batch: &Batch, after: Duration, requested_all: bool) {
        let at = Instant::now() + after;
        for item in &batch.items {
            let Some(slot) = self.slots.get_mut(&item.key) else {
                continue;
            };
            let next = match std::mem::replace(&mut slot.phase, Phase::Idle { recheck_at: None }) {
                Phase::Running { next } => next,
                other => {
                    slot.phase = other;
                    unreachable_phase(&item.key);
                    continue;
                }
            };
            let mut back = item.clone();
            let mut requested = batch.recheck || requested_all;
            if let Some(newer) = next {
                requested |= newer.requested;
                for e in newer.item.evidence.iter().cloned() {
                    back.merge(Submission {
                        key: back.key.clone(),
                        mode: newer.item.mode,
                        matched: newer.item.matched,
                        evidence: e,
                        dependents: newer.item.dependents.clone(),
                        unmanaged: newer.item.unmanaged.clone(),
                    });
                }
            }
            slot.phase = Phase::Waiting(Pending {
                item: back,
                not_before: at,
                recheck: batch.recheck,
                requested,
            });
        }
    }

    /// Work items another replica finished (or whose lease was lost to one): nothing
    /// is recorded here; work that arrived meanwhile waits as usual.
    fn skip(&mut self, keys: &[WorkKey], why: Skip) {
        for key in keys {
            let Some(slot) = self.slots.get_mut(key) else {
                continue;
            };
            let next = match std::mem::replace(&mut slot.phase, Phase::Idle { recheck_at: None }) {
                Phase::Running { next } => next,
                other => {
                    slot.phase = other;
                    unreachable_phase(key);
                    continue;
                }
            };
            tracing::debug!(%key, why = ?why, "Work item left to another replica.");
            slot.backoff = None;
            if why == Skip::Superseded {
                slot.history.clear();
                slot.deps.clear();
            }
            slot.phase = next.map_or(Phase::Idle { recheck_at: None }, Phase::Waiting);
        }
    }

    /// Work of `batch` waits (not an attempt): announced on the wait stream, logged,
    /// kept as the workspace's current wait.
    fn waited(&mut self, batch: &Batch, reason: WaitReason, after: Duration) {
        let lock = reason.lock();
        tracing::info!(
            workspace = %batch.workspace,
            addresses = ?batch.addresses(),
            reason = reason.as_str(),
            lock_id = lock.id.as_deref().unwrap_or(""),
            lock_who = lock.who.as_deref().unwrap_or(""),
            lock_operation = lock.operation.as_deref().unwrap_or(""),
            retry_after_secs = after.as_secs(),
            "Terraform's state lock is held: the remediation waits (not counted as an attempt)."
        );
        let w = Waiting {
            workspace: batch.workspace.clone(),
            addresses: batch.addresses(),
            reason,
            retry_after: after,
            at: Utc::now(),
        };
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(w.workspace.clone(), w.clone());
        // No subscriber is fine.
        let _ = self.waits.send(w);
    }

    fn finish_with(&mut self, batch: &Batch, action: Requeue, attempt: Attempt) {
        self.busy.remove(&batch.workspace);
        if let Requeue::Wait { reason, after } = action {
            // Not an attempt: no completion, no backoff step; the same work again.
            // (`next_backoff` took the delay from the first key's backoff.)
            let builder = self.backoff;
            if let Some(slot) = batch.items.first().and_then(|i| self.slots.get_mut(&i.key)) {
                slot.backoff = slot.backoff.take().and_then(|b| b.give_back(builder));
            }
            self.waited(batch, reason, after);
            self.wait_again(batch, after, true);
            return;
        }
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&batch.workspace);
        let now = Instant::now();
        let outcome = outcome_of(&action);
        let _ = outcome;
        for c in completions(batch, &action, &attempt) {
            // No subscriber is fine (replay).
            let _ = self.completed.send(c);
        }
        for item in &batch.items {
            let Some(slot) = self.slots.get_mut(&item.key) else {
                continue;
            };
            let next = match std::mem::replace(&mut slot.phase, Phase::Idle { recheck_at: None }) {
                Phase::Running { next } => next,
                other => {
                    slot.phase = other;
                    // Several replicas (a claimed batch holds a fence): the batch also
                    // ran items it joined from the journal (other replicas' events),
                    // which are not this runner's running work; work of its own still
                    // waiting for them finds their events finished when it claims
                    // the workspace, and is dropped. Otherwise it cannot happen.
                    if batch.fence.is_none() {
                        unreachable_phase(&item.key);
                    }
                    continue;
                }
            };
            match &action {
                Requeue::After(after) => {
                    // Retry: put the work back, merged with anything that arrived since.
                    let mut back = item.clone();
                    if let Some(Pending { item: newer, .. }) = next {
                        for e in newer.evidence.iter().cloned() {
                            back.merge(Submission {
                                key: back.key.clone(),
                                mode: newer.mode,
                                matched: newer.matched,
                                evidence: e,
                                dependents: newer.dependents.clone(),
                                unmanaged: newer.unmanaged.clone(),
                            });
                        }
                    }
                    slot.phase = Phase::Waiting(Pending {
                        item: back,
                        not_before: now + *after,
                        recheck: false,
                        requested: false,
                    });
                }
                Requeue::Done => {
                    // Reverted, resolved or notified: a new drift is a new story.
                    slot.backoff = None;
                    slot.history.clear();
                    slot.deps.clear();
                    slot.phase = next.map_or(Phase::Idle { recheck_at: None }, Phase::Waiting);
                }
                Requeue::Escalate(_) => {
                    slot.backoff = None;
                    slot.phase = next.map_or(Phase::Idle { recheck_at: None }, Phase::Waiting);
                }
                Requeue::Recheck(after) => {
                    slot.backoff = None;
                    slot.phase = match next {
                        Some(p) => Phase::Waiting(p),
                        None => Phase::Idle {
                            recheck_at: (!after.is_zero()).then(|| now + *after),
                        },
                    };
                }
                Requeue::Wait { .. } => unreachable_phase(&item.key),
            }
        }
        if matches!(action, Requeue::Done) && !batch.recheck {
            // Keep memory bounded: forget keys with nothing pending or scheduled.
            self.slots.retain(|_, s| {
                !matches!(s.phase, Phase::Idle { recheck_at: None }) || !s.history.is_empty()
            });
        }
    }
}

/// What a batch task answers: the batch as dispatched, the batch it ran, and what it
/// ended in (or why it did not run).
type TaskOut = (Arc<Batch>, Arc<Batch>, Result<(Requeue, Attempt), Skip>);

/// Why a batch did not run or record (several replicas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    /// Another replica holds the workspace's lease: try again later.
    Busy,
    /// Another replica finished every work item of it.
    Superseded,
    /// The lease was lost while it ran: the new holder redoes what is pending.
    Lost,
}

/// `done`, `escalated`, `pull_request` or `retry` ([`Completed::outcome`]).
fn outcome_of(action: &Requeue) -> &'static str {
    match action {
        Requeue::Done => "done",
        Requeue::Escalate(_) => "escalated",
        Requeue::Recheck(_) => "pull_request",
        Requeue::After(_) | Requeue::Wait { .. } => "retry",
    }
}

/// The [`Completed`] of every item of `batch`.
fn completions(batch: &Batch, action: &Requeue, attempt: &Attempt) -> Vec<Completed> {
    batch
        .items
        .iter()
        .map(|item| Completed {
            key: item.key.clone(),
            event_ids: item.evidence.iter().map(|e| e.event_id.clone()).collect(),
            outcome: outcome_of(action),
            finished: !matches!(action, Requeue::After(_) | Requeue::Wait { .. }),
            result: attempt.result,
            status: attempt.status,
            verdict: attempt.verdict,
            plan: attempt.plan.clone(),
            reason: attempt.reason.clone(),
            started: attempt.started,
        })
        .collect()
}

/// Runs one batch: reconcile, or the error policy; an escalation carried out.
async fn run_batch(batch: Arc<Batch>, ctx: Arc<Context>, delay: Duration) -> (Requeue, Attempt) {
    let started = Utc::now();
    // The reconcile runs in its own task so that a panic (a broken invariant) is
    // contained: the batch is escalated and its workspace freed.
    let inner = tokio::spawn({
        let (batch, ctx) = (batch.clone(), ctx.clone());
        async move {
            match reconcile(batch.clone(), ctx.clone()).await {
                Ok(a) => (a, None),
                Err(e) => {
                    let error = ctx.redactor.text(&e.to_string()).into_owned();
                    (error_policy(&batch, &e, delay), Some(error))
                }
            }
        }
    });
    let (action, error) = inner.await.unwrap_or_else(|e| {
        tracing::error!(error = %e, "A remediation task failed unexpectedly.");
        (
            Requeue::escalate("internal error while remediating (see the logs)"),
            None,
        )
    });
    if let Requeue::Escalate(reason) = &action {
        escalate(&batch, reason, &ctx).await;
    }
    let note = ctx.take_note(&batch.workspace);
    let mut attempt = Attempt::from_parts(&action, error, note, started);
    attempt.reason = attempt.reason.map(|r| ctx.redactor.text(&r).into_owned());
    // A wait is not an attempt: the runner logs it.
    if !matches!(action, Requeue::Wait { .. }) {
        log_attempt(&batch, &attempt);
    }
    (action, attempt)
}

/// The journal's pending work of one workspace (several replicas).
#[derive(Debug, Default)]
struct Claimed {
    /// Submissions of the batch's mode, not yet finished.
    subs: Vec<Submission>,
    /// Per work item of the workspace, the ids of its events not yet finished.
    pending: BTreeMap<WorkKey, BTreeSet<String>>,
    /// The events of `subs` with every work item they feed (recorded before the
    /// outcome, so a later `submitted` of another replica keeps them finished).
    events: Vec<(driftreactor_event::Provider, String, Vec<ResourceKey>)>,
    /// When the latest event of `subs` was received.
    latest: Option<DateTime<Utc>>,
}

/// Reads the journal's pending remediations that feed work items of `workspace`.
async fn claim_pending(
    ctx: &Context,
    cluster: &crate::Cluster,
    workspace: &str,
    mode: Mode,
) -> Result<Claimed, driftreactor_journal::Error> {
    let grace = ChronoDuration::seconds(i64::try_from(ctx.cfg.own_change_grace_secs).unwrap_or(0));
    let mut out = Claimed::default();
    for p in cluster.journal().pending_remediations().await? {
        let Ok(item) = serde_json::from_str::<driftreactor_pipeline::Processed>(&p.request) else {
            continue;
        };
        let event = &item.event;
        let all = submissions(
            event,
            &item.decision(),
            &item.dependents,
            &ctx.redactor,
            ctx.unmanaged_workspace.as_deref(),
        );
        let keys: Vec<ResourceKey> = all
            .iter()
            .map(|s| ResourceKey::new(s.key.workspace.to_string(), s.key.address.to_string()))
            .collect();
        let mut ours = false;
        for s in all {
            if *s.key.workspace != *workspace
                || p.done
                    .iter()
                    .any(|d| d.workspace == *s.key.workspace && d.address == *s.key.address)
            {
                continue;
            }
            let applies = recall(
                "read applies",
                ctx.store
                    .applies_for(&s.key.workspace, &s.key.address)
                    .await,
            );
            if is_own_echo(event, &s.key.address, &applies, grace) {
                continue;
            }
            out.pending
                .entry(s.key.clone())
                .or_default()
                .insert(event.id.clone());
            if s.mode == mode && mode != Mode::Import {
                ours = true;
                out.subs.push(s);
            }
        }
        if ours {
            let at = DateTime::parse_from_rfc3339(&p.received_at)
                .map(|t| t.with_timezone(&Utc))
                .ok();
            out.latest = out.latest.max(at);
            out.events.push((event.provider, event.id.clone(), keys));
        }
    }
    Ok(out)
}

/// Runs `batch` under its workspace's lease (several replicas; see
/// [`crate::cluster`]): takes the lease, joins the journal's pending work of the
/// workspace after its settle window, runs, records the outcome under the lease and
/// releases it.
async fn run_claimed(
    batch: Arc<Batch>,
    ctx: Arc<Context>,
    cluster: Arc<crate::Cluster>,
    requested: BTreeSet<WorkKey>,
    delay: Duration,
) -> (Arc<Batch>, Result<(Requeue, Attempt), Skip>) {
    let Some(fence) = cluster.acquire(&batch.workspace).await else {
        return (batch, Err(Skip::Busy));
    };
    let fence = Arc::new(fence);
    let keep_alive = fence.keep_alive();
    let settle = ChronoDuration::from_std(ctx.cfg.settle()).unwrap_or_default();
    let step = cluster.ttl() / 3;
    let wait_until = Instant::now() + ctx.cfg.settle() * 4;
    let claimed = loop {
        let claimed = match claim_pending(&ctx, &cluster, &batch.workspace, batch.mode).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(workspace = %batch.workspace, error = %e,
                    "Cannot read the journal's pending work; retrying later.");
                keep_alive.abort();
                fence.release().await;
                return (batch, Err(Skip::Busy));
            }
        };
        let left = claimed
            .latest
            .map(|l| l + settle - Utc::now())
            .and_then(|d| d.to_std().ok())
            .filter(|d| !d.is_zero());
        match left {
            Some(d) if Instant::now() < wait_until => {
                tokio::time::sleep(d.min(step)).await;
                if !fence.check().await {
                    keep_alive.abort();
                    return (batch, Err(Skip::Lost));
                }
            }
            _ => break claimed,
        }
    };
    let mut items: Vec<WorkItem> = batch
        .items
        .iter()
        .filter(|i| {
            batch.recheck
                || requested.contains(&i.key)
                || claimed
                    .pending
                    .get(&i.key)
                    .is_some_and(|ids| i.evidence.iter().any(|e| ids.contains(&e.event_id)))
        })
        .cloned()
        .collect();
    for s in claimed.subs {
        match items.iter_mut().find(|i| i.key == s.key) {
            Some(i) => i.merge(s),
            None => items.push(WorkItem::new(s)),
        }
    }
    items.sort_by(|a, b| a.key.cmp(&b.key));
    if items.is_empty() {
        keep_alive.abort();
        fence.release().await;
        return (batch, Err(Skip::Superseded));
    }
    let ran = Arc::new(Batch {
        items,
        fence: Some(fence.clone()),
        ..(*batch).clone()
    });
    let (action, attempt) = run_batch(ran.clone(), ctx.clone(), delay).await;
    keep_alive.abort();
    if !fence.check().await {
        return (ran, Err(Skip::Lost));
    }
    // The outcome is written under the lease, then the lease is released.
    let journal = cluster.journal().clone();
    if !matches!(action, Requeue::After(_) | Requeue::Wait { .. }) {
        for (provider, id, keys) in claimed.events {
            if let Err(e) = journal.remediation_submitted(provider, id, keys).await {
                tracing::warn!(error = %e, "Cannot record a claimed event's work items.");
            }
        }
    }
    // A wait is not an attempt: nothing is recorded, the events stay pending.
    let recorded = if matches!(action, Requeue::Wait { .. }) {
        Vec::new()
    } else {
        completions(&ran, &action, &attempt)
    };
    for mut c in recorded {
        if let Some(ids) = claimed.pending.get(&c.key) {
            for id in ids {
                if !c.event_ids.contains(id) {
                    c.event_ids.push(id.clone());
                }
            }
        }
        crate::handoff::record_completed(&journal, c).await;
    }
    fence.release().await;
    (ran, Ok((action, attempt)))
}

/// The one `info` line of an attempt: the addresses, what it ended in, the drift's
/// status, the guard's verdict and the plan's summary, and why.
fn log_attempt(batch: &Batch, a: &Attempt) {
    tracing::info!(
        workspace = %batch.workspace,
        addresses = ?batch.addresses(),
        mode = ?batch.mode,
        outcome = %a.result,
        status = %a.status,
        verdict = a.verdict.map_or("not planned", PlanVerdict::as_str),
        plan = a.plan.as_deref().unwrap_or("none"),
        reason = a.reason.as_deref().unwrap_or(""),
        "Remediation attempt finished."
    );
}

/// The evidence of a reconcile asked for through the API (no event behind it).
fn reconcile_request(redactor: &Redactor) -> Evidence {
    let now = Utc::now();
    let mut event = DriftEvent::new(
        driftreactor_event::Provider::Aws,
        format!("reconcile-request-{}", now.timestamp_millis()),
    );
    event.service = "driftreactor".into();
    event.operation = "reconcile requested through the API".into();
    event.occurred_at = Some(now);
    Evidence::from_event(&event, redactor)
}

/// A slot was not in the phase its batch implies (a broken invariant of the runner):
/// logged, never a panic.
fn unreachable_phase(key: &WorkKey) {
    tracing::error!(%key, "Remediation runner: a work item was not in the expected state.");
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    //! The runner's timers (settle window, retry backoff, PR re-checks) on tokio's
    //! paused clock: deadlines are asserted exactly, no real time passes.

    use driftreactor_event::{MatchKind, Provider};

    use super::*;

    fn runner(cfg: RemediationConfig) -> Runner {
        let (ttx, _) = broadcast::channel(16);
        let (done, _) = broadcast::channel(16);
        let ctx = Arc::new(Context::new(
            cfg,
            Vec::new(),
            None,
            None,
            Redactor::default(),
            Arc::new(MemoryStore::default()),
            ttx,
        ));
        Runner::new(ctx, done)
    }

    fn sub(id: &str) -> Submission {
        Submission {
            key: WorkKey::new("prod", "aws_security_group.web"),
            mode: Mode::Notify,
            matched: Matched::Managed(MatchKind::Primary),
            evidence: Evidence::from_event(
                &DriftEvent::new(Provider::Aws, id),
                &Redactor::default(),
            ),
            dependents: BTreeSet::new(),
            unmanaged: None,
        }
    }

    async fn run_one(r: &mut Runner) -> Arc<Batch> {
        assert_eq!(r.tasks.len(), 1, "one batch started");
        let (_, batch, _) = r.tasks.join_next().await.unwrap().unwrap();
        batch
    }

    const SEC: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn settle_backoff_and_recheck_deadlines_follow_the_clock() {
        let mut r = runner(RemediationConfig {
            settle_secs: 60,
            ..RemediationConfig::default()
        });
        let t0 = Instant::now();
        r.accept(vec![sub("e1")]);
        assert_eq!(r.next_wake(), Some(t0 + 60 * SEC), "the settle window");
        tokio::time::advance(30 * SEC).await;
        r.dispatch(Instant::now());
        assert!(r.tasks.is_empty(), "still settling");
        // A later event joins the item; it does not extend the window.
        r.accept(vec![sub("e2")]);
        assert_eq!(r.next_wake(), Some(t0 + 60 * SEC));
        tokio::time::advance(30 * SEC).await;
        r.dispatch(Instant::now());
        assert_eq!(r.next_wake(), None, "running: nothing to wake for");
        assert!(!r.is_idle());
        let batch = run_one(&mut r).await;
        assert!(batch.fresh && !batch.recheck);
        assert_eq!(batch.items[0].evidence.len(), 2);

        // A transient failure: the work comes back after the backoff.
        let t1 = Instant::now();
        r.finish(&batch, Requeue::after(5 * SEC));
        assert_eq!(r.next_wake(), Some(t1 + 5 * SEC));
        assert!(!r.is_idle(), "a retry is pending work");
        tokio::time::advance(4 * SEC).await;
        r.dispatch(Instant::now());
        assert!(r.tasks.is_empty(), "not before the backoff");
        tokio::time::advance(SEC).await;
        r.dispatch(Instant::now());
        let batch = run_one(&mut r).await;
        assert!(!batch.fresh, "announced already");

        // A PR waits for a human: re-planned after the re-check delay, idle meanwhile.
        let t2 = Instant::now();
        r.finish(&batch, Requeue::recheck(120 * SEC));
        assert!(r.is_idle(), "a scheduled re-check is not pending work");
        assert_eq!(r.next_wake(), Some(t2 + 120 * SEC));
        tokio::time::advance(119 * SEC).await;
        r.fire_rechecks(Instant::now());
        assert!(r.is_idle());
        tokio::time::advance(SEC).await;
        r.fire_rechecks(Instant::now());
        assert!(!r.is_idle());
        assert_eq!(r.next_wake(), Some(Instant::now()), "due at once");
        r.dispatch(Instant::now());
        let batch = run_one(&mut r).await;
        assert!(batch.recheck && !batch.fresh);
        assert_eq!(batch.items[0].evidence.len(), 2, "the history is kept");

        // Resolved: a new drift is a new story.
        r.finish(&batch, Requeue::done());
        assert!(r.is_idle());
        assert_eq!(r.next_wake(), None);
        assert!(r.slots.values().all(Slot::fresh));
    }

    #[tokio::test(start_paused = true)]
    async fn events_during_a_run_wait_for_it_and_settle_anew() {
        let mut r = runner(RemediationConfig {
            settle_secs: 10,
            ..RemediationConfig::default()
        });
        r.accept(vec![sub("e1")]);
        tokio::time::advance(10 * SEC).await;
        r.dispatch(Instant::now());
        let t1 = Instant::now();
        r.accept(vec![sub("e2")]);
        assert_eq!(r.next_wake(), None, "waits for the running batch");
        let batch = run_one(&mut r).await;
        r.finish(&batch, Requeue::recheck(60 * SEC));
        // The new events supersede the re-check; their own settle window counts.
        assert_eq!(r.next_wake(), Some(t1 + 10 * SEC));
        assert!(!r.is_idle());
        tokio::time::advance(10 * SEC).await;
        r.dispatch(Instant::now());
        let batch = run_one(&mut r).await;
        assert!(!batch.recheck);
        assert!(batch.items[0].evidence.iter().any(|e| e.event_id == "e2"));
    }

    /// A wait (Terraform's state lock held) requeues the same work after its delay,
    /// keeps it pending, reports no completion and takes no backoff step.
    #[tokio::test(start_paused = true)]
    async fn a_wait_requeues_without_a_completion_or_a_backoff_step() {
        let mut r = runner(RemediationConfig {
            settle_secs: 0,
            ..RemediationConfig::default()
        });
        let mut done = r.completed.subscribe();
        r.accept(vec![sub("e1")]);
        r.dispatch(Instant::now());
        let batch = run_one(&mut r).await;
        let t0 = Instant::now();
        let lock = crate::StateLock {
            who: Some("ci@runner".into()),
            ..crate::StateLock::default()
        };
        r.finish(
            &batch,
            Requeue::wait(crate::WaitReason::StateLocked(lock.clone()), 10 * SEC),
        );
        assert!(done.try_recv().is_err(), "a wait is not an attempt");
        assert!(!r.is_idle(), "the work is still pending");
        assert_eq!(r.next_wake(), Some(t0 + 10 * SEC));
        assert!(
            r.slots.values().all(|s| s.backoff.is_none()),
            "no backoff step"
        );
        let now = r.waiting.lock().unwrap().clone();
        assert_eq!(
            now.get("prod").map(|w| &w.reason),
            Some(&crate::WaitReason::StateLocked(lock))
        );
        tokio::time::advance(10 * SEC).await;
        r.dispatch(Instant::now());
        let again = run_one(&mut r).await;
        assert_eq!(again.items[0].evidence.len(), 1, "the same work");
        assert!(!again.fresh, "announced once");
        r.finish(&again, Requeue::done());
        assert!(done.try_recv().is_ok(), "the real attempt is reported");
        assert!(r.waiting.lock().unwrap().is_empty(), "no longer waiting");
    }

    #[tokio::test(start_paused = true)]
    async fn retry_delays_grow_within_the_configured_bounds() {
        let mut r = runner(RemediationConfig {
            settle_secs: 0,
            backoff_min_ms: 100,
            backoff_max_secs: 2,
            ..RemediationConfig::default()
        });
        r.accept(vec![sub("e1")]);
        r.dispatch(Instant::now());
        let batch = run_one(&mut r).await;
        let delays: Vec<Duration> = (0..8).map(|_| r.next_backoff(&batch)).collect();
        for d in &delays {
            assert!(
                *d >= Duration::from_millis(100) && *d <= 2 * SEC * 2,
                "{delays:?}"
            );
        }
        assert!(delays[7] >= delays[0], "{delays:?}");
    }
}
