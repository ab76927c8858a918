//! The remediation memory: what the remediator remembers per (workspace, address)
//! between work items, so that caps, escalations, non-convergence history, our own
//! applies and open pull requests survive a restart (schema version 3, tables
//! `remediation_*`).
//!
//! Plain data in, plain data out: the journal stores and answers, it decides nothing.
//! The remediator's `StateStore` trait (in `driftreactor-remediate`) is implemented on
//! [`Journal`] with these calls, and what to do when one fails is the remediator's
//! choice.
//!
//! Writes go through the writer thread (each its own short transaction, in queue
//! order with the event appends); reads run on the blocking pool on the read-only
//! connection. None of them blocks an async worker thread. They are made a few times
//! per IaC run, never per bus message.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::writer::{sqlite, ts};
use crate::{Journal, Result};

/// Applies kept (the oldest are deleted past it).
pub const MAX_APPLIES: usize = 256;
/// Timestamps kept per (workspace, address) and [`Stamp`] kind (the oldest are
/// deleted past it).
pub const MAX_STAMPS: usize = 64;

/// The kinds of timestamps kept per address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stamp {
    /// An IaC run attempt (`attempt`).
    Attempt,
    /// A successful revert (`revert`).
    Revert,
}

impl Stamp {
    /// The name stored in column `kind` (`attempt`, `revert`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Stamp::Attempt => "attempt",
            Stamp::Revert => "revert",
        }
    }
}

/// One apply the remediator made, to recognize the events it causes (its "echo").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyRecord {
    /// Workspace.
    pub workspace: String,
    /// Address → planned actions (`["update"]`), as in the plan JSON.
    pub changes: BTreeMap<String, Vec<String>>,
    /// When the apply started, UTC.
    pub started: DateTime<Utc>,
    /// When it finished, UTC.
    pub finished: DateTime<Utc>,
}

fn parse_ts(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The stored form of an address set (a JSON array, sorted: a `BTreeSet`).
fn addresses_json(addresses: &BTreeSet<String>) -> String {
    serde_json::to_string(addresses).unwrap_or_else(|_| "[]".into())
}

const MAX_STAMPS_SQL: i64 = MAX_STAMPS as i64;
const MAX_APPLIES_SQL: i64 = MAX_APPLIES as i64;

impl Journal {
    /// Records a timestamp of `kind` for (`workspace`, `address`) at `at`, keeping the
    /// newest [`MAX_STAMPS`] of that kind and address.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn record_stamp(
        &self,
        kind: Stamp,
        workspace: String,
        address: String,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.exec(Box::new(move |tx| {
            tx.execute(
                "INSERT INTO remediation_stamps (kind, workspace, address, at) VALUES (?1, ?2, ?3, ?4)",
                params![kind.as_str(), workspace, address, ts(&at)],
            )
            .map_err(sqlite("record stamp"))?;
            tx.execute(
                "DELETE FROM remediation_stamps WHERE kind = ?1 AND workspace = ?2 AND address = ?3 \
                 AND rowid NOT IN (SELECT rowid FROM remediation_stamps \
                   WHERE kind = ?1 AND workspace = ?2 AND address = ?3 ORDER BY at DESC LIMIT ?4)",
                params![kind.as_str(), workspace, address, MAX_STAMPS_SQL],
            )
            .map_err(sqlite("trim stamps"))?;
            Ok(0)
        }))
        .await
        .map(drop)
    }

    /// How many timestamps of `kind` (`workspace`, `address`) has at or after `since`.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn stamps_since(
        &self,
        kind: Stamp,
        workspace: String,
        address: String,
        since: DateTime<Utc>,
    ) -> Result<u32> {
        self.read("count stamps", move |c| {
            c.query_row(
                "SELECT count(*) FROM remediation_stamps WHERE kind = ?1 AND workspace = ?2 \
                 AND address = ?3 AND at >= ?4",
                params![kind.as_str(), workspace, address, ts(&since)],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        })
        .await
    }

    /// Records that auto-revert of (`workspace`, `address`) is paused for `reason`
    /// (since now), unless it is already; returns true when it was not paused before
    /// (the first reason is kept).
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn record_pause(
        &self,
        workspace: String,
        address: String,
        reason: String,
    ) -> Result<bool> {
        self.exec(Box::new(move |tx| {
            tx.execute(
                "INSERT INTO remediation_paused (workspace, address, reason, since) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (workspace, address) DO NOTHING",
                params![workspace, address, reason, ts(&Utc::now())],
            )
            .map(|n| n as u64)
            .map_err(sqlite("pause"))
        }))
        .await
        .map(|n| n > 0)
    }

    /// Why auto-revert of (`workspace`, `address`) is paused, if it is.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn pause_reason(&self, workspace: String, address: String) -> Result<Option<String>> {
        self.read("read pause", move |c| {
            c.query_row(
                "SELECT reason FROM remediation_paused WHERE workspace = ?1 AND address = ?2",
                params![workspace, address],
                |r| r.get(0),
            )
            .optional()
        })
        .await
    }

    /// Forgets the pause and every timestamp (attempts, reverts) of (`workspace`,
    /// `address`), in one transaction.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn clear_memory(&self, workspace: String, address: String) -> Result<()> {
        self.exec(Box::new(move |tx| {
            let p = params![workspace, address];
            tx.execute(
                "DELETE FROM remediation_paused WHERE workspace = ?1 AND address = ?2",
                p,
            )
            .map_err(sqlite("clear pause"))?;
            tx.execute(
                "DELETE FROM remediation_stamps WHERE workspace = ?1 AND address = ?2",
                p,
            )
            .map_err(sqlite("clear stamps"))?;
            Ok(0)
        }))
        .await
        .map(drop)
    }

    /// Records an apply, keeping the newest [`MAX_APPLIES`].
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn record_apply(&self, rec: ApplyRecord) -> Result<()> {
        self.exec(Box::new(move |tx| {
            tx.execute(
                "INSERT INTO remediation_applies (workspace, changes, started, finished) VALUES (?1, ?2, ?3, ?4)",
                params![
                    rec.workspace,
                    serde_json::to_string(&rec.changes).unwrap_or_else(|_| "{}".into()),
                    ts(&rec.started),
                    ts(&rec.finished)
                ],
            )
            .map_err(sqlite("record apply"))?;
            let id = tx.last_insert_rowid();
            for address in rec.changes.keys() {
                tx.execute(
                    "INSERT OR IGNORE INTO remediation_applied_addresses (apply_id, workspace, address) VALUES (?1, ?2, ?3)",
                    params![id, rec.workspace, address],
                )
                .map_err(sqlite("record applied address"))?;
            }
            tx.execute(
                "DELETE FROM remediation_applies WHERE id <= (SELECT max(id) FROM remediation_applies) - ?1",
                params![MAX_APPLIES_SQL],
            )
            .map_err(sqlite("trim applies"))?;
            Ok(0)
        }))
        .await
        .map(drop)
    }

    /// The recorded applies in `workspace` that changed `address`, oldest first. A row
    /// that cannot be read back (a time or JSON this build cannot parse) is skipped.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn applies_for(
        &self,
        workspace: String,
        address: String,
    ) -> Result<Vec<ApplyRecord>> {
        self.read("read applies", move |c| {
            let mut st = c.prepare_cached(
                "SELECT a.workspace, a.changes, a.started, a.finished FROM remediation_applies a \
                 JOIN remediation_applied_addresses x ON x.apply_id = a.id \
                 WHERE x.workspace = ?1 AND x.address = ?2 ORDER BY a.id",
            )?;
            let rows = st.query_map(params![workspace, address], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (workspace, changes, started, finished) = row?;
                let (Ok(changes), Some(started), Some(finished)) = (
                    serde_json::from_str::<BTreeMap<String, Vec<String>>>(&changes),
                    parse_ts(&started),
                    parse_ts(&finished),
                ) else {
                    continue;
                };
                out.push(ApplyRecord {
                    workspace,
                    changes,
                    started,
                    finished,
                });
            }
            Ok(out)
        })
        .await
    }

    /// Records an open pull request for the address set `addresses` of `workspace`
    /// (its fingerprint). Idempotent.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn record_open_pr(
        &self,
        workspace: String,
        addresses: BTreeSet<String>,
    ) -> Result<()> {
        self.exec(Box::new(move |tx| {
            let addrs = addresses_json(&addresses);
            tx.execute(
                "INSERT OR IGNORE INTO remediation_prs (workspace, addresses) VALUES (?1, ?2)",
                params![workspace, addrs],
            )
            .map_err(sqlite("record pr"))?;
            for a in &addresses {
                tx.execute(
                    "INSERT OR IGNORE INTO remediation_pr_addresses (workspace, addresses, address) VALUES (?1, ?2, ?3)",
                    params![workspace, addrs, a],
                )
                .map_err(sqlite("record pr address"))?;
            }
            Ok(0)
        }))
        .await
        .map(drop)
    }

    /// Forgets the pull request of the address set `addresses` of `workspace`.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn forget_pr(&self, workspace: String, addresses: BTreeSet<String>) -> Result<()> {
        self.exec(Box::new(move |tx| {
            let addrs = addresses_json(&addresses);
            tx.execute(
                "DELETE FROM remediation_prs WHERE workspace = ?1 AND addresses = ?2",
                params![workspace, addrs],
            )
            .map_err(sqlite("forget pr"))?;
            tx.execute(
                "DELETE FROM remediation_pr_addresses WHERE workspace = ?1 AND addresses = ?2",
                params![workspace, addrs],
            )
            .map_err(sqlite("forget pr addresses"))?;
            Ok(0)
        }))
        .await
        .map(drop)
    }

    /// The address sets of the open pull requests in `workspace` that contain
    /// `address`, in the order of their stored form. A set that cannot be read back is
    /// skipped.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn open_prs_with(
        &self,
        workspace: String,
        address: String,
    ) -> Result<Vec<BTreeSet<String>>> {
        self.read("read prs", move |c| {
            let mut st = c.prepare_cached(
                "SELECT addresses FROM remediation_pr_addresses WHERE workspace = ?1 AND address = ?2 \
                 ORDER BY addresses",
            )?;
            let rows = st.query_map(params![workspace, address], |r| r.get::<_, String>(0))?;
            let mut out = Vec::new();
            for row in rows {
                if let Ok(addrs) = serde_json::from_str::<BTreeSet<String>>(&row?) {
                    out.push(addrs);
                }
            }
            Ok(out)
        })
        .await
    }
}
