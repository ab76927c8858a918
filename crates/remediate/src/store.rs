//! What the remediator remembers per address between work items: attempts (for the
//! hourly cap), successful reverts (for non-convergence), escalations (auto-revert
//! paused), recent applies (to recognize our own echo) and open pull requests.
//!
//! [`StateStore`] is synchronous on purpose: implementations answer from memory or a
//! local database quickly and callers never hold anything across an `.await`.
//! [`MemoryStore`] is enough for `replay`; `serve` uses [`crate::SqliteStore`] on the
//! journal's database file so caps, escalations, revert history, our own applies and
//! open PRs survive a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use driftreactor_notify::Fingerprint;

use crate::item::WorkKey;

/// One apply we made, to recognize the events it causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyRecord {
    /// Workspace.
    pub workspace: String,
    /// Address → planned actions (`["update"]`).
    pub changes: BTreeMap<String, Vec<String>>,
    /// When the apply started.
    pub started: DateTime<Utc>,
    /// When it finished.
    pub finished: DateTime<Utc>,
}

/// Remediation memory; see the module docs.
pub trait StateStore: Send + Sync + std::fmt::Debug {
    /// Records an IaC run attempt for `key` at `at`.
    fn record_attempt(&self, key: &WorkKey, at: DateTime<Utc>);
    /// Attempts for `key` at or after `since`.
    fn attempts_since(&self, key: &WorkKey, since: DateTime<Utc>) -> u32;
    /// Records a successful revert of `key` at `at`.
    fn record_revert(&self, key: &WorkKey, at: DateTime<Utc>);
    /// Successful reverts of `key` at or after `since`.
    fn reverts_since(&self, key: &WorkKey, since: DateTime<Utc>) -> u32;
    /// Pauses auto-revert of `key`; true when it was not paused before.
    fn pause(&self, key: &WorkKey, reason: &str) -> bool;
    /// Why auto-revert of `key` is paused, if it is.
    fn paused(&self, key: &WorkKey) -> Option<String>;
    /// Clears pause, attempts and revert history of `key` (a human cleared it, or its
    /// state changed: a plan shows no drift).
    fn clear(&self, key: &WorkKey);
    /// Remembers an apply we made (recent ones only need be kept).
    fn record_apply(&self, rec: ApplyRecord);
    /// Recent applies in `workspace` that changed `address`.
    fn applies_for(&self, workspace: &str, address: &str) -> Vec<ApplyRecord>;
    /// Remembers an open PR.
    fn pr_opened(&self, fp: &Fingerprint);
    /// Forgets a PR (closed).
    fn pr_closed(&self, fp: &Fingerprint);
    /// Open PRs in `workspace` whose address set contains `address`.
    fn open_prs_with(&self, workspace: &str, address: &str) -> Vec<Fingerprint>;
}

#[derive(Debug, Default)]
struct Mem {
    attempts: BTreeMap<WorkKey, Vec<DateTime<Utc>>>,
    reverts: BTreeMap<WorkKey, Vec<DateTime<Utc>>>,
    paused: BTreeMap<WorkKey, String>,
    applies: Vec<ApplyRecord>,
    prs: BTreeSet<Fingerprint>,
}

/// Applies kept in memory (the oldest are dropped).
const MAX_APPLIES: usize = 256;
/// Timestamps kept per address and kind.
const MAX_STAMPS: usize = 64;

/// An in-memory [`StateStore`] (lost on restart).
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
    fn record_attempt(&self, key: &WorkKey, at: DateTime<Utc>) {
        self.with(|m| push(m.attempts.entry(key.clone()).or_default(), at));
    }
    fn attempts_since(&self, key: &WorkKey, since: DateTime<Utc>) -> u32 {
        self.with(|m| count(m.attempts.get(key), since))
    }
    fn record_revert(&self, key: &WorkKey, at: DateTime<Utc>) {
        self.with(|m| push(m.reverts.entry(key.clone()).or_default(), at));
    }
    fn reverts_since(&self, key: &WorkKey, since: DateTime<Utc>) -> u32 {
        self.with(|m| count(m.reverts.get(key), since))
    }
    fn pause(&self, key: &WorkKey, reason: &str) -> bool {
        self.with(|m| m.paused.insert(key.clone(), reason.to_owned()).is_none())
    }
    fn paused(&self, key: &WorkKey) -> Option<String> {
        self.with(|m| m.paused.get(key).cloned())
    }
    fn clear(&self, key: &WorkKey) {
        self.with(|m| {
            m.paused.remove(key);
            m.attempts.remove(key);
            m.reverts.remove(key);
        });
    }
    fn record_apply(&self, rec: ApplyRecord) {
        self.with(|m| {
            m.applies.push(rec);
            if m.applies.len() > MAX_APPLIES {
                m.applies.remove(0);
            }
        });
    }
    fn applies_for(&self, workspace: &str, address: &str) -> Vec<ApplyRecord> {
        self.with(|m| {
            m.applies
                .iter()
                .filter(|a| a.workspace == workspace && a.changes.contains_key(address))
                .cloned()
                .collect()
        })
    }
    fn pr_opened(&self, fp: &Fingerprint) {
        self.with(|m| m.prs.insert(fp.clone()));
    }
    fn pr_closed(&self, fp: &Fingerprint) {
        self.with(|m| m.prs.remove(fp));
    }
    fn open_prs_with(&self, workspace: &str, address: &str) -> Vec<Fingerprint> {
        self.with(|m| {
            m.prs
                .iter()
                .filter(|f| f.workspace == workspace && f.addresses.contains(address))
                .cloned()
                .collect()
        })
    }
}
