//! "What changed": the journaled changes of each resource address since a time, grouped
//! by (workspace, address), with the events that changed it and the drift row's status
//! ([`Journal::changes`], `GET /v1/changes`, the MCP tool `recent_changes`).
//!
//! An event counts as a change of an address when it matched the address (table
//! `event_resources`), says what kind of change it made (`change` is set) and is not
//! ignored as a non-change: reasons `read_only`, `failed_call`, `not_a_change` and
//! `duplicate` (a later report of one change) are left out. Changes made by our own
//! applies (`own_change`), by the IaC principals (`iac_principal`) or ignored by policy
//! (`policy`) are changes, and are listed with their verdict and reason.
//!
//! Time: an event is "since `t`" when it was received at or after `t` and happened
//! (its `occurred_at`, else its reception) at or after `t`; the reception bound uses
//! the `received_at` index, the second keeps a late delivery of an old change out.

use chrono::{DateTime, Utc};
use rusqlite::params;
use serde::Serialize;

use driftreactor_event::{Action, Change, MatchKind, Reason, Verdict, Via};

use crate::query::{vocab, vocab_opt};
use crate::writer::ts;
use crate::{DriftStatus, Journal, Result};

/// Most events listed per address by [`Journal::changes`] (newest first); the
/// address's [`AddressChanges::event_count`] counts them all.
pub const MAX_EVENTS_PER_ADDRESS: usize = 50;

/// Filter for [`Journal::changes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeQuery {
    /// Only changes since this instant (see the module documentation).
    pub since: DateTime<Utc>,
    /// Only addresses of this workspace.
    pub workspace: Option<String>,
    /// Most addresses returned, the most recently changed first; 0 means 100; capped
    /// at 1000.
    pub limit: usize,
}

/// One resource address that changed since [`ChangeQuery::since`], with the events
/// that changed it and where its drift stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddressChanges {
    /// Workspace.
    pub workspace: String,
    /// Resource address.
    pub address: String,
    /// The drift row's status ([`DriftStatus`]); `None` when the address has no drift
    /// row (its changes were not drift that asked for an action: our own applies, the
    /// IaC principals, ignored by policy, or `action = "none"`).
    pub status: Option<DriftStatus>,
    /// When the drift row entered `status` (RFC 3339 UTC).
    pub status_at: Option<String>,
    /// Why, for `escalated`, a refused plan or a failed attempt (redacted when it was
    /// recorded).
    pub status_reason: Option<String>,
    /// How many events changed it since [`ChangeQuery::since`] (also those beyond
    /// `events`).
    pub event_count: u64,
    /// The events that changed it, newest first, at most [`MAX_EVENTS_PER_ADDRESS`].
    pub events: Vec<ChangeEvent>,
}

/// One event that changed an address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeEvent {
    /// Journal sequence number (journal order; opaque, with gaps).
    pub seq: i64,
    /// Provider (`aws`, `azure`, `gcp`).
    pub provider: String,
    /// Event id.
    pub event_id: String,
    /// When the change happened per the provider (RFC 3339 UTC), if it says.
    pub occurred_at: Option<String>,
    /// When the event was received (RFC 3339 UTC).
    pub received_at: String,
    /// Service (`ec2.amazonaws.com`).
    pub service: String,
    /// Operation (event name).
    pub operation: String,
    /// The kind of change.
    pub change: Option<Change>,
    /// Who made it (the principal's most specific identity), when known.
    pub principal: Option<String>,
    /// Through what the principal made it (`console`, `cli`, `sdk`, `iac`,
    /// `unknown`); `None` when the journal did not record it.
    pub via: Option<Via>,
    /// How the event matched this address (`primary`, `related`, `parent`).
    #[serde(rename = "match")]
    pub kind: MatchKind,
    /// The event's verdict as journaled.
    pub verdict: Verdict,
    /// The verdict's reason, if any.
    pub reason: Option<Reason>,
    /// The event's action (`revert`, `pull_request`, `notify`, `none`).
    pub action: Action,
    /// The attribute-level diff of the change (`[{"path", "before", "after"}]`),
    /// redacted; `None` when it is not known (not in the event, or not journaled).
    pub changes: Option<serde_json::Value>,
}

/// The reasons of events that are not changes (left out of [`Journal::changes`]), as
/// stored.
pub(crate) const NOT_CHANGES: [Reason; 4] = [
    Reason::ReadOnly,
    Reason::FailedCall,
    Reason::NotAChange,
    Reason::Duplicate,
];

/// The SQL condition (on `events e`) of an event that is a change: `change` set, no
/// reason of [`NOT_CHANGES`]. The same text on both backends.
pub(crate) fn is_change_sql() -> String {
    let names: Vec<String> = NOT_CHANGES
        .iter()
        .map(|r| format!("'{}'", r.as_str()))
        .collect();
    format!(
        "e.change IS NOT NULL AND (e.reason IS NULL OR e.reason NOT IN ({}))",
        names.join(", ")
    )
}

/// The columns [`change_event`] reads, in order, from `events e` joined with
/// `event_resources r`.
pub(crate) const CHANGE_EVENT_COLUMNS: &str = "e.seq, e.provider, e.event_id, e.occurred_at, \
    e.received_at, e.service, e.operation, e.change, e.principal, r.kind, e.verdict, e.reason, \
    e.action";

fn change_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChangeEvent> {
    Ok(ChangeEvent {
        seq: r.get(0)?,
        provider: r.get(1)?,
        event_id: r.get(2)?,
        occurred_at: r.get(3)?,
        received_at: r.get(4)?,
        service: r.get(5)?,
        operation: r.get(6)?,
        change: vocab_opt(r, 7)?,
        principal: r.get(8)?,
        via: None,
        kind: vocab(r, 9)?,
        verdict: vocab(r, 10)?,
        reason: vocab_opt(r, 11)?,
        action: vocab(r, 12)?,
        changes: None,
    })
}

/// The most addresses one answer holds (the API's `limit`): 0 means 100; capped at
/// 1000.
pub(crate) fn address_limit(n: usize) -> i64 {
    match n {
        0 => 100,
        n => i64::try_from(n.min(1000)).unwrap_or(1000),
    }
}

impl Journal {
    /// The addresses changed since `q.since` (of `q.workspace` when given), the most
    /// recently changed first, at most `q.limit`; each with its drift row's status and
    /// its latest [`MAX_EVENTS_PER_ADDRESS`] changing events, newest first. See the
    /// module documentation for what counts as a change.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn changes(&self, q: ChangeQuery) -> Result<Vec<AddressChanges>> {
        self.read("query changes", move |conn| {
            let since = ts(&q.since);
            let filter = format!(
                "e.received_at >= ?1 AND coalesce(e.occurred_at, e.received_at) >= ?1 AND {}",
                is_change_sql()
            );
            let mut st = conn.prepare(&format!(
                "SELECT r.workspace, r.address, count(*), max(r.seq) AS last \
                 FROM event_resources r JOIN events e ON e.seq = r.seq \
                 WHERE {filter} AND (?2 IS NULL OR r.workspace = ?2) \
                 GROUP BY r.workspace, r.address ORDER BY last DESC, r.workspace, r.address \
                 LIMIT ?3"
            ))?;
            let mut out: Vec<AddressChanges> = st
                .query_map(
                    params![since, q.workspace, address_limit(q.limit)],
                    |r| {
                        Ok(AddressChanges {
                            workspace: r.get(0)?,
                            address: r.get(1)?,
                            status: None,
                            status_at: None,
                            status_reason: None,
                            event_count: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                            events: Vec::new(),
                        })
                    },
                )?
                .collect::<rusqlite::Result<_>>()?;
            let mut events = conn.prepare(&format!(
                "SELECT {CHANGE_EVENT_COLUMNS} FROM event_resources r JOIN events e ON e.seq = r.seq \
                 WHERE {filter} AND r.workspace = ?2 AND r.address = ?3 \
                 ORDER BY r.seq DESC LIMIT ?4"
            ))?;
            let mut drift = conn.prepare(
                "SELECT status, status_at, status_reason FROM drift \
                 WHERE workspace = ?1 AND address = ?2",
            )?;
            let per = i64::try_from(MAX_EVENTS_PER_ADDRESS).unwrap_or(50);
            for a in &mut out {
                a.events = events
                    .query_map(params![since, a.workspace, a.address, per], change_event)?
                    .collect::<rusqlite::Result<_>>()?;
                let mut rows = drift.query_map(params![a.workspace, a.address], |r| {
                    Ok((vocab::<DriftStatus>(r, 0)?, r.get(1)?, r.get(2)?))
                })?;
                if let Some((status, at, reason)) = rows.next().transpose()? {
                    a.status = Some(status);
                    a.status_at = at;
                    a.status_reason = reason;
                }
            }
            Ok(out)
        })
        .await
    }
}

/// The PostgreSQL side of [`Journal::changes`]: the same queries, the same rows.
#[cfg(feature = "postgres")]
pub(crate) mod pg {
    use sqlx_core::query::query;
    use sqlx_core::row::Row;
    use sqlx_postgres::{PgPool, PgRow, Postgres};

    use super::{
        AddressChanges, CHANGE_EVENT_COLUMNS, ChangeEvent, ChangeQuery, MAX_EVENTS_PER_ADDRESS,
        address_limit, is_change_sql,
    };
    use crate::writer::ts;
    use crate::{DriftStatus, Error, Result};

    fn err(e: sqlx_core::Error) -> Error {
        Error::Backend {
            op: "query changes",
            source: Box::new(e),
        }
    }

    fn name<T: std::str::FromStr<Err = driftreactor_event::UnknownName>>(
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

    fn required<T: std::str::FromStr<Err = driftreactor_event::UnknownName>>(
        r: &PgRow,
        idx: usize,
    ) -> sqlx_core::Result<T> {
        name(r, idx)?.ok_or_else(|| sqlx_core::Error::ColumnDecode {
            index: idx.to_string(),
            source: "NULL in a NOT NULL column".into(),
        })
    }

    fn change_event(r: &PgRow) -> sqlx_core::Result<ChangeEvent> {
        Ok(ChangeEvent {
            seq: r.try_get(0)?,
            provider: r.try_get(1)?,
            event_id: r.try_get(2)?,
            occurred_at: r.try_get(3)?,
            received_at: r.try_get(4)?,
            service: r.try_get(5)?,
            operation: r.try_get(6)?,
            change: name(r, 7)?,
            principal: r.try_get(8)?,
            via: None,
            kind: required(r, 9)?,
            verdict: required(r, 10)?,
            reason: name(r, 11)?,
            action: required(r, 12)?,
            changes: None,
        })
    }

    /// [`crate::Journal::changes`] on PostgreSQL.
    pub(crate) async fn changes(pool: &PgPool, q: ChangeQuery) -> Result<Vec<AddressChanges>> {
        let since = ts(&q.since);
        let filter = format!(
            "e.received_at >= $1 AND coalesce(e.occurred_at, e.received_at) >= $1 AND {}",
            is_change_sql()
        );
        let rows = query::<Postgres>(&format!(
            "SELECT r.workspace, r.address, count(*), max(r.seq) AS last \
             FROM event_resources r JOIN events e ON e.seq = r.seq \
             WHERE {filter} AND ($2::text IS NULL OR r.workspace = $2) \
             GROUP BY r.workspace, r.address ORDER BY last DESC, r.workspace, r.address \
             LIMIT $3"
        ))
        .bind(&since)
        .bind(&q.workspace)
        .bind(address_limit(q.limit))
        .fetch_all(pool)
        .await
        .map_err(err)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let count: i64 = r.try_get(2).map_err(err)?;
            out.push(AddressChanges {
                workspace: r.try_get(0).map_err(err)?,
                address: r.try_get(1).map_err(err)?,
                status: None,
                status_at: None,
                status_reason: None,
                event_count: u64::try_from(count).unwrap_or(0),
                events: Vec::new(),
            });
        }
        let per = i64::try_from(MAX_EVENTS_PER_ADDRESS).unwrap_or(50);
        let events_sql = format!(
            "SELECT {CHANGE_EVENT_COLUMNS} FROM event_resources r JOIN events e ON e.seq = r.seq \
             WHERE {filter} AND r.workspace = $2 AND r.address = $3 \
             ORDER BY r.seq DESC LIMIT $4"
        );
        for a in &mut out {
            let rows = query::<Postgres>(&events_sql)
                .bind(&since)
                .bind(&a.workspace)
                .bind(&a.address)
                .bind(per)
                .fetch_all(pool)
                .await
                .map_err(err)?;
            a.events = rows
                .iter()
                .map(change_event)
                .collect::<sqlx_core::Result<_>>()
                .map_err(err)?;
            let drift = query::<Postgres>(
                "SELECT status, status_at, status_reason FROM drift \
                 WHERE workspace = $1 AND address = $2",
            )
            .bind(&a.workspace)
            .bind(&a.address)
            .fetch_optional(pool)
            .await
            .map_err(err)?;
            if let Some(d) = drift {
                a.status = Some(required::<DriftStatus>(&d, 0).map_err(err)?);
                a.status_at = d.try_get(1).map_err(err)?;
                a.status_reason = d.try_get(2).map_err(err)?;
            }
        }
        Ok(out)
    }
}
