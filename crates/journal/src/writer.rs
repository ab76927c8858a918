//! The writer thread: group commit, answer after COMMIT.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::mpsc;

use driftreactor_event::{Action, Change, Reason, Verdict};

use crate::{AppendRequest, Decided, Entry, Error, Job, JournalConfig, Request, Result, Written};

/// Timestamps are stored as RFC 3339 UTC with milliseconds and a `Z`, so text order
/// is time order.
pub(crate) fn ts(t: &chrono::DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(crate) fn spawn(
    conn: Connection,
    rx: mpsc::Receiver<Request>,
    cfg: &JournalConfig,
    rows: Arc<AtomicU64>,
) -> std::io::Result<()> {
    let max_batch = cfg.max_batch.max(1);
    let delay = Duration::from_millis(cfg.max_batch_delay_ms);
    std::thread::Builder::new()
        .name("journal-writer".into())
        .spawn(move || run(conn, rx, max_batch, delay, &rows))
        .map(|_| ())
}

fn run(
    mut conn: Connection,
    mut rx: mpsc::Receiver<Request>,
    max_batch: usize,
    delay: Duration,
    rows: &AtomicU64,
) {
    let mut close: Option<tokio::sync::oneshot::Sender<()>> = None;
    while close.is_none() {
        let mut job: Option<(Job, tokio::sync::oneshot::Sender<Result<u64>>)> = None;
        let Some(first) = rx.blocking_recv() else {
            break;
        };
        let mut batch: Vec<AppendRequest> = Vec::new();
        let mut n = 0;
        let deadline = Instant::now() + delay;
        let mut next = Some(first);
        loop {
            match next.take() {
                Some(Request::Append(req)) => {
                    n += req.entries.len();
                    batch.push(req);
                }
                Some(Request::Close(tx)) => {
                    close = Some(tx);
                    break;
                }
                Some(Request::Exec(f, answer)) => {
                    // Runs after the appends gathered so far commit (queue order).
                    job = Some((f, answer));
                    break;
                }
                None => {}
            }
            if n >= max_batch {
                break;
            }
            match rx.try_recv() {
                Ok(r) => next = Some(r),
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            commit_appends(&mut conn, batch, n, rows);
        }
        if let Some((f, answer)) = job {
            let result = conn.transaction().map_err(sqlite("begin")).and_then(|tx| {
                let v = f(&tx)?;
                tx.commit().map_err(sqlite("commit"))?;
                Ok(v)
            });
            let _ = answer.send(result);
        }
    }
    rx.close();
    // Requests queued behind a Close are refused (their senders see Closed).
    while let Ok(r) = rx.try_recv() {
        if let Request::Close(tx) = r {
            let _ = tx.send(());
        }
    }
    if let Some(tx) = close {
        let _ = tx.send(());
    }
}

fn commit_appends(conn: &mut Connection, batch: Vec<AppendRequest>, n: usize, rows: &AtomicU64) {
    match commit(conn, &batch) {
        Ok(results) => {
            let added = results
                .iter()
                .flatten()
                .filter(|w| matches!(w, Written::Recorded { .. }))
                .count();
            rows.fetch_add(added as u64, Ordering::Relaxed);
            for (req, res) in batch.into_iter().zip(results) {
                let _ = req.answer.send(Ok(res));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, entries = n, "Journal commit failed; the batch is not acknowledged.");
            let msg = e.to_string();
            for req in batch {
                let _ = req.answer.send(Err(Error::Batch(msg.clone())));
            }
        }
    }
}

pub(crate) fn sqlite(op: &'static str) -> impl Fn(rusqlite::Error) -> Error {
    move |source| Error::Sqlite { op, source }
}

fn commit(conn: &mut Connection, batch: &[AppendRequest]) -> Result<Vec<Vec<Written>>> {
    let tx = conn.transaction().map_err(sqlite("begin"))?;
    let mut out = Vec::with_capacity(batch.len());
    let now = ts(&Utc::now());
    for req in batch {
        let mut written = Vec::with_capacity(req.entries.len());
        for e in &req.entries {
            written.push(insert(&tx, e, &now)?);
        }
        out.push(written);
    }
    tx.commit().map_err(sqlite("commit"))?;
    Ok(out)
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

fn insert(tx: &rusqlite::Transaction<'_>, e: &Entry, now: &str) -> Result<Written> {
    let mut decided = Decided {
        verdict: e.verdict,
        reason: e.reason,
        action: e.action,
    };
    let mut as_given = true;
    if let (Some(key), Some(repeated)) = (&e.correlation_key, e.repeated) {
        let seen: Option<i64> = tx
            .query_row(
                "SELECT seq FROM events WHERE provider = ?1 AND correlation_key = ?2 \
                 AND event_id <> ?3 LIMIT 1",
                params![e.provider.as_str(), key, e.id],
                |r| r.get(0),
            )
            .optional()
            .map_err(sqlite("correlation lookup"))?;
        if seen.is_some() {
            decided = repeated;
            as_given = false;
        }
    }
    let changed = tx
        .prepare_cached(
            "INSERT INTO events (provider, event_id, source, message_id, received_at, \
             occurred_at, journaled_at, payload_sha256, service, operation, change, principal, \
             resource_ids, verdict, reason, action, matches, dependents, correlation_key) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19) \
             ON CONFLICT (provider, event_id) DO NOTHING",
        )
        .and_then(|mut st| {
            st.execute(params![
                e.provider.as_str(),
                e.id,
                e.source,
                e.message_id,
                ts(&e.received_at),
                e.occurred_at.as_ref().map(ts),
                now,
                e.payload_sha256,
                e.service,
                e.operation,
                e.change.map(Change::as_str),
                e.principal,
                json(&e.resource_ids),
                decided.verdict.as_str(),
                decided.reason.map(Reason::as_str),
                decided.action.as_str(),
                json(&e.matches),
                json(&e.dependents),
                e.correlation_key,
            ])
        })
        .map_err(sqlite("insert event"))?;
    if changed == 0 {
        return Ok(Written::Duplicate);
    }
    let seq = tx.last_insert_rowid();
    if let Some(request) = &e.remediation
        && as_given
    {
        tx.prepare_cached(
            "INSERT INTO remediations (seq, status, request, updated_at) VALUES (?1, 'pending', ?2, ?3)",
        )
        .and_then(|mut st| st.execute(params![seq, request, now]))
        .map_err(sqlite("insert remediation"))?;
    }
    let seen_at = ts(&e.occurred_at.unwrap_or(e.received_at));
    for m in &e.matches {
        tx.prepare_cached(
            "INSERT OR IGNORE INTO event_resources (workspace, address, seq, kind) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut st| st.execute(params![m.workspace, m.address, seq, m.kind.as_str()]))
        .map_err(sqlite("insert event resource"))?;
        // The drift table holds each resource whose drift asks for an action. A new
        // drift event (re)opens its row: whatever the remediator did before, the
        // resource drifted since (see `DriftStatus`).
        if decided.verdict == Verdict::Drift && m.action != Action::None {
            let before = crate::transitions::sqlite::status_of(tx, &m.workspace, &m.address)?;
            tx.prepare_cached(
                "INSERT INTO drift (workspace, address, kind, action, first_seen, last_seen, events, last_seq, \
                   status, status_at, status_reason, found_by) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, 1, ?6, 'open', ?7, NULL, ?8) \
                 ON CONFLICT (workspace, address) DO UPDATE SET \
                   kind = excluded.kind, action = excluded.action, \
                   found_by = CASE WHEN drift.status IN ('reverted', 'resolved') \
                     THEN excluded.found_by ELSE drift.found_by END, \
                   first_seen = min(first_seen, excluded.first_seen), \
                   last_seen = max(last_seen, excluded.last_seen), \
                   events = events + 1, last_seq = excluded.last_seq, \
                   status = 'open', status_at = excluded.status_at, status_reason = NULL",
            )
            .and_then(|mut st| {
                st.execute(params![
                    m.workspace,
                    m.address,
                    m.kind.as_str(),
                    m.action.as_str(),
                    seen_at,
                    seq,
                    now,
                    crate::FoundBy::of_source(&e.source).as_str()
                ])
            })
            .map_err(sqlite("upsert drift"))?;
            if let Some(t) = crate::transitions::NewTransition::of_drift_event(
                &m.workspace,
                &m.address,
                before,
                seq,
            ) {
                crate::transitions::sqlite::record(tx, &t, now)?;
            }
        }
    }
    Ok(Written::Recorded(decided))
}
