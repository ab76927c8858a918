//! The reconciler, kube-runtime style: [`reconcile`] does the work for a batch of items
//! of one workspace and returns a small [`Requeue`]; [`error_policy`] maps an error to an
//! [`Requeue`]. Both are idempotent: running them again for the same drift gives the
//! same PR (found by its branch), and a plan that shows no changes resolves it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{Duration as ChronoDuration, Utc};
use driftreactor_event::MatchKind;
use driftreactor_notify::{
    DriftKind, DriftReport, DriftedAddress, Fingerprint, GitHub, GitHubError, Matched, PlanSummary,
    Redactor, Slack, Transition, TransitionKind,
};
use tokio::sync::broadcast;

use crate::config::{RemediationConfig, Workspace};
use crate::guard::{self, GuardError, PlanVerdict};
use crate::item::{Mode, WorkItem};
use crate::store::{ApplyRecord, StateStore, recall};
use crate::tf::{PlanExit, TfError, TfRunner};

/// What the runner does next with a batch. Small and `#[must_use]`, like kube's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Requeue {
    /// Finished (reverted, resolved, notified): the next event starts a new story.
    Done,
    /// A PR is open, waiting for a human: keep the evidence for updates, and re-plan
    /// after this long (zero: never by timer) to close the PR once the drift is
    /// resolved. Does not keep [`crate::Remediator::run_until_idle`] waiting.
    Recheck(Duration),
    /// Try again after this long (transient failure); counts as pending work.
    After(Duration),
    /// Stop automatic remediation of these addresses and tell a human (the evidence is
    /// kept for the escalation PR).
    Escalate(String),
    /// Not now, and not a failure: the work waits this long and is tried again (no
    /// backoff step, no attempt counted, no escalation). Pending work meanwhile.
    Wait {
        /// Why it waits (e.g. Terraform's state lock is held).
        reason: crate::WaitReason,
        /// How long, before it is tried again.
        after: Duration,
    },
}

impl Requeue {
    /// [`Requeue::Done`].
    pub const fn done() -> Self {
        Requeue::Done
    }
    /// [`Requeue::After`].
    pub const fn after(after: Duration) -> Self {
        Requeue::After(after)
    }
    /// [`Requeue::Recheck`].
    pub const fn recheck(after: Duration) -> Self {
        Requeue::Recheck(after)
    }
    /// [`Requeue::Escalate`].
    pub fn escalate(reason: impl Into<String>) -> Self {
        Requeue::Escalate(reason.into())
    }
    /// [`Requeue::Wait`].
    pub const fn wait(reason: crate::WaitReason, after: Duration) -> Self {
        Requeue::Wait { reason, after }
    }
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The IaC tool failed.
    #[error(transparent)]
    Tf(#[from] TfError),
    /// `show -json` output could not be read.
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// A GitHub call failed.
    #[error(transparent)]
    GitHub(#[from] GitHubError),
    /// The workspace lease was lost (several replicas): the step did not run.
    #[error("the workspace lease was lost to another replica")]
    LeaseLost,
    /// The workspace's Git repository could not be fetched or checked out
    /// (`[workspaces.git]`): nothing was planned.
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    /// The plan folder could not be prepared.
    #[error("plan folder {path}: {reason}")]
    PlanDir {
        /// The folder.
        path: String,
        /// The OS error.
        reason: String,
    },
}

impl Error {
    /// True when a retry with backoff may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Tf(e) => e.is_transient(),
            Error::GitHub(e) => e.is_transient(),
            Error::LeaseLost => true,
            Error::Git(e) => e.is_transient(),
            Error::Guard(_) | Error::PlanDir { .. } => false,
        }
    }
}

/// A batch: the ready items of one workspace with the same [`Mode`], run as one IaC
/// invocation (one `-target` per address) and one PR fingerprint.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Workspace name.
    pub workspace: String,
    /// The mode of every item.
    pub mode: Mode,
    /// The items (sorted by address).
    pub items: Vec<WorkItem>,
    /// True the first time these items are worked on (announce the new drift).
    pub fresh: bool,
    /// True when this is a scheduled re-check of an open PR.
    pub recheck: bool,
    /// The workspace lease it runs under (several replicas, [`crate::Cluster`]):
    /// checked before each state-changing step. `None`: one process.
    pub fence: Option<Arc<crate::cluster::Fence>>,
    /// The workspace's settings as they were when the runner started the batch, so
    /// work in flight finishes even when [`crate::Remediator::set_workspaces`] removes
    /// or changes the workspace meanwhile. `None`: looked up in the [`Context`].
    pub(crate) target: Option<Arc<Target>>,
}

/// A workspace the remediator can plan in, with its Git repository when it has
/// `[workspaces.git]`.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) workspace: Workspace,
    pub(crate) repo: Option<Arc<crate::git::Repo>>,
}

/// The workspaces the remediator can plan and apply in now (replaced as a whole by
/// [`crate::Remediator::set_workspaces`]) and the PR client that knows their folders.
#[derive(Debug, Default)]
pub(crate) struct Estate {
    pub(crate) targets: BTreeMap<String, Arc<Target>>,
    pub(crate) github: Option<GitHub>,
}

impl Batch {
    /// Fails with [`Error::LeaseLost`] when the batch runs under a workspace lease
    /// that is no longer this replica's (checked with its fencing token).
    async fn fenced(&self) -> Result<(), Error> {
        match &self.fence {
            Some(f) if !f.check().await => Err(Error::LeaseLost),
            _ => Ok(()),
        }
    }
}

impl Batch {
    /// The targeted addresses.
    pub fn addresses(&self) -> Vec<String> {
        self.items
            .iter()
            .map(|i| i.key.address.to_string())
            .collect()
    }

    /// The PR fingerprint.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::new(self.workspace.clone(), self.addresses())
    }

    fn report(&self, plan: Option<PlanSummary>, reason: String) -> DriftReport {
        let mut evidence: Vec<_> = self
            .items
            .iter()
            .flat_map(|i| i.evidence.iter().cloned())
            .collect();
        evidence.sort_by_key(|e| e.occurred_at);
        evidence.dedup_by(|a, b| a.event_id == b.event_id);
        let mut dependents: Vec<String> = self
            .items
            .iter()
            .flat_map(|i| i.dependents.iter().cloned())
            .collect();
        dependents.sort();
        dependents.dedup();
        dependents.retain(|d| !self.items.iter().any(|i| *i.key.address == **d));
        let kind = match self.items.iter().find_map(|i| i.unmanaged.clone()) {
            Some((resource, import)) if self.mode == Mode::Import => DriftKind::Unmanaged {
                resource,
                import: Some(import),
            },
            _ => DriftKind::Managed,
        };
        let mut addresses: Vec<DriftedAddress> = self
            .items
            .iter()
            .map(|i| DriftedAddress {
                address: i.key.address.to_string(),
                matched: i.matched,
            })
            .collect();
        addresses.sort_by_key(|a| {
            (
                a.matched != Matched::Managed(MatchKind::Primary),
                a.address.clone(),
            )
        });
        DriftReport {
            workspace: self.workspace.clone(),
            kind,
            addresses,
            dependents,
            evidence,
            plan,
            reason,
            code: None,
        }
    }
}

/// What a reconcile noted of its attempt, for the outcome the runner reports
/// ([`crate::Completed`]): set at most once per run of a workspace (one run per
/// workspace at a time), taken by the runner when the run ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct Note {
    /// What the attempt ended in, when the requeue alone does not tell it.
    pub(crate) outcome: Option<crate::Outcome>,
    /// The guard's verdict.
    pub(crate) verdict: Option<PlanVerdict>,
    /// The plan's summary ([`plan_line`]).
    pub(crate) plan: Option<String>,
    /// Why (a refusal, the reason of a pause).
    pub(crate) reason: Option<String>,
}

/// One line for a plan: `no changes`, or `N to change: address (actions), …`.
pub(crate) fn plan_line(s: &PlanSummary) -> String {
    if s.changes.is_empty() {
        return "no changes".into();
    }
    let changes: Vec<String> = s
        .changes
        .iter()
        .map(|c| format!("{} ({})", c.address, c.actions.join(", ")))
        .collect();
    format!("{} to change: {}", s.changes.len(), changes.join("; "))
}

/// Shared context of every reconcile (passed as `Arc`).
#[derive(Debug)]
pub struct Context {
    /// `[remediation]`.
    pub cfg: RemediationConfig,
    /// The workspaces that can be planned and applied, by name, and the PR client
    /// (swapped by [`crate::Remediator::set_workspaces`]; read with
    /// [`Context::workspace`] and [`Context::github`]).
    estate: std::sync::RwLock<Arc<Estate>>,
    /// Terraform state locks per workspace ([`crate::StateLocks`]); `None`: no
    /// workspace is ever held back.
    pub(crate) state_locks: Option<crate::locks::SharedLocks>,
    /// The folder of the Git caches (`[remediation] git_dir` or its default).
    git_dir: PathBuf,
    /// The Slack notifier, when configured.
    pub slack: Option<Slack>,
    /// Applied to everything that leaves the process.
    pub redactor: Redactor,
    /// Attempts, reverts, escalations, applies, open PRs.
    pub store: Arc<dyn StateStore>,
    /// Where plan files go (created 0700 on first use).
    pub plan_dir: PathBuf,
    /// Transition stream for callers.
    pub transitions: broadcast::Sender<Transition>,
    /// Several replicas on one journal: the workspace leases ([`crate::Cluster`]).
    pub cluster: Option<Arc<crate::Cluster>>,
    /// Where import blocks for unmanaged creates go (as the remediator resolved it).
    pub unmanaged_workspace: Option<String>,
    seq: AtomicU64,
    notes: std::sync::Mutex<BTreeMap<String, Note>>,
}

impl Context {
    /// A context. `plan_dir` defaults to a private folder under the temporary folder.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: RemediationConfig,
        workspaces: Vec<Workspace>,
        github: Option<GitHub>,
        slack: Option<Slack>,
        redactor: Redactor,
        store: Arc<dyn StateStore>,
        transitions: broadcast::Sender<Transition>,
    ) -> Self {
        let plan_dir = cfg
            .plan_dir
            .clone()
            .unwrap_or_else(crate::plans::private_default);
        let git_dir = cfg
            .git_dir
            .clone()
            .unwrap_or_else(crate::plans::private_git_default);
        let ctx = Self {
            cfg,
            estate: std::sync::RwLock::new(Arc::new(Estate {
                targets: BTreeMap::new(),
                github,
            })),
            state_locks: None,
            git_dir,
            slack,
            redactor,
            store,
            plan_dir,
            transitions,
            cluster: None,
            unmanaged_workspace: None,
            seq: AtomicU64::new(0),
            notes: std::sync::Mutex::new(BTreeMap::new()),
        };
        let _ = ctx.replace_workspaces(workspaces, false);
        ctx
    }

    /// The workspaces and PR client now.
    pub(crate) fn estate(&self) -> Arc<Estate> {
        self.estate
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The settings of `workspace`, when the remediator can plan and apply in it now.
    pub fn workspace(&self, workspace: &str) -> Option<Workspace> {
        self.estate()
            .targets
            .get(workspace)
            .map(|t| t.workspace.clone())
    }

    /// The names of the workspaces the remediator can plan and apply in now.
    pub fn workspace_names(&self) -> Vec<String> {
        self.estate().targets.keys().cloned().collect()
    }

    /// The PR client, when `[github]` is configured.
    pub fn github(&self) -> Option<GitHub> {
        self.estate().github.clone()
    }

    /// Replaces the set of workspaces: unchanged ones keep their Git repository (and
    /// its cache), new or changed `[workspaces.git]` ones get a new one (their token
    /// added to the redactor), and, with `learn_dirs`, the PR client learns the `dir`
    /// of new and changed ones (at start it was built knowing the config file's).
    /// Returns the repositories that are new (to start their background fetch) and
    /// what changed, by name.
    pub(crate) fn replace_workspaces(
        &self,
        workspaces: impl IntoIterator<Item = Workspace>,
        learn_dirs: bool,
    ) -> (Vec<Arc<crate::git::Repo>>, crate::WorkspaceChange) {
        let mut estate = self.estate.write().unwrap_or_else(|p| p.into_inner());
        let old = estate.clone();
        let mut targets = BTreeMap::new();
        let mut new_repos = Vec::new();
        let mut dirs = Vec::new();
        let mut change = crate::WorkspaceChange::default();
        for w in workspaces {
            if targets.contains_key(&w.name) {
                tracing::warn!(workspace = %w.name, "A workspace is listed twice; the first one is kept.");
                continue;
            }
            match old.targets.get(&w.name) {
                Some(t) if t.workspace == w => {
                    targets.insert(w.name.clone(), t.clone());
                    continue;
                }
                Some(_) => change.changed.push(w.name.clone()),
                None => change.added.push(w.name.clone()),
            }
            // Tokens of the repositories are redacted everywhere, as state secrets are.
            if let Some(secret) = w.git.as_ref().and_then(|g| g.secret()) {
                self.redactor.add_secrets([secret.to_owned()]);
            }
            let repo = w.git.clone().map(|source| {
                Arc::new(crate::git::Repo::new(
                    &w.name,
                    source,
                    &self.git_dir,
                    Duration::from_secs(self.cfg.command_timeout_secs.max(1)),
                    self.redactor.clone(),
                ))
            });
            new_repos.extend(repo.clone());
            if w.git.is_none() {
                dirs.push((w.name.clone(), w.dir.clone()));
            }
            targets.insert(w.name.clone(), Arc::new(Target { workspace: w, repo }));
        }
        change.removed = old
            .targets
            .keys()
            .filter(|n| !targets.contains_key(*n))
            .cloned()
            .collect();
        change.added.sort();
        change.changed.sort();
        // The PR client was given the `dir`s of the workspaces of the config file
        // when it was built (`Remediator::builder_from_config`): only workspaces added
        // or changed later are new to it.
        let github = match &old.github {
            Some(gh) if learn_dirs && !dirs.is_empty() => {
                Some(gh.clone().with_workspace_dirs(dirs))
            }
            other => other.clone(),
        };
        *estate = Arc::new(Estate { targets, github });
        (new_repos, change)
    }

    /// The Git repositories of the workspaces with `[workspaces.git]` now.
    pub(crate) fn repos(&self) -> Vec<Arc<crate::git::Repo>> {
        self.estate()
            .targets
            .values()
            .filter_map(|t| t.repo.clone())
            .collect()
    }

    /// The workspace `batch` runs in: as resolved when it was started, else now.
    pub(crate) fn target(&self, batch: &Batch) -> Option<Arc<Target>> {
        batch
            .target
            .clone()
            .or_else(|| self.estate().targets.get(&batch.workspace).cloned())
    }

    /// The state lock held on `workspace` now, per [`crate::StateLocks`].
    fn state_lock(&self, workspace: &str) -> Option<crate::StateLock> {
        self.state_locks.as_ref()?.0.lock(workspace)
    }

    /// The wait for a held state lock (`before_apply`: the lock appeared during the
    /// plan), `lock_wait_secs` long.
    fn lock_wait(&self, lock: crate::StateLock, before_apply: bool) -> Requeue {
        let reason = if before_apply {
            crate::WaitReason::StateLockedBeforeApply(lock)
        } else {
            crate::WaitReason::StateLocked(lock)
        };
        Requeue::wait(reason, Duration::from_secs(self.cfg.lock_wait_secs.max(1)))
    }

    /// Notes what the run of `workspace` ended in (merged with what it noted before).
    fn note(&self, workspace: &str, f: impl FnOnce(&mut Note)) {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        f(notes.entry(workspace.to_owned()).or_default());
    }

    /// Takes what the run of `workspace` noted (nothing: the default).
    pub(crate) fn take_note(&self, workspace: &str) -> Note {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        notes.remove(workspace).unwrap_or_default()
    }

    /// Sends a transition to Slack and to subscribers; never blocks.
    pub fn emit(&self, workspace: &str, addresses: Vec<String>, kind: TransitionKind) {
        let t = Transition {
            workspace: workspace.to_owned(),
            addresses,
            kind,
            at: Utc::now(),
        };
        tracing::info!(workspace, addresses = ?t.addresses, kind = ?t.kind, "Drift transition.");
        if let Some(s) = &self.slack {
            s.notify(t.clone());
        }
        let _ = self.transitions.send(t);
    }

    fn runner(&self, target: Option<&Target>) -> Option<TfRunner> {
        target.map(|t| TfRunner::new(&t.workspace, &self.cfg, self.redactor.clone()))
    }

    /// A PR is open and waits for a human: keep the evidence, re-plan after
    /// `recheck_secs` (zero: only when new events arrive).
    fn recheck_action(&self) -> Requeue {
        Requeue::recheck(Duration::from_secs(self.cfg.recheck_secs))
    }

    async fn plan_file(&self, workspace: &str) -> Result<PathBuf, Error> {
        let dir = &self.plan_dir;
        let err = |e: std::io::Error| Error::PlanDir {
            path: dir.display().to_string(),
            reason: e.to_string(),
        };
        tokio::fs::create_dir_all(dir).await.map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .await
                .map_err(err)?;
        }
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        Ok(dir.join(format!(
            "{}-{n}.tfplan",
            driftreactor_notify::slugify(workspace)
        )))
    }

    /// Opens or updates the PR; emits `PullRequestOpened` when it was created.
    async fn open_pr(&self, batch: &Batch, report: &DriftReport) -> Result<bool, Error> {
        let Some(gh) = self.github() else {
            tracing::warn!(workspace = %batch.workspace, "No [github] configured; cannot open a pull request: the drift is only reported.");
            return Ok(false);
        };
        batch.fenced().await?;
        let pr = gh.upsert(report).await?;
        let fp = report.fingerprint();
        recall("record pr", self.store.pr_opened(&fp).await);
        if pr.created {
            self.emit(
                &batch.workspace,
                batch.addresses(),
                TransitionKind::PullRequestOpened { url: pr.url },
            );
        }
        Ok(true)
    }

    /// Comments on and closes every open PR covering these addresses.
    async fn close_prs(&self, batch: &Batch, how: &str) -> Result<(), Error> {
        let Some(gh) = self.github() else {
            return Ok(());
        };
        batch.fenced().await?;
        let mut fps = vec![batch.fingerprint()];
        for a in batch.addresses() {
            for fp in recall(
                "read prs",
                self.store.open_prs_with(&batch.workspace, &a).await,
            ) {
                if !fps.contains(&fp) {
                    fps.push(fp);
                }
            }
        }
        for fp in fps {
            if gh.resolve(&fp, how).await?.is_some() {
                tracing::info!(workspace = %fp.workspace, branch = %fp.branch(), "Closed the pull request of a resolved drift.");
            }
            recall("forget pr", self.store.pr_closed(&fp).await);
        }
        Ok(())
    }
}

/// The most "from → to" lines a new-drift Slack message lists.
const MAX_SLACK_CHANGES: usize = 5;

fn announce(batch: &Batch, ctx: &Context) {
    if !batch.fresh {
        return;
    }
    let mut principals: Vec<String> = batch
        .items
        .iter()
        .flat_map(|i| i.evidence.iter().map(|e| e.principal.clone()))
        .filter(|p| !p.is_empty())
        .collect();
    principals.sort();
    principals.dedup();
    let mut operations: Vec<String> = batch
        .items
        .iter()
        .flat_map(|i| i.evidence.iter().map(|e| e.operation.clone()))
        .collect();
    operations.sort();
    operations.dedup();
    ctx.emit(
        &batch.workspace,
        batch.addresses(),
        TransitionKind::NewDrift {
            principals,
            operations,
            action: batch.mode.action(),
            changes: driftreactor_notify::evidence_change_lines(
                &batch
                    .items
                    .iter()
                    .flat_map(|i| i.evidence.iter().cloned())
                    .collect::<Vec<_>>(),
                MAX_SLACK_CHANGES,
            ),
        },
    );
}

/// Why auto-revert must not run for this batch, if it must not: an address is paused
/// (escalated earlier), is over its hourly attempt cap, or does not converge.
async fn blocked(batch: &Batch, ctx: &Context) -> Option<(String, bool)> {
    let now = Utc::now();
    for i in &batch.items {
        if let Some(reason) = recall("read pause", ctx.store.paused(&i.key).await) {
            return Some((
                format!("auto-revert of `{}` is paused: {reason}", i.key.address),
                false,
            ));
        }
    }
    for i in &batch.items {
        let attempts = recall(
            "count stamps",
            ctx.store
                .attempts_since(&i.key, now - ChronoDuration::hours(1))
                .await,
        );
        if attempts >= ctx.cfg.max_attempts_per_hour {
            return Some((
                format!(
                    "`{}` reached the cap of {} remediation attempts per hour",
                    i.key.address, ctx.cfg.max_attempts_per_hour
                ),
                true,
            ));
        }
        let window = ChronoDuration::seconds(
            i64::try_from(ctx.cfg.non_convergence_window_secs).unwrap_or(i64::MAX / 2),
        );
        let reverts = recall(
            "count stamps",
            ctx.store.reverts_since(&i.key, now - window).await,
        );
        if ctx.cfg.non_convergence_threshold > 0 && reverts >= ctx.cfg.non_convergence_threshold {
            return Some((
                format!(
                    "`{}` drifted again after {reverts} reverts within {} minutes: something is fighting the revert",
                    i.key.address,
                    ctx.cfg.non_convergence_window_secs / 60
                ),
                true,
            ));
        }
    }
    None
}

/// Does the work for `batch`. See the crate docs for the steps.
///
/// # Errors
/// [`Error`] from the IaC tool, the plan JSON or GitHub; [`error_policy`] decides.
#[tracing::instrument(skip_all, fields(workspace = %batch.workspace, mode = ?batch.mode, addresses = ?batch.addresses()))]
pub async fn reconcile(batch: Arc<Batch>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    announce(&batch, &ctx);
    match batch.mode {
        Mode::Notify => {
            ctx.note(&batch.workspace, |n| {
                n.outcome = Some(crate::Outcome::Notified)
            });
            return Ok(Requeue::done());
        }
        Mode::Import => {
            let report = batch.report(None, String::new());
            ctx.open_pr(&batch, &report).await?;
            // Nothing in state to re-plan: the PR waits for a human (or more events).
            return Ok(Requeue::recheck(Duration::ZERO));
        }
        Mode::PullRequest | Mode::Revert => {}
    }
    if batch.mode == Mode::Revert
        && let Some((reason, escalate)) = blocked(&batch, &ctx).await
    {
        if escalate {
            return Ok(Requeue::escalate(reason));
        }
        // Already escalated: keep its PR up to date with the new evidence, no revert.
        ctx.note(&batch.workspace, |n| {
            n.outcome = Some(crate::Outcome::Escalated);
            n.reason = Some(reason.clone());
        });
        let report = batch.report(None, format!("Automatic revert did not run: {reason}."));
        ctx.open_pr(&batch, &report).await?;
        return Ok(ctx.recheck_action());
    }
    let target = ctx.target(&batch);
    let Some(tf) = ctx.runner(target.as_deref()) else {
        // No Terraform root configured: a PR with the evidence is all we can do.
        if batch.mode == Mode::Revert {
            tracing::warn!(
                workspace = %batch.workspace,
                "Cannot revert: the workspace has no `dir` (the Terraform root to plan and apply in); opening a pull request with the evidence instead."
            );
        }
        let report = batch.report(
            None,
            "No Terraform directory is configured for this workspace.".into(),
        );
        return Ok(if ctx.open_pr(&batch, &report).await? {
            ctx.recheck_action()
        } else {
            Requeue::done()
        });
    };
    // Terraform's state lock is held (an apply is running): no plan now; the work
    // waits, and this is not an attempt.
    if let Some(lock) = ctx.state_lock(&batch.workspace) {
        return Ok(ctx.lock_wait(lock, false));
    }
    let now = Utc::now();
    for i in &batch.items {
        recall("record stamp", ctx.store.record_attempt(&i.key, now).await);
    }
    let targets = batch.addresses();
    // `[workspaces.git]`: fetch now and plan in a clean worktree of that commit; a
    // failed fetch fails the attempt (never a plan on older code).
    let repo = target.as_ref().and_then(|t| t.repo.as_ref());
    let checkout = match repo {
        Some(repo) => Some(repo.checkout().await?),
        None => None,
    };
    let (tf, code) = match (&checkout, repo) {
        (Some(c), Some(repo)) => {
            tracing::info!(commit = %c.version().commit, git_ref = %c.version().git_ref, "Planning in a clean worktree of the fetched commit.");
            let tf = tf
                .in_dir(c.dir())
                .with_default_env("TF_PLUGIN_CACHE_DIR", repo.plugin_cache());
            (tf, Some(c.version().clone()))
        }
        _ => (tf, None),
    };
    let plan_file = ctx.plan_file(&batch.workspace).await;
    let result = match &plan_file {
        Ok(file) => plan_and_act(&batch, &ctx, &tf, &targets, file, code.as_ref()).await,
        Err(_) => Ok(Requeue::done()),
    };
    // The plan file may hold secrets: never leave it behind.
    if let Ok(file) = &plan_file {
        let _ = tokio::fs::remove_file(file).await;
    }
    if let (Some(c), Some(repo)) = (checkout, repo) {
        c.remove(repo).await;
    }
    plan_file?;
    result
}

async fn plan_and_act(
    batch: &Batch,
    ctx: &Context,
    tf: &TfRunner,
    targets: &[String],
    plan_file: &std::path::Path,
    code: Option<&driftreactor_notify::CodeVersion>,
) -> Result<Requeue, Error> {
    tf.init(false).await?;
    let planning = std::time::Instant::now();
    tracing::info!(workspace = %batch.workspace, ?targets, "Targeted plan started.");
    let (exit, stream) = match tf.plan_stream(targets, plan_file).await {
        Err(TfError::InitRequired { .. }) => {
            tf.init(true).await?;
            tf.plan_stream(targets, plan_file).await?
        }
        other => other?,
    };
    if exit == PlanExit::NoChanges {
        tracing::info!(workspace = %batch.workspace, ?targets, plan_ms = planning.elapsed().as_millis(), verdict = "no_changes", "Targeted plan finished.");
        ctx.note(&batch.workspace, |n| {
            n.verdict = Some(PlanVerdict::NoChanges);
            n.plan = Some("no changes".into());
        });
        return resolved(batch, ctx, "a targeted plan shows no changes").await;
    }
    // The guard reads the plan's own stream; `show -json` (one more provider start-up
    // and schema load) only when the stream is not enough or a pull request needs the
    // attribute values (policy `pull_request`, a refusal).
    let fast = match guard::guard_stream(&stream, targets) {
        guard::StreamGuard::Report(r)
            if r.verdict != PlanVerdict::Pass || batch.mode == Mode::Revert =>
        {
            Some(r)
        }
        guard::StreamGuard::Report(_) => None,
        guard::StreamGuard::NotEnough(why) => {
            tracing::debug!(workspace = %batch.workspace, why = %why, "The plan's stream is not enough for the guard: reading `show -json`.");
            None
        }
    };
    let show = !matches!(&fast, Some(r) if r.verdict != PlanVerdict::Refuse);
    let report = match fast {
        Some(r) if r.verdict != PlanVerdict::Refuse => r,
        stream_report => {
            let json = tf.show_json(plan_file).await?;
            let mut r = guard::guard(&json, targets)?;
            // The stricter of the two: a refusal of the stream stands, with its reasons.
            if let Some(s) = stream_report
                && s.verdict == PlanVerdict::Refuse
            {
                for why in s.summary.refusals {
                    if !r.summary.refusals.contains(&why) {
                        r.summary.refusals.push(why);
                    }
                }
                r.verdict = PlanVerdict::Refuse;
            }
            r
        }
    };
    tracing::info!(workspace = %batch.workspace, ?targets, plan_ms = planning.elapsed().as_millis(), verdict = report.verdict.as_str(), show, "Targeted plan finished.");
    let mut summary = report.summary;
    redact_summary(&mut summary, &ctx.redactor);
    ctx.note(&batch.workspace, |n| {
        n.verdict = Some(report.verdict);
        n.plan = Some(plan_line(&summary));
    });
    match report.verdict {
        PlanVerdict::NoChanges => resolved(batch, ctx, "the plan has no resource changes").await,
        PlanVerdict::Refuse => {
            let reason = format!(
                "The guard refused to apply the targeted plan ({}).",
                summary.refusals.join(" ").trim_end_matches('.')
            );
            ctx.note(&batch.workspace, |n| {
                n.outcome = Some(crate::Outcome::Refused);
                n.reason = Some(reason.clone());
            });
            let mut r = batch.report(Some(summary.clone()), reason.clone());
            r.code = code.cloned();
            if ctx.open_pr(batch, &r).await? {
                Ok(ctx.recheck_action())
            } else {
                Ok(Requeue::escalate(reason))
            }
        }
        PlanVerdict::Pass if batch.mode == Mode::PullRequest => {
            let mut r = batch.report(
                Some(summary),
                "The policy for these resources is `pull_request`.".into(),
            );
            r.code = code.cloned();
            ctx.open_pr(batch, &r).await?;
            Ok(ctx.recheck_action())
        }
        PlanVerdict::Pass => {
            let started = Utc::now();
            // A lock taken while we planned: somebody else's apply runs; ours would
            // apply a plan made before it. Not applied; planned again later.
            if let Some(lock) = ctx.state_lock(&batch.workspace) {
                return Ok(ctx.lock_wait(lock, true));
            }
            let changes: BTreeMap<String, Vec<String>> = summary
                .changes
                .iter()
                .map(|c| (c.address.clone(), c.actions.clone()))
                .collect();
            let changed: Vec<String> = changes.keys().cloned().collect();
            batch.fenced().await?;
            let applying = std::time::Instant::now();
            tracing::info!(workspace = %batch.workspace, ?targets, "Targeted apply started.");
            let apply = tf.apply(plan_file).await;
            let finished = Utc::now();
            tracing::info!(workspace = %batch.workspace, ?targets, apply_ms = applying.elapsed().as_millis(), ok = apply.is_ok(), "Targeted apply finished.");
            // Record the apply window even when apply failed part-way: events it caused
            // are still ours.
            let rec = ApplyRecord {
                workspace: batch.workspace.clone(),
                changes,
                started,
                finished,
            };
            recall("record apply", ctx.store.record_apply(rec).await);
            apply?;
            // A revert counts (towards `non_convergence_threshold`) only for the
            // addresses the applied plan changed: an item of the batch whose drift was
            // already gone (a late event of an address reverted earlier, joined into
            // this batch) was not reverted again, and counting it made its next real
            // drift escalate — and with it every address of that batch — unapplied.
            for i in &batch.items {
                if changed.iter().any(|a| guard::covers(&i.key.address, a)) {
                    recall(
                        "record stamp",
                        ctx.store.record_revert(&i.key, finished).await,
                    );
                }
            }
            ctx.note(&batch.workspace, |n| {
                n.outcome = Some(crate::Outcome::Reverted)
            });
            ctx.emit(
                &batch.workspace,
                batch.addresses(),
                TransitionKind::Reverted,
            );
            ctx.close_prs(
                batch,
                "driftreactor reverted it with a guarded targeted apply",
            )
            .await?;
            Ok(Requeue::done())
        }
    }
}

async fn resolved(batch: &Batch, ctx: &Context, how: &str) -> Result<Requeue, Error> {
    let mut was_paused = false;
    for i in &batch.items {
        if recall("read pause", ctx.store.paused(&i.key).await).is_some() {
            was_paused = true;
            break;
        }
    }
    for i in &batch.items {
        if was_paused {
            // Its state changed (the drift is gone): auto-revert resumes.
            recall("clear", ctx.store.clear(&i.key).await);
        }
    }
    ctx.note(&batch.workspace, |n| {
        n.outcome = Some(crate::Outcome::Resolved)
    });
    ctx.close_prs(batch, how).await?;
    ctx.emit(
        &batch.workspace,
        batch.addresses(),
        TransitionKind::Resolved,
    );
    Ok(Requeue::done())
}

fn redact_summary(s: &mut PlanSummary, r: &Redactor) {
    for c in &mut s.changes {
        for a in &mut c.attributes {
            if driftreactor_notify::is_secret_key(&a.name) {
                a.before = driftreactor_notify::REDACTED.into();
                a.after = driftreactor_notify::REDACTED.into();
            } else {
                a.before = r.text(&a.before).into_owned();
                a.after = r.text(&a.after).into_owned();
            }
        }
    }
    for changes in s.drift.values_mut() {
        r.changes(changes);
    }
}

/// Maps a reconcile error to the next step: transient failures (state lock, throttling,
/// a tool run that failed, GitHub 5xx / rate limits) retry after `backoff` (the
/// caller's exponential-with-jitter delay; the hourly attempt cap bounds the retries);
/// permanent ones (the tool cannot start, unreadable plan JSON) escalate at once.
pub fn error_policy(batch: &Batch, error: &Error, backoff: Duration) -> Requeue {
    tracing::warn!(workspace = %batch.workspace, addresses = ?batch.addresses(), error = %error, "Remediation attempt failed.");
    if error.is_transient() {
        Requeue::after(backoff)
    } else {
        Requeue::escalate(format!("remediation failed: {error}"))
    }
}

/// Carries out [`Requeue::Escalate`]: pauses auto-revert of the batch's addresses, opens
/// or updates the PR (with the reason), and emits `Escalated` once per pause.
pub async fn escalate(batch: &Batch, reason: &str, ctx: &Context) {
    let reason = ctx.redactor.text(reason).into_owned();
    let mut newly = false;
    for i in &batch.items {
        newly |= recall("pause", ctx.store.pause(&i.key, &reason).await);
    }
    if newly {
        ctx.emit(
            &batch.workspace,
            batch.addresses(),
            TransitionKind::Escalated {
                reason: reason.clone(),
            },
        );
    }
    let report = batch.report(
        None,
        format!("Escalated: {reason}. Automatic revert is paused for these addresses until a human clears it or a plan shows no drift."),
    );
    if let Err(e) = ctx.open_pr(batch, &report).await {
        tracing::error!(workspace = %batch.workspace, error = %e, "Cannot open the escalation pull request.");
    }
}

/// The backstop's whole-root plan of `workspace` ([`crate::Remediator::backstop_plan`],
/// which holds the workspace around it): the same root, tool, environment, plugin
/// cache, lock timeout and state-lock gate as [`reconcile`], no `-target`, never an
/// apply; the plan file is deleted.
pub(crate) async fn backstop_plan(
    ctx: &Context,
    workspace: &str,
) -> Result<crate::backstop::BackstopPlan, crate::backstop::BackstopError> {
    use crate::backstop::BackstopError;
    let tool = |source: TfError| BackstopError::Tool {
        workspace: workspace.to_owned(),
        source,
    };
    let target = ctx.estate().targets.get(workspace).cloned();
    let Some(tf) = ctx.runner(target.as_deref()) else {
        return Err(BackstopError::NoRoot(workspace.to_owned()));
    };
    if ctx.state_lock(workspace).is_some() {
        return Err(BackstopError::Locked(workspace.to_owned()));
    }
    let started = Utc::now();
    let repo = target.as_ref().and_then(|t| t.repo.as_ref());
    let checkout = match repo {
        Some(repo) => Some(repo.checkout().await.map_err(|e| BackstopError::Git {
            workspace: workspace.to_owned(),
            reason: ctx.redactor.text(&e.to_string()).into_owned(),
        })?),
        None => None,
    };
    let tf = match (&checkout, repo) {
        (Some(c), Some(repo)) => tf
            .in_dir(c.dir())
            .with_default_env("TF_PLUGIN_CACHE_DIR", repo.plugin_cache()),
        _ => tf,
    };
    let plan_file = ctx
        .plan_file(workspace)
        .await
        .map_err(|e| BackstopError::PlanDir {
            path: ctx.plan_dir.display().to_string(),
            reason: e.to_string(),
        });
    let result = match &plan_file {
        Ok(file) => {
            let run = async {
                tf.init(false).await?;
                let exit = match tf.plan(&[], file).await {
                    Err(TfError::InitRequired { .. }) => {
                        tf.init(true).await?;
                        tf.plan(&[], file).await?
                    }
                    other => other?,
                };
                let json = match exit {
                    PlanExit::NoChanges => None,
                    PlanExit::Changes => Some(tf.show_json(file).await?),
                };
                Ok::<_, TfError>((exit, json))
            };
            match run.await {
                Ok((exit, json)) => crate::backstop::read_plan(workspace, exit, json.as_deref()),
                Err(TfError::Locked { .. }) => Err(BackstopError::Locked(workspace.to_owned())),
                Err(e) => Err(tool(e)),
            }
        }
        Err(_) => Ok(crate::backstop::PlanDrift::default()),
    };
    // The plan file may hold secrets: never leave it behind.
    if let Ok(file) = &plan_file {
        let _ = tokio::fs::remove_file(file).await;
    }
    if let (Some(c), Some(repo)) = (checkout, repo) {
        c.remove(repo).await;
    }
    let plan_file = plan_file?;
    let _ = plan_file;
    Ok(crate::backstop::BackstopPlan {
        workspace: workspace.to_owned(),
        started,
        finished: Utc::now(),
        drift: result?,
    })
}
