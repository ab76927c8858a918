//! The drift transition log: every lifecycle transition of a drift row, durable and
//! ordered, for `GET /v1/stream` (Server-Sent Events with `Last-Event-ID` resume).
//!
//! A transition is recorded in the same transaction as the change it records:
//!
//! - a drift event that creates a drift row: [`TransitionKind::Opened`] (the first
//!   journaled drift of the address);
//! - a drift event that moves a row back to `open` from another status:
//!   [`TransitionKind::Reopened`] (a row already `open` records nothing);
//! - [`crate::Journal::set_drift_status`] that changes a row's status:
//!   [`TransitionKind::Status`] with the status entered and the caller's reason (a call
//!   that leaves the status as it is records nothing).
//!
//! Each transition has an id that only grows, in commit order: a reader that has seen
//! every transition up to id `N` and asks for those after `N` never misses one
//! committed later. On SQLite the one writer thread commits in order. On PostgreSQL
//! several replicas commit concurrently, and an identity value taken by a transaction
//! that commits later than another's larger one would be read after it (and missed by
//! a reader that had moved past it); so a transaction takes a transaction-scoped
//! advisory lock ([`PG_TRANSITION_LOCK`]) just before it inserts its transitions, as
//! its last lock, and keeps it until its commit: transitions are numbered and made
//! visible one transaction at a time.
//!
//! Live notification: each journal handle counts its commits that may have recorded a
//! transition ([`crate::JournalStore::transition_wakeups`]); a reader waits on that and
//! then reads the log. A handle sees only its own commits (other replicas' transitions
//! are found by reading the log again, e.g. on a short interval).
//!
//! Retention: transitions older than the prune cutoff (by their `at`) are deleted with
//! the journal's retention ([`crate::Journal::prune`]), a batch at a time.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::DriftStatus;

/// The advisory lock key (PostgreSQL, `pg_advisory_xact_lock`) that orders the
/// transactions recording drift transitions (see the module documentation).
pub const PG_TRANSITION_LOCK: i64 = 0x6472_6966_7473_7472; // "driftstr"

/// What happened to a drift row (the SSE `event:` name of `/v1/stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransitionKind {
    /// The first journaled drift of the address created its row (`opened`); the row
    /// is `open`.
    Opened,
    /// A new drift event moved the row back to `open` from another status
    /// (`reopened`).
    Reopened,
    /// The remediator moved the row to this status (named after it: `open`,
    /// `remediating`, `reverted`, `pull_request_open`, `escalated`, `resolved`).
    Status(DriftStatus),
}

impl TransitionKind {
    /// The name used in the API and the database: `opened`, `reopened`, or the status
    /// entered.
    pub const fn as_str(self) -> &'static str {
        match self {
            TransitionKind::Opened => "opened",
            TransitionKind::Reopened => "reopened",
            TransitionKind::Status(s) => s.as_str(),
        }
    }
}

impl fmt::Display for TransitionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for TransitionKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::str::FromStr for TransitionKind {
    type Err = driftreactor_event::UnknownName;

    /// Reads a name written by [`TransitionKind::as_str`].
    ///
    /// # Errors
    /// [`driftreactor_event::UnknownName`] for any other string.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "opened" => Ok(TransitionKind::Opened),
            "reopened" => Ok(TransitionKind::Reopened),
            other => other
                .parse::<DriftStatus>()
                .map(TransitionKind::Status)
                .map_err(|_| driftreactor_event::UnknownName {
                    what: "drift transition",
                    name: other.to_owned(),
                    expected: "opened reopened open remediating reverted pull_request_open \
                               escalated resolved",
                }),
        }
    }
}

/// One recorded transition of a drift row (a `/v1/stream` event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriftTransition {
    /// Its id: unique, growing in commit order (the SSE `id:`); with gaps.
    pub id: u64,
    /// Workspace.
    pub workspace: String,
    /// Resource address.
    pub address: String,
    /// What happened (the SSE `event:` name).
    pub kind: TransitionKind,
    /// The status the row left; `None` for [`TransitionKind::Opened`].
    pub from: Option<DriftStatus>,
    /// The status the row entered.
    pub status: DriftStatus,
    /// Why, as the remediator reported it (escalation reason, guard refusal, error;
    /// redacted by the caller); `None` for the transitions of drift events.
    pub reason: Option<String>,
    /// The journal sequence number of the row's latest drift event at the time (the
    /// evidence); it may be pruned since.
    pub event_seq: Option<i64>,
    /// When it was committed (RFC 3339 UTC, milliseconds).
    pub at: String,
}

/// Filter for [`crate::JournalStore::transitions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransitionQuery {
    /// Only transitions with an id greater than this (0: from the first).
    pub after: u64,
    /// Only this workspace.
    pub workspace: Option<String>,
    /// Most transitions returned, oldest first; 0 means 100; capped at 1000.
    pub limit: usize,
}

/// A transition to record (before it has an id and a time).
#[derive(Debug, Clone)]
pub(crate) struct NewTransition {
    pub workspace: String,
    pub address: String,
    pub kind: TransitionKind,
    pub from: Option<DriftStatus>,
    pub status: DriftStatus,
    pub reason: Option<String>,
    pub event_seq: Option<i64>,
}

impl NewTransition {
    /// The transition a drift event makes on the row of (workspace, address) that was
    /// in `before` (`None`: no row), if any: it opens or reopens the row.
    pub(crate) fn of_drift_event(
        workspace: &str,
        address: &str,
        before: Option<DriftStatus>,
        seq: i64,
    ) -> Option<Self> {
        let kind = match before {
            None => TransitionKind::Opened,
            Some(DriftStatus::Open) => return None,
            Some(_) => TransitionKind::Reopened,
        };
        Some(Self {
            workspace: workspace.to_owned(),
            address: address.to_owned(),
            kind,
            from: before,
            status: DriftStatus::Open,
            reason: None,
            event_seq: Some(seq),
        })
    }
}

fn limit(n: usize) -> i64 {
    match n {
        0 => 100,
        n => i64::try_from(n.min(1000)).unwrap_or(1000),
    }
}

/// The columns [`sqlite::row`] and [`pg`]'s reader read, in order.
const COLUMNS: &str = "id, workspace, address, kind, from_status, status, reason, event_seq, at";

/// The SQLite side: recording inside the writer's transactions, reading.
pub(crate) mod sqlite {
    use rusqlite::{OptionalExtension, Transaction, params};

    use super::{COLUMNS, DriftTransition, NewTransition, TransitionQuery, limit};
    use crate::query::{vocab, vocab_opt};
    use crate::writer::sqlite as err;
    use crate::{DriftStatus, Journal, Result};

    /// The status of the drift row of (workspace, address), if there is one.
    pub(crate) fn status_of(
        tx: &Transaction<'_>,
        workspace: &str,
        address: &str,
    ) -> Result<Option<DriftStatus>> {
        tx.prepare_cached("SELECT status FROM drift WHERE workspace = ?1 AND address = ?2")
            .and_then(|mut st| {
                st.query_row(params![workspace, address], |r| vocab(r, 0))
                    .optional()
            })
            .map_err(err("read drift status"))
    }

    /// Records `t` at `now` (RFC 3339) in the caller's transaction.
    pub(crate) fn record(tx: &Transaction<'_>, t: &NewTransition, now: &str) -> Result<()> {
        tx.prepare_cached(
            "INSERT INTO drift_transitions (workspace, address, kind, from_status, status, \
             reason, event_seq, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .and_then(|mut st| {
            st.execute(params![
                t.workspace,
                t.address,
                t.kind.as_str(),
                t.from.map(DriftStatus::as_str),
                t.status.as_str(),
                t.reason,
                t.event_seq,
                now
            ])
        })
        .map_err(err("record drift transition"))?;
        Ok(())
    }

    /// Deletes up to `batch` transitions recorded before `cutoff` (RFC 3339).
    pub(crate) fn prune(tx: &Transaction<'_>, cutoff: &str, batch: i64) -> Result<u64> {
        tx.prepare_cached(
            "DELETE FROM drift_transitions WHERE id IN \
             (SELECT id FROM drift_transitions WHERE at < ?1 ORDER BY id LIMIT ?2)",
        )
        .and_then(|mut st| st.execute(params![cutoff, batch]))
        .map(|n| n as u64)
        .map_err(err("prune drift transitions"))
    }

    fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DriftTransition> {
        Ok(DriftTransition {
            id: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
            workspace: r.get(1)?,
            address: r.get(2)?,
            kind: vocab(r, 3)?,
            from: vocab_opt(r, 4)?,
            status: vocab(r, 5)?,
            reason: r.get(6)?,
            event_seq: r.get(7)?,
            at: r.get(8)?,
        })
    }

    impl Journal {
        /// The transitions after `q.after` (of `q.workspace` when given), oldest
        /// first, at most `q.limit`.
        ///
        /// # Errors
        /// [`crate::Error::Sqlite`] when the query fails.
        pub async fn transitions(&self, q: TransitionQuery) -> Result<Vec<DriftTransition>> {
            self.read("query drift transitions", move |conn| {
                let after = i64::try_from(q.after).unwrap_or(i64::MAX);
                let mut st = conn.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM drift_transitions \
                     WHERE id > ?1 AND (?2 IS NULL OR workspace = ?2) ORDER BY id LIMIT ?3"
                ))?;
                st.query_map(params![after, q.workspace, limit(q.limit)], row)?
                    .collect()
            })
            .await
        }

        /// The id of the latest recorded transition; 0 when there is none.
        ///
        /// # Errors
        /// [`crate::Error::Sqlite`] when the query fails.
        pub async fn last_transition_id(&self) -> Result<u64> {
            self.read("query drift transitions", |conn| {
                conn.query_row(
                    "SELECT coalesce(max(id), 0) FROM drift_transitions",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| u64::try_from(n).unwrap_or(0))
            })
            .await
        }
    }
}

/// The PostgreSQL side: recording inside the caller's transaction, reading.
#[cfg(feature = "postgres")]
pub(crate) mod pg {
    use sqlx_core::query::query;
    use sqlx_core::row::Row;
    use sqlx_postgres::{PgPool, PgRow, Postgres};

    use super::{
        COLUMNS, DriftTransition, NewTransition, PG_TRANSITION_LOCK, TransitionQuery, limit,
    };
    use crate::{DriftStatus, Error, Result};

    type Tx = sqlx_core::transaction::Transaction<'static, Postgres>;

    /// Takes the transition lock and records `ts` at `now`, as the caller's last
    /// statements before its commit (see the module documentation).
    pub(crate) async fn record(
        tx: &mut Tx,
        ts: &[NewTransition],
        now: &str,
    ) -> std::result::Result<(), sqlx_core::Error> {
        if ts.is_empty() {
            return Ok(());
        }
        query::<Postgres>("SELECT pg_advisory_xact_lock($1)")
            .bind(PG_TRANSITION_LOCK)
            .execute(&mut **tx)
            .await?;
        for t in ts {
            query::<Postgres>(
                "INSERT INTO drift_transitions (workspace, address, kind, from_status, status, \
                 reason, event_seq, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&t.workspace)
            .bind(&t.address)
            .bind(t.kind.as_str())
            .bind(t.from.map(DriftStatus::as_str))
            .bind(t.status.as_str())
            .bind(&t.reason)
            .bind(t.event_seq)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    fn err(op: &'static str) -> impl Fn(sqlx_core::Error) -> Error {
        move |e| Error::Backend {
            op,
            source: Box::new(e),
        }
    }

    fn parsed<T: std::str::FromStr<Err = driftreactor_event::UnknownName>>(
        r: &PgRow,
        idx: usize,
    ) -> sqlx_core::Result<Option<T>> {
        let s: Option<String> = r.try_get(idx)?;
        s.map(|s| {
            s.parse().map_err(|e| sqlx_core::Error::ColumnDecode {
                index: idx.to_string(),
                source: Box::new(e),
            })
        })
        .transpose()
    }

    fn row(r: &PgRow) -> sqlx_core::Result<DriftTransition> {
        let missing = |idx: usize| sqlx_core::Error::ColumnDecode {
            index: idx.to_string(),
            source: "NULL in a NOT NULL column".into(),
        };
        Ok(DriftTransition {
            id: u64::try_from(r.try_get::<i64, _>(0)?).unwrap_or(0),
            workspace: r.try_get(1)?,
            address: r.try_get(2)?,
            kind: parsed(r, 3)?.ok_or_else(|| missing(3))?,
            from: parsed(r, 4)?,
            status: parsed(r, 5)?.ok_or_else(|| missing(5))?,
            reason: r.try_get(6)?,
            event_seq: r.try_get(7)?,
            at: r.try_get(8)?,
        })
    }

    /// [`crate::Journal::transitions`] on PostgreSQL.
    pub(crate) async fn transitions(
        pool: &PgPool,
        q: TransitionQuery,
    ) -> Result<Vec<DriftTransition>> {
        let op = "query drift transitions";
        let rows = query::<Postgres>(&format!(
            "SELECT {COLUMNS} FROM drift_transitions \
             WHERE id > $1 AND ($2::text IS NULL OR workspace = $2) ORDER BY id LIMIT $3"
        ))
        .bind(i64::try_from(q.after).unwrap_or(i64::MAX))
        .bind(q.workspace)
        .bind(limit(q.limit))
        .fetch_all(pool)
        .await
        .map_err(err(op))?;
        rows.iter()
            .map(row)
            .collect::<sqlx_core::Result<_>>()
            .map_err(err(op))
    }

    /// [`crate::Journal::last_transition_id`] on PostgreSQL.
    pub(crate) async fn last_transition_id(pool: &PgPool) -> Result<u64> {
        query::<Postgres>("SELECT coalesce(max(id), 0)::bigint FROM drift_transitions")
            .fetch_one(pool)
            .await
            .and_then(|r| r.try_get::<i64, _>(0))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(err("query drift transitions"))
    }
}
