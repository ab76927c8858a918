//! Retention: deleting journaled events older than a cutoff, in bounded batches.
//!
//! The journal is also the dedupe key, so an event may only go once no bus can
//! redeliver it any more; choosing the cutoff is the caller's job (`serve` refuses a
//! retention shorter than the longest redelivery window). Each batch is one job on
//! the writer thread, in its own short transaction: appends queued meanwhile commit
//! between two batches (the remediation memory's writes among them), and another
//! journal handle on the file (`serve`'s remediation handle) waits for at most one
//! batch.
//!
//! Never deleted, whatever their age:
//! - events whose remediation is still `pending` (the remediator resubmits them after
//!   a restart, [`Journal::pending_remediations`]);
//! - events that are the latest evidence (`last_seq`) of a `drift` row (`/v1/drift`
//!   shows them). An older event of the same drift goes: the row's `events` count and
//!   `first_seen` keep counting it.
//!
//! Drift transitions (`/v1/stream`'s log) recorded before the cutoff go too, up to a
//! batch's worth per batch.
//!
//! With an event go its rows in `event_resources` and, when finished (`done`), its
//! `remediations` row and `remediation_targets`, so every reference stays valid (the
//! schema's foreign keys are enforced).
//!
//! Space: freed pages go to SQLite's free list and are reused by later appends, so a
//! journal under retention stops growing at about the retention period's worth of
//! events; the file does not shrink. No `VACUUM` is run (it rewrites the whole file
//! under the write lock) and `auto_vacuum` is left off (turning it on for an existing
//! file needs that `VACUUM` too). To shrink a file once, stop the service and run
//! `sqlite3 FILE VACUUM`.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use chrono::{DateTime, Utc};
use rusqlite::params;

use crate::writer::{sqlite, ts};
use crate::{Journal, Result};

/// Events deleted per transaction by [`Journal::prune`]: small enough that one batch
/// holds the write lock for milliseconds, large enough that a backlog of millions of
/// events is pruned in one run.
pub const DEFAULT_PRUNE_BATCH: usize = 2000;

/// What a prune run (or one of its batches, in [`Journal::prune_with`]'s `on_batch`)
/// deleted, in rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Events deleted (table `events`).
    pub events: u64,
    /// Their resource index rows deleted (table `event_resources`).
    pub event_resources: u64,
    /// Their finished remediation records deleted (table `remediations`; their
    /// `remediation_targets` rows go with them).
    pub remediations: u64,
    /// Transactions committed.
    pub batches: u64,
    /// Events older than the cutoff kept because they are still needed (a `pending`
    /// remediation, or the latest evidence of a drift row). Counted at the end of a
    /// complete run; 0 otherwise.
    pub kept: u64,
    /// The run went through every event older than the cutoff; `false` when it was
    /// stopped early ([`Journal::prune_with`]'s `stop`). In a batch's report
    /// (`on_batch`), `true` only for the last batch of a complete run.
    pub complete: bool,
}

impl PruneReport {
    fn add(&mut self, b: &PruneReport) {
        self.events += b.events;
        self.event_resources += b.event_resources;
        self.remediations += b.remediations;
        self.batches += b.batches;
        self.kept += b.kept;
    }
}

/// The next events to prune: received before `?1`, after the cursor (`?2`, `?3`) in
/// `events_received` index order (the index holds `seq` as its rowid, so no sort), not
/// pending remediation, not a drift row's latest evidence; at most `?4`.
pub(crate) const SELECT_PRUNABLE: &str = "SELECT e.seq, e.received_at FROM events e \
     WHERE e.received_at < ?1 AND (e.received_at, e.seq) > (?2, ?3) \
     AND NOT EXISTS (SELECT 1 FROM remediations r WHERE r.seq = e.seq AND r.status = 'pending') \
     AND NOT EXISTS (SELECT 1 FROM drift d WHERE d.last_seq = e.seq) \
     ORDER BY e.received_at, e.seq LIMIT ?4";

/// Where the next batch starts: after this (`received_at`, `seq`) in index order.
/// Events skipped (kept) by one batch are not scanned again by the next.
#[derive(Debug, Clone)]
struct Cursor {
    received_at: String,
    seq: i64,
}

/// One batch's outcome, handed out of the writer job.
#[derive(Debug, Default)]
struct BatchOutcome {
    report: PruneReport,
    next: Option<Cursor>,
}

/// Deletes up to `batch` events received before `cutoff` (RFC 3339, the stored format)
/// and after `after`, in `received_at` order, with their dependent rows. Sets `next`
/// when the batch was full (there may be more), else counts the events kept.
fn prune_batch(
    tx: &rusqlite::Transaction<'_>,
    cutoff: &str,
    after: &Cursor,
    batch: usize,
) -> Result<BatchOutcome> {
    let limit = i64::try_from(batch).unwrap_or(i64::MAX);
    let picked: Vec<(i64, String)> = {
        let mut st = tx
            .prepare_cached(SELECT_PRUNABLE)
            .map_err(sqlite("select events to prune"))?;
        st.query_map(params![cutoff, after.received_at, after.seq, limit], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .and_then(Iterator::collect)
        .map_err(sqlite("select events to prune"))?
    };
    let mut out = BatchOutcome::default();
    out.report.batches = 1;
    for (seq, _) in &picked {
        out.report.event_resources += tx
            .prepare_cached("DELETE FROM event_resources WHERE seq = ?1")
            .and_then(|mut st| st.execute([seq]))
            .map_err(sqlite("prune event resources"))? as u64;
        tx.prepare_cached("DELETE FROM remediation_targets WHERE seq = ?1")
            .and_then(|mut st| st.execute([seq]))
            .map_err(sqlite("prune remediation targets"))?;
        out.report.remediations += tx
            .prepare_cached("DELETE FROM remediations WHERE seq = ?1")
            .and_then(|mut st| st.execute([seq]))
            .map_err(sqlite("prune remediations"))? as u64;
        out.report.events += tx
            .prepare_cached("DELETE FROM events WHERE seq = ?1")
            .and_then(|mut st| st.execute([seq]))
            .map_err(sqlite("prune events"))? as u64;
    }
    // The drift transition log ages by its own time (`at`), a batch at a time.
    crate::transitions::sqlite::prune(tx, cutoff, limit)?;
    if picked.len() >= batch {
        out.next = picked.last().map(|(seq, received_at)| Cursor {
            received_at: received_at.clone(),
            seq: *seq,
        });
    } else {
        let kept: i64 = tx
            .query_row(
                "SELECT count(*) FROM events WHERE received_at < ?1",
                [cutoff],
                |r| r.get(0),
            )
            .map_err(sqlite("count kept events"))?;
        out.report.kept = u64::try_from(kept).unwrap_or(0);
        out.report.complete = true;
    }
    Ok(out)
}

impl Journal {
    /// Deletes the events received before `older_than` (UTC), except those still
    /// needed (see below), in batches of [`DEFAULT_PRUNE_BATCH`] events, each its own
    /// transaction on the writer thread; returns the rows deleted.
    ///
    /// Kept whatever their age: events whose remediation is `pending`, and the latest
    /// evidence event of each `drift` row. Deleted with an event: its
    /// `event_resources` rows and its finished remediation record.
    ///
    /// The dedupe record goes with the event: if the same (provider, id) is appended
    /// again later, it is recorded anew ([`crate::Written::Recorded`]) and processed
    /// again. Only prune past the longest time a bus can redeliver a message.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when a batch fails (batches committed before it stay
    /// deleted), [`crate::Error::Closed`] after [`Journal::close`].
    pub async fn prune(&self, older_than: DateTime<Utc>) -> Result<PruneReport> {
        self.prune_with(
            older_than,
            DEFAULT_PRUNE_BATCH,
            std::future::pending(),
            |_| {},
        )
        .await
    }

    /// [`Journal::prune`] with `batch_rows` events per transaction (0 counts as 1),
    /// stopping early once `stop` completes, and calling `on_batch` with each
    /// committed batch's counts (e.g. to count a metric as it goes).
    ///
    /// `stop` is checked before each batch: once it is ready no new batch starts
    /// (the one being written commits) and the report has `complete: false`.
    ///
    /// # Errors
    /// As [`Journal::prune`]; `on_batch` has seen every batch committed before the
    /// error.
    pub async fn prune_with<S, F>(
        &self,
        older_than: DateTime<Utc>,
        batch_rows: usize,
        stop: S,
        mut on_batch: F,
    ) -> Result<PruneReport>
    where
        S: Future<Output = ()>,
        F: FnMut(&PruneReport),
    {
        let batch = batch_rows.max(1);
        let cutoff = ts(&older_than);
        let mut stop = pin!(stop);
        let mut after = Cursor {
            received_at: String::new(),
            seq: i64::MIN,
        };
        let mut total = PruneReport::default();
        loop {
            let stopped =
                std::future::poll_fn(|cx| Poll::Ready(stop.as_mut().poll(cx).is_ready())).await;
            if stopped {
                return Ok(total);
            }
            let slot: Arc<Mutex<Option<BatchOutcome>>> = Arc::default();
            let job_slot = slot.clone();
            let job_cutoff = cutoff.clone();
            let job_after = after.clone();
            self.exec(Box::new(move |tx| {
                let out = prune_batch(tx, &job_cutoff, &job_after, batch)?;
                let events = out.report.events;
                *job_slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(out);
                Ok(events)
            }))
            .await?;
            // The job ran and committed (`exec` answered Ok), so the slot is filled.
            let Some(out) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                return Ok(total);
            };
            let _ = self
                .inner
                .rows
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    Some(n.saturating_sub(out.report.events))
                });
            on_batch(&out.report);
            total.add(&out.report);
            match out.next {
                Some(next) => after = next,
                None => {
                    total.complete = true;
                    return Ok(total);
                }
            }
        }
    }
}
