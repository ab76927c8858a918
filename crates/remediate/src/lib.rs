//! The remediator: turns the decider's `revert`, `pull_request` and `notify` into work,
//! carefully.
//!
//! * Work is keyed by (workspace, address) ([`WorkKey`]), never by raw event: events
//!   for one key within the settle window coalesce into one [`WorkItem`] that keeps
//!   every event as (redacted) evidence.
//! * At most one IaC run per workspace at a time; different workspaces in parallel up
//!   to `max_parallel_workspaces`. The runner task owns all scheduling state, so
//!   nothing holds a lock across an `.await`.
//! * [`reconcile`] + [`error_policy`] (kube-runtime style) return a small
//!   `#[must_use]` [`Requeue`]: done, requeue with backoff (exponential with jitter,
//!   `backon`), recheck later, wait (not an attempt), or escalate.
//! * A workspace's Terraform root is its `dir`, or a fresh worktree of the commit
//!   just fetched from its `[workspaces.git]` repository ([`GitSource`]; a failed
//!   fetch fails the attempt, it never plans on older code).
//! * Revert = `init` when needed, `plan -detailed-exitcode -target=… -out=…`,
//!   `show -json`, the pure [`guard()`] over the plan JSON, then `apply <planfile>`
//!   ([`TfRunner`]). Exit 0 resolves the drift; a refused plan becomes a PR.
//! * Attempts per address are capped per hour; an address that keeps drifting back
//!   after our reverts (non-converging) or exceeds the cap is escalated (PR + Slack)
//!   and auto-revert pauses until a human [`Remediator::clear`]s it or a plan shows no
//!   drift. Events that fall within our own apply and match the planned change are
//!   ignored as our echo.
//! * What it remembers per address (attempts, reverts, pauses, our applies, open PRs)
//!   goes through the async [`StateStore`] trait: [`MemoryStore`] for `replay`; for
//!   `serve`, the journal ([`driftreactor_journal::SharedJournal`] implements it), which owns
//!   the database.
//!
//! * Terraform's state lock held on a workspace ([`StateLocks`], fed by `serve`'s
//!   state reload): no plan starts there, and a plan during which the lock appeared
//!   is not applied; the work waits ([`Requeue::Wait`], [`Waiting`]) and is not
//!   counted as an attempt.
//! * The workspaces can change while the remediator runs
//!   ([`Remediator::set_workspaces`], e.g. `[[workspace_sets]]` re-listed).
//!
//! * Several replicas on one journal ([`Cluster`], module [`cluster`]): a batch runs
//!   under its workspace's journal lease with a fencing token checked before each
//!   state-changing step, and takes over the workspace's pending work from the journal.
//!
//! Entry points: [`Remediator::builder`] (or [`Remediator::from_config`] with the
//! secrets of `driftreactor_pipeline::estate::load`),
//! [`Remediator::submit`], [`Remediator::run_until_idle`] (replay),
//! [`Remediator::subscribe`] (transitions), [`Remediator::shutdown`]; [`handoff`]: the
//! journal → remediator hand-off with its durable requeue (used by `serve`), and
//! [`drain`] (used by `replay --remediate`).

pub mod backstop;
pub mod cluster;
mod config;
mod drain;
mod git;
pub mod guard;
pub mod handoff;
mod item;
mod journal_store;
mod key;
mod locks;
mod plans;
mod reconcile;
mod runner;
mod setup;
mod store;
mod tf;

pub use backstop::{BackstopError, BackstopPlan, WorkspaceHold};
pub use cluster::{Cluster, Fence, LeaseChange, LeaseObserver};
pub use config::{RemediationConfig, Workspace};
pub use drain::{Drained, drain};
pub use git::{
    GitConfig, GitError, GitSource, PERMANENT_FETCH_ANSWERS, check_config as check_git_config,
};
pub use guard::{GuardError, GuardReport, PlanVerdict, StreamGuard, guard, guard_stream};
pub use item::{MAX_EVIDENCE, Mode, Submission, WorkItem, is_own_echo, submissions};
pub use key::WorkKey;
pub use locks::{LockTable, StateLock, StateLocks, WaitReason, Waiting};
pub use reconcile::{Batch, Context, Error, Requeue, error_policy, escalate, reconcile};
pub use runner::{
    Completed, Outcome, Remediator, RemediatorBuilder, SubmitError, Submitted, WorkspaceChange,
};
pub use setup::SetupError;
pub use store::{ApplyRecord, MemoryStore, StateStore, StoreError, StoreFuture};
pub use tf::{PlanExit, TfError, TfRunner};
