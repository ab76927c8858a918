//! What the remediator remembers per address between work items: attempts (for the
//! hourly cap), successful reverts (for non-convergence), escalations (auto-revert
//! paused), recent applies (to recognize our own echo) and open pull requests.
//!
//! [`StateStore`] is the storage seam: asynchronous (boxed `Send` futures, so it is
//! dyn-compatible and the runner holds an `Arc<dyn StateStore>`), so that an
//! implementation may block on a local database off the async worker threads or talk
//! to a networked one (a PostgreSQL journal later). Implementations store and answer;
//! what the remediator does when one fails is decided here, by [`recall`]: the failure
//! is logged and remediation goes on as if nothing were recorded (a count of 0, not
//! paused), as the in-memory store would after a restart.
//!
//! [`MemoryStore`] is enough for `replay`; `serve` uses the journal
//! ([`driftreactor_journal::SharedJournal`] implements [`StateStore`]) on the journal's
//! database file so caps, escalations, revert history, our own applies and
//! open PRs survive a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
pub use driftreactor_journal::ApplyRecord;
use driftreactor_journal::{MAX_APPLIES, MAX_STAMPS};
use driftreactor_notify::Fingerprint;

use crate::key::WorkKey;

/// Why a [`StateStore`] call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The journal (the SQLite database) failed: disk full, I/O error, closed.
    #[error("the remediation memory in the journal failed: {0}")]
    Journal(#[from] driftreactor_journal::Error),
    /// Another implementation's failure (for stores outside this crate).
    #[error("the remediation memory failed: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The future a [`StateStore`] call returns: `Send`, borrowing the store and the
/// arguments for `'a`.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Remediation memory; see the module docs. Every call is one short statement or
/// transaction, made from the remediator's tasks a few times per IaC run, never per
/// bus message. Implementations must not block the calling (async) thread.
pub trait StateStore: Send + Sync + std::fmt::Debug {
    /// Records an IaC run attempt for `key` at `at`.
    fn record_attempt<'a>(&'a self, key: &'a WorkKey, at: DateTime<Utc>) -> StoreFuture<'a, ()>;
    /// Attempts for `key` at or after `since`.
    fn attempts_since<'a>(&'a self, key: &'a WorkKey, since: DateTime<Utc>)
    -> StoreFuture<'a, u32>;
    /// Records a successful revert of `key` at `at`.
    fn record_revert<'a>(&'a self, key: &'a WorkKey, at: DateTime<Utc>) -> StoreFuture<'a, ()>;
    /// Successful reverts of `key` at or after `since`.
    fn reverts_since<'a>(&'a self, key: &'a WorkKey, since: DateTime<Utc>) -> StoreFuture<'a, u32>;
    /// Pauses auto-revert of `key`; true when it was not paused before.
    fn pause<'a>(&'a self, key: &'a WorkKey, reason: &'a str) -> StoreFuture<'a, bool>;
    /// Why auto-revert of `key` is paused, if it is.
    fn paused<'a>(&'a self, key: &'a WorkKey) -> StoreFuture<'a, Option<String>>;
    /// Clears pause, attempts and revert history of `key` (a human cleared it, or its
    /// state changed: a plan shows no drift).
    fn clear<'a>(&'a self, key: &'a WorkKey) -> StoreFuture<'a, ()>;
    /// Remembers an apply we made (recent ones only need be kept).
    fn record_apply(&self, rec: ApplyRecord) -> StoreFuture<'_, ()>;
    /// Recent applies in `workspace` that changed `address`.
    fn applies_for<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> StoreFuture<'a, Vec<ApplyRecord>>;
    /// Remembers an open PR.
    fn pr_opened<'a>(&'a self, fp: &'a Fingerprint) -> StoreFuture<'a, ()>;
    /// Forgets a PR (closed).
    fn pr_closed<'a>(&'a self, fp: &'a Fingerprint) -> StoreFuture<'a, ()>;
    /// Open PRs in `workspace` whose address set contains `address`.
    fn open_prs_with<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> StoreFuture<'a, Vec<Fingerprint>>;
}

/// The remediator's answer to a failed [`StateStore`] call (`op` names it in the log):
/// logged at `error`, and remediation goes on as if nothing were recorded (the
/// type's default: nothing, 0, false, not paused, none).
pub(crate) fn recall<T: Default>(op: &'static str, r: Result<T, StoreError>) -> T {
    r.unwrap_or_else(|e| {
        tracing::error!(op, error = %e, "The remediation store failed.");
        T::default()
    })
}

#[derive(Debug, Default)]
struct Mem {
    attempts: BTreeMap<WorkKey, Vec<DateTime<Utc>>>,
    reverts: BTreeMap<WorkKey, Vec<DateTime<Utc>>>,
    paused: BTreeMap<WorkKey, String>,
    applies: Vec<ApplyRecord>,
    prs: BTreeSet<Fingerprint>,
}

/// An in-memory [`StateStore`] (lost on restart); keeps as much as the journal does
/// ([`MAX_STAMPS`] per address and kind, [`MAX_APPLIES`]). Never fails.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Mem>,
}

impl MemoryStore {
    fn with<T>(&self, f: impl FnOnce(&mut Mem) -> T) -> T {
        // A poisoned lock only means another thread panicked mid-update of plain maps;
        // the data is still usable.
        let mut g = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g)
    }

    /// Runs `f` now and answers with its result as an already-finished future.
    fn answer<'a, T: Send + 'a>(&self, f: impl FnOnce(&mut Mem) -> T) -> StoreFuture<'a, T> {
        Box::pin(std::future::ready(Ok(self.with(f))))
    }
}

fn push(v: &mut Vec<DateTime<Utc>>, at: DateTime<Utc>) {
    v.push(at);
    if v.len() > MAX_STAMPS {
        v.remove(0);
    }
}

fn count(v: Option<&Vec<DateTime<Utc>>>, since: DateTime<Utc>) -> u32 {
    v.map_or(0, |v| v.iter().filter(|t| **t >= since).count() as u32)
}

impl StateStore for MemoryStore {
    fn record_attempt<'a>(&'a self, key: &'a WorkKey, at: DateTime<Utc>) -> StoreFuture<'a, ()> {
        self.answer(|m| push(m.attempts.entry(key.clone()).or_default(), at))
    }
    fn attempts_since<'a>(
        &'a self,
        key: &'a WorkKey,
        since: DateTime<Utc>,
    ) -> StoreFuture<'a, u32> {
        self.answer(|m| count(m.attempts.get(key), since))
    }
    fn record_revert<'a>(&'a self, key: &'a WorkKey, at: DateTime<Utc>) -> StoreFuture<'a, ()> {
        self.answer(|m| push(m.reverts.entry(key.clone()).or_default(), at))
    }
    fn reverts_since<'a>(&'a self, key: &'a WorkKey, since: DateTime<Utc>) -> StoreFuture<'a, u32> {
        self.answer(|m| count(m.reverts.get(key), since))
    }
    fn pause<'a>(&'a self, key: &'a WorkKey, reason: &'a str) -> StoreFuture<'a, bool> {
        self.answer(|m| m.paused.insert(key.clone(), reason.to_owned()).is_none())
    }
    fn paused<'a>(&'a self, key: &'a WorkKey) -> StoreFuture<'a, Option<String>> {
        self.answer(|m| m.paused.get(key).cloned())
    }
    fn clear<'a>(&'a self, key: &'a WorkKey) -> StoreFuture<'a, ()> {
        self.answer(|m| {
            m.paused.remove(key);
            m.attempts.remove(key);
            m.reverts.remove(key);
        })
    }
    fn record_apply(&self, rec: ApplyRecord) -> StoreFuture<'_, ()> {
        self.answer(|m| {
            m.applies.push(rec);
            if m.applies.len() > MAX_APPLIES {
                m.applies.remove(0);
            }
        })
    }
    fn applies_for<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> StoreFuture<'a, Vec<ApplyRecord>> {
        self.answer(|m| {
            m.applies
                .iter()
                .filter(|a| a.workspace == workspace && a.changes.contains_key(address))
                .cloned()
                .collect()
        })
    }
    fn pr_opened<'a>(&'a self, fp: &'a Fingerprint) -> StoreFuture<'a, ()> {
        self.answer(|m| {
            m.prs.insert(fp.clone());
        })
    }
    fn pr_closed<'a>(&'a self, fp: &'a Fingerprint) -> StoreFuture<'a, ()> {
        self.answer(|m| {
            m.prs.remove(fp);
        })
    }
    fn open_prs_with<'a>(
        &'a self,
        workspace: &'a str,
        address: &'a str,
    ) -> StoreFuture<'a, Vec<Fingerprint>> {
        self.answer(|m| {
            m.prs
                .iter()
                .filter(|f| f.workspace == workspace && f.addresses.contains(address))
                .cloned()
                .collect()
        })
    }
}
