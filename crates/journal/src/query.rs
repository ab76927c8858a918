//! Read queries for the HTTP API (`/v1/events`, `/v1/drift`, `/v1/resources/…`,
//! `/v1/remediations`).

use chrono::{DateTime, Utc};
use rusqlite::{Row, params_from_iter, types::Value};
use serde::Serialize;

use driftreactor_event::{Action, Change, Diff, MatchKind, Reason, UnknownName, Verdict};

use crate::writer::ts;
use crate::{DriftQuery, DriftStatus, Journal, MatchRecord, ResourceKey, Result};

/// Reads a vocabulary value (verdict, reason, action, match kind, change) stored by
/// its name in column `idx`; a name this build does not know is a conversion error.
pub(crate) fn vocab<T>(r: &Row<'_>, idx: usize) -> rusqlite::Result<T>
where
    T: std::str::FromStr<Err = UnknownName>,
{
    let name: String = r.get(idx)?;
    name.parse().map_err(|e: UnknownName| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// [`vocab`] of a nullable column.
pub(crate) fn vocab_opt<T>(r: &Row<'_>, idx: usize) -> rusqlite::Result<Option<T>>
where
    T: std::str::FromStr<Err = UnknownName>,
{
    let name: Option<String> = r.get(idx)?;
    name.map(|n| {
        n.parse().map_err(|e: UnknownName| {
            rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
        })
    })
    .transpose()
}

/// Filter for [`Journal::events`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    /// Only this verdict.
    pub verdict: Option<Verdict>,
    /// Only events received at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only this provider (`aws`, `azure`, `gcp`).
    pub provider: Option<String>,
    /// Most rows returned, newest first; 0 means 100; capped at 1000.
    pub limit: usize,
}

/// One recorded event, as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventRow {
    /// Journal sequence number: an opaque, increasing cursor (insertion order). It
    /// has gaps (a duplicate delivery consumes one), so do not count with it.
    pub seq: i64,
    /// Provider.
    pub provider: String,
    /// Event id.
    pub event_id: String,
    /// Delivering source.
    pub source: String,
    /// Bus message id.
    pub message_id: String,
    /// Received (RFC 3339 UTC).
    pub received_at: String,
    /// Occurred (RFC 3339 UTC).
    pub occurred_at: Option<String>,
    /// Committed to the journal (RFC 3339 UTC).
    pub journaled_at: String,
    /// SHA-256 of the payload.
    pub payload_sha256: String,
    /// Service.
    pub service: String,
    /// Operation.
    pub operation: String,
    /// Change kind.
    pub change: Option<Change>,
    /// Principal.
    pub principal: Option<String>,
    /// Canonical resource ids.
    pub resource_ids: Vec<String>,
    /// Verdict.
    pub verdict: Verdict,
    /// Reason.
    pub reason: Option<Reason>,
    /// Action.
    pub action: Action,
    /// Matched resources.
    pub resources: Vec<MatchRecord>,
    /// Dependents.
    pub dependents: Vec<ResourceKey>,
    /// Correlation key.
    pub correlation_key: Option<String>,
    /// Drift only: the attribute-level changes (README, "Attribute-level changes"),
    /// answered as the row's `changes`, `changes_unknown` and `changes_from` fields
    /// (absent on other rows and on rows recorded before the journal stored them).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
}

/// Current drift of one managed resource, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftRow {
    /// Workspace.
    pub workspace: String,
    /// Address.
    pub address: String,
    /// How the latest event matched it.
    #[serde(rename = "match")]
    pub kind: MatchKind,
    /// The policy action.
    pub action: Action,
    /// Earliest drift event time (RFC 3339 UTC).
    pub first_seen: String,
    /// Latest drift event time (RFC 3339 UTC).
    pub last_seen: String,
    /// Number of drift events recorded for it.
    pub events: i64,
    /// Where the drift stands: `open`, `remediating`, `reverted`,
    /// `pull_request_open`, `escalated` or `resolved` ([`DriftStatus`]).
    pub status: DriftStatus,
    /// When it entered `status` (RFC 3339 UTC).
    pub status_at: Option<String>,
    /// Why, for `escalated` (the escalation reason), and for an attempt that was
    /// refused by the guard or failed (the refusal or the error), redacted; else
    /// absent.
    pub status_reason: Option<String>,
    /// Who first found this drift: `event` (a bus event announced it) or `backstop`
    /// (the periodic backstop found it and no event had announced it); a drift found
    /// again after it was reverted or resolved is a new story.
    pub found_by: crate::FoundBy,
    /// The latest drift event (evidence).
    pub last_event: EventRow,
}

/// Filter for [`Journal::remediations`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemediationQuery {
    /// Only this status (`pending`, `done`).
    pub status: Option<String>,
    /// Only events of this provider (`aws`, `azure`, `gcp`).
    pub provider: Option<String>,
    /// Only events that matched a resource of this workspace.
    pub workspace: Option<String>,
    /// Most rows returned, newest event first; 0 means 100; capped at 1000.
    pub limit: usize,
}

/// The remediation of one journaled event, as the API returns it: what the event was,
/// what it matched, the work items it fed and whether they finished. Never the request
/// stored to resubmit it (it holds the event's request parameters).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemediationRow {
    /// Journal sequence number of the event (journal order).
    pub seq: i64,
    /// Provider (`aws`, `azure`, `gcp`).
    pub provider: String,
    /// Event id.
    pub event_id: String,
    /// `pending` (some work item it fed has not reached a terminal state, or it was not
    /// submitted yet) or `done`.
    pub status: String,
    /// The event's action (`revert`, `pull_request`, `notify`).
    pub action: Action,
    /// The event's verdict (`drift`, `unmanaged`).
    pub verdict: Verdict,
    /// The service that handled the call.
    pub service: String,
    /// The operation.
    pub operation: String,
    /// The resources the event matched (`workspace`, `address`, `match`, `action`);
    /// empty for an unmanaged change.
    pub resources: Vec<MatchRecord>,
    /// The work items (workspace, address) the remediator was given for it, each with
    /// whether it finished; empty until it was submitted.
    pub targets: Vec<RemediationTarget>,
    /// When the change happened (RFC 3339 UTC), if the event says.
    pub occurred_at: Option<String>,
    /// When the event was received (RFC 3339 UTC).
    pub received_at: String,
    /// When the event and its `pending` remediation were committed (RFC 3339 UTC).
    pub journaled_at: String,
    /// When the status last changed (RFC 3339 UTC; the journal time while `pending`).
    pub updated_at: String,
}

/// One work item a remediation fed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemediationTarget {
    /// Workspace.
    pub workspace: String,
    /// Resource address.
    pub address: String,
    /// It reached a terminal state (reverted, resolved, notified, PR opened or
    /// updated, escalated) with this event among its evidence.
    pub done: bool,
    /// The outcome of the latest attempt with this event among its evidence:
    /// `reverted`, `resolved`, `notified`, `pull_request`, `escalated`, `refused`
    /// (the guard refused the plan) or `failed` (retried, or escalated when
    /// permanent); absent before the first attempt finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// Why, for `escalated`, `refused` and `failed` (redacted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

pub(crate) const EVENT_COLUMNS: &str = "e.seq, e.provider, e.event_id, e.source, e.message_id, e.received_at, \
    e.occurred_at, e.journaled_at, e.payload_sha256, e.service, e.operation, e.change, e.principal, \
    e.resource_ids, e.verdict, e.reason, e.action, e.matches, e.dependents, e.correlation_key, \
    e.changes";

fn parse_json<T: serde::de::DeserializeOwned + Default>(s: String) -> T {
    serde_json::from_str(&s).unwrap_or_default()
}

/// Reads an [`EventRow`] from columns starting at `at` (in `EVENT_COLUMNS` order).
fn event_row(r: &Row<'_>, at: usize) -> rusqlite::Result<EventRow> {
    Ok(EventRow {
        seq: r.get(at)?,
        provider: r.get(at + 1)?,
        event_id: r.get(at + 2)?,
        source: r.get(at + 3)?,
        message_id: r.get(at + 4)?,
        received_at: r.get(at + 5)?,
        occurred_at: r.get(at + 6)?,
        journaled_at: r.get(at + 7)?,
        payload_sha256: r.get(at + 8)?,
        service: r.get(at + 9)?,
        operation: r.get(at + 10)?,
        change: vocab_opt(r, at + 11)?,
        principal: r.get(at + 12)?,
        resource_ids: parse_json(r.get(at + 13)?),
        verdict: vocab(r, at + 14)?,
        reason: vocab_opt(r, at + 15)?,
        action: vocab(r, at + 16)?,
        resources: parse_json(r.get(at + 17)?),
        dependents: parse_json(r.get(at + 18)?),
        correlation_key: r.get(at + 19)?,
        diff: r
            .get::<_, Option<String>>(at + 20)?
            .and_then(|s| serde_json::from_str(&s).ok()),
    })
}

/// The drift table's columns [`drift_row`] reads, before [`EVENT_COLUMNS`].
pub(crate) const DRIFT_COLUMNS: &str = "d.workspace, d.address, d.kind, d.action, d.first_seen, \
    d.last_seen, d.events, d.status, d.status_at, d.status_reason, d.found_by";

pub(crate) fn drift_row(r: &Row<'_>) -> rusqlite::Result<DriftRow> {
    Ok(DriftRow {
        workspace: r.get(0)?,
        address: r.get(1)?,
        kind: vocab(r, 2)?,
        action: vocab(r, 3)?,
        first_seen: r.get(4)?,
        last_seen: r.get(5)?,
        events: r.get(6)?,
        status: vocab(r, 7)?,
        status_at: r.get(8)?,
        status_reason: r.get(9)?,
        found_by: crate::FoundBy::of_column(r.get::<_, Option<String>>(10)?.as_deref()),
        last_event: event_row(r, 11)?,
    })
}

fn limit(n: usize) -> i64 {
    match n {
        0 => 100,
        n => i64::try_from(n.min(1000)).unwrap_or(1000),
    }
}

impl Journal {
    /// Recorded events matching `q`, newest first.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn events(&self, q: EventQuery) -> Result<Vec<EventRow>> {
        self.read("query events", move |conn| {
            let mut sql = format!("SELECT {EVENT_COLUMNS} FROM events e WHERE 1 = 1");
            let mut args: Vec<Value> = Vec::new();
            if let Some(v) = q.verdict {
                sql.push_str(" AND e.verdict = ?");
                args.push(Value::Text(v.as_str().to_owned()));
            }
            if let Some(p) = q.provider {
                sql.push_str(" AND e.provider = ?");
                args.push(Value::Text(p));
            }
            if let Some(t) = q.since {
                sql.push_str(" AND e.received_at >= ?");
                args.push(Value::Text(ts(&t)));
            }
            sql.push_str(" ORDER BY e.seq DESC LIMIT ?");
            args.push(Value::Integer(limit(q.limit)));
            let mut st = conn.prepare(&sql)?;
            let rows = st.query_map(params_from_iter(args), |r| event_row(r, 0))?;
            rows.collect()
        })
        .await
    }

    /// Current drift (every status but `reverted` and `resolved`), per (workspace,
    /// address), each with its latest drift event; only `workspace` when given.
    /// Ordered by workspace, address. [`Journal::drift_with`] filters by status.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn drift(&self, workspace: Option<String>) -> Result<Vec<DriftRow>> {
        self.drift_with(DriftQuery {
            workspace,
            ..DriftQuery::default()
        })
        .await
    }

    /// The recorded events that matched (workspace, address), newest first, at most
    /// `limit` (0 means 100, capped at 1000).
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn resource_events(
        &self,
        workspace: String,
        address: String,
        limit_rows: usize,
    ) -> Result<Vec<EventRow>> {
        self.read("query resource events", move |conn| {
            let mut st = conn.prepare(&format!(
                "SELECT {EVENT_COLUMNS} FROM event_resources r JOIN events e ON e.seq = r.seq \
                 WHERE r.workspace = ?1 AND r.address = ?2 ORDER BY r.seq DESC LIMIT ?3"
            ))?;
            let rows = st.query_map(
                rusqlite::params![workspace, address, limit(limit_rows)],
                |r| event_row(r, 0),
            )?;
            rows.collect()
        })
        .await
    }

    /// Journaled events with a remediation (an action, remediation on) matching `q`,
    /// newest first, each with its status and work items.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn remediations(&self, q: RemediationQuery) -> Result<Vec<RemediationRow>> {
        self.read("query remediations", move |conn| {
            let mut st = conn.prepare_cached(
                "SELECT r.seq, e.provider, e.event_id, r.status, e.action, e.verdict, e.service, \
                 e.operation, e.matches, e.occurred_at, e.received_at, e.journaled_at, r.updated_at \
                 FROM remediations r JOIN events e ON e.seq = r.seq \
                 WHERE (?1 IS NULL OR r.status = ?1) AND (?2 IS NULL OR e.provider = ?2) \
                 AND (?3 IS NULL OR EXISTS (SELECT 1 FROM event_resources x \
                      WHERE x.seq = r.seq AND x.workspace = ?3)) \
                 ORDER BY r.seq DESC LIMIT ?4",
            )?;
            let mut rows = st
                .query_map(
                    rusqlite::params![q.status, q.provider, q.workspace, limit(q.limit)],
                    |r| {
                        Ok(RemediationRow {
                            seq: r.get(0)?,
                            provider: r.get(1)?,
                            event_id: r.get(2)?,
                            status: r.get(3)?,
                            action: vocab(r, 4)?,
                            verdict: vocab(r, 5)?,
                            service: r.get(6)?,
                            operation: r.get(7)?,
                            resources: parse_json(r.get(8)?),
                            targets: Vec::new(),
                            occurred_at: r.get(9)?,
                            received_at: r.get(10)?,
                            journaled_at: r.get(11)?,
                            updated_at: r.get(12)?,
                        })
                    },
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut targets = conn.prepare_cached(
                "SELECT workspace, address, done, outcome, reason FROM remediation_targets WHERE seq = ?1 \
                 ORDER BY workspace, address",
            )?;
            for row in &mut rows {
                row.targets = targets
                    .query_map([row.seq], |r| {
                        Ok(RemediationTarget {
                            workspace: r.get(0)?,
                            address: r.get(1)?,
                            done: r.get::<_, i64>(2)? != 0,
                            outcome: r.get(3)?,
                            reason: r.get(4)?,
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
            }
            Ok(rows)
        })
        .await
    }

    /// The current drift row of (workspace, address), if any.
    ///
    /// # Errors
    /// [`crate::Error::Sqlite`] when the query fails.
    pub async fn drift_of(&self, workspace: String, address: String) -> Result<Option<DriftRow>> {
        self.read("query drift", move |conn| {
            let mut st = conn.prepare(&format!(
                "SELECT {DRIFT_COLUMNS}, {EVENT_COLUMNS} FROM drift d JOIN events e ON e.seq = d.last_seq \
                 WHERE d.workspace = ?1 AND d.address = ?2"
            ))?;
            let mut rows = st.query_map(rusqlite::params![workspace, address], drift_row)?;
            rows.next().transpose()
        })
        .await
    }
}
