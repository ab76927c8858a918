//! Remediation bookkeeping: which journaled events still need the remediator.
//!
//! Each event recorded with an [`Entry::remediation`] request gets a `pending` row in
//! the same transaction as the event (so an acknowledged event never lacks it). The
//! remediation hook then records the (workspace, address) work items the event fed
//! ([`Journal::remediation_submitted`]) and, as each work item reaches a terminal state
//! with the event among its evidence, marks it finished
//! ([`Journal::remediation_finished`]); an event whose work items are all finished (or
//! that fed none) is `done`. On start, [`Journal::pending_remediations`] lists what is
//! still `pending`, in journal order, to resubmit.
//!
//! [`Entry::remediation`]: crate::Entry::remediation

use chrono::Utc;
use driftreactor_event::Provider;
use rusqlite::{OptionalExtension, params};

use crate::writer::{sqlite, ts};
use crate::{Journal, ResourceKey, Result};

/// A journaled event whose remediation has not finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRemediation {
    /// Journal sequence number (journal order).
    pub seq: i64,
    /// Provider (`aws`, `azure`, `gcp`).
    pub provider: String,
    /// Event id.
    pub event_id: String,
    /// The request the hook stored with the event ([`crate::Entry::remediation`]).
    pub request: String,
    /// When the event was received (RFC 3339, UTC; the receiving process's clock): the
    /// start of a settle window keyed in the journal (several replicas).
    pub received_at: String,
    /// The work items of the event already finished (by any process sharing the
    /// journal), in no particular order.
    pub done: Vec<ResourceKey>,
}

/// Separates workspace from address, and one target from the next, in the aggregated
/// `done` column of the pending query (ASCII unit and record separators: in neither a
/// workspace name nor a Terraform address).
pub(crate) const UNIT: char = '\u{1f}';
pub(crate) const RECORD: char = '\u{1e}';

/// Reads the aggregated `done` column of the pending query.
pub(crate) fn done_targets(s: Option<&str>) -> Vec<ResourceKey> {
    s.unwrap_or_default()
        .split(RECORD)
        .filter_map(|t| t.split_once(UNIT))
        .map(|(w, a)| ResourceKey::new(w.to_owned(), a.to_owned()))
        .collect()
}

impl Journal {
    /// Every `pending` remediation, in journal order (oldest first).
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn pending_remediations(&self) -> Result<Vec<PendingRemediation>> {
        self.read("query pending remediations", |c| {
            let mut st = c.prepare_cached(
                "SELECT r.seq, e.provider, e.event_id, r.request, e.received_at, \
                 (SELECT group_concat(t.workspace || char(31) || t.address, char(30)) \
                  FROM remediation_targets t WHERE t.seq = r.seq AND t.done = 1) \
                 FROM remediations r \
                 JOIN events e ON e.seq = r.seq WHERE r.status = 'pending' ORDER BY r.seq",
            )?;
            st.query_map([], |r| {
                Ok(PendingRemediation {
                    seq: r.get(0)?,
                    provider: r.get(1)?,
                    event_id: r.get(2)?,
                    request: r.get(3)?,
                    received_at: r.get(4)?,
                    done: done_targets(r.get::<_, Option<String>>(5)?.as_deref()),
                })
            })?
            .collect()
        })
        .await
    }

    /// Records the work items (workspace, address) the event (provider, id) was
    /// submitted to. With none (nothing queued: e.g. the echo of our own apply), the
    /// event is `done` at once. Re-recording (a resubmission after a restart) keeps
    /// items already finished. Returns 1 when the event became `done`, else 0.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn remediation_submitted(
        &self,
        provider: Provider,
        event_id: String,
        targets: Vec<ResourceKey>,
    ) -> Result<u64> {
        self.exec(Box::new(move |tx| {
            let seq: Option<i64> = tx
                .query_row(
                    "SELECT r.seq FROM remediations r JOIN events e ON e.seq = r.seq \
                     WHERE e.provider = ?1 AND e.event_id = ?2",
                    params![provider.as_str(), event_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sqlite("find remediation"))?;
            let Some(seq) = seq else {
                return Ok(0);
            };
            for t in &targets {
                tx.execute(
                    "INSERT OR IGNORE INTO remediation_targets (seq, workspace, address) VALUES (?1, ?2, ?3)",
                    params![seq, t.workspace, t.address],
                )
                .map_err(sqlite("insert remediation target"))?;
            }
            if targets.is_empty() {
                let n = tx
                    .execute(
                        "UPDATE remediations SET status = 'done', updated_at = ?2 \
                         WHERE seq = ?1 AND status = 'pending'",
                        params![seq, ts(&Utc::now())],
                    )
                    .map_err(sqlite("finish remediation"))?;
                return Ok(n as u64);
            }
            Ok(0)
        }))
        .await
    }

    /// The work item (workspace, address) reached a terminal state (reverted, PR opened
    /// or updated, resolved, notified, escalated) with `event_ids` as its evidence: those
    /// events' items for it are finished, and each event with no unfinished item left
    /// becomes `done`. Events are matched by id alone (ids are unique per provider and,
    /// in practice, across providers). Returns how many events became `done`.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the transaction fails, [`crate::Error::Closed`].
    pub async fn remediation_finished(
        &self,
        workspace: String,
        address: String,
        event_ids: Vec<String>,
    ) -> Result<u64> {
        self.exec(Box::new(move |tx| {
            let now = ts(&Utc::now());
            let mut done = 0u64;
            for id in &event_ids {
                let seqs: Vec<i64> = {
                    let mut st = tx
                        .prepare_cached(
                            "SELECT t.seq FROM remediation_targets t JOIN events e ON e.seq = t.seq \
                             WHERE e.event_id = ?1 AND t.workspace = ?2 AND t.address = ?3 AND t.done = 0",
                        )
                        .map_err(sqlite("find remediation target"))?;
                    st.query_map(params![id, workspace, address], |r| r.get(0))
                        .and_then(Iterator::collect)
                        .map_err(sqlite("find remediation target"))?
                };
                for seq in seqs {
                    tx.execute(
                        "UPDATE remediation_targets SET done = 1 WHERE seq = ?1 AND workspace = ?2 AND address = ?3",
                        params![seq, workspace, address],
                    )
                    .map_err(sqlite("finish remediation target"))?;
                    done += tx
                        .execute(
                            "UPDATE remediations SET status = 'done', updated_at = ?2 \
                             WHERE seq = ?1 AND status = 'pending' AND NOT EXISTS \
                             (SELECT 1 FROM remediation_targets t WHERE t.seq = ?1 AND t.done = 0)",
                            params![seq, now],
                        )
                        .map_err(sqlite("finish remediation"))? as u64;
                }
            }
            Ok(done)
        }))
        .await
    }

    /// The remediation status of event (provider, id): `pending`, `done`, or `None`
    /// when it has no remediation row (not journaled, no action, remediation off).
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn remediation_status(
        &self,
        provider: Provider,
        event_id: String,
    ) -> Result<Option<String>> {
        self.read("query remediation status", move |c| {
            c.query_row(
                "SELECT r.status FROM remediations r JOIN events e ON e.seq = r.seq \
                 WHERE e.provider = ?1 AND e.event_id = ?2",
                params![provider.as_str(), event_id],
                |r| r.get(0),
            )
            .optional()
        })
        .await
    }
}
