//! The state-lock gate: Terraform's lock object for a workspace's state (the S3 native
//! lock file `KEY.tflock`, GCS `.tflock`, an Azure blob lease, an HCP Terraform
//! workspace lock) means "an apply is running". The remediator does not start a plan
//! on such a workspace, and does not apply a plan when the lock appeared while it
//! planned: the work waits `[remediation] lock_wait_secs` and is tried again, without
//! counting as a failed attempt and without escalating. Terraform's own lock
//! (`-lock-timeout`) remains the real guard; this gate only keeps driftreactor from
//! queueing behind, or racing, somebody else's apply.
//!
//! The remediator does not read state itself: whoever reloads the states (`serve`)
//! knows the lock objects and hands a [`StateLocks`] snapshot to
//! [`crate::RemediatorBuilder::state_locks`]. [`LockTable`] is a ready-made one.

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Who holds Terraform's state lock of a workspace, as much as the store says (the
/// fields of Terraform's lock info JSON: `ID`, `Who`, `Operation`, `Created`). The
/// same fields as `driftreactor_state::LockInfo`, kept here so the remediator does
/// not depend on the object-store clients.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateLock {
    /// The lock's `ID` / the locking run, when known.
    pub id: Option<String>,
    /// The lock's `Who` (user@host) or the run's creator, when known.
    pub who: Option<String>,
    /// The lock's `Operation` (e.g. `OperationTypeApply`), when known.
    pub operation: Option<String>,
    /// When it was taken (RFC 3339), when known.
    pub created: Option<String>,
}

/// A snapshot of Terraform state locks per workspace.
///
/// `serve` feeds it from its state reload: every `state_reload_secs` it
/// asks each workspace's state source whether the lock object exists
/// (`driftreactor_state::StateSource::lock`) and keeps the answer; this trait reads
/// that answer, converting `LockInfo` into [`StateLock`] field by field. It is called
/// from the remediator's tasks before each plan and before each apply, so it must
/// answer at once from memory (no I/O, no blocking).
pub trait StateLocks: Send + Sync {
    /// The lock held on `workspace`'s state now, or `None` when it is free or not
    /// known (a workspace whose lock cannot be seen is never held back).
    fn lock(&self, workspace: &str) -> Option<StateLock>;
}

/// The remediator's handle on a [`StateLocks`] (`Debug` without asking it of the
/// implementation).
#[derive(Clone)]
pub(crate) struct SharedLocks(pub(crate) std::sync::Arc<dyn StateLocks>);

impl std::fmt::Debug for SharedLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateLocks")
    }
}

/// A [`StateLocks`] kept in memory: set a workspace's lock when the state reload sees
/// it, clear it when it is gone. Cheap to share (`Arc<LockTable>`).
#[derive(Debug, Default)]
pub struct LockTable {
    locks: RwLock<BTreeMap<String, StateLock>>,
}

impl LockTable {
    /// An empty table (no workspace locked).
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `workspace`'s state is locked by `lock` (`Some`), or free (`None`).
    pub fn set(&self, workspace: &str, lock: Option<StateLock>) {
        let mut locks = self.locks.write().unwrap_or_else(|p| p.into_inner());
        match lock {
            Some(l) => {
                locks.insert(workspace.to_owned(), l);
            }
            None => {
                locks.remove(workspace);
            }
        }
    }

    /// Replaces the whole table with `locks` (workspace name, lock): every workspace
    /// not listed is free.
    pub fn replace(&self, locks: impl IntoIterator<Item = (String, StateLock)>) {
        let new: BTreeMap<String, StateLock> = locks.into_iter().collect();
        *self.locks.write().unwrap_or_else(|p| p.into_inner()) = new;
    }
}

impl StateLocks for LockTable {
    fn lock(&self, workspace: &str) -> Option<StateLock> {
        self.locks
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(workspace)
            .cloned()
    }
}

/// Why work waits without counting as an attempt ([`crate::Requeue::Wait`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitReason {
    /// Terraform's state lock was held when the plan was due: no plan was started.
    StateLocked(StateLock),
    /// Terraform's state lock appeared while the targeted plan ran: the plan was not
    /// applied (it is planned again once the lock is gone).
    StateLockedBeforeApply(StateLock),
}

impl WaitReason {
    /// The snake-case name (log field, API).
    pub const fn as_str(&self) -> &'static str {
        match self {
            WaitReason::StateLocked(_) => "state_locked",
            WaitReason::StateLockedBeforeApply(_) => "state_locked_before_apply",
        }
    }

    /// The state lock behind the wait.
    pub fn lock(&self) -> &StateLock {
        match self {
            WaitReason::StateLocked(l) | WaitReason::StateLockedBeforeApply(l) => l,
        }
    }
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let l = self.lock();
        let who = l.who.as_deref().unwrap_or("unknown");
        let op = l.operation.as_deref().unwrap_or("unknown operation");
        match self {
            WaitReason::StateLocked(_) => {
                write!(f, "Terraform's state lock is held by {who} ({op})")
            }
            WaitReason::StateLockedBeforeApply(_) => write!(
                f,
                "Terraform's state lock was taken by {who} ({op}) while the plan ran; not applied"
            ),
        }
    }
}

/// Work of a workspace is waiting ([`crate::Remediator::subscribe_waiting`],
/// [`crate::Remediator::waiting`]): it is tried again after `retry_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// Workspace name.
    pub workspace: String,
    /// The addresses of the batch that waits.
    pub addresses: Vec<String>,
    /// Why.
    pub reason: WaitReason,
    /// When it is tried again, from `at`.
    pub retry_after: Duration,
    /// When the wait began (UTC).
    pub at: DateTime<Utc>,
}
